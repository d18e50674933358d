"""The HTTP service: ``bentoml serve intentvcs.service.app:IntentService``.

Endpoints: ``POST /predict``, ``POST /model/parse`` (the same answer in the
shape of Rasa's NLU server, ``rasa``), ``POST /audit`` (``intentvcs.service.audit``),
the task ``/audit/job`` (submit, status, progress, get, retry, cancel: an audit of any size in the
background, ``audit_jobs``), ``GET /status`` (which model answers: ``identity``, also the
``X-Intentvcs-Model`` header of every API answer), and BentoML's own
``/healthz`` (live), ``/readyz`` (ready once the bundle is loaded
and a warm-up prediction has run), ``/metrics`` (BentoML's and
``intentvcs.service.prometheus_metrics``) and ``/docs.json`` (OpenAPI, as ``openapi_document``
corrects BentoML's). Settings come from
``INTENTVCS_*`` variables (``intentvcs.service.settings``). A replaced bundle
folder is swapped in without a restart or a dropped request (``reload``).

In front of the API, ASGI middleware, each in its module with its reasons (the order is at the end of
this module and in docs/ARCHITECTURE.md): a client gone unanswered closed as 499
(``prometheus_metrics.AnswerGoneClients``), Starlette's own 404 and 405 in JSON (``json_errors``),
``/docs.json`` as the service answers (``openapi_document``),
an optional bearer token (``auth``), JSON bodies only (``media_type``), a
bound on body size and read time (``body_limit``), on a worker's audits
(``audit_control``) and audit jobs (``audit_jobs``), counted once the body is in,
and a job's body checked before it is queued (``audit_jobs``), the answering bundle named in a header
(``identity.ModelHeader``). Every refusal is one log line and one count
(``rejections``). Innermost, ``direct_routes`` answers ``/predict`` and
``/model/parse`` with the ``answer_*`` methods, in front of BentoML's IO layer,
whose per-request Python cost 11% of the service's throughput.

Batching: the utterances of concurrent ``/predict`` and ``/model/parse`` requests are
merged into engine calls by ``batching.BatchQueue`` (each call takes what queued
during the last), run in-process; it replaced BentoML's adaptive dispatcher (the
one behind ``@bentoml.api(batchable=True)``), whose polling cost the event loop a
third more CPU per request (``batching``'s docstring). The alternatives to batching
in-process, measured on 2 cores with a MiniLM-L6 bundle at concurrency 32: a batchable
public API cannot carry ``top_k`` or the ``text`` shorthand; a batchable inner
API called through BentoML's self-proxy adds an in-process HTTP round trip per
request (idle p50 9 ms vs 5-6 ms here, 133 vs 306 utterances/s, and 500s from
the proxy under load); no batching matched this design at idle but reached
half its throughput (146 utterances/s).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import bentoml
from bentoml.exceptions import ServiceUnavailable
from starlette.responses import JSONResponse

from intentvcs.core.dataio import readable
from intentvcs.core.oos import OOS_LABEL
from intentvcs.service import prometheus_metrics, rejections, schemas
from intentvcs.service.audit import AuditConfig, AuditInputError, AuditStopped, audit_batch
from intentvcs.service.audit_control import AuditCancelled, AuditGate, AuditRunner, AuditTimeout, ClientGone
from intentvcs.service.audit_jobs import (CANCEL_ROUTE, JOB_READ_ROUTES, JOB_ROUTE, SUBMIT_ROUTE, JobBodyCheck,
                                         JobGate, JobProgress, JobSlots, job_runner, progress_folder)
from intentvcs.service.auth import BearerAuth
from intentvcs.service.batching import BatchQueue
from intentvcs.service.body_limit import BodyLimit
from intentvcs.service.direct_routes import DirectRoutes
from intentvcs.service.engine import Engine
from intentvcs.service.identity import ANSWERED_BY, HEADER, STATUS_ROUTE, ModelHeader, header_value, status_app
from intentvcs.service.json_errors import PlainErrorsAsJson
from intentvcs.service.media_type import JsonOnly
from intentvcs.service.openapi_document import AmendedDocs
from intentvcs.service.rasa import nothing_to_read, parse_answer, payload_answer
from intentvcs.service.reload import BundleWatcher
from intentvcs.service.schemas import (
    LIMITS,
    AuditJobRequest,
    AuditReportBody,
    AuditRequest,
    AuditRow,
    ParseRequest,
    ParseResponse,
    PredictRequest,
    PredictResponse,
)
from intentvcs.service.onnx_session import bentoml_worker_index
from intentvcs.service.settings import ENV_PREFIX, Settings, unknown_variables

SETTINGS = Settings.from_env()
AUDIT_CONFIG = AuditConfig.from_dict({**SETTINGS.audit_config, "progress": False})  # no bars in server logs
API_ROUTES = ["/predict", "/model/parse", "/audit", SUBMIT_ROUTE]
JOB_SLOTS = JobSlots()  # this worker's admitted, unfinished audit jobs (JobGate takes, audit_job gives back)
log = logging.getLogger(__name__)
T = TypeVar("T")
# A misspelt INTENTVCS_* variable would be ignored without a word: named once per server start, by the process
# that starts it (`bentoml serve` imports this module before it starts the workers, which have an index), not
# by every worker. A warning: the service starts as it would without the variable.
if bentoml_worker_index() is None:
    for _warning in unknown_variables():
        log.warning(_warning)


@dataclass(frozen=True)
class Served:
    """The bundle a worker serves: its engine and the ``X-Intentvcs-Model`` value naming it, swapped as one."""

    engine: Engine
    header: bytes


# One utterance, the top_k its request asked for, and the engine that request read when it arrived: a
# request's utterances are answered by one bundle, also when a swap falls between the batches they join.
Job = tuple[str, int, Engine]


def predict_jobs(jobs: Sequence[Job]) -> list[dict[str, Any]]:
    """Answer a batch of utterances, possibly from several requests, with one call per engine (one call,
    except right after a swap).

    The engine ranks for the largest ``top_k`` asked; each utterance gets its
    own request's cut. Every answered utterance is counted in the metrics; a failure is counted by each
    request it fails (``_counted``), not here: one call's utterances may be several requests'.
    """
    answers: list[dict[str, Any]] = []
    for engine, group in itertools.groupby(jobs, key=lambda job: job[2]):
        group = list(group)
        texts = [text for text, _, _ in group]
        answered = engine.predict(texts, top_k=max(top_k for _, top_k, _ in group))
        prometheus_metrics.get().record_batch(len(texts))
        prometheus_metrics.get().record_predictions(texts, answered)
        for answer, (_, top_k, _) in zip(answered, group):
            answer["intents"] = answer["intents"][:top_k]
        answers += answered
    return answers


def _as_dicts(rows: list[AuditRow] | None) -> list[dict[str, Any]] | None:
    return None if rows is None else [row.model_dump(exclude_none=True) for row in rows]


def _refused(ctx: bentoml.Context, status: int, reason: str, message: str) -> JSONResponse:
    # With a ctx parameter BentoML takes the status from ctx.response.
    rejections.refused("POST", "/audit", status, reason)
    ctx.response.status_code = status
    return JSONResponse({"error": message}, status_code=status)


async def _counted(answers: Awaitable[T]) -> T:
    """``answers``, a request's utterances through the batch queue; a failure other than the queue's refusal
    (``_overloaded``, counted by ``direct_routes``) is counted as this request's ``internal_error``."""
    try:
        return await answers
    except ServiceUnavailable:
        raise
    except Exception:
        prometheus_metrics.get().record_error("internal_error")
        prometheus_metrics.FAILURE_COUNTED.set(True)  # direct_routes' 500 for it: not counted again
        raise


