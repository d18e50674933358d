"""Temperature scaling and calibration figures (intentvcs.core.calibration)."""

import math

import numpy as np
import pytest

from intentvcs.core.calibration import (
    brier, calibration_report, expected_calibration_error, fit_temperature, nll, probabilities, top_label,
)


def _sample_softmax_labels(logits, temperature, rng):
    probs = probabilities(logits, "softmax", temperature)
    # Inverse-CDF sampling of one label per row.
    return (probs.cumsum(axis=1) < rng.random((len(probs), 1))).sum(axis=1).clip(max=probs.shape[1] - 1)


@pytest.mark.parametrize("t_true", [0.5, 2.5])
def test_fit_temperature_recovers_softmax_temperature(t_true):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4000, 10)) * 3.0
    targets = _sample_softmax_labels(logits, t_true, rng)
    t = fit_temperature(logits, targets, "softmax")
    assert abs(t - t_true) < 0.08 * t_true


def test_fit_temperature_recovers_sigmoid_temperature():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(3000, 5)) * 4.0
    targets = rng.random(logits.shape) < probabilities(logits, "sigmoid", 2.0)
    assert abs(fit_temperature(logits, targets, "sigmoid") - 2.0) < 0.15


def test_fit_temperature_minimises_nll():
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(500, 4)) * 5.0
    targets = _sample_softmax_labels(logits, 1.7, rng)
    t = fit_temperature(logits, targets, "softmax")
    assert 1.0 < t < 3.0  # an interior minimum, not a bound
    best = nll(logits, targets, "softmax", t)
    assert best <= nll(logits, targets, "softmax", t * 1.05)
    assert best <= nll(logits, targets, "softmax", t / 1.05)


def test_fit_temperature_stops_at_the_bound():
    # Labels independent of the logits: the best model is uniform, T -> infinity.
    logits = np.array([[10.0, 0.0], [0.0, 10.0]])
    assert fit_temperature(logits, np.array([1, 0]), "softmax", bounds=(0.5, 4.0)) == pytest.approx(4.0, rel=1e-3)


def test_nll_and_brier_by_hand():
    assert nll(np.zeros((1, 2)), np.array([0]), "softmax") == pytest.approx(math.log(2))
    assert nll(np.zeros((1, 1)), np.array([[1]]), "sigmoid") == pytest.approx(math.log(2))
    # sigmoid(2) = 0.8808 for a positive, 1 - sigmoid(-1) = 0.7311 for a negative.
    expected = -(math.log(1 / (1 + math.exp(-2))) + math.log(1 - 1 / (1 + math.exp(1)))) / 2
    assert nll(np.array([[4.0, -2.0]]), np.array([[1, 0]]), "sigmoid", temperature=2.0) == pytest.approx(expected)
    assert brier(np.array([[0.7, 0.3]]), np.array([0]), "softmax") == pytest.approx(0.18)
    assert brier(np.array([[0.7, 0.3]]), np.array([[1, 1]]), "sigmoid") == pytest.approx((0.09 + 0.49) / 2)


def test_ece_by_hand():
    conf = np.array([0.1, 0.4, 0.45, 0.9, 0.95])
    correct = np.array([False, True, False, True, True])
    # Bin (0, .5]: 1 correct vs 0.95 confidence; bin (.5, 1]: 2 vs 1.85 -> (0.05 + 0.15) / 5.
    assert expected_calibration_error(conf, correct, n_bins=2) == pytest.approx(0.04)
    assert expected_calibration_error(np.array([1.0]), np.array([True])) == 0.0
    assert expected_calibration_error(np.array([0.0]), np.array([True])) == pytest.approx(1.0)


def test_ece_bins_are_right_closed():
    conf, correct = np.array([0.5, 0.6]), np.array([True, False])
    # 0.5 belongs to (0, 0.5]: gaps 0.5 and 0.6 do not cancel (they would in one bin: 0.05).
    assert expected_calibration_error(conf, correct, n_bins=2) == pytest.approx(0.55)


def test_top_label():
    probs = np.array([[0.2, 0.8], [0.6, 0.4]])
    conf, correct = top_label(probs, np.array([1, 1]), "softmax")
    assert conf.tolist() == [0.8, 0.6] and correct.tolist() == [True, False]
    _, correct = top_label(probs, np.array([[1, 1], [0, 1]]), "sigmoid")
    assert correct.tolist() == [True, False]


def test_calibration_report_improves_a_miscalibrated_model():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(2000, 6)) * 4.0
    targets = _sample_softmax_labels(logits, 3.0, rng)
    t = fit_temperature(logits, targets, "softmax")
    report = calibration_report(logits, targets, "softmax", t)
    assert report["n"] == 2000 and report["temperature"] == t
    assert report["after"]["nll"] < report["before"]["nll"]
    assert report["after"]["ece"] < report["before"]["ece"]
    assert report["after"]["brier"] < report["before"]["brier"]


@pytest.mark.parametrize("targets, activation", [
    (np.array([0, 3]), "softmax"),          # index out of range
    (np.array([0.0, 1.0]), "softmax"),      # not integers
    (np.array([[1, 0, 0]]), "sigmoid"),     # wrong shape
    (np.array([0, 1]), "tanh"),             # unknown activation
])
def test_bad_targets_raise(targets, activation):
    with pytest.raises(ValueError):
        nll(np.zeros((2, 3)), targets, activation)
