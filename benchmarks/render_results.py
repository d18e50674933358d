"""Render the benchmark results into docs/RESULTS.md and the README's headline table.

    python -m benchmarks.render_results            # bring both files up to date
    python -m benchmarks.render_results --check    # exit 1, changing nothing, when either is stale

``docs/RESULTS.md`` carries the narrative of every benchmark (written by hand,
outside the markers) and one marker pair per result,
``<!-- results:NAME -->`` ... ``<!-- /results:NAME -->``. The text between a
pair is replaced by ``benchmarks/results/NAME.md`` followed by the command,
machine and date recorded in ``NAME.json``. A result that has no marker pair
yet gets a section of its own at the end of the file, so no result is left out.

``README.md`` carries one pair, ``<!-- results:headline -->``: a short table
of each benchmark's key figures, computed here from the results JSON files,
each row linking to its section of docs/RESULTS.md (a link to a heading that
does not exist is an error). No figure of either file is typed by hand, and
running the script twice changes nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Callable

from benchmarks.common import RESULTS, ROOT, seeds_named, seeds_not_found, share_percent
from intentvcs.core import atomic

RESULTS_DOC = ROOT / "docs" / "RESULTS.md"
README = ROOT / "README.md"
HEADLINE = "headline"


# --------------------------------------------------------------------------- the results files

def load(name: str) -> dict | None:
    """``benchmarks/results/<name>.json``, or None when that benchmark has not been run."""
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def result_names() -> list[str]:
    """Every result that has both its table (``.md``) and its raw figures (``.json``)."""
    return sorted(p.stem for p in RESULTS.glob("*.md") if p.with_suffix(".json").exists())


def where(meta: dict) -> str:
    """The machine a result's header names, in words."""
    return host(meta["machine"])


def host(m: dict) -> str:
    """A machine (``common.machine``'s) in words."""
    return f"{m['cores']} cores, {m['cpu']}" + (f", GPU {m['gpu']}" if m.get("gpu") else "")


def parts_elsewhere(meta: dict) -> list[dict]:
    """The machines of a result's parts measured elsewhere: records that carry a machine of their own other than
    the result's (``perf_bench --gpu-only``'s setup record, ``mix_bench``'s GPU runs, records an earlier run on
    another machine left: ``common.keep_previous``). A merged result's header names the last run's machine;
    read alone, it put the H100's MixSNIPS standard rows on 2 CPU cores."""
    machines = {json.dumps(r["machine"], sort_keys=True): r["machine"] for r in meta["records"]
                if r.get("machine") and r["machine"] != meta["machine"]}
    return [machines[key] for key in sorted(machines)]



def render_block(name: str) -> str:
    """One result's table plus the command, machine and date it was measured with."""
    table = (RESULTS / f"{name}.md").read_text(encoding="utf-8").strip()
    meta = load(name)
    elsewhere = "".join(f" ({'GPU part' if m.get('gpu') else 'part measured on'}: {host(m)})"
                        for m in parts_elsewhere(meta))
    return (f"{table}\n\nMeasured {meta['date']} on {where(meta)}{elsewhere} with `{meta['command']}` "
            f"(raw figures: `benchmarks/results/{name}.json`).")


def replace_block(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- results:{re.escape(name)} -->\n).*?(<!-- /results:{re.escape(name)} -->)", re.S)
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


def appended_section(name: str) -> re.Pattern:
    """The section this script appends for a result without a block of its own (heading and block)."""
    return re.compile(rf"\n\n## Result `{re.escape(name)}`\n\n<!-- results:{re.escape(name)} -->\n.*?"
                      rf"<!-- /results:{re.escape(name)} -->\n", re.S)


