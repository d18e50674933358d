"""Reproduce the DialogVCS table (docs/RESEARCH.md section 1.6) on SNIPS-, ATIS-, MultiWOZ- and CrossWOZ-VCS.

Every method is trained on the same benchmark files with the default backbone
and scored on the test gold sets (micro F1 and exact match, threshold 0.5 on
the method's confidences). The PU method and the upper bound use several seeds
(median reported); the weaker baselines one, to fit a 2-core CPU budget.

    python -m benchmarks.vcs_bench                       # full run (hours on 2 cores)
    python -m benchmarks.vcs_bench --datasets atis --methods pu --seeds 1
    python -m benchmarks.vcs_bench --datasets snips --variants easy2 hard2 --methods pu upper_bound

``--variants`` names the builder's difficulties (``intentvcs.training.vcs_builder``, "Difficulty"):
``full`` is the paper's table; ``easyK`` / ``hardK`` give versions (easy) or splits, versions and merge
frictions (hard) to K families only, the paper's "Easy k" / "Hard k". Their records are named
``<set>-vcs-easyK`` / ``-hardK``; the paper publishes no figures for them.
"""

from __future__ import annotations

import argparse
import logging
import re
import statistics
import sys
from pathlib import Path


from benchmarks.common import ROOT, SHARED_DATA, keep_previous, write_results

# Published BERT-base figures (median of 5 seeds), F1 / EM: docs/RESEARCH.md section 1.6.
PAPER = {
    "snips": {"bce": (10.00, 14.29), "negative_sampling": (93.73, 85.14), "ls_focal": (95.90, 92.86),
              "mlce": (87.04, 65.14), "upper_bound": (96.57, 95.86)},
    "atis": {"bce": (0.15, 0.00), "negative_sampling": (87.14, 76.37), "ls_focal": (86.43, 77.05),
             "mlce": (88.65, 79.91), "upper_bound": (92.09, 83.22)},
    "crosswoz": {"bce": (38.35, 3.94), "negative_sampling": (65.54, 42.97), "ls_focal": (92.48, 80.34),
                 "mlce": (44.60, 14.47), "upper_bound": (96.92, 93.49)},
    "multiwoz": {"bce": (53.67, 6.75), "negative_sampling": (86.62, 82.79), "ls_focal": (87.52, 85.85),
                 "mlce": (87.10, 80.46), "upper_bound": (88.32, 86.71)},
}
METHOD_NAMES = {"bce": "basic classifier (BCE)", "negative_sampling": "negative sampling",
                "ls_focal": "LS focal loss", "mlce": "multi-label CE", "pu": "**PU: softmax + Elkan–Noto (ours)**",
                "upper_bound": "upper bound (gold labels)"}
MULTI_SEED = {"pu", "upper_bound"}


def parse_variant(text: str) -> tuple[str, int | None]:
    """``full`` -> ("full", None); ``easy2`` / ``hard4`` -> the builder's difficulty and group count."""
    from intentvcs.training.vcs_builder import DIFFICULTIES

    match = re.fullmatch(r"(easy|hard)(\d+)|full", text)
    if match is None or (match.group(1) or "full") not in DIFFICULTIES:
        raise argparse.ArgumentTypeError(f"{text!r}: expected full, easyK or hardK (e.g. hard2)")
    return (match.group(1), int(match.group(2))) if match.group(1) else ("full", None)


def variant_arg(text: str) -> str:
    parse_variant(text)  # refuses a malformed name on the command line
    return text


def set_name(dataset: str, variant: str) -> str:
    """The name of a set's records (and, with ``-seedN``, its data folder): ``snips-vcs``, ``snips-vcs-hard2``."""
    return f"{dataset}-vcs" + ("" if variant == "full" else f"-{variant}")


def build_sets(datasets: list[str], variants: list[str], out_root: Path, seed: int) -> dict[tuple[str, str], Path]:
    """Each (data set, variant)'s benchmark files, built unless they exist."""
    from intentvcs.training.vcs_builder import build

    paths = {}
    for name in datasets:
        for variant in variants:
            difficulty, groups = parse_variant(variant)
            path = out_root / f"{set_name(name, variant)}-seed{seed}"
            if not (path / "info.json").exists():
                build(name, SHARED_DATA, path, seed=seed, difficulty=difficulty, groups=groups)
            paths[name, variant] = path
    return paths


