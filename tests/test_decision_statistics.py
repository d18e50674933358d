"""Review of the decision layer's statistics: retention cuts, quantile thresholds, temperature scaling and
the distance rule's fit-vs-serve space (intentvcs.core.{calibration, thresholds, oos, entity_floor}).

The tests pin properties checked by brute force. The last two: a retention or quantile cut placed exactly
on one validation row's score left that row's fate as served to rounding (PyTorch vs ONNX, batch
composition), and the stated share failed by one row; the cuts now lie halfway to the next row.
"""

import json

import numpy as np
import pytest

from intentvcs.core.calibration import TEMPERATURE_BOUNDS, fit_temperature, nll
from intentvcs.core.oos import (ROUNDING_MARGIN, DistanceRule, ThresholdRule, choose_threshold, part_threshold,
                                rule_from_dict)
from intentvcs.core.thresholds import fit_thresholds


# ------------------------------------------------------------------ retention cuts (no OOS rows)
@pytest.mark.parametrize("retention", [0.5, 0.9, 0.95, 0.98, 1.0])
def test_retention_cut_lies_between_the_last_row_it_keeps_and_the_next(retention):
    rng = np.random.default_rng(0)
    for n in list(range(1, 8)) + [19, 20, 21, 49, 50, 51, 152, 3000]:
        for kind in ("distinct", "ties", "equal"):
            scores = {"distinct": rng.random(n), "ties": np.round(rng.random(n), 1),
                      "equal": np.full(n, 0.3)}[kind]
            cut = choose_threshold(scores, retention=retention)
            assert np.mean(scores <= cut) >= retention - 1e-12, (n, kind)
            kept = scores[scores <= cut]
            # The last row kept is the smallest score keeping the share; the cut lies halfway to the next.
            assert not any(np.mean(scores <= s) >= retention - 1e-12 for s in kept[kept < kept.max()]), (n, kind)
            higher = scores[scores > cut]
            # None higher: a rounding margin above the last row kept, never on it (a served score of that row a
            # rounding error higher put it out of scope).
            assert cut == (kept.max() + higher.min()) / 2 if higher.size else \
                cut == kept.max() + ROUNDING_MARGIN * max(1.0, abs(kept.max()))


def test_part_cut_keeps_its_share_and_never_exceeds_the_whole_texts_cut():
    rng = np.random.default_rng(1)
    for n in (1, 2, 3, 5, 10, 152):
        scores = rng.random(n)
        whole = choose_threshold(scores, retention=0.98)
        part = part_threshold(scores, whole, 0.9)
        assert part <= whole and np.mean(scores <= part) >= 0.9
    # One row: the whole text's cut is a rounding margin above its score and the part cut is its own, kept both ways.
    whole = choose_threshold(np.array([2.0]), retention=0.98)
    assert whole == 2.0 + 2.0 * ROUNDING_MARGIN and 2.0 <= part_threshold(np.array([2.0]), whole) <= whole


def test_threshold_rule_without_oos_rows_keeps_the_retention_share_on_its_fitting_rows():
    rng = np.random.default_rng(2)
    for n in (1, 4, 20, 152):
        conf = rng.dirichlet(np.ones(5), size=n)
        rule = ThresholdRule.fit(conf, np.zeros(n, bool))
        kept = ~rule.judge(conf)[0]
        assert kept.mean() >= 0.95 and (~rule.part_out_of_scope(rule.score(conf))).mean() >= 0.9


# ------------------------------------------------------------------ observed_quantile
def test_observed_quantile_leaves_at_most_its_share_unaccepted_and_no_lower_than_needed():
    rng = np.random.default_rng(3)
    for n in range(1, 120):
        for q in (0.0, 0.1, 0.2, 0.25, 0.5):
            for ties in (False, True):
                written = rng.random(n) * 0.5
                if ties:
                    written = np.round(written, 1)
                t = fit_thresholds(written[:, None], np.ones((n, 1), bool), "observed_quantile",
                                   min_positives=1, quantile=q)[0]
                assert np.mean(written < t) <= q + 1e-12, (n, q, ties)
                assert t <= 0.5


def test_observed_quantile_leaves_labels_without_enough_written_rows_at_the_global_threshold():
    conf = np.full((30, 3), 0.1)
    observed = np.zeros((30, 3), bool)
    observed[:25, 0] = observed[25:, 1] = True  # label 1: 5 rows (< 20); label 2: none
    assert fit_thresholds(conf, observed, "observed_quantile").tolist() == [0.1, 0.5, 0.5]


