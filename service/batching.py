"""Batching of concurrent utterances into engine calls: each call takes everything that queued during the last.

The service answers each utterance through ``BatchQueue``: a job joins the
queue and, when no engine call is running, starts one at once; jobs arriving
while a call runs wait and the next call takes them all (at most
``max_batch``). So a lone request is answered without waiting for company,
and under load the batches grow with the load by themselves, with no timer:
the engine's own call time is the window.

Why not BentoML's adaptive dispatcher (``CorkDispatcher``, which this
replaced): it decides when to release a batch by polling its queue every
millisecond from the event loop and by a latency model it fits at start-up,
and under load the polling, its condition variable per request and its
thread-pool hand-off were per-request Python on the same event loop that
parses HTTP (docs/RESULTS.md, "Performance"). It is also internal to
BentoML. What this keeps of it: one engine call at a time per worker, a cap
on utterances per call, and a refusal (``ServiceUnavailable``, 503) for a job
that waited longer than ``max_wait_s`` before its call began.

A request's utterances join the queue together (``many``): one arrival time, so
they expire together, and on the first refusal or failure of one, the rest of
them still queued are dropped before they run; under overload a third of the
engine's work had gone to utterances of requests already refused.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

Job = TypeVar("Job")
Answer = TypeVar("Answer")


class _Group:
    """The jobs of one request (``BatchQueue.many``): once one has failed, the rest are not run. ``since``: when
    it arrived, then when its last engine call ended; its queued jobs wait from then."""

    __slots__ = ("failed", "since")

    def __init__(self, arrived: float) -> None:
        self.failed = False
        self.since = arrived


class BatchQueue(Generic[Job, Answer]):
    """Answer single jobs with batched calls of ``run`` (jobs -> one answer per job, in order).

    ``run`` is called on a thread of its own, one call at a time, with at most
    ``max_batch`` jobs; an exception it raises is every job's of that call.
    A job still queued ``max_wait_s`` after it arrived (one of ``many``'s: after
    its request arrived or its request's last call ended) is refused, as the
    next call is formed (so once the call running then has ended), with the
    exception ``overloaded()`` returns (which may also count it).
    """

    def __init__(self, run: Callable[[Sequence[Job]], Sequence[Answer]], max_batch: int, max_wait_s: float,
                 overloaded: Callable[[], Exception]):
        if max_batch < 1 or max_wait_s <= 0:
            raise ValueError(f"max_batch must be >= 1 and max_wait_s > 0, got {max_batch} and {max_wait_s}")
        self.run = run
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.overloaded = overloaded
        self._queue: deque[tuple[float, Job, asyncio.Future, _Group | None]] = deque()
        self._draining = False
        # One thread: the engine runs one call at a time, and the thread keeps its warm state.
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="intentvcs-batch")

    async def __call__(self, job: Job) -> Answer:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.append((time.monotonic(), job, future, None))
        self._start_draining(loop)
        return await future

    async def many(self, jobs: Sequence[Job]) -> list[Answer]:
        """Answer ``jobs`` (one request's), in order. They queue together, with one arrival time; the first
        exception among them is raised, and their jobs still queued are cancelled: no call runs them."""
        loop = asyncio.get_running_loop()
        arrived = time.monotonic()
        group = _Group(arrived)
        futures = [loop.create_future() for _ in jobs]
        self._queue.extend((arrived, job, future, group) for job, future in zip(jobs, futures))
        if not futures:
            return []
        self._start_draining(loop)
        try:
            await asyncio.wait(futures, return_when=asyncio.FIRST_EXCEPTION)
        finally:  # a failure, or this request's own cancellation (BentoML's request timeout, or its client
            # gone: direct_routes' watch)
            for future in futures:
                future.cancel()  # a no-op on those already answered
        failures = [future.exception() for future in futures if not future.cancelled()]  # each one retrieved
        first = next((exc for exc in failures if exc is not None), None)
        if first is not None:
            raise first
        return [future.result() for future in futures]

    def _start_draining(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._draining:
            self._draining = True
            # A task, not a call: jobs arriving in this turn of the loop join the first batch.
            loop.create_task(self._drain())

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._queue:
                batch = self._next_batch()
                if not batch:
                    continue
                try:
                    answers = await loop.run_in_executor(self._executor, self.run, [job for job, _, _ in batch])
                    if len(answers) != len(batch):
                        raise RuntimeError(f"{len(answers)} answers to {len(batch)} jobs")
                except Exception as exc:  # the call's failure is each of its jobs'
                    answers = [exc] * len(batch)
                ended = time.monotonic()
                for _, _, group in batch:
                    if group is not None:
                        # Its jobs still queued waited on its own calls, not on other requests': no overload
                        # (a request of more than max_batch utterances whose calls outlast max_wait_s was
                        # refused on an idle queue, and on every retry), so their wait starts now.
                        group.since = ended
                for (_, future, group), answer in zip(batch, answers):
                    if future.done():  # a client that went away cancelled its future
                        continue
                    if isinstance(answer, Exception):
                        future.set_exception(answer)
                        if group is not None:
                            group.failed = True  # at once: the next batch is taken before its request wakes
                    else:
                        future.set_result(answer)
        finally:
            self._draining = False

    def _next_batch(self) -> list[tuple[Job, asyncio.Future, _Group | None]]:
        """Up to ``max_batch`` queued jobs still wanted, oldest first; refuse those that waited too long, and drop
        those of a request another of whose jobs failed."""
        deadline = time.monotonic() - self.max_wait_s
        batch = []
        while self._queue and len(batch) < self.max_batch:
            arrived, job, future, group = self._queue.popleft()
            if future.done():
                continue
            if group is not None and group.failed:
                future.cancel()
                continue
            if (arrived if group is None else group.since) < deadline:
                future.set_exception(self.overloaded())
                if group is not None:
                    group.failed = True  # its request is refused once (direct_routes), its other jobs dropped
                continue
            batch.append((job, future, group))
        return batch
