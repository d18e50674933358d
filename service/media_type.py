"""An ASGI middleware that refuses API request bodies other than ``application/json`` with 415.

BentoML reads a body by its ``Content-Type``: JSON, but also form and
multipart data, and JSON when the header is missing. A web page can send
``text/plain``, form and multipart bodies, or none, to any address without
a CORS preflight (they are "simple requests"), so any page a user opens could
have made a service on their ``localhost`` or intranet classify and audit on
its behalf. ``application/json`` is not simple: the browser asks first, and
the service, which grants no cross-origin access, says no. So the API routes
take ``application/json`` (any parameters, such as ``charset``) and nothing
else; the answer names the accepted type, in the body and in ``Accept-Post``.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Iterable

from intentvcs.service.rejections import respond

ACCEPTED = "application/json"
BODILESS = ("GET", "HEAD", "OPTIONS")
OnReject = Callable[[dict[str, Any], int, str], None]  # (scope, status, reason)


def media_type(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The request's media type, lower case without parameters; None when it has no Content-Type."""
    for name, value in headers:
        if name.lower() == b"content-type":
            return value.decode("latin-1").split(";", 1)[0].strip().lower()
    return None


class JsonOnly:
    """Wrap ``app``; requests to ``routes`` that may carry a body must declare ``application/json``.

    GET, HEAD and OPTIONS (a CORS preflight, if CORS is ever enabled) pass.
    """

    def __init__(self, app: Callable[..., Awaitable[None]], routes: Iterable[str],
                 on_reject: OnReject = lambda scope, status, reason: None):
        self.app = app
        self.routes = frozenset(routes)
        self.on_reject = on_reject

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] == "http" and scope["path"] in self.routes and scope["method"] not in BODILESS:
            found = media_type(scope.get("headers") or [])
            if found != ACCEPTED:
                self.on_reject(scope, 415, "unsupported_media_type")
                what = f"Content-Type {found[:100]!r}" if found else "no Content-Type"
                await respond(send, 415, f"unsupported media type: {what}; send the body as {ACCEPTED}",
                              headers=[(b"accept-post", ACCEPTED.encode())])
                return
        await self.app(scope, receive, send)
