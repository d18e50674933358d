"""Defects found by reviews of the pure-numpy decision layer (``intentvcs.core``: decision, calibration,
thresholds, oos, support, relations, relation discovery, scoring, spelling, evaluation), each reproduced by a
test (or more) that failed first: non-finite inputs, cover order, quantile shares, decomposed words, bank
samples, auroc's input, accuracy under the "train" rule, and relations naming the OOS verdict or held twice."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest

from intentvcs.core.calibration import fit_temperature
from intentvcs.core.dataio import Example
from intentvcs.core.decision import Decision, DecisionError
from intentvcs.core.evaluation import evaluate
from intentvcs.core.oos import DistanceRule, ThresholdRule, TrainRule, bank_sample
from intentvcs.core.outputs import GraphOutputs
from intentvcs.core.relations import Cover, LabelRelations
from intentvcs.core.scoring import auroc
from intentvcs.core.spelling import Spelling
from intentvcs.core.thresholds import fit_thresholds


# -- 1. non-finite inputs are refused, not answered "in scope, first label" ----------------------------------

@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_logits_are_refused(bad):
    decision = Decision(("a", "b", "c"), oos=ThresholdRule(0.5))
    logits = np.zeros((3, 3))
    logits[1, 2] = bad
    with pytest.raises(DecisionError, match=r"logits: 1 of 3 row\(s\) hold non-finite"):
        decision.apply(logits)
    with pytest.raises(DecisionError, match="logits"):
        decision.confidences(np.full((2, 3), bad))
    assert decision.apply(np.zeros((2, 3))).accepted.shape == (2, 3)  # finite rows still decide


def _distance_rule(bank: bool) -> DistanceRule:
    rng = np.random.default_rng(0)
    train, targets, valid = rng.normal(size=(120, 8)), rng.integers(0, 3, 120), rng.normal(size=(40, 8))
    if not bank:
        return DistanceRule.fit(train, targets, valid)
    return DistanceRule.fit(train, targets, valid, rng.normal(size=(120, 8)), rng.normal(size=(40, 8)))


def test_non_finite_embeddings_the_distance_rule_reads_are_refused():
    rng = np.random.default_rng(1)
    logits, pooled, mid = rng.normal(size=(4, 3)), rng.normal(size=(4, 8)), rng.normal(size=(4, 8))
    bad = pooled.copy()
    bad[[0, 2], 1] = np.nan
    plain = Decision(("a", "b", "c"), oos=_distance_rule(bank=False))
    with pytest.raises(DecisionError, match=r"pooled: 2 of 4 row\(s\) hold non-finite"):
        plain.apply(logits, bad)
    plain.apply(logits, pooled, bad)  # no bank: the middle layer is not read
    banked = Decision(("a", "b", "c"), oos=_distance_rule(bank=True))
    bad_mid = mid.copy()
    bad_mid[3, 0] = np.inf
    with pytest.raises(DecisionError, match=r"pooled_mid: 1 of 4 row"):
        banked.apply(logits, pooled, bad_mid)
    assert banked.apply(logits, pooled, mid).oos_score.shape == (4,)


def test_fit_temperature_refuses_non_finite_logits():
    logits = np.array([[np.nan, 1.0], [0.0, 1.0], [2.0, 0.0]])
    with pytest.raises(ValueError, match=r"logits: 1 of 3 row\(s\) hold non-finite"):
        fit_temperature(logits, np.array([0, 1, 0]), "softmax")
    with pytest.raises(ValueError, match="non-finite"):
        fit_temperature(np.where(np.isnan(logits), np.inf, logits), np.eye(2, dtype=int)[[0, 1, 0]], "sigmoid")


# -- 2. nested covers complete whatever their order -----------------------------------------------------------

@pytest.mark.parametrize("inner_first", [False, True])
def test_nested_covers_complete_in_either_order(inner_first):
    labels = ("x", "x_a", "x_b", "x_a_1", "x_a_2")
    covers = [Cover("x", ("x_a", "x_b")), Cover("x_a", ("x_a_1", "x_a_2"))]
    relations = LabelRelations(labels, tuple(covers[::-1] if inner_first else covers))
    decision = Decision(labels, relations=relations)
    logits = np.array([[5.0, 1.0, 0.5, 0.2, 0.1],    # x alone: x_a, then x_a_1
                       [5.0, 0.5, 1.0, 0.2, 0.1],    # x alone, x_b the likelier child: no inner cover
                       [-5.0, -5.0, -5.0, 5.0, 0.3],  # x_a_1 alone: a child implies its parent
                       [5.0, 5.0, -5.0, 0.1, 0.3]])  # x and x_a: x_a_2
    accepted = decision.apply(logits).accepted
    answers = [[label for label, on in zip(labels, row) if on] for row in accepted]
    assert answers == [["x", "x_a", "x_a_1"], ["x", "x_b"], ["x", "x_a", "x_a_1"], ["x", "x_a", "x_a_2"]]


# -- 3. observed_quantile leaves at most the promised share of written rows unaccepted -------------------------

@pytest.mark.parametrize("quantile", [0.1, 0.2, 0.25, 1 / 3])
def test_observed_quantile_keeps_its_promise_for_every_size(quantile):
    rng = np.random.default_rng(2)
    for n in range(20, 121):
        conf = rng.random((n, 1)) * 0.45
        cut = fit_thresholds(conf, np.ones((n, 1), bool), rule="observed_quantile", quantile=quantile)[0]
        assert np.mean(conf[:, 0] < cut) <= quantile + 1e-12, n
        # Where the interpolated quantile already kept the promise, it is the cut, as before, unless it is one
        # row's own confidence (then halfway down to the next lower row: the same rows accepted).
        old = np.quantile(conf[:, 0], quantile)
        if np.mean(conf[:, 0] < old) <= quantile and old not in conf[:, 0]:
            assert cut == old, n


def test_observed_quantile_at_22_rows_leaves_4_not_5():
    conf = np.linspace(0.05, 0.45, 22)[:, None]
    cut = fit_thresholds(conf, np.ones((22, 1), bool), rule="observed_quantile")[0]
    assert np.count_nonzero(conf[:, 0] < cut) == 4


# -- 4. decomposed (NFD) words are words, looked up composed ---------------------------------------------------

@pytest.fixture(scope="module")
def spelling() -> Spelling:
    return Spelling({"play": 5, "some": 9, "music": 3, "resume": 2, "naive": 1, "café": 2})


@pytest.mark.parametrize("text", ["résumé my playlist", "play some músik", "PLÁY Café musik", "näive question",
                                  "Ünïcödé plya"])
def test_nfd_and_nfc_text_get_the_same_corrections_at_valid_offsets(spelling, text):
    nfc, nfd = unicodedata.normalize("NFC", text), unicodedata.normalize("NFD", text)
    assert nfc != nfd
    a, b = spelling.rewrite(nfc), spelling.rewrite(nfd)
    assert unicodedata.normalize("NFC", b.text) == a.text
    assert [nfd[s:e] for s, e, _, _ in b.edits] == [unicodedata.normalize("NFD", nfc[s:e]) for s, e, _, _ in a.edits]
    for rewrite, sent in ((a, nfc), (b, nfd)):
        o = n = 0
        for start, end, new_start, new_end in rewrite.edits:
            assert sent[o:start] == rewrite.text[n:new_start]  # untouched between edits
            o, n = end, new_end
        assert sent[o:] == rewrite.text[n:]
        for s in range(len(rewrite.text) + 1):
            lo, hi = rewrite.to_original(s, len(rewrite.text))
            assert 0 <= lo <= hi == len(sent)


def test_a_decomposed_word_is_not_split_at_its_accents(spelling):
    text = "re\u0301sume\u0301 my playlist"
    assert spelling.rewrite(text).text == text  # was "résomé": "sume" corrected alone


# -- 5. bank_sample never exceeds max_rows ---------------------------------------------------------------------

def test_bank_sample_holds_at_most_max_rows():
    assert len(bank_sample(np.repeat([0, 1, 2], 10_000), 20_000)) == 20_000
    singles = bank_sample(np.arange(30), 20)
    assert len(singles) == 20 and len(np.unique(singles)) == 20
    rng = np.random.default_rng(3)
    for _ in range(200):
        targets = rng.integers(0, rng.integers(1, 60), rng.integers(1, 400)) ** 2
        max_rows = int(rng.integers(1, 300))
        rows = bank_sample(targets, max_rows)
        assert len(rows) == min(len(targets), max_rows) and np.all(np.diff(rows) > 0)
        if len(np.unique(targets)) <= max_rows:
            assert set(targets[rows]) == set(targets)  # every class keeps a row


def test_bank_sample_with_more_classes_than_rows_keeps_the_largest_classes():
    targets = np.r_[np.zeros(5, int), np.ones(4, int), np.arange(2, 12)]
    assert sorted(set(targets[bank_sample(targets, 3)])) == [0, 1, 2]
    assert np.array_equal(bank_sample(targets, len(targets)), np.arange(len(targets)))


# -- 6. auroc names bad input --------------------------------------------------------------------------------

def test_auroc_refuses_nan_scores_and_a_length_mismatch():
    with pytest.raises(ValueError, match="1 of 4 score"):
        auroc(np.array([0.1, np.nan, 0.3, 0.2]), np.array([1, 0, 1, 0], bool))
    with pytest.raises(ValueError, match="one length"):
        auroc(np.array([0.1, 0.2, 0.3]), np.array([1, 0], bool))
    assert auroc(np.array([0.1, np.inf]), np.array([False, True])) == 1.0


# -- 7. accuracy under the train rule reads the top intent, not the OOS column ----------------------------------

def test_accuracy_reads_the_top_intent_not_the_oos_class_of_the_train_rule():
    """``accuracy`` and ``top_accuracy`` ignore the OOS verdict (evaluate's docstring): a row is scored by its
    top intent. Under the rule "train" the ``"oos"`` column is the verdict, not an intent, so a row whose
    ``"oos"`` confidence is highest is still scored by its most confident intent (the one the top fallback
    would answer), as rows rejected by the threshold or distance rule are."""
    decision = Decision(("play", "book", "oos"), oos=TrainRule(2))
    logits = np.array([[2.0, 0.0, 3.0],    # oos on top (judged OOS); its top intent, play, is gold
                       [0.0, 3.0, -1.0]],  # book on top; gold play: wrong
                      dtype=np.float32)
    pooled = np.zeros((2, 2), dtype=np.float32)
    rows = [Example("a", ("play",)), Example("b", ("play",))]
    figures = evaluate(decision, GraphOutputs(logits, pooled, pooled), rows, include_tables=False)
    assert figures["accuracy"] == pytest.approx(0.5)
    assert figures["top_accuracy"] == pytest.approx(0.5)
    # The verdict still counts where the docstring says it does: the row judged OOS answered nothing.
    assert figures["exact_match"] == 0.0


# -- 8. relations: none names the OOS verdict, none is added twice ----------------------------------------------

def test_a_relation_naming_the_oos_verdict_is_refused():
    """A relations file with "a subset of oos" made an in-scope row accept "oos" beside "a", which the
    module says never happens: "oos" is the train rule's verdict, no intent."""
    from intentvcs.core.decision import Decision, DecisionError
    from intentvcs.core.relations import LabelRelations, Subset

    relations = LabelRelations(labels=("a", "b", "oos"), relations=(Subset(child="a", parent="oos"),))
    with pytest.raises(DecisionError, match="names 'oos', the out-of-scope verdict"):
        Decision(["a", "b", "oos"], activation="softmax", relations=relations)


def test_extending_relations_adds_no_relation_it_already_holds_written_otherwise():
    """Duplicate(b, a) was added beside a known Duplicate(a, b): "the relations it lacks" compared the
    dataclasses field by field."""
    from intentvcs.core.relations import Composite, Duplicate, LabelRelations, extend_relations

    known = LabelRelations(labels=("a", "b", "c"), relations=(Duplicate("a", "b"), Composite("c", ("a", "b"))))
    extended = extend_relations(known, ["a", "b", "c"], [Duplicate("b", "a"), Composite("c", ("b", "a"))], {})
    assert extended.relations == known.relations
