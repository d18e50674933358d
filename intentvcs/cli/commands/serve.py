"""``intentvcs serve``: the HTTP service (``bentoml serve intentvcs.service.app:IntentService``) on a bundle.

The service reads its settings from ``INTENTVCS_*`` variables (see
``intentvcs.service.settings``); this command only sets them from its options,
checks the bundle (manifest and file hashes, so a corrupt bundle is one error
here rather than a worker BentoML restarts forever) and hands over to
BentoML; the rest of the environment (``INTENTVCS_API_TOKEN`` included)
passes through. It binds what ``--host`` says: loopback by default, whereas
``bentoml serve`` without ``--host`` and the container bind every interface
(0.0.0.0). ``running()`` starts the same server in the background for tests
and benchmarks and always stops it.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NoReturn

from intentvcs import BLAS_THREADS
from intentvcs.cli.model_options import add_segment_argument
from intentvcs.cli.options import given
from intentvcs.core.segmentation import DEFAULT_SEGMENT
from intentvcs.service.settings import (DEFAULT_QUANTIZED, ENV_PREFIX, PROVIDERS, QUANTIZED_MODES, Settings,
                                        env_bundle)

SERVICE = "intentvcs.service.app:IntentService"
SERVE_EXTRA = "pip install 'intentvcs[serve]'"
# Loopback unless told otherwise: a model server on every interface is a decision, not a default.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 3000  # BentoML's, which its docs and the container use


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "serve", help="serve a bundle over HTTP (BentoML): /predict, /model/parse, /audit, /metrics",
        description="Run the BentoML service on a bundle. Limits and batching are set with INTENTVCS_* "
        "environment variables (e.g. INTENTVCS_MAX_TEXTS=256, INTENTVCS_MAX_TEXT_CHARS=1000), which pass "
        "through; INTENTVCS_API_TOKEN makes /predict, /model/parse, /audit, /audit/job/* and /status require "
        "'Authorization: Bearer <token>'. "
        f"This command binds --host (default {DEFAULT_HOST}); `bentoml serve` and the container bind 0.0.0.0, "
        "every interface, unless told otherwise.",
    )
    parser.add_argument("--bundle", default=env_bundle(), type=given,
                        help=f"bundle directory (default: ${ENV_PREFIX}BUNDLE or {Settings.bundle})")
    parser.add_argument("--host", default=DEFAULT_HOST, help="address to bind (default loopback; 0.0.0.0 for all, "
                        "as `bentoml serve` and the container do by default: set INTENTVCS_API_TOKEN then)")
    add_port_argument(parser)
    # Left out, these two pass the environment's INTENTVCS_* through, as --provider and --quantized do.
    parser.add_argument("--workers", type=int, help="worker processes, each with its own engine (sets "
                        f"{ENV_PREFIX}WORKERS; default: ${ENV_PREFIX}WORKERS or one per core on CPU, one on a GPU)")
    parser.add_argument("--provider", choices=PROVIDERS, help=f"execution provider (sets {ENV_PREFIX}PROVIDER; "
                        f"default: ${ENV_PREFIX}PROVIDER or {Settings.provider})")
    parser.add_argument("--threads", type=int, help="ONNX Runtime intra-op threads per worker (sets "
                        f"{ENV_PREFIX}THREADS; default: ${ENV_PREFIX}THREADS or cores / workers)")
    parser.add_argument("--quantized", choices=QUANTIZED_MODES,
                        help="the graph that serves (sets INTENTVCS_QUANTIZED): auto, the int8 graph when its export "
                             f"passed the accuracy gate; on; off (default: $INTENTVCS_QUANTIZED or {DEFAULT_QUANTIZED})")
    parser.add_argument("--no-spelling", dest="spelling", action="store_false",
                        help="serve the graph the raw texts, without the bundle's spelling normaliser "
                        "(sets INTENTVCS_SPELLING=0)")
    add_segment_argument(parser, " (sets INTENTVCS_SEGMENT=0)")
    parser.set_defaults(func=run)


def add_port_argument(parser) -> None:
    """``--port`` (``serve``, and ``demo``'s last step)."""
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="TCP port to listen on (default: %(default)s)")


def server_home(port: int) -> Path:
    """The BentoML home of the server on ``port``: under ``$BENTOML_HOME`` (default ``~/bentoml``).

    BentoML keeps its workers' Prometheus files in ``<home>/prometheus_multiproc_dir``
    and empties that folder when a server starts, so two servers sharing a home
    (a blue/green upgrade on one host, or tests) would wipe each other's metrics
    and ``/metrics`` would report the other server's counts. No two servers share
    a port, and a restart on the same port reuses (and BentoML empties) its folder.
    """
    base = Path(os.environ.get("BENTOML_HOME") or Path.home() / "bentoml").expanduser()
    return base / "intentvcs-serve" / f"port-{port}"


