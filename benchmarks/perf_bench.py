"""How fast a bundle serves, against PyTorch, the HTTP service and the hardware's limit.

    python -m benchmarks.perf_bench --bundle BUNDLE --checkpoint CHECKPOINT
    python -m benchmarks.perf_bench --bundle BUNDLE --checkpoint CHECKPOINT --skip-service --repeats 3
    python -m benchmarks.perf_bench --gpu-only --bundle BUNDLE --checkpoint CHECKPOINT   # on a GPU machine

Writes ``benchmarks/results/perf.json`` and ``perf.md`` (``--results-dir`` to
write elsewhere). Run it on a quiet machine: other work on the cores skews
every figure.

Everything is measured on one model (the bundle, and the checkpoint it was
exported from) and one set of real utterances (a canonical JSONL file or the
SNIPS test split), in one invocation, so ratios compare like with like:

- ``engine``: ``Engine.infer`` (the graph's outputs) with the fp32 and, when the
  bundle has one, the int8 graph, against what users would run instead on the
  checkpoint (``benchmarks.baselines``: a plain transformers forward, and
  sentence-transformers' ONNX backends) with as many torch threads as ONNX
  Runtime intra-op threads; and ``Engine.predict`` on each graph (``-answers``:
  the decided answers the service returns); calls of 1, 8, 32, 128 utterances
  (batch 1 is one text per call), graph runs of at most ``--max-batch`` texts
  (the engine's default, as served). They do not pad alike: the transformers
  forward pads each run of a call as given to its longest text (what a user
  writes), sentence-transformers sorts a call by length and pads fixed runs,
  and the engine cuts a call into runs of similar length
  (``intentvcs.core.length_buckets``), part of its speed-up (on the SNIPS
  test calls of 32: 9,064 padded tokens against the transformers loop's 15,456).
- ``service``: ``bentoml serve`` on loopback (``intentvcs.cli.commands.serve.running``),
  driven by ``benchmarks.load_test``: idle single requests, then closed-loop
  clients at each concurrency for a fixed time; start-up time and the
  resident memory of each worker. Its throughput at the largest concurrency
  is compared with the engine's answers on the graph it serves (the work it
  does per request besides HTTP), and with that graph's outputs alone, the
  two measured in turns (``paired_rounds``: ``--repeats`` rounds, each a
  quarter of ``--service-seconds`` per side).
- ``gpu``: the engine on the CUDA provider (fp32 and int8 graphs; IO binding,
  runs of ``GPU_MAX_BATCH`` overlapped with host work, as it serves) against
  PyTorch on CUDA (one forward per call) at 1 to 256 utterances per call,
  and its answers against the CPU engine's, when the CUDA provider answers;
  else the GPU records of the perf.json already there (so a CPU run keeps
  what a GPU machine measured), or one record saying why not. ``--gpu-only``
  measures just this part and merges it into an existing perf.json
  (``scripts/gpu_check.sh`` runs it).
- ``limit``: FLOPs per utterance from the encoder config and the data's token
  counts, numpy's fp32 matmul rate on the same threads (a reference, not a
  ceiling: ONNX Runtime's fp32 kernels pass it) and the CPU's nominal AVX2
  peak (AVX-512 CPUs: up to twice that), each in utterances per second.
- ``target``: each goal of ``TARGETS`` beside the measured figure.

Each figure is the median over ``--repeats`` runs; the backends take turns
within every repeat, so a change in the machine's load during the benchmark
touches all of them alike, and each speed-up is the median of the per-repeat
ratios. All records are flat dicts (``component`` first).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import re
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from benchmarks import load_test
from benchmarks.common import RESULTS, ROOT, SHARED_DATA, command_line, keep_previous, machine, write_results
from intentvcs.core.outputs import GraphOutputs

BATCH_SIZES = (1, 8, 32, 128)
GPU_BATCH_SIZES = (1, 8, 32, 128, 256)
# The engine's graph runs on CUDA: a call of 256 is 4 runs, which the engine overlaps with
# its host work (``OnnxSession._runs``).
GPU_MAX_BATCH = 64
CONCURRENCY = (1, 8, 32)
# A timed run covers the data once, and at least this many batches so that a
# per-batch p50 exists at large batch sizes.
MIN_BATCHES = 8
# Untimed batches before every timed run: first-shape costs (arena growth,
# kernel selection) and the previous backend's spinning thread pool stay out.
LEAD_IN_BATCHES = 2
IDLE_REQUESTS = 200
MATMUL_SIZE = 2048
AVX2_FLOP_PER_CYCLE = 32  # two 256-bit FMA units x 8 fp32 lanes x 2 FLOP (multiply + add)

# A backend's ``Engine.predict`` twin: the decided answers (decision, request parts, answer dicts) on top of
# the graph's outputs; what the service runs per request, hence what it is compared with.
ANSWERS = "-answers"
# Which backend each speed-up field compares with (the same batch size, the same repeats).
# The CPU reference is what a user would write with transformers (benchmarks.baselines).
SPEEDUPS = {
    "onnx-fp32": {"speedup_vs_transformers": "transformers", "speedup_vs_sorted": "transformers-sorted"},
    "onnx-int8": {"speedup_vs_transformers": "transformers", "speedup_vs_sorted": "transformers-sorted",
                  "speedup_vs_fp32": "onnx-fp32"},
    "transformers-sorted": {"speedup_vs_transformers": "transformers"},
    "st-onnx": {"speedup_vs_transformers": "transformers"},
    "st-onnx-int8": {"speedup_vs_transformers": "transformers", "speedup_vs_fp32": "st-onnx"},
    "onnx-cuda": {"speedup_vs_torch": "torch-cuda"},
    "onnx-cuda-int8": {"speedup_vs_torch": "torch-cuda", "speedup_vs_fp32": "onnx-cuda"},
}


class Target(NamedTuple):
    """A performance goal: ``field`` of the record matching ``where`` against ``bound``."""

    name: str
    where: dict
    field: str
    bound: float
    at_least: bool
    goal: str


def _engine(backend: str, batch: int) -> dict:
    return {"component": "engine", "backend": backend, "batch_size": batch}


SERVICE_32 = {"component": "service", "mode": "load", "concurrency": 32}
PAIRED_32 = {"component": "service", "mode": "paired", "concurrency": 32}
TARGETS = (
    Target("engine int8 vs transformers, batch 32", _engine("onnx-int8", 32), "speedup_vs_transformers", 3.0, True,
           "≥ 3.0×"),
    Target("engine int8 vs transformers, batch 1", _engine("onnx-int8", 1), "speedup_vs_transformers", 5.0, True,
           "≥ 5×"),
    Target("engine fp32 vs transformers, batch 32", _engine("onnx-fp32", 32), "speedup_vs_transformers", 1.3, True,
           "≥ 1.3×"),
    Target("service at 32 clients vs its engine's answers at batch 32 (in turns)", PAIRED_32, "vs_engine_batch32", 0.85,
           True, "≥ 0.85"),
    Target("service at 32 clients, errors", SERVICE_32, "errors", 0, False, "0"),
    Target("service at 32 clients, p99 / p50", SERVICE_32, "p99_over_p50", 10, False, "≤ 10"),
    Target("service idle single-request p50", {"component": "service", "mode": "idle"}, "p50_ms", 5, False, "≤ 5 ms"),
    Target("GPU ONNX fp32, batch 256", {"component": "gpu", "backend": "onnx-cuda", "batch_size": 256},
           "utt_per_s", 20000, True, "≥ 20,000 utt/s"),
    Target("GPU answers as the CPU's (label sets, OOS verdicts, entities)", {"component": "gpu", "check": "parity"},
           "decision_mismatches", 0, False, "0 differ"),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.set_defaults(snips=str(SHARED_DATA / "snips"))  # --data, when given, takes precedence
    parser.add_argument("--results-dir", type=Path, default=RESULTS,
                        help=f"where perf.json and perf.md go (default {RESULTS.relative_to(ROOT)})")
    parser.add_argument("--gpu-only", action="store_true",
                        help="measure only the GPU path and merge it into the perf.json already in --results-dir "
                             "(its CPU figures, settings and machine kept): for a GPU machine lent for a while")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        path = merge_gpu(args) if args.gpu_only else write_all(args)
    except (ValueError, FileNotFoundError) as exc:
        print(f"perf_bench: error: {exc}", file=sys.stderr)
        return 2
    except NotMeasured as exc:
        print(f"perf_bench: error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {path}", file=sys.stderr)
    return 0


def write_all(args: argparse.Namespace) -> Path:
    """Measure everything ``args`` asks for and write perf.json and perf.md.

    Where no GPU answers here, the GPU figures of the perf.json already in
    ``--results-dir`` (measured by ``--gpu-only``, or by a whole run, on a GPU
    machine) are kept with the command that measured them: a CPU run must not
    erase them.
    """
    settings, records = measure(args)
    records, gpu_command = with_earlier_gpu(records, args.results_dir)
    records += target_records(records)
    this = command_line()
    if gpu_command is None:
        command = this
    elif "--gpu-only" in gpu_command:  # it merges into what this run writes: it comes after
        command = f"{this} && {gpu_command}"
    else:  # a whole run on a GPU machine measured them: it comes first, then this run replaces its CPU figures
        command = " && ".join([c for c in gpu_command.split(" && ") if c != this] + [this])
    return write_results("perf", records, markdown(settings, records), extra=settings, command=command,
                         directory=args.results_dir)


def with_earlier_gpu(records: list[dict], directory: Path) -> tuple[list[dict], str | None]:
    """``records`` with a skipped GPU part replaced by the measured GPU records of ``directory``'s
    perf.json, and the command that measured them: its ``--gpu-only`` command, else (a whole run on a GPU
    machine measured them) its command as a whole; ``records`` as they are (and None) when this run
    measured the GPU or there is nothing earlier to keep."""
    path = directory / "perf.json"
    if not path.exists() or not any(r["component"] == "gpu" and "skipped" in r for r in records):
        return records, None
    earlier = json.loads(path.read_text(encoding="utf-8"))
    measured = [r for r in earlier["records"] if r["component"] == "gpu" and "skipped" not in r]
    if not measured:
        return records, None
    command = next((c for c in earlier["command"].split(" && ") if "--gpu-only" in c), earlier["command"])
    return [r for r in records if r["component"] != "gpu"] + measured, command


class NotMeasured(RuntimeError):
    """What a run was asked to measure could not be measured here: nothing is written."""


def merge_gpu(args: argparse.Namespace) -> Path:
    """``--gpu-only``: the GPU records (``gpu_records``) in place of those of the perf.json in
    ``--results-dir``, its targets re-checked; its other records, settings and machine are kept.

    Raises ``NotMeasured``, leaving the file as it was, when the GPU part was skipped (no CUDA provider,
    or an engine that cannot start CUDA): measuring the GPU is all this run is for, and a skip written
    over them would erase the GPU figures measured before.
    """
    path = args.results_dir / "perf.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: --gpu-only adds to an existing perf.json; run the full benchmark first")
    previous = json.loads(path.read_text(encoding="utf-8"))
    from intentvcs.service.onnx_session import default_threads

    threads = default_threads() if args.threads is None else args.threads
    records = gpu_records(args.bundle, args.checkpoint, load_texts(args.data, args.snips), args.repeats, threads)
    skipped = [r["skipped"] for r in records if "skipped" in r]
    if skipped:
        raise NotMeasured(f"--gpu-only measured nothing ({'; '.join(skipped)}); {path} is left as it was")
    merged, command = keep_previous("perf", records, lambda r: r["component"] in ("gpu", "target"),
                                    directory=args.results_dir, host=previous["machine"])
    # Every GPU record is measured again, so an earlier --gpu-only command no longer made any of them.
    command = " && ".join(c for c in command.split(" && ") if "--gpu-only" not in c or c == command_line())
    merged += target_records(merged)
    settings = {key: value for key, value in previous.items() if key not in ("command", "machine", "date", "records")}
    return write_results("perf", merged, markdown(settings, merged), extra=settings, command=command,
                         directory=args.results_dir, host=previous["machine"])


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The measurement options."""
    p.add_argument("--bundle", required=True, metavar="DIR", help="bundle directory (intentvcs export)")
    p.add_argument("--checkpoint", metavar="DIR",
                   help="the checkpoint the bundle was exported from: PyTorch baseline and FLOP count "
                        "(without it both are left out)")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--data", metavar="FILE.jsonl", help="canonical JSONL whose texts are the workload")
    source.add_argument("--snips", metavar="DIR", help="SNIPS folder; its test split's seq.in is the workload")
    p.add_argument("--batch-sizes", type=int, nargs="+", default=list(BATCH_SIZES), metavar="N")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per figure; figures are medians (default 5)")
    p.add_argument("--max-batch", type=int, metavar="N", help="CPU: texts per graph run, engine and PyTorch "
                   "alike (default: the engine's, 32)")
    p.add_argument("--threads", type=int, help="ONNX Runtime intra-op and torch threads (default: every core, "
                   "what the engine picks outside the service)")
    p.add_argument("--concurrency", type=int, nargs="+", default=list(CONCURRENCY), metavar="N",
                   help="closed-loop HTTP clients per service run")
    p.add_argument("--service-seconds", type=float, default=20.0, help="seconds per concurrency level")
    p.add_argument("--workers", type=int, help="service worker processes (default: the service's own default)")
    p.add_argument("--skip-service", action="store_true", help="leave out the HTTP service")


