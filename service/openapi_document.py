"""The OpenAPI document (``GET /docs.json``) as the service answers, not as BentoML infers it.

BentoML builds the document from the API methods' signatures alone, so it
knows nothing of the middleware in front of them or of the routes the service
mounts itself, and a client generated from it (or a fuzzer reading it) was
misled in these ways, each checked against the running server:

- every error body was ``{"error": str, "detail": str}``, where a body the
  request schema refuses carries ``detail`` as a list of failed checks (field
  and limit, ``RequestProblem``) and every other refusal no ``detail``;
- only 400, 404 and 500 were listed, where the middleware answer 408 (a body
  too slow), 413 (too large), 415 (not JSON), 429 (audits busy), the batch
  queue 503, an audit 504; a job's result 410 and 504; each with its reasons;
- the task's routes: ``POST /audit/job`` was listed, though only its submit
  queues a job (``JobGate`` answers it 404); a submit and a retry were said to
  answer a full task status, where they answer ``{task_id, status}``; the
  status' values were not BentoML's own (``completed``, not ``success``); the
  result was an untyped object, where it is the audit report; the cancel was
  named ``audit_job_retry`` and said to answer 200 with a status, where it
  answers 202 ``{task_id, status: "cancelling"}``;
- ``GET /status`` and ``GET /audit/job/progress`` (mounted beside BentoML's
  routes) were missing;
- the document says ``openapi: 3.0.2``, but the request and response schemas
  BentoML writes (pydantic's) are in JSON Schema 2020-12's dialect: an optional
  field's ``{"type": "null"}``, which OpenAPI 3.0 tools refuse ("Unknown type
  'null'"), where 3.0 says ``nullable`` (``openapi_30``);
- each request body was BentoML's inline copy of its schema, every optional
  field's ``null`` dropped: Rasa's own ``/model/parse`` body (``message_id``
  and ``token`` null) was invalid by the document (``_bodies_by_reference``).

``amend`` rewrites BentoML's document accordingly (and, with a token set,
declares the bearer scheme on the protected routes), and ``AmendedDocs``
serves it. The answers' shapes are pydantic models here, published through
``intentvcs.service.schemas.openapi_schema`` as the API's own are. The schemathesis test
(``tests/test_schemathesis.py``) checks every answer's status, media type and
body against this document.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from intentvcs.service.audit_jobs import (CANCEL_ROUTE, GET_ROUTE, JOB_ROUTE, PROGRESS_ROUTE, RETRY_ROUTE,
                                         STATUS_ROUTE, SUBMIT_ROUTE)
from intentvcs.service.body_limit import BODY_READ_TIMEOUT_S
from intentvcs.service.schemas import LIMITS, MAX_REPORTED_ERRORS, openapi_30, openapi_schema
from intentvcs.service.settings import ENV_PREFIX

DOCS = "/docs.json"
SCHEME = "bearerAuth"  # the security scheme's name
# BentoML's schemas this document replaces: its error bodies (by Refusal) and its task status (by TaskStatus).
REPLACED = ("InvalidArgument", "NotFound", "InternalServerError", "TaskStatusResponse")
REFUSAL_REF = {"$ref": "#/components/schemas/Refusal"}
RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before trying again.",
                               "schema": {"type": "integer", "minimum": 1}}}


# ------------------------------------------------------------------ the answers BentoML does not describe
class RequestProblem(BaseModel):
    """One failed check of a request body (pydantic's error, without the input it was given)."""

    model_config = ConfigDict(extra="allow")
    type: str = Field(description="The check that failed, e.g. string_too_long, missing, extra_forbidden.")
    loc: list[str | int] = Field(description='The field, as a path: ["texts", 3]; [] for the body itself.')
    msg: str = Field(description="What was wrong, the limit included.")


class Refusal(BaseModel):
    """Every answer of 400 or more."""

    error: str = Field(description="What was wrong, and where a setting sets the limit, its name.")
    # Absent, never null, when there is none: no default in the document.
    detail: list[RequestProblem] | None = Field(
        None, description=f"For a body the request schema refuses: each failed check, the first "
        f"{MAX_REPORTED_ERRORS} when more failed (error gives their count). Absent otherwise.",
        json_schema_extra=lambda schema: schema.pop("default", None))


class TaskSubmitted(BaseModel):
    """A queued audit job (submit, or a retry: a new job with the same body)."""

    task_id: str = Field(description="The job's id, for the status, progress, get and cancel routes.")
    status: Literal["in_progress"]


class TaskStatus(BaseModel):
    """BentoML's record of an audit job. A job that ended without a report (deadline, cancel, invalid
    rows) is ``failed``; ``/audit/job/get`` then answers why."""

    task_id: str
    status: Literal["pending", "in_progress", "completed", "failed", "canceled"]
    # BentoML's task store sets both when the job is submitted (SQLite's CURRENT_TIMESTAMP: UTC, written
    # without an offset), and only its own cancel, which JobGate answers in its stead, changes executed_at.
    created_at: str = Field(description="When it was submitted: ISO 8601 in UTC, without an offset.")
    executed_at: str | None = Field(description="BentoML's record, set with created_at when the job is submitted; "
                                    "it does not change when the job runs or ends (GET /audit/job/progress: "
                                    "stage, ended and updated_at).")


class JobProgress(BaseModel):
    """An audit job's stage and counts (``intentvcs.service.audit_jobs.JobProgress``)."""

    model_config = ConfigDict(extra="forbid")
    task_id: str
    rows: int = Field(description="The rows submitted.")
    stage: str = Field(description="queued, then the audit's stage ('audit: new intents', 'audit: split "
                       "utterances', 'audit: references', 'audit: new intents decided', 'audit: new intent pairs "
                       "compared'); at the end done, cancelled, 'stopped: deadline', 'failed: invalid rows' or "
                       "'failed: <reason>'.")
    done: int = Field(description="Units of the current stage done.")
    total: int = Field(description="Units of the current stage.")
    ended: bool
    started_at: float = Field(description="Unix time the job was queued.")
    updated_at: float = Field(description="Unix time of this report.")


class CancelAccepted(BaseModel):
    """A cancel request accepted: the job stops at its next check, or never starts if still queued."""

    task_id: str
    status: Literal["cancelling"]


class ServiceStatus(BaseModel):
    """What this worker serves (``intentvcs.service.identity``)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="The bundle's name, set at export.")
    bundle_digest: str = Field(description="The manifest's content hash (sha256:...), which covers every file.")
    bundle_version: int = Field(description="The bundle format's version.")
    created_at: str = Field(description="When the bundle was exported (ISO 8601).")
    backbone: str
    data_fingerprint: str | None = Field(description="The training data's fingerprint, when the checkpoint had one.")
    model_file: str = Field(description="The graph that serves: model.onnx or model.int8.onnx.")
    quantized: bool
    graph_reason: str = Field(description=f"Why that graph ({ENV_PREFIX}QUANTIZED and the export's accuracy gate).")
    provider: str = Field(description="ONNX Runtime's execution provider.")
    cuda_fallback: str | None = Field(description="Why CUDA was asked for but not used; null otherwise.")
    threads: int | None = Field(description="ONNX Runtime intra-op threads (null: its own default).")
    max_batch: int = Field(description="Utterances per engine call at most.")
    max_length: int = Field(description="Tokens read per utterance at most.")
    labels: list[str] = Field(description="The intents the answers can carry.")
    entity_types: list[str] = Field(description="The entity types the answers can carry; [] without an entity head.")
    hidden_size: int
    oos_rule: str = Field(description="The out-of-scope rule: none, threshold, distance or train.")
    support_noise: float | None = Field(description="null: labels accepted above their thresholds; a number: "
                                        "support decoding.")
    support_intents: list[list[str]] | None = Field(description="Under support decoding, the labels decided "
                                                    "together as names of one intent.")
    entity_floor: float | None = Field(description="The confidence under which a decoded entity is not answered; "
                                       "null without an entity head.")
    segment: bool = Field(description="Chained requests answered part by part.")
    request_boundaries: bool = Field(description="The model's boundary head also cuts chained requests.")
    spelling_words: int | None = Field(description="The spelling normaliser's vocabulary; null when it is off.")
    fallback_intent: str = Field(description="/model/parse's intent for an out-of-scope utterance.")
    model: str = Field(description="The X-Intentvcs-Model header's value: <name>@sha256:<12 hex>, the name "
                       "percent-encoded (UTF-8) outside printable ASCII and where it has a %.")


# ------------------------------------------------------------------ what each operation answers
# Status -> why, beyond the 200 (or 202) BentoML lists; every one answered with a Refusal body.
_BODY = {408: f"The body did not arrive in full within {BODY_READ_TIMEOUT_S:g} s.",
         413: f"The body is larger than {LIMITS.max_body_bytes} bytes ({ENV_PREFIX}MAX_BODY_BYTES).",
         415: "The body is not declared application/json in UTF-8, or is declared compressed (a Content-Encoding "
              "other than identity; Accept-Encoding: identity in the answer).",
         501: "The body is sent in a transfer coding other than chunked (Transfer-Encoding); send it with a "
              "Content-Length, or chunked alone."}
_API = {400: "The body is not JSON, or its schema refuses it (detail: each failed check, naming field and "
             "limit).", **_BODY, 500: "An unexpected error (logged on the server; no detail)."}
_TASK_ID = {400: "task_id is missing or is not a job id.", 404: "No job with this id on this server."}
_BUSY = {429: f"This worker holds as many audits as it may ({ENV_PREFIX}MAX_AUDITS_IN_FLIGHT, "
              f"{ENV_PREFIX}MAX_AUDIT_JOBS); Retry-After says when to try again."}
REFUSALS: dict[tuple[str, str], dict[int, str]] = {
    ("/predict", "post"): {**_API, 503: "The batch queue is full (the service is overloaded); Retry-After says "
                                        "when to try again."},
    ("/model/parse", "post"): {**_API, 503: "The batch queue is full; Retry-After says when to try again."},
    ("/audit", "post"): {**_API, 400: _API[400] + " Also rows the data format refuses.",
                         413: _BODY[413] + f" Or more new intents than {ENV_PREFIX}MAX_AUDIT_NEW_INTENTS.",
                         **_BUSY, 504: f"The audit ran past {ENV_PREFIX}AUDIT_TIMEOUT_S and was stopped."},
    (SUBMIT_ROUTE, "post"): {**_API, 400: _API[400] + " Also rows the data format refuses.", **_BUSY},
    (RETRY_ROUTE, "post"): {400: _TASK_ID[400] + " Or the job has not ended.", 404: _TASK_ID[404], **_BUSY,
                            500: _API[500]},
    (STATUS_ROUTE, "get"): {**_TASK_ID, 500: _API[500]},
    (GET_ROUTE, "get"): {400: _TASK_ID[400] + " Or the job has not ended. Or its rows were refused by the data "
                              "format.", 404: _TASK_ID[404],
                         410: f"The job was cancelled (PUT {CANCEL_ROUTE}) before it finished.",
                         504: f"The job ran past {ENV_PREFIX}AUDIT_JOB_TIMEOUT_S and was stopped.", 500: _API[500]},
    (CANCEL_ROUTE, "put"): {**_TASK_ID, 409: "The job has already ended."},
    (PROGRESS_ROUTE, "get"): {**_TASK_ID},
}
WITH_RETRY_AFTER = frozenset({429, 503})
ANSWERS = {(SUBMIT_ROUTE, "post"): (200, TaskSubmitted), (RETRY_ROUTE, "post"): (200, TaskSubmitted),
           (STATUS_ROUTE, "get"): (200, TaskStatus), (CANCEL_ROUTE, "put"): (202, CancelAccepted)}
TASK_ID_PARAMETER = {"name": "task_id", "in": "query", "required": True, "schema": {"type": "string"},
                     "description": "The id a submit answered."}
MOUNTED = {
    "/status": {"get": {"operationId": "intentvcs__status", "tags": ["Service APIs"],
                        "description": "What this worker serves: the model, its labels and entity types, the graph.",
                        "responses": {"200": {"$model": ServiceStatus}}}},
    PROGRESS_ROUTE: {"get": {"operationId": "intentvcs__audit_job_progress", "tags": ["Service APIs"],
                             "description": "An audit job's stage and counts, on any worker of the server.",
                             "parameters": [TASK_ID_PARAMETER],
                             "responses": {"200": {"$model": JobProgress}}}},
}
MODELS = (Refusal, TaskSubmitted, TaskStatus, JobProgress, CancelAccepted, ServiceStatus)


def amend(spec: dict[str, Any], protected: Iterable[str] = ()) -> dict[str, Any]:
    """BentoML's document ``spec`` corrected as the module docstring says; ``protected``: the routes that
    need the bearer token (none without one)."""
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    for model in MODELS:
        schema = model.model_json_schema()
        schemas[model.__name__] = openapi_schema(schema, schema.get("$defs", {}))
    for name in REPLACED:
        schemas.pop(name, None)
    paths = spec.setdefault("paths", {})
    paths.pop(JOB_ROUTE, None)  # the task's own call: JobGate answers 404 (a job is submitted to /submit)
    report = paths.get("/audit", {}).get("post", {}).get("responses", {}).get("200")
    if report is not None:  # the audit report, once, for /audit and a job's result
        schemas["AuditReport"] = report["content"]["application/json"]["schema"]
        report["content"]["application/json"]["schema"] = {"$ref": "#/components/schemas/AuditReport"}
        if GET_ROUTE in paths:
            paths[GET_ROUTE]["get"]["responses"]["200"] = json.loads(json.dumps(report))
    for route, operations in MOUNTED.items():
        paths[route] = {method: {**operation, "responses": {
            status: _answer(entry["$model"]) for status, entry in operation["responses"].items()}}
            for method, operation in operations.items()}
    for (route, method), (status, model) in ANSWERS.items():
        if method in paths.get(route, {}):
            responses = paths[route][method]["responses"]
            responses.pop("200", None)
            responses[str(status)] = _answer(model)
    if method_of(paths, CANCEL_ROUTE, "put"):  # BentoML names the cancel after the retry
        paths[CANCEL_ROUTE]["put"].update(operationId="intentvcs__audit_job_cancel",
                                          **{"x-bentoml-name": "audit_job_cancel"})
    _bodies_by_reference(paths, schemas)
    for (route, method), refusals in REFUSALS.items():
        operation = method_of(paths, route, method)
        if operation is None:
            continue
        responses = operation.setdefault("responses", {})
        for code in [code for code in responses if code[0] in "45"]:
            del responses[code]
        for status, why in sorted(refusals.items()):
            responses[str(status)] = _refusal(status, why)
    _secure(spec, protected)
    _in_openapi_30(spec)
    return spec


def _bodies_by_reference(paths: dict[str, Any], schemas: dict[str, Any]) -> None:
    """Each request body's schema as a ``$ref`` to the component of its title. BentoML inlines a copy of the
    request model's schema in which every optional field has lost its ``null`` (it flattens ``anyOf: [X,
    null]`` to ``X``, and Rasa's ``token``, string or number or boolean, to a string): the body Rasa's client
    posts to /model/parse (``message_id`` and ``token`` null), which the service answers, was invalid by the
    document. The component of the same name is pydantic's own schema, which keeps them."""
    for operations in paths.values():
        for operation in operations.values():
            if not isinstance(operation, dict):
                continue
            for content in operation.get("requestBody", {}).get("content", {}).values():
                title = content.get("schema", {}).get("title")
                if title in schemas:
                    content["schema"] = {"$ref": f"#/components/schemas/{title}"}