def service_env(bundle: str | os.PathLike, port: int, workers: int | None = None, provider: str | None = None,
                threads: int | None = None, extra: Mapping[str, str] | None = None,
                home: str | os.PathLike | None = None) -> dict[str, str]:
    """The environment the service on ``port`` reads: the current one, the ``INTENTVCS_*`` settings
    and its own ``BENTOML_HOME``: ``home``, or :func:`server_home` of the port.

    ``workers`` None leaves the count to the service (``intentvcs.service.onnx_session.default_workers``);
    ``provider`` None leaves ``INTENTVCS_PROVIDER`` as the environment has it.
    Raises ``BundleError`` (a ``ValueError`` naming the file) when the bundle
    does not open: its workers would fail to load it and BentoML restart them
    forever. Opening checks the manifest, every file's size and the sha256 of
    those the workers read (the graph that serves, not the other one), not
    the graph's content (ONNX Runtime parses it in the worker).
    """
    from intentvcs.core.manifest import MANIFEST_FILE
    from intentvcs.service.bundle import open_bundle
    from intentvcs.service.onnx_session import uses_cuda

    bundle = Path(bundle).resolve()
    if not bundle.exists():
        raise FileNotFoundError(f"{bundle}: no such folder (--bundle: the folder `intentvcs export` wrote)")
    if not (bundle / MANIFEST_FILE).is_file():
        raise FileNotFoundError(f"{bundle} is not a bundle (no {MANIFEST_FILE}); run `intentvcs export` first")
    # The options' own names: the variables they set would name a setting the user never gave.
    for option, value in (("--workers", workers), ("--threads", threads)):
        if value is not None and value < 1:
            raise ValueError(f"{option} must be >= 1, got {value}")
    env = dict(os.environ)
    env.setdefault("BENTOML_DO_NOT_TRACK", "True")  # no usage reports from a model server
    # BentoML may import numpy before our package sets the thread policy: see intentvcs.BLAS_THREADS.
    for name, value in BLAS_THREADS.items():
        env.setdefault(name, value)
    env.update({f"{ENV_PREFIX}BUNDLE": str(bundle), "BENTOML_HOME": str(home or server_home(port))})
    if provider is not None:
        env[f"{ENV_PREFIX}PROVIDER"] = provider
    if workers is not None:
        env[f"{ENV_PREFIX}WORKERS"] = str(workers)
    if threads is not None:
        env[f"{ENV_PREFIX}THREADS"] = str(threads)
    env.update(extra or {})
    settings = check_settings(env)
    # The graph the workers will load: on CUDA, ``auto`` serves the fp32 graph (bundle.serving_graph).
    open_bundle(bundle, quantized=settings.quantized, gpu=uses_cuda(settings.provider))
    return env


def check_settings(env: Mapping[str, str]) -> Settings:
    """Read the service's settings from ``env`` as each worker will, so that a bad
    ``INTENTVCS_*`` value is one error here, not a worker BentoML restarts forever (and, in the demo,
    before the minutes of training its last step serves)."""
    from intentvcs.service.audit import AuditConfig
    from intentvcs.service.onnx_session import check_provider
    from intentvcs.service.settings import Limits

    settings = Settings.from_env(env)
    check_provider(settings.provider)  # "cuda" without a CUDA onnxruntime
    Limits.from_env(env)
    try:
        AuditConfig.from_dict(settings.audit_config)
    except ValueError as exc:
        raise ValueError(f"{ENV_PREFIX}AUDIT_CONFIG: {exc}") from None
    return settings


def server_command(port: int, host: str = DEFAULT_HOST) -> list[str]:
    """``bentoml serve`` for this project's service, run by the current interpreter."""
    return [sys.executable, "-m", "bentoml", "serve", SERVICE, "--host", host, "--port", str(port)]


def run(args) -> NoReturn:
    serve_bundle(args.bundle, args.port, args.host, args.workers, args.provider, args.threads, args.spelling,
                 args.quantized, args.segment)