def measure(args: argparse.Namespace) -> tuple[dict, list[dict]]:
    """Run every measurement the options ask for; return ``(settings, records)``."""
    from intentvcs.service.onnx_session import default_threads
    from intentvcs.service.settings import DEFAULT_MAX_BATCH

    max_batch = DEFAULT_MAX_BATCH if args.max_batch is None else args.max_batch
    if min(args.repeats, max_batch, *args.batch_sizes) < 1:
        raise ValueError("--repeats, --max-batch and --batch-sizes must be >= 1")
    texts = load_texts(args.data, args.snips)
    threads = default_threads() if args.threads is None else args.threads
    settings = {"bundle": str(Path(args.bundle).resolve()), "checkpoint": args.checkpoint,
                "data": args.data or args.snips, "utterances": len(texts), "threads": threads,
                "max_batch": max_batch, "repeats": args.repeats}
    records = engine_records(args.bundle, args.checkpoint, texts, args.batch_sizes, args.repeats, threads,
                             max_batch)
    records.append(limit_record(args.bundle, args.checkpoint, texts, threads, records))
    if not args.skip_service:
        records += service_records(args.bundle, texts, args.concurrency, args.service_seconds,
                                   args.workers, args.threads, threads, max_batch, args.repeats)
    records += gpu_records(args.bundle, args.checkpoint, texts, args.repeats, threads)
    return settings, records


