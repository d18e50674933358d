"""Chained requests: MixATIS and MixSNIPS (AGIF's construction, ``intentvcs build-mix``), served.

Parts (``--parts``, default all):

``product``   the usual case: models trained on single-intent SNIPS / ATIS only (``--runs``'s
              ``<data set>/seed<k>/checkpoint``; the recorded ones: ``RECIPES["product"]``),
              scored on the Mix test sets, standard and hard variant, through the served bundle:
              chained requests answered part by part (``intentvcs.core.segmentation``, the served
              default) and, for comparison, each text decided whole.
``chains``    the product setting with synthetic chains in training: single-intent SNIPS / ATIS plus
              chained rows built from them (``intentvcs train --chains``),
              ``runs/mix/ckpt/<data set>-chains-s<k>``, scored the same way, single-intent test too;
              a model with a boundary head (``intentvcs.core.boundaries``) also with its learnt request
              starts ignored (cut at connectors only), which isolates what the head adds.
``standard``  AGIF's protocol: models trained on the Mix training split (every row carries all its
              intents; sigmoid BCE, ``--method bce``), ``runs/mix/ckpt/<data set>-standard-s<k>``,
              scored the same way. ``RECIPES`` gives both training commands.
``single``    what segmentation costs single-intent traffic: SNIPS and ATIS test (the product
              models) and CLINC150 Full (oos_bench's PU model, distance rule), part by part vs whole.
``oos-chains`` out-of-scope parts in chained requests, for the models with an OOS rule (CLINC150 Full's,
              the ``single`` part's, and the demo's): ``mix_builder.oos_chains`` of each test split,
              1,000 each of a request and an out-of-scope utterance, two out-of-scope utterances, two
              requests; answered as served, without the OOS rule's part cut, and whole; *right* is the
              request's intent alone with a part named out of scope, the text out of scope, both
              intents and no out-of-scope part. The same on the validation splits per part retention:
              how ``oos.PART_RETENTION`` was chosen.
``margin``    how ``REQUEST_MARGIN`` was chosen: exact-set accuracy on the validation splits per margin
              (seed-0 product models, CLINC150 Full), and each text whole.
``cost``      engine seconds per utterance, part by part vs whole, interleaved, at batch 1 and 32,
              on the MixSNIPS test set and on single-intent SNIPS test.
``idle``      ``/predict`` latency at idle (one request at a time, one worker) of the SNIPS bundle
              served part by part and whole (``INTENTVCS_SEGMENT``), on both text sets.

Figures (percent): intent accuracy = the accepted intent set is exactly the gold set (AGIF's
"intent accuracy"); intent F1 (micro over (row, intent)); overall = intents and the entity set
exactly gold (AGIF's "overall accuracy"); slot F1 (CoNLL spans); placed = intents exact and every
gold segment's intent named by a part that covers at least half of that segment. Medians over the
seeds found, each seed's figures kept; a record names the seeds its median is over (``seeds_used``) and
the seeds asked for whose checkpoint was not found (``seeds_missing``), and the tables say so beside the
count.

    python -m benchmarks.mix_bench --threads 2
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from benchmarks.common import RESULTS, ROOT, SHARED_DATA, keep_previous, seeds_not_found, shown_path, write_results

DATASETS = ("atis", "snips")
VARIANTS = ("standard", "hard")
# Published intent accuracy / overall accuracy on MixATIS / MixSNIPS (the anchors).
ANCHORS = {
    "AGIF (Qin et al. 2020)": {"atis": (75.8, None), "snips": (96.5, None)},
    "GL-GIN (Qin et al. 2021)": {"atis": (76.3, 43.5), "snips": (95.6, 75.4)},
    "SLIM (Cai et al. 2022)": {"atis": (78.3, None), "snips": (97.2, None)},
    "TFMN (Chen et al. 2022)": {"atis": (79.8, None), "snips": (97.7, None)},
    "MISCA, RoBERTa (Pham et al. 2023)": {"atis": (None, 59.1), "snips": (None, 86.2)},
}
TARGETS = {"standard": {"atis": 85.0, "snips": 98.0}, "product": {"atis": 80.0, "snips": 95.0},
           "chains": {"atis": 80.0, "snips": 95.0}}
RECIPES = {
    "product": "ATIS: entities_bench's checkpoints (its RECIPES); SNIPS since 2026-11-27: intentvcs train --train "
               "<data set>-train.jsonl --valid <data set>-valid.jsonl --oos-rule none --epochs 3 --seed K, the chains "
               "recipe without chains, under --runs runs/mix/product (so that the two differ in the chains alone)",
    "standard": "intentvcs train --train <mix>/train.jsonl --valid <mix>/valid-known.jsonl --method bce "
                "--oos-rule none --epochs 4 --seed K (valid-known.jsonl, written by build-mix: the validation rows "
                "without the spans of types the Mix training split never shows)",
    "chains": "intentvcs train --train <data set>-train.jsonl --valid <data set>-valid.jsonl --chains R "
              "--oos-rule none --seed K (ATIS: R 1.0, --epochs 6; SNIPS: R 0.5, --epochs 3, its best epoch without "
              "chains, for time); since 2026-11-26 the chains also train the boundary head (--boundary-weight, "
              "default 1)",
}
PARTS = ("product", "chains", "standard", "single", "oos-chains", "margin", "cost", "idle")
PER_DATASET = ("product", "chains", "standard")  # the parts --datasets narrows
OOS_CHAIN_ROWS = 1000  # per kind of mix_builder.oos_chains
PART_RETENTIONS = (0.8, 0.85, 0.9, 0.95, None)  # None: no part cut (parts judged as whole texts)
COST_TEXTS = 512
COST_REPEATS = 3
MARGINS = (0.0, 0.01, 0.02, 0.05, 0.1, 1.0)  # 1.0: any accepted part is a request
IDLE_REQUESTS = 300
IDLE_ROUNDS = 2


def mix_data(dataset: str, variant: str, runs: Path) -> Path:
    """The built Mix set (``intentvcs build-mix``, seed 0), built once under ``runs``."""
    from intentvcs.training.mix_builder import build

    out = runs / f"{dataset}-{variant}"
    if not (out / "info.json").is_file():
        build(dataset, SHARED_DATA, out, variant=variant)
    return out


def bundle_of(checkpoint: Path) -> Path:
    """The checkpoint's served bundle (int8 where its gate passed), exported next to it, and again when the
    checkpoint is newer than it (retrained in place: the bundle of the earlier model would be scored)."""
    from intentvcs.export.exporter import export_bundle

    out = checkpoint.parent / (checkpoint.name + "-bundle" if checkpoint.name != "checkpoint" else "bundle")
    manifest = out / "manifest.json"
    if not manifest.is_file() or manifest.stat().st_mtime < (checkpoint / "checkpoint.json").stat().st_mtime:
        export_bundle(checkpoint, out, quantize=True, force=True)
    return out


def score(engine, rows, segment: bool, learned_starts: bool = True) -> dict:
    """The figures above for ``rows``, answered as served (``segment``) or each text whole; without
    ``learned_starts`` a boundary head's request starts are ignored (cuts at connectors only)."""
    from intentvcs.core.evaluation import evaluate
    from intentvcs.core.segmentation import decide_segmented

    def infer(texts):
        outputs = engine.infer(texts)
        return outputs if learned_starts else outputs._replace(starts=None)

    graph, segmented = decide_segmented(engine.decision, infer, [row.text for row in rows], segment)
    figures = evaluate(engine.decision, graph, rows, include_tables=False, result=segmented.result)
    out = {"intent_acc": figures["exact_match"], "intent_f1": figures["f1"], "top_acc": figures["top_accuracy"]}
    if "slot_f1" in figures:
        out.update(overall_acc=figures["overall_exact_match"], slot_f1=figures["slot_f1"])
    if all(row.meta and "segments" in row.meta for row in rows):
        exact = segmented.result.accepted == _gold(rows, engine.labels)
        out["placed_acc"] = statistics.fmean(
            bool(exact[i].all()) and _placed(row, segmented.parts[i], engine.labels) for i, row in enumerate(rows))
    if "auroc" in figures:
        out.update(in_scope_acc=figures["in_scope_accuracy"], oos_recall=figures["oos_recall"],
                   auroc=figures["auroc"])
    return {key: round(100 * value, 2) for key, value in out.items()}


