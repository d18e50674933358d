"""Tokenise once, then feed the graph length-bucketed, per-chunk padded batches.

Sorting a request's texts by token length and padding each chunk only to its
own longest member keeps the attention cost (quadratic in the padded length)
close to what the texts need; callers scatter results back to input order.
Only ``tokenizers`` and numpy: this runs in the torch-free serving path.
"""

from __future__ import annotations

import os
from typing import Iterator, Sequence

import numpy as np
from tokenizers import Encoding, Tokenizer

from intentvcs.core.manifest import BundleError

# The graph inputs this module can feed (BERT-family encoders take all three).
SUPPORTED_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class BundleTokenizer:
    """The bundle's ``tokenizer.json``, checked against the manifest's ``max_length``.

    The export writes truncation (the checkpoint's ``max_length``) and padding
    (the pad token) into tokenizer.json; padding is read here and then turned
    off, because padding the whole request to its longest text is exactly the
    waste bucketing avoids.
    """

    def __init__(self, path: str | os.PathLike, max_length: int):
        try:
            self._tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises bare Exception on parse errors
            raise BundleError(path, f"not a valid tokenizers file: {exc}") from None
        truncation = self._tokenizer.truncation
        if truncation is None or truncation["max_length"] != max_length:
            found = None if truncation is None else truncation["max_length"]
            raise BundleError(path, f"truncation max_length is {found}, the manifest says {max_length}")
        padding = self._tokenizer.padding
        if padding is None:
            raise BundleError(path, "no padding configured, so the pad token id is unknown")
        self.pad_id: int = padding["pad_id"]
        self._tokenizer.no_padding()

    def encode(self, texts: Sequence[str]) -> list[Encoding]:
        """Token encodings (special tokens added, truncated, unpadded), in input order."""
        return self._tokenizer.encode_batch(list(texts))


def length_buckets(lengths: Sequence[int], max_batch: int,
                   run_cost_tokens: float | None = None) -> Iterator[np.ndarray]:
    """Row indices in chunks of at most ``max_batch``, ascending token length.

    A stable sort keeps equal-length texts in input order, so results do not
    depend on anything but the texts themselves. Without ``run_cost_tokens``
    the sorted rows are cut every ``max_batch``. With it, they are cut where
    padding would cost more than one more graph run: a chunk is padded to its
    longest text, so the cuts minimise ``sum(rows x longest) + run_cost_tokens x
    chunks`` (exact, by dynamic programming over the sorted lengths: a
    32-text call of short and long texts becomes a few chunks of similar length).
    """
    order = np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable")
    if run_cost_tokens is None:
        for start in range(0, len(order), max_batch):
            yield order[start : start + max_batch]
        return
    widths = np.asarray(lengths, dtype=np.float64)[order]
    best = np.zeros(len(order) + 1)  # best[end]: the cheapest cut of the first ``end`` sorted rows
    cut = np.zeros(len(order) + 1, dtype=np.int64)  # where that cut's last chunk starts
    for end in range(1, len(order) + 1):
        starts = np.arange(max(0, end - max_batch), end)
        costs = best[starts] + (end - starts) * widths[end - 1] + run_cost_tokens
        k = int(np.argmin(costs))
        best[end], cut[end] = costs[k], starts[k]
    bounds, end = [], len(order)
    while end > 0:
        bounds.append((cut[end], end))
        end = cut[end]
    for start, end in reversed(bounds):
        yield order[start:end]


def pad_chunk(encodings: Sequence[Encoding], input_names: Sequence[str], pad_id: int) -> dict[str, np.ndarray]:
    """The graph feed for one chunk: int64 ``[B, T]`` arrays, ``T`` = longest in the chunk.

    ``input_names`` are the graph's inputs, a subset of ``SUPPORTED_INPUTS``.
    """
    width = max(len(e.ids) for e in encodings)
    ids = np.full((len(encodings), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(encodings), width), dtype=np.int64)
    types = np.zeros((len(encodings), width), dtype=np.int64)
    for row, encoding in enumerate(encodings):
        n = len(encoding.ids)
        ids[row, :n] = encoding.ids
        mask[row, :n] = 1
        types[row, :n] = encoding.type_ids
    available = dict(zip(SUPPORTED_INPUTS, (ids, mask, types)))
    return {name: available[name] for name in input_names}
