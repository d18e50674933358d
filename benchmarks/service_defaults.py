"""Measure the service's settings side by side, to choose its defaults.

Each configuration starts the real BentoML service on the default bundle
(``intentvcs.cli.commands.serve.running``: loopback, its own process group), sends
``--idle-requests`` single requests one at a time, then runs ``--clients``
closed-loop clients for ``--duration`` seconds (``benchmarks/load_test.py``'s
client), and stops it. The settings are the service's environment variables
(``service/settings.py``):

* ``ORT's and BentoML's defaults``: access log on, ORT threads spinning,
  adaptive batches of up to 64 utterances, one worker;
* one change at a time from there: no ORT spinning, batches of at most 32 or
  16, no access log, two workers with one thread each;
* the changes kept (no access log, batches of 32), with one and with two workers, and with two workers
  of two threads each that do not spin (a lone request gets both cores; under load the four threads
  take turns instead of busy-waiting for each other).

Every configuration sets each of these settings explicitly, so the table
does not depend on what ``service/settings.py`` defaults to; the row equal to
those defaults is marked.

The engine's own batch-32 throughput (2 threads) is measured once at the end
as the ceiling. Configurations run one after another on the same host, in
``--rounds`` rounds, each in a new order (seeded), so that a drift in the
host's speed does not favour one; every figure is the median over rounds
(single runs of 20-30 s differ by up to 20 % on a shared 2-core host).

    python -m benchmarks.service_defaults --bundle runs/default/bundle

Writes ``benchmarks/results/service_defaults.json`` and ``.md``.
"""

from __future__ import annotations


import argparse
import asyncio
import os
import random
import sys

import numpy as np


from benchmarks.common import write_results
from benchmarks.load_test import engine_throughput, idle, load
from intentvcs.cli.commands.serve import running

# threads: ONNX Runtime threads per worker; None: one per worker when there are several, else the service's own.
BASE = {"workers": 1, "threads": None, "access_log": True, "ort_spin": True, "max_batch_size": 64}
COMBINED = {"access_log": False, "max_batch_size": 32}
# name -> the settings that differ from BASE
CONFIGS = {
    "ORT's and BentoML's defaults": {},
    "no ORT spinning": {"ort_spin": False},
    "max batch 32": {"max_batch_size": 32},
    "max batch 16": {"max_batch_size": 16},
    "no access log": {"access_log": False},
    "2 workers x 1 thread": {"workers": 2},
    "combined, 1 worker": COMBINED,
    "combined, 2 workers x 1 thread": {**COMBINED, "workers": 2},
    "combined, 2 workers x 2 threads, no spinning": {**COMBINED, "workers": 2, "threads": 2, "ort_spin": False},
}


def environment(settings: dict) -> dict[str, str]:
    """The service's environment variables for ``settings`` (workers are passed to ``running``)."""
    return {"INTENTVCS_ACCESS_LOG": "1" if settings["access_log"] else "0",
            "INTENTVCS_ORT_SPIN": "1" if settings["ort_spin"] else "0",
            "INTENTVCS_MAX_BATCH_SIZE": str(settings["max_batch_size"])}


def threads_per_worker(settings: dict) -> int | None:
    """The configuration's threads; else one ONNX Runtime thread per worker when there are several (no
    oversubscription), else the default."""
    if settings["threads"] is not None:
        return settings["threads"]
    return 1 if settings["workers"] > 1 else None


def is_default(settings: dict) -> bool:
    """Whether ``settings`` are what the service runs with when no variable is set (on CPU, this host)."""
    from intentvcs.service.settings import Settings
    from intentvcs.service.onnx_session import default_workers

    default = Settings()
    return (settings["workers"], settings["threads"], settings["access_log"], settings["ort_spin"],
            settings["max_batch_size"]) == (default_workers("cpu"), None, default.access_log, default.ort_spin,
                                            default.max_batch_size)


async def _measure(url: str, args: argparse.Namespace) -> dict:
    quiet = await idle(url, args.idle_requests)
    loaded = await load(url, args.clients, args.duration)
    return {"idle_p50_ms": quiet["p50_ms"], "idle_p95_ms": quiet["p95_ms"], "utt_per_s": loaded["utt_per_s"],
            "p50_ms": loaded["p50_ms"], "p95_ms": loaded["p95_ms"], "p99_ms": loaded["p99_ms"],
            "errors": quiet["errors"] + loaded["errors"], "requests": loaded["requests"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", required=True)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of load per configuration")
    parser.add_argument("--idle-requests", type=int, default=200)
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results-name", default="service_defaults",
                        help="benchmarks/results/<name>.json to write (default service_defaults)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    runs: dict[str, list[dict]] = {name: [] for name in args.configs}
    for _ in range(args.rounds):
        order = list(args.configs)
        rng.shuffle(order)
        for name in order:
            settings = {**BASE, **CONFIGS[name]}
            with running(args.bundle, workers=settings["workers"], threads=threads_per_worker(settings),
                         extra_env=environment(settings)) as url:
                runs[name].append(asyncio.run(_measure(url, args)))
            print(f"{name}: {runs[name][-1]}", file=sys.stderr)
    records = []
    for name, figures in runs.items():
        settings = {**BASE, **CONFIGS[name]}
        median = {key: float(np.median([f[key] for f in figures])) for key in figures[0] if key != "errors"}
        records.append({"config": name, **settings, "threads": threads_per_worker(settings),
                        "default": is_default(settings), "clients": args.clients, "rounds": len(figures),
                        **median, "errors": sum(f["errors"] for f in figures),
                        "utt_per_s_runs": [f["utt_per_s"] for f in figures]})
    ceiling = engine_throughput(args.bundle, threads=os.cpu_count())
    for record in records:
        record["vs_engine_batch32"] = round(record["utt_per_s"] / ceiling["utt_per_s"], 3)
    records.sort(key=lambda r: list(CONFIGS).index(r["config"]))
    lines = [f"Service at {args.clients} clients (single-utterance requests, {args.duration:.0f} s a run) and idle "
             f"latency, one configuration at a time; medians of {args.rounds} rounds; engine batch 32 alone: "
             f"{ceiling['utt_per_s']:.0f} utt/s.", "",
             "| configuration | utt/s | vs engine | p50 ms | p95 ms | p99 ms | idle p50 ms | errors |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['config']}{' (default)' if r['default'] else ''} | {r['utt_per_s']:.0f} | "
              f"{100 * r['vs_engine_batch32']:.0f}% | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['p99_ms']:.1f} | "
              f"{r['idle_p50_ms']:.1f} | {r['errors']} |" for r in records]
    markdown = "\n".join(lines) + "\n"
    print(markdown)
    path = write_results(args.results_name, records + [{"config": "engine", **ceiling}], markdown,
                         extra={"bundle": args.bundle})
    print(f"wrote {path}", file=sys.stderr)
    return 1 if any(r["errors"] for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
