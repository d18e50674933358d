"""``benchmarks.perf_bench``: the FLOP count, the statistics helpers, target checks and a run on a tiny bundle."""

from __future__ import annotations

import json
import statistics
import time

import pytest

from benchmarks import perf_bench as bench
from benchmarks.perf_bench import Run

TEXTS = ["play some jazz", "book a table for two tonight", "will it rain in paris tomorrow",
         "rate this book five stars", "find the movie schedule near me", "set an alarm for seven"]


def test_encoder_flops_by_hand():
    config = {"num_hidden_layers": 2, "hidden_size": 4, "intermediate_size": 8}
    # Per layer and token 8·H² + 4·H·I = 128 + 128 = 256; attention 4·n²·H; head 2·H·3 = 24.
    # n = 2: 2·(2·256 + 4·4·4) + 24 = 1176; n = 4: 2·(4·256 + 4·16·4) + 24 = 2584.
    assert bench.encoder_flops(config, [2, 4], labels=3) == pytest.approx((1176 + 2584) / 2)


def test_encoder_flops_minilm_per_token():
    minilm = {"num_hidden_layers": 6, "hidden_size": 384, "intermediate_size": 1536}
    # The linear layers of all-MiniLM-L6-v2: 6 · (8·384² + 4·384·1536) = 21,233,664 FLOP per token.
    per_token = bench.encoder_flops(minilm, [1], labels=0) - 6 * 4 * 384  # less attention at n = 1
    assert per_token == 21_233_664


def test_percentile_summary_and_paired_speedup():
    assert bench.percentile_ms([0.001, 0.002, 0.003, 0.004], 50) == pytest.approx(2.5)
    assert bench.percentile_ms([0.001, 0.002, 0.003, 0.004], 100) == pytest.approx(4.0)
    runs = [Run(10, 1.0, [0.001, 0.003]), Run(10, 0.5, [0.004]), Run(10, 2.0, [0.010, 0.020, 0.030])]
    # Rates 10, 20 and 5 utt/s; per-run p50s 2, 4 and 20 ms.
    assert bench.summarize(runs) == {"utt_per_s": 10.0, "p50_ms": 4.0, "spread_pct": 150.0, "runs": 3}
    reference = [Run(5, 1.0, [1.0])] * 3
    assert bench.paired_speedup(runs, reference) == 2.0  # ratios 2, 4, 1


def test_batches_are_full_and_wrap_round_the_data():
    assert bench.batches(list("abcde"), 2, min_batches=4) == [["a", "b"], ["c", "d"], ["e", "a"], ["b", "c"]]
    assert len(bench.batches(list("abcde"), 1, min_batches=2)) == 5


def test_a_timed_run_repeats_its_plan_until_its_time_is_up():
    calls = []

    def infer(batch):
        calls.append(list(batch))
        time.sleep(0.01)

    plan = [["a", "b"], ["c", "d"]]
    once = bench.timed_run(infer, plan)
    assert (once.texts, len(once.latencies), len(calls)) == (4, 2, 2 + bench.LEAD_IN_BATCHES)
    calls.clear()
    longer = bench.timed_run(infer, plan, min_seconds=0.1)
    # Whole passes over the plan only, so every utterance counts as often as the others.
    assert longer.seconds >= 0.1 and longer.texts % 4 == 0 and longer.texts >= 8
    assert len(longer.latencies) == longer.texts // 2 == len(calls) - bench.LEAD_IN_BATCHES


