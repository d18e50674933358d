"""Train → fit the decision layer → evaluate → write the checkpoint.

The one sequence behind ``intentvcs train``, the default demo and the
benchmarks, so they cannot drift apart; ``refit_checkpoint`` reruns its
decision half on a trained model (``intentvcs refit``).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Sequence

from datetime import datetime, timezone

from intentvcs.core.dataio import Example, fingerprint
from intentvcs.core.decision import Decision
from intentvcs.core.evaluation import evaluate, headline
from intentvcs.core.oos import DISTANCE_RETENTION
from intentvcs.core.relations import LabelRelations
from intentvcs.core.spelling import Spelling
from intentvcs.training.checkpoint import (
    read_checkpoint_meta,
    write_checkpoint,
    write_checkpoint_meta,
    write_checkpoint_spelling,
)
from intentvcs.training.decision_fit import fit_decision
from intentvcs.training.losses import METHODS
from intentvcs.training.model import ENCODER_DIR, IntentModel, load_tokenizer
from intentvcs.training.oos_class import oos_as_class
from intentvcs.training.predict import infer
from intentvcs.training.trainer import TrainConfig, Trainer

log = logging.getLogger(__name__)


def train_pipeline(
    config: TrainConfig,
    train: Sequence[Example],
    valid: Sequence[Example],
    out: Path,
    test: Sequence[Example] | None = None,
    oos_rule: str = "distance",
    relations_path: str | None = None,
    oos_retention: float = DISTANCE_RETENTION,
    spelling: bool = True,
) -> dict:
    """Run the whole training job; return a JSON-safe result (also stored in the checkpoint).

    ``spelling``: build the spelling normaliser from the training texts
    (``intentvcs.core.spelling``); the decision layer is then fitted, and the
    figures taken, on what the served model reads: normalised texts.
    """
    if oos_rule == "train":
        # "oos-train": out-of-scope rows become an ordinary class.
        train, valid = oos_as_class(train), oos_as_class(valid)
        test = oos_as_class(test) if test is not None else None
    relations = LabelRelations.load(relations_path) if relations_path else None

    trained = Trainer(config).fit(train, valid)
    model, tokenizer, labels = trained.model, trained.tokenizer, trained.labels
    activation = METHODS[config.method].activation
    normaliser = _spelling(train, spelling)

    decision, decision_report, metrics = fit_and_evaluate(model, tokenizer, labels, activation, config.max_length,
                                                          train, valid, test, oos_rule, relations, oos_retention,
                                                          normaliser)

    meta = {
        "labels": labels,
        "backbone": config.backbone_name(),
        "max_length": config.max_length,
        "method": config.method,
        "train_config": config.to_dict(),
        "decision": decision.to_dict(),
        "relations": relations.to_dict() if relations is not None else None,
        "data_fingerprint": fingerprint(train, valid),
        "metrics": metrics,
        "decision_report": decision_report,
        "history": trained.history,
        "best_epoch": trained.best_epoch,
        "train_seconds": round(trained.seconds, 1),
        "spelling": _spelling_summary(normaliser),
    }
    write_checkpoint(out, model, tokenizer, meta, normaliser)
    log.info("checkpoint written to %s", out)
    return {
        "checkpoint": str(out),
        "method": config.method,
        "best_epoch": trained.best_epoch,
        "train_seconds": round(trained.seconds, 1),
        "epoch_seconds": [h["seconds"] for h in trained.history],
        "metrics": metrics,
        "decision_report": decision_report,
    }


def fit_and_evaluate(model, tokenizer, labels: list[str], activation: str, max_length: int,
                     train: Sequence[Example], valid: Sequence[Example], test: Sequence[Example] | None,
                     oos_rule: str, relations: LabelRelations | None,
                     oos_retention: float, spelling: Spelling | None) -> tuple[Decision, dict, dict]:
    """Fit the decision layer on the model's outputs; return it, its report and the headline figures.

    Texts go through ``spelling`` first (when given), as they will in serving.
    """
    def texts(rows: Sequence[Example]) -> list[str]:
        raw = [ex.text for ex in rows]
        return spelling.normalise_all(raw) if spelling is not None else raw

    t0 = time.time()
    valid_outputs = infer(model, tokenizer, texts(valid), max_length)
    train_outputs = None
    if activation == "softmax" or oos_rule == "distance":
        train_outputs = infer(model, tokenizer, texts(train), max_length, progress=True)
    decision, decision_report = fit_decision(labels, activation, valid, valid_outputs, train, train_outputs,
                                             oos_rule, relations, oos_retention)
    log.info("decision fitted in %.1f s: T=%.3f, OOS rule %s", time.time() - t0, decision.temperature, oos_rule)
    metrics = {"valid": headline(evaluate(decision, valid_outputs, valid, include_tables=False))}
    if test is not None:
        test_outputs = infer(model, tokenizer, texts(test), max_length)
        metrics["test"] = headline(evaluate(decision, test_outputs, test, include_tables=False))
    return decision, decision_report, metrics


def refit_checkpoint(checkpoint: Path, train: Sequence[Example], valid: Sequence[Example],
                     test: Sequence[Example] | None = None, oos_rule: str = "distance",
                     oos_retention: float = DISTANCE_RETENTION, spelling: bool = True) -> dict:
    """Refit a trained checkpoint's decision layer (calibration, PU scales, OOS rule); weights untouched.

    For a new OOS rule or operating point, or fresh validation data, without
    retraining. ``train`` should be the rows the model was trained on (the
    distance rule's statistics, the PU prior and the spelling vocabulary come
    from them). Rewrites ``spelling.json`` (removed when ``spelling`` is False)
    and ``checkpoint.json``, each atomically, and returns the new figures.
    """
    meta = read_checkpoint_meta(checkpoint)
    labels = meta["labels"]
    if oos_rule == "train":
        train, valid = oos_as_class(train), oos_as_class(valid)
        test = oos_as_class(test) if test is not None else None
    for name, rows in (("train", train), ("valid", valid), ("test", test or [])):
        unknown = sorted({label for ex in rows for label in ex.labels} - set(labels))
        if unknown:
            raise ValueError(f"{name} rows carry labels the checkpoint was not trained on: {unknown[:5]}")
    model = IntentModel.from_checkpoint(checkpoint)
    tokenizer = load_tokenizer(Path(checkpoint) / ENCODER_DIR)
    relations = LabelRelations.from_dict(meta["relations"]) if meta.get("relations") else None
    normaliser = _spelling(train, spelling)
    decision, decision_report, metrics = fit_and_evaluate(
        model, tokenizer, labels, METHODS[meta["method"]].activation, meta["max_length"], train, valid, test,
        oos_rule, relations, oos_retention, normaliser)
    # spelling.json first: a crash between the two writes leaves the old
    # decision with the new vocabulary, which a refit again repairs.
    write_checkpoint_spelling(checkpoint, normaliser)
    meta.update(decision=decision.to_dict(), decision_report=decision_report, metrics=metrics,
                spelling=_spelling_summary(normaliser),
                refit={"at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "oos_rule": oos_rule,
                       "oos_retention": oos_retention, "valid_fingerprint": fingerprint(valid)})
    write_checkpoint_meta(checkpoint, meta)
    log.info("decision of %s refitted", checkpoint)
    return {"checkpoint": str(checkpoint), "metrics": metrics, "decision_report": decision_report}


def _spelling(train: Sequence[Example], enabled: bool) -> Spelling | None:
    if not enabled:
        return None
    normaliser = Spelling.from_texts(ex.text for ex in train)
    log.info("spelling normaliser: %d training words", len(normaliser))
    return normaliser


def _spelling_summary(spelling: Spelling | None) -> dict | None:
    return None if spelling is None else {"words": len(spelling)}
