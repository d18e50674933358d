"""Serving internals review: each test failed on the code before its fix.

- BentoML's request-duration histogram (``bentoml_service_request_duration_seconds``, the dashboard's
  /predict p50 / p95 / p99 and the alert ``IntentvcsHighLatencyP99``) kept BentoML's default buckets, whose
  first bound is 5 ms: the service's p50 of ~2 ms read as 2.5 ms whatever it was, and its p99 of ~10 ms was
  interpolated across 5-10 and 10-25 ms.
- A bundle file replaced between its check (sha256 against the manifest) and its use (ONNX Runtime reading the
  graph) was served under the manifest, and so under the digest, of the bundle checked: the answers of one
  graph went out named, calibrated and decided as another's.
- After a swap, the utterances still answered by the previous bundle were not counted in
  ``intentvcs_predictions_total`` for an intent the new bundle lacks, though that series exists.
- A bundle name with a leading space gave an ``X-Intentvcs-Model`` header that HTTP clients read without it
  (a field value's edge whitespace is no part of it), so the header and ``/status``'s ``model`` disagreed.

Guards that pass before and after a fix, so that it goes no further than the defect: an operator's own
duration buckets are kept, an unchanged bundle still loads, and a trailing space or a tab (encoded already).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import pytest


# ------------------------------------------------ latency buckets
def _bounds_around(buckets, target):
    below = [b for b in buckets if b <= target]
    above = [b for b in buckets if b >= target]
    return (max(below) if below else None), (min(above) if above else None)


def _request_duration_buckets(monkeypatch, configured=None) -> tuple:
    """The buckets BentoML's request metrics are made with, as the service's worker makes them (``configured``:
    an operator's api_server.metrics.duration, where set)."""
    from bentoml._internal.configuration.containers import BentoMLContainer
    from bentoml._internal.server.http.instruments import RunnerTrafficMetricsMiddleware

    from intentvcs.service import prometheus_metrics

    monkeypatch.setattr(prometheus_metrics, "known_routes", lambda: frozenset({"/predict"}))
    made = {}

    class Client:
        def __getattr__(self, kind):
            def make(**kwargs):
                made[kwargs["name"]] = kwargs
                return object()
            return make

    prometheus_metrics.bound_request_endpoints()
    with BentoMLContainer.duration_buckets.patch(configured) if configured else contextlib.nullcontext():
        RunnerTrafficMetricsMiddleware(app=None, namespace="bentoml_service")._setup(metrics_client=Client())
    return made["request_duration_seconds"]["buckets"]


def test_request_duration_buckets_resolve_the_services_latency_targets(monkeypatch):
    """A p50 of ~2 ms and a p99 of ~10 ms each fall between bounds at most 1.5 times apart, and the alert's 0.5 s
    is a bound (a threshold between two bounds is judged by interpolation)."""
    buckets = _request_duration_buckets(monkeypatch)
    for target in (0.002, 0.010):
        low, high = _bounds_around(buckets, target)
        assert low is not None and high is not None and high / low <= 1.5, (target, buckets)
    assert 0.5 in buckets and buckets[-1] == float("inf")


def test_request_duration_buckets_an_operator_configured_are_kept(monkeypatch):
    """A guard: BentoML's api_server.metrics.duration, where set, still decides."""
    configured = (0.1, 1.0, float("inf"))
    assert _request_duration_buckets(monkeypatch, configured) == configured


# ------------------------------------------------ a bundle changed between check and use
@pytest.fixture(scope="module")
def tiny_bundle(tmp_path_factory) -> Path:
    from tests.helpers.bundle import make_tiny_bundle

    return make_tiny_bundle(tmp_path_factory.mktemp("review") / "a", seed=0)


def _another_graph(graph: Path, out: Path) -> None:
    """``graph`` with its intent head's weights changed: a valid graph of the same shapes, other answers."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(graph))
    for index, initializer in enumerate(model.graph.initializer):
        values = numpy_helper.to_array(initializer)
        if values.dtype == np.float32 and values.ndim == 2:
            model.graph.initializer[index].CopyFrom(numpy_helper.from_array(values[::-1].copy() * 3,
                                                                            initializer.name))
    onnx.save(model, str(out))


def test_a_graph_replaced_between_its_check_and_its_load_is_not_served(tiny_bundle, tmp_path, monkeypatch):
    """The graph is replaced (a rename over it, as a copy tool or an export does) after open_bundle hashed it and
    before ONNX Runtime reads it: the engine must refuse to start, not serve the new graph under the old
    manifest's digest, decision and name."""
    from intentvcs.core.manifest import MODEL_FILE, BundleError
    from intentvcs.service import engine as engine_module

    served = tmp_path / "served"
    shutil.copytree(tiny_bundle, served)
    staged = tmp_path / "other.onnx"
    _another_graph(served / MODEL_FILE, staged)
    real = engine_module.OnnxSession
    replaced = []

    def session_after_a_replacement(model_path, *args, **kwargs):
        if not replaced:
            os.replace(staged, model_path)
            replaced.append(model_path)
        return real(model_path, *args, **kwargs)

    monkeypatch.setattr(engine_module, "OnnxSession", session_after_a_replacement)
    with pytest.raises(BundleError, match="changed"):
        engine_module.Engine(served, provider="cpu", threads=1)
    assert replaced


def test_an_unchanged_bundle_still_loads(tiny_bundle):
    """A guard: the stamps of files nobody touched compare equal once the graph is loaded."""
    from intentvcs.service.engine import Engine

    engine = Engine(tiny_bundle, provider="cpu", threads=1)
    assert len(engine.predict(["play some jazz"])) == 1


# ------------------------------------------------ intents of the bundle swapped out
def test_answers_of_the_previous_bundle_are_counted_after_a_swap():
    from prometheus_client import REGISTRY

    from intentvcs.service.prometheus_metrics import get

    metrics = get()
    info = {"name": "m", "bundle_digest": "sha256:0", "bundle_version": 5, "created_at": "now",
            "backbone": "tiny", "provider": "cpu", "quantized": False}
    metrics.bind_model(["review_old_only", "review_both"], info, [])
    metrics.bind_model(["review_both", "review_new_only"], {**info, "bundle_digest": "sha256:1"}, [])

    def count(intent: str) -> float:
        return REGISTRY.get_sample_value("intentvcs_predictions_total", {"intent": intent}) or 0.0

    before = count("review_old_only")
    # An utterance of a request that read the previous engine, answered after the swap.
    metrics.record_predictions(["x"], [{"intents": [{"intent": "review_old_only", "confidence": 0.9}],
                                        "normalised": None, "out_of_scope": False,
                                        "accepted": ["review_old_only"],
                                        "parts": [{"accepted": ["review_old_only"], "out_of_scope": False}]}])
    assert count("review_old_only") == before + 1
    metrics.record_predictions(["y"], [{"intents": [], "normalised": None, "out_of_scope": False,
                                        "accepted": ["never_bound"], "parts": [{}]}])
    assert REGISTRY.get_sample_value("intentvcs_predictions_total", {"intent": "never_bound"}) is None


# ------------------------------------------------ the model header
@pytest.mark.parametrize("name", [" prod", "prod ", "  ", "\tprod"])
def test_the_model_header_keeps_a_names_edge_whitespace(name):
    """What a client reads is the field value without its edge whitespace (RFC 9110 5.5; h11 and httptools'
    clients strip it): the name's must be encoded, so that the header equals /status's ``model``."""
    from urllib.parse import unquote

    from intentvcs.service.identity import header_value

    value = header_value({"name": name, "bundle_digest": "sha256:" + "ab" * 32})
    assert value == value.strip(" \t")
    assert unquote(value.rpartition("@")[0]) == name
    assert value.endswith("@sha256:" + "ab" * 6)
