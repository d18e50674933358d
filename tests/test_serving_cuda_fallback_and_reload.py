"""Second review of the model-serving core (reload, bundle, engine, session): defects found and reproduced."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from intentvcs.core.manifest import MANIFEST_FILE, read, seal
from tests.helpers.bundle import export_over, make_tiny_bundle


@pytest.fixture(scope="module")
def gated_int8_bundle(tmp_path_factory) -> Path:
    """A bundle whose int8 graph passed its accuracy gate: ``auto`` serves it on CPU, fp32 on CUDA."""
    bundle = make_tiny_bundle(tmp_path_factory.mktemp("gated"), quantize=True)
    manifest = json.loads((bundle / MANIFEST_FILE).read_text())
    manifest["quantization"]["gate"] = {"rows": 10, "figures": {"accuracy": {"passed": True}}, "passed": True}
    (bundle / MANIFEST_FILE).write_text(json.dumps(seal(manifest)))
    read(bundle / MANIFEST_FILE)  # still a valid manifest
    return bundle


def test_a_cuda_build_whose_cuda_cannot_start_serves_as_a_cpu_does(gated_int8_bundle, monkeypatch, caplog):
    """onnxruntime-gpu whose CUDA cannot start falls back to the CPU (loudly), but the engine kept what it had
    chosen for CUDA: the fp32 graph with CUDA's fusions (SkipLayerNormalization, 4-5x slower on CPU), and
    /status and the log said "fp32 on CUDA" of a graph running on the CPU."""
    from intentvcs.service import onnx_session
    from intentvcs.service.engine import Engine

    monkeypatch.setattr(onnx_session.ort, "get_available_providers",
                        lambda: [onnx_session.CUDA, onnx_session.CPU])
    started = []
    real_session = onnx_session.ort.InferenceSession

    def cuda_fails_to_start(path, options, providers, **kwargs):  # as ORT does where CUDA cannot start
        started.append((Path(path).name, kwargs.get("disabled_optimizers")))
        return real_session(path, options, providers=[onnx_session.CPU], **kwargs)

    monkeypatch.setattr(onnx_session.ort, "InferenceSession", cuda_fails_to_start)
    with caplog.at_level("INFO"):
        engine = Engine(gated_int8_bundle, provider="auto", threads=1)
    info = engine.info
    assert info["provider"] == onnx_session.CPU
    assert "could not start it" in info["cuda_fallback"]  # still reported: /status, intentvcs_model_info
    assert any("SERVING ON CPUExecutionProvider" in r.message for r in caplog.records)
    # What a CPU engine serves: the gated int8 graph, with the CPU's session settings.
    assert (info["model_file"], info["quantized"]) == ("model.int8.onnx", True)
    assert "CUDA" not in info["graph_reason"]
    assert started[-1] == ("model.int8.onnx", onnx_session.CPU_DISABLED_FUSIONS)
    [served] = [r.message for r in caplog.records if r.message.startswith("engine: serving")]
    assert "on CUDA" not in served and "model.int8.onnx" in served
    plain_cpu = Engine(gated_int8_bundle, provider="cpu", threads=1)
    assert [a["intents"] for a in engine.predict(["play some music"])] == \
        [a["intents"] for a in plain_cpu.predict(["play some music"])]


def test_a_served_folder_left_without_its_manifest_is_reported_as_failing(tmp_path):
    """A folder without manifest.json was taken for the instant between the two renames of a replacement
    (where the folder itself is missing): never loaded, never counted, intentvcs_model_reload_failing
    left at 0 however long the broken folder stayed, though no worker could start on it."""
    from intentvcs.core.manifest import BundleError
    from intentvcs.service.engine import Engine
    from intentvcs.service.reload import BundleWatcher

    served = tmp_path / "served"
    shutil.copytree(make_tiny_bundle(tmp_path / "model"), served)
    swapped, failed, failing = [], [], []
    watcher = BundleWatcher(served, lambda: Engine(served, provider="cpu", threads=1), swapped.append,
                            failed.append, interval_s=3600, failing=failing.append)
    manifest = (served / MANIFEST_FILE).read_bytes()
    (served / MANIFEST_FILE).unlink()  # a copy without it, or a clean-up gone wrong
    assert watcher.check() is False
    assert [type(exc) for exc in failed] == [BundleError] and "manifest.json" in str(failed[0])
    assert failing == [True]
    for _ in range(2):  # not tried again until a file changes
        assert watcher.check() is False
    assert len(failed) == 1 and failing == [True]
    (served / MANIFEST_FILE).write_bytes(manifest)  # put back: loads, and the gauge goes back to 0
    assert watcher.check() is True and len(swapped) == 1 and failing == [True, False]


def test_a_folder_between_the_renames_of_a_replacement_is_not_a_failure(tmp_path):
    """The other side of the test above: while the folder itself is missing (an export's two renames), the
    watcher waits for the next round; nothing is loaded or counted."""
    from intentvcs.service.reload import BundleWatcher

    served = tmp_path / "served"
    served.mkdir()
    (served / MANIFEST_FILE).write_text("{}")
    loads = []
    watcher = BundleWatcher(served, lambda: loads.append(1), lambda model: None, lambda exc: None,
                            interval_s=3600, failing=lambda failing: None)
    served.rename(tmp_path / "aside")
    assert watcher.check() is False and loads == []


def test_an_audit_reads_the_sample_of_the_bundle_it_serves_after_the_folder_is_replaced(tmp_path):
    """The engine read references.jsonl by the served folder's path when an audit asked for it: once an export
    had replaced the folder (before the swap, for all of a long audit job, or for good where the new bundle
    cannot load and the old one goes on serving), the audit read the next bundle's file against its own
    manifest and failed with a BundleError, a 500."""
    from intentvcs.service.audit import audit_batch
    from intentvcs.service.engine import Engine

    first = make_tiny_bundle(tmp_path / "first", references=[{"text": "play a song", "labels": ["PlayMusic"]}])
    second = make_tiny_bundle(tmp_path / "second", seed=1,
                              references=[{"text": "book a table", "labels": ["BookRestaurant"]},
                                          {"text": "a table for two", "labels": ["BookRestaurant"]}])
    served = tmp_path / "served"
    shutil.copytree(first, served)
    engine = Engine(served, provider="cpu", threads=1)
    export_over(second, served)
    assert [row.text for row in engine.reference_rows()] == ["play a song"]  # its own bundle's sample
    rows = [{"text": text, "labels": ["Lights"]} for text in ("turn on the lights", "lights off", "dim the lamp")]
    report = audit_batch(engine, rows, None).to_dict()
    assert report["engine"]["bundle_digest"] == read(first / MANIFEST_FILE)["digest"]


def test_a_dangling_link_in_the_folder_does_not_stop_the_watch(tmp_path):
    """An editor's lock file (a link to nowhere) failed the stat of every round: no export was noticed."""
    from intentvcs.service.reload import BundleWatcher

    served = tmp_path / "served"
    served.mkdir()
    (served / MANIFEST_FILE).write_text("{}")
    (served / ".#manifest.json").symlink_to(tmp_path / "nowhere")
    loads = []
    watcher = BundleWatcher(served, lambda: loads.append(1), lambda model: None, lambda exc: None,
                            interval_s=3600, failing=lambda failing: None)
    (served / MANIFEST_FILE).write_text('{"name": "next"}')
    assert watcher.check() is True and loads == [1]


def test_a_round_that_fails_does_not_end_the_watch(tmp_path, caplog):
    """A round that raised (here the gauge's report) ended the watcher's thread: every later export went
    unserved."""
    import threading
    import time

    from intentvcs.service.reload import BundleWatcher

    served = tmp_path / "served"
    served.mkdir()
    (served / MANIFEST_FILE).write_text("{}")
    swaps, reports, second = [], [], threading.Event()

    def report(failing):
        reports.append(failing)
        if len(reports) == 1:
            raise RuntimeError("the first report fails")
        second.set()

    watcher = BundleWatcher(served, lambda: object(), swaps.append, lambda exc: None, interval_s=0.05,
                            failing=report)
    watcher.start()
    try:
        (served / MANIFEST_FILE).write_text('{"n": 1}')
        deadline = time.monotonic() + 10
        while not reports and time.monotonic() < deadline:
            time.sleep(0.02)
        (served / MANIFEST_FILE).write_text('{"n": 22}')
        assert second.wait(10), "the watch ended with the failed round"
    finally:
        watcher.stop()
    assert len(swaps) == 2
    assert "the bundle watch of" in caplog.text and "the first report fails" in caplog.text


def test_a_swap_that_fails_is_reported_as_a_failed_load(tmp_path):
    """The old model goes on serving; the failure is counted and the gauge set (it was one log line)."""
    from intentvcs.service.reload import BundleWatcher

    served = tmp_path / "served"
    served.mkdir()
    (served / MANIFEST_FILE).write_text("{}")
    failed, failing = [], []

    def swap(model):
        raise RuntimeError("warm-up failed")

    watcher = BundleWatcher(served, lambda: object(), swap, failed.append, interval_s=3600, failing=failing.append)
    (served / MANIFEST_FILE).write_text('{"n": 1}')
    assert watcher.check() is False
    assert [str(exc) for exc in failed] == ["warm-up failed"] and failing == [True]
    assert watcher.check() is False and len(failed) == 1  # one error, not one per round, until a file changes


@pytest.mark.parametrize("broken", ["self", "through_a_file"])
def test_a_link_to_itself_or_through_a_file_does_not_stop_the_watch(tmp_path, broken):
    from intentvcs.service.reload import BundleWatcher

    served = tmp_path / "served"
    served.mkdir()
    (served / MANIFEST_FILE).write_text("{}")
    link = served / ".#lock"
    link.symlink_to(link if broken == "self" else served / MANIFEST_FILE / "x")
    loads = []
    watcher = BundleWatcher(served, lambda: loads.append(1), lambda model: None, lambda exc: None,
                            interval_s=3600, failing=lambda failing: None)
    (served / MANIFEST_FILE).write_text('{"name": "next"}')
    assert watcher.check() is True and loads == [1]