def _gold(rows, labels):
    import numpy as np

    index = {label: j for j, label in enumerate(labels)}
    gold = np.zeros((len(rows), len(labels)), dtype=bool)
    for i, row in enumerate(rows):
        gold[i, [index[label] for label in row.labels if label in index]] = True
    return gold


def _placed(row, parts, labels) -> bool:
    """Every gold segment's intent is named by a part covering at least half of the segment."""
    for segment in row.meta["segments"]:
        length = segment["end"] - segment["start"]
        if not any(labels[j] == segment["intent"] and
                   min(part.end, segment["end"]) - max(part.start, segment["start"]) >= length / 2
                   for part in parts for j in part.accepted):
            return False
    return True


def seed_records(part: str, dataset: str, bundles: list[Path], sets: dict[str, list], threads: int | None) -> list:
    """Per evaluation set and answering mode, the median over ``bundles`` (one per seed), each kept."""
    from intentvcs.service.engine import Engine

    per_seed: dict[tuple[str, bool, bool], list[dict]] = {}
    for bundle in bundles:
        engine = Engine(bundle, provider="cpu", threads=threads)
        # (segment, learned starts): as served, each text whole, and for a boundary head connectors only.
        modes = [(True, True), (False, True)] + ([(True, False)] if engine.info["request_boundaries"] else [])
        for name, rows in sets.items():
            for segment, learned_starts in modes:
                figures = score(engine, rows, segment, learned_starts)
                per_seed.setdefault((name, segment, learned_starts), []).append(
                    {"bundle": str(shown_path(bundle)), "quantized": engine.quantized, **figures})
                logging.info("%s %s %s segment=%s learned starts=%s: %s", part, dataset, name, segment,
                             learned_starts, figures)
    records = []
    for (name, segment, learned_starts), runs in per_seed.items():
        keys = [key for key in runs[0] if key not in ("bundle", "quantized")]
        records.append({"part": part, "dataset": dataset, "evaluated_on": name, "segment": segment,
                        **({} if learned_starts else {"learned_starts": False}),
                        "seeds": len(runs), **{key: statistics.median(run[key] for run in runs) for key in keys},
                        "runs": runs})
    return records


