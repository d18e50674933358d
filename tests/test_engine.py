"""The ONNX engine: bucketing, answers, decision (OOS, relations), providers."""

from __future__ import annotations

import json
import os

import numpy as np
import onnxruntime as ort
import pytest

from intentvcs.core import manifest
from intentvcs.export.parity import SAMPLE_UTTERANCES
from intentvcs.service.engine import Engine, EngineError, default_threads
from intentvcs.core.length_buckets import length_buckets
from intentvcs.service.tokenization import pad_chunk
from tests.helpers.bundle import DEFAULT_LABELS, make_tiny_bundle

TEXTS = [
    "play the new album by daft punk on spotify in the living room please right now",
    "hi",
    "will it rain tomorrow",
    "book a table for two people tonight at the italian restaurant near the station",
    "rate this book",
    "",
    "find the movie schedule",
]
HAS_CUDA = "CUDAExecutionProvider" in ort.get_available_providers()


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return make_tiny_bundle(tmp_path_factory.mktemp("engine"), quantize=True)


@pytest.fixture(scope="module")
def engine(bundle):
    return Engine(bundle, provider="cpu")


def test_length_buckets_sort_by_length_and_keep_ties_in_order():
    chunks = [c.tolist() for c in length_buckets([5, 2, 9, 2, 5, 1], max_batch=4)]
    assert chunks == [[5, 1, 3, 0], [4, 2]]
    assert list(length_buckets([], max_batch=4)) == []


def test_length_buckets_cut_where_padding_costs_more_than_a_run():
    lengths = [3, 30, 4, 3, 31, 5, 29, 4]
    # Cut every 8: one chunk padded to 31 tokens (248 padded tokens for 109 real ones).
    assert [c.tolist() for c in length_buckets(lengths, max_batch=8)] == [[0, 3, 2, 7, 5, 6, 1, 4]]
    # A run costs 8 tokens: the short texts and the long ones go in separate runs (5 x 5 + 3 x 31 + 2 x 8).
    chunks = [c.tolist() for c in length_buckets(lengths, max_batch=8, run_cost_tokens=8)]
    assert chunks == [[0, 3, 2, 7, 5], [6, 1, 4]]
    # Every row once, chunks in ascending length, none over max_batch; a dear run keeps one chunk.
    assert [c.tolist() for c in length_buckets(lengths, max_batch=8, run_cost_tokens=1000)] == [[0, 3, 2, 7, 5, 6, 1, 4]]
    many = [c.tolist() for c in length_buckets(list(range(50, 0, -1)), max_batch=8, run_cost_tokens=2)]
    assert sorted(sum(many, [])) == list(range(50)) and max(map(len, many)) <= 8
    assert list(length_buckets([], max_batch=4, run_cost_tokens=8)) == []


def test_pad_chunk_pads_to_the_longest_in_the_chunk(engine):
    encodings = engine.bundle.tokenizer.encode(["hi", "play the new album"])
    feed = pad_chunk(encodings, engine.session.input_names, engine.bundle.tokenizer.pad_id)
    assert list(feed) == engine.session.input_names
    lengths = [len(e.ids) for e in encodings]
    assert feed["input_ids"].shape == (2, max(lengths)) and feed["input_ids"].dtype == np.int64
    assert feed["attention_mask"].sum(axis=1).tolist() == lengths
    assert (feed["input_ids"][0, lengths[0]:] == engine.bundle.tokenizer.pad_id).all()


def test_bucketed_results_come_back_in_input_order(bundle, engine):
    one_by_one = np.concatenate([engine.infer([t])[0] for t in TEXTS])
    # Chunks of 3 after sorting by length: every chunk mixes positions.
    logits, pooled, pooled_mid = Engine(bundle, provider="cpu", max_batch=3).infer(TEXTS).scores
    np.testing.assert_allclose(logits, one_by_one, atol=1e-5)
    assert pooled.shape == pooled_mid.shape == (len(TEXTS), engine.info["hidden_size"])


