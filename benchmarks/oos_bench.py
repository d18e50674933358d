"""CLINC150 out-of-scope benchmark: calibrated confidences and out-of-scope
detection (docs/RESEARCH.md section 2).

Per variant (Full, Small, Imbalanced, OOS+) one model is trained on in-scope
training rows only (no OOS data for training), then each OOS rule is fitted on
the validation split (in-scope + oos_val) and scored on test + oos_test:
``threshold`` (calibrated confidence, threshold chosen on validation with oos as
its own class) and ``distance`` (Mahalanobis on the final pooled embedding plus
the middle layer's nearest-neighbour distance; needs no OOS data, its
threshold keeps 98 % of in-scope validation rows). ``train`` (oos as a 151st
class) is trained separately on Full and OOS+ for comparison. On Full the
distance rule is also scored at the other in-scope retentions of
``--operating-points`` (its accuracy / recall trade-off).

    python -m benchmarks.oos_bench
    python -m benchmarks.oos_bench --variants full --epochs 4
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np


from benchmarks.common import SHARED_DATA, keep_previous, write_results
from intentvcs.core.oos import DISTANCE_RETENTION

VARIANTS = {"full": "data_full.json", "small": "data_small.json", "imbalanced": "data_imbalanced.json",
            "oos_plus": "data_oos_plus.json"}
# Larson et al. (2019), BERT, Full: in-scope accuracy / OOS recall.
PAPER = {("full", "threshold"): (96.2, 52.3), ("full", "train"): (96.9, 40.3)}


def in_scope(rows):
    return [r for r in rows if r.labels]


def load_trained(path: Path) -> SimpleNamespace:
    """A model saved by an earlier run of this script, shaped like ``Trainer.fit``'s result."""
    from intentvcs.training.checkpoint import read_checkpoint_meta
    from intentvcs.training.model import IntentModel, load_tokenizer

    meta = read_checkpoint_meta(path)
    logging.info("reusing the model trained by an earlier run: %s", path)
    return SimpleNamespace(model=IntentModel.from_checkpoint(path), tokenizer=load_tokenizer(path / "encoder"),
                           labels=meta["labels"], seconds=meta["train_seconds"])


def saved_model(path: Path | None, config) -> SimpleNamespace | None:
    """The model an earlier run saved at ``path`` (``load_trained``) when it was trained with ``config``
    (the thread count aside: it changes speed, not the run); None when there is none, or when it was trained
    with another recipe (a warning says so): the folder's name holds the data, epochs and seed alone."""
    from intentvcs.training.checkpoint import read_checkpoint_meta

    if path is None or not (path / "checkpoint.json").is_file():
        return None
    stored = type(config).from_stored(read_checkpoint_meta(path)["train_config"])
    if {**stored.to_dict(), "threads": None} != {**config.to_dict(), "threads": None}:
        logging.warning("%s was trained with another recipe than this run's: trained again", path)
        return None
    return load_trained(path)


