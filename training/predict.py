"""PyTorch inference: raw ``(logits, pooled)`` arrays for a list of texts.

Evaluation applies ``intentvcs.decision.Decision`` to these arrays, exactly as
the ONNX engine does after its own inference, so both paths share one decision.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from training.batching import collate, encode, inference_batches
from training.model import ENCODER_DIR, IntentModel, load_tokenizer


@torch.inference_mode()
def infer(model: IntentModel, tokenizer, texts: Sequence[str], max_length: int, batch_size: int = 64,
          progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Return ``logits [N, L]`` and mean-pooled embeddings ``[N, H]`` (float32)."""
    was_training = model.training
    model.eval()
    encoded = encode(tokenizer, texts, max_length)
    lengths = [len(x) for x in encoded.input_ids]
    n_labels = model.head.out_features
    logits = np.zeros((len(texts), n_labels), dtype=np.float32)
    pooled = np.zeros((len(texts), model.head.in_features), dtype=np.float32)
    batches = list(inference_batches(lengths, batch_size))
    if progress:
        from tqdm.auto import tqdm

        batches = tqdm(batches, desc="infer", unit="batch", leave=False)
    for idx in batches:
        batch = collate(encoded, idx, tokenizer.pad_token_id)
        out_logits, out_pooled = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        logits[idx] = out_logits.float().numpy()
        pooled[idx] = out_pooled.float().numpy()
    model.train(was_training)
    return logits, pooled


class TorchPredictor:
    """Loads a checkpoint directory; ``infer(texts)`` mirrors the ONNX engine's."""

    def __init__(self, checkpoint_dir: str | os.PathLike, max_length: int, batch_size: int = 64):
        self.model = IntentModel.from_checkpoint(checkpoint_dir)
        self.tokenizer = load_tokenizer(Path(checkpoint_dir) / ENCODER_DIR)
        self.max_length = max_length
        self.batch_size = batch_size

    def infer(self, texts: Sequence[str], progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
        return infer(self.model, self.tokenizer, texts, self.max_length, self.batch_size, progress)