def _overloaded() -> ServiceUnavailable:
    # The batch queue's refusal of an utterance that waited past max_latency_ms; its request
    # is counted and logged once, however many of its utterances were refused (direct_routes).
    return ServiceUnavailable("the service is overloaded; retry later")


# BentoML's own request timeout outlasts the audit deadline, which ends an audit cleanly.
@bentoml.service(name="intentvcs", **SETTINGS.service_config(api_routes=API_ROUTES,
                                                             timeout_s=max(60, LIMITS.audit_timeout_s + 15)))
class IntentService:
    """Intent classification (multi-label, calibrated, with out-of-scope) for one bundle."""

    def __init__(self) -> None:
        # The watcher stamps the folder before the first load reads it: a bundle replaced meanwhile is
        # loaded again at the watcher's first round, not left until some later change.
        watcher = (BundleWatcher(SETTINGS.bundle, self._load, self._swap, self._reload_failed,
                                 SETTINGS.reload_interval_s) if SETTINGS.reload_interval_s else None)
        self._serve(self._load())
        # One job per utterance: max_batch_size bounds the utterances of an engine call
        # whatever the mix of request sizes.
        self._batched_predict = BatchQueue(predict_jobs, SETTINGS.max_batch_size,
                                           SETTINGS.max_latency_ms / 1000, _overloaded)
        self.auditor = AuditRunner(LIMITS.audit_timeout_s)
        self.jobs = job_runner(LIMITS.audit_job_timeout_s)
        if watcher is not None:
            watcher.start()
        self.ready = True  # what /readyz reports: bundle loaded and warm-up done
        log.info("serving %s", self.engine.info)

    def __is_ready__(self) -> bool:
        return self.ready

    @staticmethod
    def _load() -> Engine:
        engine = Engine(SETTINGS.bundle, provider=SETTINGS.provider, threads=SETTINGS.threads,
                        quantized=SETTINGS.quantized, spin=SETTINGS.ort_spin, spelling=SETTINGS.spelling,
                        segment=SETTINGS.segment)
        # The first run pays ONNX Runtime's lazy allocations; do it before serving (/readyz, or a swap).
        engine.predict(["warm-up"])
        return engine

    @property
    def engine(self) -> Engine:
        return self.served.engine

    @property
    def model_header(self) -> bytes:
        """The ``X-Intentvcs-Model`` value of the bundle serving now."""
        return self.served.header

    def _serve(self, engine: Engine) -> None:
        # One reference assignment: requests in flight keep the engine they read, and its name with it.
        info = engine.info
        self.served = Served(engine, header_value(info).encode())
        prometheus_metrics.get().bind_model(engine.labels, info, schemas.REJECTION_REASONS)

    def _swap(self, engine: Engine) -> None:
        self._serve(engine)
        prometheus_metrics.get().reloads.labels(result="ok").inc()
        log.info("swapped in %s", self.model_header.decode())

    def _reload_failed(self, exc: Exception) -> None:
        prometheus_metrics.get().reloads.labels(result="failed").inc()

    def status(self) -> dict[str, Any]:
        """``GET /status``: what this worker serves (``intentvcs.service.identity``).

        ``labels`` and ``entity_types`` are the names (``info`` has their counts,
        for logs), so a client can check what it may be answered.
        """
        served = self.served  # one read: a swap meanwhile cannot mix two bundles in one answer
        engine = served.engine
        return {**engine.info, "labels": list(engine.labels), "entity_types": list(engine.entity_types),
                "fallback_intent": SETTINGS.fallback_intent, "model": served.header.decode()}

    async def answer_predict(self, texts: list[str], top_k: int) -> PredictResponse:
        """``/predict``'s answer: each utterance through the shared batch queue."""
        served = self.served  # one read: every utterance answered by this bundle, and the answer named after it
        ANSWERED_BY.set(served.header)
        # One group: on the first refused (503) or failed utterance the rest still queued never run.
        answers = await _counted(self._batched_predict.many([(utterance, top_k, served.engine)
                                                              for utterance in texts]))
        return PredictResponse(predictions=answers)

    async def answer_parse(self, text: str) -> ParseResponse:
        """``/model/parse``'s answer: ``/predict``'s (same queue, same metrics) in Rasa's shape; a button's
        payload and a text with nothing to read are answered without the model (``intentvcs.service.rasa``)."""
        payload = payload_answer(text)
        if payload is not None:
            return ParseResponse(**payload)
        if not readable(text):
            return ParseResponse(**parse_answer(nothing_to_read(text), SETTINGS.fallback_intent))
        served = self.served
        ANSWERED_BY.set(served.header)
        answer = await _counted(self._batched_predict((text, LIMITS.default_top_k, served.engine)))
        return ParseResponse(**parse_answer(answer, SETTINGS.fallback_intent))

    # HTTP requests to the next two routes are answered by ``direct_routes`` with these methods' answers;
    # the declarations give the OpenAPI document and in-process callers the same API.
    @bentoml.api(route="/predict", input_spec=PredictRequest)
    async def predict(self, texts: list[str], text: str | None, top_k: int) -> PredictResponse:
        """Ranked intents with calibrated confidence, accepted intents, entities and the out-of-scope decision."""
        # PredictRequest has already folded ``text`` into ``texts``.
        return await self.answer_predict(texts, top_k)

    @bentoml.api(route="/model/parse", input_spec=ParseRequest)
    async def parse(self, text: str, message_id: str | None, token: str | None, lang: str | None = None,
                    metadata: dict[str, Any] | None = None) -> ParseResponse:
        """Rasa's NLU-server parse (intent, intent_ranking, entities): a Rasa assistant's NLU endpoint.

        Out of scope, the intent is INTENTVCS_FALLBACK_INTENT (default nlu_fallback); ``intentvcs.service.rasa``
        maps the answer.
        """
        return await self.answer_parse(text)

    @bentoml.task(route=JOB_ROUTE, input_spec=AuditJobRequest)
    async def audit_job(self, rows: list[AuditRow], training_rows: list[AuditRow] | None,
                        ctx: bentoml.Context) -> dict[str, Any]:
        """``/audit`` for a batch of any size, as a background task with progress (``audit_jobs``).

        A job that ends without a report answers ``/audit/job/get`` with the reason, as ``/audit``
        would: 504 past its deadline, 410 when cancelled, 400 for rows the data format refuses
        (BentoML marks every answer of 400 or more a failed task).
        """
        try:
            return await self._run_job(rows, training_rows, ctx)
        finally:
            JOB_SLOTS.release()  # taken when JobGate admitted the submit

    async def _run_job(self, rows: list[AuditRow], training_rows: list[AuditRow] | None,
                       ctx: bentoml.Context) -> dict[str, Any] | JSONResponse:
        total = len(rows)
        progress = JobProgress(progress_folder(), ctx.request.state.task_id, total)
        progress("queued", 0, total, force=True)
        served = self.served  # one read: the report, and the header naming its bundle, from one bundle
        # The task's answer is stored with its headers and replayed by /audit/job/get, which ModelHeader does
        # not see (the get had no X-Intentvcs-Model; and the bundle serving then may not be the job's).
        ctx.response.headers[HEADER] = served.header.decode()

        def job(should_stop) -> dict[str, Any]:  # on the job thread
            return audit_batch(served.engine, _as_dicts(rows), _as_dicts(training_rows), config=AUDIT_CONFIG,
                               should_stop=lambda: should_stop() or progress.cancel_requested(),
                               progress=progress).to_dict()

        def ended(stage: str, status: int, reason: str, message: str) -> JSONResponse:
            progress.end(stage)  # with the counts it got to
            prometheus_metrics.get().record_error(reason)
            log.log(logging.WARNING if status >= 500 else logging.INFO, "audit job %s ended without a report: "
                    "%d %s", progress.task_id, status, reason)
            ctx.response.status_code = status
            return JSONResponse({"error": message}, status_code=status)

        try:
            # A cancel request is polled while the job waits for the job thread too: queued, it never
            # starts, and its slot comes back at once, not after the jobs ahead of it.
            report = await self.jobs.run(job, cancelled=progress.cancel_requested)
        except AuditTimeout:
            return ended("stopped: deadline", 504, "audit_timeout",
                         f"the audit job did not finish within {LIMITS.audit_job_timeout_s} s of its start "
                         f"(setting {ENV_PREFIX}AUDIT_JOB_TIMEOUT_S) and was stopped")
        except (AuditCancelled, AuditStopped):  # AuditStopped: the job thread saw the cancel request first
            return ended("cancelled", 410, "audit_cancelled",
                         f"the audit job was cancelled (PUT {CANCEL_ROUTE}) before it finished")
        except AuditInputError as exc:
            return ended("failed: invalid rows", 400, "invalid_rows", str(exc))
        except Exception as exc:
            progress.end(f"failed: {exc}"[:300])
            prometheus_metrics.get().record_error("internal_error")
            raise
        progress.end("done", total, total)
        return report

    @bentoml.api(route="/audit", input_spec=AuditRequest)
    async def audit(self, rows: list[AuditRow], training_rows: list[AuditRow] | None,
                    ctx: bentoml.Context) -> AuditReportBody:
        """Entanglement report of an upgrade batch's new intents (``intentvcs.service.audit.audit_batch``)."""
        served = self.served  # one read: the limit, the audit and the answer's name from one bundle
        ANSWERED_BY.set(served.header)
        # A row labelled "oos" is an out-of-scope row to the audit (``team_formats.out_of_scope_row``), no new intent.
        new = {label for row in rows for label in row.labels}.difference(served.engine.labels, {OOS_LABEL})
        if len(new) > LIMITS.max_audit_new_intents:
            return _refused(ctx, 413, "too_many_new_intents",
                            f"the batch has {len(new)} new intents; the limit per request is "
                            f"{LIMITS.max_audit_new_intents} (setting {ENV_PREFIX}MAX_AUDIT_NEW_INTENTS); split "
                            "the batch or run `intentvcs audit`")

        def job(should_stop) -> AuditReportBody:  # on the audit thread
            return AuditReportBody(audit_batch(served.engine, _as_dicts(rows), _as_dicts(training_rows),
                                               config=AUDIT_CONFIG, should_stop=should_stop).to_dict())

        try:
            return await self.auditor.run(job, client_gone=ctx.request.is_disconnected)
        except AuditInputError as exc:  # rows the schema admits but the data format refuses
            return _refused(ctx, 400, "invalid_rows", str(exc))
        except AuditTimeout:
            return _refused(ctx, 504, "audit_timeout",
                            f"the audit did not finish within {LIMITS.audit_timeout_s} s (setting "
                            f"{ENV_PREFIX}AUDIT_TIMEOUT_S) and was stopped; send fewer rows or new intents, "
                            "or run `intentvcs audit`")
        except ClientGone:  # nobody reads this answer
            return _refused(ctx, rejections.CLIENT_CLOSED, "audit_cancelled",
                            "the client disconnected; the audit was stopped")
        except Exception:
            prometheus_metrics.get().record_error("internal_error")
            raise


