"""Audits as asynchronous BentoML tasks: any batch size, with progress.

``POST /audit`` answers within ``INTENTVCS_AUDIT_TIMEOUT_S`` and takes at most
``INTENTVCS_MAX_AUDIT_ROWS`` rows. A larger batch goes to the task endpoint
``/audit/job`` (BentoML's task queue: ``POST /audit/job/submit`` answers at
once with a ``task_id``; ``GET /audit/job/status?task_id=`` and
``GET /audit/job/get?task_id=`` give its state and, once completed, the
report). This module holds what BentoML's task queue does not:

``JobProgress``  where each running job stands (stage, rows done of total),
                 written as small JSON files in a folder every worker of the
                 server shares, so ``GET /audit/job/progress?task_id=`` answers
                 whichever worker ran the job;
``JobGate``      an ASGI middleware admitting a submit (or a retry) only while
                 this worker holds fewer than ``max_jobs`` unfinished jobs
                 (429 with ``Retry-After`` beyond), so submitted batches
                 cannot pile up in memory; and refusing the synchronous form
                 BentoML also routes, ``POST /audit/job`` (404), which would
                 run an audit of any size inside one request, past every
                 bound of ``/audit``;
``JobBodyCheck`` validates a submit's body against the request schema before
                 BentoML queues it (BentoML parses a task's input only when
                 the task runs, so a bad row would otherwise be accepted with
                 a task id and fail later): 400 naming the field, at once;
``job_runner``  the ``AuditRunner`` (``audit_control``) the jobs run on: one
                 at a time on their own thread, apart from the synchronous
                 audits, each with a deadline, at a lower OS priority:
                 /predict's p99 at 8 clients rose 2.5x during a 10,000-row
                 job at normal priority, 1.5x at niceness +10
                 (docs/RESULTS.md, "Audits at scale").
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from intentvcs.core import atomic
from intentvcs.service.audit_control import AuditRunner
from intentvcs.service.rejections import respond

OnReject = Callable[[dict[str, Any], int, str], None]  # (scope, status, reason)
JOB_ROUTE = "/audit/job"
SUBMIT_ROUTE = f"{JOB_ROUTE}/submit"
PROGRESS_ROUTE = f"{JOB_ROUTE}/progress"
RETRY_ROUTE = f"{JOB_ROUTE}/retry"
# Every route of a job but its submit: BentoML's, and ours. Behind the API token like the submit.
JOB_READ_ROUTES = [JOB_ROUTE, RETRY_ROUTE, PROGRESS_ROUTE] + [f"{JOB_ROUTE}/{name}" for name in ("status", "get",
                                                                                              "cancel")]
JOB_NICENESS = 10  # added to the job thread's niceness: /predict comes first
TASK_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")  # BentoML's ids are hex; anything else is no path part


def progress_folder() -> Path:
    """The folder the server's workers share for job progress: under BentoML's home (one per server)."""
    home = os.environ.get("BENTOML_HOME") or os.path.join(tempfile.gettempdir(), "intentvcs-bentoml")
    return Path(home) / "intentvcs-audit-jobs"


# BentoML keeps a task's result for a day; its progress file goes after as long.
PROGRESS_RETENTION_S = 24 * 3600


class JobProgress:
    """Stage and counts of one job, published to ``folder/<task_id>.json`` (atomically, at most every
    ``min_interval_s``, and always on a change of stage). A new job removes the progress files of jobs
    that ended more than ``PROGRESS_RETENTION_S`` ago (files of this folder only, all written here)."""

    def __init__(self, folder: Path, task_id: str, rows: int, min_interval_s: float = 0.5):
        folder.mkdir(parents=True, exist_ok=True)
        cutoff = time.time() - PROGRESS_RETENTION_S
        for old in folder.glob("*.json"):
            if old.stat().st_mtime < cutoff:
                old.unlink(missing_ok=True)
        self.path = folder / f"{task_id}.json"
        self.task_id, self.rows, self.min_interval_s = task_id, rows, min_interval_s
        self.stage, self.last = "", 0.0
        self.started = time.time()

    def __call__(self, stage: str, done: int, total: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and stage == self.stage and now - self.last < self.min_interval_s:
            return
        self.stage, self.last = stage, now
        atomic.write_text(self.path, json.dumps({
            "task_id": self.task_id, "rows": self.rows, "stage": stage, "done": done, "total": total,
            "started_at": self.started, "updated_at": time.time()}))


async def progress_endpoint(request: Request) -> JSONResponse:
    """``GET /audit/job/progress?task_id=``: the job's stage and counts, 404 for an unknown id."""
    task_id = request.query_params.get("task_id", "")
    if not TASK_ID.match(task_id):
        return JSONResponse({"error": "task_id: expected the id that /audit/job/submit answered"}, status_code=400)
    path = progress_folder() / f"{task_id}.json"
    if not path.is_file():
        return JSONResponse({"error": f"no audit job {task_id} has reported progress on this server"},
                            status_code=404)
    return JSONResponse(json.loads(path.read_text(encoding="utf-8")))


