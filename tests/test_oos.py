"""Out-of-scope rules and threshold choice (intentvcs.core.oos)."""

import json

import numpy as np
import pytest

from intentvcs.core.scoring import auroc
from intentvcs.core.oos import (
    DISTANCE_RETENTION, PART_RETENTION, DistanceRule, NoRule, ThresholdRule, TrainRule, bank_sample, choose_threshold,
    rule_from_dict, shrunk_covariance,
)


def test_choose_threshold_keeps_the_target_in_scope_share_without_oos_rows():
    scores = np.arange(20, dtype=float)
    t = choose_threshold(scores, retention=0.95)
    assert t == 18.5 and np.mean(scores <= t) == 0.95  # halfway from the last row kept to the next


def test_choose_threshold_maximises_accuracy_with_oos_as_a_class():
    scores = np.array([0.1, 0.2, 0.3, 0.65, 0.6, 0.7, 0.8])
    is_oos = np.array([False] * 4 + [True] * 3)
    # Cut between 0.3 and 0.6: 3 in-scope kept + 3 OOS rejected = 6 of 7, the best.
    assert choose_threshold(scores, is_oos) == pytest.approx(0.45)
    # If the 0.3 row is a wrong prediction anyway, rejecting it costs nothing: the
    # best plateau now starts lower, and ties go to the lowest cut.
    correct = np.array([True, True, False, True, True, True, True])
    assert choose_threshold(scores, is_oos, correct) == pytest.approx(0.25)


def test_threshold_rule_rejects_when_no_confidence_reaches_tau():
    rule = ThresholdRule(threshold=0.5)  # tau = 0.5
    conf = np.array([[0.9, 0.2], [0.3, 0.1], [0.5, 0.0]])
    out, score = rule.judge(conf)
    assert out.tolist() == [False, True, False]  # exactly tau is in scope
    assert score == pytest.approx([0.1, 0.7, 0.5])


def test_threshold_rule_fit_without_oos_uses_retention():
    rng = np.random.default_rng(0)
    conf = rng.random((200, 4))
    rule = ThresholdRule.fit(conf, retention=0.9)
    assert np.mean(~rule.judge(conf)[0]) >= 0.9
    assert np.mean(~rule.judge(conf)[0]) < 0.91


def _clusters(rng, n_per_class, centres, spread=0.3):
    x = np.concatenate([c + spread * rng.normal(size=(n_per_class, centres.shape[1])) for c in centres])
    return x, np.repeat(np.arange(len(centres)), n_per_class)


def test_distance_rule_ranks_outliers_above_inliers():
    rng = np.random.default_rng(0)
    centres = np.eye(3, 8) * 4.0 + 1.0
    train_x, train_y = _clusters(rng, 40, centres)
    valid_x, _ = _clusters(rng, 20, centres)
    outliers = rng.normal(size=(15, 8)) * 3.0 - 4.0
    rule = DistanceRule.fit(train_x, train_y, valid_x, normalize=False)
    in_scores, out_scores = rule.distances(valid_x), rule.distances(outliers)
    assert out_scores.min() > in_scores.max()
    assert auroc(np.r_[in_scores, out_scores], np.r_[np.zeros(60, bool), np.ones(15, bool)]) == 1.0
    # The threshold keeps DISTANCE_RETENTION (98 %) of in-scope validation rows.
    assert np.mean(in_scores <= rule.threshold) >= DISTANCE_RETENTION
    assert rule.judge(np.empty((15, 0)), outliers)[0].all()


def _two_layer_data(rng):
    """Final-layer clusters where outliers look in scope; the middle layer tells them apart."""
    centres = np.eye(3, 6) * 4.0
    train_x, train_y = _clusters(rng, 40, centres)
    valid_x, _ = _clusters(rng, 30, centres)
    mid_centres = rng.normal(size=(3, 6)) * 3.0
    train_mid, _ = _clusters(rng, 40, mid_centres, spread=0.2)
    valid_mid, _ = _clusters(rng, 30, mid_centres, spread=0.2)
    outliers_x, _ = _clusters(rng, 5, centres)  # in scope by the final layer
    outliers_mid = -mid_centres.mean(axis=0) + rng.normal(size=(15, 6))
    return train_x, train_y, valid_x, train_mid, valid_mid, outliers_x, outliers_mid