def found_checkpoints(part: str, dataset: str, checkpoints: dict[int, Path]) -> tuple[dict[int, Path], list[int]]:
    """The ``checkpoints`` (by seed) that exist, and the seeds whose checkpoint does not; a warning names
    each one missing, so that a median of fewer seeds than asked for, or a data set left out, says why."""
    found = {seed: c for seed, c in checkpoints.items() if (c / "checkpoint.json").is_file()}
    missing = [seed for seed in checkpoints if seed not in found]
    if missing:
        logging.warning("%s %s: no checkpoint at %s (%s); %s", part, dataset,
                        ", ".join(str(checkpoints[seed]) for seed in missing), RECIPES[part],
                        f"scored on {len(found)} seed(s)" if found else "not scored, its recorded figures kept")
    return found, missing


def seeded_records(part: str, dataset: str, checkpoints: dict[int, Path], sets: Callable[[], dict[str, list]],
                   threads: int | None) -> list[dict]:
    """``seed_records`` over the ``checkpoints`` (by seed) found, on the evaluation ``sets()`` (built only
    then), each record naming the seeds its median is over (``seeds_used``) and, when any, the seeds asked
    for whose checkpoint was not found (``seeds_missing``): a median of 2 seeds where 3 were asked for
    must not read as the 3-seed median. None found: no record (the recorded ones are kept)."""
    found, missing = found_checkpoints(part, dataset, checkpoints)
    if not found:
        return []
    bundles = {seed: bundle_of(c) for seed, c in found.items()}
    seed_of = {str(shown_path(bundle)): seed for seed, bundle in bundles.items()}
    return [_name_seeds(record, [seed_of[run["bundle"]] for run in record["runs"]], missing)
            for record in seed_records(part, dataset, list(bundles.values()), sets(), threads)]


