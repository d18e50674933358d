"""Audits at scale: a 100,000-row audit end to end, and what an audit job costs /predict.

Three measurements on one bundle (default: the demo's), batches made by
expanding the embedded upgrade batch with filler prefixes and suffixes
(``benchmarks.audit_bench.expand``, then a round number; labels kept):

* ``cli``: ``intentvcs audit`` on ``--rows`` rows (default 100,000) in a child
  process: wall time and the child's peak RSS (``getrusage``), against the
  issue's 120 s; with ``--compare-whole`` also ``cli_whole``, the same batch
  with every row scored (``intent_cap`` at the batch size, the audit before it
  sampled), and how many verdicts the two share;
* ``predict``: a server on the bundle, ``--clients`` closed-loop /predict
  clients for ``--seconds`` without an audit, then again while an audit job of
  ``--job-rows`` rows (default 10,000) runs on the same server (submitted
  through ``/audit/job/submit``; the job's own time to completion is recorded);
  p50/p99 of both windows and their ratio, against the issue's 2x.

    python -m benchmarks.audit_scale --bundle runs/default/bundle
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.audit_bench import PREFIXES, SUFFIXES, expand
from benchmarks.common import keep_previous, write_results
from benchmarks.load_test import load
from intentvcs.core.dataio import Example, read_jsonl, write_jsonl
from intentvcs.training import DEFAULT_DATA

UPGRADE = DEFAULT_DATA / "upgrade.jsonl"
TARGETS = {"cli_seconds": 120.0, "p99_ratio": 2.0}
MEASURES = ("cli", "cli_whole", "predict_during_job")  # the records' kinds, in the order the results list them


def scaled(size: int) -> list[Example]:
    """``size`` distinct rows: the expanded upgrade batch, repeated with a round number past its end."""
    batch = read_jsonl(UPGRADE)
    base = expand(batch, min(size, len(batch) * len(PREFIXES) * len(SUFFIXES)))
    return [base[i] if i < len(base) else Example(f"{base[i % len(base)].text} {i // len(base)}",
                                                  base[i % len(base)].labels) for i in range(size)]


# The command line in a child that reports its own peak RSS (KiB) as the last line of stderr: the
# children's getrusage figure is the largest child so far, so it cannot tell two runs apart.
PEAK_RSS_CHILD = """
import resource, runpy, sys
sys.argv = ["intentvcs", *sys.argv[1:]]
try:
    runpy.run_module("intentvcs.cli.main", run_name="__main__")
finally:
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def cli_run(bundle: str, rows: int, whole: bool = False) -> dict:
    """``intentvcs audit`` on ``rows`` rows in a child process (the engine's default threads: every core):
    seconds, peak RSS and each new intent's verdict; ``whole`` scores every row (no per-intent sample)."""
    with tempfile.TemporaryDirectory() as scratch:
        batch = Path(scratch) / "batch.jsonl"
        write_jsonl(batch, scaled(rows))
        arguments = ["audit", "--bundle", bundle, "--batch", str(batch), "--out", str(Path(scratch) / "report.json"),
                     "--fail-on", "never"]
        if whole:
            arguments += ["--config", str(Path(scratch) / "whole.json")]
            (Path(scratch) / "whole.json").write_text(json.dumps({"intent_cap": rows}))
        started = time.perf_counter()
        child = subprocess.run([sys.executable, "-c", PEAK_RSS_CHILD, *arguments], check=True, capture_output=True,
                               text=True)
        seconds = time.perf_counter() - started
        peak_kib = int(child.stderr.strip().splitlines()[-1])
        report = json.loads((Path(scratch) / "report.json").read_text())
    return {"measure": "cli_whole" if whole else "cli", "rows": rows, "seconds": round(seconds, 1),
            "peak_rss_mb": round(peak_kib / 1024, 1),
            "scored_rows": report["summary"]["scored_rows"], "new_intents": len(report["findings"]),
            "verdicts": {f["intent"]: [f["relation"], *f["existing"]] for f in report["findings"]},
            "target_seconds": TARGETS["cli_seconds"], "met": seconds <= TARGETS["cli_seconds"]}