# The service's own routes (BentoML adds its probes, docs and /metrics), also the request metrics' endpoint
# labels (prometheus_metrics.known_routes).
SERVICE_ROUTES = [*API_ROUTES, *JOB_READ_ROUTES, STATUS_ROUTE]
# Outermost first: who may ask (auth) and in what form (media_type), both answered
# before the body is read; how big, and how slow (body_limit, which reads the body in
# full); then how many audits at once (audit_control) and audit jobs (audit_jobs): a
# slot is taken only once the body has arrived, so a slow sender holds none.
# /status is protected too: it names every label and entity type a model answers, which is the API's to tell.
PROTECTED_ROUTES = [*SERVICE_ROUTES,
                    *(["/metrics"] if SETTINGS.metrics_token_required else [])] if SETTINGS.api_token else []
# Outermost of all: a request whose client left unanswered is closed, for BentoML's request metrics.
IntentService.add_asgi_middleware(prometheus_metrics.AnswerGoneClients)
IntentService.add_asgi_middleware(PlainErrorsAsJson)  # Starlette's own 404 and 405 in JSON too
IntentService.add_asgi_middleware(AmendedDocs, protected=PROTECTED_ROUTES)  # /docs.json as the service answers
if SETTINGS.api_token:
    IntentService.add_asgi_middleware(BearerAuth, token=SETTINGS.api_token, on_reject=rejections.refused_scope,
                                      routes=PROTECTED_ROUTES)
