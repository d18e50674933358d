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
from intentvcs.service.audit_jobs import JobGate, JobProgress, job_runner
from tests.helpers.bundle import DEFAULT_LABELS, make_tiny_bundle

REFERENCES = [{"text": f"{phrase} {tail}", "labels": [label]}
              for label, phrase in zip(DEFAULT_LABELS, ("play a song", "book a table", "will it rain",
                                                        "rate this novel", "find the film"))
              for tail in ("now", "please", "tonight", "for me")]
BATCH = [{"text": f"play some jazz {tail}", "labels": ["PlayJazz"]}
         for tail in ("now", "loud", "please", "again", "tonight", "for me", "at home", "in the car")] + \
        [{"text": f"rate the film {tail}", "labels": ["RateFilm"]} for tail in ("five stars", "badly", "now", "fairly")]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    bundle = make_tiny_bundle(tmp_path_factory.mktemp("jobs"), references=REFERENCES)
    env = {"INTENTVCS_MAX_AUDIT_ROWS": "5"}
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


def test_the_gate_refuses_a_submit_while_the_worker_holds_its_limit():
    calls, refusals, sent = [], [], []

    async def app(scope, receive, send):
        calls.append(scope["path"])

    async def send(message):
        sent.append(message)

    pending = {"n": 1}
    gate = JobGate(app, max_jobs=1, pending=lambda: pending["n"], retry_after_s=5,
                   on_reject=lambda scope, status, reason: refusals.append((status, reason)))
    submit = {"type": "http", "path": "/audit/job/submit", "method": "POST"}
    asyncio.run(gate(submit, None, send))
    assert refusals == [(429, "audit_busy")] and calls == []
    assert sent[0]["status"] == 429 and (b"retry-after", b"5") in sent[0]["headers"]
    assert "INTENTVCS_MAX_AUDIT_JOBS" in json.loads(sent[1]["body"])["error"]
    asyncio.run(gate({"type": "http", "path": "/audit/job/status", "method": "GET"}, None, send))
    pending["n"] = 0
    asyncio.run(gate(submit, None, send))
    assert calls == ["/audit/job/status", "/audit/job/submit"]


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
        assert runner.unfinished == 0
        await asyncio.sleep(0.1)  # the job thread sees the flag at its next check

    asyncio.run(run())
    assert stopped == [True]


def test_progress_is_published_and_old_files_are_pruned(tmp_path):
    import os

    stale = tmp_path / "old.json"
    stale.write_text("{}")
    os.utime(stale, (time.time() - 2 * 86400,) * 2)
    progress = JobProgress(tmp_path, "abc", rows=10, min_interval_s=60)
    assert not stale.exists()
    progress("audit: new intents", 3, 10, force=True)
    progress("audit: new intents", 5, 10)  # within min_interval_s of the last write: skipped
    assert json.loads((tmp_path / "abc.json").read_text())["done"] == 3
    progress("audit: references", 1, 4)  # a new stage is always written
    assert json.loads((tmp_path / "abc.json").read_text())["stage"] == "audit: references"
