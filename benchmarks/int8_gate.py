"""What serving int8 costs on the tasks users care about, and what the export's gate decides.

    python -m benchmarks.int8_gate                      # every task whose checkpoint exists
    python -m benchmarks.int8_gate --tasks snips-vcs clinc150
    python -m benchmarks.int8_gate --tasks clinc150 --checkpoint clinc150=runs/bench/oos/ckpt/08f93232ea76-e4-s0

For each task, the checkpoint is exported as users export it (``export_bundle``:
fused fp32 graph, int8 of its encoder, the accuracy gate on the labelled
*validation* rows given as parity data); then the *test* split is scored through
both graphs of the bundle (``Engine`` with ``quantized="off"`` and ``"on"``) with
``intentvcs.core.evaluation.evaluate``. One record per task: each gated figure
for fp32 and int8 and the loss in points, the export's gate verdict, the graph
``INTENTVCS_QUANTIZED=auto`` then serves, and whether the test losses keep the
target (≤ 0.5 points on every figure; AUROC within 0.005).

Tasks and the checkpoints they read (trained by the benchmark named):
- ``snips-vcs``: SNIPS-VCS (built by ``intentvcs build-vcs``, seed 0), the PU
  method, default recipe; micro F1 and exact match on the test gold sets.
- ``snips-entities``: SNIPS with the joint entity head (``benchmarks.entities_bench``,
  seed 0): intent accuracy, slot F1, overall accuracy.
- ``clinc150``: CLINC150 Full (``benchmarks.entities_bench``'s intent-only
  retrain): in-scope accuracy, OOS recall, AUROC.
- ``demo``: the embedded default (``intentvcs demo --no-serve --out runs/default``),
  its validation and test splits: every figure the export gates.
Writes ``benchmarks/results/int8_gate.json`` and ``int8_gate.md`` (records of
tasks not run are kept).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

from benchmarks.common import ROOT, SHARED_DATA, keep_previous, shown_path, write_results
from intentvcs.training import DEFAULT_DATA

MAX_LOSS_POINTS = 0.5
MAX_AUROC_LOSS = 0.005


class Task(NamedTuple):
    checkpoint: Path
    valid: Path | tuple[str, str]  # a canonical JSONL file, or (loader format, data folder)
    test: Path | tuple[str, str]
    figures: tuple[str, ...]


RUNS = ROOT / "runs"
TASKS = {
    "snips-vcs": Task(RUNS / "int8" / "snips-vcs-pu", RUNS / "int8" / "snips-vcs" / "valid_gold.jsonl",
                      RUNS / "int8" / "snips-vcs" / "test.jsonl", ("f1", "exact_match", "accuracy")),
    "snips-entities": Task(RUNS / "entities" / "snips" / "seed0" / "checkpoint",
                           RUNS / "entities" / "data" / "snips-valid.jsonl",
                           RUNS / "entities" / "data" / "snips-test.jsonl",
                           ("accuracy", "slot_f1", "overall_accuracy")),
    "clinc150": Task(RUNS / "entities" / "clinc150" / "08f93232ea76-e4-s0", ("clinc150", "clinc150/data_full.json"),
                     ("clinc150", "clinc150/data_full.json"), ("in_scope_accuracy", "oos_recall", "auroc")),
    "demo": Task(RUNS / "default" / "checkpoint", DEFAULT_DATA / "valid.jsonl", DEFAULT_DATA / "test.jsonl",
                 ("accuracy", "in_scope_accuracy", "oos_recall", "auroc", "slot_f1", "overall_accuracy")),
}


def with_checkpoints(tasks: dict[str, Task], overrides: list[str]) -> dict[str, Task]:
    """``tasks`` with each ``TASK=DIR`` of ``overrides`` reading its checkpoint from ``DIR``."""
    tasks = dict(tasks)
    for override in overrides:
        name, sep, directory = override.partition("=")
        if not sep or not directory or name not in tasks:
            raise ValueError(f"--checkpoint wants TASK=DIR with TASK one of {list(tasks)}, got {override!r}")
        tasks[name] = tasks[name]._replace(checkpoint=Path(directory).resolve())
    return tasks


def rows(source: Path | tuple[str, str], split: str, scratch: Path) -> Path:
    """``source`` as a canonical JSONL file (a loader's split is written to ``scratch`` first)."""
    if isinstance(source, Path):
        return source
    from intentvcs.core.dataio import write_jsonl
    from intentvcs.training.loaders import load

    path = scratch / f"{Path(source[1]).stem}-{split}.jsonl"
    write_jsonl(path, load(source[0], SHARED_DATA / source[1], split))
    return path


def measure(name: str, task: Task, out: Path) -> dict:
    """Export ``task``'s checkpoint with its gate, score its test split on both graphs; one record."""
    from intentvcs.core.dataio import read_jsonl
    from intentvcs.core.evaluation import evaluate, headline
    from intentvcs.export.exporter import export_bundle
    from intentvcs.service.bundle import serving_graph
    from intentvcs.service.engine import Engine, read_as_served

    with tempfile.TemporaryDirectory() as scratch:
        valid, test = rows(task.valid, "valid", Path(scratch)), rows(task.test, "test", Path(scratch))
        result = export_bundle(task.checkpoint, out / name, parity_data=valid, force=True)
        examples = list(read_jsonl(test))
    texts = [example.text for example in examples]
    scored, manifest = {}, None
    for mode in ("off", "on"):
        engine = Engine(out / name, provider="cpu", quantized=mode)
        # As served (as the export's gate reads the validation rows): chained requests part by part.
        outputs, _, decided = read_as_served(engine.session, engine.spelling, engine.decision, texts)
        scored[mode] = headline(evaluate(engine.decision, outputs, examples, include_tables=False,
                                         result=decided.result))
        manifest = engine.bundle.manifest
    figures, kept = {}, True
    for figure in task.figures:
        fp32, int8 = scored["off"][figure], scored["on"][figure]
        loss = fp32 - int8
        bound = MAX_AUROC_LOSS if figure == "auroc" else MAX_LOSS_POINTS / 100
        kept &= loss <= bound
        figures[figure] = {"fp32": round(100 * fp32, 2), "int8": round(100 * int8, 2),
                           "loss_points": round(100 * loss, 2)}
    gate = result["quantization"]["gate"]
    # Paths under the project are recorded relative to it (every default; an override elsewhere stays absolute).
    shown = shown_path(task.checkpoint)
    return {"task": name, "checkpoint": str(shown), "test_rows": len(examples),
            "figures": figures, "test_loss_within_target": bool(kept),
            "gate": {"rows": gate["rows"], "passed": gate["passed"],
                     "failed": [f for f, v in gate["figures"].items() if not v["passed"]]},
            "served_by_default": serving_graph(manifest, "auto")[0],
            "int8_method": result["quantization"]["method"],
            "int8_not_kept": [{"method": other["method"], "gate_passed": other["gate"]["passed"]}
                              for other in result["quantization"]["not_kept"] if "gate" in other],
            "int8_speedup_at_export": result["quantization"]["timing"]["speedup"],
            "fusions": result["model"]["fusions"]}


def markdown(records: list[dict]) -> str:
    lines = ["| task | figure | fp32 | int8 | loss (points) | gate (validation) | served by default |",
             "|---|---|---|---|---|---|---|"]
    for r in records:
        for i, (figure, f) in enumerate(r["figures"].items()):
            # Records before the weight-only method name no method: theirs was dynamic.
            verdict = "passed" if r["gate"]["passed"] else f"failed ({', '.join(r['gate']['failed'])})"
            gate = f"{r.get('int8_method', 'dynamic')}: {verdict}" if not i else ""
            served = f"`{r['served_by_default']}`" if not i else ""
            lines.append(f"| {r['task'] if not i else ''} | {figure} | {f['fp32']:.2f} | {f['int8']:.2f} | "
                         f"{f['loss_points']:+.2f} | {gate} | {served} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    parser.add_argument("--out", type=Path, default=RUNS / "int8" / "bundles", help="where the bundles go")
    parser.add_argument("--checkpoint", nargs="+", default=[], metavar="TASK=DIR",
                        help="score a task on another checkpoint of its data (recorded in its record), e.g. one "
                             "that another benchmark trained by the same recipe")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        tasks = with_checkpoints(TASKS, args.checkpoint)
    except ValueError as exc:
        parser.error(str(exc))
    missing = [name for name in args.tasks if not tasks[name].checkpoint.exists()]
    if missing:
        print(f"int8_gate: no checkpoint for {missing} (see the module docstring for the runs that write them)",
              file=sys.stderr)
        return 2
    records = [measure(name, tasks[name], args.out) for name in args.tasks]
    print(markdown(records))
    records, command = keep_previous("int8_gate", records, lambda record: record["task"] in args.tasks)
    path = write_results("int8_gate", records, markdown(records), command=command)
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
