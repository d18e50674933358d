"""Audits as background BentoML tasks (intentvcs.service.audit_jobs): a real server takes a batch
past the synchronous cap, reports progress and returns the report the library gives; the gate and
the deadline are checked on their own."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from intentvcs.cli.commands.serve import running
from intentvcs.service.audit_control import AuditTimeout
from intentvcs.service.audit_jobs import JobGate, JobProgress, JobSlots, job_runner
from tests.helpers.bundle import DEFAULT_LABELS, make_tiny_bundle

REFERENCES = [{"text": f"{phrase} {tail}", "labels": [label]}
              for label, phrase in zip(DEFAULT_LABELS, ("play a song", "book a table", "will it rain",
                                                        "rate this novel", "find the film"))
              for tail in ("now", "please", "tonight", "for me")]
BATCH = [{"text": f"play some jazz {tail}", "labels": ["PlayJazz"]}
         for tail in ("now", "loud", "please", "again", "tonight", "for me", "at home", "in the car")] + \
        [{"text": f"rate the film {tail}", "labels": ["RateFilm"]} for tail in ("five stars", "badly", "now", "fairly")]


# One meaning under 100 new names, every pair tested: an audit of about 20 s unstopped on 2 cores. Three
# distinct rows each: a repeated row counts once (an intent of one row has no pair tested).
SLOW = [{"text": f"turn on the lights in room {i} {tail}", "labels": [f"new_intent_{i}"]} for i in range(100)
        for tail in ("now", "please", "again")]
MAX_JOBS, JOB_TIMEOUT_S = 2, 4


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    bundle = make_tiny_bundle(tmp_path_factory.mktemp("jobs"), references=REFERENCES)
    env = {"INTENTVCS_MAX_AUDIT_ROWS": "5", "INTENTVCS_MAX_AUDIT_JOBS": str(MAX_JOBS),
           "INTENTVCS_AUDIT_JOB_TIMEOUT_S": str(JOB_TIMEOUT_S),
           "INTENTVCS_AUDIT_CONFIG": json.dumps({"max_new_pairs": 10_000})}
    with running(bundle, extra_env=env) as url:
        yield bundle, url


def _wait(url: str, task_id: str, timeout_s: float = 120) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = httpx.get(f"{url}/audit/job/status", params={"task_id": task_id}, timeout=10).json()
        if status["status"] in ("completed", "failed"):
            return status
        time.sleep(0.3)
    raise AssertionError(f"audit job {task_id} still {status} after {timeout_s} s")


def test_a_job_takes_a_batch_past_the_synchronous_cap(served):
    from intentvcs.service.audit import AuditConfig, audit_batch
    from intentvcs.service.engine import Engine

    bundle, url = served
    refused = httpx.post(f"{url}/audit", json={"rows": BATCH}, timeout=30)
    assert refused.status_code == 400 and "at most 5 items" in refused.text
    submitted = httpx.post(f"{url}/audit/job/submit", json={"rows": BATCH}, timeout=30)
    assert submitted.status_code == 200, submitted.text
    task_id = submitted.json()["task_id"]
    assert _wait(url, task_id)["status"] == "completed"
    report = httpx.get(f"{url}/audit/job/get", params={"task_id": task_id}, timeout=30).json()
    library = audit_batch(Engine(bundle, provider="cpu"), BATCH, config=AuditConfig(progress=False)).to_dict()
    assert [(f["intent"], f["relation"], f["existing"]) for f in report["findings"]] == \
        [(f["intent"], f["relation"], f["existing"]) for f in library["findings"]]
    assert report["summary"]["new_intents"] == ["PlayJazz", "RateFilm"]
    progress = httpx.get(f"{url}/audit/job/progress", params={"task_id": task_id}, timeout=10).json()
    assert (progress["stage"], progress["done"], progress["total"], progress["rows"]) == ("done", 12, 12, 12)
    assert progress["ended"] is True


def _errors(url: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{url}/metrics", timeout=10).text
    return {s.labels["reason"]: s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == "intentvcs_request_errors_total"}


def _job(url: str, route: str, task_id: str) -> httpx.Response:
    return httpx.get(f"{url}/audit/job/{route}", params={"task_id": task_id}, timeout=10)


def test_a_burst_of_submits_gets_no_more_jobs_than_the_limit_and_cancel_stops_them(served):
    """Submits sent at once each take a slot when admitted (BentoML starts a task only after answering
    its submit, so a count of started jobs let them all in); a cancel stops the running job at its next
    step and the queued one before it starts, and each then answers with the reason it has no report."""
    from concurrent.futures import ThreadPoolExecutor

    _, url = served
    before = _errors(url)
    with ThreadPoolExecutor(MAX_JOBS + 2) as pool:
        answers = list(pool.map(lambda _: httpx.post(f"{url}/audit/job/submit", json={"rows": SLOW}, timeout=30),
                                range(MAX_JOBS + 2)))
    admitted = [answer.json()["task_id"] for answer in answers if answer.status_code == 200]
    assert sorted(answer.status_code for answer in answers) == [200] * MAX_JOBS + [429] * 2
    started = time.monotonic()
    for task_id in admitted:
        cancelled = httpx.put(f"{url}/audit/job/cancel", params={"task_id": task_id}, timeout=10)
        assert cancelled.status_code == 202 and cancelled.json() == {"task_id": task_id, "status": "cancelling"}
    for task_id in admitted:
        assert _wait(url, task_id, timeout_s=JOB_TIMEOUT_S)["status"] == "failed"
        result = _job(url, "get", task_id)
        assert result.status_code == 410 and "cancelled" in result.json()["error"]
        progress = _job(url, "progress", task_id).json()
        assert progress["stage"] == "cancelled" and progress["ended"] is True
        again = httpx.put(f"{url}/audit/job/cancel", params={"task_id": task_id}, timeout=10)
        assert again.status_code == 409 and "already ended (cancelled)" in again.json()["error"]
    assert time.monotonic() - started < JOB_TIMEOUT_S  # stopped by the cancel, not the deadline
    unknown = httpx.put(f"{url}/audit/job/cancel", params={"task_id": "0" * 32}, timeout=10)
    assert unknown.status_code == 404 and "no audit job" in unknown.json()["error"]
    assert httpx.get(f"{url}/audit/job/cancel", params={"task_id": admitted[0]}, timeout=10).status_code == 405
    after = _errors(url)
    assert after["audit_busy"] == before["audit_busy"] + 2
    assert after["audit_cancelled"] == before["audit_cancelled"] + MAX_JOBS
    # Both slots are free again.
    submitted = httpx.post(f"{url}/audit/job/submit", json={"rows": BATCH}, timeout=30)
    assert submitted.status_code == 200 and _wait(url, submitted.json()["task_id"])["status"] == "completed"


def test_every_answer_of_a_jobs_routes_is_as_the_document_says(served):
    """A client generated from /docs.json reads each of these answers as documented
    (``intentvcs.service.openapi_document``): status, media type and body, the report, the task
    status' values, the cancel's 202 and the refusals' bodies included."""
    import schemathesis

    _, url = served
    document = schemathesis.openapi.from_dict(httpx.get(f"{url}/docs.json", timeout=10).json())
    answers = []

    def checked(method: str, route: str, expected: int, **kwargs) -> httpx.Response:
        answer = httpx.request(method, f"{url}{route}", timeout=30, **kwargs)
        assert answer.status_code == expected, (method, route, answer.status_code, answer.text)
        document[route][method].validate_response(answer)
        answers.append((method, route, expected))
        return answer

    done = checked("POST", "/audit/job/submit", 200, json={"rows": BATCH}).json()["task_id"]
    _wait(url, done)
    checked("GET", "/audit/job/status", 200, params={"task_id": done})
    checked("GET", "/audit/job/progress", 200, params={"task_id": done})
    checked("GET", "/audit/job/get", 200, params={"task_id": done})
    checked("PUT", "/audit/job/cancel", 409, params={"task_id": done})
    retried = checked("POST", "/audit/job/retry", 200, params={"task_id": done}).json()["task_id"]
    _wait(url, retried)
    slow = checked("POST", "/audit/job/submit", 200, json={"rows": SLOW}).json()["task_id"]
    checked("GET", "/audit/job/get", 400, params={"task_id": slow})  # not ended yet
    checked("PUT", "/audit/job/cancel", 202, params={"task_id": slow})
    _wait(url, slow, timeout_s=JOB_TIMEOUT_S)
    checked("GET", "/audit/job/get", 410, params={"task_id": slow})
    for route, method in (("/audit/job/status", "GET"), ("/audit/job/get", "GET"), ("/audit/job/progress", "GET"),
                          ("/audit/job/cancel", "PUT"), ("/audit/job/retry", "POST")):
        checked(method, route, 404, params={"task_id": "0" * 32})
    checked("POST", "/audit/job/submit", 400, json={"rows": []})
    checked("POST", "/audit/job/submit", 415, content=b"{}", headers={"content-type": "text/plain"})
    checked("GET", "/status", 200)
    assert {status for *_, status in answers} == {200, 202, 400, 404, 409, 410, 415}


