"""Defects a review of the HTTP contract found, each reproduced first (a real ``bentoml serve`` where the
server is what a client meets, the ASGI step or module alone where the server cannot be made to take the
path on demand):

- a body beginning with a UTF-8 byte order mark was refused as "Invalid JSON: expected value at line 1
  column 1", naming a column the client sees as ``{`` (RFC 8259 lets a parser skip it; Python's
  ``json.loads`` does);
- an empty ``/audit/job/submit`` body was malformed JSON ("EOF while parsing"), where every other route
  reads an empty body as ``{}`` and names the missing field;
- ``HEAD`` of an unknown path answered ``text/plain`` and the length of "Not Found", where its ``GET``
  answers ``application/json``;
- a request of more utterances than one engine call takes was refused (503) by waiting for its own
  earlier calls, on an idle server, and so on every retry;
- a button payload's entity value that JSON cannot write (``1e400``, ``NaN``, ``Infinity``) was answered
  as ``null``, a value the user never gave;
- a body sent with a transfer coding the server does not decode (``Transfer-Encoding: gzip, chunked``)
  reached the JSON parser still compressed: 400 "Invalid JSON: expected value at line 1 column 1", where
  RFC 9112 answers 501 naming the coding;
- ``BodyLimit`` held a body as the server's messages, a dict each: a body its client sent a byte per read
  cost the worker some 300 bytes of memory per byte sent, until the read timeout;
- ``JsonOnly`` read the request headers twice per request.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import threading
import time
import tracemalloc

import httpx
import pytest

from intentvcs.cli.commands.serve import running
from tests.helpers.bundle import make_tiny_bundle
from tests.helpers.http import wait_for
from tests.test_http_bodies_and_refusals import errors, port_in_range

BOM = b"\xef\xbb\xbf"
ROW = {"text": "play some jazz now", "labels": ["PlayJazz"]}
BODIES = {"/predict": {"text": "play a song"}, "/model/parse": {"text": "play a song"},
          "/audit": {"rows": [ROW]}, "/audit/job/submit": {"rows": [ROW]}}


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    folder = tmp_path_factory.mktemp("contract-review")
    with running(make_tiny_bundle(folder), port=port_in_range(), log_path=folder / "server.log") as base:
        yield base


def post(url: str, path: str, body: bytes) -> httpx.Response:
    return httpx.post(f"{url}{path}", content=body, timeout=60, headers={"content-type": "application/json"})


# ------------------------------------------------------------------ over HTTP
@pytest.mark.parametrize("path", list(BODIES))
def test_a_body_beginning_with_a_utf8_bom_is_read_as_its_json(url, path):
    answer = post(url, path, BOM + json.dumps(BODIES[path]).encode())
    assert answer.status_code == 200, answer.text
    if path == "/audit/job/submit":  # BentoML reads the body again when the job runs
        task = {"task_id": answer.json()["task_id"]}
        wait_for(lambda: httpx.get(f"{url}/audit/job/status", params=task).json()["status"] != "in_progress")
        assert httpx.get(f"{url}/audit/job/status", params=task).json()["status"] == "completed"


def test_a_bom_before_bad_json_is_still_refused_as_malformed(url):
    answer = post(url, "/predict", BOM + b"{not json")
    assert answer.status_code == 400 and answer.json()["detail"][0]["type"] == "json_invalid", answer.text


def test_an_empty_submit_body_is_refused_naming_rows_as_an_empty_audit_body_is(url):
    before = errors(url).get("missing_field", 0)
    answers = {path: post(url, path, b"") for path in ("/audit", "/audit/job/submit")}
    for path, answer in answers.items():
        assert answer.status_code == 400, (path, answer.text)
        first = answer.json()["detail"][0]
        assert (first["type"], first["loc"]) == ("missing", ["rows"]), (path, first)
    assert errors(url)["missing_field"] == before + 2


@pytest.mark.parametrize("path", ["/nope", "/predcit/x"])
def test_head_of_an_unknown_path_has_the_headers_of_its_get(url, path):
    got = httpx.get(f"{url}{path}", timeout=30)
    head = httpx.head(f"{url}{path}", timeout=30)
    assert got.status_code == head.status_code == 404 and head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"] == "application/json"
    assert head.headers["content-length"] == got.headers["content-length"]


def test_head_of_an_unknown_path_is_counted_once_as_not_found(url):
    before = errors(url).get("not_found", 0)
    httpx.head(f"{url}/nope", timeout=30)
    assert errors(url)["not_found"] == before + 1


def raw_post(url: str, path: str, head: bytes, body: bytes) -> tuple[int, bytes, bytes]:
    """POST with hand-written framing headers (httpx writes its own); the status, head and body answered."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Connection: close\r\n".encode() + head + b"\r\n" + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    headers, _, content = rest.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), headers.lower(), content


@pytest.mark.parametrize("path", list(BODIES))
def test_a_body_in_a_transfer_coding_not_decoded_is_a_counted_501_naming_it(url, path):
    body = gzip.compress(json.dumps(BODIES[path]).encode())
    before = errors(url).get("unsupported_media_type", 0)
    status, headers, content = raw_post(url, path, b"Transfer-Encoding: gzip, chunked\r\n",
                                        b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
    assert status == 501, content
    assert b"content-type: application/json" in headers
    assert "Transfer-Encoding 'gzip, chunked'" in json.loads(content)["error"]
    assert errors(url)["unsupported_media_type"] == before + 1


def test_a_chunked_body_without_content_length_is_read_in_full(url):
    body = json.dumps({"texts": ["play a song"] * 50}).encode()
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in (body[:7], body[7:100], body[100:]))
    status, _, content = raw_post(url, "/predict", b"Transfer-Encoding: chunked\r\n", chunks + b"0\r\n\r\n")
    assert status == 200 and len(json.loads(content)["predictions"]) == 50


