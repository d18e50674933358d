"""Multi-label and out-of-scope metrics from boolean matrices (pure numpy), and span-level entity scores.

Every figure is a fraction in [0, 1] (callers format percentages). A ratio
whose denominator is zero is 0.0, e.g. the precision of a label never
predicted. Conventions: ``pred`` and ``gold`` are bool ``[N, L]`` with columns
in label order; OOS scores are higher for "more out of scope"; ``is_oos`` marks
rows whose gold answer is out of scope.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np


def _ratio(num: float, den: float) -> float:
    return float(num) / float(den) if den else 0.0


def _f1(precision: float, recall: float) -> float:
    return _ratio(2.0 * precision * recall, precision + recall)


def _matrices(pred: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pred, gold = np.asarray(pred, dtype=bool), np.asarray(gold, dtype=bool)
    if pred.shape != gold.shape or pred.ndim != 2:
        raise ValueError(f"pred and gold must both be bool [N, L], got {list(pred.shape)} and {list(gold.shape)}")
    return pred, gold


def multilabel_metrics(pred: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """Micro precision/recall/F1 over all (row, label) decisions and exact match.

    Exact match is the fraction of rows whose predicted set equals the gold set
    (an out-of-scope row, gold all False, matches when nothing is predicted).
    Returns ``{"precision", "recall", "f1", "exact_match", "n"}``.
    """
    pred, gold = _matrices(pred, gold)
    tp = np.count_nonzero(pred & gold)
    precision = _ratio(tp, np.count_nonzero(pred))
    recall = _ratio(tp, np.count_nonzero(gold))
    exact = np.all(pred == gold, axis=1)
    return {
        "precision": precision,
        "recall": recall,
        "f1": _f1(precision, recall),
        "exact_match": float(exact.mean()) if len(exact) else 0.0,
        "n": int(len(pred)),
    }


def _label_counts(pred: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-label ``(true positives, predicted, support)``, each int ``[L]``."""
    pred, gold = _matrices(pred, gold)
    return (np.count_nonzero(pred & gold, axis=0), np.count_nonzero(pred, axis=0),
            np.count_nonzero(gold, axis=0))


def _f1_from_counts(tp: np.ndarray, n_pred: np.ndarray, support: np.ndarray) -> np.ndarray:
    # 2 tp / (predicted + support) is the harmonic mean of precision and recall.
    den = n_pred + support
    return np.divide(2.0 * tp, den, out=np.zeros(len(den)), where=den > 0)


