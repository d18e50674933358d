"""Audits as asynchronous BentoML tasks: any batch size, with progress.

``POST /audit`` answers within ``INTENTVCS_AUDIT_TIMEOUT_S`` and takes at most
``INTENTVCS_MAX_AUDIT_ROWS`` rows. A larger batch goes to the task endpoint
``/audit/job`` (BentoML's task queue: ``POST /audit/job/submit`` answers at
once with a ``task_id``; ``GET /audit/job/status?task_id=`` and
``GET /audit/job/get?task_id=`` give its state and, once it has ended, the
report or the reason there is none). This module holds what BentoML's task
queue does not:

``JobProgress``  where each job stands (stage, rows done of total, whether it
                 has ended), written as small JSON files in a folder every
                 worker of the server shares, so ``GET /audit/job/progress?task_id=``
                 answers whichever worker ran the job, from the answer to its
                 submit (or retry) on; the folder is the
                 server's own (BentoML's task store starts empty with each
                 server start, so progress does too); a cancel request is a
                 marker file beside it, which the job checks between its steps
                 and its runner while the job waits for the job thread (a
                 cancelled queued job never starts and gives its slot back);
``JobSlots``     the unfinished jobs a worker has admitted, counted from the
                 admission (BentoML starts a task only after answering its
                 submit: a count taken at the start let a burst of submits
                 past the limit);
``JobGate``      an ASGI middleware admitting a submit (or a retry) only while
                 this worker holds fewer than ``max_jobs`` slots (429 with
                 ``Retry-After`` beyond), so submitted batches cannot pile up
                 in memory; answering ``PUT /audit/job/cancel`` itself
                 (BentoML's local server cannot cancel a task, yet marked it
                 cancelled while it ran on); and refusing the synchronous form
                 BentoML also routes, ``POST /audit/job`` (404), which would
                 run an audit of any size inside one request, past every
                 bound of ``/audit``; and refusing, counted and as JSON like
                 every other refusal, a job route's wrong method (405), a
                 malformed ``task_id`` (400) and an unknown job (404);
``JobBodyCheck`` validates a submit's body against the request schema before
                 BentoML queues it (BentoML parses a task's input only when
                 the task runs, so a bad row would otherwise be accepted with
                 a task id and fail later): 400 naming the field, at once,
                 checked on a thread (a 100,000-row body took 2 s of the
                 event loop, delaying every /predict);
``job_runner``  the ``AuditRunner`` (``audit_control``) the jobs run on: one
                 at a time on their own thread, apart from the synchronous
                 audits, each with a deadline from its start, at a lower OS
                 priority: /predict's p99 at 8 clients rose 2.5x during a
                 10,000-row job at normal priority, 1.5x at niceness +10
                 (docs/RESULTS.md, "Audits at scale").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import threading
import time
from urllib.parse import parse_qs
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from intentvcs.core import atomic
from intentvcs.service.audit_control import AuditRunner
from intentvcs.service.rejections import respond, respond_json

OnReject = Callable[[dict[str, Any], int, str], None]  # (scope, status, reason)
JOB_ROUTE = "/audit/job"
SUBMIT_ROUTE = f"{JOB_ROUTE}/submit"
PROGRESS_ROUTE = f"{JOB_ROUTE}/progress"
RETRY_ROUTE = f"{JOB_ROUTE}/retry"
CANCEL_ROUTE = f"{JOB_ROUTE}/cancel"
STATUS_ROUTE, GET_ROUTE = f"{JOB_ROUTE}/status", f"{JOB_ROUTE}/get"
# The method of each job route JobGate passes on (HEAD too with GET, as Starlette routes it); cancel is its own.
JOB_METHODS = {SUBMIT_ROUTE: "POST", RETRY_ROUTE: "POST", STATUS_ROUTE: "GET", GET_ROUTE: "GET",
               PROGRESS_ROUTE: "GET"}
BAD_TASK_ID = "task_id: expected the id that /audit/job/submit answered, given once"
# Every route of a job but its submit: BentoML's, and ours. Behind the API token like the submit.
JOB_READ_ROUTES = [JOB_ROUTE, RETRY_ROUTE, PROGRESS_ROUTE, CANCEL_ROUTE, STATUS_ROUTE, GET_ROUTE]
JOB_NICENESS = 10  # added to the job thread's niceness: /predict comes first
TASK_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")  # fullmatch: BentoML's ids are hex; anything else is no path part


def progress_folder() -> Path:
    """This server's job-progress folder, which its workers share: under BentoML's home (one per
    server), named after the server process, whose children the workers are. A restarted server
    starts an empty one, as BentoML starts its task store empty: no job outlives a restart (one restarted
    under the same process id, as a container's is, finds the folder of the one before, whose records
    ``read_progress`` tells apart and answers as unknown)."""
    # BentoML's own default, a folder of the user's: under the shared temporary folder another local user
    # could create the tree first and link a server folder to files a prune would delete.
    home = os.environ.get("BENTOML_HOME") or os.path.join(os.path.expanduser("~"), "bentoml")
    return Path(home) / "intentvcs-audit-jobs" / f"server-{os.getppid()}"


# BentoML keeps a task's result while its server runs; a job's progress goes a day after its last write.
PROGRESS_RETENTION_S = 24 * 3600
PROGRESS_SUFFIX, CANCEL_SUFFIX = ".json", ".cancel"


class JobProgress:
    """Stage and counts of one job, published to ``folder/<task_id>.json`` (atomically, at most every
    ``min_interval_s``, and always on a change of stage and at a stage's last count) until ``end`` writes its
    last stage.

    A new job removes what this module wrote more than ``PROGRESS_RETENTION_S`` ago: progress and
    cancel files of this folder and of earlier servers' folders beside it (``prune``).
    """

    def __init__(self, folder: Path, task_id: str, rows: int, min_interval_s: float = 0.5):
        prune(folder.parent, time.time() - PROGRESS_RETENTION_S, keep=folder)
        # The job thread writes progress while the event loop may end the job (deadline, cancel): the
        # check of ``ended`` and the write are one step, so no progress write lands after the last stage.
        self._lock = threading.Lock()
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # job progress is the server's, not every user's
        self.path = folder / f"{task_id}{PROGRESS_SUFFIX}"
        self.cancel_path = folder / f"{task_id}{CANCEL_SUFFIX}"
        self.task_id, self.rows, self.min_interval_s = task_id, rows, min_interval_s
        self.stage, self.last, self.ended = "", 0.0, False
        self.done, self.total = 0, rows  # the counts last reported: where a job that ends early got to
        self.started = time.time()

    def __call__(self, stage: str, done: int, total: int, force: bool = False) -> None:
        with self._lock:
            now = time.monotonic()
            # A stage's last count (done == total) is always written: throttled, a stage whose steps came
            # faster than min_interval_s stayed at its first count ("1 of 100 decided") while the next,
            # silent step ran on for seconds.
            if self.ended:
                return
            if not force and stage == self.stage and done < total and now - self.last < self.min_interval_s:
                # Not written, yet where the job got to: a job cancelled or stopped within min_interval_s of
                # its last write ended on that write's count ("5 of 10" of a job at 9).
                self.done, self.total = done, total
                return
            self.stage, self.last = stage, now
            self._write(stage, done, total)

    def end(self, stage: str, done: int | None = None, total: int | None = None) -> None:
        """Write the job's last stage ("done", "cancelled", "stopped: deadline", "failed: ..."), with
        ``done`` of ``total`` (default: the counts last reported, where a job that ends early got to); later
        calls, from a job thread that has not yet seen its stop flag, write nothing. A progress write
        under way on the job thread is waited for (a small file), not overwritten after this one."""
        with self._lock:
            if not self.ended:
                self._write(stage, self.done if done is None else done, self.total if total is None else total,
                            ended=True)
                self.ended, self.stage = True, stage
        self.cancel_path.unlink(missing_ok=True)

    def cancel_requested(self) -> bool:
        """Whether ``PUT /audit/job/cancel`` asked this job to stop (on any worker of the server)."""
        return self.cancel_path.exists()

    def _write(self, stage: str, done: int, total: int, ended: bool = False) -> None:
        self.done, self.total = done, total
        atomic.write_text(self.path, json.dumps({
            "task_id": self.task_id, "rows": self.rows, "stage": stage, "done": done, "total": total,
            "ended": ended, "started_at": self.started, "updated_at": time.time(), SERVER_KEY: server_instance()}))


def prune(root: Path, cutoff: float, keep: Path) -> None:
    """Remove the progress and cancel files under ``root`` (one folder per server) last written before
    ``cutoff``, then the folders of earlier servers left empty (``keep``, this server's, stays: its
    other workers write into it). Nothing else is touched. The workers of a server prune the same
    folders, each as it starts a job: a file or folder another removed meanwhile is skipped."""
    # A link is never followed: what it points at was not written here.
    for folder in (path for path in root.glob("server-*") if path.is_dir() and not path.is_symlink()):
        try:
            files = [*folder.glob(f"*{PROGRESS_SUFFIX}"), *folder.glob(f"*{CANCEL_SUFFIX}")]
        except FileNotFoundError:  # removed since it was listed
            continue
        for old in files:
            try:
                if not old.is_symlink() and old.stat().st_mtime < cutoff:
                    old.unlink()
            except FileNotFoundError:  # another worker pruned it first
                pass
        if folder != keep:
            try:
                folder.rmdir()  # only when empty
            except OSError:
                pass


def unknown_job(task_id: str) -> str:
    """The one 404 message of every job route for an id this server does not know."""
    return f"no audit job {task_id} on this server"


def read_progress(task_id: str) -> dict[str, Any] | None:
    """The last progress ``task_id`` published on this server, or None (also for a record an earlier server of
    the same process id left in its folder)."""
    path = progress_folder() / f"{task_id}{PROGRESS_SUFFIX}"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    # A restarted container runs its server under the same process id (PID 1: `intentvcs serve` execs BentoML),
    # so in the same folder: the jobs of the server before were answered (a job killed mid-run "ended": false
    # for a day, and cancelled with 202) while BentoML's own routes knew none of them.
    return record if record.pop(SERVER_KEY, None) == server_instance() else None


SERVER_KEY = "server"  # in the file only: which server wrote the record (``server_instance``)


def server_instance() -> str:
    """This worker's server, told apart from an earlier one of the same process id: ``<pid>:<start>``, its start
    in clock ticks since boot (empty where there is no /proc: then the process id alone)."""
    pid = os.getppid()
    return f"{pid}:{_started(pid)}"


@functools.cache
def _started(pid: int) -> str:
    try:
        # Field 22 (starttime), counted after the command name, which may hold spaces and parentheses.
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


async def progress_endpoint(request: Request) -> JSONResponse:
    """``GET /audit/job/progress?task_id=``: the job's stage and counts, 404 for an unknown id (``JobGate``
    has refused a malformed one, and counts the 404)."""
    task_id = task_id_of(request.scope)
    if not task_id:
        return JSONResponse({"error": BAD_TASK_ID}, status_code=400)
    progress = read_progress(task_id)
    if progress is None:
        return JSONResponse({"error": unknown_job(task_id)}, status_code=404)
    return JSONResponse(progress)


class JobSlots:
    """The unfinished audit jobs one worker has admitted (one event loop per worker: no lock)."""

    def __init__(self) -> None:
        self.held = 0

    def take(self) -> None:
        self.held += 1

    def release(self) -> None:
        self.held = max(0, self.held - 1)


class JobGate:
    """Wrap ``app``; a submit (or retry) to ``/audit/job`` is admitted only while ``slots`` holds fewer
    than ``max_jobs``. An admitted request takes a slot, given back at once when its answer is not a
    task (the job gives it back when it ends, ``app.IntentService.audit_job``)."""

    def __init__(self, app: Callable[..., Awaitable[None]], max_jobs: int, slots: JobSlots,
                 retry_after_s: int, on_reject: OnReject = lambda scope, status, reason: None):
        self.app, self.max_jobs, self.slots = app, max_jobs, slots
        self.retry_after_s, self.on_reject = retry_after_s, on_reject

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        path = scope.get("path") if scope["type"] == "http" else None
        if path == JOB_ROUTE:
            self.on_reject(scope, 404, "not_found")
            await respond(send, 404, f"an audit job is submitted to POST {SUBMIT_ROUTE}; POST /audit audits "
                                     "a batch in one request")
        elif path == CANCEL_ROUTE:
            await self._cancel(scope, send)
        elif path not in JOB_METHODS:
            await self.app(scope, receive, send)
        elif scope["method"] not in (JOB_METHODS[path], "HEAD" if JOB_METHODS[path] == "GET" else None):
            self.on_reject(scope, 405, "method_not_allowed")
            await respond(send, 405, f"{path} takes {JOB_METHODS[path]}, not {scope['method'][:20]}",
                          headers=[(b"allow", JOB_METHODS[path].encode())])
        elif path != SUBMIT_ROUTE and not task_id_of(scope):
            self.on_reject(scope, 400, "invalid_request")
            await respond(send, 400, BAD_TASK_ID)
        elif path in (SUBMIT_ROUTE, RETRY_ROUTE):
            await self._admit(scope, receive, send)
        else:  # status, get, progress: BentoML's (or our) 404 for an unknown job is counted
            await self.app(scope, receive, self._counting_unknown(scope, send))

    def _counting_unknown(self, scope: dict[str, Any], send: Callable) -> Callable:
        """``send``, with a 404 (an unknown job) counted and answered as ``unknown_job`` words it: BentoML's
        routes (status, get, retry) answered ``task_id not found``, naming no id, where progress and cancel
        named it."""
        answered: list[bool] = []

        async def counted(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and message["status"] == 404:
                self.on_reject(scope, 404, "not_found")
                answered.append(True)
                await respond(send, 404, unknown_job(task_id_of(scope)))
            elif not answered:  # the replaced 404's own body is dropped
                await send(message)

        return counted

    async def _admit(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if self.slots.held >= self.max_jobs:
            self.on_reject(scope, 429, "audit_busy")
            await respond(send, 429, f"this worker holds {self.slots.held} unfinished audit jobs, its limit "
                                     f"(setting INTENTVCS_MAX_AUDIT_JOBS); retry later",
                          headers=[(b"retry-after", str(self.retry_after_s).encode())])
            return
        counted = self._counting_unknown(scope, send)  # a retry of a job this server does not know: 404
        retried = read_progress(task_id_of(scope)) if scope["path"] == RETRY_ROUTE else None
        if retried is not None:  # a new job of the same body: as a submit's, known as soon as it is answered
            counted = _publishing_queued(counted, retried["rows"])
        self.slots.take()
        answered: dict[str, int] = {}

        async def watched(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                answered["status"] = message["status"]
            await counted(message)

        try:
            # Returns once the task has run too: BentoML runs it as the submit's background task.
            await self.app(scope, receive, watched)
        finally:
            if answered.get("status") != 200:  # no task was started
                self.slots.release()

    async def _cancel(self, scope: dict[str, Any], send: Callable) -> None:
        """``PUT /audit/job/cancel?task_id=``: 202 and the job stops at its next step (queued, it never
        starts); 404 for a job this server does not know, 409 for one that has ended."""
        if scope["method"] != "PUT":
            self.on_reject(scope, 405, "method_not_allowed")
            await respond(send, 405, f"cancel an audit job with PUT {CANCEL_ROUTE}?task_id=",
                          headers=[(b"allow", b"PUT")])
            return
        task_id = task_id_of(scope)
        if not task_id:
            self.on_reject(scope, 400, "invalid_request")
            await respond(send, 400, BAD_TASK_ID)
            return
        progress = read_progress(task_id)
        if progress is None:
            self.on_reject(scope, 404, "not_found")
            await respond(send, 404, unknown_job(task_id))
            return
        if progress.get("ended"):
            self.on_reject(scope, 409, "job_ended")
            await respond(send, 409, f"audit job {task_id} has already ended ({progress['stage']})")
            return
        atomic.write_text(progress_folder() / f"{task_id}{CANCEL_SUFFIX}", "")
        await respond_json(send, 202, {"task_id": task_id, "status": "cancelling"})


def task_id_of(scope: dict[str, Any]) -> str:
    """The request's ``task_id``, or "" (refused, ``BAD_TASK_ID``) when it is missing, repeated or no id of
    ``TASK_ID``'s form: the gate must check the id BentoML's routes will read, and Starlette reads the last of
    several."""
    given = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True).get("task_id", [])
    return given[0] if len(given) == 1 and TASK_ID.fullmatch(given[0]) else ""


class JobBodyCheck:
    """Wrap ``app``; the body of a submit to ``/audit/job`` must pass ``check(body)``, which returns None
    or ``(reason, body)`` for a 400. Sits inside ``BodyLimit``, whose buffered body it reads. A submit that
    passes publishes its job's "queued" progress as BentoML answers its id (``_publishing_queued``)."""

    def __init__(self, app: Callable[..., Awaitable[None]],
                 check: Callable[[bytes], tuple[str, dict[str, Any]] | None],
                 on_reject: OnReject = lambda scope, status, reason: None):
        self.app, self.check, self.on_reject = app, check, on_reject

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope["path"] != SUBMIT_ROUTE or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        messages = deque()
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        # Joined once: adding each chunk to the body copied it again and again (a 33 MB body in 16 KiB
        # chunks held the event loop, every /predict and probe with it, for 12 s).
        body = b"".join(message.get("body", b"") for message in messages)
        # Pydantic and the row checks of a large body take seconds: on a thread, not on the event loop.
        problem, rows = await asyncio.to_thread(self._checked, body)
        if problem is not None:
            self.on_reject(scope, 400, problem[0])
            await respond_json(send, 400, problem[1])
            return
        # The app returns only once the job has run (BentoML runs it as the submit's background task), and
        # BentoML keeps the body it reads: kept here too, the joined body and its chunks held two more copies
        # of up to INTENTVCS_MAX_BODY_BYTES for as long as the job was queued or ran.
        del body

        async def replayed() -> dict[str, Any]:
            return messages.popleft() if messages else await receive()

        await self.app(scope, replayed, send if rows is None else _publishing_queued(send, rows))

    def _checked(self, body: bytes) -> tuple[tuple[str, dict[str, Any]] | None, int | None]:
        """``check(body)``, and the rows of a body that passes it (None where a check passes a body without them:
        no progress is then published before the job's own)."""
        problem = self.check(body)
        if problem is not None:
            return problem, None
        try:
            # A second parse, for the count alone: 0.03 s of an 80,000-row body whose check took 1 s; ``check``
            # stays a yes or no (the schema's), which any check of a body can be.
            return None, len(json.loads(body)["rows"])
        except (ValueError, LookupError, TypeError):
            return None, None


