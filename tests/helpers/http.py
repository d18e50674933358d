"""HTTP helpers for the tests that talk to a real BentoML server."""

from __future__ import annotations

import httpx


def post(base: str, path: str, body) -> httpx.Response:
    """POST ``body`` to ``base + path`` as JSON: a dict is encoded, a str or bytes sent as it is (to send bad JSON)."""
    kwargs = {"content": body} if isinstance(body, (str, bytes)) else {"json": body}
    return httpx.post(f"{base}{path}", headers={"content-type": "application/json"}, timeout=30, **kwargs)


def assert_400_names(response: httpx.Response, field: str, limit: str) -> None:
    """A 400 whose first error names ``field`` (``""`` for the whole body) and says ``limit``."""
    assert response.status_code == 400, response.text
    detail = response.json()["detail"][0]
    assert (detail["loc"][0] if detail["loc"] else "") == field
    assert limit in detail["msg"]