def load_texts(data: str | None, snips: str | None) -> list[str]:
    """The workload: the texts of a canonical JSONL file, or of the SNIPS test split."""
    if data:
        from intentvcs.core.dataio import read_jsonl

        texts = [example.text for example in read_jsonl(data)]
    elif snips:
        from intentvcs.training.loaders import load

        texts = [example.text for example in load("snips", snips, "test")]
    else:
        raise ValueError("give the utterances to measure on: --data FILE.jsonl or --snips DIR")
    if not texts:
        raise ValueError(f"{data or snips}: no utterances")
    return texts


# ------------------------------------------------------------------ timing

@dataclass(frozen=True)
class Run:
    """One timed pass: ``texts`` utterances in ``seconds`` of wall time; ``latencies`` per batch, in seconds."""

    texts: int
    seconds: float
    latencies: list[float]


def batches(texts: Sequence[str], batch_size: int, min_batches: int = MIN_BATCHES) -> list[list[str]]:
    """Full batches of consecutive utterances, wrapping round the data.

    Enough batches to cover the data once, and at least ``min_batches``.
    """
    return load_test.wrapped_batches(texts, batch_size, max(math.ceil(len(texts) / batch_size), min_batches))


def timed_run(infer: Callable[[list[str]], object], plan: list[list[str]], min_seconds: float = 0.0) -> Run:
    """Time ``infer`` on each batch of ``plan``, after ``LEAD_IN_BATCHES`` untimed ones; the plan again
    until at least ``min_seconds`` have passed."""
    for batch in plan[:LEAD_IN_BATCHES]:
        infer(batch)
    latencies = []
    texts = 0
    start = time.perf_counter()
    while not latencies or time.perf_counter() - start < min_seconds:
        for batch in plan:
            began = time.perf_counter()
            infer(batch)
            latencies.append(time.perf_counter() - began)
        texts += sum(map(len, plan))
    return Run(texts, time.perf_counter() - start, latencies)


