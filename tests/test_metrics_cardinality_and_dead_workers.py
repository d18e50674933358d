"""Defects a second review of the service's metrics found, each reproduced against a real server first.

- BentoML labels its request metrics (``bentoml_service_request_total``, ``..._duration_seconds`` with 16
  buckets, ``..._in_progress``) with the raw request path. The scrape configs drop the series of paths that
  are no route, but only once Prometheus has scraped them: every distinct path a client (a scanner) tried
  stayed in the workers' multiprocess files, and ``/metrics`` merged and wrote them all on every scrape.
  Measured on 2 workers: 3,000 scanned paths made ``/metrics`` 11 MB and 3 s (from 0.1 MB and 0.05 s), so a
  scanner's word list of a few tens of thousands of paths outlasts Prometheus' scrape timeout
  (IntentvcsTargetDown, and every other alert blind). A path that is no route is now labelled
  ``endpoint="other"`` (``prometheus_metrics.UNROUTED``).
- A worker killed outright (SIGKILL, the OOM killer) or restarted kept its
  ``bentoml_service_last_request_timestamp_seconds{pid=...}`` series (gauge mode ``all``) for good: one more
  stale series per worker restart. ``forget_dead_workers`` now drops a dead worker's ``all`` gauges too.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys

import httpx
import pytest

from intentvcs.cli.commands.serve import running
from tests.helpers.bundle import make_tiny_bundle
from tests.helpers.http import metric_samples

REQUEST_METRICS = ("bentoml_service_request_total", "bentoml_service_request_duration_seconds_count",
                   "bentoml_service_request_in_progress")
SCANNED = 300  # distinct paths that are no route


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory):
    root = tmp_path_factory.mktemp("metrics-pass2")
    bundle = make_tiny_bundle(root / "a", seed=0)
    served = root / "served"
    shutil.copytree(bundle, served)
    with running(served, workers=2, extra_env={"BENTOML_HOME": str(root / "home")},
                 log_path=root / "server.log") as url:
        yield url


def _endpoints(url: str) -> set[str]:
    return {dict(labels)["endpoint"] for name in REQUEST_METRICS for labels in metric_samples(url, name)}


def test_paths_that_are_no_route_do_not_grow_the_metrics_endpoint(two_workers):
    """300 distinct unknown paths (as a scanner sends them, GET and POST), then a request to every route: the
    request metrics hold each route under its own label and one "other", where the unknown paths are counted."""
    from intentvcs.service.app import API_ROUTES
    from intentvcs.service.audit_jobs import JOB_READ_ROUTES
    from intentvcs.service.identity import STATUS_ROUTE
    from intentvcs.service.prometheus_metrics import BENTOML_ROUTES, UNROUTED

    routes = {*API_ROUTES, *JOB_READ_ROUTES, STATUS_ROUTE, *BENTOML_ROUTES} - {"/metrics"}  # /metrics: not counted
    url = two_workers
    before = metric_samples(url, "bentoml_service_request_total")

    async def scan() -> list[int]:
        async with httpx.AsyncClient(timeout=30) as client:
            return [(await client.request("POST" if i % 2 else "GET", f"{url}/scan-{i}/wp-login.php")).status_code
                    for i in range(SCANNED)]

    assert set(asyncio.run(scan())) == {404}
    assert httpx.post(f"{url}/predict", json={"text": "play some jazz"}, timeout=30).status_code == 200
    assert httpx.get(f"{url}/status", timeout=30).status_code == 200
    for route in routes:  # whatever each answers a GET (200, 400, 404, 405): counted under its own label
        httpx.get(f"{url}{route}", timeout=30)
    endpoints = _endpoints(url)
    assert not {endpoint for endpoint in endpoints if endpoint.startswith("/scan-")}, sorted(endpoints)[:5]
    assert endpoints == routes | {UNROUTED}, (sorted(endpoints - routes), sorted(routes - endpoints))
    after = metric_samples(url, "bentoml_service_request_total")

    def count(samples, endpoint: str, code: str) -> float:
        return sum(value for labels, value in samples.items()
                   if dict(labels)["endpoint"] == endpoint and dict(labels)["http_response_code"] == code)

    assert count(after, UNROUTED, "404") - count(before, UNROUTED, "404") == SCANNED
    assert count(after, "/predict", "200") - count(before, "/predict", "200") == 1
    assert count(after, "/status", "200") - count(before, "/status", "200") == 2


def test_the_metrics_endpoint_stays_small_after_a_scan(two_workers):
    """The exposition's size does not grow with the number of unknown paths asked for."""
    url = two_workers
    size = len(httpx.get(f"{url}/metrics", timeout=30).content)

    async def scan() -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            for i in range(SCANNED):
                await client.get(f"{url}/again-{i}")

    asyncio.run(scan())
    grown = len(httpx.get(f"{url}/metrics", timeout=30).content) - size
    assert grown < 2_000, f"/metrics grew by {grown} bytes for {SCANNED} unknown paths"


# ------------------------------------------------ a dead worker's "all" gauges (BentoML's pid series)
_DEAD_WORKER = """
import prometheus_client
gauge = prometheus_client.Gauge("bentoml_service_last_request_timestamp_seconds", "t", ["service_name"])
gauge.labels(service_name="intentvcs").set(1.0)
import os
os._exit(0)  # as a SIGKILL leaves it
"""
_NEW_WORKER = """
import json
import prometheus_client
from prometheus_client import CollectorRegistry, multiprocess
from intentvcs.service.prometheus_metrics import get
get()
gauge = prometheus_client.Gauge("bentoml_service_last_request_timestamp_seconds", "t", ["service_name"])
gauge.labels(service_name="intentvcs").set(2.0)
registry = CollectorRegistry()
multiprocess.MultiProcessCollector(registry)
print(json.dumps([s.value for m in registry.collect() for s in m.samples
                  if s.name == "bentoml_service_last_request_timestamp_seconds"]))
"""


def test_a_worker_starting_drops_the_pid_series_of_workers_that_died(tmp_path):
    """A worker's ``bentoml_service_last_request_timestamp_seconds`` (mode ``all``: a series per pid) outlived it."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", _DEAD_WORKER], env=env, check=True, timeout=60)
    out = subprocess.run([sys.executable, "-c", _NEW_WORKER], env=env, check=True, timeout=60,
                         capture_output=True, text=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == [2.0]

