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


class BatchQueue(Generic[Job, Answer]):
    """Answer single jobs with batched calls of ``run`` (jobs -> one answer per job, in order).

    ``run`` is called on a thread of its own, one call at a time, with at most
    ``max_batch`` jobs; an exception it raises is every job's of that call.
    A job still queued ``max_wait_s`` after it arrived is refused with the
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
        self._queue: deque[tuple[float, Job, asyncio.Future]] = deque()
        self._draining = False
        # One thread: the engine runs one call at a time, and the thread keeps its warm state.
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="intentvcs-batch")

    async def __call__(self, job: Job) -> Answer:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.append((time.monotonic(), job, future))
        if not self._draining:
            self._draining = True
            # A task, not a call: jobs arriving in this turn of the loop join the first batch.
            loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._queue:
                batch = self._next_batch()
                if not batch:
                    continue
                try:
                    answers = await loop.run_in_executor(self._executor, self.run, [job for job, _ in batch])
                    if len(answers) != len(batch):
                        raise RuntimeError(f"{len(answers)} answers to {len(batch)} jobs")
                except Exception as exc:  # the call's failure is each of its jobs'
                    answers = [exc] * len(batch)
                for (_, future), answer in zip(batch, answers):
                    if future.done():  # a client that went away cancelled its future
                        continue
                    if isinstance(answer, Exception):
                        future.set_exception(answer)
                    else:
                        future.set_result(answer)
        finally:
            self._draining = False

    def _next_batch(self) -> list[tuple[Job, asyncio.Future]]:
        """Up to ``max_batch`` queued jobs still wanted, oldest first; refuse those that waited too long."""
        deadline = time.monotonic() - self.max_wait_s
        batch = []
        while self._queue and len(batch) < self.max_batch:
            arrived, job, future = self._queue.popleft()
            if future.done():
                continue
            if arrived < deadline:
                future.set_exception(self.overloaded())
                continue
            batch.append((job, future))
        return batch
