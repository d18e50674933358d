"""``POST /predict`` and ``POST /model/parse`` answered in one ASGI step, in front of BentoML's IO layer.

Why: under load the event loop's own Python, not ONNX Runtime, was what kept
the service under the engine's rate (docs/RESULTS.md, "Where the service's time
goes": BentoML's endpoint code was 30% of the loop's busy samples, with a module
import and an ``inspect.signature`` on every request). These two routes are
the per-utterance traffic, so they are answered here: the body validated by the
same pydantic request model, the same handler of the service
(:class:`~intentvcs.service.app.IntentService`), the answer validated by the
same response model and serialised as BentoML serialises it.

What stays as it was: this middleware is the innermost of the service's own
(``app.py``), so authentication, the media type, the body limit and every
BentoML middleware (its request metrics, tracing, access log, timeout and
concurrency limit) still wrap these routes; the OpenAPI document still
describes them from the ``@bentoml.api`` methods, which in-process callers use.
The error contract is BentoML's: ``400`` with ``{"error", "detail"}``, the
``detail`` naming the field and the limit, each refusal counted and logged once
(``rejections``); ``503`` with ``Retry-After`` when an utterance waited in the batch queue past
``INTENTVCS_MAX_LATENCY_MS`` (the request's utterances still queued are dropped, ``batching``); ``500`` with no detail
for anything else, its traceback in the log, counted once as ``internal_error``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import bentoml
from bentoml.exceptions import ServiceUnavailable
from pydantic import BaseModel, ValidationError

from intentvcs.service import prometheus_metrics, rejections
from intentvcs.service.schemas import CountedRequest, first_errors, rejection_reason, validation_error_body

log = logging.getLogger(__name__)
# A route's request model, and what answers a validated request: (service instance, request) -> answer.
Route = tuple[type[CountedRequest], Callable[[Any, Any], Awaitable[BaseModel]]]
UNEXPECTED = "An unexpected error has occurred, please check the server log."  # BentoML's words for a 500
RETRY_AFTER_S = 1  # a 503's Retry-After: the queue's backlog is one engine call deep after a refusal


class DirectRoutes:
    """Wrap ``app``; answer ``POST`` to each of ``routes`` (path -> (request model, handler)) directly."""

    def __init__(self, app: Callable[..., Awaitable[None]], routes: Mapping[str, Route], server: str):
        self.app = app
        self.routes = dict(routes)
        self.server = server.encode()  # BentoML's Server header, as its own answers carry it

    async def __call__(self, scope: dict[str, Any], receive, send) -> None:
        route = self.routes.get(scope.get("path")) if scope["type"] == "http" else None
        if route is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        if body is None:
            return  # the client went away before sending its body; nobody reads an answer
        # Uvicorn runs a request on after its client has left: the answer is given up on when the next
        # message, after the body, is the client's http.disconnect (BatchQueue then drops its utterances
        # still queued). The watch cancels this task, so the answer keeps its context (identity.ANSWERED_BY).
        watch = _Watch(receive)
        try:
            status, payload = await self._answer(scope, route, body)
        except asyncio.CancelledError:
            if not watch.cancelled_us():
                raise
            rejections.refused(scope["method"], scope["path"], rejections.CLIENT_CLOSED, "client_gone")
            return
        finally:
            watch.stop()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                   (b"server", self.server)]
        if status == 503:
            headers.append((b"retry-after", str(RETRY_AFTER_S).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    async def _answer(self, scope: dict[str, Any], route: Route, body: bytes) -> tuple[int, bytes]:
        request_model, handler = route
        try:
            request = request_model.model_validate_json(body)  # {} when empty (schemas)
        except ValidationError as exc:
            errors = first_errors(exc)  # once: for a body failing many checks, each call writes them all
            rejections.refused(scope["method"], scope["path"], 400, rejection_reason(exc, errors))
            return 400, _json(validation_error_body(exc, errors))
        try:
            answer = await handler(bentoml.get_current_service(), request)
            return 200, answer.model_dump_json().encode()
        except ServiceUnavailable as exc:  # the batch queue refused one or more of the request's utterances
            rejections.refused(scope["method"], scope["path"], 503, "overloaded")
            return 503, _json({"error": str(exc)})
        except Exception:
            log.exception("Exception on %s %s", scope["method"], scope["path"])
            # Every 500 is one internal_error: app._counted counted a failure of the batch queue already.
            if not prometheus_metrics.FAILURE_COUNTED.get():
                prometheus_metrics.get().record_error("internal_error")
            return 500, _json({"error": UNEXPECTED})


class _Watch:
    """Cancel the running task (a request's) when ``receive`` gives the client's disconnect, until ``stop``."""

    def __init__(self, receive) -> None:
        self.task = asyncio.current_task()
        self.gone = self.stopped = False
        self.watcher = asyncio.ensure_future(self._watch(receive))

    async def _watch(self, receive) -> None:
        message = await receive()
        if message["type"] == "http.disconnect" and not self.stopped:
            self.gone = True
            self.task.cancel()

    def cancelled_us(self) -> bool:
        """Whether the task was cancelled by this watch (then no longer counted as cancelling): its client left."""
        if self.gone:
            self.task.uncancel()
        return self.gone

    def stop(self) -> None:
        self.stopped = True
        self.watcher.cancel()


async def _read_body(receive) -> bytes | None:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _json(value: Any) -> bytes:
    # Starlette's JSONResponse rendering, which BentoML's error answers use.
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