def _publishing_queued(send: Callable, rows: int) -> Callable:
    """``send``, publishing the "queued" progress of the job BentoML's answer (to a submit or a retry) names
    before the answer goes on.

    BentoML parses the body again, in the job's task, before the job publishes its progress: for that time
    (a second of an 80,000-row submit) another worker answered the job's progress and cancel with 404, "no
    audit job", and the cancel was lost; the job ran on, holding its slot."""
    status: list[int] = []

    async def publishing(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
        elif message["type"] == "http.response.body" and status == [200]:
            status.append(0)  # once
            try:
                task_id = json.loads(message.get("body", b"")).get("task_id")
            except (ValueError, AttributeError):  # no answer of BentoML's submit: no job to publish
                task_id = None
            if isinstance(task_id, str) and TASK_ID.fullmatch(task_id):
                # A folder that cannot be written fails the job when it starts (its own progress, a 500), as
                # before: raised here, it failed the answer instead, and the slot of a job never run was kept.
                with contextlib.suppress(OSError):
                    JobProgress(progress_folder(), task_id, rows)("queued", 0, rows, force=True)
        await send(message)

    return publishing


def job_runner(timeout_s: float) -> AuditRunner:
    """The runner of a worker's audit jobs: its own thread, at a lower OS priority, each job's
    deadline counted from its start."""
    return AuditRunner(timeout_s, thread_name="intentvcs-audit-job", initializer=_yield_to_predictions,
                       from_start=True)


def _yield_to_predictions() -> None:
    """Run the job thread at a lower OS priority (Linux schedules threads on their own), so /predict's
    threads get the cores first; where that is not possible the job simply runs at normal priority."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), JOB_NICENESS)
    except (AttributeError, OSError):
        pass
