"""Score the upgrade audit against ground truth, and time a 10,000-utterance batch.

Scenarios (``benchmarks/audit_scenarios.py`` builds them; each has a batch,
a ``truth.json`` relations file with each new intent's ``expected`` verdict,
and the existing model's training rows):

* ``assistant-upgrade``: the embedded data's hand-written ``upgrade.jsonl``
  against the default bundle (always run);
* ``snips``, ``atis``, ``clinc150``: ``--scenario NAME=DIR``, where ``DIR``
  holds the scenario and ``DIR/bundle`` the existing model exported from
  ``DIR/base_train.jsonl`` (the audit's sample of old data).

Figures per scenario:

* ``relation_acc``: share of new intents whose relation type is right;
  ``exact_acc``: type and existing intents both right;
* ``pair_precision`` / ``pair_recall``: over unordered pairs {x, y}, at least
  one of them a new intent, that the relations relate after closure (one
  implies the other). Closure makes the score independent of how a relation
  is written (two versions of X are related to each other through X);
  relations between new intents count too (the audit's ``new_pairs``);
* ``typed_pair_precision`` / ``typed_pair_recall``: over ordered implications
  x -> y (a duplicate is both directions, N subset of E is N -> E, a
  superset N of E is E -> N, a composite implies its parts).
Each scenario runs on the path ``cli`` (``audit_batch`` with the old training
rows, what ``intentvcs audit --train`` runs) and, with ``--http``, also on
``http``: ``POST /audit`` of a server started on the bundle (an audit job
above the synchronous row cap), with the batch alone, as a new user calls
it (the bundle's own sample of its training rows,
``intentvcs.core.references``, then stands in for the old data).
Timing: the assistant batch is expanded to ``--timing-rows`` distinct
utterances (each row with filler prefixes and suffixes, labels kept) and
audited end to end, engine inference included, on ``--threads`` threads.

    python -m benchmarks.audit_bench --bundle runs/default/bundle \
        --scenario snips=runs/bench/audit/snips --scenario atis=runs/bench/audit/atis \
        --scenario clinc150=runs/bench/audit/clinc150

Writes ``benchmarks/results/audit.json`` (``{command, machine, date, records}``)
and ``audit.md``; scenarios not run keep their earlier records.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


from benchmarks.audit_scenarios import load_scenario
from benchmarks.common import keep_previous, write_results
from intentvcs.core.dataio import Example, read_jsonl
from intentvcs.core.relations import LabelRelations
from intentvcs.service.audit import AuditConfig, audit_batch
from intentvcs.training import DEFAULT_DATA

# How each path reached the audit (the summary table's column).
PATHS = {"cli": "CLI, old training rows", "http": "POST /audit, batch alone"}
PREFIXES = ("", "okay so ", "um ", "hey, ", "please ", "could you ")
SUFFIXES = ("", " please", " now", " thanks", " if you can")
def implications(relations: LabelRelations, new_intents: set[str]) -> set[tuple[str, str]]:
    """Ordered pairs ``(x, y)``, x != y, at least one new, where x implies y after closure."""
    matrix = relations.implication_matrix()
    names = relations.labels
    return {(names[i], names[j]) for i, j in zip(*np.nonzero(matrix))
            if i != j and new_intents & {names[i], names[j]}}


def _precision_recall(predicted: set, gold: set) -> tuple[float | None, float | None]:
    hits = len(predicted & gold)
    return (hits / len(predicted) if predicted else None, hits / len(gold) if gold else None)


def score(document: dict[str, Any], truth: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Aggregate figures (fractions) and one row per new intent, from the report document
    (``AuditReport.to_dict()``, or what ``POST /audit`` answered)."""
    expected = truth["expected"]
    rows = []
    reported = {finding["intent"] for finding in document["findings"]}
    for finding in document["findings"]:
        want = expected[finding["intent"]]
        best = finding["containment"][0] if finding["containment"] else None
        pivot = best["entity_pivot"] if best else None
        rows.append({
            "intent": finding["intent"], "expected": want["relation"], "expected_existing": sorted(want["existing"]),
            "relation": finding["relation"], "existing": sorted(finding["existing"]),
            "severity": finding["severity"], "borderline": finding["borderline"],
            "top_existing": best["existing"] if best else None,
            "new_in_existing": best["new_in_existing"]["rate"] if best else None,
            "existing_in_new": best["existing_in_new"]["rate"] if best and best["existing_in_new"] else None,
            "reference": best["reference"] if best else None,
            "entity_pivot": (f"{pivot['direction']} {pivot['entity']} "
                             f"({pivot['new_share']:.0%} vs {pivot['existing_share']:.0%})" if pivot else None),
        })
    # The truth's new intents, not the report's: a new intent the audit left without a finding is a miss (of its
    # relation and its pairs), not a row left out of every denominator.
    rows += [{"intent": intent, "expected": want["relation"], "expected_existing": sorted(want["existing"]),
              "relation": "no finding", "existing": [], "severity": None, "borderline": None, "top_existing": None,
              "new_in_existing": None, "existing_in_new": None, "reference": None, "entity_pivot": None}
             for intent, want in expected.items() if intent not in reported]
    new = set(expected)
    predicted = implications(LabelRelations.from_dict(document["fix"]["relations"]), new)
    gold = implications(LabelRelations.from_dict({k: v for k, v in truth.items() if k != "expected"}), new)
    typed_p, typed_r = _precision_recall(predicted, gold)
    pair_p, pair_r = _precision_recall({frozenset(p) for p in predicted}, {frozenset(p) for p in gold})
    n = max(len(rows), 1)
    figures = {
        "new_intents": len(rows),
        "relation_acc": sum(r["relation"] == r["expected"] for r in rows) / n,
        "exact_acc": sum(r["relation"] == r["expected"] and r["existing"] == r["expected_existing"]
                         for r in rows) / n,
        "pair_precision": pair_p, "pair_recall": pair_r,
        "typed_pair_precision": typed_p, "typed_pair_recall": typed_r,
        "new_duplicate_pairs": len(document.get("new_pairs", [])),
    }
    return figures, rows