def render_results_doc(text: str) -> str:
    """docs/RESULTS.md with every result block rendered; results without a block are appended, and the
    appended section of a result whose files are gone is removed (a block in the narrative whose files are
    gone is an error: it would show figures nothing backs any more)."""
    present = set(re.findall(r"<!-- results:([\w-]+) -->", text))
    kept = set(result_names())
    for name in sorted(present - kept):
        text, removed = appended_section(name).subn("\n", text)
        if not removed:
            raise SystemExit(f"render_results: docs/RESULTS.md shows the result {name!r}, whose "
                             f"benchmarks/results/{name}.json or .md is gone; remove its block or re-run it")
    for name in sorted(kept - present):
        text = text.rstrip("\n") + (f"\n\n## Result `{name}`\n\n"
                                    f"<!-- results:{name} -->\n<!-- /results:{name} -->\n")
    for name in re.findall(r"<!-- results:([\w-]+) -->", text):
        text = replace_block(text, name, render_block(name))
    return text


# --------------------------------------------------------------------------- links into docs/RESULTS.md

def slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    return {slug(h) for h in re.findall(r"^#{1,6} +(.+?) *$", markdown, re.M)}


# --------------------------------------------------------------------------- the headline table

Row = tuple[str, str, str]  # figure, measured, reference


def fmt(value: float, digits: int = 2) -> str:
    return f"{value:.{digits}f}"


def vcs_rows() -> list[Row]:
    meta = load("vcs")
    if meta is None:
        return []
    rows = []
    measured = list(dict.fromkeys(r["dataset"] for r in meta["records"]))
    for dataset in measured:
        ours = next((r for r in meta["records"] if r["dataset"] == dataset and r["method"] == "pu"), None)
        if ours is None:
            continue
        reference = _published_reference(dataset)
        seeds = f", median of {ours['seeds']} seeds" if ours.get("seeds", 1) > 1 else ""
        rows.append((f"{dataset.upper()}, PU method: F1 / EM{seeds}",
                     f"{fmt(ours['F1'])} / {fmt(ours['EM'])}", reference))
        rows += _vcs_recipe_rows(dataset, reference)
    # Sets measured with the recipe study only (MultiWOZ-VCS, CrossWOZ-VCS; the difficulty variants have no
    # published figures and no row).
    study = load("vcs_trained_embeddings") or {"records": []}
    for dataset in dict.fromkeys(r["dataset"] for r in study["records"]):
        reference = _published_reference(dataset)
        if dataset not in measured and reference != "–":
            rows += _vcs_recipe_rows(dataset, reference)
    return rows + _vcs_support_rows()


def _vcs_support_rows() -> list[Row]:
    """The PU method decided by support decoding, as trained (``vcs_bench --support-noise``)."""
    support = load("vcs_support") or {"records": []}
    rows = []
    for ours in support["records"]:
        # The other sets were scored with one seed, to show where it loses: every DialogVCS headline is a median of 3.
        if ours["method"] != "pu" or not ours.get("support_noise") or ours.get("seeds", 1) < 3:
            continue
        reference = _published_reference(ours["dataset"])
        rows.append((f"{ours['dataset'].upper()}, PU decided by support decoding (noise {ours['support_noise']:g}), "
                     f"as trained: F1 / EM, median of {ours['seeds']} seeds", f"{fmt(ours['F1'])} / {fmt(ours['EM'])}",
                     reference))
        if ours.get("F1_discovered") is not None:
            # What `--support-noise N --discover-relations R` stores: the duplicates found decided as one intent.
            rows.append((f"{ours['dataset'].upper()}, the same with relations discovered on the validation rows "
                         f"(rate {ours['discover_rate']:g}; names of one intent decided together): F1 / EM, median "
                         f"of {ours['seeds']} seeds", f"{fmt(ours['F1_discovered'])} / {fmt(ours['EM_discovered'])}",
                         reference))
    return rows