def percentile_ms(latencies_s: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (linear interpolation) of latencies given in seconds, in milliseconds."""
    return float(np.percentile(np.asarray(latencies_s, dtype=np.float64), q)) * 1000.0


def summarize(runs: Sequence[Run]) -> dict:
    """Median throughput and median per-batch p50 latency over ``runs``.

    ``spread_pct`` is (max - min) / median of the runs' throughputs, in percent.
    """
    rates = [run.texts / run.seconds for run in runs]
    median = statistics.median(rates)
    return {"utt_per_s": round(median, 1),
            "p50_ms": round(statistics.median(percentile_ms(run.latencies, 50) for run in runs), 3),
            "spread_pct": round(100 * (max(rates) - min(rates)) / median, 1), "runs": len(runs)}


def paired_speedup(runs: Sequence[Run], reference: Sequence[Run]) -> float:
    """Median over repeats of the throughput ratio ``runs[i] / reference[i]`` (runs taken side by side)."""
    ratios = [(a.texts / a.seconds) / (b.texts / b.seconds) for a, b in zip(runs, reference)]
    return round(statistics.median(ratios), 3)


def interleaved_runs(backends: dict[str, Callable], texts: Sequence[str], batch_sizes: Sequence[int],
                     repeats: int) -> dict[tuple[str, int], list[Run]]:
    """``repeats`` timed runs per (backend, batch size); within each repeat every backend takes its turn."""
    plans = {size: batches(texts, size) for size in batch_sizes}
    runs: dict[tuple[str, int], list[Run]] = {(name, size): [] for name in backends for size in batch_sizes}
    for _ in range(repeats):
        for size in batch_sizes:
            for name, infer in backends.items():
                runs[name, size].append(timed_run(infer, plans[size]))
    return runs


def speed_records(component: str, runs: dict[tuple[str, int], list[Run]], **common) -> list[dict]:
    """One record per (backend, batch size), with the ``SPEEDUPS`` measured in the same repeats."""
    records = []
    for (backend, size), backend_runs in runs.items():
        record = {"component": component, "backend": backend, "batch_size": size, **common, **summarize(backend_runs)}
        for field, reference in SPEEDUPS.get(backend, {}).items():
            if (reference, size) in runs:
                record[field] = paired_speedup(backend_runs, runs[reference, size])
        records.append(record)
    return records


# ------------------------------------------------------------------ backends

def engine_records(bundle: str, checkpoint: str | None, texts: Sequence[str], batch_sizes: Sequence[int],
                   repeats: int, threads: int, max_batch: int) -> list[dict]:
    """CPU throughput and latency of the engine (fp32, int8) and, with the checkpoint, of the baselines
    users would run instead (``benchmarks.baselines``), at each batch size."""
    from benchmarks.baselines import SentenceTransformersBaselines, transformers_backend
    from intentvcs.core.manifest import INT8_MODEL_FILE
    from intentvcs.service.engine import Engine

    fp32 = Engine(bundle, provider="cpu", threads=threads, max_batch=max_batch, quantized="off")
    manifest = fp32.bundle.manifest
    engines = {"onnx-fp32": fp32}
    if INT8_MODEL_FILE in manifest["files"]:
        engines["onnx-int8"] = Engine(bundle, provider="cpu", threads=threads, max_batch=max_batch, quantized="on")
    # The graph's outputs (what the baselines compute too), then the decided answers the service returns.
    backends = {name: engine.infer for name, engine in engines.items()}
    backends.update({name + ANSWERS: engine.predict for name, engine in engines.items()})
    sentence_transformers = None
    if checkpoint:
        check_checkpoint(checkpoint, manifest)
        backends["transformers"] = transformers_backend(checkpoint, manifest["max_length"], threads, max_batch)
        backends["transformers-sorted"] = transformers_backend(checkpoint, manifest["max_length"], threads,
                                                               max_batch, sort_by_length=True)
        sentence_transformers = SentenceTransformersBaselines(checkpoint, manifest["max_length"], threads,
                                                              max_batch)
    try:
        if sentence_transformers:
            backends.update(sentence_transformers.backends())
        runs = interleaved_runs(backends, texts, batch_sizes, repeats)
    finally:
        if sentence_transformers:
            sentence_transformers.close()
    return speed_records("engine", runs, device="cpu", threads=threads, max_batch=max_batch)


def check_checkpoint(checkpoint: str, manifest: dict) -> None:
    """Raise ``ValueError`` unless ``checkpoint`` is the model of the bundle whose ``manifest`` is given:
    same labels, max_length and data fingerprint."""
    from intentvcs.training.checkpoint import read_checkpoint_meta

    meta = read_checkpoint_meta(checkpoint)
    for key in ("labels", "max_length", "data_fingerprint"):
        if meta[key] != manifest[key]:
            raise ValueError(f"{checkpoint} is not the checkpoint the bundle was exported from: {key} differs")


def torch_device_backend(checkpoint: str, manifest: dict, threads: int, max_batch: int, device: str) -> Callable:
    """``TorchPredictor``'s model of ``checkpoint`` on ``device`` (``device_infer``), for the GPU comparison."""
    import torch

    from intentvcs.training.predict import TorchPredictor

    check_checkpoint(checkpoint, manifest)
    torch.set_num_threads(threads)
    return device_infer(TorchPredictor(checkpoint, batch_size=max_batch), device)


def device_infer(predictor, device: str) -> Callable[[list[str]], GraphOutputs]:
    """``predictor``'s model on ``device``, one batch per call: tokenise and pad on the host, copy, run, copy back.

    ``intentvcs.training.predict.infer`` builds host tensors only; this is its loop for
    one batch (callers pass at most its ``batch_size`` texts) with the inputs
    moved to the device. Copying the outputs back waits for the GPU, so the
    caller's clock sees the whole computation.
    """
    import torch

    from intentvcs.training.batching import collate, encode

    model = predictor.model.to(device)

    @torch.inference_mode()
    def infer(texts: list[str]) -> GraphOutputs:
        encoded = encode(predictor.tokenizer, texts, predictor.max_length)
        batch = collate(encoded, range(len(texts)), predictor.tokenizer.pad_token_id)
        outputs = model(*(batch[name].to(device) for name in ("input_ids", "attention_mask", "token_type_ids")))
        return GraphOutputs(*(tensor.cpu().numpy() for tensor in outputs[:3]))

    return infer


def gpu_unavailable() -> str | None:
    """Why the GPU comparison cannot run here, or None when it can (torch is not imported: the engine
    must start CUDA on its own, as it does in the torch-free service)."""
    import onnxruntime as ort

    from intentvcs.service.onnx_session import CUDA

    if CUDA not in ort.get_available_providers():
        return f"onnxruntime {ort.__version__} offers no {CUDA} (providers: {ort.get_available_providers()})"
    return None


def gpu_records(bundle: str, checkpoint: str | None, texts: Sequence[str], repeats: int, threads: int) -> list[dict]:
    """The CUDA provider against PyTorch on CUDA at ``GPU_BATCH_SIZES`` and its parity with the CPU, or why
    it was skipped."""
    reason = gpu_unavailable()
    if reason:
        return [{"component": "gpu", "skipped": reason}]
    return accelerator_records(bundle, checkpoint, texts, repeats, threads, provider="cuda")


def accelerator_records(bundle: str, checkpoint: str | None, texts: Sequence[str], repeats: int, threads: int,
                        provider: str) -> list[dict]:
    """The engine on ``provider`` (fp32, and the int8 graph when the bundle has one; runs of
    ``GPU_MAX_BATCH``) against PyTorch on the same device (one forward per call) at ``GPU_BATCH_SIZES``; a
    ``setup`` record (device, versions) and a ``parity`` record (its answers against the CPU engine's on
    every text, ``intentvcs.export.parity.compare``). Tests run it with ``provider="cpu"``.

    The engine starts before torch is imported, as in the torch-free service,
    so the run proves that the engine finds the CUDA libraries on its own.
    """
    import onnxruntime as ort

    from intentvcs.core.manifest import INT8_MODEL_FILE
    from intentvcs.export.parity import compare
    from intentvcs.service.engine import Engine, EngineError

    max_batch = max(GPU_BATCH_SIZES)  # PyTorch: one forward per call, as a user would write it
    torch_before = "torch" in sys.modules
    try:
        engine = Engine(bundle, provider=provider, threads=threads, max_batch=GPU_MAX_BATCH, quantized="off")
    except EngineError as exc:  # the provider is offered but cannot start (e.g. a missing cuDNN)
        return [{"component": "gpu", "skipped": str(exc)}]
    manifest = engine.bundle.manifest
    setup = {"component": "gpu", "check": "setup", "machine": machine(), "provider": engine.provider,
             "onnxruntime": ort.__version__, "torch_imported_at_engine_start": torch_before,
             "bundle": str(bundle), "checkpoint": checkpoint}
    backends = {"onnx-cuda": engine.infer}
    if INT8_MODEL_FILE in manifest["files"]:
        backends["onnx-cuda-int8"] = Engine(bundle, provider=provider, threads=threads, max_batch=GPU_MAX_BATCH,
                                            quantized="on").infer
    if checkpoint:
        import torch

        device = "cuda" if provider == "cuda" else "cpu"
        backends["torch-cuda"] = torch_device_backend(checkpoint, manifest, threads, max_batch, device)
        setup["torch"] = torch.__version__
    cpu = Engine(bundle, provider="cpu", threads=threads, quantized="off")
    report = compare(cpu.infer(texts), engine.infer(texts), cpu.decision, texts)
    parity = {"component": "gpu", "check": "parity", "against": "cpu fp32",
              "decision_mismatches": report["label_set_mismatches"] + report["oos_mismatches"]
              + report.get("entity_mismatches", 0), **report}
    speed = speed_records("gpu", interleaved_runs(backends, texts, GPU_BATCH_SIZES, repeats), device=provider,
                          max_batch=GPU_MAX_BATCH)
    for record in speed:  # each backend's own limit: PyTorch runs a call as one forward
        if not record["backend"].startswith("onnx"):
            record["max_batch"] = max_batch
    return [setup, parity, *speed]


# ------------------------------------------------------------------ physical limit

def encoder_flops(config: dict, lengths: Sequence[int], labels: int) -> float:
    """Mean FLOPs per utterance (a multiply-add counts 2) of a BERT-family encoder, mean pooling and the head.

    Per layer, for an utterance of ``n`` tokens, hidden size ``H`` and
    feed-forward size ``I``: the Q, K, V and output projections ``4·2·n·H²``,
    the feed-forward ``2·2·n·H·I``, the attention scores ``Q·Kᵀ`` and the
    weighted values ``2·2·n²·H``; the head adds ``2·H·labels``. Embedding
    look-ups, layer norms, softmax, GELU and pooling are ``O(n·H)`` and left
    out (under 1% at MiniLM sizes). ``lengths`` are unpadded token counts, so
    this is the work the utterances need, not what padding adds.
    """
    layers, hidden, inner = config["num_hidden_layers"], config["hidden_size"], config["intermediate_size"]
    n = np.asarray(lengths, dtype=np.float64)
    per_utterance = layers * (n * (8 * hidden**2 + 4 * hidden * inner) + 4 * n**2 * hidden) + 2 * hidden * labels
    return float(per_utterance.mean())


def matmul_gflops(threads: int, size: int = MATMUL_SIZE, repeats: int = 3) -> float:
    """Best fp32 GFLOP/s of a ``size``×``size`` numpy matmul on ``threads`` BLAS threads.

    The best of ``repeats``, not the median: this is the rate the cores can
    reach on the ideal dense kernel, the yardstick for the encoder.
    """
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((size, size), dtype=np.float32) for _ in range(2))
    best = math.inf
    with threadpool_limits(limits=threads, user_api="blas"):
        a @ b  # warm-up: thread pool start, page faults on the output
        for _ in range(repeats):
            start = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def avx2_peak(cpuinfo: str, cores: int) -> dict:
    """Nominal AVX2 fp32 peak, ``cores × GHz × 32 FLOP/cycle``, from /proc/cpuinfo text; {} without AVX2 and FMA.

    GHz is the model name's ``@ x.xxGHz`` (nominal) when present, else the
    first ``cpu MHz`` line (the current clock, which turbo and power saving
    move). ``avx512`` says whether the CPU has AVX-512F, with which the peak
    can be up to twice this (two 512-bit FMA units; it depends on the model).
    """
    found = re.search(r"^flags\s*:(.*)$", cpuinfo, re.MULTILINE)
    flags = set(found.group(1).split()) if found else set()
    if not {"avx2", "fma"} <= flags:
        return {}
    nominal = re.search(r"^model name\s*:.*@\s*([\d.]+)\s*GHz", cpuinfo, re.MULTILINE)
    current = re.search(r"^cpu MHz\s*:\s*([\d.]+)", cpuinfo, re.MULTILINE)
    if nominal:
        ghz, source = float(nominal.group(1)), "model name"
    elif current:
        ghz, source = float(current.group(1)) / 1000, "cpu MHz"
    else:
        return {}
    return {"avx2_peak_gflops": round(cores * ghz * AVX2_FLOP_PER_CYCLE, 1), "cpu_ghz": round(ghz, 3),
            "cpu_ghz_source": source, "avx512": "avx512f" in flags}


