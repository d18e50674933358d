"""Defects a review of the decision layer (``intentvcs.core``: decision, calibration, thresholds, oos, support,
relations, relation discovery, scoring, evaluation) found, each reproduced by a test that failed first."""

from __future__ import annotations

import numpy as np
import pytest

from intentvcs.core.dataio import Example
from intentvcs.core.decision import Decision
from intentvcs.core.evaluation import evaluate
from intentvcs.core.oos import TrainRule
from intentvcs.core.outputs import GraphOutputs


def test_accuracy_reads_the_top_intent_not_the_oos_class_of_the_train_rule():
    """``accuracy`` and ``top_accuracy`` ignore the OOS verdict (evaluate's docstring): a row is scored by its
    top intent. Under the rule "train" the ``"oos"`` column is the verdict, not an intent, so a row whose
    ``"oos"`` confidence is highest is still scored by its most confident intent (the one the top fallback
    would answer), as rows rejected by the threshold or distance rule are."""
    decision = Decision(("play", "book", "oos"), oos=TrainRule(2))
    logits = np.array([[2.0, 0.0, 3.0],    # oos on top (judged OOS); its top intent, play, is gold
                       [0.0, 3.0, -1.0]],  # book on top; gold play: wrong
                      dtype=np.float32)
    pooled = np.zeros((2, 2), dtype=np.float32)
    rows = [Example("a", ("play",)), Example("b", ("play",))]
    figures = evaluate(decision, GraphOutputs(logits, pooled, pooled), rows, include_tables=False)
    assert figures["accuracy"] == pytest.approx(0.5)
    assert figures["top_accuracy"] == pytest.approx(0.5)
    # The verdict still counts where the docstring says it does: the row judged OOS answered nothing.
    assert figures["exact_match"] == 0.0


def test_a_relation_naming_the_oos_verdict_is_refused():
    """A relations file with "a subset of oos" made an in-scope row accept "oos" beside "a", which the
    module says never happens: "oos" is the train rule's verdict, no intent."""
    from intentvcs.core.decision import Decision, DecisionError
    from intentvcs.core.relations import LabelRelations, Subset

    relations = LabelRelations(labels=("a", "b", "oos"), relations=(Subset(child="a", parent="oos"),))
    with pytest.raises(DecisionError, match="names 'oos', the out-of-scope verdict"):
        Decision(["a", "b", "oos"], activation="softmax", relations=relations)


def test_extending_relations_adds_no_relation_it_already_holds_written_otherwise():
    """Duplicate(b, a) was added beside a known Duplicate(a, b): "the relations it lacks" compared the
    dataclasses field by field."""
    from intentvcs.core.relations import Composite, Duplicate, LabelRelations, extend_relations

    known = LabelRelations(labels=("a", "b", "c"), relations=(Duplicate("a", "b"), Composite("c", ("a", "b"))))
    extended = extend_relations(known, ["a", "b", "c"], [Duplicate("b", "a"), Composite("c", ("b", "a"))], {})
    assert extended.relations == known.relations