def test_neighbour_term_catches_outliers_the_final_layer_misses():
    rng = np.random.default_rng(7)
    train_x, train_y, valid_x, train_mid, valid_mid, out_x, out_mid = _two_layer_data(rng)
    alone = DistanceRule.fit(train_x, train_y, valid_x, normalize=False)
    both = DistanceRule.fit(train_x, train_y, valid_x, train_mid, valid_mid, normalize=False)
    labels = np.r_[np.zeros(len(valid_x), bool), np.ones(len(out_x), bool)]
    assert auroc(np.r_[alone.distances(valid_x), alone.distances(out_x)], labels) < 0.8
    scores = np.r_[both.score(None, valid_x, valid_mid), both.score(None, out_x, out_mid)]
    assert auroc(scores, labels) == 1.0
    assert both.judge(None, out_x, out_mid)[0].all()
    # Both terms are standardised on the validation rows, so their sum is centred there.
    assert np.mean(both.score(None, valid_x, valid_mid)) == pytest.approx(0.0, abs=1e-3)
    assert np.mean(both.score(None, valid_x, valid_mid) <= both.threshold) >= DISTANCE_RETENTION
    with pytest.raises(ValueError, match="middle layer"):
        both.score(None, valid_x)


def test_neighbour_bank_round_trips_through_json_exactly():
    rng = np.random.default_rng(8)
    train_x, train_y, valid_x, train_mid, valid_mid, out_x, out_mid = _two_layer_data(rng)
    rule = DistanceRule.fit(train_x, train_y, valid_x, train_mid, valid_mid)
    d = json.loads(json.dumps(rule.to_dict()))
    assert d["bank"]["dtype"] == "float16" and d["bank"]["shape"] == [120, 6]
    copy = rule_from_dict(d)
    assert copy.to_dict() == rule.to_dict()
    assert np.array_equal(copy.score(None, out_x, out_mid), rule.score(None, out_x, out_mid))
    for broken, message in ((dict(d, scales=None), "go together"),
                            (dict(d, bank={**d["bank"], "shape": [121, 6]}), "bytes"),
                            (dict(d, bank={**d["bank"], "base64": "not base64!"}), "base64"),
                            (dict(d, scales=[[0.0, 1.0], [0.0, 0.0]]), "std > 0")):
        with pytest.raises(ValueError, match=message):
            rule_from_dict(broken)


def test_bank_sample_is_stratified_and_capped():
    targets = np.r_[np.zeros(1000, int), np.ones(3, int)]
    rows = bank_sample(targets, max_rows=101)
    assert np.all(np.diff(rows) > 0) and len(rows) == 101  # at most max_rows, never more
    assert 1 in targets[rows]  # the rare class keeps a neighbour
    assert np.array_equal(bank_sample(targets[:50], max_rows=101), np.arange(50))


def test_distance_matches_a_per_class_loop():
    rng = np.random.default_rng(1)
    train_x, train_y = _clusters(rng, 30, rng.normal(size=(4, 6)))
    rule = DistanceRule.fit_statistics(train_x, train_y, normalize=False)
    queries = rng.normal(size=(5, 6))
    brute = [min(np.sqrt((q - m) @ rule.precision @ (q - m)) for m in rule.means) for q in queries]
    assert rule.distances(queries) == pytest.approx(brute)


def test_distance_rule_ignores_the_norm_when_normalising():
    rng = np.random.default_rng(2)
    train_x, train_y = _clusters(rng, 20, rng.normal(size=(3, 5)))
    rule = DistanceRule.fit_statistics(train_x, train_y)
    q = rng.normal(size=(2, 5))
    assert rule.distances(q * 10.0) == pytest.approx(rule.distances(q))
    with pytest.raises(ValueError, match="pooled"):
        rule.score(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"\[N, 5\]"):
        rule.distances(np.zeros((2, 4)))


def test_shrunk_covariance_extremes():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(50, 4)) * [1.0, 2.0, 3.0, 4.0]
    x -= x.mean(axis=0)
    full, weight = shrunk_covariance(x, 1.0)
    assert weight == 1.0 and full == pytest.approx(np.eye(4) * np.trace(x.T @ x / 50) / 4)
    _, lw = shrunk_covariance(x)
    assert 0.0 < lw < 1.0
    # Fewer rows than dimensions still gives an invertible matrix.
    cov, _ = shrunk_covariance(rng.normal(size=(3, 10)), 0.0)
    assert np.linalg.matrix_rank(cov) == 10


