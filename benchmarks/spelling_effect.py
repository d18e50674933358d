"""The spelling normaliser's effect on the robustness figures, without retraining anything.

Compares two results of ``robustness_bench.py`` on the same trained models,
seeds and perturbed test sets: ``robustness_no_spelling`` (both models
without the normaliser) and ``robustness`` (with it, the default). Per data
set and model, means over the seeds both results measured, of: clean
accuracy, the Random drop, the keyboard typo drop, and for the augmented
model the clean-accuracy loss against the baseline, each without -> with.

    python -m benchmarks.spelling_effect

Writes ``benchmarks/results/spelling_effect.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import sys

from benchmarks.common import RESULTS, write_results
from benchmarks.robustness_bench import MODELS, recipe, seed_means

RUNS = {"off": "robustness_no_spelling", "on": "robustness"}


def load(name: str) -> list[dict]:
    return json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))["records"]


def training(record: dict) -> str:
    """What identifies one trained model in a "clean" record: its recipe and the epoch it kept.

    The normaliser is left out: it is what the two runs differ in.
    """
    trained = {**recipe(record), "best_epoch": record.get("best_epoch")}
    del trained["spelling_words"]
    return json.dumps(trained, sort_keys=True)


def common_seeds(*runs: list[dict]) -> dict[str, set[int]]:
    """Per data set, the seeds every run measured for both models with the same training
    (records before seeds count as seed 0): a model retrained with another recipe is not compared."""
    seen = [{(r["dataset"], r["model"], r.get("seed", 0), training(r)) for r in run if r["set"] == "clean"}
            for run in runs]
    keys = {key[:3] for key in set.intersection(*seen)}
    datasets = {dataset for dataset, _, _ in keys}
    return {d: {s for _, _, s in keys if (d, "baseline", s) in keys and (d, "augmented", s) in keys}
            for d in datasets}


def means(records: list[dict], seeds: dict[str, set[int]]) -> dict[tuple, dict]:
    kept = [r for r in records if r.get("seed", 0) in seeds.get(r["dataset"], ())]
    return {(r["dataset"], r["model"], r["set"]): r for r in seed_means(kept)}


def compare(off: dict[tuple, dict], on: dict[tuple, dict]) -> list[dict]:
    """One record per (data set, model) in both (``off`` and ``on`` cover the same seeds)."""
    records = []
    for dataset, model, _ in (key for key in on if key[2] == "clean"):
        if (dataset, model, "clean") not in off:
            continue
        record = {"dataset": dataset, "model": model, "seeds": on[(dataset, model, "clean")]["seeds"]}
        for state, figures in (("off", off), ("on", on)):
            record[f"clean_{state}"] = figures[(dataset, model, "clean")]["clean_acc"]
            record[f"random_drop_{state}"] = figures[(dataset, model, "random")]["drop"]
            record[f"typo_drop_{state}"] = figures[(dataset, model, "typo_keyboard")]["drop"]
            if model == "augmented" and (dataset, "baseline", "clean") in figures:
                record[f"clean_loss_{state}"] = round(
                    figures[(dataset, "baseline", "clean")]["clean_acc"] - record[f"clean_{state}"], 2)
        records.append(record)
    order = {m: i for i, m in enumerate(MODELS)}
    return sorted(records, key=lambda r: (r["dataset"], order[r["model"]]))


def render(records: list[dict], left_out: list[str] = ()) -> str:
    """The table; ``left_out``: data sets either run measured that have no seed to compare on, named below it."""
    def pair(record: dict, key: str) -> str:
        if f"{key}_off" not in record:
            return "–"
        return f"{record[f'{key}_off']:.2f} → {record[f'{key}_on']:.2f}"

    lines = ["The same trained models, seeds and perturbed test sets, without → with the spelling normaliser "
             "(seed means; accuracy in %, drops and losses in points).", "",
             "| data set | model | seeds | clean accuracy | Random drop | typo_keyboard drop | clean loss vs baseline |",
             "|---|---|---|---|---|---|---|"]
    for r in records:
        lines.append(f"| {r['dataset']} | {r['model']} | {', '.join(map(str, r['seeds']))} | {pair(r, 'clean')} "
                     f"| {pair(r, 'random_drop')} | {pair(r, 'typo_drop')} | {pair(r, 'clean_loss')} |")
    if left_out:
        lines += ["", "Not compared (no seed on which both results measured both models, trained alike): "
                  + ", ".join(left_out) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    # No options; parsing still answers --help instead of rewriting the results.
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    runs = [load(name) for name in RUNS.values()]
    seeds = common_seeds(*runs)
    records = compare(*(means(run, seeds) for run in runs))
    left_out = sorted({r["dataset"] for run in runs for r in run} - {r["dataset"] for r in records})
    markdown = render(records, left_out)
    print(markdown)
    print(f"wrote {write_results('spelling_effect', records, markdown)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
