"""Defects an HTTP review found, each held against one real ``bentoml serve`` on loopback.

A slow sender holds no audit slot (``body_limit`` sits outside the gates); every refusal of
the job routes and of OPTIONS is JSON and counted; ``/model/parse`` takes Rasa's optional
fields; an empty ``training_rows`` is refused by the schema the OpenAPI document publishes.
The server runs without a token, with one audit and one audit job per worker.
"""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

from intentvcs.cli.commands.serve import running
from tests.helpers.bundle import DEFAULT_LABELS, make_tiny_bundle
from tests.helpers.http import metric_samples, wait_for

REFERENCES = [{"text": f"{phrase} {tail}", "labels": [label]}
              for label, phrase in zip(DEFAULT_LABELS, ("play a song", "book a table", "will it rain",
                                                        "rate this novel", "find the film"))
              for tail in ("now", "please", "tonight", "for me")]
SMALL = [{"text": f"play some jazz {tail}", "labels": ["PlayJazz"]} for tail in ("now", "loud", "please")]
ENV = {"INTENTVCS_MAX_AUDITS_IN_FLIGHT": "1", "INTENTVCS_MAX_AUDIT_JOBS": "1"}


def port_in_range(low: int = 3100, high: int = 3199) -> int:
    """A free loopback port in ``low``..``high`` (the range this project's test servers may use)."""
    for port in range(low, high + 1):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {low}-{high}")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The server's URL and the path of its log."""
    folder = tmp_path_factory.mktemp("review")
    bundle = make_tiny_bundle(folder, references=REFERENCES)
    with running(bundle, port=port_in_range(), extra_env=ENV, log_path=folder / "server.log") as base:
        yield base, folder / "server.log"


@pytest.fixture(scope="module")
def url(served):
    return served[0]


def errors(url: str) -> dict[str, float]:
    return {dict(labels)["reason"]: value for labels, value in
            metric_samples(url, "intentvcs_request_errors_total").items()}


