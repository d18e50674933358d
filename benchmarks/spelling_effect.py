"""The spelling normaliser's effect on the robustness figures, without retraining anything.

Compares two results of ``robustness_bench.py`` on the same trained models,
seeds and perturbed test sets: ``robustness_no_spelling`` (both models
without the normaliser) and ``robustness`` (with it, the default). Per data
set and model, seed means of: clean accuracy, the Random drop, the keyboard
typo drop, and for the augmented model the clean-accuracy loss against the
baseline, each without -> with.

    python benchmarks/spelling_effect.py

Writes ``benchmarks/results/spelling_effect.json`` and ``.md``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import RESULTS, write_results  # noqa: E402
from benchmarks.robustness_bench import MODELS, seed_means  # noqa: E402

RUNS = {"off": "robustness_no_spelling", "on": "robustness"}


def means(name: str) -> dict[tuple, dict]:
    records = json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))["records"]
    return {(r["dataset"], r["model"], r["set"]): r for r in seed_means(records)}


def compare(off: dict[tuple, dict], on: dict[tuple, dict]) -> list[dict]:
    """One record per (data set, model) measured on the same seeds both ways."""
    records = []
    for dataset, model, _ in (key for key in on if key[2] == "clean"):
        pair = {state: figures[(dataset, model, "clean")] for state, figures in (("off", off), ("on", on))
                if (dataset, model, "clean") in figures}
        if len(pair) < 2 or pair["off"]["seeds"] != pair["on"]["seeds"]:
            continue
        record = {"dataset": dataset, "model": model, "seeds": pair["on"]["seeds"]}
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


def render(records: list[dict]) -> str:
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
    return "\n".join(lines) + "\n"


def main() -> int:
    records = compare(*(means(name) for name in RUNS.values()))
    markdown = render(records)
    print(markdown)
    print(f"wrote {write_results('spelling_effect', records, markdown)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