def serve_bundle(bundle: str | os.PathLike, port: int = DEFAULT_PORT, host: str = DEFAULT_HOST,
                 workers: int | None = None, provider: str | None = None, threads: int | None = None,
                 spelling: bool = True, quantized: str | None = None, segment: bool = DEFAULT_SEGMENT) -> NoReturn:
    """Replace this process with ``bentoml serve`` on ``bundle`` (``intentvcs serve``, and the demo's last step).

    ``provider`` and ``quantized`` None leave ``INTENTVCS_PROVIDER`` and ``INTENTVCS_QUANTIZED`` as the
    environment has them."""
    check_installed()
    extra = {} if spelling else {f"{ENV_PREFIX}SPELLING": "0"}
    if not segment:
        extra[f"{ENV_PREFIX}SEGMENT"] = "0"
    if quantized is not None:
        extra[f"{ENV_PREFIX}QUANTIZED"] = quantized
    env = service_env(bundle, port, workers, provider, threads, extra=extra)
    check_port(host, port)  # else BentoML prints "serving" and then a page of circus traceback
    # A misspelt INTENTVCS_* variable is named by the server as it starts (service/app.py), once, however it
    # is started: not here as well, or `intentvcs serve` would say it twice.
    # The count the service will run: --workers, else INTENTVCS_WORKERS, else its default.
    count = Settings.from_env(env).workers
    print(f"serving {env[f'{ENV_PREFIX}BUNDLE']} on http://{host}:{port} "
          f"({count} worker{'s' if count != 1 else ''}); docs at /, OpenAPI at /docs.json", file=sys.stderr)
    # exec: signals (Ctrl-C, SIGTERM from an orchestrator) reach BentoML directly.
    command = server_command(port, host)
    os.execve(command[0], command, env)


def check_installed() -> None:
    """``ImportError`` naming the extra to install when this interpreter has no BentoML (the serve extra), which
    ``serve_bundle`` execs: exit 2 here, where the replaced process said "No module named bentoml" and exited 1,
    the code of a gate that said no. Located, not imported: the server imports it, seconds later."""
    if importlib.util.find_spec("bentoml") is None:
        raise ImportError(f"serving needs BentoML, which is not installed: {SERVE_EXTRA}")


class PortUnavailable(OSError):
    """``--host``/``--port`` cannot be listened on (in use, privileged, not an address of this machine);
    an ``OSError``, so the command line reports it in one line with exit 2."""


def check_port(host: str, port: int) -> None:
    """Bind ``host``:``port`` for a moment as the server would (``SO_REUSEADDR``, as BentoML's sockets do);
    ``PortUnavailable`` naming both, and what to do, when it cannot be.

    A check, not a reservation: something may still take the port before the server binds it."""
    if not 0 <= port <= 65535:  # getaddrinfo would take 70000 as 4464
        raise PortUnavailable(f"--port {port} is not a TCP port (0-65535)")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise PortUnavailable(f"cannot serve on {host}:{port}: the port is already in use; choose another "
                                  "--port, or stop what holds it") from None
        reason = exc.strerror or str(exc)
        raise PortUnavailable(f"cannot serve on {host}:{port}: {reason}; choose another --host or --port") from None


def free_port(host: str = DEFAULT_HOST) -> int:
    """A TCP port that was free a moment ago on ``host``."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running(bundle: str | os.PathLike, port: int | None = None, workers: int | None = 1,
            extra_env: Mapping[str, str] | None = None, timeout_s: float = 120.0,
            threads: int | None = None, provider: str = "cpu",
            log_path: str | os.PathLike | None = None) -> Iterator[str]:
    """Serve ``bundle`` on loopback in the background; yield its base URL once ``/readyz`` is 200.

    The server runs in its own process group, so leaving the block (normally,
    by an exception or by Ctrl-C) stops BentoML and every worker it started.
    Raises ``RuntimeError`` with the server's log tail if it exits or does not
    become ready within ``timeout_s``. The server's output goes to
    ``log_path`` when given (for a caller to read), else to a temporary file.
    """
    port = port or free_port()
    url = f"http://{DEFAULT_HOST}:{port}"
    log_file = open(log_path, "w+") if log_path is not None else tempfile.TemporaryFile("w+")
    # A throw-away BentoML home: background servers (tests, benchmarks) on random
    # ports would otherwise leave a folder each under ~/bentoml.
    with tempfile.TemporaryDirectory(prefix="intentvcs-bentoml-") as home, log_file as log:
        env = service_env(bundle, port, workers, provider, threads, extra_env, home=home)
        process = subprocess.Popen(server_command(port), env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            _wait_ready(url, process, log, timeout_s)
            yield url
        finally:
            _stop_group(process)


def _wait_ready(url: str, process: subprocess.Popen, log, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the service exited with code {process.returncode}:\n{_tail(log)}")
        # Refused, reset, or 503 while loading: all OSErrors (HTTPError included).
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/readyz", timeout=2) as response:
            if response.status == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"the service was not ready after {timeout_s:.0f} s:\n{_tail(log)}")


def _tail(log, chars: int = 4000) -> str:
    log.flush()
    log.seek(0)
    return log.read()[-chars:]


def _stop_group(process: subprocess.Popen, grace_s: float = 15.0) -> None:
    # SIGTERM lets BentoML shut its workers down cleanly; SIGKILL then removes
    # whatever is left of the group (a stuck arbiter, an orphaned worker).
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