def _published_reference(dataset: str) -> str:
    """The paper's best single-label baseline on ``dataset`` (``snips-vcs``), or "–" where it published none."""
    from benchmarks.vcs_bench import METHOD_NAMES, PAPER

    published = PAPER.get(dataset.removesuffix("-vcs"), {})
    baselines = {method: figures for method, figures in published.items() if method != "upper_bound"}
    if not baselines:
        return "–"
    method = max(baselines, key=lambda m: baselines[m][0])
    f1, em = baselines[method]
    return f"best published baseline, BERT-base ({METHOD_NAMES.get(method, method)}): {fmt(f1)} / {fmt(em)}"


def _vcs_recipe_rows(dataset: str, reference: str) -> list[Row]:
    """The recipe study's PU figures on ``dataset``: as trained, and closed under discovered relations."""
    study = load("vcs_trained_embeddings")
    ours = next((r for r in (study or {}).get("records", []) if r["dataset"] == dataset and r["method"] == "pu"),
                None)
    if ours is None or "EM_discovered" not in ours:
        return []
    seeds = f", median of {ours['seeds']} seeds" if ours.get("seeds", 1) > 1 else ""
    grown = ", vocabulary grown by its unknown words" if ours["recipe"].get("extend_vocab") else ""
    return [(f"{dataset.upper()}, PU with trained embeddings ({ours['recipe']['epochs']} epochs{grown}), answers "
             f"closed under relations read off validation (rate {ours['discover_rate']:g}): F1 / EM{seeds}",
             f"{fmt(ours['F1_discovered'])} / {fmt(ours['EM_discovered'])}", reference)]


def oos_rows() -> list[Row]:
    meta = load("oos")
    if meta is None:
        return []
    full = [r for r in meta["records"] if r["dataset"] == "clinc150-full" and not r.get("operating_point")]
    served = next((r for r in full if r["oos_rule"] == "distance"), None)
    if served is None:
        return []
    paper = next((r for r in full if r["oos_rule"] == "threshold" and r.get("paper_in_scope_acc") is not None), None)
    reference = "–" if paper is None else (
        f"published BERT, confidence threshold: {paper['paper_in_scope_acc']} / {paper['paper_oos_recall']}")
    retention = f", {served['oos_retention']:.0%} retention" if served.get("oos_retention") else ""
    return [
        (f"CLINC150 Full, distance rule{retention}: in-scope accuracy / OOS recall",
         f"{fmt(served['in_scope_acc'])} / {fmt(served['oos_recall'])}", reference),
        ("CLINC150 Full, distance rule: AUROC / FPR@95 (%) / ECE after temperature scaling (%)",
         f"{served['auroc']:.3f} / {fmt(served['fpr95'])} / {fmt(served['ece'])}", "–"),
    ]


# The robustness results, each with what its label says of the operators it was measured with.
ROBUSTNESS_RESULTS = (("robustness", "operators of 2026-11-22, mean of the seeds"),
                      ("robustness_operator_fixes", "the corrected operators (2026-11-27)"))


def robustness_rows() -> list[Row]:
    from benchmarks.robustness_bench import seed_means

    rows = []
    for name, operators in ROBUSTNESS_RESULTS:
        meta = load(name)
        if meta is None:
            continue
        means = {(r["dataset"], r["model"], r["set"]): r for r in seed_means(meta["records"])}
        limits = {t["dataset"]: t["limit"] for t in meta.get("targets", []) if t["target"] == "random mean drop"}
        parts = []
        for dataset in dict.fromkeys(r["dataset"] for r in meta["records"]):
            augmented = means.get((dataset, "augmented", "random"))
            baseline = means.get((dataset, "baseline", "random"))
            if augmented is None or augmented.get("drop") is None:
                continue
            before = "" if baseline is None or baseline.get("drop") is None else f" ({fmt(baseline['drop'])})"
            parts.append(f"{dataset.upper()} {fmt(augmented['drop'])}{before}{_drop_seeds(means, dataset)}")
        if not parts:
            continue
        limit = set(limits.values())
        reference = f"target ≤ {limit.pop()} for the augmented model" if len(limit) == 1 else "–"
        rows.append((f"Random-set accuracy drop in points, augmented model (untreated baseline); {operators}",
                     ", ".join(parts), reference))
    return rows


