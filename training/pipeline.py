"""Train → fit the decision layer → evaluate → write the checkpoint.

The one sequence behind ``intentvcs train``, the default demo and the
benchmarks, so they cannot drift apart.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Sequence

from intentvcs.dataio import Example, fingerprint
from intentvcs.evaluation import evaluate, headline
from intentvcs.oos import DISTANCE_RETENTION
from intentvcs.relations import LabelRelations
from training.checkpoint import write_checkpoint
from training.decision_fit import fit_decision
from training.losses import METHODS
from training.oos_class import oos_as_class
from training.predict import infer
from training.trainer import TrainConfig, Trainer

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
) -> dict:
    """Run the whole training job; return a JSON-safe result (also stored in the checkpoint)."""
    if oos_rule == "train":
        # "oos-train": out-of-scope rows become an ordinary class.
        train, valid = oos_as_class(train), oos_as_class(valid)
    relations = LabelRelations.load(relations_path) if relations_path else None

    trained = Trainer(config).fit(train, valid)
    model, tokenizer, labels = trained.model, trained.tokenizer, trained.labels
    activation = METHODS[config.method].activation

    t0 = time.time()
    valid_outputs = infer(model, tokenizer, [ex.text for ex in valid], config.max_length)
    needs_train_pass = activation == "softmax" or oos_rule == "distance"
    train_outputs = None
    if needs_train_pass:
        train_outputs = infer(model, tokenizer, [ex.text for ex in train], config.max_length, progress=True)
    decision, decision_report = fit_decision(labels, activation, valid, valid_outputs, train, train_outputs,
                                             oos_rule, relations, oos_retention)
    log.info("decision fitted in %.1f s: T=%.3f, OOS rule %s", time.time() - t0, decision.temperature, oos_rule)

    metrics = {"valid": headline(evaluate(decision, valid_outputs, valid, include_tables=False))}
    if test is not None:
        if oos_rule == "train":
            test = oos_as_class(test)
        test_outputs = infer(model, tokenizer, [ex.text for ex in test], config.max_length)
        metrics["test"] = headline(evaluate(decision, test_outputs, test, include_tables=False))

    meta = {
        "labels": labels,
        "backbone": config.resolved_backbone(),
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
    }
    write_checkpoint(out, model, tokenizer, meta)
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