class JobGate:
    """Wrap ``app``; a submit to ``/audit/job`` is admitted only while ``pending()`` is under ``max_jobs``."""

    def __init__(self, app: Callable[..., Awaitable[None]], max_jobs: int, pending: Callable[[], int],
                 retry_after_s: int, on_reject: OnReject = lambda scope, status, reason: None):
        self.app, self.max_jobs, self.pending = app, max_jobs, pending
        self.retry_after_s, self.on_reject = retry_after_s, on_reject

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] == "http" and scope["path"] == JOB_ROUTE:
            self.on_reject(scope, 404, "not_found")
            await respond(send, 404, f"an audit job is submitted to POST {SUBMIT_ROUTE}; POST /audit audits "
                                     "a batch in one request")
            return
        if (scope["type"] == "http" and scope["path"] in (SUBMIT_ROUTE, RETRY_ROUTE)
                and self.pending() >= self.max_jobs):
            self.on_reject(scope, 429, "audit_busy")
            await respond(send, 429, f"this worker holds {self.pending()} unfinished audit jobs, its limit "
                                     f"(setting INTENTVCS_MAX_AUDIT_JOBS); retry later",
                          headers=[(b"retry-after", str(self.retry_after_s).encode())])
            return
        await self.app(scope, receive, send)


class JobBodyCheck:
    """Wrap ``app``; the body of a submit to ``/audit/job`` must pass ``check(body)``, which returns None
    or ``(reason, message)`` for a 400. Sits inside ``BodyLimit``, whose buffered body it reads."""

    def __init__(self, app: Callable[..., Awaitable[None]], check: Callable[[bytes], tuple[str, str] | None],
                 on_reject: OnReject = lambda scope, status, reason: None):
        self.app, self.check, self.on_reject = app, check, on_reject

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope["path"] != SUBMIT_ROUTE or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        messages, body = [], b""
        while True:
            message = await receive()
            messages.append(message)
            body += message.get("body", b"")
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        problem = self.check(body)
        if problem is not None:
            self.on_reject(scope, 400, problem[0])
            await respond(send, 400, problem[1])
            return
        replay = iter(messages)

        async def replayed() -> dict[str, Any]:
            return next(replay, None) or await receive()

        await self.app(scope, replayed, send)


def job_runner(timeout_s: float) -> AuditRunner:
    """The runner of a worker's audit jobs: its own thread, at a lower OS priority."""
    return AuditRunner(timeout_s, thread_name="intentvcs-audit-job", initializer=_yield_to_predictions)


def _yield_to_predictions() -> None:
    """Run the job thread at a lower OS priority (Linux schedules threads on their own), so /predict's
    threads get the cores first; where that is not possible the job simply runs at normal priority."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), JOB_NICENESS)
    except (AttributeError, OSError):
        pass