def test_truncation_at_max_length(engine):
    long_text = " ".join(["play music"] * 200)
    assert len(engine.bundle.tokenizer.encode([long_text])[0].ids) == engine.info["max_length"]


def test_empty_input(engine):
    logits, pooled, pooled_mid = engine.infer([]).scores
    assert logits.shape == (0, len(DEFAULT_LABELS))
    assert pooled.shape == pooled_mid.shape == (0, engine.info["hidden_size"])
    assert engine.predict([]) == []


def test_top_k(engine):
    ranked = engine.predict(TEXTS[:2], top_k=2)
    for answer in ranked:
        confidences = [i["confidence"] for i in answer["intents"]]
        assert len(confidences) == 2 and confidences == sorted(confidences, reverse=True)
    full = engine.predict(TEXTS[:2])
    assert all(len(a["intents"]) == len(DEFAULT_LABELS) for a in full)
    assert [a["intents"][:2] for a in full] == [a["intents"] for a in ranked]
    assert len(engine.predict(["hi"], top_k=99)[0]["intents"]) == len(DEFAULT_LABELS)
    with pytest.raises(ValueError):
        engine.predict(["hi"], top_k=0)


def test_answers_and_oos_verdicts(engine):
    answers = engine.predict(list(SAMPLE_UTTERANCES))
    for text, answer in zip(SAMPLE_UTTERANCES, answers):
        assert set(answer) == {"text", "normalised", "intents", "accepted", "parts", "entities", "out_of_scope",
                               "oos"}
        # Every accepted intent sits in a part, a span of the text as sent.
        assert {i for part in answer["parts"] for i in part["accepted"]} == set(answer["accepted"])
        assert all(part["text"] == text[part["start"]:part["end"]] for part in answer["parts"])
        assert answer["entities"] == []  # an intent-only bundle
        assert answer["text"] == text and answer["normalised"] is None  # no normaliser in this bundle
        assert isinstance(answer["out_of_scope"], bool)
        oos = answer["oos"]
        assert set(oos) == {"rule", "score", "threshold"} and oos["rule"] == "threshold"
        assert answer["out_of_scope"] == (oos["score"] > oos["threshold"])
        assert not (answer["out_of_scope"] and answer["accepted"])
        confidence = {i["intent"]: i["confidence"] for i in answer["intents"]}
        assert all(confidence[label] >= 0.3 for label in answer["accepted"])
    # The test checkpoint's decision is built to produce both verdicts here.
    verdicts = {a["out_of_scope"] for a in answers}
    assert verdicts == {True, False}


def test_relation_closure_is_applied(tmp_path, engine):
    relations = {
        "format": "intentvcs-relations", "format_version": 1, "labels": list(DEFAULT_LABELS),
        "relations": [{"type": "subset", "child": "SearchCreativeWork", "parent": "PlayMusic"}],
        "families": {}, "details": {},
    }
    closed = Engine(make_tiny_bundle(tmp_path, relations=relations), provider="cpu")
    texts = list(SAMPLE_UTTERANCES)
    plain = engine.predict(texts)  # same seed: same weights, no relations
    child_accepted = 0
    for before, after in zip(plain, closed.predict(texts)):
        expected = set(before["accepted"])
        if "SearchCreativeWork" in expected:
            expected.add("PlayMusic")
            child_accepted += 1
        assert set(after["accepted"]) == expected
    assert child_accepted > 0


def test_bare_string_is_rejected(engine):
    with pytest.raises(TypeError):
        engine.predict("play music")


def test_texts_may_come_from_an_iterator_and_a_broken_one_is_named(engine):
    """An iterator is answered in full (the type check used to consume it: no answers); a lone surrogate is a
    ValueError naming the row (the tokenizer's TypeError named neither)."""
    texts = ["play some jazz", "book a table"]
    assert engine.predict(iter(texts)) == engine.predict(texts)
    assert len(engine.infer(text for text in texts).logits) == 2
    with pytest.raises(ValueError, match=r"texts\[1\] holds a lone surrogate"):
        engine.predict(["fine", "\ud800x"])
    with pytest.raises(TypeError, match=r"texts\[0\] is int"):
        engine.predict([3])


