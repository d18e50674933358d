"""Review of how the service loads, reloads and is configured: defects found and reproduced."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

from intentvcs.core.manifest import MANIFEST_FILE, BundleError, read, seal
from tests.helpers.bundle import export_over, make_tiny_bundle

TEXTS = ["play some music", "book a table for two", "will it rain tomorrow", "rate this book", "find dune"]


@pytest.fixture(scope="module")
def two_bundles(tmp_path_factory):
    """Two bundles with the same label count (so the graph passes check_graph against either manifest)
    but different labels and weights."""
    root = tmp_path_factory.mktemp("review")
    first = make_tiny_bundle(root / "first", seed=0)
    second = make_tiny_bundle(root / "second", seed=1, labels=("Alpha", "Beta", "Gamma", "Delta", "Epsilon"))
    return first, second


def _ranked(engine) -> list[list[tuple[str, float]]]:
    return [[(i["intent"], round(i["confidence"], 5)) for i in answer["intents"]]
            for answer in engine.predict(TEXTS, top_k=5)]


def test_a_folder_replaced_while_a_reload_loads_it_never_swaps_in_a_mix_of_two_bundles(tmp_path, two_bundles,
                                                                                        monkeypatch):
    """The manifest (labels, decision) is read from one folder and the graph, by path, from its replacement:
    such an engine must not serve; the watcher loads again once the folder holds still."""
    from intentvcs.service import engine as engine_module
    from intentvcs.service.engine import Engine
    from intentvcs.service.reload import BundleWatcher

    first, second = two_bundles
    served = tmp_path / "served"
    shutil.copytree(first, served)
    swapped, failures = [], []
    watcher = BundleWatcher(served, lambda: Engine(served, provider="cpu", threads=1), swapped.append,
                            failures.append, interval_s=1, failing=lambda failing: None)

    # An export of `second` renames its folder over the served one...
    export_over(second, served)
    # ...and, while the worker loads it, an export of `first` replaces it again (after the manifest was
    # read and checked, before ONNX Runtime opens model.onnx by its path).
    real_session = engine_module.OnnxSession
    replaced = threading.Event()

    def session_after_another_export(*args, **kwargs):
        if not replaced.is_set():
            replaced.set()
            export_over(first, served)
        return real_session(*args, **kwargs)

    monkeypatch.setattr(engine_module, "OnnxSession", session_after_another_export)
    watcher.check()
    assert replaced.is_set()
    watcher.check()  # the folder holds still now
    assert swapped and not failures
    clean = {name: Engine(bundle, provider="cpu", threads=1) for name, bundle in (("first", first),
                                                                                  ("second", second))}
    for engine in swapped:  # every engine that served is whole: its labels go with its graph
        name = "first" if engine.info["bundle_digest"] == clean["first"].info["bundle_digest"] else "second"
        assert _ranked(engine) == _ranked(clean[name]), f"a swapped-in engine mixes {name}'s manifest with " \
                                                        "the other bundle's graph"
    assert swapped[-1].info["bundle_digest"] == clean["first"].info["bundle_digest"]  # what the folder holds


def _gated_int8_bundle(tmp_path) -> Path:
    """A bundle whose int8 graph passed its accuracy gate: ``auto`` serves it on CPU, fp32 on CUDA."""
    bundle = make_tiny_bundle(tmp_path, quantize=True)
    manifest = json.loads((bundle / MANIFEST_FILE).read_text())
    manifest["quantization"]["gate"] = {"rows": 10, "figures": {"accuracy": {"passed": True}}, "passed": True}
    (bundle / MANIFEST_FILE).write_text(json.dumps(seal(manifest)))
    read(bundle / MANIFEST_FILE)  # still a valid manifest
    return bundle


def test_serve_checks_the_graph_a_cuda_worker_will_load(tmp_path, monkeypatch):
    """On a CUDA machine ``auto`` serves model.onnx (GPU_INT8_REASON); ``intentvcs serve``'s check must hash
    that graph, not the int8 one a CPU would serve, or a corrupt fp32 graph passes the check and every
    worker then fails to load it, restarted by BentoML forever."""
    from intentvcs.cli.commands.serve import service_env
    from intentvcs.service import onnx_session
    from intentvcs.service.bundle import serving_graph

    bundle = _gated_int8_bundle(tmp_path)
    manifest = read(bundle / MANIFEST_FILE)
    assert serving_graph(manifest, "auto", gpu=False)[0] == "model.int8.onnx"
    assert serving_graph(manifest, "auto", gpu=True)[0] == "model.onnx"
    graph = bundle / "model.onnx"
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes
    graph.write_bytes(bytes(data))

    monkeypatch.setattr(onnx_session.ort, "get_available_providers",
                        lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    monkeypatch.delenv("INTENTVCS_QUANTIZED", raising=False)
    with pytest.raises(BundleError, match="model.onnx.*sha256 does not match"):
        service_env(bundle, 3999, workers=1, provider="auto", home=tmp_path / "home")


def test_a_reload_interval_the_watcher_cannot_wait_is_refused_with_its_name():
    """threading's wait takes at most TIMEOUT_MAX seconds: a larger interval was accepted and then killed the
    watcher thread with an OverflowError traceback, silently ending reloads for the worker's life."""
    from intentvcs.service.settings import Settings

    with pytest.raises(ValueError, match=r"INTENTVCS_RELOAD_INTERVAL_S=99999999999 is above its maximum"):
        Settings.from_env({"INTENTVCS_PROVIDER": "cpu", "INTENTVCS_RELOAD_INTERVAL_S": "99999999999"})
    assert Settings.from_env({"INTENTVCS_PROVIDER": "cpu", "INTENTVCS_RELOAD_INTERVAL_S": "86400"}) \
        .reload_interval_s == 86400


