"""Robust training benchmark: baseline vs augmented models (docs/RESEARCH.md section 3).

Per data set, two PU models on the same backbone and seed: a **baseline** and
an **augmented** one (``TrainConfig.augment_ratio`` / ``augment_mix``: perturbed
copies of the training rows from ``intentvcs.core.perturb``). Each is exported to a
bundle and run through the robustness suite (``intentvcs.core.robustness``) on the
data set's original test split, with the ONNX engine the service runs. The
score is single-label intent accuracy (the top label is a gold label; ATIS
multi-intent rows count as right when the top label is one of theirs), per
operator, on the Random set (mean of ``--draws`` draws) and on the Hard set
(each utterance's worst operator for *that* model). CLINC150 Full runs on its
in-scope rows only. Both models see the same perturbed texts.

Targets, for the augmented model: Random mean drop <= 1.5 points, casing and
punctuation drops <= 0.5 points each, clean accuracy at most 0.3 points below
the baseline's. The baseline's per-operator drops are the reference.

    python -m benchmarks.robustness_bench                                  # SNIPS + ATIS, ~1-2 h on 2 cores
    python -m benchmarks.robustness_bench --datasets snips atis clinc150   # + CLINC150 Full, ~1-2 h more
    python -m benchmarks.robustness_bench --datasets snips --limit-train 300 --limit-test 100 \\
        --epochs 1 --backbone DIR --results-name robustness-smoke          # smoke run
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import random
import sys
from pathlib import Path


from benchmarks.common import ROOT, SHARED_DATA, keep_previous, seeds_named, write_results

# name -> (loader format, path under SHARED_DATA)
DATASETS = {"snips": ("snips", "snips"), "atis": ("atis", "atis"),
            "clinc150": ("clinc150", "clinc150/data_full.json")}
MODELS = ("baseline", "augmented")
# Equal weight per family rather than per operator: uniform over the 25
# operators would give RADDLE's five (typos, casing, punctuation...) a fifth
# of the copies; per family each of NATURE, LAUG and RADDLE gets a third.
DEFAULT_MIX = {"nature": 1.0, "laug": 1.0, "raddle": 1.0}
# Records written before the epochs were recorded per model all used the default.
EPOCHS_BEFORE_RECORDED = 3
# What a model's "clean" record says about how it was trained; seeds are averaged only alike.
# Records from before a key was recorded were trained with its value here.
RECIPE_KEYS = {"epochs": EPOCHS_BEFORE_RECORDED, "augment_ratio": None, "augment_mix": None,
               "augment_resample": False, "consistency_weight": 0.0, "freeze_embeddings": True,
               "validate_perturbed": False, "spelling_words": None,
               # The backbone (None: the default) and the row limits (None: all rows) are recorded since
               # 2026-11-28: a seed of a smoke run (--limit-train) must not be averaged with full runs.
               "backbone": None, "limit_train": None, "limit_test": None}
FIGURES = ("clean_acc", "perturbed_acc", "drop")  # each record's figures, averaged over the seeds
TARGETS = (  # (name, limit in points)
    ("random mean drop", 1.5),
    ("casing drop", 0.5),
    ("punctuation drop", 0.5),
    ("clean accuracy loss vs baseline", 0.3),
)


def subsample(rows: list, limit: int | None, seed: int) -> list:
    """A seeded random subset of ``limit`` rows in their original order (all rows when ``limit`` is None).

    Random, not the first rows: the source files are grouped by intent.
    """
    if limit is None or limit >= len(rows):
        return list(rows)
    keep = sorted(random.Random(f"{seed}\x1fsubsample").sample(range(len(rows)), limit))
    return [rows[i] for i in keep]


def load_splits(name: str, limit_train: int | None, limit_test: int | None, seed: int) -> tuple[list, list, list]:
    """``(train, valid, test)`` of a data set, in-scope rows only; ``limit_test`` caps valid and test."""
    from intentvcs.training.loaders import load

    fmt, relative = DATASETS[name]
    train, valid, test = (load(fmt, SHARED_DATA / relative, split, include_oos=False)
                          for split in ("train", "valid", "test"))
    return (subsample(train, limit_train, seed), subsample(valid, limit_test, seed),
            subsample(test, limit_test, seed))


def train_bundle(config, train: list, valid: list, directory: Path, reuse: bool = False,
                 spelling: bool = True) -> tuple[Path, dict]:
    """Train (PU pipeline, no OOS rule: the sets are in-scope only), export; return the bundle and the result.

    ``spelling``: with the spelling normaliser (the training default).
    ``reuse``: a checkpoint an earlier run left in ``directory`` from the same
    data and configuration is not retrained: ``refit_checkpoint`` rebuilds (or
    drops) its spelling normaliser and refits its decision with today's code,
    neither of which the weights depend on, so that it matches a fresh run.
    """
    from intentvcs.export.exporter import export_bundle
    from intentvcs.core.dataio import fingerprint
    from intentvcs.training.checkpoint import read_checkpoint_meta, training_seconds
    from intentvcs.training.config import DecisionConfig
    from intentvcs.training.pipeline import refit_checkpoint, train_pipeline

    checkpoint = directory / "checkpoint"
    meta = read_checkpoint_meta(checkpoint) if reuse and (checkpoint / "checkpoint.json").is_file() else None
    if meta is not None and (meta["data_fingerprint"], type(config).from_stored(meta["train_config"]).to_dict()) == (
            fingerprint(train, valid), config.to_dict()):
        logging.info("reusing %s", checkpoint)
        refit_checkpoint(checkpoint, train, valid, None, DecisionConfig(oos_rule="none", spelling=spelling))
        result = {"train_seconds": training_seconds(meta), "best_epoch": meta["best_epoch"]}
    else:
        result = train_pipeline(train, valid, None, config, DecisionConfig(oos_rule="none", spelling=spelling),
                                checkpoint)
    return Path(export_bundle(checkpoint, directory / "bundle")["bundle"]), result


def robustness_report(bundle: Path, test: list, draws: int, seed: int) -> dict:
    """The robustness suite on ``bundle`` through the CPU ONNX engine, scored by accuracy."""
    from intentvcs.core.robustness import run_suite
    from intentvcs.service.engine import Engine

    engine = Engine(bundle, provider="cpu")
    return run_suite(test, engine, None, draws, seed, metric="accuracy")


def _points(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def model_records(dataset: str, model: str, report: dict, result: dict, augmentation: dict) -> list[dict]:
    """One record per set: clean (the whole test set), each operator, Random and Hard.

    ``augmentation`` (``epochs``, ``augment_ratio``, ``augment_mix``) goes on
    the clean record: data sets may be run in parts with different settings.
    """
    base = {"dataset": dataset, "model": model}
    acc = report["clean"]["accuracy"]
    records = [{**base, "set": "clean", "family": None, "n": report["n"], "clean_acc": _points(acc),
                "perturbed_acc": None, "drop": None, "train_seconds": result["train_seconds"],
                "best_epoch": result["best_epoch"], **augmentation}]
    for name, entry in report["operators"].items():
        a = entry["accuracy"]
        records.append({**base, "set": name, "family": entry["family"], "n": entry["n"],
                        "clean_acc": _points(a["clean"]), "perturbed_acc": _points(a["perturbed"]),
                        "drop": _points(a["drop"])})
    r = report["random"]["accuracy"]
    records.append({**base, "set": "random", "family": None, "n": report["random"]["n"],
                    "clean_acc": _points(r["clean"]), "perturbed_acc": _points(r["perturbed_mean"]),
                    "drop": _points(r["drop_mean"]), "drop_std": _points(r["drop_std"]), "draws": report["draws"]})
    h = report["hard"]
    records.append({**base, "set": "hard", "family": None, "n": h["n"], "clean_acc": _points(h["accuracy"]["clean"]),
                    "perturbed_acc": _points(h["accuracy"]["perturbed"]), "drop": _points(h["accuracy"]["drop"]),
                    "worst_operator": h["worst_operator"]})
    return records


def recipe(record: dict) -> dict:
    """How a model was trained, from its "clean" record (``RECIPE_KEYS``, old records filled in)."""
    return {key: record.get(key, before) for key, before in RECIPE_KEYS.items()}


def seed_means(records: list[dict]) -> list[dict]:
    """One record per (data set, model, set): accuracies and drops averaged over the seeds measured.

    A 0.3-point clean-accuracy target is finer than one seed's noise on a
    test set of ~900 rows (5 rows are 0.56 points), hence several seeds.
    Records from before seeds were recorded count as seed 0. Seeds trained
    with different recipes do not average: a ``ValueError`` names them.
    ``seeds`` lists the seeds with a record of the set; a figure some of them
    lack (None: e.g. an operator that changed none of that seed's rows) is the
    mean over the others, which ``<figure>_seeds`` (e.g. ``drop_seeds``) names.
    """
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["dataset"], r["model"], r["set"]), []).append(r)
    means = []
    for key, group in groups.items():
        recipes = {json.dumps(recipe(r), sort_keys=True) for r in group}
        if len(recipes) > 1:
            raise ValueError(f"{'/'.join(key)}: seeds {sorted(r.get('seed', 0) for r in group)} were trained "
                             f"with different recipes ({' vs '.join(sorted(recipes))}); rerun them alike")
        # Per-run facts (seed, training time, best epoch) do not average; the raw records keep them.
        mean = {k: v for k, v in group[0].items() if k not in ("seed", "train_seconds", "best_epoch")}
        mean["seeds"] = sorted(r.get("seed", 0) for r in group)
        for key in FIGURES:
            measured = [r for r in group if r.get(key) is not None]
            mean[key] = round(sum(r[key] for r in measured) / len(measured), 2) if measured else None
            if measured and len(measured) < len(group):
                mean[f"{key}_seeds"] = sorted(r.get("seed", 0) for r in measured)
        means.append(mean)
    return means


def figure_seeds(mean: dict, key: str) -> list[int]:
    """The seeds a ``seed_means`` record's figure ``key`` is the mean of."""
    return mean.get(f"{key}_seeds", mean["seeds"])


def seeds_apart(mean: dict | None, key: str, model_seeds: list[int] | None) -> list[int] | None:
    """The seeds ``mean``'s figure ``key`` is over where they are not ``model_seeds`` (the seeds of its
    model's clean record; None: the record's own), so that a table names them; None where they are."""
    if mean is None or mean.get(key) is None:
        return None
    over = figure_seeds(mean, key)
    return None if over == (model_seeds or mean["seeds"]) else over


def target_checks(records: list[dict]) -> list[dict]:
    """The targets of the augmented model, per data set that has both models (``records``: seed means)."""
    find = {(r["dataset"], r["model"], r["set"]): r for r in records}
    checks = []
    for dataset in dict.fromkeys(r["dataset"] for r in records):
        if (dataset, "augmented", "clean") not in find or (dataset, "baseline", "clean") not in find:
            continue
        aug = {s: find.get((dataset, "augmented", s)) for s in ("random", "casing", "punctuation", "clean")}
        loss = find[(dataset, "baseline", "clean")]["clean_acc"] - aug["clean"]["clean_acc"]
        values = (aug["random"]["drop"], aug["casing"]["drop"], aug["punctuation"]["drop"], round(loss, 2))
        drops = (aug["random"], aug["casing"], aug["punctuation"], None)
        for (name, limit), value, drop in zip(TARGETS, values, drops):
            # A drop over other seeds than the model's (some seed lacks it) names them, as in the table.
            apart = None if drop is None else seeds_apart(drop, "drop", aug["clean"]["seeds"])
            checks.append({"dataset": dataset, "target": name, "limit": limit, "value": value,
                           **({"value_seeds": apart} if apart else {}), "met": value is not None and value <= limit})
    return checks


def _cell(record: dict | None, key: str, seeds: list[int] | None = None) -> str:
    """A figure to 2 decimals, or a dash; ``seeds``: the seeds it is a mean of, named after it."""
    value = None if record is None else record.get(key)
    return "–" if value is None else f"{value:.2f}" + (f" ({seeds_named(seeds)})" if seeds else "")


def render(records: list[dict], checks: list[dict], settings: dict) -> str:
    """Per data set one table (sets x models), then the targets."""
    find = {(r["dataset"], r["model"], r["set"]): r for r in records}
    # The draws each record was measured with (records kept from an earlier run may differ from this run's
    # --draws, which is the fallback for records that do not say).
    draws: dict[str, set[int]] = {}
    for r in records:
        if r["set"] == "random":
            draws.setdefault(r["dataset"], set()).add(r.get("draws") or settings["draws"])
    every = set().union(*draws.values())
    if len(every) > 1:
        random_text = "Random: mean over " + ", ".join(f"{'/'.join(map(str, sorted(n)))} draws ({dataset})"
                                                       for dataset, n in draws.items()) + "."
    else:
        random_text = f"Random: mean over {next(iter(every), settings['draws'])} draws."
    lines = [f"Intent accuracy (%) on each set and drop (points) against the same rows clean, averaged over "
             f"the seeds listed (each seed trains both models and draws its own perturbations). {random_text}", ""]
    named_apart = False
    for dataset in dict.fromkeys(r["dataset"] for r in records):
        aug = find.get((dataset, "augmented", "clean"), {})
        base = find.get((dataset, "baseline", "clean"), {})
        how = "".join(f"; {name}: {r.get('epochs', EPOCHS_BEFORE_RECORDED)} epochs" for name, r in
                      (("baseline", base), ("augmented", aug)) if r)
        how += (f"; augmented model: ratio {aug['augment_ratio']}, mix `{json.dumps(aug['augment_mix'])}`"
                if "augment_ratio" in aug else "")
        if aug.get("augment_ratio"):
            how += ", fresh copies every epoch" if aug.get("augment_resample") else ", copies drawn once"
        how += f", consistency weight {aug['consistency_weight']}" if aug.get("consistency_weight") else ""
        how += ", word embeddings trained" if aug.get("freeze_embeddings") is False else ""
        how += ", validated on perturbed copies too" if aug.get("validate_perturbed") else ""
        # Records from before the spelling normaliser existed lack the key: it was off.
        spelling = {name: "on" if r.get("spelling_words") else "off" for name, r in
                    (("baseline", base), ("augmented", aug)) if r}
        how += (f"; spelling normaliser {next(iter(spelling.values()))}" if len(set(spelling.values())) == 1 else
                "; spelling normaliser " + ", ".join(f"{state} for the {name}" for name, state in spelling.items()))
        # Each model's seeds; they are named apart when the two models were not measured on the same ones.
        by_model = {name: find[(dataset, name, "clean")]["seeds"] for name in MODELS
                    if (dataset, name, "clean") in find}
        if len({tuple(seeds) for seeds in by_model.values()}) > 1:
            seeds = "seeds: " + "; ".join(f"{name} {', '.join(map(str, s))}" for name, s in by_model.items())
        else:
            seeds = "seeds " + ", ".join(map(str, next(iter(by_model.values()), None)
                                             or find[next(k for k in find if k[0] == dataset)]["seeds"]))
        lines += [f"**{dataset}** ({seeds}{how})", "",
                  "| set | family | n | baseline clean | baseline perturbed | baseline drop "
                  "| augmented clean | augmented perturbed | augmented drop |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for name in dict.fromkeys(r["set"] for r in records if r["dataset"] == dataset):
            pair = {m: find.get((dataset, m, name)) for m in MODELS}
            first = next(r for r in pair.values() if r is not None)
            # A mean over other seeds than its model's (a seed without the figure, or without the set) names them.
            apart = {(m, k): seeds_apart(r, k, by_model.get(m)) for m, r in pair.items() for k in FIGURES}
            named_apart = named_apart or any(apart.values())
            cells = [_cell(r, k, apart[m, k]) for m, r in pair.items() for k in FIGURES]
            lines.append(f"| {name} | {first['family'] or '–'} | {first['n']} | " + " | ".join(cells) + " |")
        lines.append("")
    if checks:
        lines += ["| data set | target (augmented model) | value | limit | met |", "|---|---|---|---|---|"]
        lines += [f"| {c['dataset']} | {c['target']} | {_cell(c, 'value', c.get('value_seeds'))} | {c['limit']} | "
                  f"{'yes' if c['met'] else 'no'} |" for c in checks]
        named_apart = named_apart or any(c.get("value_seeds") for c in checks)
    if named_apart:
        lines[0] += " A figure averaged over other seeds than its model's names them."
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["snips", "atis"], choices=list(DATASETS))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, help="torch threads (1 when another job shares the cores)")
    parser.add_argument("--backbone", help="local Hugging Face model dir (default: packaged all-MiniLM-L6-v2)")
    parser.add_argument("--augment", type=float, default=1.0, help="augmented model: perturbed copies per row")
    parser.add_argument("--augment-mix", type=json.loads, default=DEFAULT_MIX, metavar="JSON",
                        help="operator or family weights (default: equal per family)")
    parser.add_argument("--augment-resample", action="store_true",
                        help="augmented model: draw fresh perturbed copies every epoch (training's default; off "
                             "here so that the commands recorded before it existed still reproduce)")
    parser.add_argument("--train-embeddings", action="store_true",
                        help="augmented model: fine-tune the word embeddings too (frozen by default), so pieces "
                             "of misspelt words can move")
    parser.add_argument("--validate-perturbed", action="store_true",
                        help="augmented model: early stopping and the kept epoch on validation rows plus perturbed "
                             "copies (TrainConfig.validate_perturbed)")
    parser.add_argument("--consistency", type=float, default=0.0, metavar="WEIGHT",
                        help="augmented model: weight of the clean-vs-copy KL term (TrainConfig.consistency_weight)")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS,
                        help="models to (re)train; the other's earlier records are kept")
    parser.add_argument("--draws", type=int, default=10, help="Random-set draws (NATURE averages 10)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0],
                        help="training, subsampling and perturbation seeds; figures are their means")
    parser.add_argument("--limit-train", type=int, help="train on a random subset of this many rows")
    parser.add_argument("--limit-test", type=int, help="validate and test on random subsets of this many rows")
    parser.add_argument("--work", default=str(ROOT / "runs" / "bench" / "robustness"),
                        help="checkpoints, bundles and full reports go here")
    parser.add_argument("--no-spelling", dest="spelling", action="store_false",
                        help="both models without the spelling normaliser (training builds one by default)")
    parser.add_argument("--reuse", action="store_true",
                        help="refit and export a checkpoint left in --work by an earlier run (same data and "
                             "settings) instead of retraining it")
    parser.add_argument("--results-name", default="robustness", help="writes benchmarks/results/NAME.{json,md}")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from intentvcs.core import atomic
    from intentvcs.core.manifest import read as read_manifest
    from intentvcs.training.trainer import TrainConfig

    settings = {"backbone": args.backbone or "all-MiniLM-L6-v2", "method": "pu",
                "draws": args.draws, "limit_train": args.limit_train, "limit_test": args.limit_test}
    records: list[dict] = []
    for dataset, seed, model in itertools.product(args.datasets, args.seeds, args.models):
        train, valid, test = load_splits(dataset, args.limit_train, args.limit_test, seed)
        logging.info("== %s / seed %d / %s: %d train, %d valid, %d test rows", dataset, seed, model, len(train),
                     len(valid), len(test))
        augmented = model == "augmented"
        config = TrainConfig(backbone=args.backbone, method="pu", epochs=args.epochs, seed=seed, threads=args.threads,
                             augment_ratio=args.augment if augmented else 0.0,
                             augment_mix=args.augment_mix if augmented else None,
                             augment_resample=augmented and args.augment_resample,
                             consistency_weight=args.consistency if augmented else 0.0,
                             freeze_embeddings=not (augmented and args.train_embeddings),
                             validate_perturbed=augmented and args.validate_perturbed)
        directory = Path(args.work) / dataset / f"seed{seed}" / model
        bundle, result = train_bundle(config, train, valid, directory, args.reuse, args.spelling)
        report = robustness_report(bundle, test, args.draws, seed)
        atomic.write_json(directory / "robustness.json", report)
        spelling = read_manifest(bundle / "manifest.json")["spelling"]
        augmentation = {"epochs": args.epochs, "spelling_words": spelling and spelling["words"],
                        "augment_ratio": config.augment_ratio,
                        "augment_mix": config.augment_mix, "augment_resample": config.augment_resample,
                        "consistency_weight": config.consistency_weight,
                        "freeze_embeddings": config.freeze_embeddings,
                        "validate_perturbed": config.validate_perturbed, "backbone": args.backbone,
                        "limit_train": args.limit_train, "limit_test": args.limit_test}
        records += [{**r, "seed": seed} for r in model_records(dataset, model, report, result, augmentation)]
        # Data sets, seeds and models measured by an earlier run and not redone here are kept.
        merged, command = keep_previous(args.results_name, records, lambda r: (
            r["dataset"] in args.datasets and r.get("seed", 0) in args.seeds and r["model"] in args.models))
        means = seed_means(merged)
        checks = target_checks(means)
        write_results(args.results_name, merged, render(means, checks, settings),
                      extra={"settings": settings, "targets": checks}, command=command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