# ------------------------------------------------------------------ temperature scaling, degenerate inputs
def test_temperature_on_degenerate_validation_sets():
    lo, hi = TEMPERATURE_BOUNDS
    # A single right row, and a set the model separates perfectly: NLL falls all the way to T -> 0.
    assert fit_temperature(np.array([[2.0, 0.0, 0.0]]), np.array([0]), "softmax") == pytest.approx(lo, rel=1e-4)
    logits = np.random.default_rng(4).normal(size=(50, 5))
    assert fit_temperature(logits, logits.argmax(1), "softmax") == pytest.approx(lo, rel=1e-4)
    # A single wrong row: T -> infinity.
    assert fit_temperature(np.array([[2.0, 0.0, 0.0]]), np.array([1]), "softmax") == pytest.approx(hi, rel=1e-4)
    # One class only, not separable: an interior minimum that beats its neighbours.
    rng = np.random.default_rng(5)
    z = rng.normal(size=(300, 4)) * 2 + np.array([1.0, 0, 0, 0])
    t = fit_temperature(z, np.zeros(300, int), "softmax")
    assert lo * 1.01 < t < hi / 1.01
    assert nll(z, np.zeros(300, int), "softmax", t) <= min(nll(z, np.zeros(300, int), "softmax", t * f)
                                                            for f in (0.99, 1.01))
    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError, match="non-finite"):
            fit_temperature(np.array([[bad, 0.0]]), np.array([0]), "softmax")


def test_sigmoid_temperature_reads_every_entry_of_the_label_matrix():
    rng = np.random.default_rng(6)
    z = rng.normal(size=(2000, 3)) * 3
    y = rng.random(z.shape) < 0.5 * (1 + np.tanh(0.5 * z / 1.5))
    t = fit_temperature(z, y, "sigmoid")
    assert abs(t - 1.5) < 0.12
    # Its NLL is per (row, label) entry: the mean binary cross-entropy.
    p = 0.5 * (1 + np.tanh(0.5 * z / t))
    assert nll(z, y, "sigmoid", t) == pytest.approx(float(-np.mean(np.where(y, np.log(p), np.log1p(-p)))))


# ------------------------------------------------------------------ distance rule: one space at fit and serve
@pytest.mark.parametrize("normalize", [True, False])
def test_distance_rule_scores_its_fitting_rows_as_served_after_a_json_round_trip(normalize):
    rng = np.random.default_rng(7)
    centres = rng.normal(size=(4, 16)) * 3
    train_y = np.r_[np.repeat(np.arange(3), 30), 3]  # label 3: a single training row
    train = centres[train_y] + rng.normal(size=(len(train_y), 16)) * (1 + 4 * rng.random((len(train_y), 1)))
    valid_y = np.repeat(np.arange(4), 10)
    valid = centres[valid_y] + rng.normal(size=(40, 16))
    train_mid, valid_mid = train + rng.normal(size=train.shape), valid + rng.normal(size=valid.shape)
    rule = DistanceRule.fit(train, train_y, valid, train_mid, valid_mid, normalize=normalize)
    assert len(rule.means) == 4  # the one-row label has its mean (its residual adds no variance)
    served = rule_from_dict(json.loads(json.dumps(rule.to_dict())))
    scores = served.score(None, valid, valid_mid)
    assert np.mean(scores <= served.threshold) >= 0.98
    assert np.mean(scores <= served.part_threshold) >= 0.9
    # The cut lies a rounding margin above the top fitted score (98% of 40 rows keeps them all): the same space
    # and scales at fit and serve, and no validation row a rounding error from the cut.
    top = scores.max()
    assert abs(served.threshold - (top + ROUNDING_MARGIN * max(1.0, abs(top)))) < 1e-9


# ------------------------------------------------------------------ no cut ON a row: fit and serve differ by rounding
_NOISE = 1e-9  # far below any gap between validation scores here; serving differs from fitting by ~1e-6


def test_a_retention_cut_survives_rounding_noise_between_fit_and_serve():
    scores = np.arange(20, dtype=float) / 20  # gaps of 0.05, noise 1e-9
    rule = ThresholdRule.fit(np.c_[1.0 - scores, np.zeros(20)], np.zeros(20, bool))
    served_conf = np.c_[1.0 - scores - _NOISE, np.zeros(20)]  # each row's confidence 1e-9 lower as served
    assert np.mean(~rule.judge(served_conf)[0]) >= 0.95
    assert np.mean(~rule.part_out_of_scope(rule.score(served_conf))) >= 0.9


def test_an_observed_quantile_cut_survives_rounding_noise_between_fit_and_serve():
    written = np.linspace(0.1, 0.45, 22)  # n = 22, q = 0.2: the cut is row 4's confidence (4 of 22 below)
    t = fit_thresholds(written[:, None], np.ones((22, 1), bool), "observed_quantile")[0]
    assert np.mean(written - _NOISE < t) <= 0.2
