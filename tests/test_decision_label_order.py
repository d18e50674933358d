"""Second review of the decision layer (intentvcs.core.{decision, calibration}, training.decision_fit).

1. PU rescaling clips confidences at 1, so labels with ``p_k >= c_k`` tie there: the top-intent fallback
   and cover completion took the first tied column, and the answer depended on the order of the labels.
   They now rank by ``p / c`` before the clip (the same order wherever the confidences differ).
2. The temperature of a softmax head was fitted against the first written label of each validation row, in
   the order of the model's labels: with rows carrying two labels (chained requests), permuting the labels
   changed the temperature. Every written label now counts, spread evenly, as the training loss reads them.
"""

from __future__ import annotations

import numpy as np
import pytest

from intentvcs.core.calibration import brier, fit_temperature, nll, top_label
from intentvcs.core.dataio import Example
from intentvcs.core.decision import Decision
from intentvcs.core.oos import TrainRule
from intentvcs.core.outputs import GraphOutputs
from intentvcs.core.relations import LabelRelations
from intentvcs.training.config import DecisionConfig
from intentvcs.training.decision_fit import fit_decision


# ------------------------------------------------------------------ 1. clipped ties and label order
def _cover(labels):
    return LabelRelations.from_dict({"format": "intentvcs-relations", "format_version": 1, "labels": list(labels),
                                     "relations": [{"type": "cover", "parent": "x", "children": ["x_a", "x_b"]}]})


@pytest.mark.parametrize("labels", [("x", "x_a", "x_b", "y"), ("x", "x_b", "x_a", "y")])
def test_cover_completion_of_clipped_children_does_not_depend_on_label_order(labels):
    # Support decoding keeps x alone; both children have p >= c, so both confidences are clipped to 1.
    # x_b is the likelier (p / c = 1.83 against 1.5): the completion takes it, whichever column comes first.
    p = {"x": 0.9, "x_a": 0.045, "x_b": 0.055, "y": 1e-9}
    c = {"x": 0.9, "x_a": 0.03, "x_b": 0.03, "y": 1.0}
    decision = Decision(labels, label_scale=[c[k] for k in labels], support_noise=0.003, relations=_cover(labels))
    result = decision.apply(np.log([[p[k] for k in labels]]))
    assert result.confidences[0, labels.index("x_a")] == result.confidences[0, labels.index("x_b")] == 1.0
    assert {k for k, on in zip(labels, result.accepted[0]) if on} == {"x", "x_b"}


@pytest.mark.parametrize("labels", [("a", "b", "oos"), ("b", "a", "oos")])
def test_top_fallback_among_clipped_intents_does_not_depend_on_label_order(labels):
    # The support is the oos class alone, but the train rule keeps the row (oos at 0.94 < 1): the fallback
    # answers the likelier of the two clipped intents, b (p / c = 1.1 against 1.0).
    p = {"a": 0.05, "b": 0.055, "oos": 0.895}
    c = {"a": 0.05, "b": 0.05, "oos": 0.95}
    decision = Decision(labels, label_scale=[c[k] for k in labels], support_noise=0.003, oos=TrainRule.fit(labels))
    result = decision.apply(np.log([[p[k] for k in labels]]))
    assert not result.out_of_scope[0]
    assert [k for k, on in zip(labels, result.accepted[0]) if on] == ["b"]


@pytest.mark.parametrize("labels", [("a", "b"), ("b", "a")])
def test_the_top_intent_of_clipped_intents_does_not_depend_on_label_order(labels):
    """The top intent that accuracy and the engine's ranked answer read took the first of the tied
    confidences (both clipped to 1): a for one order, b (the likelier, p / c 1.83 against 1.5) for the other."""
    from intentvcs.core.evaluation import row_verdicts

    p, c = {"a": 0.45, "b": 0.55}, {"a": 0.3, "b": 0.3}
    decision = Decision(labels, label_scale=[c[k] for k in labels])
    result = decision.apply(np.log([[p[k] for k in labels]]))
    assert (result.confidences == 1.0).all()
    assert labels[decision.top_intents(result.ranking)[0]] == "b"
    gold = np.array([[k == "b" for k in labels]])
    assert row_verdicts(decision, result, gold).top_right.tolist() == [True]


