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

from intentvcs.core.boundaries import request_starts
from intentvcs.core.dataio import Example
from intentvcs.core.decision import Decision
from intentvcs.core.entities import Word, decode_batch, entity_types, whole_words, words
from intentvcs.core.length_buckets import length_buckets
from intentvcs.core.outputs import BOUNDARY_OUTPUT, GRAPH_OUTPUTS, TAG_OUTPUT, GraphOutputs, tuple_array
from intentvcs.core.references import read_references
from intentvcs.core.spelling import Spelling, infer_normalised
from intentvcs.training.batching import collate, encode
from intentvcs.training.checkpoint import checkpoint_tags, read_checkpoint_meta, read_checkpoint_spelling
from intentvcs.training.model import ENCODER_DIR, IntentModel, load_tokenizer


@torch.inference_mode()
def infer(model: IntentModel, tokenizer, texts: Sequence[str], max_length: int, batch_size: int = 64,
          progress: bool = False, tags: Sequence[str] = ()) -> GraphOutputs:
    """``logits [N, L]`` and the final and middle mean-pooled embeddings ``[N, H]`` (float32); for a
    model with an entity head (``tags``: its tag vocabulary), each text's decoded entities; for one with a
    boundary head, each text's request starts."""
    tagging = model.tagger is not None and bool(tags)
    bounding = model.boundary is not None
    encoded = encode(tokenizer, texts, max_length,
                     tag_index={tag: i for i, tag in enumerate(tags)} if tagging else None, need_words=bounding)
    hidden = model.head.in_features
    arrays = (np.zeros((len(texts), model.head.out_features), dtype=np.float32),
              np.zeros((len(texts), hidden), dtype=np.float32), np.zeros((len(texts), hidden), dtype=np.float32))
    found: list[tuple] = [()] * len(texts)
    starts: list[tuple] = [()] * len(texts)
    for idx, result in _forward(model, tokenizer, encoded, batch_size, progress):
        for array, name in zip(arrays, GRAPH_OUTPUTS):
            array[idx] = result[name].float().numpy()
        chunk_words = [encoded.words[i] for i in idx] if tagging or bounding else None
        if tagging:
            for i, entities in zip(idx, decode_batch(result[TAG_OUTPUT].float().numpy(), chunk_words, tags)):
                found[i] = entities
        if bounding:
            for i, begins in zip(idx, request_starts(result[BOUNDARY_OUTPUT].float().numpy(), chunk_words)):
                starts[i] = begins
    if tagging:
        found = _on_whole_words(tokenizer, texts, found, encoded.input_ids, max_length)
    return GraphOutputs(*arrays, tuple_array(found) if tagging else None, tuple_array(starts) if bounding else None)


def _on_whole_words(tokenizer, texts: Sequence[str], found: list[tuple], input_ids: Sequence[Sequence[int]],
                    max_length: int) -> list[tuple]:
    """Each text's entities over its whole words as sent (``intentvcs.core.entities.whole_words``), as the
    engine answers them (``intentvcs.service.engine.on_whole_words``): a text ``max_length`` cut (its ids
    fill it) is read again untruncated for where its words end."""
    cut = [i for i, ids in enumerate(input_ids) if found[i] and len(ids) >= max_length]
    untruncated = {}
    if cut:
        batch = tokenizer([texts[i] for i in cut], truncation=False, add_special_tokens=True,
                          return_offsets_mapping=True)
        untruncated = {i: words(batch.word_ids(k), batch["offset_mapping"][k]) for k, i in enumerate(cut)}
    return [whole_words(entities, texts[i], untruncated.get(i, ())) if entities else entities
            for i, entities in enumerate(found)]


def infer_as_served(model: IntentModel, tokenizer, spelling: Spelling | None, texts: Sequence[str], max_length: int,
                    batch_size: int = 64, progress: bool = False, tags: Sequence[str] = ()) -> GraphOutputs:
    """``infer`` on ``texts`` as the served engine reads them: rewritten by the model's ``spelling``
    normaliser (None: as sent), names it would bend read as sent (``infer_normalised``)."""
    return infer_normalised(spelling, texts, lambda read: infer(
        model, tokenizer, read, max_length, batch_size, progress, tags), tags=bool(tags))[0]


@torch.inference_mode()
def tag_scores(model: IntentModel, tokenizer, texts: Sequence[str], max_length: int, tags: Sequence[str],
               batch_size: int = 64) -> list[tuple[np.ndarray, list[Word]]]:
    """Per text, the entity head's undecoded tag logits ``[T, K]`` and the text's words (to compare decodings)."""
    encoded = encode(tokenizer, texts, max_length, tag_index={tag: i for i, tag in enumerate(tags)})
    logits: list = [None] * len(texts)
    for idx, result in _forward(model, tokenizer, encoded, batch_size):
        for row, i in enumerate(idx):
            # Cut to the text's own tokens: past them lie its batch's padding positions.
            logits[i] = result[TAG_OUTPUT][row, : len(encoded.input_ids[i])].float().numpy()
    return list(zip(logits, encoded.words))


def _forward(model: IntentModel, tokenizer, encoded, batch_size: int, progress: bool = False):
    """``(row indices, model outputs by name, on the CPU)`` per length-bucketed batch of ``encoded``, run on
    the model's device, the model in eval mode meanwhile (its training mode restored after)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    batches = list(length_buckets([len(x) for x in encoded.input_ids], batch_size))
    if progress:
        from tqdm.auto import tqdm

        batches = tqdm(batches, desc="infer", unit="batch", leave=False, disable=None)  # quiet off a terminal
    try:
        for idx in batches:
            batch = collate(encoded, idx, tokenizer.pad_token_id, device)
            outputs = model.named_outputs(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
            yield idx, {name: tensor.cpu() for name, tensor in outputs.items()}
    finally:
        model.train(was_training)


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
        self.tags = checkpoint_tags(self.meta)
        self.batch_size = batch_size
        self.progress = progress

    @property
    def labels(self) -> list[str]:
        return list(self.meta["labels"])

    @property
    def entity_types(self) -> list[str]:
        return entity_types(self.tags)

    @property
    def info(self) -> dict[str, Any]:
        """What is loaded, in the shape of the engine's ``info`` where the two share a field."""
        return {"checkpoint": str(self.directory), "backbone": self.meta["backbone"],
                "data_fingerprint": self.meta["data_fingerprint"], "runtime": "torch",
                "max_length": self.max_length, "labels": len(self.labels), "oos_rule": self.decision.oos.name,
                "spelling_words": len(self.spelling) if self.spelling is not None else None,
                "entity_types": len(self.entity_types)}

    def reference_rows(self) -> list[Example] | None:
        """The checkpoint's sample of the training rows, for the audit; None when it has none."""
        return read_references(self.directory)

    def infer(self, texts: Sequence[str]) -> GraphOutputs:
        return infer_as_served(self.model, self.tokenizer, self.spelling, texts, self.max_length, self.batch_size,
                               self.progress, self.tags)
