"""What the service refuses, and how, against one real ``bentoml serve`` on loopback.

One server for the module, with a bearer token, small audit limits (set
through ``INTENTVCS_*`` variables so the tests are fast), its log in a file
the tests read, and a warm-up slowed down by a ``sitecustomize`` on its
``PYTHONPATH`` (test-only: the service has no such hook) so that ``/readyz``
can be watched while the worker warms up. Its bundle has the labels of the
embedded default data's training set, so the default upgrade batch (whose
rows carry entity spans) has new intents to audit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from intentvcs.cli.commands.serve import free_port, running
from intentvcs.core.dataio import read_jsonl
from intentvcs.training import DEFAULT_DATA
from tests.helpers.bundle import make_tiny_bundle

TOKEN = "test-token-0123456789abcdef"
AUTH = {"authorization": f"Bearer {TOKEN}"}
SECRET = "PRIVATE-USER-TEXT-7f3a"  # sent in bad requests; must never reach the log
WARM_UP_S = 3.0
AUDIT_TIMEOUT_S = 3
MAX_NEW_INTENTS = 100  # the default: a batch at the limit is also the slow audit of the deadline tests
MAX_SPANS = 4  # the default upgrade batch has at most 4 spans per row
ENV = {
    "INTENTVCS_API_TOKEN": TOKEN,
    "INTENTVCS_METRICS_TOKEN_REQUIRED": "1",
    "INTENTVCS_AUDIT_TIMEOUT_S": str(AUDIT_TIMEOUT_S),
    "INTENTVCS_MAX_AUDITS_IN_FLIGHT": "1",
    "INTENTVCS_MAX_AUDIT_NEW_INTENTS": str(MAX_NEW_INTENTS),
    "INTENTVCS_MAX_SPANS_PER_ROW": str(MAX_SPANS),
    # Every pair of new intents tested (the default caps them at 200): the slow audit of the deadline tests.
    "INTENTVCS_AUDIT_CONFIG": json.dumps({"max_new_pairs": 10_000}),
}
# Loaded by every Python process of the server: delays the engine's warm-up
# call and marks its start and end in a file, for test_readyz_waits_for_warm_up.
SITECUSTOMIZE = '''
import os, time
if os.environ.get("TEST_WARM_UP_MARKER"):
    from intentvcs.service import engine

    _predict = engine.Engine.predict

    def _slow_warm_up(self, texts, *args, **kwargs):
        if list(texts) == ["warm-up"]:
            marker = os.environ["TEST_WARM_UP_MARKER"]
            with open(marker, "w") as f:
                f.write("warming")
            time.sleep(float(os.environ["TEST_WARM_UP_S"]))
            with open(marker, "w") as f:
                f.write("warm")
        return _predict(self, texts, *args, **kwargs)

    engine.Engine.predict = _slow_warm_up
'''


def rows_of(name: str) -> list[dict]:
    return [ex.to_dict() for ex in read_jsonl(DEFAULT_DATA / f"{name}.jsonl")]


@dataclass
class Server:
    url: str
    log: Path
    probes: list[tuple[str, int | None, str]]  # (marker before, /readyz status or None, marker after)

    def post(self, path: str, body, headers: dict | None = None, **kwargs) -> httpx.Response:
        return httpx.post(f"{self.url}{path}", json=body, headers={**AUTH, **(headers or {})},
                          timeout=kwargs.pop("timeout", 60), **kwargs)

    def errors(self) -> dict[str, float]:
        text = httpx.get(f"{self.url}/metrics", headers=AUTH, timeout=10).text
        return {s.labels["reason"]: s.value for family in text_string_to_metric_families(text)
                for s in family.samples if s.name == "intentvcs_request_errors_total"}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    labels = sorted({label for row in rows_of("train") for label in row["labels"]})
    return make_tiny_bundle(tmp_path_factory.mktemp("hardening"), labels=labels)


@pytest.fixture(scope="module")
def server(bundle, tmp_path_factory):
    scratch = tmp_path_factory.mktemp("server")
    (scratch / "sitecustomize.py").write_text(SITECUSTOMIZE)
    marker = scratch / "warm-up"
    env = {**ENV, "TEST_WARM_UP_MARKER": str(marker), "TEST_WARM_UP_S": str(WARM_UP_S),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(scratch), os.environ.get("PYTHONPATH")]))}
    port = free_port()
    probes: list[tuple[str, int | None, str]] = []
    done = threading.Event()

    def state() -> str:
        return marker.read_text() if marker.exists() else "loading"

    def probe() -> None:  # /readyz as a load balancer sees it, from the server's start
        while not done.is_set():
            before = state()
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=0.5).status_code
            except httpx.HTTPError:
                status = None
            probes.append((before, status, state()))
            time.sleep(0.1)

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    try:
        with running(bundle, port=port, extra_env=env, log_path=scratch / "server.log") as url:
            done.set()
            prober.join()
            yield Server(url, scratch / "server.log", probes)
    finally:
        done.set()


def new_intent_batch(intents: int, rows_each: int = 3) -> list[dict]:
    """``intents`` new names for one meaning: the audit's worst case (``benchmarks.faults.new_intent_rows``).

    The module's random model accepts one existing intent on all these rows
    alike, so every new intent gets the same verdict (subset of it) and the
    duplicate search, uncapped in this module's server, tests every pair: at
    the default limit of 100 new intents, 4,950 pairs, about 20 s on 2 cores.
    """
    from benchmarks.faults import new_intent_rows

    return new_intent_rows(intents, rows_each)


# ------------------------------------------------------------------ readiness
def test_readyz_waits_for_warm_up(server):
    warming = [status for before, status, after in server.probes if before == after == "warming"]
    assert len(warming) >= 3, server.probes  # the probe did watch the warm-up
    assert 200 not in warming, server.probes
    assert httpx.get(f"{server.url}/readyz").status_code == 200


# ---------------------------------------------------------------------- token
@pytest.mark.parametrize("path, body", [("/predict", {"text": "play some jazz"}),
                                        ("/model/parse", {"text": "play some jazz"}),
                                        ("/audit", {"rows": [{"text": "hi there", "labels": ["greet"]}]}),
                                        ("/audit/job/submit", {"rows": [{"text": "hi there", "labels": ["greet"]}]})])
def test_api_routes_need_the_token(server, path, body):
    url = f"{server.url}{path}"
    missing = httpx.post(url, json=body, timeout=30)
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert "INTENTVCS_API_TOKEN" in missing.json()["error"]
    wrong = httpx.post(url, json=body, headers={"authorization": f"Bearer {TOKEN[:-1]}x"}, timeout=30)
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == 'Bearer error="invalid_token"'
    basic = httpx.post(url, json=body, headers={"authorization": f"Basic {TOKEN}"}, timeout=30)
    assert basic.status_code == 401
    assert server.post(path, body).status_code == 200
    assert httpx.post(url, json=body, headers={"authorization": f"bearer {TOKEN}"}, timeout=30).status_code == 200


def test_an_audit_jobs_routes_need_the_token(server):
    task_id = server.post("/audit/job/submit", {"rows": [{"text": "hi there", "labels": ["greet"]}]}).json()["task_id"]
    for route in ("status", "get", "progress"):
        url = f"{server.url}/audit/job/{route}"
        assert httpx.get(url, params={"task_id": task_id}, timeout=30).status_code == 401, route
        assert httpx.get(url, params={"task_id": task_id}, headers=AUTH, timeout=30).status_code != 401, route


def test_probes_stay_open_and_metrics_need_the_token(server):
    for probe in ("/healthz", "/livez", "/readyz", "/docs.json"):
        assert httpx.get(f"{server.url}{probe}").status_code == 200, probe
    # /status names every label and entity type: the token's, as the answers are.
    assert httpx.get(f"{server.url}/status").status_code == 401
    assert httpx.get(f"{server.url}/status", headers=AUTH).json()["labels"]
    assert httpx.get(f"{server.url}/metrics").status_code == 401  # INTENTVCS_METRICS_TOKEN_REQUIRED=1
    assert httpx.get(f"{server.url}/metrics", headers=AUTH).status_code == 200


def test_openapi_declares_the_bearer_scheme(server):
    spec = httpx.get(f"{server.url}/docs.json").json()
    assert spec["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http", "scheme": "bearer", "description": "The token set in INTENTVCS_API_TOKEN on the server."}
    for path in ("/predict", "/model/parse", "/audit", "/metrics"):
        [operation] = spec["paths"][path].values()
        assert operation["security"] == [{"bearerAuth": []}] and "401" in operation["responses"], path
    for path in ("/healthz", "/readyz"):
        assert "security" not in next(iter(spec["paths"][path].values()))
    # The audit limits are published where clients read the request schema.
    rows = spec["components"]["schemas"]["AuditRequest"]["properties"]["rows"]["description"]
    for setting in ("INTENTVCS_MAX_AUDIT_NEW_INTENTS", "INTENTVCS_AUDIT_TIMEOUT_S", "INTENTVCS_MAX_AUDITS_IN_FLIGHT"):
        assert setting in rows


# --------------------------------------------------------------- media types
NOT_JSON = {
    "text/plain": {"content": '{"text": "play some jazz"}', "headers": {"content-type": "text/plain"}},
    "form": {"data": {"text": "play some jazz"}},
    "multipart": {"files": {"text": ("t.txt", b"play some jazz")}},
    "no content type": {"content": b'{"text": "play some jazz"}'},
    "json-like": {"content": '{"text": "play some jazz"}', "headers": {"content-type": "application/jsonx"}},
}


@pytest.mark.parametrize("path", ["/predict", "/model/parse", "/audit"])
def test_only_json_bodies_are_accepted(server, path):
    before = server.errors().get("unsupported_media_type", 0)
    for name, request in NOT_JSON.items():
        kwargs = dict(request)
        headers = {**AUTH, **kwargs.pop("headers", {})}
        response = httpx.post(f"{server.url}{path}", headers=headers, timeout=30, **kwargs)
        assert response.status_code == 415, (name, response.text)
        assert "application/json" in response.json()["error"] and response.headers["accept-post"] == "application/json"
    charset = httpx.post(f"{server.url}/predict", content='{"text": "play some jazz"}', timeout=30,
                         headers={**AUTH, "content-type": "Application/JSON; charset=utf-8"})
    assert charset.status_code == 200, charset.text
    assert server.errors()["unsupported_media_type"] == before + len(NOT_JSON)


# ------------------------------------------------------------- spans and meta
def test_audit_over_http_reads_spans_like_the_library(server, bundle):
    from intentvcs.service.audit import AuditConfig, audit_batch
    from intentvcs.service.engine import Engine

    rows, training = rows_of("upgrade"), rows_of("train")
    assert any("spans" in row for row in rows)
    rows[0]["meta"] = {"source": "ticket-12", "reviewed": True}  # accepted, passed through
    response = server.post("/audit", {"rows": rows, "training_rows": training})
    assert response.status_code == 200, response.text
    served = response.json()
    local = audit_batch(Engine(bundle, provider="cpu"), rows, training, config=AuditConfig(progress=False)).to_dict()

    def evidence(report: dict) -> list:
        return [(f["intent"], f["relation"], f["existing"],
                 [(c["existing"], c["entity_pivot"]) for c in f["containment"]]) for f in report["findings"]]

    assert evidence(served) == evidence(local)
    pivots = [c for f in served["findings"] for c in f["containment"] if c["entity_pivot"]]
    assert len(pivots) >= 10  # spans made it through: without them there is no entity evidence at all
    assert served["fix"] == local["fix"] and served["cooccurrence"] == local["cooccurrence"]


@pytest.mark.parametrize("row, loc, message", [
    ({"text": "play jazz", "labels": ["x"], "label": ["x"]}, ["rows", 0, "label"], "Extra inputs"),
    ({"text": "play jazz", "labels": ["x"], "spans": [{"start": 5, "end": 10, "label": "genre"}]},
     ["rows", 0, "spans"], "0 <= start < end <= 9"),
    ({"text": "play jazz", "labels": ["x"], "spans": [{"start": 3, "end": 3, "label": "genre"}]},
     ["rows", 0, "spans"], "0 <= start < end"),
    ({"text": "play jazz", "labels": ["x"], "spans": [{"start": -1, "end": 4, "label": "genre"}]},
     ["rows", 0, "spans", 0, "start"], "greater than or equal to 0"),
    ({"text": "play jazz", "labels": ["x"], "spans": [{"start": 0, "end": 4, "label": ""}]},
     ["rows", 0, "spans", 0, "label"], "at least 1 character"),
    ({"text": "play jazz", "labels": ["x"], "spans": [{"start": 0, "end": 4, "label": "x" * 201}]},
     ["rows", 0, "spans", 0, "label"], "at most 200 characters"),
    ({"text": "play jazz", "labels": ["x"], "spans": [{"start": 0, "end": 4, "label": "g", "kind": 1}]},
     ["rows", 0, "spans", 0, "kind"], "Extra inputs"),
    ({"text": "play jazz", "labels": ["x"], "spans": [{"start": True, "end": 4, "label": "g"}]},
     ["rows", 0, "spans", 0, "start"], "valid integer"),
    ({"text": "play jazz", "labels": ["x"], "spans": [{"start": 0, "end": 1, "label": "g"}] * (MAX_SPANS + 1)},
     ["rows", 0, "spans"], f"at most {MAX_SPANS} items"),
    ({"text": "play jazz", "labels": ["x"], "meta": ["not", "an", "object"]},
     ["rows", 0, "meta"], "should be an object"),
])
def test_audit_rows_are_checked(server, row, loc, message):
    response = server.post("/audit", {"rows": [row]})
    assert response.status_code == 400, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"] == loc and message in detail["msg"], detail


# ---------------------------------------------------------------- audit cost
def test_too_many_new_intents_is_413_naming_the_setting(server):
    before = server.errors().get("too_many_new_intents", 0)
    response = server.post("/audit", {"rows": new_intent_batch(MAX_NEW_INTENTS + 1, rows_each=1)})
    assert response.status_code == 413
    assert response.json()["error"].startswith(f"the batch has {MAX_NEW_INTENTS + 1} new intents; the limit per "
                                               f"request is {MAX_NEW_INTENTS} (setting "
                                               "INTENTVCS_MAX_AUDIT_NEW_INTENTS)")
    assert server.errors()["too_many_new_intents"] == before + 1


def audit_in_background(server: Server, rows: list[dict], **kwargs) -> tuple[threading.Thread, dict]:
    result: dict = {}

    def send() -> None:
        started = time.monotonic()
        try:
            result["response"] = server.post("/audit", {"rows": rows}, **kwargs)
        except httpx.HTTPError as exc:
            result["error"] = exc
        result["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=send)
    thread.start()
    return thread, result


SMALL = [{"text": "play some jazz", "labels": ["play_jazz"]}, {"text": "some jazz please", "labels": ["play_jazz"]}]


def test_busy_worker_answers_429_and_a_late_audit_stops_at_its_deadline(server):
    """The slow audit (``new_intent_batch`` at the cap: about 20 s unstopped) holds the worker's only slot.

    A second audit meanwhile is refused with 429 and Retry-After; the slow one
    answers 504 at the deadline and stops computing: an audit sent right after
    is answered at once instead of queueing behind it.
    """
    before = server.errors()
    slow, result = audit_in_background(server, new_intent_batch(MAX_NEW_INTENTS))
    time.sleep(1.0)  # the slow request is read and running
    busy = server.post("/audit", {"rows": SMALL})
    assert busy.status_code == 429, busy.text
    assert busy.headers["retry-after"] == "3" and "INTENTVCS_MAX_AUDITS_IN_FLIGHT" in busy.json()["error"]
    slow.join()
    late = result["response"]
    assert late.status_code == 504, late.text
    assert f"within {AUDIT_TIMEOUT_S} s (setting INTENTVCS_AUDIT_TIMEOUT_S)" in late.json()["error"]
    assert result["seconds"] < AUDIT_TIMEOUT_S + 2
    started = time.monotonic()
    assert server.post("/audit", {"rows": SMALL}).status_code == 200
    assert time.monotonic() - started < 1.5  # the stopped audit no longer holds the audit thread
    after = server.errors()
    assert after["audit_busy"] == before["audit_busy"] + 1
    assert after["audit_timeout"] == before["audit_timeout"] + 1


def test_an_audit_stops_when_its_client_goes_away(server):
    before = server.errors()
    slow, result = audit_in_background(server, new_intent_batch(MAX_NEW_INTENTS), timeout=0.8)
    slow.join()
    assert isinstance(result.get("error"), httpx.ReadTimeout)  # the client gave up
    time.sleep(0.5)  # the service checks the connection every 0.25 s
    started = time.monotonic()
    assert server.post("/audit", {"rows": SMALL}).status_code == 200
    assert time.monotonic() - started < 1.0  # well before the abandoned audit's deadline
    after = server.errors()
    assert after["audit_cancelled"] == before["audit_cancelled"] + 1
    assert after["audit_timeout"] == before["audit_timeout"]


# ------------------------------------------------------------------- logging
def test_refusals_are_one_log_line_without_the_input(server):
    """Run last: the whole log, 429s and 504s included, has no traceback and no user text."""
    offset = server.log.stat().st_size
    bad = [
        ("/predict", {"text": SECRET * 100}),
        ("/predict", {"texts": ["ok", SECRET * 100]}),
        ("/predict", {"text": "hi", "top_k": SECRET}),
        ("/predict", {"text": SECRET, SECRET: 1}),
        ("/predict", '{"text": "' + SECRET),
        ("/model/parse", {"text": SECRET * 100, "token": SECRET}),
        ("/model/parse", {"text": SECRET, "message_id": SECRET * 20}),
        ("/audit", {"rows": [{"text": SECRET, "labels": [SECRET * 20]}]}),
        ("/audit", {"rows": [{"text": SECRET, "labels": ["x"], "spans": [{"start": 0, "end": 99, "label": SECRET}]}]}),
        ("/audit", {"rows": [{"text": SECRET, "labels": ["x", "x"]}]}),  # refused by the data format: 400
    ]
    for path, body in bad:
        kwargs = {"content": body} if isinstance(body, str) else {"json": body}
        response = httpx.post(f"{server.url}{path}", headers={**AUTH, "content-type": "application/json"},
                              timeout=30, **kwargs)
        assert response.status_code == 400, response.text
    assert httpx.post(f"{server.url}/predict", json={"text": SECRET}, timeout=30).status_code == 401
    assert httpx.post(f"{server.url}/predict", content=SECRET, headers=AUTH, timeout=30).status_code == 415
    time.sleep(0.5)
    log = server.log.read_text()
    new = log[offset:].splitlines()
    refused = [line for line in new if " refused POST " in line]
    assert len(refused) == len(bad) + 2, "\n".join(new)
    assert all(line.rstrip().endswith(reason) for line, reason in zip(refused, [
        "400 text_too_long", "400 text_too_long", "400 wrong_type", "400 unknown_field", "400 malformed_json",
        "400 text_too_long", "400 id_too_long",
        "400 label_too_long", "400 invalid_span", "400 invalid_rows", "401 unauthorized", "415 unsupported_media_type",
    ])), "\n".join(refused)
    assert "Traceback" not in log and "[ERROR]" not in log
    assert SECRET not in log


# --------------------------------------------------------------- serve command
def test_serve_refuses_a_corrupt_bundle_at_once(bundle, tmp_path):
    broken = Path(shutil.copytree(bundle, tmp_path / "bundle"))
    model = broken / "model.onnx"
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size: only the hash can tell
    model.write_bytes(bytes(data))
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "intentvcs.cli.main", "serve", "--bundle", str(broken),
                             "--port", str(free_port())], check=False, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "model.onnx" in result.stderr and "sha256" in result.stderr
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 30
