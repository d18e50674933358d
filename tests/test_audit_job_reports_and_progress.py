"""Second review of the audit: a job's report names the bundle that gave it (``X-Intentvcs-Model``, as
``/audit``'s does); every job route answers an unknown id with one 404; a job's progress shows a stage's
last count however fast its steps came, and the comparison of new intents with each other, the step
that can run for minutes, reports its progress."""

from __future__ import annotations

import json

import httpx

from intentvcs.service.audit import AuditConfig, audit_batch
from intentvcs.service.audit_jobs import JobProgress
from tests.test_audit import FakeEngine, World
from tests.test_audit_jobs import BATCH, _wait, served  # noqa: F401 - served: the jobs' server fixture

UNKNOWN = "0" * 32


def test_a_jobs_report_names_the_bundle_that_gave_it(served):  # noqa: F811
    """``/audit/job/get`` answered the report without the ``X-Intentvcs-Model`` header that ``/audit`` and
    the submit carry."""
    _, url = served
    model = httpx.get(f"{url}/status", timeout=10).json()["model"]
    submitted = httpx.post(f"{url}/audit/job/submit", json={"rows": BATCH}, timeout=30)
    assert submitted.headers["x-intentvcs-model"] == model
    task_id = submitted.json()["task_id"]
    assert _wait(url, task_id)["status"] == "completed"
    report = httpx.get(f"{url}/audit/job/get", params={"task_id": task_id}, timeout=30)
    assert report.status_code == 200
    assert report.headers.get("x-intentvcs-model") == model
    engine = report.json()["engine"]
    assert model == f"{engine['name']}@{engine['bundle_digest'][:len('sha256:') + 12]}"


def test_every_job_route_answers_an_unknown_job_alike(served):  # noqa: F811
    """BentoML's routes (status, get, retry) answered ``task_id not found``, progress and cancel named the id,
    each in its own words."""
    _, url = served
    answers = [httpx.request(method, f"{url}/audit/job/{route}", params={"task_id": UNKNOWN}, timeout=10)
               for method, route in (("GET", "status"), ("GET", "get"), ("GET", "progress"), ("PUT", "cancel"),
                                     ("POST", "retry"))]
    assert [answer.status_code for answer in answers] == [404] * 5
    assert [answer.json() for answer in answers] == [{"error": f"no audit job {UNKNOWN} on this server"}] * 5
    assert {answer.headers["content-type"] for answer in answers} == {"application/json"}


def test_a_stages_last_count_is_published_however_fast_its_steps_came(tmp_path):
    """Throttled to one write per ``min_interval_s``, a stage whose steps came faster stayed at its first count:
    a 100-intent job showed "decided 1 of 100" for the 11 s its pair tests ran."""
    progress = JobProgress(tmp_path / "server-1", "abc", rows=300, min_interval_s=60)
    for done in range(1, 101):
        progress("audit: new intents decided", done, 100)
    record = json.loads(progress.path.read_text())
    assert (record["stage"], record["done"], record["total"]) == ("audit: new intents decided", 100, 100)
    progress("audit: new intents", 5, 10, force=True)
    progress("audit: new intents", 6, 10)  # still throttled within a stage
    assert json.loads(progress.path.read_text())["done"] == 5


def test_the_comparison_of_new_intents_reports_its_progress():
    """The search for duplicate new intents (one test per candidate pair, quadratic) said nothing: a job's
    progress stayed at its last finding for all of it."""
    world = World()
    rows = world.rows("newX1", 40, "X") + world.rows("newX2", 40, "X") + world.rows("newX3", 40, "X")
    told: list[tuple[str, int, int]] = []
    report = audit_batch(FakeEngine(world.table), rows, world.training(), AuditConfig(progress=False),
                         progress=lambda stage, done, total: told.append((stage, done, total)))
    assert report.new_pairs  # pairs were compared
    compared = [(done, total) for stage, done, total in told if stage == "audit: new intent pairs compared"]
    assert compared and compared[-1][0] == compared[-1][1] and [d for d, _ in compared] == list(
        range(1, compared[-1][1] + 1))
    assert told[-1][0] == "audit: new intent pairs compared"  # the last step, after the findings