def expand(batch: list[Example], size: int) -> list[Example]:
    """``size`` distinct rows: each batch row with a filler prefix and suffix (labels kept)."""
    variants = itertools.product(PREFIXES, SUFFIXES, batch)
    out = [Example(f"{pre}{ex.text}{suf}", ex.labels) for pre, suf, ex in itertools.islice(variants, size)]
    if len(out) < size:
        raise ValueError(f"cannot make {size} distinct rows from {len(batch)} (at most "
                         f"{len(batch) * len(PREFIXES) * len(SUFFIXES)})")
    return out


def distinct(timing: dict[str, Any]) -> str:
    """How many of a timed batch's rows the audit read: a repeated row counts once."""
    rows = timing.get("audited_rows")
    return "distinct rows not recorded" if rows is None else f"{rows:,} distinct, a repeated row read once"


def _markdown(records: list[dict[str, Any]]) -> str:
    """A summary table over scenarios, then each scenario's verdicts (all of them for the small
    hand-written one, the wrong ones for the generated ones)."""
    summaries = [r for r in records if r["measure"] == "accuracy"]
    lines = ["| scenario | path | new intents | relation acc | exact acc | pair P | pair R | typed pair P "
             "| typed pair R | new-new duplicates found |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in summaries:
        lines.append(f"| {r['scenario']} | {PATHS[r.get('path', 'cli')]} | {r['new_intents']} | " + " | ".join(
            "–" if r[k] is None else f"{r[k]:.1f}" for k in ("relation_acc", "exact_acc", "pair_precision",
                                                             "pair_recall", "typed_pair_precision",
                                                             "typed_pair_recall"))
                     + f" | {r['new_duplicate_pairs']} |")
    lines.append("")
    for summary in summaries:
        name, path = summary["scenario"], summary.get("path", "cli")
        rows = [r for r in records if r["measure"] == "verdict" and r["scenario"] == name
                and r.get("path", "cli") == path]
        shown = rows if name == "assistant-upgrade" else [r for r in rows if r["relation"] != r["expected"]]
        kinds = sorted({r["expected"] for r in rows})
        confusion = ", ".join(f"{k} {sum(r['relation'] == k for r in rows if r['expected'] == k)}/"
                              f"{sum(r['expected'] == k for r in rows)}" for k in kinds)
        lines += [f"**{name}, {PATHS[path]}**: right type per expected relation: {confusion}.", ""]
        if not shown:
            continue
        lines += ["| new intent | expected | audit | existing | contain(N→E) | contain(E→N) | entity pivot |",
                  "|---|---|---|---|---:|---:|---|"]
        for r in shown:
            mark = "" if r["relation"] == r["expected"] else " ✗"
            fmt = lambda v, d=0: "–" if v is None else f"{v:.{d}f}"  # noqa: E731
            lines.append(f"| `{r['intent']}` | {r['expected']} | {r['relation']}{mark} | {r['existing'] or '–'} | "
                         f"{fmt(r['new_in_existing'])} | {fmt(r['existing_in_new'])} | "
                         f"{r['entity_pivot'] or '–'} |")
        lines.append("")
    for r in records:
        if r["measure"] == "timing":
            lines.append(f"Audit of {r['batch_rows']:,} utterances ({distinct(r)}): {r['seconds']:.1f} s end to "
                         f"end ({r['inference_s']:.1f} s engine inference, {r['threads']} threads, "
                         f"{r['utt_per_s']:.0f} utterances/s of the batch).")
    return "\n".join(lines) + "\n"


def run_scenario(name: str, bundle: str, batch: list[Example], truth: dict[str, Any],
                 training: list[Example] | None, config: AuditConfig, threads: int,
                 http: bool = False) -> list[dict[str, Any]]:
    """Audit one scenario and return its records (per path: one summary, one per new intent).

    Path ``cli``: ``audit_batch`` with the old training rows, as ``intentvcs audit --train`` runs it.
    Path ``http`` (with ``http``): ``POST /audit`` of a server started on the bundle, with the batch
    alone, as a new user calls it; the service then reads the bundle's own sample of the old rows.
    """
    from intentvcs.service.engine import Engine

    report = audit_batch(Engine(bundle, provider="cpu", threads=threads), batch, training, config)
    documents = {"cli": (report.to_dict(), None if training is None else len(training))}
    if http:
        documents["http"] = (_audit_over_http(bundle, batch, threads), None)
    records = []
    for path, (document, training_rows) in documents.items():
        scoring, verdicts = score(document, truth)
        records.append({"scenario": name, "path": path, "measure": "accuracy", "bundle": bundle,
                        "batch_rows": len(batch), "train_sample_rows": training_rows,
                        "seconds": round(document["summary"]["timing_s"]["total"], 2),
                        **{k: (round(100 * v, 2) if isinstance(v, float) else v) for k, v in scoring.items()}})
        # One flat record per new intent (lists joined, rates as percentages).
        records += [{"scenario": name, "path": path, "measure": "verdict",
                     **{k: ", ".join(v) if isinstance(v, list) else round(100 * v, 2)
                        if isinstance(v, float) else v for k, v in row.items()}} for row in verdicts]
    return records


def _audit_over_http(bundle: str, batch: list[Example], threads: int) -> dict[str, Any]:
    """The report the service answers for ``batch`` alone (no training rows), from a fresh server: ``POST
    /audit`` up to its row cap, an audit job (submit, wait, get) above it, as a user would call it."""
    import httpx

    from intentvcs.cli.commands.serve import running
    from intentvcs.service.schemas import LIMITS  # the cap the server it starts enforces

    rows = [ex.to_dict() for ex in batch]
    with running(bundle, threads=threads) as url:
        if len(rows) <= LIMITS.max_audit_rows:
            response = httpx.post(f"{url}/audit", json={"rows": rows}, timeout=600)
        else:
            from benchmarks.audit_scale import wait_for_job

            task = httpx.post(f"{url}/audit/job/submit", json={"rows": rows}, timeout=120)
            task.raise_for_status()
            task_id = task.json()["task_id"]
            if wait_for_job(url, task_id) != "completed":
                raise RuntimeError(f"audit job {task_id} of {len(rows)} rows did not complete")
            response = httpx.get(f"{url}/audit/job/get", params={"task_id": task_id}, timeout=120)
    response.raise_for_status()
    return response.json()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", required=True, help="the default bundle (assistant-upgrade scenario)")
    parser.add_argument("--batch", default=str(DEFAULT_DATA / "upgrade.jsonl"))
    parser.add_argument("--truth", default=str(DEFAULT_DATA / "upgrade_relations.json"))
    parser.add_argument("--train", default=str(DEFAULT_DATA / "train.jsonl"),
                        help="old data sample for contain(E->N); 'none' to use the batch's own rows")
    parser.add_argument("--scenario", action="append", default=[], metavar="NAME=DIR",
                        help="a generated scenario (audit_scenarios.py) with its exported model in DIR/bundle")
    parser.add_argument("--timing-rows", type=int, default=10_000, help="0 to skip the timing run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--config", help="JSON object of AuditConfig overrides")
    parser.add_argument("--http", action="store_true",
                        help="also audit each scenario through POST /audit of a server started on its bundle, "
                             "without training rows (the bundle's own sample stands in for them)")
    args = parser.parse_args(argv)

    config = AuditConfig.from_dict(json.loads(Path(args.config).read_text()) if args.config else {})
    batch = read_jsonl(args.batch)
    training = None if args.train == "none" else read_jsonl(args.train)
    records = run_scenario("assistant-upgrade", args.bundle, batch,
                           json.loads(Path(args.truth).read_text(encoding="utf-8")), training, config, args.threads,
                           args.http)
    for spec in args.scenario:
        name, _, folder = spec.partition("=")
        if not folder:
            parser.error(f"--scenario {spec!r}: expected NAME=DIR")
        rows, truth = load_scenario(Path(folder))
        records += run_scenario(name, str(Path(folder) / "bundle"), rows, truth,
                                read_jsonl(Path(folder) / "base_train.jsonl"), config, args.threads, args.http)
    if args.timing_rows:
        from intentvcs.service.engine import Engine

        engine = Engine(args.bundle, provider="cpu", threads=args.threads)
        big = expand(batch, args.timing_rows)
        started = time.perf_counter()
        big_report = audit_batch(engine, big, training, config)
        seconds = time.perf_counter() - started
        records.append({"scenario": f"assistant-upgrade x{len(big) // len(batch)}", "measure": "timing",
                        "batch_rows": len(big), "audited_rows": big_report.audited_rows, "threads": args.threads,
                        "provider": engine.provider, "seconds": round(seconds, 2),
                        "inference_s": round(big_report.timing_s["inference"], 2),
                        "utt_per_s": round(len(big) / seconds, 1)})
    # A (scenario, path) this run measured replaces its records; a path it did not take (no --http) keeps them.
    def scenario_path(record: dict) -> tuple[str, str]:
        return record["scenario"], record.get("path", "cli")

    ran = {scenario_path(r) for r in records if r["measure"] != "timing"}
    records, command = keep_previous("audit", records, lambda r: scenario_path(r) in ran or (
        r["measure"] == "timing" and args.timing_rows))
    # The embedded scenario first, as every run measures it: a run of it alone moved it below the kept ones.
    records.sort(key=lambda r: not r["scenario"].startswith("assistant-upgrade"))
    markdown = _markdown(records)
    path = write_results("audit", records, markdown, command=command)
    print(markdown)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