def limit_record(bundle: str, checkpoint: str | None, texts: Sequence[str], threads: int,
                 records: Sequence[dict]) -> dict:
    """FLOPs per utterance, the machine's fp32 rates and the compute-bound ceiling, beside the best fp32 engine."""
    if not checkpoint:
        return {"component": "limit", "skipped": "no --checkpoint, so no encoder config to count FLOPs from"}
    from intentvcs.service.bundle import open_bundle

    config = json.loads((Path(checkpoint) / "encoder" / "config.json").read_text(encoding="utf-8"))
    opened = open_bundle(bundle)
    lengths = [len(encoding.ids) for encoding in opened.tokenizer.encode(texts)]
    flops = encoder_flops(config, lengths, len(opened.labels))
    measured = matmul_gflops(threads)
    try:
        nominal = avx2_peak(Path("/proc/cpuinfo").read_text(encoding="utf-8"), threads)
    except OSError:  # not Linux
        nominal = {}
    record = {"component": "limit", "layers": config["num_hidden_layers"], "hidden": config["hidden_size"],
              "intermediate": config["intermediate_size"], "mean_tokens": round(float(np.mean(lengths)), 2),
              "mflop_per_utt": round(flops / 1e6, 3), "mflop_per_token": round(flops / np.mean(lengths) / 1e6, 3),
              "threads": threads, "matmul_gflops": round(measured, 1),
              "ceiling_utt_per_s": round(measured * 1e9 / flops, 1), **nominal}
    if nominal:
        record["nominal_ceiling_utt_per_s"] = round(nominal["avx2_peak_gflops"] * 1e9 / flops, 1)
    record["paths"] = path_efficiency(records, flops, measured)
    return record


