"""Relations read off a model's own answers, without gold label sets.

DialogVCS plots the co-occurrence matrix of a model's predictions, in which an
intent, its versions and its splits light up together (docs/RESEARCH.md
section 1.7). This turns that signal into relations that closure
(``intentvcs.core.relations``) applies at inference. On the held-out rows
observed as label ``a`` (at least ``min_rows`` of them), ``a`` implies ``b``
when the model accepts ``b`` on at least ``min_rate`` of them: both ways make
a duplicate (``x_v1`` / ``x_v2``), one way a subset (child ``a``, parent ``b``:
``x_with_e`` rows are all ``x``, ``x`` rows only partly ``x_with_e``). A parent
with two or more such children, some child accepted on at least ``min_rate``
of the parent's own rows, is covered by them (``x_with_e`` / ``x_without_e``).

What it fixes is the PU model's recall: a version whose confidence happens to
fall under the cut is accepted with its twin, and a parent accepted without
any of its splits takes the most likely one. The rate is a choice, not a
fit: held-out PU rows carry one label each, so no figure on them can say how
many were missed (``DecisionConfig.discover_relations``).
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from intentvcs.core.oos import OOS_LABEL
from intentvcs.core.relations import Cover, Duplicate, LabelRelations, Relation, Subset, extend_relations

MIN_ROWS = 5  # fewer observed rows say too little about a label's company


def discover_relations(accepted: np.ndarray, observed: np.ndarray, labels: Sequence[str], min_rate: float,
                       min_rows: int = MIN_ROWS) -> list[Relation]:
    """Duplicates and subsets implied by ``accepted`` (bool ``[N, L]``, the model's answers on held-out
    rows) over the rows each label is ``observed`` on (bool ``[N, L]``); see the module docstring."""
    if not 0.0 < min_rate <= 1.0:
        raise ValueError(f"min_rate must lie in (0, 1], got {min_rate}")
    accepted, observed = np.asarray(accepted, dtype=bool), np.asarray(observed, dtype=bool)
    counts = observed.sum(axis=0)
    # rate[a, b]: share of the rows observed as a on which b is accepted.
    rate = (observed.T.astype(np.float64) @ accepted) / np.maximum(counts, 1)[:, None]
    implies = (rate >= min_rate) & (counts >= min_rows)[:, None]
    found: list[Relation] = []
    for a, b in itertools.combinations(range(len(labels)), 2):
        if OOS_LABEL in (labels[a], labels[b]):
            continue
        if implies[a, b] and implies[b, a]:
            found.append(Duplicate(labels[a], labels[b]))
        elif implies[a, b]:
            found.append(Subset(child=labels[a], parent=labels[b]))
        elif implies[b, a]:
            found.append(Subset(child=labels[b], parent=labels[a]))
    return found + _covers(found, accepted, observed, labels, min_rate, min_rows)


def _covers(found: list[Relation], accepted: np.ndarray, observed: np.ndarray, labels: Sequence[str],
            min_rate: float, min_rows: int) -> list[Relation]:
    """Parents whose found children, together, are accepted on at least ``min_rate`` of the parent's rows."""
    children: dict[str, list[str]] = {}
    for relation in found:
        if isinstance(relation, Subset):
            children.setdefault(relation.parent, []).append(relation.child)
    index = {label: i for i, label in enumerate(labels)}
    covers: list[Relation] = []
    for parent, kids in children.items():
        rows = observed[:, index[parent]]
        if len(kids) < 2 or rows.sum() < min_rows:
            continue
        if accepted[np.ix_(rows, [index[k] for k in kids])].any(axis=1).mean() >= min_rate:
            covers.append(Cover(parent, tuple(sorted(kids))))
    return covers


def with_discovered(known: LabelRelations | None, found: Sequence[Relation],
                    labels: Sequence[str]) -> LabelRelations | None:
    """``known`` plus the ``found`` relations it lacks, over its labels and the model's; None when both are empty."""
    if known is None and not found:
        return None
    return extend_relations(known, labels, found, {"discovered": [relation.to_dict() for relation in found]})
