"""Fit the decision layer of a trained model on its validation data.

Order matters: the temperature is fitted first (on observed labels), the PU
selection rates c_k are estimated on the temperature-scaled probabilities, and
the OOS rule is fitted last on the final confidences, because each step reads
the output of the one before it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from intentvcs.core import calibration, oos
from intentvcs.core.dataio import Example
from intentvcs.core.decision import Decision
from intentvcs.core.outputs import GraphOutputs
from intentvcs.core.relations import LabelRelations
from intentvcs.core.thresholds import global_thresholds
from intentvcs.training.pu import estimate_label_scale


def observed_matrix(examples: Sequence[Example], labels: Sequence[str]) -> np.ndarray:
    index = {label: i for i, label in enumerate(labels)}
    out = np.zeros((len(examples), len(labels)), dtype=bool)
    for row, ex in enumerate(examples):
        out[row, [index[l] for l in ex.labels if l in index]] = True
    return out


def first_label_index(observed: np.ndarray) -> np.ndarray:
    """Index of the (first) observed label of each row; rows must have one."""
    return observed.argmax(axis=1).astype(np.int64)


def fit_decision(
    labels: Sequence[str],
    activation: str,
    valid_examples: Sequence[Example],
    valid_outputs: GraphOutputs,
    train_examples: Sequence[Example],
    train_outputs: GraphOutputs | None,
    oos_rule: str = "distance",
    relations: LabelRelations | None = None,
    distance_retention: float = oos.DISTANCE_RETENTION,
) -> tuple[Decision, dict]:
    """Return the fitted ``Decision`` and a JSON-safe report of what was fitted.

    ``valid_*`` rows with ``labels == []`` are out-of-scope examples: they are
    left out of calibration and used only to place the ``threshold`` rule's
    cut (the ``distance`` rule never reads them). ``train_outputs`` (the
    model's outputs on ``train_examples``) are needed for the ``pu`` prior
    (softmax heads) and the ``distance`` rule; pass None otherwise.
    ``distance_retention`` is the distance rule's operating point.
    """
    labels = list(labels)
    valid_logits = valid_outputs.logits
    valid_obs = observed_matrix(valid_examples, labels)
    in_scope = valid_obs.any(axis=1)
    is_oos = ~in_scope
    z_in = valid_logits[in_scope]

    targets = first_label_index(valid_obs[in_scope]) if activation == "softmax" else valid_obs[in_scope]
    temperature = calibration.fit_temperature(z_in, targets, activation)
    report: dict = {"calibration": calibration.calibration_report(z_in, targets, activation, temperature)}

    label_scale = None
    if activation == "softmax":
        probs_valid = calibration.probabilities(z_in, activation, temperature)
        prior = None
        if train_outputs is not None:
            train_obs = observed_matrix(train_examples, labels)
            prior = (calibration.probabilities(train_outputs.logits, activation, temperature), train_obs)
        label_scale = estimate_label_scale(probs_valid, valid_obs[in_scope], *(prior or (None, None)))
        report["label_scale"] = dict(zip(labels, np.round(label_scale, 4).tolist()))

    decision = Decision(
        labels=labels, activation=activation, temperature=temperature,
        label_scale=None if label_scale is None else label_scale.tolist(),
        thresholds=global_thresholds(len(labels)).tolist(), oos=oos.NoRule(), relations=relations,
    )
    decision = replace(decision, oos=_fit_oos_rule(oos_rule, decision, valid_outputs, valid_obs, is_oos,
                                                   train_examples, train_outputs, labels, distance_retention))
    report["oos"] = {"rule": oos_rule, "threshold": decision.oos.threshold,
                     "fitted_with_oos_rows": oos_rule == "threshold" and bool(is_oos.any())}
    return decision, report


def _fit_oos_rule(rule: str, decision: Decision, valid: GraphOutputs, valid_obs, is_oos,
                  train_examples, train: GraphOutputs | None, labels, distance_retention: float) -> oos.OOSRule:
    if rule == "none":
        return oos.NoRule()
    if rule == "train":
        return oos.TrainRule.fit(labels)
    if rule == "threshold":
        # Correctness of each validation row's intent under the decision so far.
        confidences = decision.confidences(valid.logits)
        top = confidences.argmax(axis=1)
        return oos.ThresholdRule.fit(confidences, is_oos, valid_obs[np.arange(len(top)), top])
    if rule == "distance":
        if train is None:
            raise ValueError("the distance OOS rule needs the model's outputs on the training rows")
        train_obs = observed_matrix(train_examples, labels)
        keep = train_obs.any(axis=1)
        inside = valid.rows(~is_oos)
        return oos.DistanceRule.fit(train.pooled[keep], first_label_index(train_obs[keep]), inside.pooled,
                                    train.pooled_mid[keep], inside.pooled_mid, distance_retention)
    raise ValueError(f"unknown OOS rule {rule!r}; choose none, threshold, distance or train")
