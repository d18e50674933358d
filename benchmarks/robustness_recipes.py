"""Robust-training recipes side by side, from runs ``robustness_bench.py`` left behind.

Each run directory (``<work>/<dataset>/seed<N>/<model>``) holds the model's
checkpoint (its training configuration, history and time) and its full
robustness report; this script reads them, retrains nothing, and tabulates
per recipe: epochs, copies per row, whether copies were drawn afresh every
epoch, the consistency weight, training time, best epoch and its validation
loss, clean accuracy and its change against the baseline, the Random drop and
the drops of the operators that cost the most. The recipes must share the
baseline's data set, seed and test set (the reports are checked for it).

    python -m benchmarks.robustness_recipes --baseline runs/bench/robustness3/clinc150/seed0/baseline \\
        --runs runs/bench/robustness2/clinc150/seed0/augmented runs/bench/robustness3/clinc150/seed0/augmented
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


from benchmarks.common import write_results

# The operators a recipe has to fix: the largest drops of the augmented models.
HARDEST = ("asr_soundalike", "typo_keyboard", "eda_delete", "speako")


def read_run(directory: Path) -> tuple[dict, dict]:
    """``(checkpoint meta, robustness report)`` of one run directory."""
    from intentvcs.training.checkpoint import read_checkpoint_meta

    meta = read_checkpoint_meta(directory / "checkpoint")
    report = json.loads((directory / "robustness.json").read_text(encoding="utf-8"))
    return meta, report


def recipe_record(directory: Path, meta: dict, report: dict, baseline_clean: float) -> dict:
    from intentvcs.training.checkpoint import training_seconds
    from intentvcs.training.trainer import TrainConfig

    config = TrainConfig.from_stored(meta["train_config"]).to_dict()
    best = meta["history"][meta["best_epoch"] - 1]
    clean = report["clean"]["accuracy"]
    return {
        "run": str(directory),
        "epochs": config["epochs"],
        "augment_ratio": config["augment_ratio"],
        "augment_mix": config["augment_mix"],
        "augment_resample": config["augment_resample"],
        "consistency_weight": config["consistency_weight"],
        "freeze_embeddings": config["freeze_embeddings"],
        "validate_perturbed": config["validate_perturbed"],
        "spelling": bool(meta.get("spelling")),
        "train_seconds": training_seconds(meta),
        "best_epoch": meta["best_epoch"],
        "best_valid_loss": round(best["valid_loss"], 4),
        "clean_acc": round(clean, 2),
        "clean_gain": round(clean - baseline_clean, 2),
        "random_drop": round(report["random"]["accuracy"]["drop_mean"], 2),
        "random_drop_std": round(report["random"]["accuracy"]["drop_std"], 2),
        **{f"drop_{name}": round(report["operators"][name]["accuracy"]["drop"], 2) for name in HARDEST},
    }


def run_name(record: dict) -> str:
    """``baseline``, or the work directory an augmented run was made in (``<work>/<dataset>/seed<N>/<model>``)."""
    return record["run"].split("/")[-4] if record["augment_ratio"] else "baseline"


def render(records: list[dict]) -> str:
    head = ("| recipe | epochs | copies/row | fresh copies | consistency | embeddings | validation | spelling "
            "| train min | best epoch (valid loss) | clean acc (vs baseline) | Random drop | "
            + " | ".join(HARDEST) + " |")
    lines = ["Robust-training recipes on the same data, seed and test sets; drops in points against the same rows "
             "clean, Random = mean over the report's draws; validation: the rows early stopping and the kept epoch "
             "go by (clean, or with one perturbed copy each).", "", head,
             "|" + "---|" * (12 + len(HARDEST))]
    for r in records:
        if not r["augment_ratio"]:
            fresh, consistency = "–", "–"
        else:
            fresh, consistency = ("yes" if r["augment_resample"] else "no"), f"{r['consistency_weight']:g}"
        lines.append(
            f"| {run_name(r)} | {r['epochs']} | {r['augment_ratio']:g} | {fresh} | {consistency} "
            f"| {'frozen' if r['freeze_embeddings'] else 'trained'} "
            f"| {'+ perturbed' if r['validate_perturbed'] else 'clean'} | {'on' if r['spelling'] else 'off'} "
            f"| {r['train_seconds'] / 60:.0f} | {r['best_epoch']} ({r['best_valid_loss']:.3f}) "
            f"| {r['clean_acc']:.2f} ({r['clean_gain']:+.2f}) | {r['random_drop']:.2f} ± {r['random_drop_std']:.2f} | "
            + " | ".join(f"{r[f'drop_{n}']:.2f}" for n in HARDEST) + " |")
    mixes = [f"{run_name(r)} `{json.dumps(r['augment_mix'])}`" for r in records if r["augment_ratio"]]
    lines += ["", "Operator mixes: " + "; ".join(mixes)]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, required=True, help="run directory of the untreated model")
    parser.add_argument("--runs", type=Path, nargs="+", required=True, help="run directories of augmented models")
    parser.add_argument("--results-name", default="robustness_recipes")
    args = parser.parse_args()

    base_meta, base_report = read_run(args.baseline)
    records = [recipe_record(args.baseline, base_meta, base_report, base_report["clean"]["accuracy"])]
    for directory in args.runs:
        meta, report = read_run(directory)
        if (meta["data_fingerprint"], report["n"], report["seed"]) != (
                base_meta["data_fingerprint"], base_report["n"], base_report["seed"]):
            raise SystemExit(f"{directory}: trained or tested on other data than the baseline {args.baseline}")
        records.append(recipe_record(directory, meta, report, base_report["clean"]["accuracy"]))
    write_results(args.results_name, records, render(records))
    print(render(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
