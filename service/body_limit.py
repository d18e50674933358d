"""An ASGI middleware that refuses request bodies over a byte limit with 413.

The request schemas bound what a valid request holds (utterances, characters,
audit rows), but they run after the whole body has been read and parsed: a
client could still make a worker buffer and parse hundreds of megabytes of
JSON. This middleware reads the body first, counting bytes whether or not the
client sent ``Content-Length`` (a declared length over the limit is refused
before reading anything), and answers ``413`` with a JSON error that names
the limit and the setting that raises it. Bodies within the limit are
replayed to the application unchanged, as one message.

It sits outside the gates that count requests (``audit_control.AuditGate``,
``audit_jobs.JobGate``), so a request takes an audit slot only once its body
has arrived in full: a client trickling its body a byte a second held a slot,
and two of them locked every other ``/audit`` out until BentoML's request
timeout. A body not in full ``BODY_READ_TIMEOUT_S`` after its first read is
refused with ``408`` (reason ``body_timeout``), well before that timeout; a
body its client abandons (a disconnect before its end) is counted as
``client_gone`` and answered with nothing, since nobody would read it.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Iterable

from intentvcs.service.rejections import CLIENT_CLOSED, respond

Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
OnReject = Callable[[dict[str, Any], int, str], None]  # (scope, status, reason)
SETTING = "INTENTVCS_MAX_BODY_BYTES"
# The whole body within this (32 MiB, the default limit, at 1.1 MB/s), under BentoML's own request timeout
# (60 s at least, app.py); a module constant, not yet an INTENTVCS_* setting.
BODY_READ_TIMEOUT_S = 30.0


class BodyLimit:
    """Wrap ``app``; ``max_bytes`` is the largest accepted request body."""

    def __init__(self, app: Callable[..., Awaitable[None]], max_bytes: int,
                 on_reject: OnReject = lambda scope, status, reason: None,
                 read_timeout_s: float = BODY_READ_TIMEOUT_S, routes: Iterable[str] | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.on_reject = on_reject
        self.read_timeout_s = read_timeout_s
        # The routes that read a body (None: every path). Only those: buffered for any path, a POST to
        # /nope with 32 MiB made the worker hold it, per connection, until the read timeout.
        self.routes = None if routes is None else frozenset(routes)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in ("POST", "PUT", "PATCH") or (
                self.routes is not None and scope.get("path") not in self.routes):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, send, int(declared))
            return
        # The body's bytes, not the server's messages: held as messages (a dict each), a body its client
        # sent a byte per read cost some 300 bytes of memory per byte sent, until the read timeout.
        body = bytearray()
        try:
            # One deadline over the whole read (no task per message, as wait_for would start).
            async with asyncio.timeout(self.read_timeout_s):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        # The client went away mid-body: nobody reads an answer, and handing BentoML the
                        # half a body logged a ClientDisconnect traceback for every such client (/audit)
                        # or counted it as malformed JSON (/audit/job/submit).
                        self.on_reject(scope, CLIENT_CLOSED, "client_gone")
                        return
                    body += message.get("body", b"")
                    if len(body) > self.max_bytes or not message.get("more_body", False):
                        break
        except TimeoutError:
            self.on_reject(scope, 408, "body_timeout")
            await respond(send, 408, f"the request body did not arrive in full within {self.read_timeout_s:g} s "
                                     f"({len(body)} bytes read)")
            return
        if len(body) > self.max_bytes:
            await self._refuse(scope, send, len(body), at_least=True)
            return
        replay = iter([{"type": "http.request", "body": bytes(body), "more_body": False}])
        del body  # held once, as the replayed message, while the application runs

        async def replayed() -> Message:
            # After the buffered messages, hand on whatever comes next (a disconnect).
            return next(replay, None) or await receive()

        await self.app(scope, replayed, send)

    async def _refuse(self, scope: dict[str, Any], send: Send, size: int, at_least: bool = False) -> None:
        self.on_reject(scope, 413, "body_too_large")
        await respond(send, 413, f"request body of {'at least ' if at_least else ''}{size} bytes exceeds the "
                                 f"limit of {self.max_bytes} bytes (setting {SETTING})")
