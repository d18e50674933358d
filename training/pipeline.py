"""Train → fit the decision layer → evaluate → write the checkpoint.

The one sequence behind ``intentvcs train``, the default demo and the
benchmarks, so they cannot drift apart; ``refit_checkpoint`` reruns its
decision half on a trained model (``intentvcs refit``). Settings come as a
``TrainConfig`` (the model) and a ``DecisionConfig`` (what is fitted on it),
both in ``intentvcs.training.config``.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from intentvcs.core import atomic, support
from intentvcs.core.dataio import Example, counts_text, fingerprint, unknown_labels
from intentvcs.core.decision import Decision
from intentvcs.core.evaluation import evaluate, headline
from intentvcs.core.outputs import GraphOutputs
from intentvcs.core.references import reference_sample
from intentvcs.core.segmentation import decide_segmented
from intentvcs.core.relations import LabelRelations, naming_oos
from intentvcs.core.entities import entity_types
from intentvcs.core.oos import OOS_LABEL
from intentvcs.core.spelling import Spelling
from intentvcs.training.checkpoint import (
    CHECKPOINT_OUTPUT,
    META_FILE,
    checkpoint_tags,
    read_checkpoint_meta,
    write_checkpoint,
    write_refitted,
)
from intentvcs.training.config import DecisionConfig, TrainConfig
from intentvcs.training.decision_fit import fit_decision
from intentvcs.training.losses import METHODS
from intentvcs.training.model import ENCODER_DIR, IntentModel, load_tokenizer
from intentvcs.training.oos_class import oos_as_class
from intentvcs.training.predict import infer_as_served
from intentvcs.training.trainer import Trainer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Splits:
    """The rows of one job: training, validation and (optionally) test."""

    train: Sequence[Example]
    valid: Sequence[Example]
    test: Sequence[Example] | None = None

    def for_rule(self, oos_rule: str) -> "Splits":
        """The rows as ``oos_rule`` reads them: for "train" ("oos-train"), out-of-scope rows become a class."""
        if oos_rule != "train":
            return self
        return Splits(oos_as_class(self.train), oos_as_class(self.valid),
                      oos_as_class(self.test) if self.test is not None else None)


@dataclass(frozen=True)
class TrainedModel:
    """A trained model as its decision layer is fitted and evaluated on it.

    ``infer`` reads texts as the served model will: through ``spelling`` first, when there is one.
    """

    model: IntentModel
    tokenizer: Any
    labels: list[str]
    activation: str  # the method's: how the decision layer reads the logits
    max_length: int
    spelling: Spelling | None
    tags: list[str]  # the entity head's tag vocabulary; [] without one

    def infer(self, rows: Sequence[Example], progress: bool = False) -> GraphOutputs:
        return self.infer_texts([ex.text for ex in rows], progress)

    def infer_texts(self, texts: list[str], progress: bool = False) -> GraphOutputs:
        return infer_as_served(self.model, self.tokenizer, self.spelling, texts, self.max_length, progress=progress,
                               tags=self.tags)

    def evaluate(self, decision: Decision, rows: Sequence[Example], outputs: GraphOutputs | None = None) -> dict:
        """Headline figures of ``rows`` answered as the service answers them (chained requests part by part);
        ``outputs``: the rows' graph outputs, when already read."""
        outputs, segmented = decide_segmented(decision, self.infer_texts, [ex.text for ex in rows],
                                              outputs=outputs)
        return headline(evaluate(decision, outputs, rows, include_tables=False, result=segmented.result))


