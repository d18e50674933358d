"""Review of audit jobs (audit_jobs, audit_control), bundle reload, loading and the ONNX session: each test
reproduces a defect found by the review and fails on the code before its fix."""

from __future__ import annotations

import asyncio
import gc
import json
import tracemalloc

import pytest

from intentvcs.service import audit_jobs
from intentvcs.service.audit_control import AuditCancelled
from intentvcs.service.audit_jobs import (CANCEL_ROUTE, RETRY_ROUTE, SUBMIT_ROUTE, JobBodyCheck, JobGate,
                                          JobProgress, JobSlots, job_runner, progress_folder, read_progress)
from tests.test_audit_jobs import BATCH

TASK = "0123456789abcdef0123456789abcdef"


def _scope(path: str, method: str, task_id: str | None = None) -> dict:
    return {"type": "http", "path": path, "method": method,
            "query_string": b"" if task_id is None else f"task_id={task_id}".encode()}


async def _answer(gate: JobGate, scope: dict) -> list[dict]:
    """The ASGI messages ``gate`` answers ``scope`` with (a route it answers itself: no app, no body)."""
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    await gate(scope, None, send)
    return sent


async def _no_app(scope, receive, send):  # the job routes these tests ask are answered by the gate itself
    raise AssertionError(f"{scope['path']} reached the app")


async def _bentoml_submit(scope, receive, send):
    """BentoML's submit: the body read, the task id answered; the job's task then parses the body again, and only
    then does the job publish its progress (not reached here)."""
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps({"task_id": TASK, "status": "in_progress"}).encode()})


def test_a_job_is_known_to_progress_and_cancel_as_soon_as_its_submit_is_answered(tmp_path, monkeypatch):
    """With 2 workers, an 80,000-row submit's progress and cancel answered 404 "no audit job" on the other worker
    for about a second after its task id (BentoML parses the body again before the job publishes anything), and
    the cancel was lost: the job ran on, holding its slot."""
    from intentvcs.service.schemas import job_body_problem

    monkeypatch.setenv("BENTOML_HOME", str(tmp_path))
    seen = {}

    async def client(message: dict) -> None:  # reads the task id and at once asks a worker, maybe another one
        if message["type"] == "http.response.body":
            seen["progress"] = read_progress(TASK)
            seen["cancel"] = (await _answer(JobGate(_no_app, 1, JobSlots(), 5), _scope(CANCEL_ROUTE, "PUT", TASK)))[0]

    body = iter([{"type": "http.request", "body": json.dumps({"rows": BATCH}).encode(), "more_body": False}])

    async def receive() -> dict:
        return next(body)

    asyncio.run(JobBodyCheck(_bentoml_submit, check=job_body_problem)(_scope(SUBMIT_ROUTE, "POST"), receive, client))
    assert seen["progress"] is not None
    assert (seen["progress"]["stage"], seen["progress"]["rows"], seen["progress"]["ended"]) == \
        ("queued", len(BATCH), False)
    assert seen["cancel"]["status"] == 202
    # Once its task starts, the job sees the cancel and never starts.
    job = JobProgress(progress_folder(), TASK, len(BATCH))
    with pytest.raises(AuditCancelled):
        asyncio.run(job_runner(5).run(lambda should_stop: pytest.fail("a cancelled job started"),
                                      cancelled=job.cancel_requested))


def test_a_job_cancelled_on_another_worker_as_soon_as_it_is_submitted_never_runs(tmp_path):
    """The same on a real server of 2 workers: each request on a new connection, as curl sends them."""
    import httpx

    from intentvcs.cli.commands.serve import running
    from tests.helpers.bundle import make_tiny_bundle
    from tests.test_audit_jobs import REFERENCES, _wait

    bundle = make_tiny_bundle(tmp_path, references=REFERENCES)
    rows = [{"text": f"turn on the lights in room {i} now", "labels": [f"new_intent_{i % 50}"]} for i in range(60_000)]
    with running(bundle, workers=2, extra_env={"INTENTVCS_MAX_AUDIT_ROWS": "5"}) as url:
        task_id = httpx.post(f"{url}/audit/job/submit", json={"rows": rows}, timeout=60).json()["task_id"]
        answers = [httpx.get(f"{url}/audit/job/progress", params={"task_id": task_id}, timeout=30),
                   httpx.put(f"{url}/audit/job/cancel", params={"task_id": task_id}, timeout=30)]
        assert [answer.status_code for answer in answers] == [200, 202], [answer.text for answer in answers]
        assert _wait(url, task_id, timeout_s=60)["status"] == "failed"
        assert httpx.get(f"{url}/audit/job/get", params={"task_id": task_id}, timeout=30).status_code == 410
        assert httpx.get(f"{url}/audit/job/progress", params={"task_id": task_id}, timeout=30).json()["stage"] == \
            "cancelled"


