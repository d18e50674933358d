"""PyTorch inference: raw ``GraphOutputs`` (logits, pooled, pooled_mid) for a list of texts.

Evaluation applies ``intentvcs.core.decision.Decision`` to these arrays, exactly as
the ONNX engine does after its own inference, so both paths share one decision.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from intentvcs.core.decision import Decision
from intentvcs.core.outputs import GraphOutputs
from intentvcs.training.batching import collate, encode, inference_batches
from intentvcs.training.checkpoint import read_checkpoint_meta, read_checkpoint_spelling
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

        batches = tqdm(batches, desc="infer", unit="batch", leave=False, disable=None)  # quiet off a terminal
    for idx in batches:
        batch = collate(encoded, idx, tokenizer.pad_token_id)
        for array, tensor in zip(outputs, model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])):
            array[idx] = tensor.float().numpy()
    model.train(was_training)
    return outputs


class TorchPredictor:
    """A checkpoint in PyTorch, as an ``intentvcs.core.predictor.Predictor``.

    ``infer(texts)`` mirrors the ONNX engine's, the checkpoint's spelling
    normaliser included (``spelling=False`` skips it); ``labels``, ``decision``
    and ``max_length`` come from ``checkpoint.json``. ``progress`` shows a bar
    over the batches of each ``infer`` call (PyTorch on a CPU is slow enough to
    want one). Raises what ``read_checkpoint_meta`` raises for a missing or
    incompatible checkpoint.
    """

    def __init__(self, checkpoint_dir: str | os.PathLike, batch_size: int = 64, spelling: bool = True,
                 progress: bool = False):
        self.directory = Path(checkpoint_dir)
        self.meta = read_checkpoint_meta(checkpoint_dir)
        self.decision = Decision.from_dict(self.meta["decision"])
        self.model = IntentModel.from_checkpoint(checkpoint_dir)
        self.tokenizer = load_tokenizer(self.directory / ENCODER_DIR)
        self.spelling = read_checkpoint_spelling(checkpoint_dir) if spelling else None
        self.max_length = self.meta["max_length"]
        self.batch_size = batch_size
        self.progress = progress

    @property
    def labels(self) -> list[str]:
        return list(self.meta["labels"])

    @property
    def info(self) -> dict[str, Any]:
        """What is loaded, in the shape of the engine's ``info`` where the two share a field."""
        return {"checkpoint": str(self.directory), "backbone": self.meta["backbone"],
                "data_fingerprint": self.meta["data_fingerprint"], "runtime": "torch",
                "max_length": self.max_length, "labels": len(self.labels), "oos_rule": self.decision.oos.name,
                "spelling_words": len(self.spelling) if self.spelling is not None else None}

    def infer(self, texts: Sequence[str]) -> GraphOutputs:
        if self.spelling is not None:
            texts = self.spelling.normalise_all(texts)
        return infer(self.model, self.tokenizer, texts, self.max_length, self.batch_size, self.progress)