def train_pipeline(train: Sequence[Example], valid: Sequence[Example], test: Sequence[Example] | None,
                   config: TrainConfig, decision: DecisionConfig, out: str | os.PathLike,
                   relations_path: str | os.PathLike | None = None, force: bool = False,
                   result_path: str | os.PathLike | None = None) -> dict:
    """Run the whole training job; return a JSON-safe result (also stored in the checkpoint, and written to
    ``result_path`` when given, with the checkpoint, both or neither).

    ``relations_path``: a relations.json of known label relations, applied at
    inference. With ``decision.spelling`` the decision layer is fitted, and the
    figures taken, on what the served model reads: normalised texts. ``out``
    is replaced only when it is an earlier checkpoint or empty, any other
    folder only with ``force``; that is checked before training starts.
    """
    atomic.check_replaceable(out, CHECKPOINT_OUTPUT, force)
    if decision.oos_rule == "train" and not any(ex.is_out_of_scope for ex in train):  # refused before training
        raise ValueError("the OOS rule train learns out-of-scope requests as a class of their own from training "
                         "rows without a label, and the training rows have none: give some, or choose another "
                         "rule (--oos-rule distance needs none)")
    given = Splits(train, valid, test)
    splits = given.for_rule(decision.oos_rule)
    relations = LabelRelations.load(relations_path) if relations_path else None
    if relations is not None:  # refused now, not after the training (the fitted Decision would refuse it)
        labels = config.labels or sorted({label for ex in splits.train for label in ex.labels})
        unknown = [label for label in labels if label != OOS_LABEL and label not in relations.labels]
        if unknown:
            raise ValueError(f"{relations_path}: label(s) {unknown[:5]} of the training rows are unknown to the "
                             "relations; give the relations of these labels")
        verdict = naming_oos(relations.relations)
        if verdict is not None:  # likewise: the fitted Decision refused it after the whole training
            raise ValueError(f"{relations_path}: {verdict.type} {list(verdict.labels())} names "
                             f"{OOS_LABEL!r}, the out-of-scope verdict, which relates to no intent; leave it out")
    _check_support_noise(config.method, decision)

    trained = Trainer(config).fit(splits.train, splits.valid)
    if trained.entities and trained.entities["spans_aligned"] < trained.entities["spans"]:
        log.warning("%d of the %d training spans start or end inside a word, which the entity head's word tags "
                    "cannot mark: they were not learnt (put span edges on word edges: '5 min', not '5' of '5min')",
                    trained.entities["spans"] - trained.entities["spans_aligned"], trained.entities["spans"])
    model = TrainedModel(trained.model, trained.tokenizer, trained.labels, METHODS[config.method].activation,
                         config.max_length, _spelling(splits.train, decision.spelling), trained.tags)
    fitted, decision_report, metrics = fit_and_evaluate(model, splits, decision, relations, given)

    meta = {
        "labels": model.labels,
        "backbone": config.backbone_name(),
        "max_length": config.max_length,
        "method": config.method,
        "train_config": config.to_dict(),
        "decision_config": decision.to_dict(),  # the settings the decision was fitted with: refit starts from them
        "decision": fitted.to_dict(),
        "relations": relations.to_dict() if relations is not None else None,
        "data_fingerprint": fingerprint(splits.train, splits.valid),
        "metrics": metrics,
        "decision_report": decision_report,
        "history": trained.history,
        "best_epoch": trained.best_epoch,
        "train_seconds": round(trained.seconds, 1),
        "trained_on": trained.device,
        "spelling": _spelling_summary(model.spelling),
        "entities": _entities_summary(trained, config),
    }
    result = {
        "checkpoint": str(out),
        "method": config.method,
        "best_epoch": trained.best_epoch,
        "train_seconds": round(trained.seconds, 1),
        "epoch_seconds": [h["seconds"] for h in trained.history],
        "metrics": metrics,
        "decision_report": decision_report,
    }
    write_checkpoint(out, model.model, model.tokenizer, meta, model.spelling, force=force,
                     references=reference_sample(splits.train),
                     also={result_path: atomic.json_text(result)} if result_path else None)
    log.info("checkpoint written to %s", out)
    return result


def fit_and_evaluate(model: TrainedModel, splits: Splits, decision: DecisionConfig,
                     relations: LabelRelations | None, given: Splits) -> tuple[Decision, dict, dict]:
    """Fit the decision layer on the model's outputs for ``splits`` (the rows as the OOS rule reads them);
    return it, its report and the headline figures of ``given`` (the same rows as given: out-of-scope rows
    without a label, scored as out of scope also where the rule "train" made them a class to fit on)."""
    _warn_unknown_labels(splits, model.labels)
    t0 = time.time()
    valid_outputs = model.infer(splits.valid)
    train_outputs = None
    if model.activation == "softmax" or decision.oos_rule == "distance":
        train_outputs = model.infer(splits.train, progress=True)
    fitted, report = fit_decision(model.labels, model.activation, splits.valid, valid_outputs, splits.train,
                                  train_outputs, decision, relations)
    log.info("decision fitted in %.1f s: T=%.3f, OOS rule %s", time.time() - t0, fitted.temperature,
             decision.oos_rule)
    metrics = {"valid": model.evaluate(fitted, given.valid, valid_outputs)}
    if given.test is not None:
        metrics["test"] = model.evaluate(fitted, given.test)
    return fitted, report, metrics


