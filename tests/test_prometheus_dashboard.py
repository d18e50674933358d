"""The Grafana dashboard loads by import and by file provisioning, and every panel query and alert rule works
against a real Prometheus.

The end-to-end tests start the service (``bentoml serve``) and a real
Prometheus (Debian package ``prometheus``) scraping it every second with the
alerting rules of ``deploy/prometheus/alerts.yml`` loaded, send traffic (good,
refused and audit requests), then, through Prometheus' HTTP API:

- evaluate each panel's ``targets[].expr``: a query that returns nothing means
  a wrong metric name or label in the dashboard;
- evaluate each alert rule's ``expr`` (it must parse and evaluate; most return
  nothing, as no alert should fire), check that every series selector in it
  matches a series the service exports (a misspelt metric or label would leave
  an alert that can never fire), and that ``/api/v1/rules`` lists every rule,
  evaluated and healthy.

Whether each alert fires on the anomaly it is for is ``promtool test rules``'
job (tests/test_deploy.py), on synthetic series with a day of history.
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
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple, NoReturn

import httpx
import pytest
import yaml

from intentvcs.cli.commands.serve import free_port, running
from tests.helpers.bundle import make_tiny_bundle

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "monitoring" / "grafana" / "intentvcs-dashboard.json"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
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


def test_dashboard_loads_by_import_and_by_provisioning():
    """No ``__inputs`` (file provisioning does not resolve them, grafana/grafana#10786): a datasource variable."""
    text = DASHBOARD.read_text()
    dashboard = json.loads(text)
    assert "__inputs" not in dashboard and "DS_PROMETHEUS" not in text
    variables = dashboard["templating"]["list"]
    assert [v for v in variables if v["type"] == "datasource"] == [variables[0]]
    assert (variables[0]["name"], variables[0]["query"]) == ("datasource", "prometheus")
    # The only dashboard variable anything refers to is that one (plus Grafana's own $__ ones).
    assert set(re.findall(r"\$\{?(\w+)", text)) - {"__rate_interval", "__interval", "__range"} == {"datasource"}
    assert isinstance(dashboard["schemaVersion"], int) and dashboard["id"] is None and dashboard["uid"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, f"{panel['title']} [{target['refId']}]"
    queries = [expr for _, expr in panel_queries(dashboard)]
    assert not [q for q in queries if "$" in q], "unsubstituted Grafana variable"
    for needed in ("bentoml_service_request_duration_seconds_bucket", "intentvcs_predictions_total",
                   "intentvcs_out_of_scope_total", "intentvcs_confidence_bucket", "intentvcs_batch_size",
                   "intentvcs_request_errors_total", "intentvcs_model_info", "intentvcs_spelling_corrected_total"):
        assert any(needed in q for q in queries), needed


# The endpoints a request panel or a request alert selects (BentoML's counter, by regex).
ENDPOINTS = re.compile(r'bentoml_service_request_total\{[^}]*endpoint=~"([^"]+)"')


def test_request_panels_and_alerts_count_the_same_endpoints():
    """The request and error panels show the requests the alerts count, audit jobs included (a job past its
    deadline answers its get with 504: an alert that fires on it must show on the dashboard)."""
    from intentvcs.service.audit_jobs import JOB_ROUTE, SUBMIT_ROUTE

    queries = [expr for _, expr in panel_queries(json.loads(DASHBOARD.read_text()))]
    panels = {regex for expr in queries for regex in ENDPOINTS.findall(expr)}
    alerts = {regex for rule in alert_rules() for regex in ENDPOINTS.findall(rule["expr"])}
    assert panels and panels == alerts, (panels, alerts)
    [regex] = alerts
    # PromQL regexes are anchored at both ends, as fullmatch is.
    for endpoint in ("/predict", "/model/parse", "/audit", SUBMIT_ROUTE, f"{JOB_ROUTE}/get"):
        assert re.fullmatch(regex, endpoint), endpoint
    for endpoint in ("/status", "/metrics", "/readyz", "/audits"):
        assert not re.fullmatch(regex, endpoint), endpoint


def test_request_panels_and_alerts_count_the_same_status_codes():
    """What the error panels call refused and failed is what the alerts count: a 501 (a body in a transfer
    coding the service does not take) is refused, the client's mistake, not a server error (the panel showed
    it as one while the alerts counted it refused)."""
    codes = re.compile(r'http_response_code(=~|!=|=)"([^"]*)"')
    panels = {tuple(codes.findall(expr)) for _, expr in panel_queries(json.loads(DASHBOARD.read_text()))
              if "http_response_code" in expr}
    alerts = {tuple(codes.findall(rule["expr"])) for rule in alert_rules()
              if rule["alert"] in ("IntentvcsHigh5xxRate", "IntentvcsRefusedRequests")}
    assert panels == alerts == {(("=~", "4..|501"),), (("=~", "5.."), ("!=", "501"))}, (panels, alerts)


def alert_rules() -> list[dict]:
    """Every rule of deploy/prometheus/alerts.yml (each a dict with ``alert``, ``expr``, ...)."""
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]


# The series selectors of an expression: our metrics, BentoML's, and `up`.
SELECTOR = re.compile(r"\b((?:intentvcs|bentoml)_\w+|up)\b(\{[^}]*\})?")


def selectors(expr: str) -> set[str]:
    return {name + (matchers or "") for name, matchers in SELECTOR.findall(expr)}


def test_selectors_are_found_in_alert_expressions():
    """The extraction the end-to-end test relies on sees every metric of every rule."""
    found = {s for rule in alert_rules() for s in selectors(rule["expr"])}
    assert 'up{job="intentvcs"}' in found
    assert 'intentvcs_confidence_bucket{le="0.5"}' in found
    assert {"intentvcs_out_of_scope_total", "intentvcs_predictions_total", "intentvcs_confidence_sum"} <= found
    for rule in alert_rules():
        assert selectors(rule["expr"]), rule["alert"]


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
def prometheus(target: str, workdir: Path, rule_files: tuple[Path, ...] = ()):
    """A Prometheus on loopback scraping ``target`` (host:port) every second as job ``intentvcs`` (the job the
    alert rules select), evaluating ``rule_files`` every second; yields its URL."""
    port = free_port()
    config = workdir / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": [{"job_name": "intentvcs", "static_configs": [{"targets": [target]}]}],
    }))
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


