"""The entity floor: the confidence under which a decoded entity is not answered, read off validation rows.

The entity head decodes the most probable well-formed tag sequence
(``intentvcs.core.entities``), so it names an entity wherever the tags of a
few words lean that way, however slightly; an entity's confidence is the mean
probability of its words' tags. An unsure entity is often a wrong one, and
answering it costs precision for little recall.
``fit_floor`` picks, from ``FLOORS``, the floor with the best span-level F1
(CoNLL: type and both boundaries exact) on the validation rows' gold spans
among those that leave as many rows with their entity set exactly right as
floor 0 does, give or take one row, the lowest on a tie: dropping a right
entity breaks its row's set, so a floor that wins F1 on the spans it removes
can still cost whole rows (on SNIPS, F1 alone chose 0.8, which raised test
slot F1 by 0.2 points and cost 1.4 of overall accuracy). ``Decision.entity_floor``
stores it and ``Decision.kept_entities`` applies it to every answer. Measured
in docs/RESULTS.md ("The entity floor").
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from intentvcs.core import scoring
from intentvcs.core.dataio import Example
from intentvcs.core.entities import span_set
from intentvcs.core.oos import OOS_LABEL

# Tenths: validation sets are small (the embedded default's has 152 rows in scope), and a finer grid would
# choose among differences of a row or two.
FLOORS = tuple(round(0.1 * k, 1) for k in range(10))


def fit_floor(examples: Sequence[Example], entities: np.ndarray) -> tuple[float, dict[str, dict[str, float]]] | None:
    """The floor of ``FLOORS`` chosen on ``examples`` (their in-scope rows, gold ``spans``; a row labelled
    ``"oos"``, as the OOS rule "train" labels out-of-scope rows, is out of scope) given each row's decoded
    ``entities`` (``GraphOutputs.entities``), as the module docstring says, and every floor's slot F1 and
    share of rows with the entity set exact; None when no in-scope row has a gold span (nothing to read a
    floor off: every entity is kept)."""
    rows = [i for i, example in enumerate(examples) if example.labels and OOS_LABEL not in example.labels]
    gold = [span_set(examples[i].spans) for i in rows]
    if not any(gold):
        return None
    f1, exact = {}, {}
    for floor in FLOORS:
        predicted = [span_set(e for e in entities[i] if e.confidence >= floor) for i in rows]
        f1[floor] = scoring.span_metrics(gold, predicted)["slot_f1"]
        exact[floor] = sum(g == p for g, p in zip(gold, predicted))  # rows, counted: "one row" is exact
    keeps_rows = [floor for floor in FLOORS if exact[floor] >= exact[0.0] - 1]
    best = max(keeps_rows, key=lambda floor: (f1[floor], -floor))
    return best, {f"{floor:.1f}": {"slot_f1": round(f1[floor], 5), "entities_exact": round(exact[floor] / len(rows), 5)}
                  for floor in FLOORS}
