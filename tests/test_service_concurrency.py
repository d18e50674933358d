"""Defects a review of the service's concurrency and error contract found, each reproduced first: a
cancelled audit job that kept its rows in memory until the job ahead of it ended, and failed /predict
requests counted once per engine call instead of once each."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref

import pytest


# ------------------------------------------------ a cancelled job's rows
class _Rows(list):
    """A job's rows (a list cannot be weakly referenced; a subclass can)."""


def test_a_job_given_up_on_while_queued_holds_none_of_its_rows():
    """A job cancelled (or past its deadline, or whose client went away) while queued behind a long one
    left its call, rows and all, in the thread pool's queue until the long one ended: a client cycling
    submit and cancel while a long job ran piled up batches in memory, past the gate's slot limit."""
    from intentvcs.service.audit_control import AuditCancelled
    from intentvcs.service.audit_jobs import job_runner

    runner = job_runner(timeout_s=30)
    runner.poll_s = 0.02
    release, ran, held = threading.Event(), [], []

    async def run():
        first = asyncio.ensure_future(runner.run(lambda should_stop: release.wait(10)))
        await asyncio.sleep(0.1)
        for _ in range(3):
            rows, flag = _Rows(range(1000)), {"cancelled": False}
            held.append(weakref.ref(rows))
            queued = asyncio.ensure_future(runner.run(lambda should_stop, rows=rows: ran.append(len(rows)),
                                                      cancelled=lambda flag=flag: flag["cancelled"]))
            del rows
            await asyncio.sleep(0.05)
            flag["cancelled"] = True
            with pytest.raises(AuditCancelled):
                await queued
            del queued  # its exception's traceback holds the call's frame, as no caller of the service keeps it
        await asyncio.sleep(0.05)  # the loop's callbacks that still hold the last one's exception have run
        gc.collect()
        alive = sum(ref() is not None for ref in held)
        assert not first.done()  # the long job still runs
        release.set()
        assert await first is True
        return alive

    assert asyncio.run(run()) == 0
    assert ran == []  # and none of them ever started


# ------------------------------------------------ a failed request is counted once
class _FailingEngine:
    labels = ("a",)

    def predict(self, texts, top_k=None):
        raise RuntimeError("engine failed")


class _Counts:
    def __init__(self):
        self.errors: list[str] = []

    def record_error(self, reason: str) -> None:
        self.errors.append(reason)


def test_each_request_a_failed_engine_call_fails_is_counted_once(monkeypatch):
    """Requests whose utterances shared one failed engine call were each answered 500, and counted once
    in all (the count was per engine call); a request failed by the queue itself was not counted."""
    from intentvcs.service import app, prometheus_metrics
    from intentvcs.service.batching import BatchQueue

    counts = _Counts()
    monkeypatch.setattr(prometheus_metrics, "get", lambda: counts)
    service = app.IntentService.inner.__new__(app.IntentService.inner)
    service.served = app.Served(_FailingEngine(), b"tiny@sha256:0")
    service._batched_predict = BatchQueue(app.predict_jobs, 32, 10.0, app._overloaded)

    async def requests():
        return await asyncio.gather(service.answer_predict(["play jazz", "stop"], 1),
                                    service.answer_predict(["lights off"], 1),
                                    service.answer_parse("what is the weather"), return_exceptions=True)

    answers = asyncio.run(requests())
    assert all(isinstance(answer, RuntimeError) for answer in answers)  # one engine call failed all three
    assert counts.errors == ["internal_error"] * 3

    # The queue's own failure (an engine that answers the wrong number of utterances) is counted too.
    counts.errors.clear()
    service._batched_predict = BatchQueue(lambda jobs: [], 32, 10.0, app._overloaded)
    with pytest.raises(RuntimeError, match="answers to"):
        asyncio.run(service.answer_predict(["play jazz"], 1))
    assert counts.errors == ["internal_error"]


# ------------------------------------------------ a /predict client that goes away
def test_a_predict_whose_client_goes_away_is_given_up_on(monkeypatch):
    """Reproduced on a served tiny bundle: two requests of 256 utterances (INTENTVCS_MAX_BATCH_SIZE=2), the
    second's client gone just after sending it: the engine ran all 512 utterances. Uvicorn does not cancel
    a request whose client leaves; only the app, reading ``http.disconnect``, can, and then ``BatchQueue``
    drops its utterances still queued (``test_batch_queue``)."""
    import bentoml

    from intentvcs.service.direct_routes import DirectRoutes
    from intentvcs.service.schemas import PredictRequest

    outcome = {}

    class Waiting:
        async def answer(self, request):
            try:
                await asyncio.sleep(2)  # queued behind other requests' engine calls
                outcome["ran"] = True
            except asyncio.CancelledError:
                outcome["cancelled"] = True
                raise

    monkeypatch.setattr(bentoml, "get_current_service", lambda: Waiting())
    routes = DirectRoutes(None, routes={"/predict": (PredictRequest, lambda svc, request: svc.answer(request))},
                          server="BentoML Service/test")
    incoming = [{"type": "http.request", "body": b'{"text": "play jazz"}', "more_body": False}]

    async def receive():
        if incoming:
            return incoming.pop(0)
        await asyncio.sleep(0.05)  # the client leaves just after sending its request
        return {"type": "http.disconnect"}

    async def send(message):
        pass

    asyncio.run(routes({"type": "http", "method": "POST", "path": "/predict", "headers": []}, receive, send))
    assert outcome == {"cancelled": True}