class Scraped(NamedTuple):
    prometheus: str  # its URL
    started_at: float  # when the service was ready
    evaluated_at: float  # the end of the traffic: the time every query is evaluated at


@pytest.fixture(scope="module")
def scraped(tmp_path_factory) -> Iterator[Scraped]:
    """One service and one Prometheus (with the alert rules) for the end-to-end tests, after 8 s of traffic."""
    tmp = tmp_path_factory.mktemp("scraped")
    bundle = make_tiny_bundle(tmp / "tiny", spelling_texts=["play some music", "book a table for two"])
    with running(bundle) as service, prometheus(re.sub(r"^http://", "", service), tmp, (ALERTS,)) as prom:
        started_at = time.time()
        send_traffic(service, seconds=8)
        evaluated_at = time.time()
        time.sleep(2.5)  # the last scrapes after the traffic
        yield Scraped(prom, started_at, evaluated_at)


def query(scraped: Scraped, expr: str) -> httpx.Response:
    return httpx.get(f"{scraped.prometheus}/api/v1/query", params={"query": expr, "time": scraped.evaluated_at},
                     timeout=10)


@pytest.mark.slow
def test_every_panel_query_returns_data(scraped):
    dashboard = json.loads(DASHBOARD.read_text())
    empty = []
    for title, expr in panel_queries(dashboard):
        response = query(scraped, expr)
        assert response.status_code == 200, f"{title}: {response.text}"
        result = response.json()["data"]["result"]
        values = [float(sample["value"][1]) for sample in result]
        if not any(math.isfinite(value) for value in values):
            empty.append(f"{title}: {expr} -> {result}")
    assert not empty, "panel queries without data:\n" + "\n".join(empty)


@pytest.mark.slow
def test_every_alert_rule_evaluates_on_live_series(scraped):
    rules = alert_rules()
    dead = []
    for rule in rules:
        response = query(scraped, rule["expr"])
        assert response.status_code == 200 and response.json()["status"] == "success", \
            f"{rule['alert']}: {response.text}"
        assert response.json()["data"]["resultType"] == "vector", rule["alert"]
        for selector in sorted(selectors(rule["expr"])):
            series = httpx.get(f"{scraped.prometheus}/api/v1/series", timeout=10, params={
                "match[]": selector, "start": scraped.started_at - 5, "end": scraped.evaluated_at + 5})
            assert series.status_code == 200, f"{rule['alert']}: {selector}: {series.text}"
            if not series.json()["data"]:
                dead.append(f"{rule['alert']}: {selector}")
    assert not dead, "alert selectors that match no series of the service:\n" + "\n".join(dead)

    # Prometheus loaded every rule and evaluates it without error.
    deadline = time.monotonic() + 30
    while True:
        listed = httpx.get(f"{scraped.prometheus}/api/v1/rules", params={"type": "alert"}, timeout=10).json()
        loaded = {rule["name"]: rule for group in listed["data"]["groups"] for rule in group["rules"]}
        assert set(loaded) == {rule["alert"] for rule in rules}
        unhealthy = {name: (rule["health"], rule.get("lastError")) for name, rule in loaded.items()
                     if rule["health"] != "ok"}
        if not unhealthy:
            break
        assert time.monotonic() < deadline, f"rules not healthy: {unhealthy}"
        time.sleep(0.5)
    # Nothing is wrong with this service: no alert fires (a rule that fires here is miswritten).
    firing = {name: rule["alerts"] for name, rule in loaded.items() if rule["state"] == "firing"}
    assert not firing, firing