def _name_seeds(record: dict, used: list[int], missing: list[int]) -> dict:
    """``record`` with ``seeds_used`` (and ``seeds_missing`` when any) next to its ``seeds`` count."""
    named = {}
    for key, value in record.items():
        named[key] = value
        if key == "seeds":
            named["seeds_used"] = used
            if missing:
                named["seeds_missing"] = list(missing)
    return named


def _test_sets(dataset: str, runs: Path, mix_runs: Path, single: bool) -> dict[str, list]:
    """``dataset``'s Mix test sets (standard and hard) and, when ``single``, its single-intent test split."""
    from intentvcs.core.dataio import read_jsonl

    sets = {f"mix-{variant}": read_jsonl(mix_data(dataset, variant, mix_runs) / "test.jsonl") for variant in VARIANTS}
    return sets | ({"single": read_jsonl(runs / "data" / f"{dataset}-test.jsonl")} if single else {})


def product_part(runs: Path, mix_runs: Path, seeds: list[int], threads: int | None,
                 datasets: Sequence[str] = DATASETS) -> list[dict]:
    records = []
    for dataset in datasets:
        checkpoints = {seed: runs / dataset / f"seed{seed}" / "checkpoint" for seed in seeds}
        records += seeded_records("product", dataset, checkpoints,
                                  partial(_test_sets, dataset, runs, mix_runs, single=True), threads)
    return records


def trained_part(part: str, runs: Path, mix_runs: Path, seeds: list[int], threads: int | None,
                 datasets: Sequence[str] = DATASETS) -> list[dict]:
    """``standard``: Mix-trained checkpoints; ``chains``: single-intent data plus synthetic chains
    (``RECIPES``), trained by ``intentvcs train`` under ``<mix runs>/ckpt``."""
    records = []
    for dataset in datasets:
        checkpoints = {seed: mix_runs / "ckpt" / f"{dataset}-{part}-s{seed}" for seed in seeds}
        records += seeded_records(part, dataset, checkpoints,
                                  partial(_test_sets, dataset, runs, mix_runs, single=part == "chains"), threads)
    return records


def single_part(clinc_checkpoint: Path, demo_bundle: Path, threads: int | None) -> list[dict]:
    """CLINC150 Full (out-of-scope rows among single-intent ones) and the embedded demo set."""
    from intentvcs.core.dataio import read_jsonl
    from intentvcs.training import DEFAULT_DATA
    from intentvcs.training.loaders import load

    rows = load("clinc150", SHARED_DATA / "clinc150" / "data_full.json", "test")
    records = seed_records("single", "clinc150-full", [bundle_of(clinc_checkpoint)], {"single": rows}, threads)
    if _demo_present(demo_bundle, "single"):
        records += seed_records("single", "assistant (demo)", [demo_bundle],
                                {"single": read_jsonl(DEFAULT_DATA / "test.jsonl")}, threads)
    return records


def _demo_present(demo_bundle: Path, part: str) -> bool:
    """Whether the demo's bundle is there; a warning when it is not (its recorded figures are kept)."""
    if (demo_bundle / "manifest.json").is_file():
        return True
    logging.warning("%s assistant (demo): no bundle at %s (intentvcs demo writes it); not scored, its recorded "
                    "figures kept", part, demo_bundle)
    return False


def oos_chains_part(clinc_checkpoint: Path, demo_bundle: Path, threads: int | None) -> list[dict]:
    """Two-part texts with out-of-scope parts (``mix_builder.oos_chains``) for the models with an OOS rule:
    CLINC150 Full's and the demo's. Test splits as served, with the OOS rule's part cut and without it, and
    each text whole; validation splits per part retention (how ``oos.PART_RETENTION`` was chosen)."""
    from intentvcs.core.dataio import read_jsonl
    from intentvcs.training import DEFAULT_DATA
    from intentvcs.training.loaders import load

    clinc = SHARED_DATA / "clinc150" / "data_full.json"
    models = {"clinc150-full": (bundle_of(clinc_checkpoint), lambda split: load("clinc150", clinc, split))}
    if _demo_present(demo_bundle, "oos-chains"):
        models["assistant (demo)"] = (demo_bundle, lambda split: read_jsonl(DEFAULT_DATA / f"{split}.jsonl"))
    records = []
    for dataset, (bundle, rows_of) in models.items():
        records += _oos_chain_records(dataset, bundle, rows_of("valid"), rows_of("test"), threads)
    return records


