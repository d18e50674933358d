"""Score a model's raw outputs against labelled data, through the decision layer.

Both the PyTorch path (``intentvcs.training.predict``) and the ONNX engine produce
``GraphOutputs``; this module applies the same ``Decision`` the service
serves and computes every figure from it, so a reported number is a number of
the shipped artifact.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from intentvcs.core import scoring
from intentvcs.core.dataio import Example
from intentvcs.core.decision import DecisionResult
from intentvcs.core.entities import span_set
from intentvcs.core.outputs import GraphOutputs

# The score a report leads with: "accuracy" (the top intent is a gold one) or
# "f1" (micro over labels); "auto" picks f1 when any gold row has several labels.
PRIMARY_METRICS = ("auto", "accuracy", "f1")


def gold_matrix(examples: Sequence[Example], labels: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """Bool ``[N, L + E]`` gold matrix; gold labels the model does not know are
    appended as ``E`` extra columns (they can only be missed, never predicted)."""
    known = list(labels)
    extra = sorted({l for ex in examples for l in ex.labels} - set(known))
    columns = known + extra
    index = {label: i for i, label in enumerate(columns)}
    gold = np.zeros((len(examples), len(columns)), dtype=bool)
    for row, ex in enumerate(examples):
        gold[row, [index[l] for l in ex.labels]] = True
    return gold, columns


def evaluate(decision, outputs: GraphOutputs, examples: Sequence[Example], include_tables: bool = True,
             result: DecisionResult | None = None) -> dict:
    """Figures for ``examples`` (rows with ``labels == []`` are out of scope).

    Returns fractions: ``precision``, ``recall``, ``f1``, ``exact_match`` over
    in-scope rows (micro over (row, label) decisions), ``accuracy`` (JointBERT's
    sentence-level intent accuracy, the OOS verdict ignored: a row of one gold
    intent is right when its top intent is that one; a row of several, as
    ATIS's ``atis_flight#atis_airfare``, which JointBERT predicts as one joined
    class, when the accepted set is exactly them), ``top_accuracy`` (the top
    intent is one of the gold ones: the same on single-intent rows), and, when the
    data has out-of-scope rows, ``in_scope_accuracy``, ``oos_recall``,
    ``oos_precision``, ``oos_f1``, ``auroc``, ``fpr95``. For a model with an
    entity head, over in-scope rows and the entities the decision answers
    (``Decision.kept_entities``): ``slot_precision``, ``slot_recall``,
    ``slot_f1`` (CoNLL span level: type and both boundaries exact; a row without
    spans has no entities; none of these when no row of the data carries a span,
    as a CSV cannot), ``entities_exact`` and ``overall_accuracy`` (the
    sentence level of JointBERT: the row's intents right as ``accuracy`` counts
    them and the entity set exactly the gold set) and ``overall_exact_match`` (the multi-intent
    one of MixATIS / MixSNIPS: the accepted intent set and the entity set both
    exactly gold). With ``include_tables`` also ``per_label`` and the
    prediction ``cooccurrence`` matrix. ``result``: the decision already made
    of ``outputs`` (``intentvcs.core.segmentation.decide_segmented``'s, for
    chained requests answered part by part); default ``decision.apply``.
    """
    labels = list(decision.labels)
    if result is None:
        result = decision.apply(*outputs.scores)
    gold, columns = gold_matrix(examples, labels)
    pred = np.zeros_like(gold)
    pred[:, : len(labels)] = result.accepted
    is_oos = ~gold.any(axis=1)
    in_scope = ~is_oos

    figures: dict = {"n": len(examples), "n_in_scope": int(in_scope.sum())}
    set_right = (pred == gold).all(axis=1)  # the accepted set exactly gold (on an OOS row: nothing accepted)
    if in_scope.any():
        scores = scoring.multilabel_metrics(pred[in_scope], gold[in_scope])
        scores.pop("n", None)  # the in-scope count is n_in_scope; n stays all rows
        figures.update(scores)
        top = decision.top_intents(result.confidences)  # not the train rule's "oos" column, its verdict
        top_right = gold[np.arange(len(gold)), top]
        intents_right = np.where(gold.sum(axis=1) > 1, set_right, top_right)
        figures["accuracy"] = float(intents_right[in_scope].mean())
        figures["top_accuracy"] = float(top_right[in_scope].mean())
        # Only data that carries spans can score entities: on a CSV (which holds none) every entity found
        # counted as wrong, and slot F1 read 0.
        if outputs.entities is not None and any(example.spans for example in examples):
            figures.update(_entity_figures(examples, decision.kept_entities(outputs.entities), in_scope,
                                           intents_right, set_right))
    if is_oos.any():
        figures.update(scoring.oos_metrics(result.out_of_scope, is_oos, set_right))
        if in_scope.any():
            figures["auroc"] = scoring.auroc(result.oos_score, is_oos)
            figures["fpr95"] = scoring.fpr_at_retention(result.oos_score, is_oos, 0.95)
    if include_tables:
        figures["per_label"] = scoring.per_label_table(pred, gold, columns)
        counts, _ = scoring.cooccurrence(result.accepted)
        figures["cooccurrence"] = {"labels": labels, "counts": counts.astype(int).tolist()}
    return figures


def _entity_figures(examples: Sequence[Example], entities: np.ndarray, in_scope: np.ndarray,
                    intents_right: np.ndarray, set_right: np.ndarray) -> dict:
    """Span-level entity scores and the sentence-level overall accuracies over the in-scope rows."""
    rows = np.flatnonzero(in_scope)
    gold = [span_set(examples[i].spans) for i in rows]
    predicted = [span_set(entities[i]) for i in rows]
    figures = scoring.span_metrics(gold, predicted)
    figures["overall_accuracy"] = scoring.overall_accuracy(gold, predicted, intents_right[rows])
    figures["overall_exact_match"] = scoring.overall_accuracy(gold, predicted, set_right[rows])
    return figures


def headline(figures: dict) -> dict:
    """The scalar figures only (no tables), for summaries and benchmark records."""
    return {k: v for k, v in figures.items() if not isinstance(v, (list, dict))}