def test_a_retried_job_is_known_to_progress_as_soon_as_the_retry_is_answered(tmp_path, monkeypatch):
    """A retry is a new job of the stored body, which BentoML parses in the job's task as for a submit: the new
    id was unknown to progress and cancel until then."""
    monkeypatch.setenv("BENTOML_HOME", str(tmp_path))
    ended = JobProgress(progress_folder(), "e" * 32, len(BATCH))
    ended.end("done", len(BATCH), len(BATCH))
    seen = {}

    async def client(message: dict) -> None:
        if message["type"] == "http.response.body":
            seen["progress"] = read_progress(TASK)

    async def no_body() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    gate = JobGate(_bentoml_submit, max_jobs=1, slots=JobSlots(), retry_after_s=5)
    asyncio.run(gate(_scope(RETRY_ROUTE, "POST", ended.task_id), no_body, client))
    assert (seen["progress"]["stage"], seen["progress"]["rows"], seen["progress"]["ended"]) == \
        ("queued", len(BATCH), False)
    assert gate.slots.held == 1  # the retried job holds its slot until it ends, as before


def test_a_server_restarted_under_the_same_process_id_knows_no_job_of_the_one_before(tmp_path, monkeypatch):
    """A restarted container runs its server under the same process id (PID 1: `intentvcs serve` execs BentoML),
    so with the same progress folder: a job of the server before, killed mid-run, answered progress with
    "ended": false and cancel with 202, while status and get (BentoML's task store starts empty) said 404."""
    monkeypatch.setenv("BENTOML_HOME", str(tmp_path))
    monkeypatch.setattr(audit_jobs.os, "getppid", lambda: 1)
    # When each server started, in clock ticks since boot (/proc/1/stat): the only difference between the two.
    monkeypatch.setattr(audit_jobs, "_started", lambda pid: "1000", raising=False)
    killed = JobProgress(progress_folder(), "a" * 32, 10)
    killed("audit: new intents", 3, 10, force=True)
    monkeypatch.setattr(audit_jobs, "_started", lambda pid: "5000", raising=False)  # the restarted server
    assert progress_folder() == killed.path.parent
    assert read_progress(killed.task_id) is None
    cancel = asyncio.run(_answer(JobGate(_no_app, 1, JobSlots(), 5), _scope(CANCEL_ROUTE, "PUT", killed.task_id)))
    assert cancel[0]["status"] == 404
    assert json.loads(cancel[1]["body"]) == {"error": f"no audit job {killed.task_id} on this server"}
    running = JobProgress(progress_folder(), "b" * 32, 10)  # a job of this server is still answered
    running("audit: new intents", 4, 10, force=True)
    assert read_progress(running.task_id)["done"] == 4 and "server" not in read_progress(running.task_id)


def test_a_job_that_ends_early_keeps_the_counts_reported_after_its_last_write(tmp_path):
    """Writes are throttled within a stage; a job cancelled or stopped within ``min_interval_s`` of its last write
    ended on that write's count: 5 of 10 for a job that had reported 9."""
    progress = JobProgress(tmp_path / "server-1", "abc", 100, min_interval_s=60)
    progress("audit: new intents", 5, 10, force=True)
    for done in range(6, 10):
        progress("audit: new intents", done, 10)
    assert json.loads(progress.path.read_text())["done"] == 5  # still throttled
    progress.end("cancelled")
    record = json.loads(progress.path.read_text())
    assert (record["stage"], record["done"], record["total"], record["ended"]) == ("cancelled", 9, 10, True)


def test_a_submit_check_holds_no_copy_of_the_body_while_its_job_is_queued_or_runs(tmp_path, monkeypatch):
    """The app returns only once the job has run (BentoML runs it as the submit's background task); the check
    kept the body's chunks and their joined copy for all that time: two copies of up to 32 MB per queued job
    beside the one BentoML keeps."""
    monkeypatch.setenv("BENTOML_HOME", str(tmp_path))
    body = json.dumps({"rows": [{"text": f"turn on the lights in room {i}", "labels": ["Lights"]}
                                for i in range(40_000)]}).encode()
    chunk = 64 * 1024
    held = {}

    async def receive() -> dict:
        start = receive.at
        receive.at += chunk
        return {"type": "http.request", "body": body[start:start + chunk], "more_body": receive.at < len(body)}

    receive.at = 0

    async def bentoml(scope, receive, send):
        parts = []
        while True:
            message = await receive()
            parts.append(message["body"])
            if not message.get("more_body"):
                break
        kept = b"".join(parts)  # Starlette's request body: the copy BentoML keeps for the job
        del parts, message
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": json.dumps({"task_id": TASK}).encode()})
        gc.collect()
        held["bytes"] = tracemalloc.get_traced_memory()[0] - baseline  # while the job is queued or runs
        assert len(kept) == len(body)

    async def send(message: dict) -> None:
        pass

    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        asyncio.run(JobBodyCheck(bentoml, check=lambda body: None)(_scope(SUBMIT_ROUTE, "POST"), receive, send))
    finally:
        tracemalloc.stop()
    assert held["bytes"] < 1.5 * len(body), f"{held['bytes']} bytes held for a body of {len(body)}"