def _oos_chain_records(dataset: str, bundle: Path, valid: list, test: list, threads: int | None) -> list[dict]:
    from dataclasses import replace

    from intentvcs.core.oos import part_threshold
    from intentvcs.service.engine import Engine
    from intentvcs.training.mix_builder import oos_chains

    engine = Engine(bundle, provider="cpu", threads=threads)
    served, rule = engine.decision, engine.decision.oos
    off = replace(served, oos=replace(rule, part_threshold=None))
    base = {"part": "oos-chains", "dataset": dataset, "bundle": str(shown_path(bundle)),
            "quantized": engine.quantized}
    records = []
    for kind, rows in oos_chains(test, OOS_CHAIN_ROWS).items():
        outputs = engine.infer([row.text for row in rows])  # the whole texts, read once for every way of answering
        for label, decision, segment in (("served", served, True), ("off", off, True), ("whole", served, False)):
            records.append({**base, "evaluated_on": kind, "segment": segment, "part_cut": label,
                            "part_threshold": decision.oos.part_threshold, "rows": len(rows),
                            **_oos_chain_figures(engine, decision, kind, rows, outputs, segment)})
            logging.info("%s", records[-1])
    in_scope = [row for row in valid if row.labels]
    scores = served.apply(*engine.infer([row.text for row in in_scope]).scores).oos_score
    for kind, rows in oos_chains(valid, OOS_CHAIN_ROWS).items():
        outputs = engine.infer([row.text for row in rows])
        for retention in PART_RETENTIONS:
            cut = None if retention is None else part_threshold(scores, rule.threshold, retention)
            decision = replace(served, oos=replace(rule, part_threshold=cut))
            records.append({**base, "evaluated_on": f"{kind} (valid)", "segment": True, "part_retention": retention,
                            "part_threshold": cut, "rows": len(rows),
                            **_oos_chain_figures(engine, decision, kind, rows, outputs, True)})
            logging.info("%s", records[-1])
    return records


def _oos_chain_figures(engine, decision, kind: str, rows: list, outputs, segment: bool) -> dict:
    """Percent of ``rows`` (their texts' graph ``outputs`` read already) with the intents exact, with a part (or
    the text) out of scope, and right for ``kind``: a request and an out-of-scope part: its intent and a part
    named out of scope; two out-of-scope parts: out of scope; two requests: both intents and no part out of
    scope."""
    import numpy as np

    from intentvcs.core.segmentation import decide_segmented

    _, segmented = decide_segmented(decision, engine.infer, [row.text for row in rows], segment, outputs=outputs)
    exact = (segmented.result.accepted == _gold(rows, engine.labels)).all(axis=1)
    named = np.array([any(part.out_of_scope for part in parts) for parts in segmented.parts])
    right = {"request+oos": exact & named, "oos+oos": segmented.result.out_of_scope,
             "request+request": exact & ~named}[kind]
    return {key: round(100 * float(value.mean()), 2)
            for key, value in (("intent_acc", exact), ("oos_named", named), ("right", right))}


def cost_part(runs: Path, mix_runs: Path, threads: int | None) -> list[dict]:
    """Engine seconds per utterance, part by part vs whole, interleaved (drift hits both alike)."""
    from intentvcs.core.dataio import read_jsonl
    from intentvcs.core.segmentation import decide_segmented
    from intentvcs.service.engine import Engine

    engine = Engine(bundle_of(runs / "snips" / "seed0" / "checkpoint"), provider="cpu", threads=threads)
    sets = {"mix-standard": read_jsonl(mix_data("snips", "standard", mix_runs) / "test.jsonl"),
            "single": read_jsonl(runs / "data" / "snips-test.jsonl")}
    records = []
    for name, rows in sets.items():
        texts = [row.text for row in rows][:COST_TEXTS]
        for batch in (1, 32):
            best = {True: float("inf"), False: float("inf")}
            for _ in range(COST_REPEATS):
                for segment in best:
                    began = time.perf_counter()
                    for first in range(0, len(texts), batch):
                        decide_segmented(engine.decision, engine.infer, texts[first:first + batch], segment)
                    best[segment] = min(best[segment], time.perf_counter() - began)
            records.append({"part": "cost", "dataset": "snips", "evaluated_on": name, "batch": batch,
                            "utterances": len(texts), "quantized": engine.quantized, "threads": threads,
                            "ms_per_utterance_segment": round(1000 * best[True] / len(texts), 3),
                            "ms_per_utterance_whole": round(1000 * best[False] / len(texts), 3),
                            "cost_pct": round(100 * (best[True] / best[False] - 1), 1)})
            logging.info("%s", records[-1])
    return records