def _in_openapi_30(spec: dict[str, Any]) -> None:
    """Every schema of ``spec`` in OpenAPI 3.0's dialect (``openapi_30``): BentoML writes its request and
    response schemas (pydantic's) in JSON Schema 2020-12's, ``{"type": "null"}`` for an optional field
    included, which 3.0 tools refuse ("Unknown type 'null'") though the document says ``openapi: 3.0.2``."""
    schemas = spec.get("components", {}).get("schemas", {})
    for name, schema in schemas.items():
        schemas[name] = openapi_30(schema)
    for operations in spec.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict):
                continue
            for body in (operation.get("requestBody", {}), *operation.get("responses", {}).values()):
                for content in body.get("content", {}).values():
                    if "schema" in content:
                        content["schema"] = openapi_30(content["schema"])
            for parameter in operation.get("parameters", []):
                if "schema" in parameter:
                    parameter["schema"] = openapi_30(parameter["schema"])



def method_of(paths: dict[str, Any], route: str, method: str) -> dict[str, Any] | None:
    """The operation ``method`` of ``route``, or None when the document has none."""
    operation = paths.get(route, {}).get(method)
    return operation if isinstance(operation, dict) else None


def _answer(model: type[BaseModel]) -> dict[str, Any]:
    return {"description": (model.__doc__ or model.__name__).split("\n")[0],
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}