def trickle(url: str, path: str) -> socket.socket:
    """A client that has sent its headers and one byte of a 1,000-byte JSON body, and sends no more."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 f"Content-Length: 1000\r\n\r\n{{".encode())
    return sock


@pytest.mark.parametrize("path, body", [("/audit", {"rows": SMALL}), ("/audit/job/submit", {"rows": SMALL})])
def test_a_slow_sender_holds_no_audit_slot(url, path, body):
    """Two bodies trickling in (the worker's limit is 1 audit, 1 job) leave the next request its slot."""
    slow = [trickle(url, path) for _ in range(2)]
    try:
        time.sleep(0.5)  # both connections are in the server, their bodies unread
        answer = httpx.post(f"{url}{path}", json=body, timeout=60)
        assert answer.status_code == 200, answer.text
    finally:
        for sock in slow:
            sock.close()
    if path == "/audit/job/submit":  # the job holds the worker's one job slot until it ends
        task_id = answer.json()["task_id"]
        deadline = time.monotonic() + 60
        while httpx.get(f"{url}/audit/job/status", params={"task_id": task_id},
                        timeout=10).json()["status"] not in ("completed", "failed"):
            assert time.monotonic() < deadline
            time.sleep(0.3)


@pytest.mark.parametrize("method, path, allowed, named", [
    ("OPTIONS", "/predict", "POST", "OPTIONS"),
    ("OPTIONS", "/model/parse", "POST", "OPTIONS"),
    ("OPTIONS", "/audit", "POST", "OPTIONS"),
    ("OPTIONS", "/audit/job/submit", "POST", "OPTIONS"),
    ("DELETE", "/audit/job/status?task_id=abc", "GET", "DELETE"),
    ("POST", "/audit/job/get?task_id=abc", "GET", "POST"),
    ("PUT", "/audit/job/progress?task_id=abc", "GET", "PUT"),
    ("GET", "/audit/job/retry?task_id=abc", "POST", "GET"),
    ("OPTIONS", "/audit/job/status?task_id=abc", "GET", "OPTIONS"),
])
def test_a_wrong_method_is_a_counted_json_405(url, method, path, allowed, named):
    before = errors(url).get("method_not_allowed", 0)
    answer = httpx.request(method, f"{url}{path}", timeout=10)
    assert answer.status_code == 405 and answer.headers["allow"] == allowed
    assert named in answer.json()["error"]
    assert errors(url)["method_not_allowed"] == before + 1


@pytest.mark.parametrize("route", ["status", "get", "progress"])
@pytest.mark.parametrize("query, status, reason", [
    ({}, 400, "invalid_request"),
    ({"task_id": "../etc"}, 400, "invalid_request"),
    ({"task_id": "0123456789abcdef"}, 404, "not_found"),
])
def test_an_unknown_or_malformed_job_id_is_counted(url, route, query, status, reason):
    before = errors(url).get(reason, 0)
    answer = httpx.get(f"{url}/audit/job/{route}", params=query, timeout=10)
    assert answer.status_code == status and "error" in answer.json()
    if status == 400:
        assert "task_id" in answer.json()["error"]
    assert errors(url)[reason] == before + 1


@pytest.mark.parametrize("extra", [{"lang": "en"}, {"metadata": {}}, {"metadata": {"channel": "web"}},
                                   {"message_id": "m-1", "token": None, "lang": "de-CH", "metadata": None}])
def test_parse_takes_rasas_optional_fields(url, extra):
    answer = httpx.post(f"{url}/model/parse", json={"text": "play a song", **extra}, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["text"] == "play a song"


def test_parse_still_refuses_an_unknown_field(url):
    answer = httpx.post(f"{url}/model/parse", json={"text": "play a song", "txet": "x"}, timeout=30)
    assert answer.status_code == 400 and answer.json()["detail"][0]["loc"] == ["txet"]


@pytest.mark.parametrize("path", ["/audit", "/audit/job/submit"])
def test_an_empty_training_rows_is_the_schemas_refusal(url, path):
    answer = httpx.post(f"{url}{path}", json={"rows": SMALL, "training_rows": []}, timeout=30)
    assert answer.status_code == 400, answer.text
    detail = answer.json()["detail"]
    assert detail[0]["loc"] == ["training_rows"] and "at least 1 item" in detail[0]["msg"]


def test_the_document_says_training_rows_needs_a_row(url):
    schemas = httpx.get(f"{url}/docs.json", timeout=30).json()["components"]["schemas"]
    for name in ("AuditRequest", "AuditJobRequest"):
        field = schemas[name]["properties"]["training_rows"]
        array = next(member for member in field.get("anyOf", [field]) if member.get("type") == "array")
        assert array["minItems"] == 1, json.dumps(field)


# ------------------------------------------------------------- unit level: what a server won't show on demand
def asgi(middleware, scope: dict, incoming: list[dict], hang: bool = False) -> list[dict]:
    """Run one ASGI request through ``middleware``; after ``incoming``, ``receive`` hangs (``hang``) or
    answers a disconnect."""
    import asyncio

    sent = []

    async def receive():
        if incoming:
            return incoming.pop(0)
        if hang:
            await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    asyncio.run(middleware(scope, receive, send))
    return sent


def test_a_body_not_in_full_within_the_read_timeout_is_a_counted_408():
    from intentvcs.service.body_limit import BodyLimit

    reached, refused = [], []

    async def app(scope, receive, send):
        reached.append(scope["path"])

    limit = BodyLimit(app, max_bytes=1000, read_timeout_s=0.2,
                      on_reject=lambda scope, status, reason: refused.append((status, reason)))
    started = time.monotonic()
    sent = asgi(limit, {"type": "http", "method": "POST", "path": "/audit", "headers": []},
                [{"type": "http.request", "body": b"{", "more_body": True}], hang=True)
    assert time.monotonic() - started < 2
    assert sent[0]["status"] == 408 and refused == [(408, "body_timeout")] and reached == []
    assert "within 0.2 s (1 bytes read)" in json.loads(sent[1]["body"])["error"]


def test_a_body_abandoned_by_its_client_reaches_no_route_and_is_counted_as_client_gone():
    from intentvcs.service.body_limit import BodyLimit

    reached, refused = [], []

    async def app(scope, receive, send):
        reached.append(scope["path"])

    limit = BodyLimit(app, max_bytes=1000, on_reject=lambda scope, status, reason: refused.append((status, reason)))
    sent = asgi(limit, {"type": "http", "method": "POST", "path": "/audit", "headers": []},
                [{"type": "http.request", "body": b"{", "more_body": True}])  # then a disconnect
    assert sent == [] and reached == [] and refused == [(499, "client_gone")]


@pytest.mark.parametrize("path", ["/audit", "/audit/job/submit", "/predict"])
def test_a_client_that_leaves_mid_body_leaves_one_line_and_one_count(served, path):
    """BentoML handed half a body logged a ClientDisconnect traceback (/audit) or counted it as
    malformed JSON (/audit/job/submit)."""
    url, log_path = served
    before = errors(url)
    logged = log_path.read_text(encoding="utf-8", errors="replace")
    trickle(url, path).close()
    wait_for(lambda: errors(url).get("client_gone", 0) == before.get("client_gone", 0) + 1, timeout_s=10)
    time.sleep(0.5)  # anything else it would log
    new_lines = log_path.read_text(encoding="utf-8", errors="replace")[len(logged):]
    assert "Traceback" not in new_lines and "ClientDisconnect" not in new_lines, new_lines
    assert f"refused POST {path}: 499 client_gone" in new_lines
    after = errors(url)
    assert {reason: count - before.get(reason, 0) for reason, count in after.items()
            if count != before.get(reason, 0)} == {"client_gone": 1}
    assert httpx.post(f"{url}/predict", json={"text": "play a song"}, timeout=10).status_code == 200


def test_the_default_body_read_timeout_is_under_bentomls_request_timeout():
    from intentvcs.service import body_limit
    from intentvcs.service.schemas import REJECTION_REASONS

    assert 0 < body_limit.BODY_READ_TIMEOUT_S < 60 and "body_timeout" in REJECTION_REASONS


def test_a_job_body_is_checked_off_the_event_loop():
    import threading

    from intentvcs.service.audit_jobs import SUBMIT_ROUTE, JobBodyCheck

    checked_on, passed = [], []

    def check(body: bytes):
        checked_on.append(threading.current_thread())
        return None

    async def app(scope, receive, send):
        passed.append((await receive())["body"])

    asgi(JobBodyCheck(app, check=check), {"type": "http", "method": "POST", "path": SUBMIT_ROUTE, "headers": []},
         [{"type": "http.request", "body": b'{"rows": []}', "more_body": False}])
    assert checked_on and checked_on[0] is not threading.main_thread() and passed == [b'{"rows": []}']
