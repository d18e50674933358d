"""Score a model's raw outputs against labelled data, through the decision layer.

Both the PyTorch path (``intentvcs.training.predict``) and the ONNX engine produce
``GraphOutputs``; this module applies the same ``Decision`` the service
serves and computes every figure from it, so a reported number is a number of
the shipped artifact.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from intentvcs.core import scoring
from intentvcs.core.dataio import Example, counts_text, unknown_labels
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


class RowVerdicts(NamedTuple):
    """Per row, what every intent figure of ``evaluate`` (and the robustness Hard set's choice) is read from.

    ``pred``           bool ``[N, L + E]``: the accepted labels, in ``gold_matrix``'s columns;
    ``top_right``      the top intent (``Decision.top_intents``: not the train rule's "oos" column) is gold;
    ``set_right``      the accepted set is exactly gold (on an out-of-scope row: nothing accepted);
    ``intents_right``  ``accuracy``'s verdict: ``set_right`` on a row of several gold labels, else ``top_right``.
    """

    pred: np.ndarray
    top_right: np.ndarray
    set_right: np.ndarray
    intents_right: np.ndarray


def row_verdicts(decision, result: DecisionResult, gold: np.ndarray) -> RowVerdicts:
    """``RowVerdicts`` of the answers ``result`` against ``gold`` (``gold_matrix(examples, decision.labels)``)."""
    pred = np.zeros_like(gold)
    pred[:, : len(decision.labels)] = result.accepted
    top_right = gold[np.arange(len(gold)), decision.top_intents(result.ranking)]
    set_right = (pred == gold).all(axis=1)
    return RowVerdicts(pred, top_right, set_right, np.where(gold.sum(axis=1) > 1, set_right, top_right))


def knows_some(examples: Sequence[Example], labels: Sequence[str]) -> bool:
    """Whether some in-scope row of ``examples`` carries one of ``labels``."""
    known = set(labels)
    return any(known.intersection(ex.labels) for ex in examples if not ex.is_out_of_scope)


def check_known_labels(path: str, examples: Sequence[Example], labels: Sequence[str]) -> None:
    """Refuse (``ValueError``) rows to score of which no in-scope one carries a label of the model's ``labels``.

    Scored, every in-scope row would count as missed and every figure read 0, under no more than a warning of
    unknown labels: another model's data, or the wrong model. Train and refit refuse such validation rows
    alike. Rows all out of scope (no label to know) are scored.
    """
    in_scope = [ex for ex in examples if not ex.is_out_of_scope]
    if in_scope and not knows_some(examples, labels):
        shown = ", ".join(labels[:5]) + (f" and {len(labels) - 5} more" if len(labels) > 5 else "")
        raise ValueError(f"{path}: no row carries a label the model was trained on "
                         f"({counts_text(unknown_labels(in_scope, labels))}), so every in-scope row would count "
                         f"as missed; is it the model's data? The model's labels: {shown}")


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
    spans has no entities; none of these when no in-scope row of the data
    carries a span, as a CSV cannot), ``entities_exact`` and ``overall_accuracy`` (the
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
    pred, top_right, set_right, intents_right = row_verdicts(decision, result, gold)
    is_oos = ~gold.any(axis=1)
    in_scope = ~is_oos

    figures: dict = {"n": len(examples), "n_in_scope": int(in_scope.sum())}
    if in_scope.any():
        scores = scoring.multilabel_metrics(pred[in_scope], gold[in_scope])
        scores.pop("n", None)  # the in-scope count is n_in_scope; n stays all rows
        figures.update(scores)
        figures["accuracy"] = float(intents_right[in_scope].mean())
        figures["top_accuracy"] = float(top_right[in_scope].mean())
        # Only data whose in-scope rows carry spans can score entities (over those rows): on a CSV (which holds
        # none), or where only out-of-scope rows carry one, every entity found counted as wrong: slot F1 read 0.
        if outputs.entities is not None and any(ex.spans for ex in examples if not ex.is_out_of_scope):
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
