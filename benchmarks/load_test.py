"""Loopback load test of the HTTP service: idle latency, throughput under concurrency, errors.

    python -m benchmarks.load_test --bundle runs/default/bundle            # starts and stops a server
    python -m benchmarks.load_test --url http://127.0.0.1:3000 --duration 10

Measures, in this order:
1. ``idle``: single-utterance requests sent one at a time (p50/p95/p99);
2. ``load``: N closed-loop clients, each sending single-utterance requests
   back to back for ``--duration`` seconds, then stopping by themselves;
3. ``engine``: the same bundle's ``Engine.predict`` on batches of 32 in this
   process (with ``--bundle`` only; 1 thread and one per core), the ceiling
   the service's throughput is compared with (``vs_engine_batch32``).
Writes ``benchmarks/results/service.json`` (``command``, ``machine``, ``date``,
``records``). Client and server share the machine's cores, as they would on
one host; the client is aiohttp (asyncio) to keep its own share small.
"""

from __future__ import annotations


import argparse
import asyncio
import math
import os
import random
import sys
import time
from collections.abc import Sequence

import aiohttp
import numpy as np


from benchmarks.common import machine as common_machine
from benchmarks.common import write_results
from intentvcs.cli.commands.serve import running

# Assistant-style utterances of varied length; a few are out of scope on purpose.
UTTERANCES = [
    "play some jazz music",
    "add this song to my workout playlist",
    "book a table for two people tonight at the italian restaurant",
    "will it rain in paris tomorrow",
    "what's the weather forecast for the weekend",
    "rate this book five out of five stars",
    "find the movie schedule at the cinema near me",
    "set an alarm for 7 am",
    "wake me up at six thirty tomorrow morning please",
    "turn off the lights in the living room",
    "transfer 50 dollars from checking to savings",
    "what is my account balance",
    "order a large pepperoni pizza",
    "call mom",
    "send a text message to alex saying i'm running late",
    "i need a cheap hotel in the city centre and a taxi from the station",
    "how do i reset my password",
    "um so like can you play the new album by that artist",
    "what is the meaning of life",
    "tell me a joke about penguins",
    "hi",
    "thanks",
    "¿qué tiempo hará mañana en madrid?",
    "book a flight from london to tokyo next friday 🛫",
]


def percentiles(latencies_s: list[float]) -> dict[str, float]:
    """p50/p95/p99 in milliseconds."""
    p50, p95, p99 = np.percentile(np.asarray(latencies_s) * 1000.0, [50, 95, 99])
    return {"p50_ms": round(float(p50), 2), "p95_ms": round(float(p95), 2), "p99_ms": round(float(p99), 2)}


async def _post(session: aiohttp.ClientSession, url: str, text: str) -> tuple[float, bool]:
    """The request's latency and whether it was answered (200); a refusal, a broken connection and a
    request past the session's timeout (``asyncio.TimeoutError``, not a ``ClientError``) are errors."""
    start = time.perf_counter()
    try:
        async with session.post(f"{url}/predict", json={"text": text}) as response:
            await response.read()
            ok = response.status == 200
    except (aiohttp.ClientError, asyncio.TimeoutError):
        ok = False
    return time.perf_counter() - start, ok


async def idle(url: str, requests: int, warmup: int = 20, texts: Sequence[str] = UTTERANCES) -> dict:
    """One request at a time: the latency a lone user sees. Texts are drawn from ``texts``."""
    rng = random.Random(0)
    async with aiohttp.ClientSession() as session:
        for _ in range(warmup):
            await _post(session, url, rng.choice(texts))
        results = [await _post(session, url, rng.choice(texts)) for _ in range(requests)]
    latencies = [latency for latency, ok in results if ok]  # a fast refusal is no answer
    _some_answered(url, latencies, requests)
    return {"mode": "idle", "concurrency": 1, "requests": requests,
            "errors": sum(not ok for _, ok in results), **percentiles(latencies)}


async def load(url: str, concurrency: int, duration_s: float, texts: Sequence[str] = UTTERANCES) -> dict:
    """``concurrency`` closed-loop clients for ``duration_s`` seconds, one utterance (from ``texts``) per request.

    Throughput and latency count answered requests only (a fast 503 would otherwise raise both); the
    errors are counted beside them.
    """
    return (await load_run(url, concurrency, duration_s, texts))[0]


async def load_run(url: str, concurrency: int, duration_s: float,
                   texts: Sequence[str] = UTTERANCES) -> tuple[dict, list[float]]:
    """``load``'s record and the latencies (seconds) of the answered requests it was computed from: a
    caller pooling several runs takes its percentiles over all their requests, not a median of each
    run's own."""
    deadline = time.perf_counter() + duration_s
    latencies: list[float] = []
    errors = 0

    async def client(seed: int, session: aiohttp.ClientSession) -> None:
        nonlocal errors
        rng = random.Random(seed)
        while time.perf_counter() < deadline:
            latency, ok = await _post(session, url, rng.choice(texts))
            if ok:
                latencies.append(latency)
            else:
                errors += 1

    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        start, cpu_start = time.perf_counter(), time.process_time()
        # The clients stop at the deadline; the outer timeout only guards a hung server.
        await asyncio.wait_for(asyncio.gather(*(client(i, session) for i in range(concurrency))),
                               timeout=duration_s + 90)
        elapsed, client_cpu = time.perf_counter() - start, time.process_time() - cpu_start
    _some_answered(url, latencies, len(latencies) + errors)
    # The client shares the host's cores with the server: what it used is what the server could not.
    return {"mode": "load", "concurrency": concurrency, "duration_s": round(elapsed, 1),
            "requests": len(latencies) + errors, "errors": errors,
            "utt_per_s": round(len(latencies) / elapsed, 1), **percentiles(latencies),
            "client_cores": round(client_cpu / elapsed, 3),
            "client_cpu_ms_per_request": round(1000 * client_cpu / (len(latencies) + errors), 3)}, latencies