def test_avx2_peak_from_cpuinfo():
    intel = "model name\t: Intel(R) Xeon(R) CPU @ 2.50GHz\ncpu MHz\t\t: 3100.000\nflags\t\t: sse avx avx2 fma\n"
    assert bench.avx2_peak(intel, cores=4) == {"avx2_peak_gflops": 320.0, "cpu_ghz": 2.5,
                                               "cpu_ghz_source": "model name", "avx512": False}
    amd = "model name\t: AMD EPYC\ncpu MHz\t\t: 2596.098\nflags\t\t: avx2 fma avx512f\n"
    assert bench.avx2_peak(amd, cores=2) == {"avx2_peak_gflops": pytest.approx(166.2), "cpu_ghz": 2.596,
                                             "cpu_ghz_source": "cpu MHz", "avx512": True}
    assert bench.avx2_peak(intel.replace(" fma", ""), cores=4) == {}


def test_targets_are_checked_in_the_right_direction():
    records = [
        {"component": "engine", "backend": "onnx-int8", "batch_size": 1, "speedup_vs_transformers": 4.0},
        {"component": "engine", "backend": "onnx-int8", "batch_size": 32, "speedup_vs_transformers": 3.0},  # bound
        {"component": "engine", "backend": "onnx-fp32", "batch_size": 32, "speedup_vs_transformers": 1.4},
        {"component": "service", "mode": "load", "concurrency": 32, "errors": 0, "p99_over_p50": 12.0},
        # The ratio is read from the rounds taken in turns, not from the load run before them.
        {"component": "service", "mode": "load", "concurrency": 32, "vs_engine_batch32": 0.2},
        {"component": "service", "mode": "paired", "concurrency": 32, "vs_engine_batch32": 0.9},
        {"component": "service", "mode": "idle", "concurrency": 1, "p50_ms": 5.0},  # on the bound
    ]
    met = {t["target"]: t["met"] for t in bench.target_records(records)}
    assert met == {
        "engine int8 vs transformers, batch 32": True,
        "engine int8 vs transformers, batch 1": False,
        "engine fp32 vs transformers, batch 32": True,
        "service at 32 clients vs its engine's answers at batch 32 (in turns)": True,
        "service at 32 clients, errors": True,
        "service at 32 clients, p99 / p50": False,
        "service idle single-request p50": True,
        "GPU ONNX fp32, batch 256": None,
        "GPU answers as the CPU's (label sets, OOS verdicts, entities)": None,
    }


