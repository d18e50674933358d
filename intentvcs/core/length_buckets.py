"""Cut a call's texts into graph runs of similar token length (pure numpy).

Sorting texts by token length and padding each run only to its own longest
member keeps the attention cost (quadratic in the padded length) close to
what the texts need; callers scatter results back to input order. The ONNX
engine (``intentvcs.service.onnx_session``) and PyTorch inference
(``intentvcs.training.predict``) cut the same way.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np


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
