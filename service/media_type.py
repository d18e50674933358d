"""An ASGI middleware that refuses API request bodies other than ``application/json`` with 415.

BentoML reads a body by its ``Content-Type``: JSON, but also form and
multipart data, and JSON when the header is missing. A web page can send
``text/plain``, form and multipart bodies, or none, to any address without
a CORS preflight (they are "simple requests"), so any page a user opens could
have made a service on their ``localhost`` or intranet classify and audit on
its behalf. ``application/json`` is not simple: the browser asks first, and
the service, which grants no cross-origin access, says no. So the API routes
take ``application/json`` and nothing else; the answer names the accepted type,
in the body and in ``Accept-Post``. A ``charset`` other than UTF-8 is refused
too (JSON is UTF-8, RFC 8259, and the body would be read as UTF-8 whatever it
declared), and so is any method but POST, OPTIONS included (the service
grants no cross-origin access, so a preflight's answer is no; it was let
through to the server's plain-text, uncounted 405), with the same JSON
error body and count as every other refusal. So is a body declared compressed
(``Content-Encoding: gzip``...): nothing here decodes one, and read as JSON it
was refused as malformed at "line 1 column 1" (a gzip body), or accepted though
the client said it was not JSON (a plain body declared gzip); RFC 9110 answers
an unsupported content coding with 415 and ``Accept-Encoding`` (``identity``).
A transfer coding but ``chunked`` (``Transfer-Encoding: gzip, chunked``) is
refused likewise, with 501 as RFC 9112 answers it: the server takes such a body
off the wire still coded, and it reached the JSON parser that way ("line 1
column 1" again).
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Iterable, NamedTuple

from intentvcs.service.rejections import respond

ACCEPTED = "application/json"
CHARSETS = ("utf-8", "utf8")
IDENTITY = "identity"  # the one content coding taken: none
CHUNKED = "chunked"  # the one transfer coding taken: the server decodes it
OnReject = Callable[[dict[str, Any], int, str], None]  # (scope, status, reason)


class BodyHeaders(NamedTuple):
    """What a request's headers say of its body, each None when absent: its media type (lower case, without
    parameters), its ``charset`` parameter (lower case, unquoted), and its content and transfer codings
    (lower case) when they name one that nothing here decodes (a content coding but ``identity``, a
    transfer coding but ``chunked``, which the server decodes)."""

    media_type: str | None
    charset: str | None
    content_coding: str | None
    transfer_coding: str | None


def body_headers(headers: Iterable[tuple[bytes, bytes]]) -> BodyHeaders:
    """:class:`BodyHeaders` read in one pass over ``headers``, as every API request pays for it."""
    kind = charset = content_coding = transfer_coding = None
    for name, value in headers:
        name = name.lower()
        if name == b"content-type" and kind is None:  # the first one, as Starlette's request.headers reads it
            kind, *parameters = value.decode("latin-1").split(";")
            kind = kind.strip().lower()
            for parameter in parameters:
                key, _, given = parameter.partition("=")
                if key.strip().lower() == "charset":
                    charset = given.strip().strip('"').lower()
                    break
        elif name == b"content-encoding" and content_coding is None:
            content_coding = _undecoded(value, IDENTITY)
        elif name == b"transfer-encoding" and transfer_coding is None:
            transfer_coding = _undecoded(value, CHUNKED)
    return BodyHeaders(kind, charset, content_coding, transfer_coding)


def _undecoded(value: bytes, decoded: str) -> str | None:
    """A coding header's list (lower case) when it names a coding other than ``decoded``, else None."""
    codings = [coding.strip() for coding in value.decode("latin-1").lower().split(",")]
    return ", ".join(codings) if any(coding not in ("", decoded) for coding in codings) else None


class JsonOnly:
    """Wrap ``app``; requests to ``routes`` must be POSTs declaring ``application/json`` in UTF-8, uncompressed."""

    def __init__(self, app: Callable[..., Awaitable[None]], routes: Iterable[str],
                 on_reject: OnReject = lambda scope, status, reason: None):
        self.app = app
        self.routes = frozenset(routes)
        self.on_reject = on_reject

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope["path"] not in self.routes:
            await self.app(scope, receive, send)
            return
        if scope["method"] != "POST":
            self.on_reject(scope, 405, "method_not_allowed")
            await respond(send, 405, f"{scope['path']} takes POST with a JSON body, not {scope['method'][:20]}",
                          headers=[(b"allow", b"POST")])
            return
        found, declared, coding, transfer = body_headers(scope.get("headers") or [])
        if found != ACCEPTED or (declared is not None and declared not in CHARSETS):
            self.on_reject(scope, 415, "unsupported_media_type")
            what = (f"Content-Type {found[:100]!r}" if found else "no Content-Type") if found != ACCEPTED \
                else f"charset {declared[:40]!r}"
            await respond(send, 415, f"unsupported media type: {what}; send the body as {ACCEPTED} in UTF-8",
                          headers=[(b"accept-post", ACCEPTED.encode())])
            return
        if coding is not None:
            self.on_reject(scope, 415, "unsupported_media_type")
            await respond(send, 415, f"unsupported Content-Encoding {coding[:40]!r}: send the body uncompressed "
                                     f"(no Content-Encoding, or {IDENTITY})",
                          headers=[(b"accept-encoding", IDENTITY.encode())])
            return
        if transfer is not None:
            self.on_reject(scope, 501, "unsupported_media_type")
            await respond(send, 501, f"unsupported Transfer-Encoding {transfer[:40]!r}: send the body with a "
                                     f"Content-Length, or {CHUNKED} alone")
            return
        await self.app(scope, receive, send)
