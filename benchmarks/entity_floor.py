"""The entity floor, measured: each bundle's entities answered with every decoded entity and with the floor
that training fits on the validation rows, side by side, on its validation and test splits.

    python -m benchmarks.entity_floor --bundle demo=runs/default/bundle \
        --valid demo=training/default_data/assistant/valid.jsonl --test demo=training/default_data/assistant/test.jsonl

For each bundle, in one process, through the graph the service serves
(``INTENTVCS_QUANTIZED=auto``) and its spelling normaliser: the validation
texts are read whole, as training reads them to fit its decision, and
``intentvcs.core.entity_floor.fit_floor`` picks the floor from them (what
``intentvcs train`` and ``intentvcs refit`` store; the bundle's own floor is
recorded, not used). Then both splits are answered as served
(``decide_segmented``, chained requests part by part) twice, once with the
bundle's decision at floor 0 (every decoded entity answered, as before the
floor existed) and once at the fitted floor, and scored by
``intentvcs.core.evaluation.evaluate``: slot precision, recall and F1 (CoNLL
spans), the rows with the entity set exact, overall accuracy (intents and
entities both right) and intent accuracy (which the floor cannot change).

Writes ``benchmarks/results/entity_floor.json`` and ``.md`` (records of bundles
not measured in this run are kept).
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import replace
from pathlib import Path

from benchmarks.common import keep_previous, named_paths, shown_path, write_results

FIGURES = ("slot_precision", "slot_recall", "slot_f1", "entities_exact", "overall_accuracy", "accuracy")


def measure(name: str, bundle: Path, valid: Path, test: Path) -> dict:
    from intentvcs.core.dataio import read_jsonl
    from intentvcs.core.entity_floor import fit_floor
    from intentvcs.core.evaluation import evaluate, headline
    from intentvcs.core.segmentation import decide_segmented
    from intentvcs.service.engine import Engine

    engine = Engine(bundle, provider="cpu")
    if not engine.entity_types:
        raise ValueError(f"{bundle}: the bundle has no entity head")
    valid_rows, test_rows = list(read_jsonl(valid)), list(read_jsonl(test))
    # Each split's texts read whole once: the fit and both decisions start from these outputs.
    read = {split: engine.infer([row.text for row in rows]) for split, rows in (("valid", valid_rows),
                                                                                ("test", test_rows))}
    fitted = fit_floor(valid_rows, read["valid"].entities)
    if fitted is None:
        raise ValueError(f"{valid}: no in-scope row has a gold entity span to fit a floor on")
    floor, by_floor = fitted
    decisions = {"0": replace(engine.decision, entity_floor=0.0), "fitted": replace(engine.decision, entity_floor=floor)}
    scored: dict[str, dict] = {}
    for split, rows in (("valid", valid_rows), ("test", test_rows)):
        for which, decision in decisions.items():
            outputs, segmented = decide_segmented(decision, engine.infer, [row.text for row in rows],
                                                  outputs=read[split])
            figures = headline(evaluate(decision, outputs, rows, include_tables=False, result=segmented.result))
            scored.setdefault(split, {})[which] = {figure: round(100 * figures[figure], 2) for figure in FIGURES}
    bundle = bundle.resolve()
    shown = shown_path(bundle)
    return {"model": name, "bundle": str(shown), "graph": engine.info["model_file"],
            "bundle_floor": engine.decision.entity_floor, "fitted_floor": floor,
            "valid_by_floor": {f: {k: round(100 * v, 2) for k, v in scores.items()} for f, scores in by_floor.items()},
            "valid_rows": len(valid_rows), "test_rows": len(test_rows), "figures": scored}


def markdown(records: list[dict]) -> str:
    lines = ["| model | split | floor | slot P | slot R | slot F1 | entities exact | overall | intent acc |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in records:
        for split in ("valid", "test"):
            for which in ("0", "fitted"):
                f = r["figures"][split][which]
                floor = "0 (every entity)" if which == "0" else f"{r['fitted_floor']} (fitted)"
                lines.append(f"| {r['model']} | {split} | {floor} | {f['slot_precision']:.2f} | {f['slot_recall']:.2f} "
                             f"| {f['slot_f1']:.2f} | {f['entities_exact']:.2f} | {f['overall_accuracy']:.2f} "
                             f"| {f['accuracy']:.2f} |")
    grid = list(records[0]["valid_by_floor"])
    lines += ["", "Validation rows (whole texts, as the floor is fitted) at each floor of the grid: slot F1 / rows with "
                  "the entity set exact:", "", "| model | " + " | ".join(grid) + " |", "|---|" + "---:|" * len(grid)]
    for r in records:
        lines.append(f"| {r['model']} | " + " | ".join(f"{v['slot_f1']:.2f} / {v['entities_exact']:.2f}"
                                                       for v in r["valid_by_floor"].values()) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", nargs="+", required=True, metavar="NAME=DIR", help="bundles with an entity head")
    parser.add_argument("--valid", nargs="+", required=True, metavar="NAME=FILE", help="each bundle's validation rows")
    parser.add_argument("--test", nargs="+", required=True, metavar="NAME=FILE", help="each bundle's test rows")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        bundles, valid, test = (named_paths(getattr(args, flag), f"--{flag}")
                                for flag in ("bundle", "valid", "test"))
    except ValueError as exc:
        parser.error(str(exc))
    unpaired = sorted(set(bundles) ^ set(valid) | set(bundles) ^ set(test))
    if unpaired:
        parser.error(f"every bundle needs --valid and --test rows, and only they: {unpaired}")
    missing = [str(path) for path in [*bundles.values(), *valid.values(), *test.values()] if not path.exists()]
    if missing:
        print(f"entity_floor: not found: {missing}", file=sys.stderr)
        return 2
    records = [measure(name, bundles[name], valid[name], test[name]) for name in bundles]
    print(markdown(records))
    records, command = keep_previous("entity_floor", records, lambda record: record["model"] in bundles)
    path = write_results("entity_floor", records, markdown(records), command=command)
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
