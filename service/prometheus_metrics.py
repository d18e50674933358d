"""The service's own Prometheus metrics, exposed next to BentoML's on ``/metrics``.

BentoML runs each worker in its own process and points ``PROMETHEUS_MULTIPROC_DIR``
at a shared directory; its ``/metrics`` endpoint merges every process's files
with ``prometheus_client.multiprocess.MultiProcessCollector``. Metrics made with
``prometheus_client`` in a worker land in that directory, provided the library
is imported after the variable is set, which is why ``prometheus_client`` is
imported inside :class:`ServiceMetrics` (built on first use, in the worker)
rather than at module import. (``bentoml.metrics``, which mirrored this API, is
deprecated in BentoML 1.4 in favour of ``prometheus_client`` used this way.)

Label cardinality is bounded by construction: ``intent`` takes only the labels of
the bundles the worker has served (``bind_model``) plus ``out_of_scope``, and ``reason`` comes from the closed set
in ``intentvcs.service.schemas.REJECTION_REASONS`` plus the server-side reasons below.
BentoML's own request metrics label ``endpoint`` with the raw request path, so
every path a scanner tried was a series in every worker's files, which ``/metrics`` read and wrote on every
scrape (3,000 such paths: 11 MB and 3 s a scrape); :func:`bound_request_endpoints` labels a path that is
no route ``endpoint="other"`` (``UNROUTED``). The scrape configs in ``deploy/prometheus/`` and
``monitoring/`` keep only the service's routes.

Gauges are per worker, merged by their ``multiprocess_mode``; a worker's ``live*``
gauges are dropped when it dies. BentoML drops them on a clean exit only, so a
worker killed outright (SIGKILL, the OOM killer) left its values there for good:
each worker, as it starts, drops those of workers that are gone (``forget_dead_workers``), and their
``all`` gauges (BentoML's per-pid ``bentoml_service_last_request_timestamp_seconds``) with them.

:class:`AnswerGoneClients` closes a request whose client left before its answer,
so that BentoML's request metrics end it too (see there).
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

OUT_OF_SCOPE = "out_of_scope"
# overloaded: /predict's batch queue (503); audit_busy: a worker's audits in
# flight, or its unfinished audit jobs (429); audit_timeout: an audit past its deadline (504);
# audit_cancelled: an audit stopped because its client went away, or an audit job its client cancelled.
SERVER_ERROR_REASONS = ("internal_error", "overloaded", "audit_busy", "audit_timeout", "audit_cancelled")

# BentoML's request metrics' endpoint label for a path that is no route (bound_request_endpoints).
UNROUTED = "other"
# BentoML's own routes (its API routes are in server_context.service_routes); /metrics it does not count.
BENTOML_ROUTES = ("/", "/docs.json", "/schema.json", "/livez", "/healthz", "/readyz", "/metrics")

CONFIDENCE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0)
LENGTH_BUCKETS = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# BentoML's request durations (bentoml_service_request_duration_seconds: the dashboard's /predict p50/p95/p99,
# IntentvcsHighLatencyP99), in seconds. BentoML's default starts at 5 ms, so an idle p50 of ~2 ms read as
# 2.5 ms whatever it was; these resolve 1-10 ms to within a millisecond or so, keep the alert's 0.5 s a bound,
# and reach BentoML's request timeout (bound_request_endpoints; an operator's api_server.metrics.duration wins).
REQUEST_DURATION_BUCKETS = (0.001, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075,
                            0.1, 0.15, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, float("inf"))
PROMETHEUS_DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                              float("inf"))  # prometheus_client.Histogram.DEFAULT_BUCKETS
CLIENT_CLOSED = 499  # nginx's "client closed request", the status rejections.CLIENT_CLOSED logs
# Whether this request's failure was counted as internal_error already (by app._counted, which sees the
# failures of the batch queue): direct_routes counts every other 500 it answers, and none twice. Each
# request runs in a task of its own, so each starts False.
FAILURE_COUNTED: ContextVar[bool] = ContextVar("intentvcs_failure_counted", default=False)


class ServiceMetrics:
    """Counters and histograms of one worker process; see the module docstring."""

    def __init__(self) -> None:
        import prometheus_client as prom  # deferred: see the module docstring

        forget_dead_workers()  # before this worker's own gauges: a dead one's replacement starts here
        self.predictions = prom.Counter(
            "intentvcs_predictions_total",
            "Utterances per accepted intent (an utterance counts once per accepted intent; "
            "out-of-scope utterances count under intent=\"out_of_scope\").",
            ["intent"],
        )
        self.out_of_scope = prom.Counter(
            "intentvcs_out_of_scope_total", "Utterances judged out of scope."
        )
        self.spelling_corrected = prom.Counter(
            "intentvcs_spelling_corrected_total",
            "Utterances the spelling normaliser rewrote before the model read them.",
        )
        self.chained = prom.Counter(
            "intentvcs_chained_requests_total",
            "Utterances answered part by part: several requests, or a request and an out-of-scope part.",
        )
        self.out_of_scope_parts = prom.Counter(
            "intentvcs_out_of_scope_parts_total",
            "Out-of-scope parts of chained utterances whose other requests were answered.",
        )
        self.confidence = prom.Histogram(
            "intentvcs_confidence", "Top calibrated confidence per utterance.", buckets=CONFIDENCE_BUCKETS
        )
        self.input_length = prom.Histogram(
            "intentvcs_input_length_characters", "Utterance length in characters (Unicode code points).",
            buckets=LENGTH_BUCKETS,
        )
        self.batch_size = prom.Histogram(
            "intentvcs_batch_size", "Utterances per engine call (after batching).", buckets=BATCH_BUCKETS
        )
        self.errors = prom.Counter(
            "intentvcs_request_errors_total", "Requests refused or failed, by reason.", ["reason"]
        )
        # Info metrics are not supported in multiprocess mode; the usual
        # workaround is a gauge fixed at 1 whose labels carry the information.
        # livemax: a bundle is served while any running worker serves it (one swapped out by every worker
        # is 0); a dead worker's bundle is not (with "max" a killed worker's kept showing as served).
        self.model_info = prom.Gauge(
            "intentvcs_model_info", "The served bundle: 1, and 0 for one swapped out (intentvcs.service.reload).",
            ["name", "bundle_digest", "bundle_version", "created_at", "backbone", "provider", "quantized",
             "cuda_fallback"], multiprocess_mode="livemax",
        )
        self.reloads = prom.Counter(
            "intentvcs_model_reloads_total", "Replaced bundles this worker swapped in (ok) or could not load.",
            ["result"],
        )
        # 1 from a failed reload until a bundle loads again (intentvcs.service.reload), 0 otherwise: what
        # the alert IntentvcsModelReloadFailed holds on for as long as the broken bundle stays (the
        # counter's increase would say nothing once no new failure comes). livemax: the highest of the
        # running workers, so that one worker's failure shows and a stopped worker's value does not linger.
        self.reload_failing = prom.Gauge(
            "intentvcs_model_reload_failing",
            "1 while the bundle at the served path cannot be loaded (the previous one serving), else 0.",
            multiprocess_mode="livemax",
        )
        self.reload_failing.set(0)
        self._intents: frozenset[str] = frozenset()
        self._model: dict[str, str] | None = None

    def bind_model(self, labels: Iterable[str], info: Mapping[str, Any], error_reasons: Iterable[str]) -> None:
        """Allow the bundle's intent labels (those of bundles served before stay allowed) and publish the
        model's identity.

        Every child series starts at zero so that ``rate()`` sees the first
        increment and dashboards show an intent or reason before it first occurs.
        """
        labels = frozenset(labels)
        for intent in labels | {OUT_OF_SCOPE}:
            self.predictions.labels(intent=intent)
        # Every bundle's labels this worker has served, not the last one's: after a swap the requests that read
        # the previous engine are still answered by it, and its intents (their series made already) are counted.
        self._intents = self._intents | labels | {OUT_OF_SCOPE}
        for reason in (*error_reasons, *SERVER_ERROR_REASONS):
            self.errors.labels(reason=reason)
        for result in ("ok", "failed"):
            self.reloads.labels(result=result)
        if self._model is not None:  # a swap: the previous bundle is no longer served
            self.model_info.labels(**self._model).set(0)
        self._model = {
            "name": str(info["name"]),
            "bundle_digest": str(info["bundle_digest"]),  # the content hash: what tells two bundles apart
            "bundle_version": str(info["bundle_version"]),
            "created_at": str(info["created_at"]),
            "backbone": str(info["backbone"]),
            "provider": str(info["provider"]),
            "quantized": str(bool(info["quantized"])).lower(),
            # Empty when CUDA runs or was never asked for; else why a CUDA build serves on the CPU.
            "cuda_fallback": info.get("cuda_fallback") or "",
        }
        self.model_info.labels(**self._model).set(1)

    def record_predictions(self, texts: Sequence[str], predictions: Sequence[Mapping[str, Any]]) -> None:
        """Count one engine answer per utterance (the engine's prediction dicts)."""
        for text, prediction in zip(texts, predictions):
            self.input_length.observe(len(text))
            ranked = prediction["intents"]
            self.confidence.observe(ranked[0]["confidence"] if ranked else 0.0)
            if prediction["normalised"] is not None:
                self.spelling_corrected.inc()
            parts = prediction["parts"]
            if len(parts) > 1:
                self.chained.inc()
                self.out_of_scope_parts.inc(sum(part["out_of_scope"] for part in parts))
            if prediction["out_of_scope"]:
                self.out_of_scope.inc()
                self.predictions.labels(intent=OUT_OF_SCOPE).inc()
            for intent in prediction["accepted"]:
                if intent in self._intents:  # never mint a series the bundle does not know
                    self.predictions.labels(intent=intent).inc()

    def record_batch(self, size: int) -> None:
        """Observe the size of one engine call."""
        self.batch_size.observe(size)

    def record_error(self, reason: str) -> None:
        """Count a refused or failed request."""
        self.errors.labels(reason=reason).inc()

    def record_reload_failing(self, failing: bool) -> None:
        """Whether the bundle at the served path fails to load (intentvcs.service.reload)."""
        self.reload_failing.set(1 if failing else 0)


def forget_dead_workers(folder: str | None = None) -> None:
    """Drop the ``live*`` gauge files of the processes of ``folder`` (the multiprocess folder) that are gone.

    What ``prometheus_client.multiprocess.mark_process_dead`` does for a pid, which BentoML calls only as a
    worker exits cleanly; a worker killed outright kept its model, its reload state and its requests in
    progress in every scrape until the server restarted. Run by each worker as it starts (BentoML starts one
    in place of a dead one). Counters and histograms stay: their counts happened. Its ``all`` gauges go too:
    BentoML's ``bentoml_service_last_request_timestamp_seconds`` is one, a series per pid, and a dead
    worker's stayed for good, one more with each restart (``mark_process_dead`` drops ``live*`` files only).
    """
    folder = folder or os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir")
    if not folder:
        return
    files: dict[int, list[str]] = {}
    for path in glob.glob(os.path.join(folder, "gauge_live*_*.db")) + glob.glob(os.path.join(folder, "gauge_all_*.db")):
        found = re.search(r"_(\d+)\.db$", path)
        if found:
            files.setdefault(int(found.group(1)), []).append(path)
    for pid, paths in files.items():
        if pid != os.getpid() and not _alive(pid):
            for path in paths:
                with contextlib.suppress(FileNotFoundError):  # another starting worker was first
                    os.remove(path)


def known_routes() -> frozenset[str]:
    """The paths BentoML's request metrics keep as their ``endpoint`` label: the service's routes."""
    from bentoml._internal.context import server_context

    from intentvcs.service.app import SERVICE_ROUTES  # here: it imports this module; also where BentoML's
    # worker main did not list the routes

    return frozenset({*BENTOML_ROUTES, *server_context.service_routes, *SERVICE_ROUTES})


class _KnownEndpoints:
    """One of BentoML's request metrics whose ``endpoint`` label is ``UNROUTED`` for a path not in ``routes``."""

    def __init__(self, metric: Any, routes: frozenset[str]):
        self.metric, self.routes = metric, routes

    def labels(self, *args: Any, **labels: Any) -> Any:
        # Keyword labels, as BentoML passes them; positional ones are passed on untouched (a keyword added
        # beside them would raise inside BentoML's middleware, a 500 on every request).
        if "endpoint" in labels and labels["endpoint"] not in self.routes:
            labels["endpoint"] = UNROUTED
        return self.metric.labels(*args, **labels)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.metric, name)