def path_efficiency(records: Sequence[dict], flops: float, matmul_gflops: float) -> dict[str, dict]:
    """Per CPU path, its best rate over the batch sizes as fp32-equivalent GFLOP/s and as a fraction of the
    matmul ceiling (an int8 path can pass 1: it does the same work in cheaper arithmetic)."""
    paths = {}
    for backend in dict.fromkeys(r["backend"] for r in records
                                 if r.get("component") == "engine" and not r["backend"].endswith(ANSWERS)):
        best = max(r["utt_per_s"] for r in records if r.get("component") == "engine" and r["backend"] == backend)
        paths[backend] = {"best_utt_per_s": best, "gflops": round(best * flops / 1e9, 1),
                          "fraction_of_ceiling": round(best * flops / (matmul_gflops * 1e9), 3)}
    return paths


# ------------------------------------------------------------------ service

def service_records(bundle: str, texts: Sequence[str], concurrency: Sequence[int], seconds: float,
                    workers: int | None, threads: int | None, engine_threads: int, max_batch: int,
                    rounds: int) -> list[dict]:
    """Start-up time, idle and loaded latency/throughput, and worker memory of the HTTP service on ``bundle``,
    and its throughput at the largest concurrency against the engine, measured in turns (``paired_rounds``).

    The service runs with its defaults (``INTENTVCS_QUANTIZED=auto``; ``workers``
    and ``threads`` None: its own); it is compared with the engine (on
    ``engine_threads``, as in ``engine_records``) on the graph it reports serving.
    """
    from intentvcs.cli.commands.serve import free_port, running
    from intentvcs.service.engine import Engine

    port = free_port()
    started = time.perf_counter()
    with running(bundle, port=port, workers=workers, threads=threads) as url:
        startup = time.perf_counter() - started
        with urllib.request.urlopen(f"{url}/status", timeout=10) as response:
            served = json.load(response)
        # The same workload the engine was measured on.
        measured = asyncio.run(_drive(url, concurrency, seconds, list(texts)))
        engine = Engine(bundle, provider="cpu", threads=engine_threads, max_batch=max_batch,
                        quantized="on" if served["quantized"] else "off")
        measured.append(paired_rounds(url, engine, texts, max(concurrency), seconds / 4, rounds))
        rss = worker_rss_mb(port)
    for record in measured:
        record["graph"] = served["model_file"]
        record["p99_over_p50"] = round(record["p99_ms"] / record["p50_ms"], 2)
    return [{"component": "service", **record} for record in measured] + [
        {"component": "service", "metric": "startup_s", "value": round(startup, 2), "workers": len(rss)},
        {"component": "service", "metric": "rss_mb_per_worker", "value": round(statistics.mean(rss), 1),
         "max": round(max(rss), 1), "workers": len(rss)},
    ]


