"""What a model keeps of its training rows for the upgrade audit: ``references.jsonl``.

The audit (``intentvcs.service.audit``) estimates how much of an existing
intent E lies inside a new intent N from E's own utterances, and reads E's
entity profile from their spans. A service holds no training data: without
those rows every such estimate is "too few rows of E", and a duplicate passes
for a subset. So training keeps a seeded sample of at most
``ROWS_PER_INTENT`` rows per intent (the most the audit draws per intent from
a full training file: ``AuditConfig.reference_cap`` defaults to it), the
export ships it in the bundle (listed and digested in the manifest like every
payload file), and the audit reads it when the caller gives no training rows.
The rows are the team's own utterances: ``intentvcs export --no-references``
leaves them out of a bundle that must not carry them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np

from intentvcs.core.dataio import Example, read_jsonl, write_jsonl
from intentvcs.core.oos import OOS_LABEL

REFERENCES_FILE = "references.jsonl"
ROWS_PER_INTENT = 200
SEED = 0


def reference_sample(rows: Sequence[Example], cap: int = ROWS_PER_INTENT, seed: int = SEED) -> list[Example]:
    """At most ``cap`` rows of each intent, drawn uniformly (seeded), in their original order.

    A row with several labels counts for each (toward its cap too); out-of-scope rows (no label, or
    the ``oos`` class of a model trained with one) are no intent's reference.
    Only text, labels, id and spans are kept.
    """
    rng = np.random.default_rng(seed)
    intents = [[label for label in row.labels if label != OOS_LABEL] for row in rows]
    pools: dict[str, list[int]] = {}
    for index, labels in enumerate(intents):
        for label in labels:
            pools.setdefault(label, []).append(index)
    chosen: set[int] = set()
    taken = dict.fromkeys(pools, 0)  # rows chosen that carry each intent

    def room(index: int) -> bool:
        return index not in chosen and all(taken[label] < cap for label in intents[index])

    # A row of several intents fills the cap of each: drawn for one intent, it counts toward the others too, and
    # joins only while each has room (drawing ``cap`` per intent regardless kept up to ~2 x cap of an intent
    # whose rows are mostly chained). Single-label rows: one draw of ``cap`` per intent, every row drawn kept.
    for label in sorted(pools):
        pool = [i for i in pools[label] if room(i)]
        while pool and taken[label] < cap:
            need = cap - taken[label]
            for index in pool if len(pool) <= need else (int(i) for i in rng.choice(pool, size=need, replace=False)):
                if room(index):  # an intent of an earlier row drawn may have filled up since
                    chosen.add(index)
                    for other in intents[index]:
                        taken[other] += 1
            pool = [i for i in pool if room(i)]
    return [Example(rows[i].text, rows[i].labels, rows[i].id, rows[i].spans) for i in sorted(chosen)]


def write_references(directory: str | os.PathLike, rows: Sequence[Example]) -> Path:
    """Write ``references.jsonl`` into ``directory`` (atomically)."""
    return write_jsonl(Path(directory) / REFERENCES_FILE, rows)


def read_references(directory: str | os.PathLike) -> list[Example] | None:
    """The rows of ``directory``'s ``references.jsonl``; None when it has none (trained before they existed)."""
    path = Path(directory) / REFERENCES_FILE
    return read_jsonl(path, stored=True) if path.is_file() else None


def summary(rows: Sequence[Example], size_bytes: int) -> dict[str, int]:
    """The manifest's ``references`` entry: rows, intents, the per-intent cap, the file's size."""
    intents = {label for row in rows for label in row.labels}
    return {"rows": len(rows), "intents": len(intents), "rows_per_intent": ROWS_PER_INTENT, "bytes": size_bytes}
