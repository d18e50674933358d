"""Which model answers: ``GET /status`` and the ``X-Intentvcs-Model`` header of every API answer.

A served model is named by people (``name``, set at export) and told apart by
its content hash (``bundle_digest``, the manifest's digest, which covers every
payload file). Operators read both on ``/status``, with what the model can
answer (``labels``, ``entity_types``), how it runs (``provider``,
``quantized``) and the fallback intent of ``/model/parse``; clients and logs get them
on each answer, so that during a bundle swap (``intentvcs.service.reload``)
every answer says which bundle gave it: ``/predict`` and ``/model/parse`` name
the bundle their request was answered by (``ANSWERED_BY``), an audit job's
report (``/audit/job/get``) the bundle the job ran on (it sets the header on its
own answer, which BentoML stores and replays), every other route the one serving
when its answer starts.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Awaitable, Callable
from urllib.parse import quote

import bentoml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from intentvcs.service import rejections
from intentvcs.service.audit_jobs import PROGRESS_ROUTE, progress_endpoint

HEADER = "x-intentvcs-model"
STATUS_ROUTE = "/status"
# What a name keeps as it is in the header: printable ASCII (space included), but "%", the escape itself.
HEADER_SAFE = "".join(chr(code) for code in range(0x20, 0x7F) if chr(code) != "%")
Message = dict[str, Any]
# The header value of the bundle that answers this request, set by the handler that chose its engine (a
# request's own task, which the middleware's answer runs in); None: the one serving when the answer starts.
ANSWERED_BY: ContextVar[bytes | None] = ContextVar("intentvcs_answered_by", default=None)


def header_value(info: dict[str, Any]) -> str:
    """``<name>@sha256:<first 12 hex digits>``: short enough for a log line, enough to tell bundles apart.

    The name is percent-encoded (UTF-8) outside printable ASCII, and ``%`` itself: ``export --name`` takes
    any string, and a control character in a header made uvicorn drop every API answer unanswered, while a
    character outside Latin-1 failed every audit job (its header goes through Starlette, which writes
    Latin-1); other non-ASCII bytes reach clients as mojibake (RFC 9110 leaves them opaque). A space that
    leads the name is encoded too: clients drop a value's edge whitespace.
    """
    name = quote(info["name"], safe=HEADER_SAFE)
    # A field value's leading whitespace is no part of it (RFC 9110 5.5): clients read " prod@..." as "prod@...",
    # which /status's ``model`` is not. Only a space can lead (a tab is encoded already); the digest always ends
    # the value, so a trailing one is inside it.
    stripped = name.lstrip(" ")
    return f"{'%20' * (len(name) - len(stripped))}{stripped}@{info['bundle_digest'][:len('sha256:') + 12]}"


def status_app() -> Starlette:
    """A Starlette app beside BentoML's routes: ``GET /status``, the worker's ``status()`` as JSON, and
    ``GET /audit/job/progress`` (``intentvcs.service.audit_jobs``)."""
    async def status(request: Request) -> JSONResponse:
        if request.method not in ("GET", "HEAD"):  # Starlette's own 405 is plain text, and counted nowhere
            rejections.refused(request.method, STATUS_ROUTE, 405, "method_not_allowed")
            return JSONResponse({"error": f"{STATUS_ROUTE} takes GET, not {request.method[:20]}"}, status_code=405,
                                headers={"allow": "GET"})
        return JSONResponse(bentoml.get_current_service().status())

    return Starlette(routes=[Route(STATUS_ROUTE, status, methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE",
                                                                  "OPTIONS"]),
                             Route(PROGRESS_ROUTE, progress_endpoint, methods=["GET"])])


class ModelHeader:
    """ASGI middleware: add ``X-Intentvcs-Model`` to the answers of ``routes``."""

    def __init__(self, app: Callable[..., Awaitable[None]], routes: list[str]):
        self.app = app
        self.routes = frozenset(routes)

    async def __call__(self, scope: dict[str, Any], receive, send) -> None:
        if scope["type"] != "http" or scope.get("path") not in self.routes:
            await self.app(scope, receive, send)
            return

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                # The service keeps the value, set once per served engine: no work per answer.
                value = ANSWERED_BY.get() or bentoml.get_current_service().model_header
                message = {**message, "headers": [*message.get("headers", []), (HEADER.encode(), value)]}
            await send(message)

        await self.app(scope, receive, send_with_header)