def bound_request_endpoints() -> None:
    """Label BentoML's request metrics (``bentoml_service_request_*``) of a path that is no route
    ``endpoint=UNROUTED``, once per process.

    Why: BentoML labels them with the raw request path, so each path a client tried (``/wp-login.php``,
    ``/.env``: a scanner's word list) added a counter, an in-progress gauge and a histogram (18 series) to the
    worker's multiprocess files, for good. The scrape configs drop them, but only after ``/metrics`` has read,
    merged and sent them all, on every scrape: 3,000 such paths made each scrape 11 MB and 3 s (from 0.1 MB
    and 0.05 s), so a longer scan outlasts the scrape timeout and blinds every alert. BentoML has no setting
    for it: its middleware (``RunnerTrafficMetricsMiddleware``, outside every middleware of the service) makes
    these metrics in ``_setup``, on its first request, which is wrapped here so that their ``labels`` bound
    the endpoint; routing and the answer are untouched. Its request durations get ``REQUEST_DURATION_BUCKETS``
    there too, unless the operator configured BentoML's. A BentoML without that hook is left as it is. Run as
    this module is imported (by the service's module, before the worker serves): a worker answers probes
    while its service is still loading, so the first request can come before ``ServiceMetrics`` is made.
    """
    try:
        from bentoml._internal.server.http.instruments import RunnerTrafficMetricsMiddleware as traffic
    except ImportError:
        return
    setup = getattr(traffic, "_setup", None)
    if setup is None or getattr(setup, "intentvcs_bounded", False):
        return

    @functools.wraps(setup)
    def bounded_setup(self, *args: Any, **kwargs: Any) -> None:
        if len(args) < 2 and "duration_buckets" not in kwargs and _default_duration_buckets():
            kwargs["duration_buckets"] = REQUEST_DURATION_BUCKETS
        setup(self, *args, **kwargs)
        routes = known_routes()
        for name in ("metrics_request_total", "metrics_request_duration", "metrics_request_in_progress",
                     # a websocket upgrade to any path (uvicorn accepts them; every route refuses) is labelled too
                     "metrics_websocket_connections", "metrics_websocket_data_received",
                     "metrics_websocket_data_sent"):
            if hasattr(self, name):
                setattr(self, name, _KnownEndpoints(getattr(self, name), routes))

    bounded_setup.intentvcs_bounded = True
    traffic._setup = bounded_setup


