"""The Grafana dashboard imports as is, and every panel's PromQL returns data from a real Prometheus.

The end-to-end test starts the service (``bentoml serve``) and a real
Prometheus (Debian package ``prometheus``) scraping it every second, sends
traffic (good, refused and audit requests), then evaluates each panel's
``targets[].expr`` through Prometheus' HTTP API. A query that returns nothing
means a wrong metric name or label in the dashboard.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NoReturn

import httpx
import pytest

from intentvcs.cli.commands.serve import free_port, running
from tests.helpers.bundle import make_tiny_bundle

DASHBOARD = Path(__file__).resolve().parents[1] / "monitoring" / "grafana" / "intentvcs-dashboard.json"
GRAFANA_VARIABLES = {"$__rate_interval": "15s", "$__interval": "15s", "$__range": "15s"}


def panel_queries(dashboard: dict) -> list[tuple[str, str]]:
    """(panel title, PromQL with Grafana's interval variables substituted) for every target."""
    queries = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            queries.append((f"{panel['title']} [{target['refId']}]", expr))
    return queries


def test_dashboard_is_importable_as_is():
    dashboard = json.loads(DASHBOARD.read_text())
    assert [i["name"] for i in dashboard["__inputs"]] == ["DS_PROMETHEUS"]
    assert dashboard["__inputs"][0]["pluginId"] == "prometheus"
    assert isinstance(dashboard["schemaVersion"], int) and dashboard["id"] is None and dashboard["uid"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}"
        assert panel["targets"], panel["title"]
    queries = [expr for _, expr in panel_queries(dashboard)]
    assert not [q for q in queries if "$" in q], "unsubstituted Grafana variable"
    for needed in ("bentoml_service_request_duration_seconds_bucket", "intentvcs_predictions_total",
                   "intentvcs_out_of_scope_total", "intentvcs_confidence_bucket", "intentvcs_batch_size",
                   "intentvcs_request_errors_total", "intentvcs_model_info", "intentvcs_spelling_corrected_total"):
        assert any(needed in q for q in queries), needed


def unavailable(reason: str) -> NoReturn:
    """Skip on a developer's machine; in CI (``$CI`` set, as .ci/run is run) the real Prometheus must run."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run this test against a real Prometheus")
    pytest.skip(reason)


def prometheus_binary() -> str:
    """/usr/bin/prometheus, installing the Debian package when running as root; else skip (fail in CI)."""
    found = shutil.which("prometheus") or ("/usr/bin/prometheus" if os.path.exists("/usr/bin/prometheus") else None)
    if found:
        return found
    if os.geteuid() != 0:
        unavailable("Prometheus is not installed (apt-get install prometheus) and this is not root")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "install", "-y", "prometheus"], ["apt-get", "update"],
                    ["apt-get", "install", "-y", "prometheus"]):
        result = subprocess.run(command, check=False, capture_output=True, text=True, env=env, timeout=600)
        if command[1] == "install" and result.returncode == 0:
            return "/usr/bin/prometheus"
    unavailable(f"could not install the Debian package prometheus: {result.stderr[-500:]}")


@contextlib.contextmanager
def prometheus(target: str, workdir: Path):
    """A Prometheus on loopback scraping ``target`` (host:port) every second; yields its URL."""
    port = free_port()
    config = workdir / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"scrape_configs:\n  - job_name: intentvcs\n    static_configs: [{{targets: ['{target}']}}]\n"
    )
    command = [prometheus_binary(), f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
               f"--web.listen-address=127.0.0.1:{port}"]
    with open(workdir / "prometheus.log", "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not _ok(f"{url}/-/ready"):
            assert process.poll() is None and time.monotonic() < deadline, (workdir / "prometheus.log").read_text()
            time.sleep(0.2)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _ok(url: str) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(url, timeout=2).status_code == 200
    return False


def send_traffic(url: str, seconds: float) -> None:
    """Predictions (single and batched, concurrent), refused requests and an audit, for ``seconds``."""
    texts = ["play some music", "book a table for two", "will it rain tomorrow", "rate this book", "hi",
             "play some musci"]  # a typo for the spelling normaliser

    def client(i: int) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            httpx.post(f"{url}/predict", json={"text": texts[i % len(texts)]}, timeout=30)
            httpx.post(f"{url}/predict", json={"texts": texts, "top_k": 2}, timeout=30)
            httpx.post(f"{url}/predict", json={"text": ""}, timeout=30)  # 400, reason empty_text
            i += 1

    httpx.post(f"{url}/audit", json={"rows": [{"text": "play jazz", "labels": ["PlayJazz"]}]}, timeout=60)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(client, range(4)))


@pytest.mark.slow
def test_every_panel_query_returns_data(tmp_path):
    dashboard = json.loads(DASHBOARD.read_text())
    bundle = make_tiny_bundle(tmp_path / "tiny", spelling_texts=["play some music", "book a table for two"])
    with running(bundle) as service, prometheus(re.sub(r"^http://", "", service), tmp_path) as prom:
        send_traffic(service, seconds=8)
        evaluated_at = time.time()
        time.sleep(2.5)  # the last scrapes after the traffic
        empty = []
        for title, expr in panel_queries(dashboard):
            response = httpx.get(f"{prom}/api/v1/query", params={"query": expr, "time": evaluated_at}, timeout=10)
            assert response.status_code == 200, f"{title}: {response.text}"
            result = response.json()["data"]["result"]
            values = [float(sample["value"][1]) for sample in result]
            if not any(math.isfinite(value) for value in values):
                empty.append(f"{title}: {expr} -> {result}")
        assert not empty, "panel queries without data:\n" + "\n".join(empty)
