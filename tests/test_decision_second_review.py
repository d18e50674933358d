"""Decision second review: each test failed on the code before its fix.

1. Cover completion ignored a cover met through a label the model lacks (``s`` a subset of ``a``, ``a`` a child
   of the cover ``x`` and no column of the model): accepting ``s`` closed to ``x`` through ``a`` and then added
   the cover's other child ``b`` as well, an answer the relations contradict.
2. Cover completion weighed a child by its own column alone, not by its duplicates' (other names of the same
   intent): a child whose twin is the most confident of all lost to a less confident sibling.
3. Sigmoid probabilities were computed as ``(1 + tanh(z / 2)) / 2``, which cancels to exactly 0 below a logit of
   about -37 (and loses most digits below -20): those labels tied at 0, and the ranked answer (``intents``,
   ``top_k``) listed them in the order the labels were written, not by the model's logits.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from intentvcs.core.calibration import probabilities
from intentvcs.core.decision import Decision
from intentvcs.core.relations import LabelRelations


def _relations(labels, relations):
    return LabelRelations.from_dict({"format": "intentvcs-relations", "format_version": 1, "labels": list(labels),
                                     "relations": relations})


def _accepted(decision, result, row=0):
    return {label for label, on in zip(decision.labels, result.accepted[row]) if on}


def _ranked(decision, result, row=0):
    """The labels as the service ranks them (``Engine.predict``: stable argsort of the ranking)."""
    return [decision.labels[j] for j in np.argsort(-result.ranking[row], kind="stable")]


# -- 1. a cover met through a label the model lacks ----------------------------------------------------------

COVER_AND_SUBSET = [{"type": "cover", "parent": "x", "children": ["a", "b"]},
                    {"type": "subset", "child": "s", "parent": "a"}]


@pytest.mark.parametrize("labels", [("x", "b", "s"), ("s", "b", "x")])
def test_a_cover_met_through_a_label_the_model_lacks_takes_no_other_child(labels):
    """``s`` is an ``a`` utterance, so an ``x`` one through ``a``: the cover is met, whether or not ``a`` is a
    column. With ``a`` a column the answer is {x, a, s}; without it, it was {x, b, s}: ``b`` added."""
    relations = _relations(["x", "a", "b", "s"], COVER_AND_SUBSET)
    p = {"x": 0.05, "b": 0.05, "s": 0.9}
    decision = Decision(labels, relations=relations)
    result = decision.apply(np.log([[p[k] for k in labels]]))
    assert _accepted(decision, result) == {"x", "s"}
    # The same model with the column a: the cover is met by a, b is not added either.
    full = Decision(("x", "a", "b", "s"), relations=relations)
    assert _accepted(full, full.apply(np.log([[0.05, 0.01, 0.04, 0.9]]))) == {"x", "a", "s"}


def test_a_cover_whose_children_the_answer_does_not_imply_is_still_completed():
    """The fix reads implications, not mere presence: nothing accepted implies a child, so one joins."""
    relations = _relations(["x", "a", "b", "s"], COVER_AND_SUBSET)
    decision = Decision(("x", "b", "s"), relations=relations)
    result = decision.apply(np.log([[0.9, 0.06, 0.04]]))
    assert _accepted(decision, result) == {"x", "b"}


# -- 2. a cover's child weighed with its duplicates ----------------------------------------------------------

@pytest.mark.parametrize("labels", [("x", "a", "b", "b2"), ("b2", "b", "a", "x")])
def test_cover_completion_weighs_a_child_by_its_most_confident_name(labels):
    """``b2`` is another name of the child ``b`` (a duplicate): at 0.3 it is the most confident reading of any
    child, ahead of ``a`` at 0.2. The completion took ``a`` (its own column beat ``b``'s 0.05), and the answer
    ranked b2 first among the accepted labels' alternatives while accepting a."""
    relations = _relations(["x", "a", "b", "b2"], [{"type": "cover", "parent": "x", "children": ["a", "b"]},
                                                   {"type": "duplicate", "a": "b", "b": "b2"}])
    p = {"x": 0.45, "a": 0.2, "b": 0.05, "b2": 0.3}
    decision = Decision(labels, relations=relations, thresholds=[0.4] * 4)
    result = decision.apply(np.log([[p[k] for k in labels]]))
    assert _accepted(decision, result) == {"x", "b", "b2"}


# -- 3. sigmoid probabilities in the far negative tail --------------------------------------------------------

def test_sigmoid_probabilities_keep_their_digits_in_the_negative_tail():
    z = np.array([[-20.0, -30.0, -40.0, -50.0, -700.0, 0.0, 3.0, 30.0]])
    exact = [1.0 / (1.0 + math.exp(-v)) for v in z[0]]
    got = probabilities(z, "sigmoid")[0]
    assert got.tolist() == pytest.approx(exact, rel=1e-12, abs=0.0)
    assert np.all(got > 0.0) and np.all(got <= 1.0)
    # The temperature divides first: -20 / 0.5 is -40, still distinct from -25 / 0.5.
    halved = probabilities(np.array([[-20.0, -25.0]]), "sigmoid", 0.5)[0]
    assert halved[0] > halved[1] > 0.0


@pytest.mark.parametrize("labels", [("a", "b", "c"), ("a", "c", "b"), ("c", "b", "a")])
def test_the_ranked_answer_of_a_sigmoid_head_does_not_depend_on_label_order(labels):
    """b (logit -20) is likelier than c (-25); at T = 0.5 both probabilities were exactly 0 and the ranked
    answer listed them in the order the labels were written."""
    z = {"a": 3.0, "b": -20.0, "c": -25.0}
    decision = Decision(labels, activation="sigmoid", temperature=0.5)
    result = decision.apply(np.array([[z[k] for k in labels]]))
    assert _ranked(decision, result) == ["a", "b", "c"]
    assert _accepted(decision, result) == {"a"}