def _default_duration_buckets() -> bool:
    """Whether BentoML would make its request-duration histogram with its own default buckets (no
    ``api_server.metrics.duration`` of the operator's), which cannot resolve the service's latencies."""
    try:
        from bentoml._internal.configuration.containers import BentoMLContainer
        from bentoml._internal.utils.metrics import DEFAULT_BUCKET

        # BentoML's default configuration lists prometheus_client's default buckets (not imported here: see
        # the module docstring); DEFAULT_BUCKET is its fallback.
        return tuple(BentoMLContainer.duration_buckets.get()) in (PROMETHEUS_DEFAULT_BUCKETS, tuple(DEFAULT_BUCKET))
    except Exception:  # a BentoML without these: leave its buckets as they are
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


class AnswerGoneClients:
    """ASGI middleware, the outermost of the service's own: a request whose client left before it was
    answered is closed with a 499 that reaches nobody (the server drops what is sent to a gone client).

    Why: ``direct_routes`` (a ``/predict`` or ``/model/parse`` given up on) and ``body_limit`` (a body
    abandoned mid-way) count such a request (``client_gone``) and return without an answer. BentoML's
    request metrics count a request when its answer is sent, and its timeout middleware waits for that
    answer: the request was missing from ``bentoml_service_request_total`` and stayed in
    ``bentoml_service_request_in_progress`` (the dashboard's in-flight line) for BentoML's whole request
    timeout. Closed here, it is counted once there too, as 499, as an ``/audit`` whose client left is.
    """

    def __init__(self, app: Callable[..., Awaitable[None]]):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        gone = started = False

        async def watched_receive() -> dict[str, Any]:
            nonlocal gone
            message = await receive()
            if message["type"] == "http.disconnect":
                gone = True
            return message

        async def watched_send(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, watched_receive, watched_send)
        if gone and not started:
            await send({"type": "http.response.start", "status": CLIENT_CLOSED,
                        "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})


@functools.cache
def get() -> ServiceMetrics:
    """This process's metrics, created on first use (after BentoML set up multiprocess mode)."""
    return ServiceMetrics()


bound_request_endpoints()  # at import: see there