# ------------------------------------------------------------- unit level
def test_a_request_longer_than_one_call_is_not_refused_for_waiting_on_its_own_calls():
    """Five utterances, two a call, each call longer than ``max_wait_s``: on an idle queue the request's
    third to fifth utterances wait only for its own first calls, which is no overload."""
    from intentvcs.service.batching import BatchQueue

    calls = []

    def engine(jobs):
        calls.append(list(jobs))
        time.sleep(0.25)
        return [job.upper() for job in jobs]

    batch_queue = BatchQueue(engine, max_batch=2, max_wait_s=0.1, overloaded=lambda: RuntimeError("overloaded"))
    assert asyncio.run(batch_queue.many(list("abcde"))) == list("ABCDE")
    assert calls == [["a", "b"], ["c", "d"], ["e"]]


def test_a_request_queued_behind_another_past_max_wait_is_still_refused():
    """What the deadline is for: a request that waited past it behind other work is refused, none of its
    utterances run."""
    from intentvcs.service.batching import BatchQueue

    release, started, calls = threading.Event(), threading.Event(), []

    def engine(jobs):
        calls.append(list(jobs))
        started.set()
        release.wait(10)
        return [job.upper() for job in jobs]

    batch_queue = BatchQueue(engine, max_batch=2, max_wait_s=0.02, overloaded=lambda: RuntimeError("overloaded"))

    async def main():
        first = asyncio.ensure_future(batch_queue.many(["a"]))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
        late = asyncio.ensure_future(batch_queue.many(list("bcd")))
        await asyncio.sleep(0.05)
        release.set()
        return await asyncio.gather(first, late, return_exceptions=True)

    first, late = asyncio.run(main())
    assert first == ["A"] and isinstance(late, RuntimeError) and calls == [["a"]]


@pytest.mark.parametrize("entities", ['{"amount": 1e400}', '{"amount": NaN}', '{"amount": -Infinity, "x": 1}',
                                      '{"amount": [1, Infinity]}'])
def test_a_payload_entity_value_json_cannot_write_reads_as_no_entities(entities, caplog):
    from intentvcs.service.rasa import payload_answer

    answer = payload_answer(f"/inform{entities}")
    assert answer["intent"] == {"name": "inform", "confidence": 1.0}
    assert answer["entities"] == []
    assert "read as none" in caplog.text


def test_a_payload_entity_value_of_finite_numbers_is_kept():
    from intentvcs.service.rasa import payload_answer

    answer = payload_answer('/inform{"amount": [1.5, -2e10]}')
    assert [entity["value"] for entity in answer["entities"]] == [1.5, -2e10]


def test_a_body_trickled_a_byte_per_read_is_held_in_about_its_own_size():
    from intentvcs.service.body_limit import BodyLimit

    size, reached = 100_000, []
    body = b'{"text": "' + b"a" * (size - 12) + b'"}'
    pieces = iter(body)

    async def receive():
        piece = next(pieces, None)
        if piece is None:
            return {"type": "http.request", "body": b"", "more_body": False}
        return {"type": "http.request", "body": bytes((piece,)), "more_body": True}

    async def app(scope, receive, send):
        chunks = []
        while True:
            message = await receive()
            chunks.append(message["body"])
            if not message["more_body"]:
                break
        reached.append(b"".join(chunks))

    limit = BodyLimit(app, max_bytes=2 * size)
    tracemalloc.start()
    try:
        asyncio.run(limit({"type": "http", "method": "POST", "path": "/predict", "headers": []}, receive, None))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert reached == [body]
    assert peak < 20 * size, f"{peak} bytes held for a {size}-byte body"


class PassesCounted(list):
    """A header list that counts how often it is read."""

    passes = 0

    def __iter__(self):
        self.passes += 1
        return super().__iter__()


@pytest.mark.parametrize("headers, status", [
    ([(b"content-type", b"application/json")], 204),
    ([(b"content-type", b"application/json"), (b"content-encoding", b"gzip")], 415),
])
def test_json_only_reads_the_request_headers_in_one_pass(headers, status):
    from intentvcs.service.media_type import JsonOnly

    sent = []

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 204, "headers": []})

    async def send(message):
        sent.append(message)

    counted = PassesCounted(headers)
    scope = {"type": "http", "method": "POST", "path": "/predict", "headers": counted}
    asyncio.run(JsonOnly(app, routes=["/predict"])(scope, None, send))
    assert sent[0]["status"] == status and counted.passes == 1


def test_empty_and_bom_bodies_read_alike_on_every_request_model():
    """One reading for BentoML's serde, ``direct_routes`` and the job submit check: ``model_validate_json``."""
    from pydantic import ValidationError

    from intentvcs.service.schemas import AuditJobRequest, ParseRequest

    assert ParseRequest.model_validate_json(BOM + b'{"text": "hi"}').text == "hi"
    assert ParseRequest.model_validate_json('\ufeff{"text": "hi"}').text == "hi"
    with pytest.raises(ValidationError) as caught:
        AuditJobRequest.model_validate_json(b"")
    assert caught.value.errors()[0]["type"] == "missing"
