"""Errors in JSON, also where Starlette answers: an unknown path and a method a route does not take.

The routes of the service answer a refusal as ``{"error": ...}`` (``intentvcs.service.rejections``), but a
path no route has (``POST /predcit``) and another method on a route BentoML or Starlette serve
(``OPTIONS /metrics``) were answered by Starlette in plain text ("Not Found", "Method Not Allowed"), which a
client reading every error as JSON fails to parse. :class:`PlainErrorsAsJson` answers those as
``{"error": "no route POST /predcit"}`` and ``{"error": "/metrics takes GET, HEAD, not OPTIONS"}``, with
their status and other headers (``Allow``) kept.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from intentvcs.service.rejections import logged_path, refused_scope

# Statuses Starlette answers in plain text of its own, and the refusal reason each is counted under.
PLAIN_STATUSES = {404: "not_found", 405: "method_not_allowed"}


class PlainErrorsAsJson:
    """ASGI middleware: a plain-text 404 or 405 becomes ``{"error": ...}`` naming the method and path."""

    def __init__(self, app: Callable[..., Awaitable[None]]):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held: dict[str, Any] = {}
        answered = False

        async def send_json_errors(message: dict[str, Any]) -> None:
            nonlocal answered
            if message["type"] == "http.response.start":
                if message["status"] in PLAIN_STATUSES and _is_plain_text(message.get("headers", [])):
                    held.update(message)  # answered when its plain body comes (a HEAD's too: the server drops it)
                    return
            elif held and message["type"] == "http.response.body":
                # The JSON answer goes out at the first piece of the plain body; the rest of it is dropped
                # (a second answer to one request would break the ASGI protocol).
                if not answered:
                    answered = True
                    refused_scope(scope, held["status"], PLAIN_STATUSES[held["status"]])  # one count and log line
                    await _answer(send, held, _error(scope, held))
                return
            await send(message)

        await self.app(scope, receive, send_json_errors)


def _is_plain_text(headers: list[tuple[bytes, bytes]]) -> bool:
    return any(name.lower() == b"content-type" and value.startswith(b"text/plain") for name, value in headers)


def _error(scope: dict[str, Any], start: dict[str, Any]) -> str:
    method, path = scope.get("method", "?")[:20], logged_path(scope.get("path", "?"))
    # A HEAD is answered with its GET's headers (RFC 9110), Content-Length included: its unsent body is the GET's.
    method = "GET" if method == "HEAD" else method
    if start["status"] == 404:
        return f"no route {method} {path}"
    allowed = next((value.decode("latin-1") for name, value in start.get("headers", [])
                    if name.lower() == b"allow"), None)
    return f"{path} takes {allowed}, not {method}" if allowed else f"{path} does not take {method}"


async def _answer(send: Callable[[dict[str, Any]], Awaitable[None]], start: dict[str, Any], error: str) -> None:
    body = json.dumps({"error": error}).encode()
    kept = [(name, value) for name, value in start.get("headers", [])
            if name.lower() not in (b"content-type", b"content-length")]
    await send({**start, "headers": [(b"content-type", b"application/json"),
                                     (b"content-length", str(len(body)).encode()), *kept]})
    await send({"type": "http.response.body", "body": body})