def predict_during_job(bundle: str, job_rows: int, clients: int, seconds: float) -> dict:
    """/predict latency without and with an audit job of ``job_rows`` rows running on the same server."""
    import httpx

    from intentvcs.cli.commands.serve import running

    rows = [ex.to_dict() for ex in scaled(job_rows)]
    with running(bundle) as url:
        asyncio.run(load(url, clients, 3.0))  # warm-up
        quiet = asyncio.run(load(url, clients, seconds))
        submitted = time.perf_counter()
        task = httpx.post(f"{url}/audit/job/submit", json={"rows": rows}, timeout=120).json()["task_id"]
        during = asyncio.run(load(url, clients, seconds))
        # A job that ended inside the window left part of it quiet: its figures are then no "during a job"
        # ones (the job's own time, polled after the window, cannot tell).
        running_at_window_end = job_status(url, task) not in FINISHED
        status = wait_for_job(url, task)
        job_seconds = time.perf_counter() - submitted
    ratio = during["p99_ms"] / quiet["p99_ms"]
    return {"measure": "predict_during_job", "clients": clients, "window_s": seconds, "job_rows": job_rows,
            "job_status": status, "job_seconds": round(job_seconds, 1),
            "job_running_at_window_end": running_at_window_end,
            "quiet": quiet, "during_job": during, "p99_ratio": round(ratio, 2),
            "p50_ratio": round(during["p50_ms"] / quiet["p50_ms"], 2),
            "target_p99_ratio": TARGETS["p99_ratio"],
            "met": ratio <= TARGETS["p99_ratio"] if running_at_window_end else None}


FINISHED = ("completed", "failed")


def job_status(url: str, task_id: str) -> str:
    import httpx

    return httpx.get(f"{url}/audit/job/status", params={"task_id": task_id}, timeout=30).json()["status"]


def wait_for_job(url: str, task_id: str, timeout_s: float = 1800) -> str:
    """Poll an audit job's status until it completes or fails (``unfinished`` after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = job_status(url, task_id)
        if status in FINISHED:
            return status
        time.sleep(1.0)
    return "unfinished"


def render(records: list[dict]) -> str:
    lines = []
    for r in records:
        if r["measure"] in ("cli", "cli_whole"):
            how = (f"every distinct row scored: {r['scored_rows']:,}, a repeated row counted once"
                   if r["measure"] == "cli_whole" else f"{r['scored_rows']:,} rows scored")
            same = (f"; the same verdict as with every distinct row scored for {r['same_verdicts']} of "
                    f"{r['new_intents']}"
                    if "same_verdicts" in r else "")
            lines.append(f"- `intentvcs audit` of {r['rows']:,} rows ({r['new_intents']} new intents, {how}): "
                         f"**{r['seconds']:.1f} s** (target ≤ {r['target_seconds']:.0f} s, "
                         f"{'met' if r['met'] else 'missed'}), peak RSS {r['peak_rss_mb']:.0f} MB{same}.")
        else:
            q, d = r["quiet"], r["during_job"]
            lines.append(f"- /predict at {r['clients']} clients, {r['window_s']:.0f} s windows: p50 / p99 "
                         f"{q['p50_ms']:.1f} / {q['p99_ms']:.1f} ms without an audit, {d['p50_ms']:.1f} / "
                         f"{d['p99_ms']:.1f} ms while an audit job of {r['job_rows']:,} rows runs: p99 × "
                         f"**{r['p99_ratio']:.2f}** (target ≤ {r['target_p99_ratio']:.0f}×, "
                         f"{_verdict(r['met'])}); {q['errors'] + d['errors']} errors; the job "
                         f"{r['job_status']} in {r['job_seconds']:.0f} s"
                         + ("" if r.get("job_running_at_window_end", True) else
                            ", before the window ended (part of it without a job: not judged)") + ".")
    return "\n".join(lines) + "\n"


def _verdict(met: bool | None) -> str:
    return {True: "met", False: "missed", None: "not judged"}[met]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", default="runs/default/bundle")
    parser.add_argument("--rows", type=int, default=100_000, help="rows of the CLI audit (0: skip)")
    parser.add_argument("--job-rows", type=int, default=10_000, help="rows of the audit job (0: skip)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0, help="each /predict window")
    parser.add_argument("--compare-whole", action="store_true",
                        help="also audit the CLI batch with every row scored, and compare the verdicts")
    args = parser.parse_args(argv)
    records = []
    if args.rows:
        records.append(cli_run(args.bundle, args.rows))
        if args.compare_whole:
            whole = cli_run(args.bundle, args.rows, whole=True)
            records[0]["same_verdicts"] = sum(whole["verdicts"].get(intent) == verdict
                                              for intent, verdict in records[0]["verdicts"].items())
            records.append(whole)
        print(render(records), end="")
    if args.job_rows:
        records.append(predict_during_job(args.bundle, args.job_rows, args.clients, args.seconds))
        print(render(records[-1:]), end="")
    # A measurement not taken this time keeps its recorded figures (the command lists both runs).
    # A new CLI run also retires a recorded every-row comparison it did not repeat.
    done = {r["measure"] for r in records} | ({"cli", "cli_whole"} if args.rows else set())
    merged, command = keep_previous("audit_scale", records, lambda r: r["measure"] in done)
    merged.sort(key=lambda r: MEASURES.index(r["measure"]))
    write_results("audit_scale", merged, render(merged), command=command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
