"""HTTP helpers for the tests that talk to a real BentoML server."""

from __future__ import annotations

import time

import httpx
from prometheus_client.parser import text_string_to_metric_families


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


def metric_samples(url: str, name: str) -> dict[tuple, float]:
    """The samples of metric ``name`` the server at ``url`` exposes, by their sorted labels."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return {tuple(sorted(s.labels.items())): s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == name}


def wait_for(condition, timeout_s: float = 60.0) -> None:
    """Poll ``condition`` every 0.2 s until it holds; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def reload_counts(url: str) -> dict[str, float]:
    """``intentvcs_model_reloads_total`` by result (ok, failed)."""
    return {dict(labels)["result"]: value
            for labels, value in metric_samples(url, "intentvcs_model_reloads_total").items()}
