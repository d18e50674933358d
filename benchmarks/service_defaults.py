"""Measure the service's settings side by side, to choose its defaults (issue "Performance").

Each configuration starts the real BentoML service on the default bundle
(``intentvcs.commands.serve.running``: loopback, its own process group), sends
``--idle-requests`` single requests one at a time, then runs ``--clients``
closed-loop clients for ``--duration`` seconds (``benchmarks/load_test.py``'s
client), and stops it. The settings are the service's environment variables
(``service/config.py``):

* ``baseline``: the defaults as they stand;
* one variant per setting: no ORT spinning, adaptive batches of at most 32 or
  16 utterances, no access log, two workers with one thread each.

The engine's own batch-32 throughput (2 threads) is measured once at the end
as the ceiling. Configurations run one after another on the same host; the
order is shuffled by ``--seed`` so a slow drift does not favour one.

    python benchmarks/service_defaults.py --bundle runs/default/bundle

Writes ``benchmarks/results/service_defaults.json`` and ``.md``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: see intentvcs/cli.py

import argparse
import asyncio
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import write_results  # noqa: E402
from benchmarks.load_test import engine_throughput, idle, load  # noqa: E402
from intentvcs.commands.serve import running  # noqa: E402

# name -> (workers, threads per worker, extra environment)
CONFIGS = {
    "baseline": (1, None, {}),
    "no ORT spinning": (1, None, {"INTENTVCS_ORT_SPIN": "0"}),
    "max batch 32": (1, None, {"INTENTVCS_MAX_BATCH_SIZE": "32"}),
    "max batch 16": (1, None, {"INTENTVCS_MAX_BATCH_SIZE": "16"}),
    "no access log": (1, None, {"INTENTVCS_ACCESS_LOG": "0"}),
    "2 workers x 1 thread": (2, 1, {}),
}


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
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    order = list(args.configs)
    random.Random(args.seed).shuffle(order)
    records = []
    for name in order:
        workers, threads, env = CONFIGS[name]
        with running(args.bundle, workers=workers, threads=threads, extra_env=env) as url:
            figures = asyncio.run(_measure(url, args))
        records.append({"config": name, "workers": workers, "threads": threads, "env": env,
                        "clients": args.clients, **figures})
        print(f"{name}: {figures}", file=sys.stderr)
    ceiling = engine_throughput(args.bundle, threads=os.cpu_count())
    for record in records:
        record["vs_engine_batch32"] = round(record["utt_per_s"] / ceiling["utt_per_s"], 3)
    records.sort(key=lambda r: list(CONFIGS).index(r["config"]))
    lines = [f"Service at {args.clients} clients ({args.duration:.0f} s each, single-utterance requests) and idle "
             f"latency, one configuration at a time; engine batch 32 alone: {ceiling['utt_per_s']:.0f} utt/s.", "",
             "| configuration | utt/s | vs engine | p50 ms | p95 ms | p99 ms | idle p50 ms | errors |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['config']} | {r['utt_per_s']:.0f} | {100 * r['vs_engine_batch32']:.0f}% | {r['p50_ms']:.1f} | "
              f"{r['p95_ms']:.1f} | {r['p99_ms']:.1f} | {r['idle_p50_ms']:.1f} | {r['errors']} |" for r in records]
    markdown = "\n".join(lines) + "\n"
    print(markdown)
    path = write_results("service_defaults", records + [{"config": "engine", **ceiling}], markdown,
                         extra={"bundle": args.bundle})
    print(f"wrote {path}", file=sys.stderr)
    return 1 if any(r["errors"] for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
