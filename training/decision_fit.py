"""Fit the decision layer of a trained model on its validation data.

Order matters: the temperature is fitted first (on observed labels), the PU
selection rates c_k are estimated on the temperature-scaled probabilities,
then the acceptance thresholds (or support decoding) and the OOS rule on the
final confidences, because each step reads the output of the one before it.
What is fitted, and how, is a ``DecisionConfig`` (``intentvcs.training.config``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from intentvcs.core import calibration, oos
from intentvcs.core.dataio import Example
from intentvcs.core.decision import Decision
from intentvcs.core.entity_floor import fit_floor
from intentvcs.core.outputs import GraphOutputs
from intentvcs.core.relations import LabelRelations
from intentvcs.core.relation_discovery import decide_with_discovered, deciding_by_support
from intentvcs.core.thresholds import fit_thresholds, global_thresholds
from intentvcs.training.config import DecisionConfig
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
    config: DecisionConfig,
    relations: LabelRelations | None = None,
) -> tuple[Decision, dict]:
    """Return the fitted ``Decision`` and a JSON-safe report of what was fitted.

    ``valid_*`` rows with ``labels == []`` are out-of-scope examples: they are
    left out of calibration and used only to place the ``threshold`` rule's
    cut (the ``distance`` rule never reads them); some row must carry one of ``labels``. ``train_outputs`` (the
    model's outputs on ``train_examples``) are needed for the ``pu`` prior
    (softmax heads) and the ``distance`` rule; pass None otherwise. ``config``:
    the OOS rule (and its operating point) and the threshold rule; its
    ``spelling`` is the caller's (texts come normalised).
    """
    labels = list(labels)
    valid_obs = observed_matrix(valid_examples, labels)
    in_scope = valid_obs.any(axis=1)
    if not in_scope.any():  # calibration's own error would say there were no rows at all
        raise ValueError(f"none of the {len(valid_examples)} validation rows carries one of the model's labels (out "
                         "of scope, or labels it was not trained on): the temperature and thresholds are fitted "
                         "on rows of its labels")
    z_in = valid_outputs.logits[in_scope]

    # Softmax too reads every written label of a row (the first one alone, in the order of ``labels``,
    # made the temperature depend on that order wherever a row carries two).
    targets = valid_obs[in_scope]
    temperature = calibration.fit_temperature(z_in, targets, activation)
    report: dict = {"calibration": calibration.calibration_report(z_in, targets, activation, temperature)}
    label_scale = None
    if activation == "softmax":
        label_scale = _label_scale(labels, temperature, z_in, valid_obs[in_scope], train_examples, train_outputs)
        report["label_scale"] = dict(zip(labels, np.round(label_scale, 4).tolist()))

    # Global thresholds until they are fitted below: confidences do not read them.
    decision = Decision(
        labels=labels, activation=activation, temperature=temperature,
        label_scale=None if label_scale is None else label_scale.tolist(),
        thresholds=global_thresholds(len(labels)).tolist(), oos=oos.NoRule(), relations=relations,
    )
    fitted = fit_thresholds(decision.confidences(z_in), valid_obs[in_scope], config.threshold_rule)
    decision = replace(decision, thresholds=fitted.tolist())
    if config.threshold_rule != "global":  # the global rule reads no data: nothing to report
        report["thresholds"] = {"rule": config.threshold_rule,
                                "values": dict(zip(labels, np.round(fitted, 4).tolist()))}

    if config.support_noise:  # Decision refuses it for sigmoid outputs (DecisionError names the field)
        decision = deciding_by_support(decision, config.support_noise)
        report["support_noise"] = config.support_noise

    if config.discover_relations:
        decision, found = decide_with_discovered(decision, z_in, valid_obs[in_scope], config.discover_relations)
        report["discovered_relations"] = [relation.to_dict() for relation in found]
    if decision.support_intents is not None:
        report["support_intents"] = [list(group) for group in decision.support_intents]

    if valid_outputs.entities is not None:
        decision, report["entity_floor"] = _entity_floor(decision, valid_examples, valid_outputs, config)

    rule, is_oos = config.oos_rule, ~in_scope
    decision = replace(decision, oos=_fit_oos_rule(rule, decision, valid_outputs, valid_obs, is_oos,
                                                   train_examples, train_outputs, labels, config))
    report["oos"] = {"rule": rule, "threshold": decision.oos.threshold,
                     "part_threshold": decision.oos.part_threshold,
                     "fitted_with_oos_rows": rule == "threshold" and bool(is_oos.any())}
    return decision, report


def _label_scale(labels: list[str], temperature: float, z_in: np.ndarray, observed_in: np.ndarray,
                 train_examples: Sequence[Example], train_outputs: GraphOutputs | None) -> np.ndarray:
    """PU selection rates c_k of a softmax head, on its temperature-scaled probabilities
    (with the training rows' as the prior when their outputs are given)."""
    prior = (None, None)
    if train_outputs is not None:
        prior = (calibration.probabilities(train_outputs.logits, "softmax", temperature),
                 observed_matrix(train_examples, labels))
    return estimate_label_scale(calibration.probabilities(z_in, "softmax", temperature), observed_in, *prior)


def _entity_floor(decision: Decision, examples: Sequence[Example], outputs: GraphOutputs,
                  config: DecisionConfig) -> tuple[Decision, dict]:
    """``decision`` with the entity floor ``config`` asks for (fitted on the validation rows, or as given), and
    what was done."""
    if config.entity_floor != "fit":
        return replace(decision, entity_floor=float(config.entity_floor)), {"floor": float(config.entity_floor),
                                                                          "fitted": False}
    fitted = fit_floor(examples, outputs.entities)
    if fitted is None:
        return decision, {"floor": decision.entity_floor, "fitted": False,
                          "why": "no validation row has a gold entity span"}
    floor, scores = fitted
    return replace(decision, entity_floor=floor), {"floor": floor, "fitted": True, "valid": scores}


def _fit_oos_rule(rule: str, decision: Decision, valid: GraphOutputs, valid_obs, is_oos,
                  train_examples, train: GraphOutputs | None, labels, config: DecisionConfig) -> oos.OOSRule:
    if rule == "none":
        return oos.NoRule()
    if rule == "train":
        return oos.TrainRule.fit(labels)
    if rule == "threshold":
        # Correctness of each validation row's intent under the decision so far.
        confidences = decision.confidences(valid.logits)
        top = confidences.argmax(axis=1)
        return oos.ThresholdRule.fit(confidences, is_oos, valid_obs[np.arange(len(top)), top],
                                     part_retention=config.oos_part_retention)
    if rule == "distance":
        if train is None:
            raise ValueError("the distance OOS rule needs the model's outputs on the training rows")
        train_obs = observed_matrix(train_examples, labels)
        keep = train_obs.any(axis=1)
        inside = valid.rows(~is_oos)
        return oos.DistanceRule.fit(train.pooled[keep], train_obs[keep], inside.pooled,
                                    train.pooled_mid[keep], inside.pooled_mid, config.oos_retention,
                                    part_retention=config.oos_part_retention)
    raise ValueError(f"unknown OOS rule {rule!r}; choose from {list(oos.RULES)}")