def _some_answered(url: str, latencies: list[float], requests: int) -> None:
    """A run in which nothing was answered measured no service: it fails, naming why, rather than
    returning figures of nothing."""
    if not latencies:
        raise RuntimeError(f"{url}: none of the {requests} requests was answered (is the server up?)")


def wrapped_batches(texts: Sequence[str], batch_size: int, count: int) -> list[list[str]]:
    """``count`` full batches of consecutive ``texts``, wrapping round them."""
    return [[texts[(b * batch_size + i) % len(texts)] for i in range(batch_size)] for b in range(count)]


def cycled_batches(texts: Sequence[str], batch_size: int) -> list[list[str]]:
    """Full batches of ``texts`` taken in turn, wrapping round, just enough of them that every text
    appears equally often: the mix the load clients send (each draws uniformly from ``texts``)."""
    return wrapped_batches(texts, batch_size, len(texts) // math.gcd(len(texts), batch_size))


def engine_throughput(bundle: str, batch_size: int = 32, seconds: float = 10.0, threads: int | None = None,
                      texts: Sequence[str] = UTTERANCES) -> dict:
    """Utterances per second of ``Engine.predict`` on full batches, no HTTP.

    The batches cover ``texts`` (``cycled_batches``) in whole passes, each text as often as the others, as
    the load clients send them; each call ranks the service's default ``top_k`` intents, as a request that
    names none is answered."""
    from intentvcs.service.engine import Engine
    from intentvcs.service.settings import Limits

    top_k = Limits.from_env().default_top_k
    engine = Engine(bundle, provider="cpu", threads=threads)
    plan = cycled_batches(list(texts), batch_size)
    engine.predict(plan[0], top_k=top_k)  # warm-up
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for batch in plan:
            engine.predict(batch, top_k=top_k)
        done += batch_size * len(plan)
    elapsed = time.perf_counter() - start
    return {"mode": "engine", "batch_size": batch_size, "threads": engine.info["threads"],
            "duration_s": round(elapsed, 1), "utt_per_s": round(done / elapsed, 1)}


def machine() -> dict:
    # Other work on the host skews every figure; the load average before the run says how much there was.
    return {**common_machine(), "loadavg_1m_before": round(os.getloadavg()[0], 2)}


async def measure(url: str, args: argparse.Namespace) -> list[dict]:
    records = [await idle(url, args.idle_requests)]
    print(f"idle: {records[-1]}", file=sys.stderr)
    for concurrency in args.concurrency:
        records.append(await load(url, concurrency, args.duration))
        print(f"load: {records[-1]}", file=sys.stderr)
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--bundle", help="start a server on this bundle (loopback, free port) and stop it after")
    target.add_argument("--url", help="an already running service, e.g. http://127.0.0.1:3000")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[32])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds per concurrency level")
    parser.add_argument("--idle-requests", type=int, default=300)
    parser.add_argument("--workers", type=int, help="worker processes (default: the service's own default)")
    parser.add_argument("--threads", type=int, help="ONNX Runtime intra-op threads per worker")
    args = parser.parse_args(argv)
    host = machine()
    if args.url:
        records = asyncio.run(measure(args.url.rstrip("/"), args))
    else:
        with running(args.bundle, workers=args.workers, threads=args.threads) as url:
            records = asyncio.run(measure(url, args))
        # The ceiling is the engine at its best thread count on this host, whatever the service uses.
        engine = [engine_throughput(args.bundle, threads=n) for n in sorted({1, host["cores"]})]
        print(f"engine: {engine}", file=sys.stderr)
        best = max(record["utt_per_s"] for record in engine)
        for record in records:
            if record["mode"] == "load":
                record["vs_engine_batch32"] = round(record["utt_per_s"] / best, 3)
        records += engine
    path = write_results("service", records, render(records), extra={"bundle": args.bundle or args.url,
                                                                      "loadavg_1m_before": host["loadavg_1m_before"]})
    print(f"wrote {path}", file=sys.stderr)
    return 1 if any(record.get("errors") for record in records) else 0


def render(records: list[dict]) -> str:
    """Markdown table: idle latency, loaded throughput vs the engine's batch-32 ceiling."""
    lines = ["| mode | concurrency | requests | errors | utt/s | p50 ms | p95 ms | p99 ms | vs engine batch 32 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        if r["mode"] == "engine":
            continue
        ratio = r.get("vs_engine_batch32")
        lines.append(f"| {r['mode']} | {r['concurrency']} | {r['requests']} | {r['errors']} | "
                     f"{r.get('utt_per_s', '–')} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['p99_ms']:.1f} | "
                     f"{'–' if ratio is None else f'{100 * ratio:.0f}%'} |")
    engines = ", ".join(f"{r['utt_per_s']:.0f} utt/s with {r['threads']} thread(s)" for r in records
                        if r["mode"] == "engine")
    if engines:
        lines += ["", f"Engine alone (`Engine.predict`, batches of 32): {engines}; the best is the ceiling."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
