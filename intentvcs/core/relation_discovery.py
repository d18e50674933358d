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

Under support decoding a duplicate does more than close answers: the names
of one intent are decided together (``Decision.support_intents``), so a false
one costs more. Two intents that usually come together imply each other on
the rows too (CrossWOZ-VCS: rows written ``Inform`` accept ``Inform&Request``
on 83% of them, since most informing turns also request), so a duplicate must
also pass a second test there (``constant_ratio``): the names of one intent
are written at a fixed ratio wherever it applies, so their probabilities keep
that ratio from row to row, while an intent and a composite that contains it
do not (a third against a ninth on a turn with both acts, a third against
almost nothing on a turn with one).
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Sequence

import numpy as np

from intentvcs.core.calibration import probabilities
from intentvcs.core.decision import Decision
from intentvcs.core.oos import OOS_LABEL, NoRule
from intentvcs.core.relations import (Cover, Duplicate, LabelRelations, Relation, RelationsError, Subset,
                                      extend_relations, naming_oos)

MIN_ROWS = 5  # fewer observed rows say too little about a label's company
# constant_ratio: the rows that speak of a pair are those where the two hold this much probability together;
# the spread allowed is the weighted standard deviation of log(q_a / q_b) over them. Of the pairs implied both
# ways on the four DialogVCS sets' validation rows (8 PU models), the builder's duplicates spread 0.06-0.43
# (MultiWOZ-VCS's taxi versions the most), the false ones of CrossWOZ-VCS (an intent and the composite that
# contains it) 0.54-0.70; ATIS-VCS's two others (a child holding nearly all of its parent's rows) spread under
# 0.3: duplicates by their data.
RATIO_ROWS_MASS = 0.05
RATIO_SPREAD = 0.5


def discover_relations(accepted: np.ndarray, observed: np.ndarray, labels: Sequence[str], min_rate: float,
                       min_rows: int = MIN_ROWS, probs: np.ndarray | None = None) -> list[Relation]:
    """Duplicates and subsets implied by ``accepted`` (bool ``[N, L]``, the model's answers on held-out
    rows) over the rows each label is ``observed`` on (bool ``[N, L]``); see the module docstring.

    With ``probs`` (the model's probabilities on the same rows, ``[N, L]``) a pair implied both ways is a
    duplicate only when it keeps a ``constant_ratio``, and no relation otherwise."""
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
            if probs is None or constant_ratio(probs, a, b):
                found.append(Duplicate(labels[a], labels[b]))
        elif implies[a, b]:
            found.append(Subset(child=labels[a], parent=labels[b]))
        elif implies[b, a]:
            found.append(Subset(child=labels[b], parent=labels[a]))
    return found + _covers(found, accepted, observed, labels, min_rate, min_rows)


def constant_ratio(probs: np.ndarray, a: int, b: int, spread: float = RATIO_SPREAD) -> bool:
    """Whether columns ``a`` and ``b`` of ``probs`` keep one ratio over the rows where they hold
    ``RATIO_ROWS_MASS`` or more together: the weighted (by that mass) standard deviation of
    ``log(q_a / q_b)`` is at most ``spread``. Fewer than ``MIN_ROWS`` such rows: False."""
    pair = np.asarray(probs, dtype=np.float64)[:, [a, b]]
    mass = pair.sum(axis=1)
    rows = mass >= RATIO_ROWS_MASS
    if rows.sum() < MIN_ROWS:
        return False
    tiny = np.finfo(np.float64).tiny  # a softmax underflows to 0 far from its mode
    log_ratio = np.log(np.maximum(pair[rows, 0], tiny)) - np.log(np.maximum(pair[rows, 1], tiny))
    mean = np.average(log_ratio, weights=mass[rows])
    return float(np.sqrt(np.average((log_ratio - mean) ** 2, weights=mass[rows]))) <= spread


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


def decide_with_discovered(decision: Decision, logits: np.ndarray, observed: np.ndarray,
                           min_rate: float) -> tuple[Decision, list[Relation]]:
    """``decision`` closed under the relations read off held-out rows (their ``logits`` and ``observed``
    labels, ``[N, L]``, in-scope rows), and those relations. The answers read are the decision's closed
    under its known relations, without their covers' completion (a guess, not an implication).

    Under support decoding the duplicates must also keep a ``constant_ratio``,
    and the duplicates known and found become the decision's
    ``support_intents``. What training stores (``DecisionConfig.discover_relations``)
    and what the DialogVCS benchmark scores.
    """
    probs = None
    if decision.support_noise is not None:
        probs = probabilities(logits, decision.activation, decision.temperature)
    # The rows are in scope: what is read is which labels the model accepts on them, not an OOS verdict; closed
    # under the known relations (what they imply holds), but not completed under their covers: a cover's
    # completion is the decision's guess of a child, and read back it would make the child the parent's
    # duplicate wherever one child is the likelier on the parent's rows.
    accepted = replace(decision, oos=NoRule(), relations=None).apply(logits).accepted
    if decision.relations is not None:
        accepted = decision.relations.closure(decision.labels)(accepted)
    found = discover_relations(accepted, observed, decision.labels, min_rate, probs=probs)
    relations = with_discovered(decision.relations, found, decision.labels)
    decided = replace(decision, relations=relations)
    if decision.support_noise is not None:
        decided = deciding_by_support(decided, decision.support_noise)
    return decided, found


def deciding_by_support(decision: Decision, noise: float) -> Decision:
    """``decision`` deciding by support decoding at ``noise``, the duplicates among its relations read as the
    names of one intent (``Decision.support_intents``): what training stores for ``--support-noise`` and
    what the benchmarks score a reused checkpoint with."""
    groups = decision.relations.duplicate_groups(decision.labels) if decision.relations is not None else []
    return replace(decision, support_noise=noise, support_intents=groups or None)


def decoding_at(decision: Decision, noise: float | None) -> Decision:
    """``decision`` deciding by support decoding at ``noise`` (``deciding_by_support``), or by its thresholds
    when ``noise`` is 0 or None, whatever it stored: a benchmark scores a reused checkpoint by its own run's
    decoding, which another run's ``refit --support-noise`` may have changed."""
    return deciding_by_support(decision, noise) if noise else replace(decision, support_noise=None,
                                                                       support_intents=None)


def with_discovered(known: LabelRelations | None, found: Sequence[Relation],
                    labels: Sequence[str]) -> LabelRelations | None:
    """``known`` plus the ``found`` relations it lacks, over its labels and the model's intents; None when both
    are empty.

    ``labels`` are the model's columns, "oos" among them under the train OOS rule: that column is the
    out-of-scope verdict, no intent, so it joins no relations' labels (``extend_relations``). A found
    relation naming it is refused (``RelationsError``): ``discover_relations`` reads none (an "oos" row
    accepting an intent says nothing of the intent), and ``Decision`` refuses relations that relate the
    verdict to an intent, which would only say so after the relations were built."""
    verdict = naming_oos(found)
    if verdict is not None:
        raise RelationsError(f"discovered relations: {verdict.type} {list(verdict.labels())} names {OOS_LABEL!r}, "
                             "the out-of-scope verdict, which relates to no intent")
    if known is None and not found:
        return None
    return extend_relations(known, labels, found, {"discovered": [relation.to_dict() for relation in found]})
