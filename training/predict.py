"""PyTorch inference: raw ``GraphOutputs`` (logits, pooled, pooled_mid) for a list of texts.

Evaluation applies ``intentvcs.core.decision.Decision`` to these arrays, exactly as
the ONNX engine does after its own inference, so both paths share one decision.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from intentvcs.core.outputs import GraphOutputs
from intentvcs.training.batching import collate, encode, inference_batches
from intentvcs.training.checkpoint import read_checkpoint_spelling
from intentvcs.training.model import ENCODER_DIR, IntentModel, load_tokenizer


@torch.inference_mode()
def infer(model: IntentModel, tokenizer, texts: Sequence[str], max_length: int, batch_size: int = 64,
          progress: bool = False) -> GraphOutputs:
    """``logits [N, L]`` and the final and middle mean-pooled embeddings ``[N, H]`` (float32)."""
    was_training = model.training
    model.eval()
    encoded = encode(tokenizer, texts, max_length)
    lengths = [len(x) for x in encoded.input_ids]
    hidden = model.head.in_features
    outputs = GraphOutputs(np.zeros((len(texts), model.head.out_features), dtype=np.float32),
                           np.zeros((len(texts), hidden), dtype=np.float32),
                           np.zeros((len(texts), hidden), dtype=np.float32))
    batches = list(inference_batches(lengths, batch_size))
    if progress:
        from tqdm.auto import tqdm

        batches = tqdm(batches, desc="infer", unit="batch", leave=False)
    for idx in batches:
        batch = collate(encoded, idx, tokenizer.pad_token_id)
        for array, tensor in zip(outputs, model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])):
            array[idx] = tensor.float().numpy()
    model.train(was_training)
    return outputs


class TorchPredictor:
    """Loads a checkpoint directory; ``infer(texts)`` mirrors the ONNX engine's,
    the checkpoint's spelling normaliser included (``spelling=False`` skips it)."""

    def __init__(self, checkpoint_dir: str | os.PathLike, max_length: int, batch_size: int = 64,
                 spelling: bool = True):
        self.model = IntentModel.from_checkpoint(checkpoint_dir)
        self.tokenizer = load_tokenizer(Path(checkpoint_dir) / ENCODER_DIR)
        self.spelling = read_checkpoint_spelling(checkpoint_dir) if spelling else None
        self.max_length = max_length
        self.batch_size = batch_size

    def infer(self, texts: Sequence[str], progress: bool = False) -> GraphOutputs:
        if self.spelling is not None:
            texts = self.spelling.normalise_all(texts)
        return infer(self.model, self.tokenizer, texts, self.max_length, self.batch_size, progress)