def run_one(data: Path, method: str, seed: int, recipe: dict, out: Path, threads: int | None = None,
            reuse_only: bool = False, discover: float = 0.0, support_noise: float = 0.0) -> dict | None:
    """Train one model (or reuse a finished checkpoint of the same run) and score its served bundle.

    ``recipe`` holds the TrainConfig settings of the run (epochs, patience,
    ...). The checkpoint is exported (fp32, no int8: the figures are the
    model's) and scored through the serving engine (``score_bundle``).
    ``support_noise`` (PU only, the one softmax method) decides by support
    decoding: a new run is trained with it, a reused one scored with it (the
    decision ``intentvcs refit --support-noise`` would store: the noise is
    not fitted, so nothing else of the decision changes).
    """
    from intentvcs.core.dataio import fingerprint, read_jsonl
    from intentvcs.export.exporter import export_bundle
    from intentvcs.training.checkpoint import read_checkpoint_meta
    from intentvcs.training.pipeline import train_pipeline
    from intentvcs.training.config import METHOD_TABLE, DecisionConfig, TrainConfig

    gold = method == "upper_bound"
    config = TrainConfig(method=method, seed=seed, threads=threads, **recipe)
    support_noise = support_noise if METHOD_TABLE[method][1] == "softmax" else 0.0
    test = read_jsonl(data / "test.jsonl")
    valid = data / ("valid_gold.jsonl" if gold else "valid.jsonl")

    def training_rows():
        return read_jsonl(data / ("train_gold.jsonl" if gold else "train.jsonl")), read_jsonl(valid)

    meta = None
    if (out / "checkpoint.json").exists():
        meta = read_checkpoint_meta(out)
        # Thread count changes speed, not the run; everything else must match, the rows it learnt from too
        # (a data folder built again by a changed builder holds other rows under the same name).
        stored = TrainConfig.from_stored(meta["train_config"])
        same = ({**stored.to_dict(), "threads": None} == {**config.to_dict(), "threads": None}
                and meta.get("data_fingerprint") == fingerprint(*training_rows()))
        if not same:
            logging.warning("%s was trained with another recipe or on other rows than %s: not reused", out, data)
        meta = meta if same else None
    if meta is None and reuse_only:
        return None
    if meta is None:
        train, valid_rows = training_rows()
        train_pipeline(train=train, valid=valid_rows, test=test, config=config,
                       decision=DecisionConfig(oos_rule="none", support_noise=support_noise), out=out)
        meta = read_checkpoint_meta(out)
    else:
        logging.info("reusing finished run %s", out)
    bundle = out.parent / f"{out.name}-bundle"
    manifest = bundle / "manifest.json"
    if not manifest.is_file() or manifest.stat().st_mtime < (out / "checkpoint.json").stat().st_mtime:
        export_bundle(out, bundle, quantize=False, force=True)
    return {**score_bundle(bundle, data, valid, threads, discover, support_noise),
            "support_noise": support_noise or None,
            "epoch_seconds": [h["seconds"] for h in meta["history"]], "best_epoch": meta["best_epoch"]}


