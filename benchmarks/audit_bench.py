"""Score the upgrade audit against ground truth, and time a 10,000-utterance batch.

Scoring: the audit runs on an upgrade batch against a bundle, and its proposed
relations are compared with a ground-truth relations file (the VCS builder's
``relations.json``, or the default data's ``upgrade_relations.json``, whose
``expected`` map gives each new intent's verdict directly). Two scenarios by
default: ``assistant-upgrade`` (``upgrade.jsonl``, hand-written) and
``heldout`` (``heldout_scenario``: versions, span-pivot subsets, unions and
joined composites built from the valid and test rows, which the model did not
train on; the rules' thresholds were tuned on this one, not on the upgrade).
Figures:

* ``relation_acc``: share of new intents whose relation type is right;
  ``exact_acc``: type and existing intents both right;
* ``pair_precision`` / ``pair_recall``: over unordered {new, existing} pairs
  that the truth relates (any type) vs the pairs the audit relates;
* ``typed_pair_precision`` / ``typed_pair_recall``: over typed, ordered pairs
  as ``LabelRelations.typed_pairs`` writes them (a superset N of E is the
  pair ``subset(E, N)``).
Timing: the batch is expanded to ``--timing-rows`` distinct utterances (each
row with filler prefixes and suffixes, labels kept) and audited end to end,
engine inference included, on ``--threads`` intra-op threads.

    python benchmarks/audit_bench.py --bundle runs/default/bundle
    python benchmarks/audit_bench.py --bundle B --batch vcs/upgrade.jsonl --truth vcs/relations.json

Writes ``benchmarks/results/audit.json`` (``{command, machine, date, records}``)
and ``audit.md``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import ROOT, pct, write_results  # noqa: E402
from intentvcs.dataio import Example, read_jsonl  # noqa: E402
from intentvcs.relations import Composite, Duplicate, LabelRelations, Subset  # noqa: E402
from service.audit import AuditConfig, AuditReport, audit_batch  # noqa: E402

DEFAULT_DATA = ROOT / "training" / "default_data" / "assistant"
PREFIXES = ("", "okay so ", "um ", "hey, ", "please ", "could you ")
SUFFIXES = ("", " please", " now", " thanks", " if you can")
# When a new intent has several relations to existing intents, the strongest names its verdict.
PRIORITY = ("duplicate", "subset", "superset", "composite")


def expected_verdicts(truth: dict[str, Any], new_intents: Iterable[str],
                      existing: Iterable[str]) -> dict[str, dict[str, Any]]:
    """new intent -> ``{"relation", "existing"}``: the truth's ``expected`` map, else derived from relations."""
    if "expected" in truth:
        return {name: truth["expected"][name] for name in new_intents}
    relations = LabelRelations.from_dict(truth)
    existing = set(existing)
    out = {}
    for name in new_intents:
        found: dict[str, set[str]] = {kind: set() for kind in PRIORITY}
        for kind, x, y in relations.typed_pairs():
            if kind == "duplicate" and name in (x, y):
                found[kind].update({x, y} & existing)
            elif kind == "subset" and x == name and y in existing:
                found["subset"].add(y)
            elif kind == "subset" and y == name and x in existing:
                found["superset"].add(x)
            elif kind == "composite" and x == name and y in existing:
                found["composite"].add(y)
        kind = next((k for k in PRIORITY if found[k]), "novel")
        out[name] = {"relation": kind, "existing": sorted(found.get(kind, ()))}
    return out


def _pairs(typed: Iterable[tuple[str, str, str]], new_intents: set[str]) -> set[tuple[str, str, str]]:
    return {p for p in typed if new_intents & {p[1], p[2]}}


def _untyped(pairs: set[tuple[str, str, str]]) -> set[frozenset[str]]:
    return {frozenset(p[1:]) for p in pairs}


def _precision_recall(predicted: set, gold: set) -> tuple[float | None, float | None]:
    hits = len(predicted & gold)
    return (hits / len(predicted) if predicted else None, hits / len(gold) if gold else None)


