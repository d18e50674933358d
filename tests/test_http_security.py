"""Defects a security review of the HTTP service found, each reproduced first: a job body rebuilt in
quadratic time, a connector search quadratic in a run of blanks, a client's path written raw into the
log, bodies buffered for any path, a progress folder in the shared temporary folder whose links a prune
followed, a task id that may end in a newline."""

from __future__ import annotations

import asyncio
import os
import socket
import time

import httpx
import pytest

from intentvcs.cli.commands.serve import running
from tests.helpers.bundle import make_tiny_bundle
from tests.test_http_bodies_and_refusals import errors, port_in_range


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("security")
    with running(make_tiny_bundle(folder), port=port_in_range(), log_path=folder / "server.log") as url:
        yield url, folder / "server.log"


def raw_post(url: str, path: str, declared: int, body: bytes = b"{") -> bytes:
    """Send a POST to ``path`` declaring ``declared`` bytes and sending ``body``; the first answer bytes."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {declared}\r\n\r\n".encode() + body)
        return sock.recv(200)


def test_a_path_in_a_refusals_log_line_writes_no_line_of_its_own(served):
    url, log_path = served
    raw_post(url, "/anything%0A2026-11-27T19:00:00+0000%20[WARNING]%20FORGED%0D%0Ax", 10**11)
    raw_post(url, "/predict%0AFORGED-TOO", 10**11)
    time.sleep(0.5)
    lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    assert not any(line.startswith(("2026-11-27T19:00:00+0000 [WARNING] FORGED", "FORGED")) for line in lines)


def test_logged_path_escapes_what_is_not_printable():
    from intentvcs.service.rejections import MAX_LOGGED_PATH, logged_path

    assert logged_path("/predict") == "/predict"
    assert "\n" not in logged_path("/x\n2026 [WARNING] forged") and "\\n" in logged_path("/x\n2026")
    assert "\x1b" not in logged_path("/x\x1b[2J")
    assert len(logged_path("/" + "a" * 10_000)) == MAX_LOGGED_PATH


def test_a_body_to_a_path_that_reads_none_is_not_buffered(served):
    """Buffered for any path, a POST of 32 MiB to /nope made the worker hold it until the read timeout."""
    url, _ = served
    before = errors(url).get("body_too_large", 0)
    started = time.monotonic()
    first = raw_post(url, "/nope", 10**11)  # a declared length over the limit: 413 only where a body is read
    assert first.startswith(b"HTTP/1.1 404"), first
    assert time.monotonic() - started < 5
    assert errors(url).get("body_too_large", 0) == before
    assert raw_post(url, "/predict", 10**11).startswith(b"HTTP/1.1 413")


def test_body_limit_passes_other_routes_on_unread():
    from intentvcs.service.body_limit import BodyLimit

    read, reached = [], []

    async def app(scope, receive, send):
        reached.append(scope["path"])

    async def receive():
        read.append(1)
        return {"type": "http.request", "body": b"{}", "more_body": False}

    limit = BodyLimit(app, max_bytes=10, routes=["/predict"])
    asyncio.run(limit({"type": "http", "method": "POST", "path": "/nope", "headers": []}, receive, None))
    assert reached == ["/nope"] and read == []


def test_a_job_body_of_many_chunks_is_joined_once():
    """Each chunk added to the body copied it again: 33 MB in 16 KiB chunks held the event loop for 12 s."""
    from intentvcs.service.audit_jobs import SUBMIT_ROUTE, JobBodyCheck

    chunk, chunks = b"x" * 4096, 4096  # 16 MiB
    messages = [{"type": "http.request", "body": chunk, "more_body": True}] * (chunks - 1) + \
        [{"type": "http.request", "body": chunk, "more_body": False}]
    incoming, checked = iter(messages), []

    async def receive():
        return next(incoming)

    async def app(scope, receive, send):
        pass

    gate = JobBodyCheck(app, check=lambda body: checked.append(len(body)))  # None: the body passes
    started = time.monotonic()
    asyncio.run(gate({"type": "http", "method": "POST", "path": SUBMIT_ROUTE}, receive, None))
    assert checked == [len(chunk) * chunks]
    assert time.monotonic() - started < 2  # quadratic copying took tens of seconds for this body


def test_the_connector_search_is_linear_in_a_run_of_blanks():
    """A text of 1,000 spaces cost 25 ms (6.6 s for a /predict of 256 of them); 50,000 would cost a minute."""
    from intentvcs.core.segmentation import CONNECTOR, cut

    started = time.monotonic()
    assert CONNECTOR.search("a" + " " * 50_000 + "b") is None
    assert cut("play jazz" + " " * 50_000 + "and turn off the lights")
    assert time.monotonic() - started < 2


def test_a_task_id_may_not_end_in_a_newline(served):
    """The id pattern ended in "$", which also takes a trailing newline: such an id reached the store."""
    url, _ = served
    for route in ("status", "get", "progress"):
        answer = httpx.get(f"{url}/audit/job/{route}", params={"task_id": "0123abcd\n"}, timeout=10)
        assert answer.status_code == 400, (route, answer.text)
    assert httpx.put(f"{url}/audit/job/cancel", params={"task_id": "0123abcd\n"}, timeout=10).status_code == 400


def test_the_progress_folder_is_the_users_and_a_prune_follows_no_link(tmp_path, monkeypatch):
    from intentvcs.service import audit_jobs

    monkeypatch.delenv("BENTOML_HOME", raising=False)
    monkeypatch.setattr(os.path, "expanduser", lambda path: str(tmp_path / "home") if path == "~" else path)
    folder = audit_jobs.progress_folder()
    assert folder.is_relative_to(tmp_path / "home" / "bentoml")  # not the shared temporary folder
    root = folder.parent
    victim = tmp_path / "victim"
    victim.mkdir()
    for name in ("a.json", "b.cancel"):
        (victim / name).write_text("{}")
        os.utime(victim / name, (1, 1))  # older than any cutoff
    root.mkdir(parents=True)
    (root / "server-1").symlink_to(victim)
    audit_jobs.JobProgress(folder, "0123abcd", 10)
    assert sorted(p.name for p in victim.iterdir()) == ["a.json", "b.cancel"]
    assert folder.stat().st_mode & 0o777 == 0o700


def test_a_task_id_given_twice_is_refused(served):
    """The gate checked the first of two ids while BentoML's routes read the last: a malformed id got past it."""
    url, _ = served
    twice = [("task_id", "0123abcd"), ("task_id", "../../x\n")]
    for route in ("status", "get", "progress"):
        answer = httpx.get(f"{url}/audit/job/{route}", params=twice, timeout=10)
        assert answer.status_code == 400 and "once" in answer.json()["error"], (route, answer.text)
    assert httpx.put(f"{url}/audit/job/cancel", params=twice, timeout=10).status_code == 400
    blank_last = [("task_id", "0123abcd"), ("task_id", "")]
    assert httpx.get(f"{url}/audit/job/status", params=blank_last, timeout=10).status_code == 400


def test_another_method_on_status_is_a_counted_json_405(served):
    """POST /status got Starlette's plain-text "Method Not Allowed", counted nowhere, where every other
    refusal is JSON and counted."""
    url, _ = served
    before = errors(url).get("method_not_allowed", 0)
    answer = httpx.post(f"{url}/status", json={}, timeout=10)
    assert answer.status_code == 405 and answer.json() == {"error": "/status takes GET, not POST"}, answer.text
    assert answer.headers["allow"] == "GET"
    assert errors(url).get("method_not_allowed", 0) == before + 1
    assert httpx.get(f"{url}/status", timeout=10).status_code == 200
