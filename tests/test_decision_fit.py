"""fit_decision reads its knobs from a DecisionConfig: the threshold rule."""

from __future__ import annotations

import numpy as np
import pytest

from intentvcs.core.dataio import Example
from intentvcs.core.outputs import GraphOutputs
from intentvcs.core.relations import Duplicate, LabelRelations
from intentvcs.core.support import support_sets
from intentvcs.core.thresholds import DEFAULT_THRESHOLD, fit_thresholds
from intentvcs.training.config import DecisionConfig
from intentvcs.training.decision_fit import fit_decision, observed_matrix

LABELS = ["a", "b", "c"]


def validation(n: int = 120, seed: int = 0) -> tuple[list[Example], GraphOutputs]:
    """Rows with full gold sets (some carry two labels) and noisy logits that favour their labels."""
    rng = np.random.default_rng(seed)
    gold = rng.random((n, len(LABELS))) < 0.4
    gold[~gold.any(axis=1), 0] = True
    rows = [Example(f"row {i}", tuple(l for l, on in zip(LABELS, gold[i]) if on)) for i in range(n)]
    logits = np.where(gold, 1.5, -1.5) + rng.normal(0, 1.5, gold.shape)
    pooled = rng.normal(size=(n, 4))
    return rows, GraphOutputs(logits, pooled, pooled)


def test_the_global_rule_keeps_the_default_threshold_and_reports_nothing():
    rows, outputs = validation()
    decision, report = fit_decision(LABELS, "sigmoid", rows, outputs, rows, None, DecisionConfig(oos_rule="none"))
    assert decision.thresholds.tolist() == [DEFAULT_THRESHOLD] * len(LABELS)
    assert set(report) == {"calibration", "oos"}


def test_the_per_label_rule_tunes_on_the_validation_gold_sets():
    rows, outputs = validation()
    config = DecisionConfig(oos_rule="none", threshold_rule="per_label_f1")
    decision, report = fit_decision(LABELS, "sigmoid", rows, outputs, rows, None, config)
    expected = fit_thresholds(decision.confidences(outputs.logits), observed_matrix(rows, LABELS), "per_label_f1")
    assert decision.thresholds.tolist() == pytest.approx(expected.tolist())
    assert decision.thresholds.tolist() != [DEFAULT_THRESHOLD] * len(LABELS)
    assert report["thresholds"] == {"rule": "per_label_f1",
                                    "values": dict(zip(LABELS, np.round(expected, 4).tolist()))}


def test_discovered_relations_close_the_fitted_decision():
    """Rows observed as b always have a accepted too (b is a subset of a): with discovery on, the
    decision accepts a wherever it accepts b, and the report lists what was found."""
    rng = np.random.default_rng(1)
    n = 90
    observed = np.repeat(np.eye(len(LABELS), dtype=bool), n // len(LABELS), axis=0)
    logits = np.where(observed, 3.0, -3.0) + rng.normal(0, 0.2, observed.shape)
    logits[observed[:, 1], 0] = 3.0   # b rows: a is accepted as well
    rows = [Example(f"row {i}", (LABELS[int(observed[i].argmax())],)) for i in range(n)]
    outputs = GraphOutputs(logits, rng.normal(size=(n, 4)), rng.normal(size=(n, 4)))
    plain, report = fit_decision(LABELS, "sigmoid", rows, outputs, rows, None, DecisionConfig(oos_rule="none"))
    assert plain.relations is None and "discovered_relations" not in report
    config = DecisionConfig(oos_rule="none", discover_relations=0.9)
    decision, report = fit_decision(LABELS, "sigmoid", rows, outputs, rows, None, config)
    assert report["discovered_relations"] == [{"type": "subset", "child": "b", "parent": "a"}]
    # A b with a under its cut is closed up to a.
    accepted = decision.apply(np.array([[-3.0, 3.0, -3.0]])).accepted
    assert accepted.tolist() == [[True, True, False]]


def test_support_noise_is_stored_in_the_fitted_decision_and_refused_for_sigmoid_outputs():
    rows, outputs = validation()
    # Softmax: the first label of each row is its written one.
    written = [Example(row.text, row.labels[:1]) for row in rows]
    config = DecisionConfig(oos_rule="none", support_noise=0.003)
    decision, report = fit_decision(LABELS, "softmax", written, outputs, written, outputs, config)
    assert decision.support_noise == 0.003 and report["support_noise"] == 0.003
    probs = np.exp(outputs.logits / decision.temperature)
    probs /= probs.sum(axis=1, keepdims=True)
    assert np.array_equal(decision.apply(outputs.logits).accepted, support_sets(probs, 0.003))
    with pytest.raises(ValueError, match="softmax"):
        fit_decision(LABELS, "sigmoid", rows, outputs, rows, None, config)


def test_under_support_decoding_duplicates_known_and_found_are_decided_as_one_intent():
    labels = ["a", "a_v1", "b", "c"]
    rng = np.random.default_rng(0)
    # Turns of intent A are written a or a_v1 (its two names), turns of b as b, of c as c; a and a_v1 share
    # one logit per row, so their probabilities keep one ratio.
    intent = np.repeat([0, 1, 2], 40)
    written = np.where(intent == 0, np.tile([0, 1], 60), intent + 1)
    logits = np.full((120, 4), -2.0)
    logits[intent == 0, :2] = 2.0 + rng.normal(0, 0.3, size=(40, 1))
    logits[intent == 1, 2] = 2.0
    logits[intent == 2, 3] = 2.0
    logits += rng.normal(0, 0.3, size=logits.shape) * (np.arange(4) >= 2)
    rows = [Example(f"row {i}", (labels[k],)) for i, k in enumerate(written)]
    outputs = GraphOutputs(logits, logits, logits)
    config = DecisionConfig(oos_rule="none", support_noise=0.003, discover_relations=0.8)
    decision, report = fit_decision(labels, "softmax", rows, outputs, rows, outputs, config)
    assert decision.support_intents == (("a", "a_v1"),) and report["support_intents"] == [["a", "a_v1"]]
    assert {"type": "duplicate", "a": "a", "b": "a_v1"} in report["discovered_relations"]
    # A row that reads a_v1 faintly still accepts it with a.
    faint = np.log(np.array([[0.47, 0.02, 0.5, 0.01]])) * decision.temperature
    assert decision.apply(faint).accepted.tolist() == [[True, True, True, False]]
    # Known duplicates count without discovery.
    known = LabelRelations(labels=tuple(labels), relations=(Duplicate("b", "c"),))
    decision, report = fit_decision(labels, "softmax", rows, outputs, rows, outputs,
                                    DecisionConfig(oos_rule="none", support_noise=0.003), relations=known)
    assert decision.support_intents == (("b", "c"),) and report["support_intents"] == [["b", "c"]]
    # Thresholds read no intents.
    decision, report = fit_decision(labels, "softmax", rows, outputs, rows, outputs,
                                    DecisionConfig(oos_rule="none"), relations=known)
    assert decision.support_intents is None and "support_intents" not in report
