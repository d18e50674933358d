"""An ASGI middleware that requires ``Authorization: Bearer <token>`` on the API routes when a token is set.

``intentvcs serve`` binds loopback, but BentoML's own default and the
container's is every interface, and a classifier that also audits batches is
worth protecting from whoever else can reach the port. With
``INTENTVCS_API_TOKEN`` set (``intentvcs.service.settings.Settings``), the
protected routes answer 401 with ``WWW-Authenticate: Bearer`` unless the
request carries the token, compared in constant time (``hmac.compare_digest``).
``/predict``, ``/model/parse``, ``/audit``, the audit job routes and ``/status`` are protected, ``/metrics`` too when
``INTENTVCS_METRICS_TOKEN_REQUIRED=1``; the health probes (``/healthz``,
``/livez``, ``/readyz``) and the OpenAPI document stay open, the document
declaring the bearer scheme and which operations require it (BentoML builds
the document with no hook for security schemes, so ``openapi_document``
amends its ``/docs.json`` answer on the way out).
"""

from __future__ import annotations

import hmac
from typing import Any, Awaitable, Callable, Iterable

from intentvcs.service.rejections import respond

OnReject = Callable[[dict[str, Any], int, str], None]  # (scope, status, reason)


def bearer_token(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme case-insensitive), else None."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            return token.strip() if scheme.lower() == b"bearer" and token.strip() else None
    return None


class BearerAuth:
    """Wrap ``app``; requests to ``routes`` need ``token`` (``openapi_document`` says so in ``/docs.json``)."""

    def __init__(self, app: Callable[..., Awaitable[None]], token: str, routes: Iterable[str],
                 on_reject: OnReject = lambda scope, status, reason: None):
        if not token:
            raise ValueError("BearerAuth needs a non-empty token")
        self.app = app
        self.token = token.encode()
        self.routes = frozenset(routes)
        self.on_reject = on_reject

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
        elif scope["path"] in self.routes and scope["method"] != "OPTIONS":
            given = bearer_token(scope.get("headers") or [])
            if given is not None and hmac.compare_digest(given, self.token):
                await self.app(scope, receive, send)
                return
            self.on_reject(scope, 401, "unauthorized")
            # RFC 6750: a request without credentials gets the bare challenge.
            challenge = b"Bearer" if given is None else b'Bearer error="invalid_token"'
            await respond(send, 401, "this route needs an 'Authorization: Bearer <token>' header with the "
                                     "server's token (INTENTVCS_API_TOKEN)",
                          headers=[(b"www-authenticate", challenge)])
        else:
            await self.app(scope, receive, send)
