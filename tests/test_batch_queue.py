"""The service's batch queue (``intentvcs.service.batching``): who is answered with whom, and what fails."""

from __future__ import annotations

import asyncio
import threading
from typing import Callable

import pytest

from intentvcs.service.batching import BatchQueue


class Overloaded(Exception):
    pass


class Engine:
    """Records each call's jobs; answers a job with its upper-cased text. ``hold`` stalls the first call."""

    def __init__(self, hold: bool = False):
        self.calls: list[list[str]] = []
        self.started = threading.Event()
        self.release = threading.Event()
        if not hold:
            self.release.set()

    def __call__(self, jobs):
        self.calls.append(list(jobs))
        self.started.set()
        self.release.wait(10)
        return [job.upper() for job in jobs]


def queue(engine, max_batch=32, max_wait_s=10.0, refused=None):
    def overloaded():
        if refused is not None:
            refused.append(1)
        return Overloaded("the service is overloaded; retry later")

    return BatchQueue(engine, max_batch, max_wait_s, overloaded)


async def while_the_first_call_runs(batch_queue, engine, later):
    """Submit job "a", then ``later`` once the engine runs "a"'s call; release it; every answer or exception."""
    first = asyncio.ensure_future(batch_queue("a"))
    await asyncio.get_running_loop().run_in_executor(None, engine.started.wait, 10)
    rest = [asyncio.ensure_future(batch_queue(job)) for job in later]
    await asyncio.sleep(0.01)
    engine.release.set()
    return await asyncio.gather(first, *rest, return_exceptions=True)


def test_a_lone_job_is_answered_at_once_in_a_call_of_its_own():
    engine = Engine()
    assert asyncio.run(queue(engine)("play")) == "PLAY"
    assert engine.calls == [["play"]]


def test_jobs_that_arrive_together_share_one_call_and_get_their_own_answers():
    engine = Engine()

    async def main():
        batch_queue = queue(engine)
        return await asyncio.gather(*(batch_queue(job) for job in ("x", "y", "z")))

    assert asyncio.run(main()) == ["X", "Y", "Z"]
    assert engine.calls == [["x", "y", "z"]]


def test_jobs_queued_during_a_call_are_the_next_call_up_to_max_batch():
    engine = Engine(hold=True)
    batch_queue = queue(engine, max_batch=2)
    answers = asyncio.run(while_the_first_call_runs(batch_queue, engine, ["b", "c", "d", "e", "f"]))
    assert answers == ["A", "B", "C", "D", "E", "F"]
    assert engine.calls == [["a"], ["b", "c"], ["d", "e"], ["f"]]  # oldest first, never more than 2


def failing_on_boom(calls: list) -> Callable:
    """An engine that records its calls and fails any call holding the job "boom"."""
    def engine(jobs):
        calls.append(list(jobs))
        if "boom" in jobs:
            raise ValueError("engine failed")
        return [job.upper() for job in jobs]
    return engine


def test_a_failed_call_fails_each_of_its_jobs_and_the_queue_goes_on():
    calls = []
    engine = failing_on_boom(calls)

    async def main():
        batch_queue = queue(engine)
        failed = await asyncio.gather(batch_queue("boom"), batch_queue("ok"), return_exceptions=True)
        return failed, await batch_queue("later")

    failed, later = asyncio.run(main())
    assert [type(answer) for answer in failed] == [ValueError, ValueError] and later == "LATER"
    assert calls == [["boom", "ok"], ["later"]]


def test_an_engine_that_answers_the_wrong_number_of_jobs_fails_them_all():
    async def main():
        batch_queue = queue(lambda jobs: ["one answer"])
        return await asyncio.gather(batch_queue("a"), batch_queue("b"), return_exceptions=True)

    answers = asyncio.run(main())
    assert all(isinstance(answer, RuntimeError) and "1 answers to 2 jobs" in str(answer) for answer in answers)


def test_jobs_that_waited_past_max_wait_are_refused_and_counted():
    engine, refused = Engine(hold=True), []
    batch_queue = queue(engine, max_wait_s=0.005, refused=refused)
    answers = asyncio.run(while_the_first_call_runs(batch_queue, engine, ["b", "c"]))
    # "a" began at once; "b" and "c" queued behind its call for longer than 5 ms.
    assert answers[0] == "A" and all(isinstance(answer, Overloaded) for answer in answers[1:])
    assert engine.calls == [["a"]] and len(refused) == 2


def test_a_job_whose_client_went_away_is_not_run():
    engine = Engine(hold=True)

    async def main():
        batch_queue = queue(engine)
        first = asyncio.ensure_future(batch_queue("a"))
        await asyncio.get_running_loop().run_in_executor(None, engine.started.wait, 10)
        gone, kept = asyncio.ensure_future(batch_queue("gone")), asyncio.ensure_future(batch_queue("kept"))
        await asyncio.sleep(0)
        gone.cancel()
        engine.release.set()
        return await asyncio.gather(first, kept)

    assert asyncio.run(main()) == ["A", "KEPT"]
    assert engine.calls == [["a"], ["kept"]]


def test_a_requests_jobs_still_queued_are_dropped_on_its_first_failure():
    """One request's utterances (``many``): the first fails, so the request does; the rest never run."""
    calls = []
    engine = failing_on_boom(calls)

    async def main():
        batch_queue = queue(engine, max_batch=1)
        with pytest.raises(ValueError, match="engine failed"):
            await batch_queue.many(["boom", "x", "y", "z"])
        return await batch_queue.many(["later", "on"])

    assert asyncio.run(main()) == ["LATER", "ON"]
    assert calls == [["boom"], ["later"], ["on"]]  # "x", "y", "z" were dropped, not run


def test_a_requests_jobs_arrive_together_and_are_refused_together():
    """Queued behind a long call, a request's utterances expire at once: none of them runs (its answer is
    503), however the deadline falls between their arrivals."""
    engine, refused = Engine(hold=True), []
    batch_queue = queue(engine, max_batch=2, max_wait_s=0.005, refused=refused)

    async def main():
        first = asyncio.ensure_future(batch_queue("a"))
        await asyncio.get_running_loop().run_in_executor(None, engine.started.wait, 10)
        request = asyncio.ensure_future(batch_queue.many(["b", "c", "d"]))
        await asyncio.sleep(0.02)
        engine.release.set()
        return await asyncio.gather(first, request, return_exceptions=True)

    first, request = asyncio.run(main())
    assert first == "A" and isinstance(request, Overloaded)
    assert engine.calls == [["a"]] and len(refused) == 1  # the first refused; the others dropped with it


def test_a_request_of_no_jobs_is_answered_with_none():
    assert asyncio.run(queue(Engine()).many([])) == []


@pytest.mark.parametrize("max_batch, max_wait_s", [(0, 1.0), (8, 0.0)])
def test_bad_settings_are_refused(max_batch, max_wait_s):
    with pytest.raises(ValueError, match="max_batch must be >= 1 and max_wait_s > 0"):
        BatchQueue(lambda jobs: jobs, max_batch, max_wait_s, Overloaded)
