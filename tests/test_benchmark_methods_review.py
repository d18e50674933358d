"""Benchmark methods review: each test failed on the code before its fix.

``perf_bench --gpu-only`` where the GPU could not be measured wrote a skip over the GPU figures already
in perf.json and exited 0. ``perf_bench.paired_rounds`` timed the engine's answers ranking every label,
while the service it is compared with ranks only its default ``top_k``. ``perf_bench.paired_rounds``
reported the median of each round's p50/p95/p99, not the percentiles of all the requests of its rounds.
``load_test.engine_throughput`` timed one batch of 32 utterances drawn once (longer than the mix the
service is sent) where the service got each utterance equally often.
"""

from __future__ import annotations

import collections
import json
import time


from benchmarks import load_test
from benchmarks import perf_bench as bench
from benchmarks.perf_bench import Run


# --------------------------------------------------------------------------- perf_bench --gpu-only


def test_gpu_only_that_measured_nothing_fails_and_keeps_the_file(tmp_path, monkeypatch, capsys):
    """A --gpu-only run exists to measure the GPU: one that could not (no CUDA provider, or an engine that
    cannot start CUDA) replaced the measured GPU records with a skip and exited 0."""
    data = tmp_path / "texts.jsonl"
    data.write_text(json.dumps({"text": "play some jazz", "labels": []}) + "\n", encoding="utf-8")
    earlier = {"command": "python -m benchmarks.perf_bench --bundle B", "machine": {"cores": 2, "gpu": None},
               "date": "2026-01-01", "bundle": "B", "checkpoint": None, "data": "D", "utterances": 1,
               "threads": 2, "max_batch": 32, "repeats": 5,
               "records": [{"component": "engine", "backend": "onnx-fp32", "device": "cpu", "batch_size": 32,
                            "utt_per_s": 400.0, "p50_ms": 80.0, "spread_pct": 1.0},
                           {"component": "gpu", "check": "setup", "machine": {"gpu": "H100"}},
                           {"component": "gpu", "backend": "onnx-cuda", "batch_size": 256,
                            "utt_per_s": 13000.0}]}
    perf = tmp_path / "perf.json"
    perf.write_text(json.dumps(earlier), encoding="utf-8")
    before = perf.read_bytes()
    monkeypatch.setattr(bench, "gpu_unavailable", lambda: "onnxruntime offers no CUDAExecutionProvider")
    code = bench.main(["--gpu-only", "--bundle", str(tmp_path / "bundle"), "--data", str(data),
                       "--results-dir", str(tmp_path)])
    assert code != 0
    assert perf.read_bytes() == before  # the GPU figures measured before are still there
    assert not (tmp_path / "perf.md").exists()
    assert "CUDAExecutionProvider" in capsys.readouterr().err


# --------------------------------------------------------------------------- perf_bench.paired_rounds


class _FakeEngine:
    """``Engine``'s ``predict``/``infer``, recording the ``top_k`` each ``predict`` call asked for."""

    def __init__(self):
        self.top_ks = []

    def predict(self, texts, top_k=None):
        self.top_ks.append(top_k)
        return [{} for _ in texts]

    def infer(self, texts):
        return None


def _fake_rounds(monkeypatch, per_round_latencies_s):
    """``load_test``'s closed-loop run answering, round after round, with the given latencies; engine runs
    of a fixed rate. Returns nothing; patches ``bench.timed_run`` and ``load_test.load``/``load_run``."""
    rounds = iter(per_round_latencies_s)

    def record_of(latencies):
        return {"mode": "load", "concurrency": 4, "duration_s": 1.0, "requests": len(latencies), "errors": 0,
                "utt_per_s": float(len(latencies)), **load_test.percentiles(latencies)}

    async def load_run(url, concurrency, duration_s, texts=load_test.UTTERANCES):
        latencies = next(rounds)
        return record_of(latencies), list(latencies)

    async def load(url, concurrency, duration_s, texts=load_test.UTTERANCES):
        return (await load_run(url, concurrency, duration_s, texts))[0]

    monkeypatch.setattr(load_test, "load_run", load_run, raising=False)
    monkeypatch.setattr(load_test, "load", load)
    monkeypatch.setattr(bench, "timed_run", lambda infer, plan, min_seconds=0.0: (
        [infer(batch) for batch in plan], Run(sum(map(len, plan)), 1.0, [0.01] * len(plan)))[1])


def test_paired_engine_ranks_as_many_intents_as_the_service_answers(monkeypatch):
    """The service answers a request without ``top_k`` with its default (10) ranked intents; the engine it
    is held to ranked every label (``predict``'s None), more work per answer on a bundle of many labels."""
    from intentvcs.service.settings import Limits

    _fake_rounds(monkeypatch, [[0.01] * 10])
    engine = _FakeEngine()
    bench.paired_rounds("http://unused", engine, ["play some jazz"] * 40, clients=4, seconds=0.0, rounds=1)
    assert engine.top_ks and set(engine.top_ks) == {Limits.from_env().default_top_k}


def test_paired_latency_percentiles_are_over_every_request_of_the_rounds(monkeypatch):
    """Two quiet rounds and one slow one: 1 request in 3 took 100 ms, so the p99 of the condition is 100 ms;
    the median of the rounds' own p99s said 10 ms, dropping the slow round from the tail."""
    quiet, slow = [0.010] * 100, [0.100] * 100
    _fake_rounds(monkeypatch, [quiet, slow, quiet])
    paired = bench.paired_rounds("http://unused", _FakeEngine(), ["play some jazz"] * 40, clients=4,
                                 seconds=0.0, rounds=3)
    pooled = load_test.percentiles(quiet + slow + quiet)
    assert (paired["p50_ms"], paired["p95_ms"], paired["p99_ms"]) == (
        pooled["p50_ms"], pooled["p95_ms"], pooled["p99_ms"]) == (10.0, 100.0, 100.0)


# --------------------------------------------------------------------------- load_test.engine_throughput


def test_engine_ceiling_sees_every_utterance_equally_often(monkeypatch):
    """The service is sent utterances drawn uniformly from ``UTTERANCES``; the engine's ceiling timed one
    batch of 32 drawn once (19 distinct texts, 8% more tokens than the mix), the same batch every call."""
    import intentvcs.service.engine as engine_module

    calls = []

    class FakeEngine:
        def __init__(self, bundle, provider="cpu", threads=None, **kwargs):
            self.info = {"threads": threads or 1}

        def predict(self, texts, top_k=None):
            calls.append(list(texts))
            time.sleep(0.001)
            return [{} for _ in texts]

    monkeypatch.setattr(engine_module, "Engine", FakeEngine)
    record = load_test.engine_throughput("unused", batch_size=32, seconds=0.02, threads=1)
    timed = calls[1:]  # after the warm-up call
    counts = collections.Counter(text for batch in timed for text in batch)
    assert set(counts) == set(load_test.UTTERANCES)
    assert len(set(counts.values())) == 1  # each utterance as often as every other
    assert all(len(batch) == 32 for batch in timed) and record["utt_per_s"] > 0
