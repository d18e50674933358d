"""Defects a review of the service's observability found, each reproduced first.

- A ``/predict`` (or ``/model/parse``) whose client leaves, queued or mid-body, was counted in
  ``intentvcs_request_errors_total{reason="client_gone"}`` but never in BentoML's
  ``bentoml_service_request_total``, and stayed in ``bentoml_service_request_in_progress`` (the dashboard's
  in-flight line) for BentoML's whole request timeout (60 s): BentoML's timeout middleware waits for an
  answer that never came. An ``/audit`` whose client left was counted as 499 there.
- A worker killed without its clean-up (SIGKILL, the OOM killer) left its gauges in the multiprocess folder:
  ``intentvcs_model_info`` (mode ``max``) kept naming the bundle it served after every live worker had
  swapped it out (the dashboard's "Served model" showed two bundles), and the ``live*`` gauges
  (``intentvcs_model_reload_failing``, BentoML's in-progress count) were never dropped either, since
  nothing called ``mark_process_dead`` for it.
- A 500 that ``direct_routes`` answered for a failure outside the batch queue (the answer's mapping,
  its serialisation) was counted under no reason, so ``IntentvcsServerFailures`` and the reasons panel
  missed it.
- BentoML labels its request metrics with the raw request path: every distinct path a client (a scanner)
  asks for, answered 404, became new series in Prometheus. The scrape configs now keep only the
  service's routes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import yaml

from intentvcs.cli.commands.serve import free_port, running
from tests.helpers.bundle import export_over, make_tiny_bundle
from tests.helpers.http import metric_samples, reload_counts, wait_for

ROOT = Path(__file__).resolve().parents[1]
PROMETHEUS_CONFIGS = (ROOT / "deploy" / "prometheus" / "prometheus.yml", ROOT / "monitoring" / "prometheus.yml")


# ------------------------------------------------ a served tiny bundle, two workers
@pytest.fixture(scope="module")
def two_workers(tmp_path_factory):
    """Two workers on a copy of bundle A (B beside it), the watcher every second, engine calls of two
    utterances (a request of 256 stays queued a while); yields (url, served folder, bundle B, BentoML home)."""
    root = tmp_path_factory.mktemp("observability")
    first = make_tiny_bundle(root / "a", seed=0)
    second = make_tiny_bundle(root / "b", seed=1)
    served = root / "served"
    shutil.copytree(first, served)
    home = root / "bentoml-home"  # ours, to find this server's workers by their metric files
    env = {"INTENTVCS_RELOAD_INTERVAL_S": "1", "INTENTVCS_MAX_BATCH_SIZE": "2", "BENTOML_HOME": str(home)}
    with running(served, workers=2, extra_env=env, log_path=root / "server.log") as url:
        yield url, served, second, home


def _counts(url: str) -> dict[str, float]:
    """The /predict request counts by status, client_gone, and /predict requests in progress."""
    counts = {f"predict {dict(labels)['http_response_code']}": value
              for labels, value in metric_samples(url, "bentoml_service_request_total").items()
              if dict(labels)["endpoint"] == "/predict"}
    counts["client_gone"] = metric_samples(url, "intentvcs_request_errors_total").get(
        (("reason", "client_gone"),), 0.0)
    counts["in_progress"] = sum(value for labels, value in
                                metric_samples(url, "bentoml_service_request_in_progress").items()
                                if dict(labels)["endpoint"] == "/predict")
    return counts


def _leave(url: str, body: bytes, declared: int) -> None:
    """POST /predict with ``body`` (of ``declared`` bytes, said the header) and close the connection."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as connection:
        connection.sendall(b"POST /predict HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                           b"Content-Length: %d\r\n\r\n%s" % (declared, body))
        time.sleep(0.01)


def test_a_predict_whose_client_leaves_is_counted_once_and_leaves_nothing_in_flight(two_workers):
    """Queued (its utterances waiting for the engine) and mid-body (BodyLimit): each is one client_gone,
    one request answered 499 in BentoML's count, as an /audit whose client leaves is, and not in flight."""
    url = two_workers[0]
    body = json.dumps({"texts": ["play some music please"] * 256}).encode()
    for sent, declared in ((body, len(body)), (body[:50], len(body))):
        before = _counts(url)
        _leave(url, sent, declared)
        wait_for(lambda: _counts(url)["client_gone"] == before["client_gone"] + 1, timeout_s=30)
        deadline = time.monotonic() + 10  # well within BentoML's 60 s request timeout
        while (after := _counts(url))["in_progress"] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert after["in_progress"] == 0, "a request whose client left is still in flight"
        assert after.get("predict 499", 0) == before.get("predict 499", 0) + 1, (before, after)
        assert after["client_gone"] == before["client_gone"] + 1
        assert {key: value for key, value in after.items() if key not in ("predict 499", "client_gone")} == \
            {key: value for key, value in before.items() if key not in ("predict 499", "client_gone")}


def _worker_pids(home: Path) -> set[int]:
    """The live, initialised workers of the server whose BentoML home is ``home``: the pids of the
    ``gauge_livemax`` files, which the service's metrics write once the worker's bundle watcher is set up."""
    pids = {int(m.group(1)) for path in home.rglob("gauge_livemax_*.db")
            if (m := re.search(r"_(\d+)\.db$", path.name))}
    live = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            if b"bentoml" in Path(f"/proc/{pid}/cmdline").read_bytes() and \
                    Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z":
                live.add(pid)
    return live


def _served(url: str) -> dict[str, float]:
    return {dict(labels)["name"]: value for labels, value in metric_samples(url, "intentvcs_model_info").items()}


def test_a_killed_workers_model_info_does_not_outlive_it(two_workers):
    """Worker 1 is killed (SIGKILL: no clean-up) while serving A and restarted by BentoML; then B replaces A
    and both live workers swap it in. intentvcs_model_info must name B alone: the dead worker's A=1 stayed
    (mode max), and the dashboard's "Served model" listed A and B as served."""
    url, served, second, home = two_workers
    wait_for(lambda: len(_worker_pids(home)) == 2)  # /readyz answered once one was ready
    workers = _worker_pids(home)
    assert _served(url) == {"a": 1.0}
    victim = min(workers)
    os.kill(victim, signal.SIGKILL)  # one of this test's server's workers (its metric files are in our home)
    wait_for(lambda: len(_worker_pids(home) - workers) == 1 and victim not in _worker_pids(home), timeout_s=90)
    wait_for(lambda: httpx.get(f"{url}/readyz", timeout=5).status_code == 200)
    ok_before = reload_counts(url)["ok"]
    export_over(second, served)
    wait_for(lambda: reload_counts(url)["ok"] == ok_before + 2, timeout_s=60)  # both live workers swapped
    assert {name for name, value in _served(url).items() if value == 1} == {"b"}, _served(url)
    assert metric_samples(url, "intentvcs_model_reload_failing") == {(): 0.0}


# ------------------------------------------------ the same, in-process: a worker that died without clean-up
_DEAD_WORKER = """
import os
from intentvcs.service.prometheus_metrics import get
metrics = get()
metrics.bind_model(["a"], {"name": "old", "bundle_digest": "sha256:1", "bundle_version": 5, "created_at": "t",
                           "backbone": "tiny", "provider": "cpu", "quantized": False}, [])
metrics.record_reload_failing(True)
os._exit(0)  # as a SIGKILL leaves it: no mark_process_dead
"""
_NEW_WORKER = """
import json
from prometheus_client import CollectorRegistry, multiprocess
from intentvcs.service.prometheus_metrics import get
metrics = get()
metrics.bind_model(["a"], {"name": "new", "bundle_digest": "sha256:2", "bundle_version": 5, "created_at": "t",
                           "backbone": "tiny", "provider": "cpu", "quantized": False}, [])
registry = CollectorRegistry()
multiprocess.MultiProcessCollector(registry)
print(json.dumps([[s.name, s.labels.get("name"), s.value] for m in registry.collect() for s in m.samples
                  if s.name in ("intentvcs_model_info", "intentvcs_model_reload_failing")]))
"""


def test_a_worker_starting_drops_the_gauges_of_workers_that_died_without_clean_up(tmp_path):
    """A worker killed while a broken bundle failed (reload_failing 1, serving "old"); its replacement
    loads "new". Merged as /metrics merges them: reload_failing 0, and "old" no longer served."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", _DEAD_WORKER], env=env, check=True, timeout=60)
    out = subprocess.run([sys.executable, "-c", _NEW_WORKER], env=env, check=True, timeout=60,
                         capture_output=True, text=True).stdout
    samples = json.loads(out.strip().splitlines()[-1])
    assert [value for name, _, value in samples if name == "intentvcs_model_reload_failing"] == [0.0], samples
    served = {label for name, label, value in samples if name == "intentvcs_model_info" and value == 1}
    assert served == {"new"}, samples


# ------------------------------------------------ a 500 of direct_routes, counted once
class _Counts:
    def __init__(self):
        self.errors: list[str] = []

    def record_error(self, reason: str) -> None:
        self.errors.append(reason)


def _call(routes, path: str, body: bytes) -> int:
    sent = []

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        sent.append(message)

    async def run():
        await routes({"type": "http", "method": "POST", "path": path, "headers": []}, receive, send)

    asyncio.run(run())
    return sent[0]["status"]


def test_every_500_direct_routes_answers_is_counted_once_as_internal_error(monkeypatch):
    """/model/parse's answer failing after the engine answered (here a malformed engine answer, which
    rasa.parse_answer cannot map) was a 500 under no reason; a failure the batch queue's caller counted
    already must not count twice."""
    import bentoml

    from intentvcs.service import app, prometheus_metrics
    from intentvcs.service.batching import BatchQueue
    from intentvcs.service.direct_routes import DirectRoutes
    from intentvcs.service.schemas import ParseRequest, PredictRequest

    class Malformed:  # answers the metrics can count but Rasa's mapping cannot read (no "entities")
        labels = ("a",)

        def predict(self, texts, top_k=None):
            return [{"text": text, "intents": [{"intent": "a", "confidence": 0.9}], "accepted": ["a"],
                     "out_of_scope": False, "normalised": None, "parts": [{}]} for text in texts]

    class Failing:
        def predict(self, texts, top_k=None):
            raise RuntimeError("engine failed")

    counts = _Counts()
    counts.record_batch = counts.record_predictions = lambda *args: None
    monkeypatch.setattr(prometheus_metrics, "get", lambda: counts)
    service = app.IntentService.inner.__new__(app.IntentService.inner)
    monkeypatch.setattr(bentoml, "get_current_service", lambda: service)
    routes = DirectRoutes(None, server="BentoML Service/test", routes={
        "/predict": (PredictRequest, lambda svc, request: svc.answer_predict(request.texts, request.top_k)),
        "/model/parse": (ParseRequest, lambda svc, request: svc.answer_parse(request.text))})

    for engine, path, body in ((Malformed(), "/model/parse", b'{"text": "play jazz"}'),
                               (Failing(), "/predict", b'{"text": "play jazz"}'),
                               (Failing(), "/model/parse", b'{"text": "play jazz"}')):
        counts.errors.clear()
        service.served = app.Served(engine, b"tiny@sha256:0")
        service._batched_predict = BatchQueue(app.predict_jobs, 32, 10.0, app._overloaded)
        assert _call(routes, path, body) == 500
        assert counts.errors == ["internal_error"], (type(engine).__name__, path, counts.errors)


# ------------------------------------------------ BentoML's endpoint label: the raw path
_ROUTES = ["/", "/predict", "/model/parse", "/audit", "/audit/job", "/audit/job/submit", "/audit/job/status",
           "/audit/job/get", "/audit/job/retry", "/audit/job/cancel", "/audit/job/progress", "/status",
           "/docs.json", "/schema.json", "/livez", "/healthz", "/readyz"]
_JUNK = ["/wp-login.php", "/predict/x", "/.env", "/audit/job/submit/../x", "/predict\n", "/nope-1795820195.27"]


def _exposition() -> str:
    lines = ["# TYPE bentoml_service_request_total counter"]
    for i, endpoint in enumerate(_ROUTES + _JUNK):
        shown = endpoint.replace("\\", "\\\\").replace("\n", "\\n")
        lines.append(f'bentoml_service_request_total{{endpoint="{shown}",http_response_code="200",'
                     f'runner_name="intentvcs",service_name="intentvcs",service_version="not available"}} {i}')
    lines += ["# TYPE bentoml_service_request_in_progress gauge",
              'bentoml_service_request_in_progress{endpoint="/wp-admin",runner_name="intentvcs",'
              'service_name="intentvcs",service_version="not available"} 0',
              "# TYPE intentvcs_out_of_scope_total counter", "intentvcs_out_of_scope_total 3"]
    return "\n".join(lines) + "\n"


def test_the_service_routes_are_kept_by_the_scrape_configs():
    """Every route of the service matches what the configs keep (a route added later must be added there)."""
    from intentvcs.service.app import API_ROUTES
    from intentvcs.service.audit_jobs import JOB_READ_ROUTES
    from intentvcs.service.identity import STATUS_ROUTE
    from intentvcs.service.prometheus_metrics import UNROUTED

    for config in PROMETHEUS_CONFIGS:
        [job] = yaml.safe_load(config.read_text())["scrape_configs"]
        kept = [rule for rule in job.get("metric_relabel_configs", []) if rule.get("source_labels") ==
                ["__name__", "endpoint"]]
        assert kept, f"{config}: no relabelling of BentoML's endpoint label"
        pattern = kept[0]["regex"]
        for route in {*API_ROUTES, *JOB_READ_ROUTES, STATUS_ROUTE, *_ROUTES, UNROUTED}:
            assert re.fullmatch(pattern, f"bentoml_service_request_total;{route}"), (config, route)
        for junk in _JUNK:
            assert not re.fullmatch(pattern, f"bentoml_service_request_total;{junk}"), (config, junk)


@pytest.mark.parametrize("config", PROMETHEUS_CONFIGS, ids=lambda path: path.parent.name)
def test_request_paths_that_are_no_route_do_not_become_series(config, tmp_path):
    """A real Prometheus scraping with each config's scrape job (its target swapped for a fixed exposition
    holding BentoML's request counter for the service's routes and for scanned paths): the scanned paths
    are dropped, the routes and every other metric kept."""
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        pytest.skip("no Prometheus (Debian package prometheus)")
    text = _exposition().encode()

    class Exporter(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        def log_message(self, *args):
            pass

    exporter = ThreadingHTTPServer(("127.0.0.1", 0), Exporter)
    threading.Thread(target=exporter.serve_forever, daemon=True).start()
    [job] = yaml.safe_load(config.read_text())["scrape_configs"]
    job = {**job, "scrape_interval": "1s", "static_configs": [{"targets": [f"127.0.0.1:{exporter.server_port}"]}]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({"scrape_configs": [job]}))
    port = free_port()
    with open(tmp_path / "prometheus.log", "w") as log:
        process = subprocess.Popen([prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
                                    f"--storage.tsdb.path={tmp_path / 'data'}",
                                    f"--web.listen-address=127.0.0.1:{port}"],
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def series() -> list[dict]:
            with contextlib.suppress(httpx.HTTPError):
                answer = httpx.get(f"http://127.0.0.1:{port}/api/v1/series", timeout=5,
                                   params={"match[]": ['{job="intentvcs",__name__!~"up|scrape_.+"}']})
                if answer.status_code == 200:
                    return answer.json()["data"]
            assert process.poll() is None, (tmp_path / "prometheus.log").read_text()
            return []

        wait_for(lambda: any(s["__name__"] == "intentvcs_out_of_scope_total" for s in series()), timeout_s=60)
        time.sleep(1.5)  # one more scrape
        found = series()
        endpoints = sorted(s["endpoint"] for s in found if s["__name__"] == "bentoml_service_request_total")
        assert endpoints == sorted(_ROUTES), endpoints
        assert not [s for s in found if s["__name__"] == "bentoml_service_request_in_progress"]
        assert not [s for s in found if any(name.startswith("__tmp") for name in s)], found
    finally:
        exporter.shutdown()
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(15)