def test_gpu_skips_without_the_cuda_provider(monkeypatch):
    import onnxruntime

    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    (record,) = bench.gpu_records("unused", None, TEXTS, repeats=1, threads=1)
    assert record["component"] == "gpu" and "CUDAExecutionProvider" in record["skipped"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tests.helpers.bundle import make_tiny_bundle

    root = tmp_path_factory.mktemp("bench")
    bundle = make_tiny_bundle(root, quantize=True)
    data = root / "texts.jsonl"
    data.write_text("".join(json.dumps({"text": t, "labels": []}) + "\n" for t in TEXTS), encoding="utf-8")
    return {"bundle": bundle, "checkpoint": root / "checkpoint", "data": data, "root": root}


def test_run_end_to_end_without_service(tiny):
    out = tiny["root"] / "perf.json"
    assert bench.main(["--bundle", str(tiny["bundle"]), "--checkpoint", str(tiny["checkpoint"]),
                     "--data", str(tiny["data"]), "--batch-sizes", "1", "4", "--repeats", "1",
                     "--threads", "1", "--max-batch", "2", "--skip-service", "--results-dir", str(tiny["root"])]) == 0
    result = json.loads(out.read_text())
    assert (result["utterances"], result["threads"], result["max_batch"]) == (len(TEXTS), 1, 2)
    records = result["records"]
    engine = {(r["backend"], r["batch_size"]): r for r in records if r["component"] == "engine"}
    backends = ("onnx-fp32", "onnx-int8", "transformers", "transformers-sorted", "st-onnx", "st-onnx-int8")
    answers = ("onnx-fp32-answers", "onnx-int8-answers")  # Engine.predict: what the service is held to
    assert set(engine) == {(b, n) for b in backends + answers for n in (1, 4)}
    for (backend, size), record in engine.items():
        assert record["utt_per_s"] > 0 and record["p50_ms"] > 0 and (record["runs"], record["max_batch"]) == (1, 2)
        reference = engine["transformers", size]["utt_per_s"]
        if backend not in ("transformers", *answers):  # one repeat: the speed-up is the ratio of the two rates
            assert record["speedup_vs_transformers"] == pytest.approx(record["utt_per_s"] / reference, rel=0.01)
    assert engine["onnx-int8", 4]["speedup_vs_fp32"] == pytest.approx(
        engine["onnx-int8", 4]["utt_per_s"] / engine["onnx-fp32", 4]["utt_per_s"], rel=0.01)
    assert "speedup_vs_fp32" in engine["st-onnx-int8", 4] and "speedup_vs_fp32" not in engine["onnx-fp32", 4]
    assert engine["onnx-int8", 4]["speedup_vs_sorted"] == pytest.approx(
        engine["onnx-int8", 4]["utt_per_s"] / engine["transformers-sorted", 4]["utt_per_s"], rel=0.01)

    (limit,) = [r for r in records if r["component"] == "limit"]
    from intentvcs.service.bundle import open_bundle

    config = json.loads((tiny["checkpoint"] / "encoder" / "config.json").read_text())
    opened = open_bundle(tiny["bundle"])
    lengths = [len(e.ids) for e in opened.tokenizer.encode(TEXTS)]
    assert limit["mflop_per_utt"] == pytest.approx(bench.encoder_flops(config, lengths, len(opened.labels)) / 1e6,
                                                   abs=1e-3)
    assert set(limit["paths"]) == set(backends)  # the answers do more than the compute the ceiling counts
    for backend in backends:
        path = limit["paths"][backend]
        assert path["best_utt_per_s"] == max(engine[backend, n]["utt_per_s"] for n in (1, 4))
        assert path["fraction_of_ceiling"] == pytest.approx(
            path["best_utt_per_s"] * limit["mflop_per_utt"] / 1e3 / limit["matmul_gflops"], rel=0.01, abs=1e-3)
    # Any CPU this runs on multiplies fp32 matrices at more than a GFLOP/s; the
    # ceiling is that rate over the FLOPs an utterance needs.
    assert limit["matmul_gflops"] > 1.0
    assert limit["ceiling_utt_per_s"] == pytest.approx(limit["matmul_gflops"] * 1e3 / limit["mflop_per_utt"],
                                                       rel=0.01)

    (gpu, *_) = [r for r in records if r["component"] == "gpu"]
    assert "CUDAExecutionProvider" in gpu.get("skipped", "") or gpu["check"] == "setup"
    assert not [r for r in records if r["component"] == "service"]
    assert len([r for r in records if r["component"] == "target"]) == len(bench.TARGETS)
    assert "| onnx-int8 | cpu | 4 |" in out.with_suffix(".md").read_text()


def test_the_accelerator_comparison_runs_its_whole_path(tiny):
    # The GPU comparison's code, run on the CPU provider: every backend at every
    # batch size, the setup record and a parity check that finds nothing to differ.
    records = bench.accelerator_records(str(tiny["bundle"]), str(tiny["checkpoint"]), TEXTS, repeats=1, threads=1,
                                        provider="cpu")
    setup, parity, *speed = records
    assert (setup["check"], setup["provider"], setup["torch_imported_at_engine_start"] in (True, False)) == (
        "setup", "CPUExecutionProvider", True)
    assert (parity["check"], parity["utterances"], parity["decision_mismatches"]) == ("parity", len(TEXTS), 0)
    assert parity["max_abs_logit_diff"] == 0.0
    by = {(r["backend"], r["batch_size"]): r for r in speed}
    assert set(by) == {(b, n) for b in ("onnx-cuda", "onnx-cuda-int8", "torch-cuda") for n in bench.GPU_BATCH_SIZES}
    assert all(r["utt_per_s"] > 0 and r["device"] == "cpu" for r in speed)
    assert "speedup_vs_torch" in by["onnx-cuda", 256] and "speedup_vs_fp32" in by["onnx-cuda-int8", 1]


def test_gpu_only_replaces_the_gpu_records_and_keeps_the_rest(tiny, monkeypatch):
    results = tiny["root"] / "merged"
    results.mkdir()
    earlier = {"command": "python -m benchmarks.perf_bench --bundle B", "machine": {"cores": 2, "gpu": None},
               "date": "2026-01-01", "bundle": "B", "checkpoint": None, "data": "D", "utterances": 3, "threads": 2,
               "max_batch": 32, "repeats": 5,
               "records": [{"component": "engine", "backend": "onnx-fp32", "device": "cpu", "batch_size": 32,
                            "utt_per_s": 400.0, "p50_ms": 80.0, "spread_pct": 1.0},
                           {"component": "gpu", "skipped": "no GPU"},
                           {"component": "target", "target": "stale", "met": None}]}
    (results / "perf.json").write_text(json.dumps(earlier), encoding="utf-8")
    measured = bench.accelerator_records(str(tiny["bundle"]), None, TEXTS, repeats=1, threads=1, provider="cpu")
    monkeypatch.setattr(bench, "gpu_records", lambda *args: measured)
    assert bench.main(["--gpu-only", "--bundle", str(tiny["bundle"]), "--data", str(tiny["data"]),
                       "--results-dir", str(results)]) == 0
    merged = json.loads((results / "perf.json").read_text())
    assert merged["machine"] == earlier["machine"] and merged["bundle"] == "B" and merged["utterances"] == 3
    assert merged["command"].startswith(earlier["command"] + " && python -m benchmarks.")  # then this run's
    records = merged["records"]
    assert records[0] == earlier["records"][0] and records[1:1 + len(measured)] == measured
    targets = {r["target"]: r for r in records if r["component"] == "target"}
    assert set(targets) == {t.name for t in bench.TARGETS}
    assert targets["GPU answers as the CPU's (label sets, OOS verdicts, entities)"]["met"] is True
    table = (results / "perf.md").read_text()
    assert "Against the CPU engine (fp32)" in table and "| onnx-cuda | cpu | 256 |" in table


def test_a_run_without_gpu_keeps_the_gpu_figures_measured_before(tiny, monkeypatch):
    results = tiny["root"] / "kept"
    results.mkdir()
    gpu = bench.accelerator_records(str(tiny["bundle"]), None, TEXTS, repeats=1, threads=1, provider="cpu")
    earlier = {"command": "python -m benchmarks.perf_bench --bundle B && python -m benchmarks.perf_bench "
                          "--gpu-only --bundle G", "machine": {"cores": 16}, "date": "2026-01-01",
               "records": [{"component": "engine", "backend": "old"}, *gpu, {"component": "target", "met": None}]}
    (results / "perf.json").write_text(json.dumps(earlier), encoding="utf-8")
    monkeypatch.setattr(bench, "gpu_records", lambda *args: [{"component": "gpu", "skipped": "no GPU here"}])
    assert bench.main(["--bundle", str(tiny["bundle"]), "--data", str(tiny["data"]), "--batch-sizes", "2",
                       "--repeats", "1", "--threads", "1", "--skip-service", "--results-dir", str(results)]) == 0
    written = json.loads((results / "perf.json").read_text())
    assert [r for r in written["records"] if r["component"] == "gpu"] == gpu
    assert {"component": "engine", "backend": "old"} not in written["records"]  # this run's CPU figures only
    assert written["command"].endswith(" && python -m benchmarks.perf_bench --gpu-only --bundle G")
    targets = {r["target"]: r for r in written["records"] if r["component"] == "target"}
    assert targets["GPU answers as the CPU's (label sets, OOS verdicts, entities)"]["met"] is True
    # Nothing measured before: the skip is what the file says.
    (results / "perf.json").unlink()
    assert bench.main(["--bundle", str(tiny["bundle"]), "--data", str(tiny["data"]), "--batch-sizes", "2",
                       "--repeats", "1", "--threads", "1", "--skip-service", "--results-dir", str(results)]) == 0
    written = json.loads((results / "perf.json").read_text())
    assert [r for r in written["records"] if r["component"] == "gpu"] == [{"component": "gpu",
                                                                           "skipped": "no GPU here"}]


def test_gpu_only_needs_an_earlier_run(tiny, capsys):
    assert bench.main(["--gpu-only", "--bundle", str(tiny["bundle"]), "--data", str(tiny["data"]),
                       "--results-dir", str(tiny["root"] / "nothing-yet")]) == 2
    assert "run the full benchmark first" in capsys.readouterr().err


def test_run_refuses_a_checkpoint_of_another_model(tiny, capsys):
    from tests.helpers.bundle import make_tiny_checkpoint

    other = make_tiny_checkpoint(tiny["root"] / "other", labels=("A", "B"))
    assert bench.main(["--bundle", str(tiny["bundle"]), "--checkpoint", str(other),
                       "--data", str(tiny["data"]), "--skip-service", "--repeats", "1",
                       "--results-dir", str(tiny["root"] / "other")]) == 2
    assert "labels differs" in capsys.readouterr().err


def test_run_names_a_missing_workload(tiny, capsys):
    assert bench.main(["--bundle", str(tiny["bundle"]), "--skip-service", "--snips", str(tiny["root"] / "none"),
                       "--results-dir", str(tiny["root"] / "none")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perf_bench: error:") and str(tiny["root"] / "none") in err


@pytest.mark.slow
def test_service_figures_on_the_workload(tiny):
    load_test = bench.load_test
    before = list(load_test.UTTERANCES)
    records = bench.service_records(str(tiny["bundle"]), TEXTS, concurrency=[2], seconds=0.5,
                                    workers=1, threads=1, engine_threads=1, max_batch=32, rounds=2)
    idle, load, paired, startup, rss = records
    assert (idle["mode"], idle["requests"], idle["errors"]) == ("idle", bench.IDLE_REQUESTS, 0)
    assert (load["mode"], load["concurrency"], load["errors"]) == ("load", 2, 0) and load["requests"] > 0
    # The client's own CPU: some, and no more than the wall time of its single event loop allows.
    assert 0 < load["client_cores"] <= 1.05 and load["client_cpu_ms_per_request"] > 0
    # The service and the engine in turns: each ratio is the median of the rounds' own ratios.
    assert (paired["mode"], paired["concurrency"], paired["rounds"], paired["errors"]) == ("paired", 2, 2, 0)
    assert paired["vs_engine_batch32"] == pytest.approx(statistics.median(paired["ratios"]), abs=1e-3)
    assert len(paired["ratios"]) == 2 and all(ratio > 0 for ratio in paired["ratios"])
    assert paired["engine_outputs_utt_per_s"] > 0 and paired["engine_answers_utt_per_s"] > 0
    # BentoML's own imports take over a second; running() gives up after 120 s.
    assert startup["metric"] == "startup_s" and 1.0 < startup["value"] < 120
    # A worker holds Python, BentoML, ONNX Runtime and the graph: tens of MB, not gigabytes.
    assert rss["metric"] == "rss_mb_per_worker" and rss["workers"] == 1 and 30 < rss["value"] < 2000
    assert load_test.UTTERANCES == before  # the workload swap is undone


@pytest.mark.slow
def test_service_defaults_runs_to_its_table(tiny, monkeypatch):
    # benchmarks.service_defaults end to end on one configuration against a real server: it once lost
    # every figure at its last step (a missing import), after all of its servers had run.
    from benchmarks import service_defaults
    from benchmarks.common import write_results

    results = tiny["root"] / "defaults"
    monkeypatch.setattr(service_defaults, "write_results",
                        lambda *args, **kwargs: write_results(*args, directory=results, **kwargs))
    real_engine = service_defaults.engine_throughput
    monkeypatch.setattr(service_defaults, "engine_throughput",
                        lambda bundle, threads: real_engine(bundle, seconds=0.3, threads=threads))
    config = "combined, 2 workers x 2 threads, no spinning"
    assert service_defaults.main(["--bundle", str(tiny["bundle"]), "--configs", config, "--rounds", "1",
                                  "--duration", "0.5", "--idle-requests", "3", "--results-name", "x"]) == 0
    written = json.loads((results / "x.json").read_text())
    (row, engine) = written["records"]
    assert (row["config"], row["workers"], row["threads"], row["ort_spin"], row["errors"]) == (config, 2, 2, False, 0)
    assert row["utt_per_s"] > 0 and engine["config"] == "engine" and engine["utt_per_s"] > 0
    assert row["vs_engine_batch32"] == pytest.approx(row["utt_per_s"] / engine["utt_per_s"], abs=1e-3)
    assert f"| {config} |" in (results / "x.md").read_text()


def test_the_load_test_counts_answers_apart_from_refusals_and_timeouts():
    """A fast 503 counted as an answer raised throughput and lowered latency; a request past the client's
    timeout (asyncio.TimeoutError, not an aiohttp ClientError) aborted the whole run."""
    import asyncio

    import aiohttp
    from aiohttp import web

    from benchmarks import load_test

    calls = {"n": 0}

    async def predict(request: web.Request) -> web.Response:
        calls["n"] += 1
        if calls["n"] % 2:
            return web.json_response({"error": "overloaded"}, status=503)
        await asyncio.sleep(0.005)
        return web.json_response({"predictions": []})

    async def hang(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.json_response({})

    async def run() -> tuple[dict, tuple[float, bool]]:
        app = web.Application()
        app.router.add_post("/predict", predict)
        app.router.add_post("/slow/predict", hang)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
        try:
            record = await load_test.load(url, concurrency=2, duration_s=0.5)
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=0.2)) as session:
                timed_out = await load_test._post(session, f"{url}/slow", "hello")
        finally:
            await runner.cleanup()
        return record, timed_out

    record, (_, answered) = asyncio.run(run())
    answers = record["requests"] - record["errors"]
    assert record["errors"] > 0 and answers > 0 and abs(record["errors"] - answers) <= 2  # every other one refused
    assert record["utt_per_s"] == pytest.approx(answers / record["duration_s"], rel=0.1)
    assert record["p50_ms"] >= 5.0  # the answers' latency: each answer sleeps 5 ms, a refusal none
    assert answered is False


def test_the_sorted_transformers_baseline_answers_in_the_given_order(tiny):
    """Sorted by length for padding, put back in order: the same logits as the plain loop, row for row."""
    from benchmarks.baselines import transformers_backend

    opened_max_length = json.loads((tiny["bundle"] / "manifest.json").read_text())["max_length"]
    texts = sorted(TEXTS, key=len, reverse=True)  # the longest first: sorting changes every chunk
    plain = transformers_backend(tiny["checkpoint"], opened_max_length, 1, 2)(texts)
    ordered = transformers_backend(tiny["checkpoint"], opened_max_length, 1, 2, sort_by_length=True)(texts)
    assert abs(plain - ordered).max() < 1e-4


def test_a_load_run_that_nothing_answered_fails_by_name():
    """Against a closed port every request fails: the run is an error naming the URL, not figures of
    nothing (its None percentiles crashed perf_bench's p99/p50)."""
    import asyncio

    from benchmarks import load_test
    from intentvcs.cli.commands.serve import free_port

    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(RuntimeError, match="none of the .* requests was answered"):
        asyncio.run(load_test.load(url, concurrency=1, duration_s=0.2))

