"""The audit's levers, measured side by side: each scenario audited under several ``AuditConfig`` variants.

Every scenario (``benchmarks.audit_scenarios``, ``benchmarks.audit_failures``; ``assistant`` is the
embedded upgrade batch against ``--bundle``) is audited the way ``POST /audit`` audits a batch sent
alone: ``audit_batch`` with no training rows, so the bundle's own sample of its training rows stands
in for the old data (the HTTP path of ``benchmarks.audit_bench`` without the server around it). Per
scenario and variant: relation accuracy and pair precision / recall (``benchmarks.audit_bench.score``)
and the new intents typed wrong.

    python -m benchmarks.audit_variants --bundle runs/default/bundle \
        --variant final='{"embedding": "final"}' --variant middle='{"embedding": "middle"}' \
        --scenario assistant --scenario snips-subset_word=runs/bench/audit/snips/failures/subset_word ...

Writes ``benchmarks/results/<--name>.json`` / ``.md`` (default ``audit_layers``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.audit_bench import score
from benchmarks.audit_scenarios import load_scenario
from benchmarks.common import keep_previous, write_results
from intentvcs.core.dataio import read_jsonl
from intentvcs.service.audit import AuditConfig, audit_batch
from intentvcs.training import DEFAULT_DATA


def _scenario(spec: str, bundle: str) -> tuple[str, str, list, dict]:
    """``(name, bundle, batch, truth)`` of ``assistant`` or ``NAME=DIR``."""
    if spec == "assistant":
        truth = json.loads((DEFAULT_DATA / "upgrade_relations.json").read_text(encoding="utf-8"))
        return "assistant-upgrade", bundle, read_jsonl(DEFAULT_DATA / "upgrade.jsonl"), truth
    name, _, folder = spec.partition("=")
    if not folder:
        raise SystemExit(f"--scenario {spec!r}: expected assistant or NAME=DIR")
    batch, truth = load_scenario(Path(folder))
    return name, str(Path(folder) / "bundle"), batch, truth


def _share(value: float | None) -> str:
    """A pair precision or recall in percent; a dash where it is undefined (no pair predicted, or none
    expected: ``benchmarks.audit_bench.score`` records None), as ``audit_bench``'s table shows it."""
    return "–" if value is None else f"{value:.0f}"


def render(records: list[dict], variants: list[str]) -> str:
    lines = ["Relation accuracy (pair precision / recall) through the bundle alone, per audit configuration:", "",
             "| scenario | new intents | " + " | ".join(variants) + " |",
             "|---|---:|" + "---:|" * len(variants)]
    for name in dict.fromkeys(r["scenario"] for r in records):
        row = {r["variant"]: r for r in records if r["scenario"] == name}
        first = next(iter(row.values()))
        cells = [f"{row[v]['relation_acc']:.1f} ({_share(row[v]['pair_precision'])} / "
                 f"{_share(row[v]['pair_recall'])})" if v in row else "–" for v in variants]
        lines.append(f"| {name} | {first['new_intents']} | " + " | ".join(cells) + " |")
    overrides = {v: next(r["config"] for r in records if r["variant"] == v) for v in variants}
    lines += ["", "Variants: " + "; ".join(f"`{v}` = `{json.dumps(overrides[v])}`" for v in variants) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", default="runs/default/bundle", help="the bundle of the assistant scenario")
    parser.add_argument("--scenario", action="append", required=True, metavar="assistant|NAME=DIR")
    parser.add_argument("--variant", action="append", required=True, metavar="NAME=JSON",
                        help="AuditConfig overrides, e.g. middle='{\"embedding\": \"middle\"}'")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--name", default="audit_layers", help="writes benchmarks/results/NAME.{json,md}")
    args = parser.parse_args(argv)
    from intentvcs.service.engine import Engine

    variants = {}
    for spec in args.variant:
        name, _, body = spec.partition("=")
        variants[name] = json.loads(body or "{}")
        AuditConfig.from_dict(variants[name])  # a bad key fails before any audit runs
    records = []
    for spec in args.scenario:
        name, bundle, batch, truth = _scenario(spec, args.bundle)
        engine = Engine(bundle, provider="cpu", threads=args.threads)
        for variant, overrides in variants.items():
            report = audit_batch(engine, batch, None, AuditConfig.from_dict({"progress": False, **overrides}))
            figures, verdicts = score(report.to_dict(), truth)
            records.append({"scenario": name, "variant": variant, "config": overrides, "batch_rows": len(batch),
                            **{k: (round(100 * v, 2) if isinstance(v, float) else v) for k, v in figures.items()},
                            "wrong": [f"{r['intent']}: {r['relation']} (expected {r['expected']})"
                                      for r in verdicts if r["relation"] != r["expected"]]})
            print(f"{name} [{variant}]: relation accuracy {records[-1]['relation_acc']}", flush=True)
        done = {(r["scenario"], r["variant"]) for r in records}
        merged, command = keep_previous(args.name, records, lambda r: (r["scenario"], r["variant"]) in done)
        write_results(args.name, merged, render(merged, list(dict.fromkeys(r["variant"] for r in merged))),
                      command=command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