def run_variant(variant: str, epochs: int, rules: list[str], train_rule: bool, seed: int,
                threads: int | None = None, ckpt_dir: str | None = None,
                operating_points: tuple[float, ...] = ()) -> list[dict]:
    from intentvcs.core import calibration
    from intentvcs.core.dataio import fingerprint
    from intentvcs.core.evaluation import evaluate, headline
    from intentvcs.training.config import DecisionConfig
    from intentvcs.training.decision_fit import fit_decision, first_label_index, observed_matrix
    from intentvcs.training.loaders.clinc150 import load_split
    from intentvcs.training.checkpoint import write_checkpoint
    from intentvcs.training.oos_class import oos_as_class
    from intentvcs.training.predict import infer
    from intentvcs.training.trainer import TrainConfig, Trainer

    path = SHARED_DATA / "clinc150" / VARIANTS[variant]
    train, valid, test = (load_split(path, s) for s in ("train", "valid", "test"))
    records = []
    base = {"dataset": f"clinc150-{variant}", "backbone": "all-MiniLM-L6-v2", "seeds": 1, "epochs": epochs}

    def score(decision, rule, trained, test_rows):
        outputs = infer(trained.model, trained.tokenizer, [r.text for r in test_rows], 64)
        logits = outputs.logits
        fig = headline(evaluate(decision, outputs, test_rows, include_tables=False))
        obs = observed_matrix(test_rows, decision.labels)
        keep = obs.any(axis=1)
        targets = first_label_index(obs[keep])
        before = calibration.calibration_figures(logits[keep], targets, decision.activation, 1.0)
        after = calibration.calibration_figures(logits[keep], targets, decision.activation, decision.temperature)
        # In-scope rows kept in scope with nothing accepted (every confidence under
        # its acceptance threshold) fail exact match even when the top intent is right.
        result = decision.apply(*outputs.scores)
        empty = keep & ~result.out_of_scope & ~result.accepted.any(axis=1)
        top_right = obs[np.arange(len(obs)), result.confidences.argmax(axis=1)]
        paper = PAPER.get((variant, rule), (None, None))
        return {**base, "oos_rule": rule, "in_scope_acc": round(100 * fig["in_scope_accuracy"], 2),
                "oos_recall": round(100 * fig["oos_recall"], 2), "oos_precision": round(100 * fig["oos_precision"], 2),
                "oos_f1": round(100 * fig["oos_f1"], 2), "auroc": round(fig["auroc"], 4),
                "fpr95": round(100 * fig["fpr95"], 2), "ece_before": round(100 * before["ece"], 2),
                "ece": round(100 * after["ece"], 2), "temperature": round(decision.temperature, 4),
                "oos_threshold": decision.oos.threshold, "train_seconds": round(trained.seconds, 1),
                "paper_in_scope_acc": paper[0], "paper_oos_recall": paper[1],
                "kept_with_nothing_accepted": int(empty.sum()),
                "kept_with_nothing_accepted_top_right": int((empty & top_right).sum())}

    config = TrainConfig(method="pu", epochs=epochs, seed=seed, threads=threads)

    def trained_on(train_rows, valid_rows):
        """``(model, where to save it)`` for these rows: reused from ``ckpt_dir`` when an
        earlier run saved one of this recipe (then nothing to save), else trained.

        Saved under a hash of the data, so OOS+, whose in-scope rows are
        Full's, reuses Full's in-scope model.
        """
        data_id = fingerprint(train_rows, valid_rows).split(":")[-1][:12]
        path = None if ckpt_dir is None else Path(ckpt_dir) / f"{data_id}-e{epochs}-s{seed}"
        saved = saved_model(path, config)
        if saved is not None:
            return saved, None
        return Trainer(config).fit(train_rows, valid_rows), path

    def keep(trained, path, decision) -> None:
        """Save a newly trained model with a decision fitted on it, so that it exports as served."""
        if path is not None:
            write_checkpoint(path, trained.model, trained.tokenizer, {
                "labels": trained.labels, "backbone": config.backbone_name(), "max_length": config.max_length,
                "method": config.method, "decision": decision.to_dict(), "train_config": config.to_dict(),
                "train_seconds": round(trained.seconds, 1)})

    trained, path = trained_on(in_scope(train), in_scope(valid))
    train_in = in_scope(train)
    train_outputs = infer(trained.model, trained.tokenizer, [r.text for r in train_in], 64, progress=True)
    valid_outputs = infer(trained.model, trained.tokenizer, [r.text for r in valid], 64)
    for rule in rules:
        decision, _ = fit_decision(trained.labels, "softmax", valid, valid_outputs, train_in, train_outputs,
                                   DecisionConfig(oos_rule=rule))
        records.append(score(decision, rule, trained, test))
        logging.info("%s", records[-1])
        if rule == "distance":
            records[-1]["oos_retention"] = DISTANCE_RETENTION
            for retention in operating_points:
                point, _ = fit_decision(trained.labels, "softmax", valid, valid_outputs, train_in, train_outputs,
                                        DecisionConfig(oos_rule=rule, oos_retention=retention))
                records.append({**score(point, rule, trained, test), "oos_retention": retention,
                                "operating_point": True})
    keep(trained, path, decision)  # with the last rule's decision
    if train_rule:
        train_c, valid_c = oos_as_class(train), oos_as_class(valid)
        trained_c, path_c = trained_on(train_c, valid_c)
        valid_outputs = infer(trained_c.model, trained_c.tokenizer, [r.text for r in valid_c], 64)
        decision, _ = fit_decision(trained_c.labels, "softmax", valid_c, valid_outputs, train_c, None,
                                   DecisionConfig(oos_rule="train"))
        keep(trained_c, path_c, decision)
        # Scored on the original test rows: OOS rows have no gold label, and the
        # train rule's "oos" column is a verdict, never an accepted intent.
        record = score(decision, "train", trained_c, test)
        records.append(record)
        logging.info("%s", record)
    return records