def _drop_seeds(means: dict[tuple, dict], dataset: str) -> str:
    """Which seeds the Random drops of a robustness row are means of, where the label's "mean of the seeds"
    does not say it: the augmented model's (and the baseline's, when other) where either is over other seeds
    than its model's, or the two over different seeds; ``[1 seed]`` for one seed; else nothing."""
    from benchmarks.robustness_bench import figure_seeds, seeds_apart

    def drop(model: str) -> tuple[list[int] | None, bool]:
        record, clean = means.get((dataset, model, "random")), means.get((dataset, model, "clean"))
        if record is None or record.get("drop") is None:
            return None, False
        return figure_seeds(record, "drop"), seeds_apart(record, "drop", clean and clean["seeds"]) is not None

    (ours, ours_apart), (theirs, theirs_apart) = drop("augmented"), drop("baseline")
    other = theirs is not None and theirs != ours
    if ours_apart or theirs_apart or other:
        return f" [{seeds_named(ours)}" + (f"; baseline {seeds_named(theirs)}" if other else "") + "]"
    return " [1 seed]" if len(ours) == 1 else ""


def export_rows() -> list[Row]:
    meta = load("export")
    parity = None if meta is None else next((r for r in meta["records"] if r["component"] == "parity"), None)
    if parity is None:
        return []
    return [("ONNX graph vs PyTorch: largest logit difference; label sets identical",
             f"{parity['max_abs_logit_diff']:.1e}; {share_percent(parity['label_set_agreement'])}%",
             f"gate {parity['atol']:.0e}".replace("e-0", "e-"))]


def perf_rows() -> list[Row]:
    meta = load("perf")
    if meta is None:
        return []
    targets = {r["target"]: r for r in meta["records"] if r["component"] == "target" and r.get("measured") is not None}
    # (the row's opening words, how its figures' names are joined, (target, the figure's name, unit) ...): a row
    # names only the figures it shows (a bundle without an int8 graph has no int8 targets).
    groups = (
        ("engine vs a plain transformers forward: ", ", ",
         (("engine int8 vs transformers, batch 32", "int8 at batch 32", "×"),
          ("engine int8 vs transformers, batch 1", "int8 at batch 1", "×"),
          ("engine fp32 vs transformers, batch 32", "fp32 at batch 32", "×"))),
        ("HTTP service at 32 clients, ", "; ",
         (("service at 32 clients vs its engine's answers at batch 32 (in turns)",
           "share of its engine's batch-32 throughput (the same answers, the two measured in turns)", ""),
          ("service at 32 clients, p99 / p50", "p99 / p50", ""),
          ("service idle single-request p50", "idle single-request p50 (ms)", ""))),
    )
    rows = []
    threads = f" ({meta['threads']} threads)" if meta.get("threads") else ""
    for opening, joined, figures in groups:
        found = [(targets[name], label, unit) for name, label, unit in figures if name in targets]
        if found:
            figure = opening + joined.join(label for _, label, _ in found)
            rows.append((f"CPU{threads}: {figure}" if not rows else figure,
                         "; ".join(f"{t['measured']:g}{unit}" for t, _, unit in found),
                         "goals " + "; ".join(t["goal"] for t, _, _ in found)))
    return rows + gpu_rows(meta["records"])


def gpu_rows(records: list[dict]) -> list[Row]:
    """The CUDA path's headline (``perf_bench`` records of component ``gpu``), when it was measured."""
    speed = {(r["backend"], r["batch_size"]): r for r in records if r["component"] == "gpu" and "backend" in r}
    checks = {r["check"]: r for r in records if r["component"] == "gpu" and "check" in r}
    if ("onnx-cuda", 1) not in speed or ("onnx-cuda", 256) not in speed or "parity" not in checks:
        return []
    one, full = speed["onnx-cuda", 1], speed["onnx-cuda", 256]
    return [(f"GPU ({checks['setup']['machine']['gpu']}): engine batch-1 p50 (ms) and × PyTorch on CUDA; "
             "batch 256 utt/s and × PyTorch; answers differing from the CPU's",
             f"{one['p50_ms']:g}, {one['speedup_vs_torch']:g}×; {full['utt_per_s']:,.0f}, "
             f"{full['speedup_vs_torch']:g}×; {checks['parity']['decision_mismatches']}",
             "goals ≥ 20,000 utt/s at batch 256; 0 differ")]