def _refusal(status: int, why: str) -> dict[str, Any]:
    response = {"description": why, "content": {"application/json": {"schema": REFUSAL_REF}}}
    if status in WITH_RETRY_AFTER:
        response["headers"] = RETRY_AFTER
    return response


def _secure(spec: dict[str, Any], routes: Iterable[str]) -> None:
    """Declare the bearer scheme and require it on ``routes``' operations (``intentvcs.service.auth``)."""
    routes = list(routes)
    if not routes:
        return
    spec["components"].setdefault("securitySchemes", {})[SCHEME] = {
        "type": "http", "scheme": "bearer", "description": f"The token set in {ENV_PREFIX}API_TOKEN on the server."}
    for route in routes:
        for operation in spec["paths"].get(route, {}).values():
            if isinstance(operation, dict):
                operation["security"] = [{SCHEME: []}]
                operation.setdefault("responses", {})["401"] = _refusal(401, "Missing or wrong bearer token.")


class AmendedDocs:
    """Wrap ``app``; its ``GET /docs.json`` answer is passed on as ``amend`` rewrites it."""

    def __init__(self, app: Callable[..., Awaitable[None]], protected: Iterable[str] = ()):
        self.app = app
        self.protected = list(protected)

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        # HEAD too: passed on unamended, it answered the Content-Length of BentoML's document, not of this one.
        if scope["type"] == "http" and scope["path"] == DOCS and scope["method"] in ("GET", "HEAD"):
            await self.app(scope, receive, self._amending(send))
        else:
            await self.app(scope, receive, send)

    def _amending(self, send: Callable) -> Callable:
        """A ``send`` that buffers a 200 answer's body and passes on the amended document."""
        start: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def amended(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            if message["type"] != "http.response.body" or start.get("status") != 200:
                if start:
                    await send(start)
                    start.clear()
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            if not any(chunks):  # a header-only answer (HEAD, were BentoML to send one): nothing to amend
                await send(start)
                await send(message)
                return
            body = json.dumps(amend(json.loads(b"".join(chunks)), self.protected)).encode()
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        return amended