def render(records: list[dict]) -> str:
    lines = ["| variant | OOS rule | in-scope acc | OOS recall | OOS F1 | AUROC | FPR@95 | ECE before → after "
             "| paper BERT (acc / recall) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in (r for r in records if not r.get("operating_point")):
        paper = "–" if r["paper_in_scope_acc"] is None else f"{r['paper_in_scope_acc']} / {r['paper_oos_recall']}"
        lines.append(f"| {r['dataset']} | {r['oos_rule']} | {r['in_scope_acc']:.2f} | {r['oos_recall']:.2f} | "
                     f"{r['oos_f1']:.2f} | {r['auroc']:.4f} | {r['fpr95']:.2f} | {r['ece_before']:.2f} → "
                     f"{r['ece']:.2f} | {paper} |")
    points = sorted((r for r in records if r["oos_rule"] == "distance" and "oos_retention" in r
                     and r["dataset"] == "clinc150-full"), key=lambda r: -r["oos_retention"])
    if len(points) > 1:
        lines += ["", "Distance rule on Full at other operating points (in-scope validation rows kept in scope; "
                  f"the default is {DISTANCE_RETENTION:.1%}):", "",
                  "| retention | in-scope acc | OOS recall | OOS precision | OOS F1 |", "|---|---|---|---|---|"]
        lines += [f"| {r['oos_retention']:.1%} | {r['in_scope_acc']:.2f} | {r['oos_recall']:.2f} | "
                  f"{r['oos_precision']:.2f} | {r['oos_f1']:.2f} |" for r in points]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--rules", nargs="+", default=["threshold", "distance"])
    parser.add_argument("--threads", type=int, help="torch threads (1 when another job shares the cores)")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ckpt-dir", default="runs/bench/oos/ckpt",
                        help="where each variant's in-scope model is saved, and reused from on later runs "
                             "('' to neither save nor reuse)")
    parser.add_argument("--operating-points", nargs="*", type=float, default=[0.95, 0.97, 0.985, 0.99],
                        help="other in-scope retentions at which the distance rule is scored on Full")
    parser.add_argument("--train-rule-on", nargs="*", default=["full", "oos_plus"],
                        help="variants on which the oos-as-a-class model is trained too")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    records: list[dict] = []
    for variant in args.variants:
        records += run_variant(variant, args.epochs, args.rules, variant in args.train_rule_on, args.seed, args.threads,
                               args.ckpt_dir or None, tuple(args.operating_points) if variant == "full" else ())
        # Variants and rules not run this time keep their recorded figures (the command lists both runs).
        done = {(r["dataset"], r["oos_rule"]) for r in records}
        merged, command = keep_previous("oos", records, lambda r: (r["dataset"], r["oos_rule"]) in done)
        merged.sort(key=lambda r: list(VARIANTS).index(r["dataset"].removeprefix("clinc150-")))
        write_results("oos", merged, render(merged), command=command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
