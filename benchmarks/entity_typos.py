"""Typos inside entity values: how a served bundle reads "wake me up tomorow" when the typo is in the value.

The robustness operators (``intentvcs.core.perturb``) keep entity values as written, so no robustness
figure says what a misspelt value costs, though users misspell values as often as any word. Here every
row with gold spans gets one keyboard typo (``perturb.raddle.keyboard_typo``: an adjacent key, a
dropped, swapped or doubled letter) in one word of 3+ letters of each entity value, the spans moved
with it (``perturb.text.replace_spans``), seeded per text. Each bundle reads the rows clean and
misspelt, with its spelling normaliser and without it, through ``Engine`` as served (part by part),
scored as ``intentvcs evaluate`` scores: intent exact match, slot F1 (CoNLL spans: type and
boundaries exact, the value as typed) and overall accuracy (top intent and every entity right).

What it compares: a normaliser that keeps the words each entity type's training spans hold
(``spelling.json``'s ``entity_words``, bundles trained since 2026-11-27) keeps a correction inside an
entity of a type that holds the corrected word; an older one undoes every correction inside an entity
(``intentvcs.core.spelling.infer_normalised``). Give both as ``--bundle NAME=DIR``.

    python -m benchmarks.entity_typos --data DATA.jsonl --dataset snips \\
        --bundle before=runs/perf/snips-entities-bundle --bundle after=runs/entities/snips-refit-bundle

Writes ``benchmarks/results/entity_typos.json`` and ``.md``; records of other data sets are kept.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from pathlib import Path

from benchmarks.common import keep_previous, write_results
from intentvcs.core.dataio import Example, read_jsonl
from intentvcs.core.perturb.raddle import keyboard_typo
from intentvcs.core.perturb.text import replace_spans

WORD = re.compile(r"[^\W\d_]{3,}")
FIGURES = ("exact_match", "slot_f1", "overall_accuracy")


def misspelt(example: Example, seed: int) -> Example | None:
    """``example`` with one typo in one word of 3+ letters of each entity value; None when no value has
    such a word."""
    rng = random.Random(f"{seed}\x1fentity_typos\x1f{example.text}")
    values = {}
    for k, span in enumerate(example.spans):
        value = example.text[span.start:span.end]
        words = list(WORD.finditer(value))
        if not words:
            continue
        word = rng.choice(words)
        typo = keyboard_typo(word.group(0), rng)
        if typo is not None:
            values[k] = value[:word.start()] + typo + value[word.end():]
    return replace_spans(example, values) if values else None


def figures(engine, rows: list[Example]) -> dict:
    """``engine``'s figures on ``rows``, read as served (part by part)."""
    from intentvcs.core.evaluation import evaluate
    from intentvcs.core.segmentation import decide_segmented

    graph, segmented = decide_segmented(engine.decision, engine.infer, [row.text for row in rows])
    out = evaluate(engine.decision, graph, rows, include_tables=False, result=segmented.result)
    return {key: round(100 * out[key], 2) for key in FIGURES}


def markdown(records: list[dict]) -> str:
    lines = ["| data set | bundle | normaliser keeps entity words | rows | read | normaliser | intent exact match "
             "| slot F1 | overall accuracy |", "|---|---|---|---:|---|---|---:|---:|---:|"]
    for r in records:
        lines.append(f"| {r['dataset']} | {r['bundle_name']} | {'yes' if r['entity_words'] else 'no'} | "
                     f"{r['rows']} | {r['read']} | {'on' if r['spelling'] else 'off'} | {r['exact_match']:.2f} | "
                     f"{r['slot_f1']:.2f} | {r['overall_accuracy']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="test JSONL with gold spans")
    parser.add_argument("--dataset", required=True, help="the data set's name in the records")
    parser.add_argument("--bundle", action="append", required=True, metavar="NAME=DIR")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    from intentvcs.service.engine import Engine

    pairs = [(row, misspelt(row, args.seed)) for row in read_jsonl(args.data) if row.spans]
    pairs = [(clean, typo) for clean, typo in pairs if typo is not None]
    if not pairs:
        parser.error(f"--data {args.data}: no row has an entity value with a word of 3+ letters")
    sets = {"clean": [clean for clean, _ in pairs], "value misspelt": [typo for _, typo in pairs]}
    records = []
    for spec in args.bundle:
        name, _, folder = spec.partition("=")
        if not folder:
            parser.error(f"--bundle {spec!r}: expected NAME=DIR")
        # fp32, with its normaliser and without: one engine each, for both sets of rows.
        engines = {spelling: Engine(Path(folder), provider="cpu", threads=args.threads, quantized="off",
                                    spelling=spelling) for spelling in (True, False)}
        normaliser = engines[True].spelling
        entity_words = normaliser is not None and normaliser.entity_words is not None
        for read, rows in sets.items():
            for spelling, engine in engines.items():
                records.append({"dataset": args.dataset, "bundle_name": name, "bundle": folder,
                                "entity_words": entity_words, "rows": len(rows), "read": read, "spelling": spelling,
                                **figures(engine, rows)})
                print(records[-1], flush=True)
    records, command = keep_previous("entity_typos", records, lambda r: r["dataset"] == args.dataset)
    path = write_results("entity_typos", records, markdown(records), command=command)
    print(markdown(records))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