def score(report: AuditReport, truth: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Aggregate figures (fractions) and one row per new intent."""
    new = [f.verdict.intent for f in report.findings]
    expected = expected_verdicts(truth, new, report.labels)
    rows = []
    for finding in report.findings:
        v, want = finding.verdict, expected[finding.verdict.intent]
        best = finding.containment[0] if finding.containment else None
        rows.append({
            "intent": v.intent, "expected": want["relation"], "expected_existing": sorted(want["existing"]),
            "relation": v.relation, "existing": sorted(v.existing), "severity": v.severity,
            "borderline": v.borderline,
            "top_existing": best.existing if best else None,
            "new_in_existing": best.new_in_existing.rate if best else None,
            "existing_in_new": best.existing_in_new.rate if best and best.existing_in_new else None,
        })
    known = report.known_relations.typed_pairs() if report.known_relations is not None else set()
    predicted = _pairs(report.fix_relations().typed_pairs() - known, set(new))
    gold = _pairs(LabelRelations.from_dict({k: v for k, v in truth.items() if k != "expected"}).typed_pairs(),
                  set(new))
    typed_p, typed_r = _precision_recall(predicted, gold)
    pair_p, pair_r = _precision_recall(_untyped(predicted), _untyped(gold))
    n = max(len(rows), 1)
    figures = {
        "new_intents": len(rows),
        "relation_acc": sum(r["relation"] == r["expected"] for r in rows) / n,
        "exact_acc": sum(r["relation"] == r["expected"] and r["existing"] == r["expected_existing"]
                         for r in rows) / n,
        "pair_precision": pair_p, "pair_recall": pair_r,
        "typed_pair_precision": typed_p, "typed_pair_recall": typed_r,
    }
    return figures, rows


def heldout_scenario(heldout: list[Example], reference: list[Example], seed: int = 0,
                     pairs: int = 6) -> tuple[list[Example], dict[str, Any]]:
    """An upgrade batch with known answers, built from held-out rows of the existing intents.

    For tuning the rules on data other than the upgrade batch itself:
    ``X~v2`` (every held-out row of X: duplicate of X); ``X~with_T`` (rows of X
    with a span of type T, where 15-50 % of X's reference rows have one:
    subset of X); ``X|Y`` (rows of X and of Y: superset); ``X&Y`` ("<x> and
    <y>" joined utterances: composite); ``oos~new`` (out-of-scope rows: novel).
    Returns the batch and a truth object (relations file plus ``expected``).
    """
    rng = random.Random(seed)
    by_label: dict[str, list[Example]] = {}
    for ex in heldout:
        by_label.setdefault(ex.labels[0] if ex.labels else "", []).append(ex)
    oos = by_label.pop("", [])
    names = sorted(by_label)
    batch: list[Example] = []
    relations: list = []
    expected: dict[str, dict[str, Any]] = {}

    def add(new: str, texts: list[str], relation: str, existing: list[str]) -> None:
        batch.extend(Example(text, (new,)) for text in texts)
        expected[new] = {"relation": relation, "existing": sorted(existing)}

    for x in names:
        add(f"{x}~v2", [ex.text for ex in by_label[x]], "duplicate", [x])
        relations.append(Duplicate(f"{x}~v2", x))
        own = [ex for ex in reference if ex.labels == (x,)]
        for kind in sorted({s.label for ex in own for s in ex.spans}):
            share = sum(any(s.label == kind for s in ex.spans) for ex in own) / len(own)
            rows = [ex.text for ex in by_label[x] if any(s.label == kind for s in ex.spans)]
            if 0.15 <= share <= 0.5 and len(rows) >= 5:
                add(f"{x}~with_{kind}", rows, "subset", [x])
                relations.append(Subset(child=f"{x}~with_{kind}", parent=x))
    combos = list(itertools.combinations(names, 2))
    rng.shuffle(combos)
    for x, y in combos[:pairs]:
        add(f"{x}|{y}", [ex.text for ex in by_label[x] + by_label[y]], "superset", [x, y])
        relations += [Subset(child=x, parent=f"{x}|{y}"), Subset(child=y, parent=f"{x}|{y}")]
    for x, y in combos[pairs:2 * pairs]:
        joined = [f"{a.text.rstrip('.?! ')} and {b.text[0].lower()}{b.text[1:]}"
                  for a, b in zip(by_label[x], rng.sample(by_label[y], len(by_label[y])))]
        add(f"{x}&{y}", joined, "composite", [x, y])
        relations.append(Composite(f"{x}&{y}", (x, y)))
    add("oos~new", [ex.text for ex in oos], "novel", [])
    labels = tuple(names) + tuple(expected)
    truth = LabelRelations(labels=labels, relations=tuple(relations)).to_dict()
    truth["expected"] = expected
    return batch, truth


def expand(batch: list[Example], size: int) -> list[Example]:
    """``size`` distinct rows: each batch row with a filler prefix and suffix (labels kept)."""
    variants = itertools.product(PREFIXES, SUFFIXES, batch)
    out = [Example(f"{pre}{ex.text}{suf}", ex.labels) for pre, suf, ex in itertools.islice(variants, size)]
    if len(out) < size:
        raise ValueError(f"cannot make {size} distinct rows from {len(batch)} (at most "
                         f"{len(batch) * len(PREFIXES) * len(SUFFIXES)})")
    return out


def _markdown(results: list[tuple[str, dict[str, Any], list[dict[str, Any]]]],
              timing: dict[str, Any] | None) -> str:
    lines = []
    for scenario, scoring, rows in results:
        lines += [f"**{scenario}**", "",
                  "| new intent | expected | audit | existing | contain(N→E) | contain(E→N) |",
                  "|---|---|---|---|---:|---:|"]
        for r in rows:
            mark = "" if r["relation"] == r["expected"] else " ✗"
            lines.append(f"| `{r['intent']}` | {r['expected']} | {r['relation']}{mark} | "
                         f"{', '.join(r['existing']) or '–'} | {pct(r['new_in_existing'], 0)} | "
                         f"{pct(r['existing_in_new'], 0)} |")
        lines += ["", "| relation acc | exact acc | pair P | pair R | typed pair P | typed pair R |",
                  "|---:|---:|---:|---:|---:|---:|",
                  f"| {pct(scoring['relation_acc'], 1)} | {pct(scoring['exact_acc'], 1)} | "
                  f"{pct(scoring['pair_precision'], 1)} | {pct(scoring['pair_recall'], 1)} | "
                  f"{pct(scoring['typed_pair_precision'], 1)} | {pct(scoring['typed_pair_recall'], 1)} |", ""]
    if timing:
        lines += [f"Audit of {timing['batch_rows']:,} utterances: {timing['seconds']:.1f} s end to end "
                  f"({timing['inference_s']:.1f} s engine inference, {timing['threads']} threads, "
                  f"{timing['utt_per_s']:.0f} utterances/s)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", required=True)
    parser.add_argument("--batch", default=str(DEFAULT_DATA / "upgrade.jsonl"))
    parser.add_argument("--truth", default=str(DEFAULT_DATA / "upgrade_relations.json"))
    parser.add_argument("--train", default=str(DEFAULT_DATA / "train.jsonl"),
                        help="old data sample for contain(E->N); 'none' to use the batch's own rows")
    parser.add_argument("--scenario", default="assistant-upgrade", help="name recorded with the figures")
    parser.add_argument("--heldout", nargs="*",
                        default=[str(DEFAULT_DATA / name) for name in ("valid.jsonl", "test.jsonl")],
                        help="held-out rows of the existing intents for the 'heldout' scenario "
                             "(the flag without files skips it)")
    parser.add_argument("--timing-rows", type=int, default=10_000, help="0 to skip the timing run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--config", help="JSON object of AuditConfig overrides")
    args = parser.parse_args(argv)

    from service.engine import Engine

    config = AuditConfig.from_dict(json.loads(Path(args.config).read_text()) if args.config else {})
    engine = Engine(args.bundle, provider="cpu", threads=args.threads)
    batch = read_jsonl(args.batch)
    training = None if args.train == "none" else read_jsonl(args.train)
    scenarios = [(args.scenario, batch, json.loads(Path(args.truth).read_text(encoding="utf-8")))]
    if args.heldout:
        if training is None:
            parser.error("the heldout scenario needs --train (its subsets are defined on the old data's spans)")
        heldout = [ex for path in args.heldout for ex in read_jsonl(path)]
        scenarios.append(("heldout", *heldout_scenario(heldout, training)))
    records, results = [], []
    for name, rows, truth in scenarios:
        scoring, verdicts = score(audit_batch(engine, rows, training, config), truth)
        results.append((name, scoring, verdicts))
        records.append({"scenario": name, "measure": "accuracy", "bundle": args.bundle,
                        "train_sample": "none" if training is None else Path(args.train).name,
                        **{k: (round(100 * v, 2) if isinstance(v, float) else v) for k, v in scoring.items()}})
        # One flat record per new intent (lists joined, rates as percentages).
        records += [{"scenario": name, "measure": "verdict",
                     **{k: ", ".join(v) if isinstance(v, list) else round(100 * v, 2) if isinstance(v, float) else v
                        for k, v in row.items()}} for row in verdicts]
    timing = None
    if args.timing_rows:
        big = expand(batch, args.timing_rows)
        started = time.perf_counter()
        big_report = audit_batch(engine, big, training, config)
        seconds = time.perf_counter() - started
        timing = {"scenario": f"{args.scenario} x{len(big) // len(batch)}", "measure": "timing",
                  "batch_rows": len(big), "audited_rows": big_report.audited_rows, "threads": args.threads,
                  "provider": engine.provider, "seconds": round(seconds, 2),
                  "inference_s": round(big_report.timing_s["inference"], 2),
                  "utt_per_s": round(len(big) / seconds, 1)}
        records.append(timing)
    markdown = _markdown(results, timing)
    path = write_results("audit", records, markdown)
    print(markdown)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