def margin_part(runs: Path, mix_runs: Path, clinc_checkpoint: Path, threads: int | None) -> list[dict]:
    """How ``segmentation.REQUEST_MARGIN`` was chosen: exact-set accuracy on the validation splits (Mix,
    its hard variant, single-intent) of the seed-0 product models and CLINC150 Full, per margin and whole."""
    from intentvcs.core.dataio import read_jsonl
    from intentvcs.core.evaluation import evaluate
    from intentvcs.core.segmentation import decide_segmented
    from intentvcs.service.engine import Engine
    from intentvcs.training.loaders import load

    models = {dataset: (bundle_of(runs / dataset / "seed0" / "checkpoint"),
                        {f"mix-{variant}": read_jsonl(mix_data(dataset, variant, mix_runs) / "valid.jsonl")
                         for variant in VARIANTS} | {"single": read_jsonl(runs / "data" / f"{dataset}-valid.jsonl")})
              for dataset in DATASETS}
    models["clinc150-full"] = (bundle_of(clinc_checkpoint),
                               {"single": load("clinc150", SHARED_DATA / "clinc150" / "data_full.json", "valid")})
    records = []
    for dataset, (bundle, sets) in models.items():
        engine = Engine(bundle, provider="cpu", threads=threads)
        for name, rows in sets.items():
            texts = [row.text for row in rows]
            for margin in (*MARGINS, None):
                graph, segmented = decide_segmented(engine.decision, engine.infer, texts, margin is not None,
                                                    margin if margin is not None else 0.0)
                figures = evaluate(engine.decision, graph, rows, include_tables=False, result=segmented.result)
                records.append({"part": "margin", "dataset": dataset, "evaluated_on": f"{name} (valid)",
                                "margin": margin, "intent_acc": round(100 * figures["exact_match"], 2)})
                logging.info("%s", records[-1])
    return records


def idle_part(runs: Path, mix_runs: Path) -> list[dict]:
    """/predict p50 and p99 at idle (one request at a time, one worker), part by part vs whole: the served
    SNIPS bundle on single-intent and on chained texts; servers started in turn, ``IDLE_ROUNDS`` times."""
    import asyncio

    from benchmarks import load_test
    from intentvcs.cli.commands.serve import running
    from intentvcs.core.dataio import read_jsonl

    bundle = bundle_of(runs / "snips" / "seed0" / "checkpoint")
    sets = {"single": [row.text for row in read_jsonl(runs / "data" / "snips-test.jsonl")],
            "mix-standard": [row.text for row in read_jsonl(mix_data("snips", "standard", mix_runs) / "test.jsonl")]}
    measured: dict[tuple[str, bool], list[dict]] = {}
    for _ in range(IDLE_ROUNDS):
        for segment in (True, False):
            with running(bundle, workers=1, extra_env={"INTENTVCS_SEGMENT": "1" if segment else "0"}) as url:
                for name, texts in sets.items():
                    measured.setdefault((name, segment), []).append(
                        asyncio.run(load_test.idle(url, IDLE_REQUESTS, texts=texts)))
    records = []
    for (name, segment), runs_ in measured.items():
        records.append({"part": "idle", "dataset": "snips", "evaluated_on": name, "segment": segment,
                        "requests": IDLE_REQUESTS, "rounds": len(runs_),
                        "errors": sum(r["errors"] for r in runs_),
                        **{key: statistics.median(r[key] for r in runs_) for key in ("p50_ms", "p99_ms")}})
        logging.info("%s", records[-1])
    return records