def audit_rows() -> list[Row]:
    meta = load("audit")
    if meta is None:
        return []
    accuracy = [r for r in meta["records"] if r.get("measure") == "accuracy"]
    timing = next((r for r in meta["records"] if r.get("measure") == "timing"), None)
    rows = []
    if accuracy:
        rows.append(("relation accuracy per scenario (% of new intents typed right): "
                     + ", ".join(f"{r['scenario']} ({r.get('path', 'cli')})" for r in accuracy),
                     " / ".join(f"{r['relation_acc']:.1f}" for r in accuracy), "–"))
    if timing:
        from benchmarks.audit_bench import distinct

        rows.append((f"audit of {timing['batch_rows']:,} utterances ({distinct(timing)}), end to end",
                     f"{timing['seconds']:.1f} s ({timing['utt_per_s']:.0f} utt/s)", "–"))
    return rows


def entities_rows() -> list[Row]:
    meta = load("entities")
    if meta is None:
        return []
    rows = []
    for r in (r for r in meta["records"] if r["part"] == "accuracy"):
        paper, target = r["jointbert"], r["target"]
        variant = "" if r.get("variant", "plain") == "plain" else f", recipe variant {r['variant']}"
        rows.append((f"{r['dataset'].upper()}: intent accuracy / slot F1 / overall accuracy, served fp32 bundle "
                     f"({r['seeds']} seed{'s, median' if r['seeds'] > 1 else ''}{variant})",
                     f"{r['fp32_intent_acc']:.2f} / {r['fp32_slot_f1']:.2f} / {r['fp32_overall_acc']:.2f}",
                     f"JointBERT {paper['intent_acc']} / {paper['slot_f1']} / {paper['overall_acc']}; target "
                     f"{target['intent_acc']} / {target['slot_f1']} / {target['overall_acc']}"))
    cost = sorted((r for r in meta["records"] if r["part"] == "cost"), key=lambda r: (r["batch"], r["runtime"]))
    if cost:  # every batch size measured: the worst is what the target is read against
        rows.append(("engine cost of the entity output (batch, graph)",
                     "; ".join(f"{r['batch']} {r['runtime']} {r['entity_cost_pct']:+.1f}%" for r in cost),
                     "target ≤ 10%"))
    return rows


def mix_rows() -> list[Row]:
    meta = load("mix")
    if meta is None:
        return []
    # As served: part by part, with a boundary head's learnt starts (not the connectors-only ablation).
    records = [r for r in meta["records"] if r.get("segment") and r.get("learned_starts", True)]
    tfmn = meta["anchors"]["TFMN (Chen et al. 2022)"]
    rows = []
    names = {"product": "trained on single-intent rows", "chains": "single-intent rows + synthetic chains",
             "standard": "trained on Mix rows"}
    for part in ("product", "chains", "standard"):
        for dataset in ("atis", "snips"):
            found = {r["evaluated_on"]: r for r in records if r["part"] == part and r["dataset"] == dataset}
            if "mix-standard" not in found:
                continue
            hard = found.get("mix-hard")
            seeds = found["mix-standard"]["seeds"]
            # A median of fewer seeds than asked for names the ones not found (mix_bench's seeds_missing).
            missing = seeds_not_found(found["mix-standard"])
            rows.append((f"Mix{dataset.upper()} intent accuracy (exact set), {names[part]}, served "
                         f"({seeds} seed{'s, median' if seeds > 1 else ''}{f'; {missing}' if missing else ''})"
                         f"{'; hard variant' if hard else ''}",
                         f"{found['mix-standard']['intent_acc']:.2f}" + (f"; {hard['intent_acc']:.2f}" if hard else ""),
                         f"target {meta['targets'][part][dataset]}; TFMN {tfmn[dataset][0]}"))
    return rows