def _progress_of(url: str, task_id: str, timeout_s: float = 10) -> dict:
    """The job's progress once it has published one (its task starts just after its submit is answered)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        answer = _job(url, "progress", task_id)
        if answer.status_code == 200:
            return answer.json()
        time.sleep(0.05)
    raise AssertionError(f"audit job {task_id} published no progress in {timeout_s} s")


def test_a_queued_job_cancelled_never_starts_and_gives_its_slot_back_at_once(served):
    """Cancelled while queued behind a running job, a job ends "cancelled" within a poll, not when the job
    ahead of it ends (then starting, reading all its rows and stopping), and its slot is free again."""
    _, url = served
    ahead = httpx.post(f"{url}/audit/job/submit", json={"rows": SLOW}, timeout=30).json()["task_id"]
    _progress_of(url, ahead)  # queued on the job thread first
    queued = httpx.post(f"{url}/audit/job/submit", json={"rows": SLOW}, timeout=30).json()["task_id"]
    assert _progress_of(url, queued)["stage"] == "queued"
    assert httpx.put(f"{url}/audit/job/cancel", params={"task_id": queued}, timeout=10).status_code == 202
    assert _wait(url, queued, timeout_s=2)["status"] == "failed"
    assert _job(url, "progress", ahead).json()["ended"] is False  # the job ahead still runs
    result = _job(url, "get", queued)
    assert result.status_code == 410 and "cancelled" in result.json()["error"]
    progress = _job(url, "progress", queued).json()
    assert (progress["stage"], progress["done"], progress["ended"]) == ("cancelled", 0, True)
    # Its slot is free: a third job is admitted beside the running one (MAX_JOBS = 2).
    third = httpx.post(f"{url}/audit/job/submit", json={"rows": BATCH}, timeout=30)
    assert third.status_code == 200, third.text
    httpx.put(f"{url}/audit/job/cancel", params={"task_id": ahead}, timeout=10)  # 409 if its deadline came first
    assert _wait(url, third.json()["task_id"])["status"] == "completed"
    assert _wait(url, ahead)["status"] == "failed"


def test_a_jobs_deadline_runs_from_its_start_and_its_answer_says_why_it_has_no_report(served):
    _, url = served
    before = _errors(url)
    slow = httpx.post(f"{url}/audit/job/submit", json={"rows": SLOW}, timeout=30).json()["task_id"]
    queued = httpx.post(f"{url}/audit/job/submit", json={"rows": BATCH}, timeout=30).json()["task_id"]
    assert _wait(url, slow)["status"] == "failed"
    result = _job(url, "get", slow)
    assert result.status_code == 504
    assert f"within {JOB_TIMEOUT_S} s of its start (setting INTENTVCS_AUDIT_JOB_TIMEOUT_S)" in result.json()["error"]
    # Queued behind the slow job for its whole deadline, the next one still runs to its end.
    assert _wait(url, queued)["status"] == "completed" and _job(url, "get", queued).status_code == 200
    time.sleep(1.0)  # the stopped job's thread has seen its flag: its last stage stays
    progress = _job(url, "progress", slow).json()
    assert progress["stage"] == "stopped: deadline" and progress["ended"] is True
    assert _errors(url)["audit_timeout"] == before["audit_timeout"] + 1


def test_progress_of_an_unknown_or_malformed_job(served):
    _, url = served
    unknown = httpx.get(f"{url}/audit/job/progress", params={"task_id": "0" * 32}, timeout=10)
    assert unknown.status_code == 404 and "no audit job" in unknown.json()["error"]
    malformed = httpx.get(f"{url}/audit/job/progress", params={"task_id": "../etc/passwd"}, timeout=10)
    assert malformed.status_code == 400 and "task_id" in malformed.json()["error"]


def test_the_synchronous_form_of_the_job_route_is_refused(served):
    _, url = served
    refused = httpx.post(f"{url}/audit/job", json={"rows": BATCH}, timeout=30)
    assert refused.status_code == 404 and "/audit/job/submit" in refused.json()["error"]


def test_a_job_submit_is_checked_like_an_audit(served):
    _, url = served
    bad = httpx.post(f"{url}/audit/job/submit", json={"rows": [{"text": "hi", "labels": ["a", "a"]}]}, timeout=30)
    assert bad.status_code == 400 and "rows[0]" in bad.json()["error"]
    # A body the schema refuses is answered as /audit answers it: the fields named, the input not echoed.
    body = {"rows": [{"text": "my secret pin is 1234", "label": ["x"]}]}
    for route in ("/audit", "/audit/job/submit"):
        refused = httpx.post(f"{url}{route}", json=body, timeout=30)
        assert refused.status_code == 400, route
        answer = refused.json()
        assert answer["error"].startswith("2 validation error"), route
        assert sorted(tuple(d["loc"]) for d in answer["detail"]) == [("rows", 0, "label"), ("rows", 0, "labels")]
        assert "secret" not in refused.text, route


def test_the_gate_takes_a_slot_per_admitted_submit_and_gives_back_those_that_started_no_task():
    calls, refusals, sent = [], [], []
    answer_status = {"code": 200}

    async def app(scope, receive, send):  # BentoML's answer to a submit
        calls.append(scope["path"])
        await send({"type": "http.response.start", "status": answer_status["code"], "headers": []})

    async def send(message):
        sent.append(message)

    slots = JobSlots()
    gate = JobGate(app, max_jobs=1, slots=slots, retry_after_s=5,
                   on_reject=lambda scope, status, reason: refusals.append((status, reason)))
    submit = {"type": "http", "path": "/audit/job/submit", "method": "POST"}
    asyncio.run(gate(submit, None, send))
    assert slots.held == 1 and calls == ["/audit/job/submit"]  # admitted: held until the job ends
    asyncio.run(gate(submit, None, send))
    assert refusals == [(429, "audit_busy")] and calls == ["/audit/job/submit"]
    assert sent[-2]["status"] == 429 and (b"retry-after", b"5") in sent[-2]["headers"]
    assert "INTENTVCS_MAX_AUDIT_JOBS" in json.loads(sent[-1]["body"])["error"]
    asyncio.run(gate({"type": "http", "path": "/audit/job/status", "method": "GET", "query_string": b"task_id=ab"},
                     None, send))
    slots.release()  # the job ended
    answer_status["code"] = 404  # a retry of an unknown task: no job started, the slot comes back
    asyncio.run(gate({"type": "http", "path": "/audit/job/retry", "method": "POST", "query_string": b"task_id=ab"},
                     None, send))
    assert slots.held == 0 and calls == ["/audit/job/submit", "/audit/job/status", "/audit/job/retry"]
    assert refusals == [(429, "audit_busy"), (404, "not_found")]  # the unknown task's 404 is counted
    # A malformed task id or a wrong method is refused, counted, before BentoML sees it.
    asyncio.run(gate({"type": "http", "path": "/audit/job/retry", "method": "POST", "query_string": b"task_id=a/b"},
                     None, send))
    asyncio.run(gate({"type": "http", "path": "/audit/job/get", "method": "DELETE", "query_string": b"task_id=ab"},
                     None, send))
    assert refusals[2:] == [(400, "invalid_request"), (405, "method_not_allowed")] and len(calls) == 3
    assert (b"allow", b"GET") in sent[-2]["headers"]


def test_a_job_past_its_deadline_is_told_to_stop():
    stopped = []

    def job(should_stop):
        while not should_stop():
            time.sleep(0.01)
        stopped.append(True)

    runner = job_runner(timeout_s=0.2)

    async def run():
        with pytest.raises(AuditTimeout):
            await runner.run(job)
        await asyncio.sleep(0.1)  # the job thread sees the flag at its next check

    asyncio.run(run())
    assert stopped == [True]


def test_a_queued_job_has_no_deadline_until_it_starts():
    """Two jobs on one runner: the second waits out the first, longer than the deadline, and still runs."""
    runner = job_runner(timeout_s=0.5)

    async def run():
        first = asyncio.ensure_future(runner.run(lambda should_stop: time.sleep(0.8) or "first"))
        await asyncio.sleep(0.05)
        second = await runner.run(lambda should_stop: "second")
        with pytest.raises(AuditTimeout):
            await first
        return second

    assert asyncio.run(run()) == "second"


def test_progress_is_published_ends_once_and_old_files_are_pruned(tmp_path):
    import os

    earlier_server = tmp_path / "server-1"
    earlier_server.mkdir()
    stale = earlier_server / "old.json"
    stale.write_text("{}")
    os.utime(stale, (time.time() - 2 * 86400,) * 2)
    foreign = tmp_path / "notes.txt"  # not ours: never touched
    foreign.write_text("keep")
    progress = JobProgress(tmp_path / "server-2", "abc", rows=10, min_interval_s=60)
    assert not stale.exists() and not earlier_server.exists() and foreign.exists()
    path = tmp_path / "server-2" / "abc.json"
    progress("audit: new intents", 3, 10, force=True)
    progress("audit: new intents", 5, 10)  # within min_interval_s of the last write: skipped
    assert json.loads(path.read_text())["done"] == 3
    progress("audit: references", 1, 4)  # a new stage is always written
    assert json.loads(path.read_text())["stage"] == "audit: references"
    (tmp_path / "server-2" / "abc.cancel").write_text("")
    assert progress.cancel_requested()
    progress.end("cancelled", 0, 10)
    progress("audit: references", 2, 4, force=True)  # a job thread that has not yet seen its flag
    assert json.loads(path.read_text())["stage"] == "cancelled" and json.loads(path.read_text())["ended"]
    assert not progress.cancel_requested()


def test_each_server_has_its_own_progress_folder(monkeypatch, tmp_path):
    """Named after the server process, the workers' parent: a restarted server knows no earlier job, as
    BentoML's task store, which it deletes at start, knows none."""
    from intentvcs.service import audit_jobs

    monkeypatch.setenv("BENTOML_HOME", str(tmp_path))
    monkeypatch.setattr(audit_jobs.os, "getppid", lambda: 4242)
    assert audit_jobs.progress_folder() == tmp_path / "intentvcs-audit-jobs" / "server-4242"