def render(records: list[dict]) -> str:
    lines = ["| setting | data set | evaluated on | answered | seeds | intent acc | intent F1 | overall | slot F1 "
             "| placed | target |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        if r["part"] not in ("product", "chains", "standard") or r["evaluated_on"] == "single":
            continue
        served = r["segment"] and r.get("learned_starts", True)
        target = TARGETS[r["part"]][r["dataset"]] if served and r["evaluated_on"] == "mix-standard" else None
        lines.append(f"| {r['part']} | {r['dataset']} | {r['evaluated_on']} | {_answered(r)} | {_seeds(r)} "
                     f"| {r['intent_acc']:.2f} | {r['intent_f1']:.2f} | {_fig(r.get('overall_acc'))} "
                     f"| {_fig(r.get('slot_f1'))} | {_fig(r.get('placed_acc'))} | {_fig(target)} |")
    lines += ["", "| published | MixATIS intent acc / overall | MixSNIPS intent acc / overall |", "|---|---|---|"]
    for name, figures in ANCHORS.items():
        lines.append(f"| {name} | {_fig(figures['atis'][0])} / {_fig(figures['atis'][1])} "
                     f"| {_fig(figures['snips'][0])} / {_fig(figures['snips'][1])} |")
    lines += ["", "Single-intent traffic, answered part by part vs whole:", "",
              "| model | test set | answered | intent acc (exact set) | top intent acc | in-scope acc | OOS recall "
              "| AUROC |", "|---|---|---|---|---|---|---|---|"]
    for r in records:
        if r["part"] in ("product", "chains", "single") and r["evaluated_on"] == "single":
            lines.append(f"| {r['part']} | {r['dataset']} | {_answered(r)} | {r['intent_acc']:.2f} "
                         f"| {r['top_acc']:.2f} | {_fig(r.get('in_scope_acc'))} | {_fig(r.get('oos_recall'))} "
                         f"| {_fig(r.get('auroc'))} |")
    chained = [r for r in records if r["part"] == "oos-chains" and "part_cut" in r]
    if chained:
        lines += ["", "Out-of-scope parts in chained requests (two-part texts of each model's test split; right: the "
                  "request's intent and a part named out of scope / out of scope / both intents, no part out of scope):",
                  "", "| model | two parts | answered | part cut | rows | intents exact | a part out of scope | right |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['dataset']} | {r['evaluated_on']} | {_answered(r)} | "
                  f"{'–' if not r['segment'] else _cut(r['part_cut'], r['part_threshold'])} | {r['rows']} "
                  f"| {r['intent_acc']:.2f} | {r['oos_named']:.2f} | {r['right']:.2f} |" for r in chained]
    choice = [r for r in records if r["part"] == "oos-chains" and "part_retention" in r]
    if choice:
        columns = sorted({(r["dataset"], r["evaluated_on"]) for r in choice})
        models = sorted({dataset for dataset, _ in columns})
        lines += ["", "How the part retention was chosen (validation splits, right %; mean over the three kinds per "
                  "model):", "", "| part retention | " + " | ".join(f"{d} {e}" for d, e in columns)
                  + " | " + " | ".join(f"{d} mean" for d in models) + " |",
                  "|---" * (len(columns) + 1 + len(models)) + "|"]
        for value in PART_RETENTIONS:
            cells = {(r["dataset"], r["evaluated_on"]): r["right"] for r in choice if r["part_retention"] == value}
            means = [statistics.fmean(v for (d, _), v in cells.items() if d == dataset) for dataset in models]
            lines.append(f"| {'off' if value is None else value} | " + " | ".join(_fig(cells.get(c)) for c in columns)
                         + " | " + " | ".join(f"{m:.2f}" for m in means) + " |")
    cost = [r for r in records if r["part"] == "cost"]
    if cost:
        lines += ["", "| engine cost (SNIPS bundle) | batch | ms/utt part by part | ms/utt whole | cost |",
                  "|---|---|---|---|---|"]
        lines += [f"| {r['evaluated_on']} | {r['batch']} | {r['ms_per_utterance_segment']:.3f} "
                  f"| {r['ms_per_utterance_whole']:.3f} | {r['cost_pct']:+.1f} % |" for r in cost]
    margin = [r for r in records if r["part"] == "margin"]
    if margin:
        columns = sorted({(r["dataset"], r["evaluated_on"]) for r in margin})
        lines += ["", "How the margin was chosen (validation splits, intent accuracy = exact set):", "",
                  "| margin | " + " | ".join(f"{d} {e}" for d, e in columns) + " |",
                  "|---" * (len(columns) + 1) + "|"]
        for value in (*MARGINS, None):
            cells = {(r["dataset"], r["evaluated_on"]): r["intent_acc"] for r in margin if r["margin"] == value}
            lines.append(f"| {'whole' if value is None else value} | "
                         + " | ".join(_fig(cells.get(c)) for c in columns) + " |")
    idle = [r for r in records if r["part"] == "idle"]
    if idle:
        lines += ["", "| /predict at idle, one worker (SNIPS bundle) | answered | p50 (ms) | p99 (ms) | errors |",
                  "|---|---|---|---|---|"]
        lines += [f"| {r['evaluated_on']} | {_answered(r)} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['errors']} |"
                  for r in idle]
    return "\n".join(lines) + "\n"


def _seeds(record: dict) -> str:
    """The seeds a median is over, and the seeds asked for that were not found: ``2 (seed 1 not found)``."""
    missing = seeds_not_found(record)
    return f"{record['seeds']}" + (f" ({missing})" if missing else "")


def _fig(value: float | None) -> str:
    """A figure already in percent, or a dash."""
    return "–" if value is None else f"{value:.2f}"


def _cut(label: str, threshold: float | None) -> str:
    """The part cut a record ran with: the bundle's (served) or none."""
    return "none" if threshold is None else f"{label} ({threshold:.2f})"


def _answered(record: dict) -> str:
    if not record["segment"]:
        return "whole"
    return "part by part" if record.get("learned_starts", True) else "part by part, connectors only"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS),
                        help=f"the data sets of the {', '.join(PER_DATASET)} parts; the others' earlier records "
                             "are kept")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "entities",
                        help="entities_bench's work folder: single-intent checkpoints and data")
    parser.add_argument("--mix-runs", type=Path, default=ROOT / "runs" / "mix")
    parser.add_argument("--clinc-checkpoint", type=Path,
                        default=ROOT / "runs" / "bench" / "oos" / "ckpt" / "08f93232ea76-e4-s0")
    parser.add_argument("--demo-bundle", type=Path, default=ROOT / "runs" / "default" / "bundle",
                        help="the demo's bundle (intentvcs demo), scored on the embedded test set when present")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    seeds = list(range(args.seeds))
    records: list[dict] = []
    if "product" in args.parts:
        records += product_part(args.runs, args.mix_runs, seeds, args.threads, args.datasets)
    for part in ("standard", "chains"):
        if part in args.parts:
            records += trained_part(part, args.runs, args.mix_runs, seeds, args.threads, args.datasets)
    if "single" in args.parts:
        records += single_part(args.clinc_checkpoint, args.demo_bundle, args.threads)
    if "oos-chains" in args.parts:
        records += oos_chains_part(args.clinc_checkpoint, args.demo_bundle, args.threads)
    if "margin" in args.parts:
        records += margin_part(args.runs, args.mix_runs, args.clinc_checkpoint, args.threads)
    if "cost" in args.parts:
        records += cost_part(args.runs, args.mix_runs, args.threads)
    if "idle" in args.parts:
        records += idle_part(args.runs, args.mix_runs)
    if not records:  # nothing found to score (warned above): the file's command, machine and date stay its own
        logging.warning("nothing measured: %s left as it was", shown_path(RESULTS / "mix.json"))
        return 0
    # A (part, data set) this run measured replaces its recorded figures; one it found nothing of (no
    # checkpoint, no demo bundle: warned above) keeps them, with the command that measured them.
    measured = {(r["part"], r["dataset"]) for r in records}
    records, command = keep_previous("mix", records, lambda r: (r["part"], r["dataset"]) in measured)
    records.sort(key=lambda r: PARTS.index(r["part"]))
    write_results("mix", records, render(records), command=command,
                  extra={"anchors": ANCHORS, "targets": TARGETS, "recipes": RECIPES})
    print(render(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
