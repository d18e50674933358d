"""Tokenise once, then serve length-bucketed, dynamically padded batches.

Sorting by length inside shuffled pools keeps padding (wasted FLOPs) low
while the order of batches stays random for training.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from intentvcs.core.boundaries import boundary_targets
from intentvcs.core.dataio import Span
from intentvcs.core.entities import IGNORE, Word, token_targets, words


@dataclass
class Encoded:
    """Token ids per text (no padding) plus optional targets.

    ``words``: each text's words (``intentvcs.core.entities.words``), where an
    entity head's tags are read. ``tag_targets``: per token, the gold tag index
    on each word's first piece, else ``IGNORE``. ``boundary_targets``: per
    token, whether the word it begins starts a further request
    (``intentvcs.core.boundaries``). ``sources``: for augmented
    data, the row index of each row's clean source (-1 for a clean row), so a
    batch can hold a row and its perturbed copies.
    """

    input_ids: list[list[int]]
    targets: np.ndarray | None = None  # [N, L] float32
    sources: list[int] | None = None
    words: list[list[Word]] | None = None
    tag_targets: list[list[int]] | None = None
    boundary_targets: list[list[int]] | None = None

    def __len__(self) -> int:
        return len(self.input_ids)


def encode(tokenizer, texts: Sequence[str], max_length: int, targets: np.ndarray | None = None,
           spans: Sequence[Sequence[Span] | None] | None = None, tag_index: dict[str, int] | None = None,
           starts: Sequence[Sequence[int] | None] | None = None, need_words: bool = False) -> Encoded:
    """Tokenise ``texts``; with ``tag_index``, also the words and the tag targets of ``spans``
    (one entry per text, None for a row without annotations); with ``starts``, the words and the
    boundary targets of each row's request starts (None for a row of one request); with
    ``need_words``, the words alone."""
    read_words = tag_index is not None or starts is not None or need_words
    texts = list(texts)
    # A fast tokenizer fails on an empty batch (IndexError): no texts are zero rows, as the engine answers them.
    batch = (tokenizer(texts, truncation=True, max_length=max_length, add_special_tokens=True,
                       return_offsets_mapping=read_words) if texts else {"input_ids": [], "offset_mapping": []})
    ids = batch["input_ids"]
    if not read_words:
        return Encoded(ids, targets)
    text_words = [words(batch.word_ids(i), batch["offset_mapping"][i]) for i in range(len(ids))]
    tags = boundaries = None
    if spans is not None and tag_index is not None:
        tags = [token_targets(row_spans, row_words, len(row_ids), tag_index)
                for row_spans, row_words, row_ids in zip(spans, text_words, ids)]
    if starts is not None:
        boundaries = [boundary_targets(row_starts, row_words, len(row_ids))
                      for row_starts, row_words, row_ids in zip(starts, text_words, ids)]
    return Encoded(ids, targets, words=text_words, tag_targets=tags, boundary_targets=boundaries)


def concatenate(first: Encoded, second: Encoded, sources: list[int]) -> Encoded:
    """``first``'s rows then ``second``'s, with ``sources`` for all of them."""
    def joined(a, b):
        return None if a is None else a + b

    targets = None if first.targets is None else np.concatenate([first.targets, second.targets])
    return Encoded(first.input_ids + second.input_ids, targets, sources, joined(first.words, second.words),
                   joined(first.tag_targets, second.tag_targets),
                   joined(first.boundary_targets, second.boundary_targets))


def collate(encoded: Encoded, indices: Sequence[int], pad_id: int,
            device: torch.device | None = None) -> dict[str, torch.Tensor]:
    """The rows ``indices`` of ``encoded`` as one padded batch of tensors, on ``device`` (default: the CPU)."""
    width = max(len(encoded.input_ids[i]) for i in indices)
    ids = torch.full((len(indices), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(indices), width), dtype=torch.long)
    for row, i in enumerate(indices):
        seq = encoded.input_ids[i]
        ids[row, : len(seq)] = torch.tensor(seq)
        mask[row, : len(seq)] = 1
    batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
    if encoded.targets is not None:
        batch["targets"] = torch.from_numpy(encoded.targets[list(indices)])
    for name in ("tag_targets", "boundary_targets"):
        per_row = getattr(encoded, name)
        if per_row is not None:
            padded = torch.full((len(indices), width), IGNORE, dtype=torch.long)
            for row, i in enumerate(indices):
                padded[row, : len(per_row[i])] = torch.tensor(per_row[i])
            batch[name] = padded
    if device is not None and device.type != "cpu":
        batch = {name: tensor.to(device, non_blocking=True) for name, tensor in batch.items()}
    return batch


def training_batches(n: int, lengths: Sequence[int], batch_size: int, rng: random.Random, pool: int = 50) -> list[list[int]]:
    """Shuffle, sort by length within pools of ``pool`` batches, shuffle batches."""
    order = list(range(n))
    rng.shuffle(order)
    batches: list[list[int]] = []
    span = batch_size * pool
    for start in range(0, n, span):
        chunk = sorted(order[start : start + span], key=lambda i: lengths[i])
        batches.extend(chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size))
    rng.shuffle(batches)
    return batches


def grouped_training_batches(sources: Sequence[int], lengths: Sequence[int], batch_size: int, rng: random.Random,
                             pool: int = 50) -> list[list[int]]:
    """Like :func:`training_batches`, but every clean row shares its batch with
    its perturbed copies (``sources`` as in :class:`Encoded`).

    Groups are packed whole until the next would pass ``batch_size`` rows (a
    group bigger than that is a batch of its own), so batches hold about
    ``batch_size`` rows from ``batch_size / (1 + copies per row)`` sources.
    """
    groups: dict[int, list[int]] = {}
    for row, source in enumerate(sources):
        groups.setdefault(row if source < 0 else source, []).append(row)
    order = list(groups.values())
    rng.shuffle(order)
    batches: list[list[int]] = []
    span = batch_size * pool
    start = 0
    while start < len(order):
        # A pool of about ``pool`` batches' worth of rows, sorted by length.
        end, rows = start, 0
        while end < len(order) and rows < span:
            rows += len(order[end])
            end += 1
        current: list[int] = []
        for group in sorted(order[start:end], key=lambda g: lengths[g[0]]):
            if current and len(current) + len(group) > batch_size:
                batches.append(current)
                current = []
            current.extend(group)
        if current:
            batches.append(current)
        start = end
    rng.shuffle(batches)
    return batches