def score_bundle(bundle: Path, data: Path, valid: Path, threads: int | None, discover: float,
                 support_noise: float = 0.0) -> dict:
    """The served bundle's test figures: as trained, with the builder's ground-truth relations as closure,
    and with the relations ``--discover-relations RATE`` reads off the validation rows (the same
    functions training runs with ``DecisionConfig.discover_relations``; 0 skips that variant); with
    ``support_noise``, each decided by support decoding."""
    from dataclasses import replace

    from intentvcs.core.dataio import read_jsonl
    from intentvcs.core.evaluation import evaluate, headline
    from intentvcs.core.relation_discovery import decide_with_discovered, decoding_at
    from intentvcs.core.relations import LabelRelations
    from intentvcs.service.engine import Engine
    from intentvcs.training.decision_fit import observed_matrix

    engine = Engine(bundle, provider="cpu", threads=threads, quantized="off")
    test = read_jsonl(data / "test.jsonl")
    decision = decoding_at(engine.decision, support_noise)  # the run's own, whatever a reused bundle stores
    outputs = engine.infer([ex.text for ex in test])
    closed = replace(decision, relations=LabelRelations.load(data / "relations.json"))
    figures = {"test": headline(evaluate(decision, outputs, test, include_tables=False)),
               "test_closure": headline(evaluate(closed, outputs, test, include_tables=False))}
    if discover:
        rows = read_jsonl(valid)
        discovered, found = decide_with_discovered(decision, engine.infer([ex.text for ex in rows]).logits,
                                                   observed_matrix(rows, decision.labels), discover)
        figures["test_discovered"] = headline(evaluate(discovered, outputs, test, include_tables=False))
        figures["discovered_relations"] = len(found)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["snips", "atis"])
    parser.add_argument("--variants", nargs="+", default=["full"], type=variant_arg,
                        help="the builder's difficulties: full (the paper's table), easyK, hardK (default: full)")
    parser.add_argument("--methods", nargs="+", default=list(METHOD_NAMES))
    parser.add_argument("--seeds", type=int, default=3, help="seeds for the PU method and the upper bound")
    parser.add_argument("--baseline-seeds", type=int, default=1)
    parser.add_argument("--threads", type=int, help="torch threads (1 when another job shares the cores)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--patience", type=int, help="epochs without validation improvement before stopping "
                                                     "(default: TrainConfig's)")
    parser.add_argument("--train-embeddings", action="store_true",
                        help="train the word-embedding matrix (TrainConfig freezes it by default)")
    parser.add_argument("--entity-weight", type=float,
                        help="weight of the entity (BIO) loss; 0 trains intents only (default: TrainConfig's)")
    parser.add_argument("--focal-alpha", type=float,
                        help="ls_focal: the positive part's class weight (default: TrainConfig's, the paper's 0.99999; "
                             "benchmarks/baseline_optima.py says why another reading is tested)")
    parser.add_argument("--extend-vocab", type=int, metavar="N",
                        help="grow the tokenizer by the training rows' unknown words seen N+ times (TrainConfig."
                             "extend_vocab; needs --train-embeddings)")
    parser.add_argument("--discover-relations", type=float, default=0.0, metavar="RATE",
                        help="also score each bundle closed under the relations read off its validation rows at "
                             "this rate (what training does with --discover-relations RATE); 0: skip")
    parser.add_argument("--support-noise", type=float, default=0.0, metavar="NOISE",
                        help="decide the PU method's answers by support decoding at this noise (what training does "
                             "with --support-noise NOISE; the baselines' sigmoid outputs keep thresholds); 0: off")
    parser.add_argument("--work", default=str(ROOT / "runs" / "bench" / "vcs"))
    parser.add_argument("--results-name", default="vcs", help="writes benchmarks/results/NAME.{json,md}")
    parser.add_argument("--reuse-only", action="store_true",
                        help="train nothing: score the finished runs found under --work (e.g. to assemble the "
                             "results of several partial runs into one file)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    work = Path(args.work)
    # The loss picks the epoch: the benchmark scores intents, and the joint rule (TrainConfig's default)
    # would keep the epoch of best entity accuracy where rows carry spans.
    recipe = {"epochs": args.epochs, "freeze_embeddings": not args.train_embeddings, "select_by": "loss"}
    optional = {"patience": args.patience, "entity_weight": args.entity_weight, "focal_alpha": args.focal_alpha,
                "extend_vocab": args.extend_vocab}
    recipe.update({key: value for key, value in optional.items() if value is not None})
    sets = build_sets(args.datasets, args.variants, work / "data", seed=0)
    records = []
    for (base, variant), data in sets.items():
        dataset = set_name(base, variant)
        # Folder names of the full sets predate the variants: kept, so finished runs are reused.
        ckpt = work / "ckpt" / (base if variant == "full" else f"{base}-{variant}")
        for method in args.methods:
            n_seeds = args.seeds if method in MULTI_SEED else args.baseline_seeds
            logging.info("== %s / %s", dataset, method)
            runs, missing = seed_runs(data, ckpt, method, n_seeds, recipe, args.threads, args.reuse_only,
                                      args.discover_relations, args.support_noise)
            if not runs:
                continue
            paper = PAPER.get(base, {}).get(method) if variant == "full" else None
            records.append(_record(dataset, method, runs, recipe, args.discover_relations, paper, missing))
            # A run redoes the (set, method) records it measured; the file keeps every other.
            done = {(r["dataset"], r["method"]) for r in records}
            merged, command = keep_previous(args.results_name, records,
                                            lambda r: (r["dataset"], r["method"]) in done)
            if args.reuse_only:  # the runs were trained by the same command without the flag
                # (stripped from every part, so that a later write of this run does not list it twice)
                command = " && ".join(dict.fromkeys(command.replace(" --reuse-only", "").split(" && ")))
            write_results(args.results_name, merged, render(merged), command=command,
                          extra={"assembled_from_finished_runs": args.reuse_only})
    return 0


def seed_runs(data: Path, ckpt: Path, method: str, n_seeds: int, recipe: dict, threads: int | None = None,
              reuse_only: bool = False, discover: float = 0.0,
              support_noise: float = 0.0) -> tuple[list[dict], list[int]]:
    """``run_one`` for seeds ``0 .. n_seeds - 1`` of ``method`` (runs under ``ckpt/<method>-s<seed>``): the
    results found, and the seeds without a finished run of this recipe (``reuse_only`` trains none), each
    named in a warning: a median of fewer seeds than the command asks for says so."""
    runs, missing = [], []
    for seed in range(n_seeds):
        logging.info("== %s / seed %d", method, seed)
        out = ckpt / f"{method}-s{seed}"
        result = run_one(data, method, seed, recipe, out, threads, reuse_only, discover, support_noise)
        if result is None:
            missing.append(seed)
            logging.warning("no finished run of this recipe at %s: seed %d left out", out, seed)
        else:
            runs.append(result)
    return runs, missing


def _record(dataset: str, method: str, runs: list[dict], recipe: dict, discover: float,
            paper: tuple[float, float] | None, missing: list[int] = ()) -> dict:
    """One results record: medians over the seeds' runs, per-seed figures, the paper's (None: unpublished);
    ``missing``: the seeds asked for that had no run (``--reuse-only``), named as ``seeds_missing``."""
    tests, closed = [r["test"] for r in runs], [r["test_closure"] for r in runs]

    def median(figures: list[dict], key: str) -> float:
        return round(100 * statistics.median(t[key] for t in figures), 2)

    return {
        "dataset": dataset, "method": method, "backbone": "all-MiniLM-L6-v2",
        "seeds": len(runs), **({"seeds_missing": list(missing)} if missing else {}),
        "epochs": recipe["epochs"], "recipe": recipe, "served": "bundle fp32 (Engine)",
        "support_noise": runs[0]["support_noise"],
        "F1": median(tests, "f1"), "EM": median(tests, "exact_match"),
        "precision": median(tests, "precision"), "recall": median(tests, "recall"),
        "F1_closure": median(closed, "f1"), "EM_closure": median(closed, "exact_match"),
        **_discovered_figures(runs, discover),
        "F1_per_seed": [round(100 * t["f1"], 2) for t in tests],
        "EM_per_seed": [round(100 * t["exact_match"], 2) for t in tests],
        "epoch_seconds_median": round(statistics.median(s for r in runs for s in r["epoch_seconds"]), 1),
        "best_epochs": [r["best_epoch"] for r in runs],
        "paper_F1": paper[0] if paper else None,
        "paper_EM": paper[1] if paper else None,
    }


def _discovered_figures(runs: list[dict], rate: float) -> dict:
    """Median F1 / EM with the discovered relations, and per seed, when they were scored."""
    found = [r["test_discovered"] for r in runs if "test_discovered" in r]
    if not found:
        return {}
    return {"discover_rate": rate,
            "F1_discovered": round(100 * statistics.median(t["f1"] for t in found), 2),
            "EM_discovered": round(100 * statistics.median(t["exact_match"] for t in found), 2),
            "EM_discovered_per_seed": [round(100 * t["exact_match"], 2) for t in found],
            "discovered_relations": [r["discovered_relations"] for r in runs if "test_discovered" in r]}


def render(records: list[dict]) -> str:
    """One row per set and method, ours beside the paper: as trained, closed under the relations read off
    the validation rows (when scored), and closed under the builder's ground-truth relations."""
    lines = ["| set | method | F1 / EM | + discovered relations | + ground-truth closure | paper (BERT-base) "
             "| recipe | s/epoch |", "|---|---|---|---|---|---|---|---:|"]
    for r in records:
        missing = r.get("seeds_missing") or []
        notes = [f"{r['seeds']} seeds, median" if r["seeds"] > 1 else f"{r['seeds']} seed"] if (
            r["seeds"] > 1 or missing) else []
        notes += [f"seed{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} not found"] if missing else []
        seeds = f" ({'; '.join(notes)})" if notes else ""
        recipe = r.get("recipe", {"epochs": r["epochs"], "freeze_embeddings": True})
        recipe_text = (f"{recipe['epochs']} epochs, " + ("frozen" if recipe.get("freeze_embeddings", True)
                                                          else "trained") + " embeddings"
                       + (f", patience {recipe['patience']}" if "patience" in recipe else "")
                       + (f", α_pos {recipe['focal_alpha']:g}" if "focal_alpha" in recipe else "")
                       + (f", vocabulary grown (words seen {recipe['extend_vocab']}+ times)"
                          if recipe.get("extend_vocab") else "")
                       + (f", support decoding (noise {r['support_noise']:g})" if r.get("support_noise") else ""))
        discovered = (f"{r['F1_discovered']:.2f} / {r['EM_discovered']:.2f} (rate {r['discover_rate']:g})"
                      if "EM_discovered" in r else "–")
        paper = "–" if r["paper_F1"] is None else f"{r['paper_F1']:.2f} / {r['paper_EM']:.2f}"
        lines.append(f"| {r['dataset']} | {METHOD_NAMES.get(r['method'], r['method'])} | "
                     f"{r['F1']:.2f} / {r['EM']:.2f}{seeds} | {discovered} | "
                     f"{r['F1_closure']:.2f} / {r['EM_closure']:.2f} | {paper} | {recipe_text} | "
                     f"{r['epoch_seconds_median']:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