def paired_rounds(url: str, engine, texts: Sequence[str], clients: int, seconds: float, rounds: int) -> dict:
    """The service at ``clients`` closed-loop clients against ``engine`` at batch 32, taking turns ``rounds`` times.

    This machine's speed drifts by tens of percent within minutes, so a
    service figure divided by an engine figure taken minutes earlier says as
    much about the drift as about the HTTP layer. Each round times the
    engine's answers (``Engine.predict``, what a worker runs per request, ranking
    as many intents as the service answers a request that names no ``top_k``)
    and its graph outputs (``Engine.infer``) at batch 32, then loads the
    service, each for ``seconds``, so that both sides of a ratio sample the
    machine alike; the ratios are the medians of the per-round ratios. The
    latency percentiles are those of every answered request of the rounds.
    """
    from intentvcs.service.settings import Limits

    top_k = Limits.from_env().default_top_k  # the server started in this environment reads the same

    def answer(batch: list[str]):
        return engine.predict(batch, top_k=top_k)

    plan = batches(texts, 32)
    answers, outputs, served, errors = [], [], [], 0
    latencies: list[float] = []
    for _ in range(rounds):
        for rates, infer in ((answers, answer), (outputs, engine.infer)):
            run = timed_run(infer, plan, min_seconds=seconds)
            rates.append(run.texts / run.seconds)
        load, answered = asyncio.run(load_test.load_run(url, clients, seconds, texts=list(texts)))
        served.append(load["utt_per_s"])
        latencies += answered
        errors += load["errors"]

    def ratio(reference: list[float]) -> float:
        return round(statistics.median(s / r for s, r in zip(served, reference)), 3)

    return {"mode": "paired", "concurrency": clients, "rounds": rounds, "seconds_per_round": seconds,
            "utt_per_s": round(statistics.median(served), 1), "errors": errors, **load_test.percentiles(latencies),
            "engine_answers_utt_per_s": round(statistics.median(answers), 1),
            "engine_outputs_utt_per_s": round(statistics.median(outputs), 1),
            "vs_engine_batch32": ratio(answers), "vs_graph_outputs_batch32": ratio(outputs),
            "ratios": [round(s / r, 3) for s, r in zip(served, answers)]}


async def _drive(url: str, concurrency: Sequence[int], seconds: float, texts: list[str]) -> list[dict]:
    records = [await load_test.idle(url, IDLE_REQUESTS, texts=texts)]
    for clients in concurrency:
        records.append(await load_test.load(url, clients, seconds, texts=texts))
    return records


def worker_rss_mb(port: int) -> list[float]:
    """Resident memory (MiB) of each worker of the server on ``port``.

    The workers are the child processes of the ``bentoml serve`` process this
    one started, which is found by its exact command line (each worker
    leads a process group of its own, so the group id does not find them).
    """
    import psutil

    from intentvcs.cli.commands.serve import server_command

    command = server_command(port)
    server = next((p for p in psutil.Process().children() if p.cmdline() == command), None)
    workers = server.children() if server else []
    if not workers:
        raise RuntimeError(f"found no worker processes of the server on port {port}")
    return [worker.memory_info().rss / 2**20 for worker in workers]


# ------------------------------------------------------------------ targets and report

def target_records(records: Sequence[dict]) -> list[dict]:
    """Each ``TARGETS`` goal with its measured value and whether it is met (None when not measured)."""
    out = []
    for target in TARGETS:
        found = next((r for r in records if target.where.items() <= r.items()), {})
        value = found.get(target.field)
        met = None if value is None else (value >= target.bound if target.at_least else value <= target.bound)
        out.append({"component": "target", "target": target.name, "goal": target.goal, "field": target.field,
                    "measured": value, "met": met})
    return out


