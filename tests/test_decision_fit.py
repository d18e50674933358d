"""fit_decision reads its knobs from a DecisionConfig: the threshold rule."""

from __future__ import annotations

import numpy as np
import pytest

from intentvcs.core.dataio import Example
from intentvcs.core.outputs import GraphOutputs
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