def refit_checkpoint(checkpoint: str | os.PathLike, train: Sequence[Example], valid: Sequence[Example],
                     test: Sequence[Example] | None, decision: DecisionConfig, train_source: str = "train") -> dict:
    """Refit a trained checkpoint's decision layer (calibration, PU scales, thresholds, entity floor, OOS rule);
    weights untouched.

    For a new OOS rule or operating point, or fresh validation data, without
    retraining. ``decision`` is every setting of the refit (``refit_settings``:
    the checkpoint's own with the changes asked for). ``train`` must be the
    rows the model was trained on (the distance rule's statistics, the PU
    prior and the spelling vocabulary come from them): rows with a label the
    checkpoint does not have, or without a row for one of its labels, are
    refused (``train_source`` names them in the error). The OOS rule "train"
    is part of the model (out-of-scope rows are an output class), so a refit
    neither switches to it nor away from it. Rewrites ``spelling.json``
    (removed without ``decision.spelling``) and ``checkpoint.json``, both or
    neither (``write_refitted``), and returns the new figures.
    """
    meta = read_checkpoint_meta(checkpoint)
    _check_support_noise(meta["method"], decision)  # before the model loads and reads every row
    check_refit_rows(checkpoint, train, decision.oos_rule, train_source, meta)
    given = Splits(train, valid, test)
    splits = given.for_rule(decision.oos_rule)
    model = TrainedModel(IntentModel.from_checkpoint(checkpoint), load_tokenizer(Path(checkpoint) / ENCODER_DIR),
                         meta["labels"], METHODS[meta["method"]].activation, meta["max_length"],
                         _spelling(splits.train, decision.spelling), checkpoint_tags(meta))
    relations = LabelRelations.from_dict(meta["relations"]) if meta.get("relations") else None
    fitted, decision_report, metrics = fit_and_evaluate(model, splits, decision, relations, given)
    meta.update(decision=fitted.to_dict(), decision_report=decision_report, metrics=metrics,
                spelling=_spelling_summary(model.spelling),
                refit={"at": datetime.now(timezone.utc).isoformat(timespec="seconds"), **decision.to_dict(),
                       "valid_fingerprint": fingerprint(splits.valid)})
    write_refitted(checkpoint, meta, model.spelling)
    log.info("decision of %s refitted", checkpoint)
    return {"checkpoint": str(checkpoint), "metrics": metrics, "decision_report": decision_report}


# The settings that only matter under some OOS rules: a missing one is said aloud only where it does.
_RULE_SETTINGS = {"oos_retention": ("distance",), "oos_part_retention": ("distance", "threshold")}


def refit_settings(checkpoint: str | os.PathLike, changes: Mapping[str, Any]) -> DecisionConfig:
    """The settings a refit of ``checkpoint`` runs with: the checkpoint's own, with ``changes`` (fields) applied.

    The checkpoint's own are those its last refit recorded (``checkpoint.json``'s
    ``refit``, every field), else those its training recorded
    (``decision_config``); a checkpoint written before training recorded them
    and never refitted has them read off what training fitted: the OOS rule and the
    support noise (``decision``), the threshold rule (``decision_report``: a
    rule other than global reports its thresholds), spelling on or off
    (``spelling``), and relation discovery when it was off. What the
    checkpoint does not record falls back to the ``DecisionConfig`` default:
    the retentions of a checkpoint never refitted (a warning says so where
    the OOS rule reads them), and any field an older checkpoint lacks. A
    decision that discovered relations at a rate not recorded is refused
    unless ``changes`` gives the rate: off is no default for it.
    """
    meta = read_checkpoint_meta(checkpoint)
    names = [f.name for f in fields(DecisionConfig)]
    unknown = sorted(set(changes) - set(names))
    if unknown:
        raise ValueError(f"decision settings: unknown field(s) {unknown}")
    stored = meta.get("refit") or meta.get("decision_config")
    recorded = ({k: v for k, v in stored.items() if k in names} if stored else _fitted_settings(meta))
    if recorded.get("discover_relations", 0.0) is None and "discover_relations" not in changes:
        raise ValueError(f"{Path(checkpoint) / META_FILE}: its decision discovered label relations at a rate it "
                         "does not record: give the rate (--discover-relations RATE; 0: off)")
    settings = DecisionConfig(**{**recorded, **changes})
    missing = [name for name, rules in _RULE_SETTINGS.items()
               if name not in recorded and name not in changes and settings.oos_rule in rules]
    if missing:
        log.warning("%s does not record %s: refitting with the default%s %s (give %s to choose)",
                    Path(checkpoint) / META_FILE, " and ".join(missing), "s" if len(missing) > 1 else "",
                    " and ".join(str(getattr(settings, name)) for name in missing),
                    " and ".join("--" + name.replace("_", "-") for name in missing))
    return settings