def test_train_rule_needs_oos_strictly_on_top():
    rule = TrainRule.fit(["a", "oos", "b"])
    assert rule.index == 1
    conf = np.array([[0.2, 0.7, 0.1], [0.5, 0.5, 0.0], [0.6, 0.3, 0.1]])
    assert rule.judge(conf)[0].tolist() == [True, False, False]
    with pytest.raises(ValueError, match="oos"):
        TrainRule.fit(["a", "b"])


def test_no_rule_never_rejects():
    assert not NoRule().judge(np.zeros((3, 2)))[0].any()


@pytest.mark.parametrize("rule", [
    NoRule(), ThresholdRule(0.37), ThresholdRule(0.37, 0.2), TrainRule(2),
    DistanceRule.fit_statistics(np.random.default_rng(4).normal(size=(30, 3)), np.arange(30) % 3),
])
def test_rules_round_trip_through_json(rule):
    copy = rule_from_dict(json.loads(json.dumps(rule.to_dict())))
    assert type(copy) is type(rule) and copy.to_dict() == rule.to_dict()
    conf, pooled = np.random.default_rng(5).random((4, 3)), np.random.default_rng(6).normal(size=(4, 3))
    assert np.array_equal(copy.score(conf, pooled), rule.score(conf, pooled))


@pytest.mark.parametrize("d, message", [
    ({"rule": "magic"}, "expected an object"),
    ([], "expected an object"),
    ({"rule": "threshold"}, "missing key"),
    ({"rule": "threshold", "threshold": "0.5"}, "finite number"),
    ({"rule": "threshold", "threshold": 0.5, "part_threshold": "nan"}, "part_threshold"),
    ({"rule": "train", "index": -1}, "non-negative"),
    ({"rule": "distance", "threshold": 1.0, "normalize": True, "shrinkage": 0.1,
      "means": [[0.0, 1.0]], "precision": [[1.0, 0.0, 0.0]]}, "precision"),
])
def test_bad_rule_dicts_raise(d, message):
    with pytest.raises(ValueError, match=message):
        rule_from_dict(d)


def test_part_cut_keeps_the_part_retention_of_in_scope_rows_and_never_exceeds_the_threshold():
    rng = np.random.default_rng(7)
    centres = np.eye(3, 8) * 4.0 + 1.0
    train_x, train_y = _clusters(rng, 40, centres)
    valid_x, _ = _clusters(rng, 100, centres)
    rule = DistanceRule.fit(train_x, train_y, valid_x, normalize=False)
    scores = rule.distances(valid_x)
    assert rule.part_threshold < rule.threshold
    assert np.mean(~rule.part_out_of_scope(scores)) == pytest.approx(PART_RETENTION, abs=0.004)
    assert np.mean(~rule.judge(valid_x, valid_x)[0]) >= DISTANCE_RETENTION
    assert rule_from_dict(json.loads(json.dumps(rule.to_dict()))).part_threshold == rule.part_threshold
    # A retention above the whole text's leaves the part cut at the threshold.
    assert DistanceRule.fit(train_x, train_y, valid_x, normalize=False,
                            part_retention=0.999).part_threshold == rule.threshold

    conf = rng.random((300, 4))
    is_oos = np.arange(300) < 30
    fitted = ThresholdRule.fit(conf, is_oos, part_retention=0.8)
    in_scope = fitted.score(conf)[~is_oos]
    assert fitted.part_threshold <= fitted.threshold
    assert np.mean(~fitted.part_out_of_scope(in_scope)) == pytest.approx(0.8, abs=0.004)


def test_rules_without_a_part_cut_judge_parts_as_whole_texts():
    scores = np.array([0.1, 0.5, 0.9])
    old = rule_from_dict({"rule": "threshold", "threshold": 0.5})  # fitted before the part cut existed
    assert old.part_threshold is None and "part_threshold" not in old.to_dict()
    assert old.part_out_of_scope(scores).tolist() == [False, False, True]
    assert ThresholdRule(0.5, 0.2).part_out_of_scope(scores).tolist() == [False, True, True]