# (heading of the section in docs/RESULTS.md the rows link to, the link's text, the rows)
SECTIONS: tuple[tuple[str, str, Callable[[], list[Row]]], ...] = (
    ("DialogVCS: PU multi-label intents (SNIPS-VCS, ATIS-VCS)", "DialogVCS", vcs_rows),
    ("Calibration and out-of-scope detection (CLINC150)", "Out of scope", oos_rows),
    ("Robustness to natural perturbations", "Robustness", robustness_rows),
    ("Export: parity, int8, engine vs PyTorch (SNIPS-VCS)", "Export", export_rows),
    ("Performance", "Speed", perf_rows),
    ("Upgrade audit against known relations", "Upgrade audit", audit_rows),
    ("Entities: one joint intent and slot model (SNIPS, ATIS)", "Entities", entities_rows),
    ("Multi-intent: chained requests (MixATIS, MixSNIPS)", "Multi-intent", mix_rows),
)
HEADLINE_SOURCES = ("vcs", "vcs_support", "oos", "robustness", "export", "perf", "audit", "entities", "mix")


def render_headline(results_doc: str) -> str:
    known = anchors(results_doc)
    lines = ["| benchmark | figure | measured | reference |", "|---|---|---|---|"]
    for heading, label, rows in SECTIONS:
        anchor = slug(heading)
        if anchor not in known:
            raise SystemExit(f"render_results: docs/RESULTS.md has no heading {heading!r} for the headline "
                             f"table to link to")
        for i, (figure, measured, reference) in enumerate(rows()):
            name = f"[{label}](docs/RESULTS.md#{anchor})" if i == 0 else ""
            lines.append(f"| {name} | {figure} | {measured} | {reference} |")
    metas = [m for m in (load(n) for n in HEADLINE_SOURCES) if m is not None]
    dates = sorted({m["date"] for m in metas})
    parts = [p for m in metas for p in parts_elsewhere(m)]
    machines = sorted({where(m) for m in metas} | {host(p) for p in parts if not p.get("gpu")})
    gpus = sorted({host(p) for p in parts if p.get("gpu")})
    gpu = f"; GPU figures on {'; '.join(gpus)}" if gpus else (
        "" if any(m["machine"].get("gpu") for m in metas) else " (no GPU)")
    when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    lines += ["", f"Measured {when} on {'; '.join(machines)}{gpu}; computed by `python -m benchmarks.render_results` "
                  f"from `benchmarks/results/*.json`."]
    return "\n".join(lines)


# --------------------------------------------------------------------------- main

def render() -> dict[Path, str]:
    """The new text of each file this script owns."""
    results_doc = render_results_doc(RESULTS_DOC.read_text(encoding="utf-8"))
    readme = README.read_text(encoding="utf-8")
    if f"<!-- results:{HEADLINE} -->" not in readme:
        raise SystemExit(f"render_results: README.md has no <!-- results:{HEADLINE} --> marker")
    readme = replace_block(readme, HEADLINE, render_headline(results_doc))
    return {RESULTS_DOC: results_doc, README: readme}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.render_results",
                                     description="Render benchmarks/results into docs/RESULTS.md and the "
                                                 "README's headline table.")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 when a file is not up to date with the results")
    args = parser.parse_args(argv)
    stale = []
    for path, text in render().items():
        if path.read_text(encoding="utf-8") != text:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                atomic.write_text(path, text)
    if args.check and stale:
        print("out of date: " + ", ".join(map(str, stale)) + " (run python -m benchmarks.render_results)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
