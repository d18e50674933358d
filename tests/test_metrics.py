"""Multi-label and OOS metrics on hand-computed examples (intentvcs.core.scoring)."""

import numpy as np
import pytest

from intentvcs.core.scoring import (
    auroc, average_ranks, cooccurrence, fpr_at_retention, multilabel_metrics, oos_metrics, per_label_f1,
    per_label_table, retention_threshold,
)

PRED = np.array([[1, 1, 0], [0, 1, 0], [0, 0, 0]], dtype=bool)
GOLD = np.array([[1, 0, 0], [0, 1, 1], [0, 0, 0]], dtype=bool)


def test_multilabel_metrics_by_hand():
    m = multilabel_metrics(PRED, GOLD)
    # 2 true positives of 3 predicted and 3 gold; only the empty row matches exactly.
    assert m["precision"] == pytest.approx(2 / 3)
    assert m["recall"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx(2 / 3)
    assert m["exact_match"] == pytest.approx(1 / 3)
    assert m["n"] == 3


def test_per_label_table_by_hand():
    table = per_label_table(PRED, GOLD, ["a", "b", "c"])
    assert [row["label"] for row in table] == ["a", "b", "c"]
    assert (table[0]["precision"], table[0]["recall"], table[0]["f1"]) == (1.0, 1.0, 1.0)
    assert table[1]["precision"] == 0.5 and table[1]["recall"] == 1.0
    assert table[1]["f1"] == pytest.approx(2 / 3)
    assert (table[2]["f1"], table[2]["support"], table[2]["predicted"]) == (0.0, 1, 0)
    assert per_label_f1(PRED, GOLD) == pytest.approx([1.0, 2 / 3, 0.0])


def test_shape_mismatch_raises():
    with pytest.raises(ValueError):
        multilabel_metrics(PRED, GOLD[:, :2])


def test_cooccurrence_by_hand():
    pred = np.array([[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0]], dtype=bool)
    counts, conditional = cooccurrence(pred)
    assert counts.tolist() == [[3, 2, 1, 0], [2, 2, 1, 0], [1, 1, 1, 0], [0, 0, 0, 0]]
    assert conditional[0] == pytest.approx([1.0, 2 / 3, 1 / 3, 0.0])
    assert conditional[1] == pytest.approx([1.0, 1.0, 0.5, 0.0])
    assert conditional[3].tolist() == [0.0, 0.0, 0.0, 0.0]


def test_oos_metrics_by_hand():
    pred_oos = np.array([False, False, True, True, False])
    is_oos = np.array([False, False, False, True, True])
    correct = np.array([True, False, True, False, False])
    m = oos_metrics(pred_oos, is_oos, correct)
    # In scope: row 0 right, row 1 wrong, row 2 rejected -> 1/3.
    assert m["in_scope_accuracy"] == pytest.approx(1 / 3)
    assert m["oos_recall"] == 0.5 and m["oos_precision"] == 0.5 and m["oos_f1"] == 0.5
    assert (m["n_in_scope"], m["n_oos"]) == (3, 2)


def test_average_ranks_share_ties():
    assert average_ranks(np.array([10, 20, 10, 30])).tolist() == [1.5, 3.0, 1.5, 4.0]


def test_auroc_matches_brute_force_pair_count():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 6, 80).astype(float)  # many ties
    positive = rng.random(80) < 0.3
    pos, neg = scores[positive][:, None], scores[~positive][None, :]
    brute = ((pos > neg) + 0.5 * (pos == neg)).mean()
    assert auroc(scores, positive) == pytest.approx(brute)
    assert auroc(np.array([0.1, 0.9]), np.array([False, True])) == 1.0
    assert auroc(np.array([0.1, 0.9]), np.array([True, False])) == 0.0
    with pytest.raises(ValueError):
        auroc(scores, np.ones(80, bool))


def test_retention_threshold_and_fpr():
    in_scope = np.arange(1, 21, dtype=float)
    # 19 of 20 (95%) at or below 19; the float 0.95 * 20 must not round up to 20.
    assert retention_threshold(in_scope, 0.95) == 19.0
    assert retention_threshold(in_scope, 1.0) == 20.0
    scores = np.r_[in_scope, [5.0, 19.0, 25.0, 30.0]]
    is_oos = np.r_[np.zeros(20, bool), np.ones(4, bool)]
    assert fpr_at_retention(scores, is_oos, 0.95) == 0.5
