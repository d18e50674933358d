"""Batch prediction at any size: ``intentvcs predict`` against the engine's own rate, and Ray Data against one process.

    python -m benchmarks.predict_bench                       # runs/default/bundle, 1,000,000 rows
    python -m benchmarks.predict_bench --rows 20000 --results-dir /tmp/predict-check

Writes ``benchmarks/results/predict.json`` and ``predict.md`` (``--results-dir``
to write elsewhere). Run it on a quiet machine: other work on the cores skews
every figure (the load average before and after is recorded).

One bundle (``--bundle``, default ``runs/default/bundle``, what ``intentvcs
demo`` writes), one input of ``--rows`` JSONL rows (``{"id", "text"}``, texts
drawn round-robin from a real data set, default the embedded default
``train.jsonl``), all in one invocation:

- ``engine``: ``Engine.predict`` on 32 texts at a time (the service's batch),
  in this process, on the first ``--engine-rows`` rows; measured before and
  after the command runs, their mean is the reference rate.
- ``predict-local``: ``intentvcs predict`` as a subprocess on all rows:
  end-to-end wall-clock rows/s (process start, model load, reading, JSON,
  writing included), the command's own rate, peak memory of the process
  (``getrusage`` of the child, and the RSS polled with psutil every 50 ms),
  and ``vs_engine_batch32``, wall-clock rows/s over the engine's rate.
- ``predict-ray``: the same with ``--engine ray --workers 2`` (a local
  2-worker cluster, started and stopped by the command): rows/s,
  ``vs_local`` (over the local command's rows/s), the extra seconds, the
  polled RSS of the whole process tree (Ray's processes included, shared
  pages counted in each), and whether its output is byte for byte the local
  one's.
- ``targets``: the deployment goals at 1,000,000 rows (peak RSS <= 600 MB,
  ``vs_engine_batch32`` >= 0.9, Ray ``vs_local`` >= 0.8) beside the figures;
  ``met`` is only claimed for a run of at least that many rows.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.common import RESULTS, ROOT, write_results

TARGETS = {"rows": 1_000_000, "peak_rss_mb": 600, "vs_engine_batch32": 0.9, "ray_vs_local": 0.8}
ENGINE_BATCH = 32


def default_texts() -> Path:
    from intentvcs.training import DEFAULT_DATA

    return DEFAULT_DATA / "train.jsonl"


def write_input(path: Path, texts: list[str], rows: int) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for start in range(0, rows, 10_000):
            handle.write("".join(json.dumps({"id": f"r{i:07d}", "text": texts[i % len(texts)]}, ensure_ascii=False)
                                 + "\n" for i in range(start, min(rows, start + 10_000))))


def engine_rate(bundle: str, texts: list[str], rows: int) -> float:
    """Rows per second of ``Engine.predict`` on 32 texts at a time (the first ``rows`` input rows)."""
    from intentvcs.service.engine import Engine

    engine = Engine(bundle, provider="cpu")
    sample = [texts[i % len(texts)] for i in range(rows)]
    engine.predict(sample[:ENGINE_BATCH])  # warm-up
    began = time.perf_counter()
    for start in range(0, rows, ENGINE_BATCH):
        engine.predict(sample[start:start + ENGINE_BATCH])
    return rows / (time.perf_counter() - began)


def run_measured(command: list[str], log: Path) -> dict:
    """Run ``command``; its wall time, its summary line, the peak RSS of its process tree (psutil, 50 ms)."""
    import psutil

    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    began = time.perf_counter()
    with log.open("w") as err, tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=err, cwd=ROOT)
        peak = {"tree": 0, "main": 0}
        done = threading.Event()

        def poll() -> None:
            root = psutil.Process(proc.pid)
            while not done.is_set():
                try:
                    main = root.memory_info().rss
                    tree = main + sum(p.memory_info().rss for p in root.children(recursive=True))
                except psutil.Error:
                    tree = main = 0
                peak["main"], peak["tree"] = max(peak["main"], main), max(peak["tree"], tree)
                done.wait(0.05)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        code = proc.wait()
        wall = time.perf_counter() - began
        done.set()
        poller.join()
        out.seek(0)
        lines = out.read().strip().splitlines()
    if code != 0:
        raise SystemExit(f"predict_bench: {' '.join(command)} failed ({code}); its log: {log}\n"
                         + log.read_text()[-3000:])
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"wall_s": wall, "summary": json.loads(lines[-1]), "polled_rss_mb": peak["main"] / 2**20,
            "polled_tree_rss_mb": peak["tree"] / 2**20,
            # ru_maxrss (KiB) of the largest waited-for child: this one's when it grew.
            "maxrss_mb": after / 1024 if after > before else None}


def file_digest(path: Path, max_lines: int | None = None) -> tuple[str, int]:
    """sha256 and line count of ``path``, or of its first ``max_lines`` lines."""
    digest, lines = hashlib.sha256(), 0
    with path.open("rb") as handle:
        for line in handle:
            if max_lines is not None and lines == max_lines:
                break
            digest.update(line)
            lines += 1
    return digest.hexdigest(), lines


def predict_command(bundle: str, data: Path, out: Path, chunk_rows: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "intentvcs.cli.main", "predict", "--bundle", bundle, "--data", str(data),
            "--out", str(out), "--provider", "cpu", "--chunk-rows", str(chunk_rows), *extra]


def measure(args: argparse.Namespace, work: Path) -> tuple[list[dict], dict]:
    from intentvcs.core.dataio import read_jsonl

    texts = [example.text for example in read_jsonl(args.texts)]
    data = work / "input.jsonl"
    write_input(data, texts, args.rows)
    engine_rows = min(args.rows, args.engine_rows)
    print(f"predict_bench: {args.rows:,} rows in {data} ({data.stat().st_size / 2**20:.0f} MiB); "
          f"engine batch {ENGINE_BATCH} on {engine_rows:,} rows", file=sys.stderr)
    load = {"load_before": os.getloadavg()}
    engine_before = engine_rate(args.bundle, texts, engine_rows)

    local = run_measured(predict_command(args.bundle, data, work / "local.jsonl", args.chunk_rows),
                         work / "local.log")
    _, local_lines = file_digest(work / "local.jsonl")
    if local_lines != args.rows:
        raise SystemExit(f"predict_bench: the local run wrote {local_lines} answers for {args.rows} rows")
    engine_after = engine_rate(args.bundle, texts, engine_rows)
    engine = (engine_before + engine_after) / 2
    local_rate = args.rows / local["wall_s"]
    peak = local["maxrss_mb"] or local["polled_rss_mb"]
    records = [
        {"component": "engine", "batch_size": ENGINE_BATCH, "rows": engine_rows,
         "rows_per_s": round(engine, 1), "rows_per_s_before": round(engine_before, 1),
         "rows_per_s_after": round(engine_after, 1)},
        {"component": "predict-local", "rows": args.rows, "chunk_rows": args.chunk_rows,
         "wall_s": round(local["wall_s"], 2), "rows_per_s": round(local_rate, 1),
         "command_rows_per_s": local["summary"]["rows_per_s"], "peak_rss_mb": round(peak, 1),
         "polled_rss_mb": round(local["polled_rss_mb"], 1),
         "vs_engine_batch32": round(local_rate / engine, 3)},
    ]
    ray_ratio = None
    if not args.skip_ray:
        # On the first --ray-rows rows: Ray's rate against the local run's over all rows (its start-up
        # weighs more on fewer rows, so a shorter Ray run can only understate it).
        # Whole chunks only: a chunk is cut into length-sorted graph runs, so the same rows in a different
        # chunk pad differently and their answers differ in the last digits.
        ray_rows = min(args.rows, args.ray_rows or args.rows)
        if ray_rows < args.rows:  # whole chunks, never more rows than the local run read
            ray_rows = min(args.rows, max(args.chunk_rows, ray_rows - ray_rows % args.chunk_rows))
        ray_data = data if ray_rows == args.rows else work / "ray-input.jsonl"
        if ray_data != data:
            write_input(ray_data, texts, ray_rows)
        ray = run_measured(predict_command(args.bundle, ray_data, work / "ray.jsonl", args.chunk_rows, "--engine",
                                           "ray", "--workers", str(args.workers)), work / "ray.log")
        ray_rate = ray_rows / ray["wall_s"]
        ray_ratio = ray_rate / local_rate
        records.append({
            "component": "predict-ray", "rows": ray_rows, "workers": args.workers, "chunk_rows": args.chunk_rows,
            "wall_s": round(ray["wall_s"], 2), "rows_per_s": round(ray_rate, 1),
            "command_rows_per_s": ray["summary"]["rows_per_s"], "vs_local": round(ray_ratio, 3),
            "overhead_s": round(ray["wall_s"] - local["wall_s"] * ray_rows / args.rows, 2),
            "polled_tree_rss_mb": round(ray["polled_tree_rss_mb"], 1),
            "output_identical": file_digest(work / "ray.jsonl") == file_digest(work / "local.jsonl", ray_rows)})
    load["load_after"] = os.getloadavg()
    at_size = args.rows >= TARGETS["rows"]
    figures = {"peak_rss_mb": peak, "vs_engine_batch32": local_rate / engine, "ray_vs_local": ray_ratio}
    records.append({"component": "targets", "rows": args.rows, "at_target_size": at_size, **{
        f"{name}_{'max' if name == 'peak_rss_mb' else 'min'}": TARGETS[name] for name in figures},
        **{f"{name}_met": (None if value is None or not at_size else
                           (value <= TARGETS[name] if name == "peak_rss_mb" else value >= TARGETS[name]))
           for name, value in figures.items()}})
    settings = {"bundle": args.bundle, "texts": str(args.texts), "distinct_texts": len(texts), **load}
    return records, settings


def markdown(records: list[dict], settings: dict) -> str:
    by = {r["component"]: r for r in records}
    engine, local, targets = by["engine"], by["predict-local"], by["targets"]
    lines = [f"{local['rows']:,} rows ({settings['distinct_texts']} distinct texts, round-robin), "
             f"bundle `{Path(settings['bundle']).name}`, CPU. Load average before/after: "
             f"{settings['load_before'][0]:.1f} / {settings['load_after'][0]:.1f}.", "",
             "| run | rows/s | vs reference | peak RSS (MB) | wall (s) |", "|---|---|---|---|---|",
             f"| `Engine.predict`, batch {engine['batch_size']} ({engine['rows']:,} rows) | "
             f"{engine['rows_per_s']:.0f} | reference | – | – |",
             f"| `intentvcs predict` (local) | {local['rows_per_s']:.0f} | {local['vs_engine_batch32']:.2f}x engine "
             f"| {local['peak_rss_mb']:.0f} | {local['wall_s']:.1f} |"]
    if "predict-ray" in by:
        ray = by["predict-ray"]
        lines.append(f"| `intentvcs predict --engine ray`, {ray['workers']} workers, {ray['rows']:,} rows | "
                     f"{ray['rows_per_s']:.0f} | "
                     f"{ray['vs_local']:.2f}x local | {ray['polled_tree_rss_mb']:.0f} (all Ray processes) | "
                     f"{ray['wall_s']:.1f} |")
        lines += ["", f"Ray's answers are byte for byte the local run's: {'yes' if ray['output_identical'] else 'NO'}. "
                      f"Ray costs {ray['overhead_s']:+.1f} s against the local run's time for as many rows "
                      "(cluster start included)."]
    met = {True: "met", False: "MISSED", None: "–"}
    lines += ["", f"Targets at {TARGETS['rows']:,} rows"
              + ("" if targets["at_target_size"] else f" (this run has {local['rows']:,}: not judged)") + ": "
              f"peak RSS <= {TARGETS['peak_rss_mb']} MB {met[targets['peak_rss_mb_met']]}; "
              f"throughput >= {TARGETS['vs_engine_batch32']:.0%} of the engine's batch-32 rate "
              f"{met[targets['vs_engine_batch32_met']]}; Ray >= {TARGETS['ray_vs_local']:.0%} of one process "
              f"{met[targets['ray_vs_local_met']]}."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", default=str(ROOT / "runs" / "default" / "bundle"),
                        help="bundle to run (default: runs/default/bundle, written by `intentvcs demo`)")
    parser.add_argument("--rows", type=int, default=TARGETS["rows"], help="input rows (default: %(default)s)")
    parser.add_argument("--texts", type=Path, default=None,
                        help="canonical JSONL whose texts fill the rows, round-robin (default: the embedded "
                             "default data's train.jsonl)")
    parser.add_argument("--engine-rows", type=int, default=20_000,
                        help="rows of the engine's batch-32 reference measurement (default: %(default)s)")
    parser.add_argument("--chunk-rows", type=int, default=1024, help="intentvcs predict --chunk-rows")
    parser.add_argument("--workers", type=int, default=2, help="Ray workers (default: %(default)s)")
    parser.add_argument("--skip-ray", action="store_true", help="measure the local command only")
    parser.add_argument("--ray-rows", type=int, help="run Ray on the first N rows only (default: all --rows)")
    parser.add_argument("--work-dir", type=Path, help="keep the input, outputs and logs here (default: a "
                                                      "temporary folder, removed after)")
    parser.add_argument("--results-dir", type=Path, default=RESULTS,
                        help="where predict.json and predict.md go (default: benchmarks/results)")
    args = parser.parse_args()
    if not Path(args.bundle, "manifest.json").is_file():
        raise SystemExit(f"predict_bench: no bundle at {args.bundle}: run `intentvcs demo` first (it writes "
                         "runs/default/bundle), or give --bundle")
    if args.rows < 1:
        raise SystemExit("predict_bench: --rows must be >= 1")
    args.texts = args.texts or default_texts()
    if args.work_dir:
        args.work_dir.mkdir(parents=True, exist_ok=True)
        records, settings = measure(args, args.work_dir)
    else:
        with tempfile.TemporaryDirectory(prefix="predict-bench-") as work:
            records, settings = measure(args, Path(work))
    path = write_results("predict", records, markdown(records, settings), extra=settings,
                         directory=args.results_dir)
    print(f"wrote {path}")
    print(markdown(records, settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
