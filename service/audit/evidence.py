"""Evidence for a finding: example utterances and the PU relabel list.

Examples come from the new intent's own rows. Each verdict marks the rows that
back it (``Verdict.support``; a novel intent's rows only where the service accepts no existing intent at all,
the rule's support reading its candidates alone); rows are ranked by the model's mean confidence
in the verdict's existing intents (for a novel intent, by the highest
confidence in any existing intent, i.e. its nearest confusions), rows tied
there (confidences capped at 1) by the same mean of the decision's ranking
(``DecisionResult.ranking``, ``p / c`` before the cap), as the decision ranks
labels, then by their order in the batch. The best
supporting rows are the examples; the best non-supporting rows are the
counter-examples: the utterances that come closest to contradicting the
verdict, which is what a reviewer should read. Each row's top intents are
listed in the decision's ranking too, as the service answers them.

The relabel list holds old utterances of existing intents (training sample,
or the batch's own rows of them) that probably also belong to the new intent:
those whose PU membership probability (``containment.Membership``) is at least
one half, ranked by Elkan & Noto's odds, then by closeness to the new
intent's nearest rows, highest first, capped. Under the PU
view an old row is "unlabelled" for the new intent, not negative, so these
rows should gain the new label (multi-label), not lose their old one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from intentvcs.core.dataio import Example
from intentvcs.core.decision import intent_columns
from intentvcs.service.audit.containment import INSIDE_ODDS, Membership
from intentvcs.service.audit.rules import Verdict

TOP_INTENTS = 3


@dataclass(frozen=True)
class Scored:
    """Model outputs for a set of rows, aligned with ``examples``: the confidences and accepted labels the report
    shows, and the decision's ranking (``DecisionResult.ranking``), which orders rows and labels where
    confidences tie at the cap of 1: sorted by confidences alone, the rows and labels capped at 1 kept their
    batch and label order, whatever the model said of them."""

    examples: Sequence[Example]
    confidences: np.ndarray  # float [n, L]
    accepted: np.ndarray     # bool [n, L]
    ranking: np.ndarray      # float [n, L]


def _figure(share: float) -> float:
    """A share (a confidence, a probability) for the report: to 4 places, except one that is not exactly 0 or 1,
    which is written as it is where 4 places would make it 0 or 1. Rounded, a confidence of 0.00003 was written
    0.0 and one of 0.99996 1.0, and the page, which reads the report, wrote "0%" and "100%" for them where
    ``percent`` writes "<1%" and ">99%" (the demo report's examples: transfer_money at 0.00003 read "0%")."""
    value = float(share)
    shown = round(value, 4)
    if (shown == 0.0 and value > 0.0) or (shown == 1.0 and value < 1.0):
        return value
    return shown


def _identity(example: Example) -> dict[str, Any]:
    """``{"text", "id"?}``: how the report names an utterance."""
    return {"text": example.text} if example.id is None else {"text": example.text, "id": example.id}


def _row(example: Example, confidences: np.ndarray, accepted: np.ndarray, ranking: np.ndarray,
         labels: Sequence[str]) -> dict[str, Any]:
    top = np.argsort(-ranking, kind="stable")[:TOP_INTENTS]  # as the service ranks its answer
    out = _identity(example)
    out["accepted"] = [labels[j] for j in np.flatnonzero(accepted)]
    out["top"] = [{"intent": labels[j], "confidence": _figure(confidences[j])} for j in top]
    return out


def examples(verdict: Verdict, scored: Scored, labels: Sequence[str],
             cap: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(examples, counter_examples)`` for one verdict, each at most ``cap`` rows.

    ``scored`` holds the new intent's rows, in the order of ``verdict.support``.
    """
    columns = [labels.index(name) for name in verdict.existing]
    intents = intent_columns(labels)  # the train rule's "oos" class is no existing intent (never accepted)
    if columns:
        score, tie = (values[:, columns].mean(axis=1) for values in (scored.confidences, scored.ranking))
    else:  # the nearest existing intent
        score, tie = (values[:, intents].max(axis=1, initial=0.0) for values in (scored.confidences, scored.ranking))
    # By confidence, ties (at the cap) by the ranking, then by row: the order the decision ranks labels in.
    order = np.lexsort((-tie, -score)).tolist()  # stable: the row order last

    support = np.asarray(verdict.support, dtype=bool)
    if verdict.relation == "novel":
        # The rule's support is "no *candidate* accepted"; a row the service answers with any other existing
        # intent contradicts "novel" (its ``accepted`` column says so): a counter-example, never an example.
        support = support & ~scored.accepted[:, intents].any(axis=1)

    def pick(mask: np.ndarray) -> list[dict[str, Any]]:
        chosen = [i for i in order if mask[i]][:cap]
        return [_row(scored.examples[i], scored.confidences[i], scored.accepted[i], scored.ranking[i], labels)
                for i in chosen]

    return pick(support), pick(~support)


@dataclass(frozen=True)
class Reference:
    """An existing intent's reference rows and where they came from (``training``, ``model`` or ``batch``).

    ``examples``: the capped sample the kNN estimate of contain(E->N) reads (each row is inferred);
    ``profile``: the rows the entity and word tests read (their annotations and words only, no inference),
    every distinct row the audit holds of the intent up to ``AuditConfig.intent_cap``.
    """

    examples: Sequence[Example]
    source: str
    profile: Sequence[Example]


def relabel_list(memberships: dict[str, Membership], references: dict[str, Reference],
                 cap: int) -> list[dict[str, Any]]:
    """Old utterances that probably belong to the new intent, best first, at most ``cap``.

    ``memberships`` maps an existing intent to its contain(E->N) estimate;
    ``references`` maps it to the rows that estimate indexed.
    """
    pool = []
    for name, m in memberships.items():
        ref = references[name]
        for row, odds, probability, closeness in zip(m.rows, m.odds, m.probability, m.closeness):
            if odds >= INSIDE_ODDS:
                pool.append((float(odds), float(closeness), {
                    **_identity(ref.examples[row]), "labels": list(ref.examples[row].labels), "existing": name,
                    "probability": _figure(probability), "odds": round(float(odds), 4),
                    "source": ref.source}))
    pool.sort(key=lambda item: (-item[0], -item[1]))
    return [entry for _, _, entry in pool[:cap]]
