"""Defects a second review of the HTTP contract found, each reproduced against one real ``bentoml serve``:
a compressed body read as if it were not (a gzip body refused as malformed JSON at "line 1 column 1", a
plain one declared gzip accepted); a body failing millions of checks answered with every one of them (a
10 MB body held the event loop 14 s and answered 141 MB); ``HEAD /docs.json`` answering the length of
BentoML's document, not of the one ``GET`` answers."""

from __future__ import annotations

import gzip
import json

import httpx
import pytest

from intentvcs.cli.commands.serve import running
from intentvcs.service.schemas import MAX_REPORTED_ERRORS
from tests.helpers.bundle import make_tiny_bundle
from tests.test_http_bodies_and_refusals import errors, port_in_range

ROW = {"text": "play some jazz now", "labels": ["PlayJazz"]}
BODIES = {"/predict": {"text": "play a song"}, "/model/parse": {"text": "play a song"},
          "/audit": {"rows": [ROW]}, "/audit/job/submit": {"rows": [ROW]}}


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    folder = tmp_path_factory.mktemp("contract2")
    with running(make_tiny_bundle(folder), port=port_in_range(), log_path=folder / "server.log") as base:
        yield base


def post(url: str, path: str, body: bytes, **headers: str) -> httpx.Response:
    return httpx.post(f"{url}{path}", content=body, timeout=60,
                      headers={"content-type": "application/json", **headers})


@pytest.mark.parametrize("path", list(BODIES))
@pytest.mark.parametrize("compressed", [True, False], ids=["gzip-body", "plain-body-declared-gzip"])
def test_a_body_declared_compressed_is_a_counted_415_naming_the_coding(url, path, compressed):
    body = json.dumps(BODIES[path]).encode()
    before = errors(url).get("unsupported_media_type", 0)
    answer = post(url, path, gzip.compress(body) if compressed else body, **{"content-encoding": "gzip"})
    assert answer.status_code == 415, answer.text
    assert "Content-Encoding 'gzip'" in answer.json()["error"]
    assert answer.headers["accept-encoding"] == "identity"
    assert errors(url)["unsupported_media_type"] == before + 1


def test_the_identity_coding_is_no_coding(url):
    answer = post(url, "/predict", json.dumps(BODIES["/predict"]).encode(), **{"content-encoding": "identity"})
    assert answer.status_code == 200, answer.text


def test_the_document_says_a_compressed_body_is_415(url):
    spec = httpx.get(f"{url}/docs.json", timeout=30).json()
    for path in BODIES:
        assert "Content-Encoding" in spec["paths"][path]["post"]["responses"]["415"]["description"], path


def test_head_of_the_document_has_the_length_of_its_get(url):
    got = httpx.get(f"{url}/docs.json", timeout=30)
    head = httpx.head(f"{url}/docs.json", timeout=30)
    assert head.status_code == 200 and head.content == b""
    assert int(head.headers["content-length"]) == len(got.content) == int(got.headers["content-length"])


def many_unknown_keys(path: str, count: int) -> bytes:
    """A body of ``path`` with ``count`` unknown keys: one failed check each."""
    keys = ",".join(f'"k{i}":0' for i in range(count))
    if path in ("/audit", "/audit/job/submit"):
        return ('{"rows":[{"text":"play a song","labels":["PlayMusic"],' + keys + "}]}").encode()
    return ('{"text":"play a song",' + keys + "}").encode()


@pytest.mark.parametrize("path", list(BODIES))
def test_a_body_failing_many_checks_lists_the_first_few(url, path):
    count = 5000
    before = errors(url).get("unknown_field", 0)
    answer = post(url, path, many_unknown_keys(path, count))
    assert answer.status_code == 400, answer.text[:300]
    body = answer.json()
    assert len(body["detail"]) == MAX_REPORTED_ERRORS, len(body["detail"])
    first = body["detail"][0]
    assert first["type"] == "extra_forbidden" and first["loc"][-1] == "k0" and "input" not in first
    assert len(answer.content) < 10_000
    if path != "/audit":
        assert body["error"].startswith(f"{count} validation errors for ")
    else:  # BentoML words /audit's 400 itself, counting the checks it is given: the count of all is in its title
        assert f"(of {count} failed checks, the first {MAX_REPORTED_ERRORS} listed)" in body["error"]
    assert f"the first {MAX_REPORTED_ERRORS}" in body["error"]
    assert errors(url)["unknown_field"] == before + 1