def test_unclipped_confidences_rank_as_before():
    # Where no confidence is clipped the fallback still takes the most confident intent (first on an exact tie).
    decision = Decision(("a", "b", "c"), activation="sigmoid", thresholds=[0.99] * 3)
    result = decision.apply(np.array([[0.0, 1.0, 0.5], [1.0, 1.0, -1.0]]))
    assert result.accepted.tolist() == [[False, True, False], [True, False, False]]


# ------------------------------------------------------------------ 2. temperature on multi-label rows
def test_softmax_nll_on_label_sets_matches_a_numpy_reference_and_the_index_form():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(40, 4)) * 2
    sets = rng.random((40, 4)) < 0.35
    sets[np.arange(40), rng.integers(0, 4, 40)] = True
    log_p = z / 1.7 - np.log(np.exp(z / 1.7).sum(axis=1, keepdims=True))
    reference = np.mean([-log_p[i, sets[i]].mean() for i in range(40)])
    assert nll(z, sets, "softmax", 1.7) == pytest.approx(reference, rel=1e-12)
    # One label per row: exactly the index form.
    index = rng.integers(0, 4, 40)
    onehot = np.eye(4, dtype=bool)[index]
    assert nll(z, onehot, "softmax", 1.3) == nll(z, index, "softmax", 1.3)
    p = np.exp(log_p)
    assert brier(p, onehot, "softmax") == brier(p, index, "softmax")
    assert top_label(p, onehot, "softmax")[1].tolist() == top_label(p, index, "softmax")[1].tolist()
    # The top label is right when it is any of the row's labels.
    assert top_label(p, sets, "softmax")[1].tolist() == sets[np.arange(40), p.argmax(axis=1)].tolist()
    with pytest.raises(ValueError, match="one label or more"):
        nll(z[:1], np.zeros((1, 4), bool), "softmax")


def test_the_fitted_temperature_does_not_depend_on_the_order_of_the_labels():
    rng = np.random.default_rng(1)
    labels = ["a", "b", "c", "d"]
    n = 80
    gold = np.zeros((n, 4), bool)
    gold[np.arange(n), rng.integers(0, 4, n)] = True
    gold[: n // 2, :2] = True  # half the rows are chained requests: a and b
    logits = np.where(gold, 2.0, -1.0) + rng.normal(0, 1.0, gold.shape)
    logits[: n // 2, 0] += 3.0  # the model favours a over b on them
    rows = [Example(f"row {i}", tuple(k for k, on in zip(labels, gold[i]) if on)) for i in range(n)]
    pooled = rng.normal(size=(n, 4))
    config = DecisionConfig(oos_rule="none")
    temperatures = []
    for order in ([0, 1, 2, 3], [1, 0, 2, 3]):
        outputs = GraphOutputs(logits[:, order], pooled, pooled)
        decision, _ = fit_decision([labels[i] for i in order], "softmax", rows, outputs, rows, None, config)
        temperatures.append(decision.temperature)
    assert temperatures[0] == pytest.approx(temperatures[1], rel=1e-9)
    # And it is the temperature of the NLL over every written label.
    assert temperatures[0] == pytest.approx(fit_temperature(logits, gold, "softmax"), rel=1e-9)


def test_a_parts_intents_rank_as_the_answer_does():
    """A part's accepted intents ("most confident first") took label order among intents capped at 1, while
    the answer's ranked them by their uncapped scores."""
    from intentvcs.core.segmentation import _Group

    decision = Decision(("a", "b"), activation="sigmoid", label_scale=[0.5, 0.5], thresholds=[0.5, 0.5])
    result = decision.apply(np.log(np.array([[0.6, 0.9]]) / (1 - np.array([[0.6, 0.9]]))))
    assert (result.confidences == 1.0).all()
    group = _Group.of_part(result, 0, 0, 10, "play jazz now", least=0.0)
    assert group.accepted == [1, 0]

