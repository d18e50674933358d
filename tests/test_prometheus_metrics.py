"""The service's own Prometheus series, counted in process (intentvcs.service.prometheus_metrics)."""

from __future__ import annotations

from prometheus_client import REGISTRY

from intentvcs.service.prometheus_metrics import get


def answer(parts: list[tuple[list[str], bool]]) -> dict:
    accepted = [intent for intents, _ in parts for intent in intents]
    return {"intents": [{"intent": "a", "confidence": 0.9}], "normalised": None, "out_of_scope": not accepted,
            "accepted": accepted, "parts": [{"accepted": intents, "out_of_scope": oos} for intents, oos in parts]}


def test_chained_answers_and_their_out_of_scope_parts_are_counted():
    metrics = get()
    metrics.bind_model(["a", "b"], {"name": "m", "bundle_digest": "sha256:0", "bundle_version": 5,
                                    "created_at": "now", "backbone": "tiny", "provider": "cpu",
                                    "quantized": False}, [])

    def value(name: str) -> float:
        return REGISTRY.get_sample_value(name) or 0.0

    before = {name: value(name) for name in ("intentvcs_chained_requests_total",
                                             "intentvcs_out_of_scope_parts_total")}
    metrics.record_predictions(["x", "y", "z"], [
        answer([(["a"], False)]),                       # one request: not chained
        answer([(["a"], False), (["b"], False)]),       # two requests
        answer([([], True), (["b"], False)]),           # a request and an out-of-scope part
    ])
    assert value("intentvcs_chained_requests_total") == before["intentvcs_chained_requests_total"] + 2
    assert value("intentvcs_out_of_scope_parts_total") == before["intentvcs_out_of_scope_parts_total"] + 1


def test_a_failed_reload_holds_the_failing_gauge_until_a_bundle_loads(tmp_path):
    """``intentvcs_model_reload_failing``: 0 from the start, 1 from a failed reload for as long as the broken
    bundle stays (it is not tried again until a file changes), 0 again once a bundle loads."""
    from prometheus_client import generate_latest

    from intentvcs.core.manifest import MANIFEST_FILE
    from intentvcs.service.reload import BundleWatcher

    def gauge() -> float | None:
        return REGISTRY.get_sample_value("intentvcs_model_reload_failing")

    get()  # the worker's metrics, made as the service starts
    assert gauge() == 0.0 and b"\nintentvcs_model_reload_failing 0.0\n" in generate_latest(REGISTRY)
    served = tmp_path / "bundle"
    served.mkdir()
    (served / MANIFEST_FILE).write_text("{}")
    loads = iter([ValueError("corrupt graph"), "the new model"])

    def load():
        outcome = next(loads)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    swapped, failed = [], []
    watcher = BundleWatcher(served, load, swapped.append, failed.append, interval_s=3600)
    (served / "model.onnx").write_bytes(b"not a graph")
    assert watcher.check() is False and len(failed) == 1
    assert gauge() == 1.0 and b"\nintentvcs_model_reload_failing 1.0\n" in generate_latest(REGISTRY)
    for _ in range(3):  # nothing changed: not tried again, and still failing
        assert watcher.check() is False
    assert gauge() == 1.0 and len(failed) == 1
    (served / "model.onnx").write_bytes(b"a whole graph, copied at last")
    assert watcher.check() is True and swapped == ["the new model"]
    assert gauge() == 0.0
