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
