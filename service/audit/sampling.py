"""One pass over an upgrade batch: what the audit scores, whatever the batch's size.

Every figure of the audit is a share of one new intent's rows (how many of
them the model puts in an existing intent, how many split into two requests,
how many are out of scope) or a test on a capped sample of them. A share's
Wilson interval is within 2.2 points at 95% from 2,000 rows on, so scoring
more rows than that buys no decision and costs inference time linearly (a
100,000-row batch of ten new intents took 258 s of inference on 2 cores). The
batch is therefore read once, row by row, keeping per new intent a seeded
uniform sample of at most ``cap`` rows (reservoir sampling, Algorithm R), and
per existing intent the few rows the audit may need as its references: memory
is bounded by the caps, not by the batch's texts, so a caller can stream a file
(the repeat check below keeps a little per distinct row).

A row of several new intents enters each of their samples on its own draw;
each intent's figures are computed on its own sample only, so every sample is
uniform over that intent's rows.

A row identical in text and labels (in any order) to an earlier row is set
aside, counted in ``duplicate_rows``: a repeated row is no new evidence, and
counting it again would narrow every interval it enters (the same 16 rows
three times raised a subset's severity from info to warning). Only a 16-byte
hash of each distinct row is kept, about 80 bytes with the set's own cost (a
million distinct rows: 83 MB, measured), so memory grows with the batch's
distinct rows, not with their texts. Repeated training or reference rows of
the existing intents count once too (``batch._references``).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from intentvcs.core.dataio import Example


@dataclass
class _Reservoir:
    """A uniform sample of at most ``cap`` of the items offered so far (``seen``)."""

    cap: int
    items: list[Any] = field(default_factory=list)
    seen: int = 0

    def offer(self, item: Any, rng: random.Random) -> None:
        self.seen += 1
        if len(self.items) < self.cap:
            self.items.append(item)
        else:
            slot = rng.randrange(self.seen)
            if slot < self.cap:
                self.items[slot] = item


@dataclass
class BatchSample:
    """What one pass over a batch keeps.

    ``new_intents``: labels unknown to the model, in order of first appearance.
    ``rows``: the rows to score, each once (rows of new intents sampled for at
    least one of them), in batch order; ``members``: per new intent, the
    indices into ``rows`` of its own sample. ``rows_per_intent``: every new
    intent's row count in the whole batch. ``existing``: per existing intent, at
    most ``reference_cap`` of the batch's rows that carry it and no new intent.
    ``batch_rows`` counts every row read; ``duplicate_rows`` those set aside as
    repeats of an earlier row (text and labels); every other figure counts
    distinct rows only.
    """

    new_intents: list[str]
    rows: list[Example]
    members: dict[str, list[int]]
    rows_per_intent: dict[str, int]
    existing: dict[str, list[Example]]
    batch_rows: int
    audited_rows: int
    duplicate_rows: int = 0


def sample_batch(rows: Iterable[Example], known: Iterable[str], cap: int, reference_cap: int, seed: int,
                 check: Callable[[int, Any], Example] = lambda i, row: row) -> BatchSample:
    """Read ``rows`` once (``check(index, row)`` validates each) and keep what the audit scores.

    ``known``: the model's labels; any other label is a new intent. At most
    ``cap`` rows per new intent and ``reference_cap`` per existing intent are
    kept, chosen uniformly with a ``seed``-ed generator. A row repeating an earlier one (same text, same
    labels) is counted in ``duplicate_rows`` and otherwise ignored: the first stands for all.
    """
    known = set(known)
    rng = random.Random(seed)
    new: dict[str, _Reservoir] = {}
    existing: dict[str, _Reservoir] = {}
    batch_rows = audited_rows = duplicate_rows = 0
    distinct: set[bytes] = set()
    for i, raw in enumerate(rows):
        row = check(i, raw)
        batch_rows += 1
        key = row_key(row)
        if key in distinct:
            duplicate_rows += 1
            continue
        distinct.add(key)
        unknown = [label for label in row.labels if label not in known]
        if unknown:
            audited_rows += 1
            for label in unknown:
                new.setdefault(label, _Reservoir(cap)).offer((i, row), rng)
        else:
            for label in row.labels:
                existing.setdefault(label, _Reservoir(reference_cap)).offer(row, rng)
    kept = sorted({i: row for reservoir in new.values() for i, row in reservoir.items}.items())
    position = {i: k for k, (i, _) in enumerate(kept)}
    return BatchSample(
        new_intents=list(new),
        rows=[row for _, row in kept],
        members={name: sorted(position[i] for i, _ in reservoir.items) for name, reservoir in new.items()},
        rows_per_intent={name: reservoir.seen for name, reservoir in new.items()},
        existing={name: reservoir.items for name, reservoir in existing.items()},
        batch_rows=batch_rows,
        audited_rows=audited_rows,
        duplicate_rows=duplicate_rows,
    )


def row_key(row: Example) -> bytes:
    """What makes two rows the same evidence: their text and their labels as a set (a 16-byte hash)."""
    return hashlib.blake2b(json.dumps([row.text, sorted(row.labels)]).encode(), digest_size=16).digest()