def per_label_f1(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """F1 of every label, float ``[L]``; 0 for a label neither predicted nor gold."""
    return _f1_from_counts(*_label_counts(pred, gold))


def per_label_table(pred: np.ndarray, gold: np.ndarray, labels: Sequence[str]) -> list[dict[str, object]]:
    """One row per label: ``{"label", "precision", "recall", "f1", "support", "predicted"}``.

    ``support`` counts gold rows with the label, ``predicted`` rows predicting it.
    """
    tp, n_pred, support = _label_counts(pred, gold)
    if len(labels) != len(tp):
        raise ValueError(f"{len(labels)} labels for {len(tp)} columns")
    f1 = _f1_from_counts(tp, n_pred, support)
    return [
        {"label": label, "precision": _ratio(tp[k], n_pred[k]), "recall": _ratio(tp[k], support[k]),
         "f1": float(f1[k]), "support": int(support[k]), "predicted": int(n_pred[k])}
        for k, label in enumerate(labels)
    ]


def cooccurrence(pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Label co-occurrence of predictions: ``(counts, conditional)``, both ``[L, L]``.

    ``counts[i, j]`` = rows predicting both i and j (diagonal: rows predicting i), int64.
    ``conditional[i, j] = counts[i, j] / counts[i, i]``, the fraction of rows
    predicting i that also predict j (row-normalised by the row's own count, so
    the diagonal is 1; a never-predicted label's row is 0), float64.
    """
    pred = np.asarray(pred, dtype=bool)
    if pred.ndim != 2:
        raise ValueError(f"pred must be bool [N, L], got shape {list(pred.shape)}")
    as_int = pred.astype(np.int64)
    counts = as_int.T @ as_int
    own = np.diag(counts).astype(np.float64)
    conditional = np.divide(counts, own[:, None], out=np.zeros(counts.shape), where=own[:, None] > 0)
    return counts, conditional


# --------------------------------------------------------------------- OOS
def oos_metrics(pred_oos: np.ndarray, is_oos: np.ndarray, in_scope_correct: np.ndarray) -> dict[str, float]:
    """CLINC150-style figures for an OOS verdict per row (all arrays ``[N]``).

    ``pred_oos``         bool, the system said "out of scope".
    ``is_oos``           bool, the gold answer is out of scope.
    ``in_scope_correct`` bool, the intent prediction is right (the caller's
                         definition, e.g. exact match); read on in-scope rows only.
    ``in_scope_accuracy``: in-scope rows predicted correctly and not rejected.
    ``oos_recall`` / ``oos_precision`` / ``oos_f1``: OOS as the positive class.
    """
    pred_oos, is_oos, correct = (np.asarray(a, dtype=bool) for a in (pred_oos, is_oos, in_scope_correct))
    if not pred_oos.shape == is_oos.shape == correct.shape or pred_oos.ndim != 1:
        raise ValueError("pred_oos, is_oos and in_scope_correct must be equal-length 1-D arrays")
    in_scope = ~is_oos
    tp = np.count_nonzero(pred_oos & is_oos)
    precision = _ratio(tp, np.count_nonzero(pred_oos))
    recall = _ratio(tp, np.count_nonzero(is_oos))
    figures = {
        "oos_recall": recall,
        "oos_precision": precision,
        "oos_f1": _f1(precision, recall),
        "n_in_scope": int(np.count_nonzero(in_scope)),
        "n_oos": int(np.count_nonzero(is_oos)),
    }
    if in_scope.any():  # of no in-scope rows there is no accuracy (it read 0), as no other in-scope figure
        figures["in_scope_accuracy"] = _ratio(np.count_nonzero(correct & ~pred_oos & in_scope),
                                              np.count_nonzero(in_scope))
    return figures


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of ``values`` (``[N]``) with tied values sharing their mean rank."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    # Each run of equal values [start, end) gets rank (start + 1 + end) / 2.
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    ends = np.r_[starts[1:], len(values)]
    ranks = np.empty(len(values))
    ranks[order] = np.repeat((starts + 1 + ends) / 2.0, ends - starts)
    return ranks


def auroc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Area under the ROC curve: P(score of a positive > score of a negative), ties count 1/2.

    Rank-based (Mann–Whitney U). ``scores`` float ``[N]``, ``positive`` bool
    ``[N]`` (for OOS detection: the OOS rows). Raises ``ValueError`` when either
    class is empty, the two differ in shape, or a score is NaN (it has no rank).
    """
    scores, positive = np.asarray(scores, dtype=np.float64), np.asarray(positive, dtype=bool)
    if scores.ndim != 1 or scores.shape != positive.shape:
        raise ValueError(f"auroc needs scores and labels of one length, got shapes {list(scores.shape)} "
                         f"and {list(positive.shape)}")
    if np.isnan(scores).any():
        raise ValueError(f"auroc: {int(np.count_nonzero(np.isnan(scores)))} of {len(scores)} score(s) are NaN")
    n_pos = np.count_nonzero(positive)
    n_neg = len(positive) - n_pos
    if not n_pos or not n_neg:
        raise ValueError("auroc needs at least one positive and one negative row")
    u = average_ranks(scores)[positive].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def retention_threshold(in_scope_scores: np.ndarray, retention: float = 0.95) -> float:
    """The smallest observed score ``t`` with at least ``retention`` of in-scope scores ``<= t``.

    With the rule "out of scope when score > t", this keeps (at least) that
    fraction of in-scope rows in scope.
    """
    scores = np.asarray(in_scope_scores, dtype=np.float64)
    if not len(scores):
        raise ValueError("retention_threshold needs at least one in-scope score")
    if not 0.0 < retention <= 1.0:
        raise ValueError(f"retention must be in (0, 1], got {retention}")
    ordered = np.sort(scores)
    # ceil keeps >= retention; the tiny slack absorbs 0.95 * 20 = 19.000000000000004.
    k = int(np.ceil(retention * len(ordered) - 1e-9))
    return float(ordered[max(k, 1) - 1])


def fpr_at_retention(scores: np.ndarray, is_oos: np.ndarray, retention: float = 0.95) -> float:
    """Fraction of OOS rows kept in scope at the cut keeping ``retention`` of in-scope rows.

    "FPR at 95% in-scope recall" (FPR95): the cut is ``retention_threshold`` on
    the in-scope scores; an OOS row is a false positive when its score ``<=`` the cut.
    """
    scores, is_oos = np.asarray(scores, dtype=np.float64), np.asarray(is_oos, dtype=bool)
    if not np.any(is_oos):
        raise ValueError("fpr_at_retention needs at least one OOS row")
    cut = retention_threshold(scores[~is_oos], retention)
    return float(np.mean(scores[is_oos] <= cut))


def span_metrics(gold: Sequence[Iterable[tuple[int, int, str]]],
                 predicted: Sequence[Iterable[tuple[int, int, str]]]) -> dict[str, float]:
    """Micro precision, recall and F1 over entity spans, CoNLL style: a predicted
    ``(start, end, type)`` counts only when type and both boundaries are exact.

    Also ``entities_exact``: the share of rows whose predicted set is the gold set.
    """
    true_positive = n_gold = n_predicted = exact = 0
    for gold_row, predicted_row in zip(gold, predicted, strict=True):
        gold_set, predicted_set = set(gold_row), set(predicted_row)
        true_positive += len(gold_set & predicted_set)
        n_gold += len(gold_set)
        n_predicted += len(predicted_set)
        exact += gold_set == predicted_set
    precision, recall = _ratio(true_positive, n_predicted), _ratio(true_positive, n_gold)
    return {"slot_precision": precision, "slot_recall": recall, "slot_f1": _f1(precision, recall),
            "entities_exact": _ratio(exact, len(gold))}


def overall_accuracy(gold: Sequence[Iterable[tuple[int, int, str]]],
                     predicted: Sequence[Iterable[tuple[int, int, str]]], intents_right: Sequence[bool]) -> float:
    """The sentence-level accuracy of JointBERT: the share of rows whose intents are right (``intents_right``)
    and whose predicted entity set is exactly the gold set."""
    right = [bool(ok) and set(g) == set(p) for g, p, ok in zip(gold, predicted, intents_right, strict=True)]
    return _ratio(sum(right), len(right))
