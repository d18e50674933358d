"""``direct_routes``: the ASGI step that answers /predict and /model/parse in front of BentoML's IO layer.

The HTTP suites (test_service, test_rasa_parse, test_service_hardening, test_schemathesis) hold
these routes to the API contract through a real server; here are the paths a healthy server
cannot be made to take on demand: a full queue, a failing handler, a client that leaves.
"""

from __future__ import annotations

import asyncio
import json
import logging

import bentoml
import pytest
from bentoml.exceptions import ServiceUnavailable
from pydantic import BaseModel

from intentvcs.service import direct_routes
from intentvcs.service.direct_routes import DirectRoutes
from intentvcs.service.schemas import PredictRequest


class Answer(BaseModel):
    texts: list[str]
    top_k: int


class FakeService:
    def __init__(self, fail: Exception | None = None):
        self.fail = fail
        self.calls: list[PredictRequest] = []

    async def answer(self, request: PredictRequest) -> Answer:
        self.calls.append(request)
        if self.fail is not None:
            raise self.fail
        return Answer(texts=request.texts, top_k=request.top_k)


def call(middleware, method: str, path: str, chunks: list[bytes] | None):
    """Run one ASGI request; ``chunks`` None: the client disconnects before sending a body."""
    incoming = ([{"type": "http.disconnect"}] if chunks is None else
                [{"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
                 for i, chunk in enumerate(chunks)])
    sent = []

    async def receive():
        return incoming.pop(0)

    async def send(message):
        sent.append(message)

    asyncio.run(middleware({"type": "http", "method": method, "path": path, "headers": []}, receive, send))
    return sent


@pytest.fixture
def service(monkeypatch):
    fake = FakeService()
    monkeypatch.setattr(bentoml, "get_current_service", lambda: fake)
    return fake


def make(passed: list):
    async def app(scope, receive, send):
        passed.append(scope["path"])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return DirectRoutes(app, routes={"/predict": (PredictRequest, lambda svc, request: svc.answer(request))},
                        server="BentoML Service/test")


def answer_of(sent) -> tuple[int, dict, dict]:
    start, body = sent
    assert body["type"] == "http.response.body"
    headers = dict(start["headers"])
    assert int(headers[b"content-length"]) == len(body["body"])
    return start["status"], headers, json.loads(body["body"])


def test_a_valid_body_in_several_chunks_is_answered_by_the_handler(service):
    status, headers, body = answer_of(call(make([]), "POST", "/predict", [b'{"text": "play', b' jazz", "top_k": 2}']))
    assert status == 200 and body == {"texts": ["play jazz"], "top_k": 2}
    assert headers[b"content-type"] == b"application/json" and headers[b"server"] == b"BentoML Service/test"


def test_other_routes_and_methods_pass_through(service):
    passed = []
    middleware = make(passed)
    assert call(middleware, "POST", "/audit", [b"{}"])[0]["status"] == 204
    assert call(middleware, "GET", "/predict", [b""])[0]["status"] == 204
    assert passed == ["/audit", "/predict"] and service.calls == []


@pytest.mark.parametrize("chunks, loc, reason", [
    ([b'{"text": 5}'], ["text"], "wrong_type"),
    ([b"{not json"], [], "malformed_json"),
    ([b""], [], "missing_field"),  # an empty body reads as {}, as BentoML reads it
    ([b'{"texts": ["a"], "top_k": 0}'], ["top_k"], "top_k_out_of_range"),
])
def test_a_refused_body_gets_bentomls_400_counted_once(service, monkeypatch, chunks, loc, reason):
    refused = []
    monkeypatch.setattr(direct_routes.rejections, "refused", lambda *args: refused.append(args))
    status, _, body = answer_of(call(make([]), "POST", "/predict", chunks))
    assert status == 400 and body["error"] == "1 validation error for PredictRequest"
    assert body["detail"][0]["loc"] == loc and "input" not in body["detail"][0]
    assert refused == [("POST", "/predict", 400, reason)] and service.calls == []


def test_a_full_queue_is_503_with_its_reason_counted_once(service, monkeypatch):
    refused = []
    monkeypatch.setattr(direct_routes.rejections, "refused", lambda *args: refused.append(args))
    service.fail = ServiceUnavailable("the service is overloaded; retry later")
    status, headers, body = answer_of(call(make([]), "POST", "/predict", [b'{"texts": ["hi", "ho", "hu"]}']))
    assert status == 503 and body == {"error": "the service is overloaded; retry later"}
    assert headers[b"retry-after"] == str(direct_routes.RETRY_AFTER_S).encode()
    assert refused == [("POST", "/predict", 503, "overloaded")]


def test_a_failing_handler_is_500_without_detail_and_logged(service, caplog):
    service.fail = RuntimeError("engine exploded: secret path /srv/x")
    with caplog.at_level(logging.ERROR, logger=direct_routes.__name__):
        status, _, body = answer_of(call(make([]), "POST", "/predict", [b'{"text": "hi"}']))
    assert status == 500 and body == {"error": direct_routes.UNEXPECTED}
    assert [r.exc_info[1] for r in caplog.records] == [service.fail]


def test_a_client_gone_before_its_body_gets_nothing(service):
    assert call(make([]), "POST", "/predict", None) == [] and service.calls == []