IntentService.add_asgi_middleware(JsonOnly, routes=API_ROUTES, on_reject=rejections.refused_scope)
IntentService.add_asgi_middleware(BodyLimit, max_bytes=LIMITS.max_body_bytes, on_reject=rejections.refused_scope,
                                  routes=API_ROUTES)  # the routes that read a body
IntentService.add_asgi_middleware(AuditGate, route="/audit", max_in_flight=LIMITS.max_audits_in_flight,
                                  retry_after_s=min(5, LIMITS.audit_timeout_s), on_reject=rejections.refused_scope)
IntentService.add_asgi_middleware(JobGate, max_jobs=LIMITS.max_audit_jobs, slots=JOB_SLOTS,
                                  retry_after_s=5, on_reject=rejections.refused_scope)
IntentService.add_asgi_middleware(JobBodyCheck, check=schemas.job_body_problem, on_reject=rejections.refused_scope)
IntentService.add_asgi_middleware(ModelHeader, routes=API_ROUTES)
# Innermost: everything above still applies to the routes it answers.
IntentService.add_asgi_middleware(DirectRoutes, server=f"BentoML Service/{IntentService.name}", routes={
    "/predict": (PredictRequest, lambda service, request: service.answer_predict(request.texts, request.top_k)),
    "/model/parse": (ParseRequest, lambda service, request: service.answer_parse(request.text)),
})
IntentService.mount_asgi_app(status_app(), path="/")  # GET /status, beside BentoML's own routes
rejections.quiet_bentoml({cls.__name__ for cls in (PredictRequest, ParseRequest, AuditRequest,
                                                    AuditJobRequest)})