def test_a_body_failing_a_few_checks_lists_them_all_as_before(url):
    answer = post(url, "/predict", b'{"texts": [""], "top_k": 0, "x": 1}')
    body = answer.json()
    assert answer.status_code == 400 and body["error"] == "3 validation errors for PredictRequest"
    assert [tuple(d["loc"]) for d in body["detail"]] == [("texts", 0), ("top_k",), ("x",)]


# ------------------------------------------------------------- unit level
def test_first_errors_are_errors_as_listed():
    from pydantic import ValidationError

    from intentvcs.service.schemas import AuditRequest, first_errors, validation_error_body

    body = '{"rows": [' + ",".join(['{"text": "", "labels": [""], "spans": [{"start": -1, "end": 0, "label": "x"}], '
                                    '"zz": 1}'] * 30) + '], "q": "{}"}'
    with pytest.raises(ValidationError) as caught:
        AuditRequest.model_validate_json(body)
    listed = json.loads(json.dumps(caught.value.errors(include_context=False, include_input=False)))
    assert caught.value.error_count() > MAX_REPORTED_ERRORS
    assert first_errors(caught.value) == listed[:MAX_REPORTED_ERRORS]
    assert first_errors(caught.value, 1) == listed[:1]
    assert validation_error_body(caught.value)["detail"] == listed[:MAX_REPORTED_ERRORS]


@pytest.mark.parametrize("method, path, status, error", [
    ("POST", "/predcit", 404, "no route POST /predcit"),
    ("GET", "/nothing/here", 404, "no route GET /nothing/here"),
    ("OPTIONS", "/metrics", 405, "/metrics takes {allow}, not OPTIONS"),  # Starlette's Allow, in its order
], ids=["unknown-post", "unknown-get", "metrics-options"])
def test_starlettes_own_refusals_are_json_too(url, method, path, status, error):
    """An unknown path and another method on a route Starlette serves were answered in plain text
    ("Not Found"), which a client reading every error as JSON cannot parse, and counted as no refusal."""
    reason = {404: "not_found", 405: "method_not_allowed"}[status]
    before = errors(url)[reason]
    answer = httpx.request(method, f"{url}{path}", timeout=30)
    assert errors(url)[reason] == before + 1
    assert answer.status_code == status
    allow = answer.headers.get("allow", "")
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {"error": error.format(allow=allow)}
    if status == 405:
        assert set(allow.split(", ")) == {"GET", "HEAD"}
    head = httpx.head(f"{url}/nothing/here", timeout=30)  # no body to rewrite
    assert head.status_code == 404 and head.content == b""


def test_a_plain_404_sent_in_pieces_is_answered_once():
    """The JSON answer went out again at every further piece of the plain body: two answers to one request."""
    import asyncio

    from intentvcs.service.json_errors import PlainErrorsAsJson

    async def plain_app(scope, receive, send):
        await send({"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"Not ", "more_body": True})
        await send({"type": "http.response.body", "body": b"Found"})

    sent = []

    async def send(message):
        sent.append(message)

    asyncio.run(PlainErrorsAsJson(plain_app)({"type": "http", "method": "POST", "path": "/x"}, None, send))
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert json.loads(sent[1]["body"]) == {"error": "no route POST /x"}


def test_a_shortened_validation_error_is_still_kept_out_of_the_error_log():
    """/audit's error of more than 20 failed checks carries the count in its title ("AuditRequest (of 25 ..."),
    which the filter of BentoML's traceback no longer matched: an ERROR with a traceback per such request."""
    import logging

    from pydantic import BaseModel, ConfigDict, ValidationError

    from intentvcs.service.rejections import QuietRequestErrors

    class AuditRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")

    try:
        AuditRequest.model_validate({"x": 1})
    except ValidationError as exc:
        short = ValidationError.from_exception_data(f"{exc.title} (of 25 failed checks, the first 20 listed)",
                                                    exc.errors())
    record = logging.LogRecord("bentoml", logging.ERROR, __file__, 1, "Exception on /audit", None,
                               (ValidationError, short, None))
    assert QuietRequestErrors({"AuditRequest"}).filter(record) is False


def test_a_head_of_an_unknown_path_is_counted_too(url):
    before = errors(url)["not_found"]
    answer = httpx.head(f"{url}/head-scan", timeout=30)
    assert answer.status_code == 404 and errors(url)["not_found"] == before + 1
