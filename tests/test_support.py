"""Support decoding (intentvcs.core.support) and the decision layer that uses it."""

import itertools
import json

import numpy as np
import pytest

from intentvcs.core.decision import Decision, DecisionError
from intentvcs.core.oos import ThresholdRule
from intentvcs.core.support import _grouped_support, support_sets


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


def test_names_of_one_intent_are_decided_together():
    # Labels 1-3 are three names of one intent, 4-6 of another; 0 is a composite, 7 another intent.
    intents = np.array([0, 1, 1, 1, 2, 2, 2, 3])
    probs = np.array([
        # A composite turn: the composite holds a third, each act's names a ninth each, with noise.
        # Read label by label the stray 0.04 of intent 3 fits as an eighth label; read by intent it
        # would be a fourth intent among three that hold 0.96.
        [0.33, 0.12, 0.11, 0.10, 0.12, 0.11, 0.07, 0.04],
        # A name the model reads faintly (0.02, 0.01) joins its twin, since the intent holds half the mass.
        [0.47, 0.47, 0.02, 0.01, 0.01, 0.01, 0.005, 0.005],
    ])
    assert support_sets(probs, 0.003).astype(int).tolist() == [[1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0, 0, 0]]
    assert support_sets(probs, 0.003, intents).astype(int).tolist() == [[1, 1, 1, 1, 1, 1, 1, 0],
                                                                         [1, 1, 1, 1, 0, 0, 0, 0]]


def test_one_name_per_intent_is_the_flat_support():
    # The search over intents (one sort per set size) with every intent one name long finds the flat prefix.
    probs = np.random.default_rng(0).dirichlet(np.full(6, 0.3), size=300)
    for noise in (0.001, 0.01, 0.1):
        assert np.array_equal(_grouped_support(probs, np.ones(6), noise), support_sets(probs, noise))
        assert np.array_equal(support_sets(probs, noise, np.arange(6)[::-1].copy()), support_sets(probs, noise))


def test_the_grouped_support_is_the_best_set_of_intents():
    # Brute force over every set of intents, under the module docstring's score.
    rng = np.random.default_rng(1)
    intents = np.array([0, 0, 1, 2, 2, 2, 3])
    probs = rng.dirichlet(np.full(7, 0.4), size=200)
    names = np.bincount(intents)
    mass = np.stack([probs[:, intents == g].sum(axis=1) for g in range(4)], axis=1)
    for noise in (0.003, 0.05):
        chosen = support_sets(probs, noise, intents)
        for row in range(len(probs)):
            def score(members):
                k = len(members)
                return (sum(mass[row, g] * np.log(1 / (k * names[g])) for g in members)
                        + (1 - mass[row, list(members)].sum()) * np.log(noise))
            best = max(score(c) for k in range(1, 5) for c in itertools.combinations(range(4), k))
            picked = tuple(sorted(set(intents[chosen[row]])))
            assert np.isclose(score(picked), best)
            assert np.array_equal(chosen[row], np.isin(intents, picked))


@pytest.mark.parametrize("intents", [np.zeros(3, dtype=int), np.zeros(2), np.zeros((1, 2), dtype=int)])
def test_intents_must_name_one_integer_per_label(intents):
    with pytest.raises(ValueError, match="intents"):
        support_sets(np.ones((1, 2)) / 2, 0.01, intents)


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


def test_support_intents_decide_names_together_and_round_trip():
    labels = ("x", "x_v1", "y", "z")
    logits = _logits([[0.49, 0.02, 0.49, 0.0]])
    flat = Decision(labels, support_noise=0.003)
    grouped = Decision(labels, support_noise=0.003, support_intents=[["x", "x_v1"]])
    assert flat.apply(logits).accepted.tolist() == [[True, False, True, False]]
    assert grouped.apply(logits).accepted.tolist() == [[True, True, True, False]]
    copy = Decision.from_dict(json.loads(json.dumps(grouped.to_dict())))
    assert copy.support_intents == (("x", "x_v1"),)
    assert np.array_equal(copy.apply(logits).accepted, grouped.apply(logits).accepted)
    stored = flat.to_dict()
    del stored["support_intents"]  # written before the field existed: every label its own intent
    assert Decision.from_dict(stored).support_intents is None


@pytest.mark.parametrize("intents, message", [
    ([["x"]], "two or more"), ("xy", "list of label lists"), ([["x", "w"]], r"\['w'\] are not"),
    ([["x", "oos"]], "not intent labels"), ([["x", "y"], ["y", "z"]], "one group once"), ([["x", "x"]], "one group once"),
])
def test_support_intents_are_validated(intents, message):
    with pytest.raises(DecisionError, match=f"support_intents: .*{message}"):
        Decision(("x", "y", "z", "oos"), support_noise=0.01, support_intents=intents)
    with pytest.raises(DecisionError, match="set support_noise too"):
        Decision(("x", "y"), support_intents=[["x", "y"]])


@pytest.mark.parametrize("kwargs, message", [
    ({"support_noise": 0.0}, r"support_noise: .*\(0, 1\)"),
    ({"support_noise": "x"}, "support_noise"),
    ({"support_noise": 0.01, "activation": "sigmoid"}, "softmax"),
])
def test_support_noise_is_validated(kwargs, message):
    with pytest.raises(DecisionError, match=message):
        Decision(("a", "b"), **kwargs)


def test_a_benchmark_scores_a_reused_checkpoint_by_its_own_runs_decoding():
    """A bundle refitted with support decoding by another run (refit --support-noise) is scored "as trained"
    by its thresholds, and at the run's own noise when it has one."""
    from intentvcs.core.relation_discovery import decoding_at

    refitted = Decision(("a", "b"), support_noise=0.003, support_intents=(("a", "b"),))
    assert decoding_at(refitted, 0.0).support_noise is None and decoding_at(refitted, 0.0).support_intents is None
    assert decoding_at(refitted, None).to_dict() == decoding_at(refitted, 0.0).to_dict()
    assert decoding_at(Decision(("a", "b")), 0.01).support_noise == 0.01
