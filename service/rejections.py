"""One log line and one count per refused request, and never the client's input.

BentoML logs every exception of an API call at ERROR with its traceback
(``bentoml._internal.server.http_app.log_exception``), and a pydantic
``ValidationError`` prints the offending input in its message: every bad
request left a traceback and a slice of the user's text in the server log.
A refusal is the service working, not failing, so each one is logged here as
one line naming the method, the route, the status and the reason (from the
closed set of ``intentvcs.service.schemas.REJECTION_REASONS`` and
``intentvcs.service.prometheus_metrics.SERVER_ERROR_REASONS``), and counted in
``intentvcs_request_errors_total{reason}``. :class:`QuietRequestErrors`
drops BentoML's traceback record for the request-validation errors that
``CountedRequest`` has already logged this way; everything else (a bug, a
validation error of a response) keeps its traceback.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from intentvcs.service import prometheus_metrics

log = logging.getLogger(__name__)
MAX_LOGGED_PATH = 200  # characters of a refused request's path in its log line
CLIENT_CLOSED = 499  # nginx's "client closed request": the status logged for a request its client left
# The logger of BentoML's log_exception (the module's __name__).
BENTOML_LOGGER = "bentoml._internal.server.http_app"


def refused(method: str, route: str, status: int, reason: str) -> None:
    """Count and log one refused request: INFO for a client's mistake, WARNING when the service was the limit."""
    prometheus_metrics.get().record_error(reason)
    level = logging.INFO if status < 500 and status != 429 else logging.WARNING
    log.log(level, "refused %s %s: %d %s", method, route, status, reason)


def refused_scope(scope: dict[str, Any], status: int, reason: str) -> None:
    """:func:`refused` for an ASGI middleware, the request's path as ``logged_path`` writes it."""
    refused(scope.get("method", "?"), logged_path(scope.get("path", "?")), status, reason)


def logged_path(path: str) -> str:
    """``path`` as a log line may hold it: a refused request's path is the client's text (a POST to any
    path meets the body limit), and a decoded ``%0A`` in it wrote a line of the client's making into the
    log, so anything but printable characters is escaped, and a long path cut."""
    path = path[:MAX_LOGGED_PATH]
    return path if path.isprintable() else ascii(path)


class QuietRequestErrors(logging.Filter):
    """Drop BentoML's "Exception on ..." record when the exception is a refused request body.

    Request bodies are validated by the ``CountedRequest`` models, whose names
    are the ``title`` of their ``ValidationError``; that error has been
    logged and counted already.
    """

    def __init__(self, request_models: set[str]):
        super().__init__()
        self.request_models = frozenset(request_models)

    def filter(self, record: logging.LogRecord) -> bool:
        from pydantic import ValidationError

        exc = record.exc_info[1] if record.exc_info else None
        # A title of a shortened error names its model first ("AuditRequest (of 25 failed checks, ...)",
        # schemas.CountedRequest): it is still one already counted.
        return not (isinstance(exc, ValidationError) and exc.title.partition(" (")[0] in self.request_models)


def quiet_bentoml(request_models: set[str]) -> None:
    """Install :class:`QuietRequestErrors` on BentoML's logger, once, and let this package's INFO lines through.

    BentoML's server logging passes INFO for its own loggers only (the root
    logger is at WARNING), so the package's logger is set to INFO unless the
    deployment configured it.
    """
    bentoml_logger = logging.getLogger(BENTOML_LOGGER)
    if not any(isinstance(f, QuietRequestErrors) for f in bentoml_logger.filters):
        bentoml_logger.addFilter(QuietRequestErrors(request_models))
    package = logging.getLogger("intentvcs.service")
    if package.level == logging.NOTSET:
        package.setLevel(logging.INFO)


async def respond(send: Callable[[dict[str, Any]], Awaitable[None]], status: int, message: str,
                  headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    """Answer an ASGI request with ``{"error": message}`` and close the connection.

    For middleware that refuse a request before reading its body: the unread
    body makes the connection unusable for a next request.
    """
    await respond_json(send, status, {"error": message}, headers)


async def respond_json(send: Callable[[dict[str, Any]], Awaitable[None]], status: int, payload: dict[str, Any],
                       headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    """Answer an ASGI request with ``payload`` as JSON and close the connection (see ``respond``)."""
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *headers]})
    await send({"type": "http.response.body", "body": body})