def test_a_manifest_with_nan_is_a_bundle_error_naming_the_file(tmp_path):
    """json.loads takes NaN and Infinity, the digest's canonical JSON does not: a plain ValueError
    ("Out of range float values are not JSON compliant") that names neither the file nor the field."""
    bundle = make_tiny_bundle(tmp_path)
    path = bundle / MANIFEST_FILE
    text = path.read_text()
    path.write_text(text.replace('"evaluation": {', '"evaluation": {"auroc": NaN, ', 1))
    assert path.read_text() != text
    with pytest.raises(BundleError, match=r"manifest\.json.*NaN"):
        read(path)


# -- a swap between the batches of one request ---------------------------------------------------------------

class _NamedEngine:
    """An engine whose answers say which engine gave them."""

    def __init__(self, name: str):
        self.name, self.calls = name, 0

    def predict(self, texts, top_k=None):
        self.calls += 1
        return [{"text": text, "normalised": None, "by": self.name, "accepted": [], "entities": [], "parts": [],
                 "out_of_scope": False, "intents": [{"intent": "a", "confidence": 1.0}] * 3} for text in texts]


def test_each_utterance_is_answered_by_the_engine_its_request_read():
    """The batch queue called the engine serving when a batch ran: a request whose utterances fell into two
    batches, a swap between them, was answered half by one bundle and half by the next."""
    from intentvcs.service.app import predict_jobs

    old, new = _NamedEngine("old"), _NamedEngine("new")
    answers = predict_jobs([("play jazz", 1, old), ("stop", 2, old), ("lights off", 1, new)])
    assert [answer["by"] for answer in answers] == ["old", "old", "new"]
    assert [len(answer["intents"]) for answer in answers] == [1, 2, 1]  # each its own request's top_k
    assert (old.calls, new.calls) == (1, 1)


def test_the_model_header_names_the_bundle_that_answered():
    """The header was read from the service when the answer started: an answer computed by the old engine
    and sent just after a swap named the new bundle."""
    import asyncio

    from intentvcs.service.identity import ANSWERED_BY, HEADER, ModelHeader

    async def handler(scope, receive, send):  # as DirectRoutes: the request's own handler chose the engine
        ANSWERED_BY.set(b"old@sha256:000000000000")
        await send({"type": "http.response.start", "status": 200, "headers": []})

    sent = []

    async def send(message):
        sent.append(message)

    async def request():
        await ModelHeader(handler, routes=["/predict"])({"type": "http", "path": "/predict"}, None, send)

    asyncio.run(request())
    assert (HEADER.encode(), b"old@sha256:000000000000") in sent[0]["headers"]


def test_an_empty_bundle_setting_is_the_default():
    """INTENTVCS_BUNDLE="" was taken as the path "" (a worker then failed on a relative "manifest.json:
    missing" naming no variable), where every other setting reads empty as its default."""
    from intentvcs.service.settings import Settings

    assert Settings.from_env({"INTENTVCS_BUNDLE": ""}).bundle == Settings.bundle
    assert Settings.from_env({"INTENTVCS_BUNDLE": "  "}).bundle == Settings.bundle
