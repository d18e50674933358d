"""Support decoding (intentvcs.core.support) and the decision layer that uses it."""

import json

import numpy as np
import pytest

from intentvcs.core.decision import Decision, DecisionError
from intentvcs.core.oos import ThresholdRule
from intentvcs.core.support import support_sets


def _logits(probs):
    return np.log(np.maximum(np.asarray(probs, dtype=np.float64), 1e-12))


def test_the_support_of_an_even_spread_is_the_set_whatever_its_size():
    probs = np.array([
        [1 / 3, 1 / 3, 1 / 3, 0, 0, 0, 0],            # one act, three versions
        [1 / 3, 1 / 9, 1 / 9, 1 / 9, 1 / 9, 1 / 9, 1 / 9],  # a composite and both parts' versions, as DialogVCS writes them
        [0.9, 0.05, 0.05, 0, 0, 0, 0],                # one label; the rest is noise
    ])
    assert support_sets(probs, 0.003).astype(int).tolist() == [
        [1, 1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1], [1, 0, 0, 0, 0, 0, 0]]


def test_a_smaller_noise_keeps_more_labels():
    # Two labels carry 0.8 evenly and a third 0.2: at noise 0.1 the third is noise, at 0.001 it belongs.
    probs = np.array([[0.4, 0.4, 0.2]])
    assert support_sets(probs, 0.1).tolist() == [[True, True, False]]
    assert support_sets(probs, 0.001).tolist() == [[True, True, True]]


def test_equal_probabilities_keep_label_order_and_a_row_is_never_empty():
    assert support_sets(np.array([[0.5, 0.5]]), 0.5).tolist() == [[True, False]]
    assert support_sets(np.array([[0.0, 1.0]]), 0.9).tolist() == [[False, True]]


@pytest.mark.parametrize("probs, noise, message", [
    (np.zeros(3), 0.01, "shape"), (np.zeros((2, 0)), 0.01, "shape"),
    (np.ones((1, 2)) / 2, 0.0, r"\(0, 1\)"), (np.ones((1, 2)) / 2, 1.0, r"\(0, 1\)"),
])
def test_bad_input_is_refused(probs, noise, message):
    with pytest.raises(ValueError, match=message):
        support_sets(probs, noise)


def test_a_decision_with_support_noise_accepts_the_support_where_thresholds_would_not():
    # With scales of 0.9 each part's rescaled confidence (0.3 / 0.9) and the composite's (0.4) stay
    # under 0.5, while the support, three labels sharing the mass, holds all three.
    labels = ("a&b", "a", "b", "c")
    probs = np.array([[0.4, 0.3, 0.3, 0.0], [0.0, 0.0, 0.0, 1.0]])
    thresholded = Decision(labels, label_scale=[1.0, 0.9, 0.9, 1.0])
    supported = Decision(labels, label_scale=[1.0, 0.9, 0.9, 1.0], support_noise=0.01)
    # Nothing reaches 0.5, so the row falls back to its top intent alone.
    assert thresholded.apply(_logits(probs)).accepted.tolist() == [[True, False, False, False],
                                                                   [False, False, False, True]]
    assert supported.apply(_logits(probs)).accepted.tolist() == [[True, True, True, False], [False, False, False, True]]


def test_support_decoding_keeps_the_oos_verdict_and_round_trips():
    # OOS score 1 - top confidence: 0.5 (in scope) and 0.66 (out of scope) against 0.6.
    decision = Decision(("a", "b", "c"), oos=ThresholdRule(0.6), support_noise=0.01)
    logits = _logits([[0.5, 0.5, 0.0], [0.34, 0.33, 0.33]])
    result = decision.apply(logits)
    assert result.out_of_scope.tolist() == [False, True]
    assert result.accepted.tolist() == [[True, True, False], [False, False, False]]
    copy = Decision.from_dict(json.loads(json.dumps(decision.to_dict())))
    assert copy.support_noise == 0.01
    assert np.array_equal(copy.apply(logits).accepted, result.accepted)


def test_a_decision_written_before_support_noise_existed_still_thresholds():
    stored = Decision(("a", "b")).to_dict()
    del stored["support_noise"]
    assert Decision.from_dict(stored).support_noise is None


@pytest.mark.parametrize("kwargs, message", [
    ({"support_noise": 0.0}, r"support_noise: .*\(0, 1\)"),
    ({"support_noise": "x"}, "support_noise"),
    ({"support_noise": 0.01, "activation": "sigmoid"}, "softmax"),
])
def test_support_noise_is_validated(kwargs, message):
    with pytest.raises(DecisionError, match=message):
        Decision(("a", "b"), **kwargs)