def test_info(engine, bundle):
    info = engine.info
    assert info["bundle_version"] == manifest.FORMAT_VERSION and info["labels"] == len(DEFAULT_LABELS)
    # Named by content, never by the server's path.
    assert info["bundle_digest"] == json.loads((bundle / "manifest.json").read_text())["digest"]
    assert str(bundle) not in json.dumps(info)
    assert info["spelling_words"] is None  # the fixture bundle was exported without one
    assert info["support_noise"] is None and info["support_intents"] is None  # thresholds decide
    assert info["provider"] == "CPUExecutionProvider" and info["backbone"] == "tiny-random-bert"
    assert Engine(bundle, provider="cpu", quantized="on").info["model_file"] == "model.int8.onnx"


def test_threads(bundle, monkeypatch):
    """An engine outside the service takes every core, whatever the service's worker setting says (the
    service passes each worker's share itself)."""
    monkeypatch.setenv("INTENTVCS_WORKERS", "2")
    from intentvcs.service.settings import usable_cores

    assert default_threads() == usable_cores()
    assert Engine(bundle, provider="cpu").info["threads"] == usable_cores()
    assert Engine(bundle, provider="cpu", threads=1).info["threads"] == 1


def test_the_defaults_count_the_cores_the_process_may_use(monkeypatch):
    """Under ``taskset -c 0`` (or a cpuset, a pod's dedicated cores) on a 2-core machine the defaults took 2
    workers (``os.cpu_count()``), two processes on one core."""
    from intentvcs.service import onnx_session
    from intentvcs.service.settings import Settings

    monkeypatch.delenv("INTENTVCS_WORKERS", raising=False)
    monkeypatch.delenv("INTENTVCS_THREADS", raising=False)
    monkeypatch.setenv("INTENTVCS_PROVIDER", "cpu")
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert onnx_session.default_workers("cpu") == onnx_session.default_threads() == 1
    settings = Settings.from_env()
    assert (settings.workers, settings.threads) == (1, 1)


