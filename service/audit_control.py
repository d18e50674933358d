"""Bounds on what one worker spends on ``/audit``: how many audits at once, and for how long.

An audit is seconds to minutes of CPU (its duplicate search compares new
intents pairwise), and without bounds concurrent audits queued without
limit, and one past BentoML's request timeout went on computing after its
client had been answered 504. Two bounds, per worker process:

``AuditGate``    an ASGI middleware admitting at most ``max_in_flight``
                 ``/audit`` requests at once (from the body read in full, by
                 ``body_limit.BodyLimit`` outside it, to the answer); beyond,
                 429 with ``Retry-After`` before the application parses the
                 body, so a queue of 30 MB batches cannot build up behind
                 the audit thread either.
``AuditRunner``  runs the admitted audits one at a time on a worker thread,
                 with a deadline counted from the parsed request, queueing
                 included (a client waits through both), or for background
                 jobs from the audit's start. It hands the audit a stop flag, which
                 ``audit_batch(should_stop=...)`` checks between its steps;
                 past the deadline (``AuditTimeout``), or when the client has
                 gone (``ClientGone``), the flag is set and the request is
                 answered at once; the thread stops at its next step. A
                 background job's cancel request (``cancelled``) is polled
                 the same way, before the job is queued and while it waits
                 for the thread or runs (``AuditCancelled``): a queued job
                 cancelled never starts, and its caller gives its slot back
                 at once instead of after the jobs ahead of it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from intentvcs.service.rejections import respond

T = TypeVar("T")
OnReject = Callable[[dict[str, Any], int, str], None]  # (scope, status, reason)


class AuditTimeout(Exception):
    """The audit did not finish before its deadline; it has been told to stop."""


class ClientGone(Exception):
    """The client disconnected while its audit waited or ran; it has been told to stop."""


class AuditCancelled(Exception):
    """The audit was cancelled while it waited or ran: a queued one never starts, a running one has
    been told to stop."""


class AuditGate:
    """Wrap ``app``; at most ``max_in_flight`` requests to ``route`` at once, the rest get 429.

    It sits inside ``body_limit.BodyLimit`` (``app.py``), so a request is counted once its body
    has arrived: a client trickling its body held a slot from its first byte."""

    def __init__(self, app: Callable[..., Awaitable[None]], route: str, max_in_flight: int, retry_after_s: int,
                 on_reject: OnReject = lambda scope, status, reason: None):
        self.app = app
        self.route = route
        self.max_in_flight = max_in_flight
        self.retry_after_s = retry_after_s
        self.on_reject = on_reject
        self.in_flight = 0  # one event loop per worker: no lock needed

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope["path"] != self.route or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.max_in_flight:
            self.on_reject(scope, 429, "audit_busy")
            await respond(send, 429, f"this worker is running or holding {self.in_flight} audits, its limit "
                                     f"(setting INTENTVCS_MAX_AUDITS_IN_FLIGHT); retry later",
                          headers=[(b"retry-after", str(self.retry_after_s).encode())])
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


async def _client_stays() -> bool:
    return False


def _not_cancelled() -> bool:
    return False


class AuditRunner:
    """One audit at a time on a worker thread, each with a deadline and a stop flag.

    ``thread_name`` and ``initializer`` name and prepare the thread (the audit
    jobs run theirs at a lower OS priority, ``intentvcs.service.audit_jobs``);
    ``from_start`` counts the deadline from the audit's start instead of from
    ``run``'s call, so that a job queued behind others is not stopped for
    their time.
    """

    def __init__(self, timeout_s: float, poll_s: float = 0.25, thread_name: str = "intentvcs-audit",
                 initializer: Callable[[], None] | None = None, from_start: bool = False):
        self.timeout_s = timeout_s
        self.poll_s = poll_s  # how often the client's connection (and, from_start, the start) is checked
        self.from_start = from_start
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=thread_name, initializer=initializer)

    async def run(self, job: Callable[[Callable[[], bool]], T],
                  client_gone: Callable[[], Awaitable[bool]] = _client_stays,
                  cancelled: Callable[[], bool] = _not_cancelled) -> T:
        """``job(should_stop)`` on the audit thread; its result, or ``AuditTimeout`` / ``ClientGone``
        (never without a ``client_gone``: a background job has no client to lose) / ``AuditCancelled``
        (``cancelled()``, a background job's cancel request, checked before the job is queued and every
        ``poll_s`` after, queued or running)."""
        if cancelled():
            raise AuditCancelled
        loop = asyncio.get_running_loop()
        stop, started = threading.Event(), threading.Event()
        # The job reaches the thread through this list, emptied when the caller gives up on it: a job given
        # up on while queued stays in the pool's queue until the thread skips it, and held its rows there.
        pending = [job]

        def started_job(should_stop: Callable[[], bool]) -> T:  # on the audit thread
            started.set()
            try:
                queued = pending.pop()
            except IndexError:  # given up on just as the thread took it
                raise AuditCancelled from None
            return queued(should_stop)

        future = loop.run_in_executor(self.pool, started_job, stop.is_set)
        # A job stopped after its request was answered ends in an exception nobody awaits.
        future.add_done_callback(lambda done: done.cancelled() or done.exception())
        deadline = None if self.from_start else loop.time() + self.timeout_s
        try:
            while True:
                if deadline is None and started.is_set():  # seen within poll_s of the start
                    deadline = loop.time() + self.timeout_s
                remaining = self.poll_s if deadline is None else deadline - loop.time()
                if remaining <= 0:
                    raise AuditTimeout
                done, _ = await asyncio.wait({future}, timeout=min(self.poll_s, remaining))
                if done:
                    return future.result()
                if await client_gone():
                    raise ClientGone
                if cancelled():
                    raise AuditCancelled
        finally:
            stop.set()  # a running job stops at its next step
            future.cancel()  # a queued one never starts
            pending.clear()  # nor holds what its call would have read