def markdown(settings: dict, records: Sequence[dict]) -> str:
    """The docs/RESULTS.md tables: targets, engine, service, GPU and the compute ceiling."""
    by = {component: [r for r in records if r["component"] == component]
          for component in ("target", "engine", "service", "gpu", "limit")}
    verdict = {True: "yes", False: "**no**", None: "–"}
    parts = [(f"{settings['utterances']} utterances from `{settings['data']}`; CPU: {settings['threads']} "
              f"thread(s), at most {settings['max_batch']} texts per graph run; medians of {settings['repeats']} "
              f"run(s) (the GPU part: its own, below)."),
             _table(["target", "goal", "measured", "met"],
                    [[t["target"], t["goal"], _cell(t["measured"]), verdict[t["met"]]] for t in by["target"]]),
             _speed_table(by["engine"])]
    service = [r for r in by["service"] if "mode" in r]
    if service:
        parts.append(f"Service graph: `{service[0]['graph']}` (the default, INTENTVCS_QUANTIZED=auto).")
        parts.append(_table(["service", "clients", "utt/s", "p50 ms", "p95 ms", "p99 ms", "errors",
                             "÷ engine answers b32", "÷ graph outputs b32", "client cores"],
                            [[r["mode"], r["concurrency"], _cell(r.get("utt_per_s")), r["p50_ms"], r["p95_ms"],
                              r["p99_ms"], r["errors"], _cell(r.get("vs_engine_batch32")),
                              _cell(r.get("vs_graph_outputs_batch32")), _cell(r.get("client_cores"))]
                             for r in service]))
        parts.append("Client cores: the CPU the load client itself used (it shares the host with the server).")
        parts.append("; ".join(f"{r['metric']}: {r['value']}" for r in by["service"] if "metric" in r))
    parts += _gpu_parts(by["gpu"])
    parts.append(_limit_line(by["limit"][0]) if by["limit"] else "")
    return "\n\n".join(part for part in parts if part) + "\n"


def _gpu_parts(records: Sequence[dict]) -> list[str]:
    """The GPU section: where it ran, its parity with the CPU, its speed table (or why it was skipped)."""
    if not records:
        return []
    if "skipped" in records[0]:
        return [f"GPU: skipped ({records[0]['skipped']})"]
    setup = next(r for r in records if r.get("check") == "setup")
    parity = next(r for r in records if r.get("check") == "parity")
    speed = [r for r in records if "backend" in r]
    host = setup["machine"]
    torch = f", torch {setup['torch']}" if "torch" in setup else ""
    return [(f"GPU: {host['gpu']} ({host['cores']} CPU cores, {host['cpu']}), onnxruntime {setup['onnxruntime']}"
             f"{torch}; bundle `{setup['bundle']}`; the engine started CUDA with torch "
             f"{'already' if setup['torch_imported_at_engine_start'] else 'not'} imported. Against the CPU engine "
             f"(fp32) on all {parity['utterances']} utterances: max logit gap {parity['max_abs_logit_diff']:.2e}, "
             f"max confidence gap {parity['max_confidence_diff']:.2e}, answers differing "
             f"{parity['decision_mismatches']} (ties at a threshold {parity['ties_at_threshold']}). Speed: medians "
             f"of {_runs(speed)} run(s); the engine runs at most {_max_batch(speed, 'onnx')} texts per graph run, "
             f"PyTorch one forward per call (up to {_max_batch(speed, 'torch')})."),
            _speed_table(speed)]


def _runs(records: Sequence[dict]) -> str:
    return "/".join(str(n) for n in sorted({r["runs"] for r in records})) or "–"


def _max_batch(records: Sequence[dict], prefix: str) -> str:
    return "/".join(str(n) for n in sorted({r["max_batch"] for r in records if r["backend"].startswith(prefix)})) or "–"


def _speed_table(records: Sequence[dict]) -> str:
    reference = "× transformers" if any("speedup_vs_transformers" in r for r in records) else "× torch"
    sorted_column = any("speedup_vs_sorted" in r for r in records)
    return _table(["backend", "device", "batch", "utt/s", "p50 ms/batch", reference,
                   *(["× sorted transformers"] if sorted_column else []), "× fp32", "spread %"],
                  [[r["backend"], r["device"], r["batch_size"], r["utt_per_s"], r["p50_ms"],
                    _cell(r.get("speedup_vs_transformers", r.get("speedup_vs_torch"))),
                    *([_cell(r.get("speedup_vs_sorted"))] if sorted_column else []),
                    _cell(r.get("speedup_vs_fp32")), r["spread_pct"]]
                   for r in records]) if records else ""


def _limit_line(r: dict) -> str:
    if "skipped" in r:
        return f"Compute limit: skipped ({r['skipped']})."
    nominal = (f"; the nominal AVX2 peak at the clock the kernel reports, {r['avx2_peak_gflops']} GFLOP/s "
               f"({r['threads']} × {r['cpu_ghz']} GHz × {AVX2_FLOP_PER_CYCLE}) → {r['nominal_ceiling_utt_per_s']} "
               f"utt/s, bounds nothing here: turbo clocks{' and AVX-512' if r['avx512'] else ''} pass it"
               if "avx2_peak_gflops" in r else "")
    paths = "; ".join(f"{name} {p['best_utt_per_s']} utt/s = {p['gflops']} GFLOP/s, {p['fraction_of_ceiling']:.0%}"
                      for name, p in r["paths"].items())
    return (f"Compute limit: {r['mflop_per_utt']} MFLOP per utterance ({r['mflop_per_token']} MFLOP/token × "
            f"{r['mean_tokens']} tokens; {r['layers']} layers, hidden {r['hidden']}, FFN {r['intermediate']}); "
            f"the machine's measured fp32 rate, numpy's matmul of large matrices on {r['threads']} thread(s), "
            f"{r['matmul_gflops']} GFLOP/s → {r['ceiling_utt_per_s']} utt/s (a reference, not a hard ceiling: "
            f"ONNX Runtime's own kernels can pass it){nominal}. Each path's best rate, as fp32-equivalent GFLOP/s "
            f"and share of that matmul rate (int8 does the same work in cheaper arithmetic, so it can pass "
            f"100%): {paths}.")


def _table(head: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value) -> str:
    return "–" if value is None else str(value)


if __name__ == "__main__":
    sys.exit(main())