def _fitted_settings(meta: dict) -> dict[str, Any]:
    """The decision settings a checkpoint's training can be read to have used (``refit_settings``);
    ``discover_relations`` None: on, at a rate not recorded."""
    decision, out = meta.get("decision") or {}, {}
    if isinstance(decision.get("oos"), dict) and "rule" in decision["oos"]:
        out["oos_rule"] = decision["oos"]["rule"]
    if "support_noise" in decision:
        out["support_noise"] = decision["support_noise"] or 0.0
    if "spelling" in meta:
        out["spelling"] = meta["spelling"] is not None
    report = meta.get("decision_report")
    if isinstance(report, dict):
        out["threshold_rule"] = (report.get("thresholds") or {}).get("rule", "global")
        out["discover_relations"] = None if "discovered_relations" in report else 0.0
    return out


def _check_support_noise(method: str, decision: DecisionConfig) -> None:
    """Refuse support decoding for a method whose outputs are no softmax, before any work (the fitted
    Decision refuses it, after the training or, in a refit, after the model has read every row)."""
    if decision.support_noise:
        try:
            support.check_activation(METHODS[method].activation)
        except ValueError as exc:
            raise ValueError(f"support_noise: {exc} (method {method!r})") from None


def _check_oos_rule_kept(checkpoint: str | os.PathLike, meta: dict, rule: str) -> None:
    """Refuse a refit into or out of the OOS rule "train": it is the model's outputs, not its decision."""
    trained = (meta.get("decision") or {}).get("oos", {}).get("rule")
    if trained == "train" and rule != "train":
        raise ValueError(f"{checkpoint} was trained with the OOS rule train (out-of-scope rows are a class of "
                         f"their own, the model's output {OOS_LABEL!r}); refitted to {rule} that output would "
                         "be read as an ordinary intent. The rule train changes the model's outputs: switching "
                         "it needs intentvcs train")
    if rule == "train" and trained != "train":
        raise ValueError(f"{checkpoint} was trained with the OOS rule {trained}: its outputs have no "
                         "out-of-scope class. The rule train changes the model's outputs (out-of-scope rows "
                         "become a class of their own): switching to it needs intentvcs train")


def check_refit_rows(checkpoint: str | os.PathLike, train: Sequence[Example], oos_rule: str, source: str = "train",
                     meta: dict | None = None) -> None:
    """What a refit asks first of its training rows: the OOS rule the checkpoint was trained with kept (a
    switch to or from "train" is refused), and the checkpoint's labels, read as that rule reads the rows."""
    meta = read_checkpoint_meta(checkpoint) if meta is None else meta
    _check_oos_rule_kept(checkpoint, meta, oos_rule)
    _check_trained_labels(Splits(train, ()).for_rule(oos_rule).train, meta["labels"], source)


def _check_trained_labels(train: Sequence[Example], labels: list[str], source: str = "train") -> None:
    """A refit's training rows must be the checkpoint's: a label it never learnt, or one of its labels
    without a row (no class mean for the distance rule, no PU prior), means another file."""
    unknown = sorted(unknown_labels(train, labels))
    if unknown:
        raise ValueError(f"{source}: rows carry labels the checkpoint was not trained on: {unknown[:5]}")
    seen = {label for ex in train for label in ex.labels}
    missing = [label for label in labels if label not in seen]
    if missing:
        raise ValueError(f"{source}: no row carries {len(missing)} of the checkpoint's {len(labels)} labels "
                         f"{missing[:5]}{' ...' if len(missing) > 5 else ''}: give the rows the checkpoint was "
                         "trained on (a label without one has no class mean for the distance rule)")


def _warn_unknown_labels(splits: Splits, labels: list[str]) -> None:
    """Say which validation and test labels the model cannot answer, in training and refitting alike.

    The decision fit drops such a label from its row (a row left with none is
    fitted as out of scope: the model has no intent for it) and the figures
    count it as missed. Said aloud, since a misspelt label would otherwise
    quietly move its rows out of scope.
    """
    for name, rows in (("valid", splits.valid), ("test", splits.test or [])):
        unknown = unknown_labels(rows, labels)
        if unknown:
            log.warning("%s: %d label(s) the model was not trained on, fitted as absent (a row left with no "
                        "label as out of scope) and counted as missed: %s", name, sum(unknown.values()),
                        counts_text(unknown))


def _spelling(train: Sequence[Example], enabled: bool) -> Spelling | None:
    if not enabled:
        return None
    normaliser = Spelling.from_examples(train)
    log.info("spelling normaliser: %d training words", len(normaliser))
    return normaliser


def _entities_summary(trained, config: TrainConfig) -> dict | None:
    """``checkpoint.json``'s ``entities``: the tag vocabulary, the loss weight and what the head learnt from."""
    if not trained.tags:
        return None
    return {"tags": trained.tags, "types": entity_types(trained.tags), "weight": config.entity_weight,
            **trained.entities}


def _spelling_summary(spelling: Spelling | None) -> dict | None:
    return None if spelling is None else {"words": len(spelling)}