@pytest.mark.parametrize("files, cores", [
    ({"cpu.max": "200000 100000\n"}, 2),                                 # cgroup v2: docker --cpus 2
    ({"cpu.max": "150000 100000\n"}, 2),                                 # 1.5 CPUs: rounded up
    ({"cpu.max": "max 100000\n"}, 8),                                    # no limit
    ({"cpu/cpu.cfs_quota_us": "100000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1),  # cgroup v1
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, 8),      # v1, no limit
    ({}, 8),                                                             # no cgroup files
    ({"cpu/cpu.cfs_quota_us": b"\xff\xfe", "cpu/cpu.cfs_period_us": "100000\n"}, 8),  # no text: no limit
], ids=["v2-two", "v2-one-and-a-half", "v2-max", "v1-one", "v1-none", "none", "v1-bytes"])
def test_the_defaults_stay_within_the_containers_cpu_limit(files, cores, monkeypatch, tmp_path):
    """In a container limited to 2 CPUs of a 64-core host the defaults counted the host's cores."""
    from intentvcs.service import onnx_session, settings

    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    monkeypatch.setattr(settings, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    assert settings.usable_cores() == onnx_session.default_workers("cpu") == cores


def test_default_workers_and_threads_share_the_cores(monkeypatch, tmp_path):
    """One worker per core with one thread each on CPU; one worker when CUDA will be used."""
    from intentvcs.service import onnx_session, settings as settings_module
    from intentvcs.service.settings import Settings

    monkeypatch.setattr(settings_module, "CGROUP_ROOT", tmp_path)  # no container limit, wherever this runs

    monkeypatch.delenv("INTENTVCS_WORKERS", raising=False)
    monkeypatch.delenv("INTENTVCS_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr(onnx_session.ort, "get_available_providers", lambda: ["CPUExecutionProvider"])
    assert onnx_session.default_workers() == 8
    monkeypatch.setattr(onnx_session.ort, "get_available_providers",
                        lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert onnx_session.default_workers() == 1 and onnx_session.default_workers("cpu") == 8
    monkeypatch.setenv("INTENTVCS_PROVIDER", "cpu")
    settings = Settings.from_env()
    assert (settings.workers, settings.threads) == (8, 1)
    monkeypatch.setenv("INTENTVCS_WORKERS", "2")
    assert (Settings.from_env().workers, Settings.from_env().threads) == (2, 4)


def test_pipelined_runs_answer_as_sequential_ones(bundle):
    # The CUDA path's pipeline (graph runs on a worker thread, host work between), run here on the CPU.
    import concurrent.futures

    sequential = Engine(bundle, provider="cpu", quantized="off", max_batch=3)
    pipelined = Engine(bundle, provider="cpu", quantized="off", max_batch=3)
    pipelined.session._gpu_worker = concurrent.futures.ThreadPoolExecutor(1)
    texts = list(SAMPLE_UTTERANCES)
    for expected, got in zip(sequential.infer(texts), pipelined.infer(texts)):
        np.testing.assert_array_equal(expected, got)


def test_provider_choices(bundle):
    with pytest.raises(ValueError, match="provider"):
        Engine(bundle, provider="tpu")
    if not HAS_CUDA:
        with pytest.raises(EngineError, match="cuda"):
            Engine(bundle, provider="cuda")
        assert Engine(bundle, provider="auto").provider == "CPUExecutionProvider"


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="onnxruntime reports no CUDAExecutionProvider")
def test_cuda_matches_cpu(bundle):
    gpu, cpu = Engine(bundle, provider="cuda"), Engine(bundle, provider="cpu", quantized="off")
    # On CUDA, auto serves the fp32 graph (the int8 one is quantised for CPUs).
    assert (gpu.provider, gpu.info["model_file"]) == ("CUDAExecutionProvider", "model.onnx")
    texts = list(SAMPLE_UTTERANCES)
    np.testing.assert_allclose(gpu.infer(texts)[0], cpu.infer(texts)[0], atol=1e-3)
    assert [a["accepted"] for a in gpu.predict(texts)] == [a["accepted"] for a in cpu.predict(texts)]


def test_a_cuda_build_that_cannot_start_cuda_says_so(bundle, monkeypatch, caplog):
    """onnxruntime-gpu on a machine whose CUDA cannot start: auto serves on CPU loudly, cuda refuses."""
    from intentvcs.service import onnx_session

    # As onnxruntime-gpu reports it: CUDA offered; the session still starts on CPU only (as
    # it does where CUDA cannot start, made so here also on a machine where it can).
    monkeypatch.setattr(onnx_session.ort, "get_available_providers",
                        lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    cpu_only = onnx_session.ort.InferenceSession
    monkeypatch.setattr(onnx_session.ort, "InferenceSession",
                        lambda path, options, providers, **kwargs: cpu_only(path, options,
                                                                            providers=[onnx_session.CPU], **kwargs))
    with caplog.at_level("ERROR", logger="intentvcs.service.onnx_session"):
        engine = Engine(bundle, provider="auto")
    assert engine.provider == "CPUExecutionProvider"
    assert "could not start it" in engine.info["cuda_fallback"]
    assert any("SERVING ON CPUExecutionProvider" in r.message for r in caplog.records)
    with pytest.raises(EngineError, match="provider 'cuda' requested but ONNX Runtime started CPUExecutionProvider"):
        Engine(bundle, provider="cuda")
    monkeypatch.undo()
    assert Engine(bundle, provider="auto").info["cuda_fallback"] is None  # a CPU build falls back to nothing
