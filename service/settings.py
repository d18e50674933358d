"""Service settings, read once from the environment.

Every knob of the HTTP service is an ``INTENTVCS_*`` environment variable so
that the same bento runs unchanged in a container, under ``bentoml serve`` and
under ``intentvcs serve`` (which only sets these variables). Values are read
when ``intentvcs.service.app`` is imported, because BentoML needs the worker count and
the request schema (whose limits appear in the OpenAPI spec) at that moment.
A set variable of the prefix that the project does not read (``KNOWN_VARIABLES``)
is most likely a misspelling, which would be ignored without a word: the server
(``intentvcs.service.app``, however it is started, ``intentvcs serve`` included) warns of it once,
naming the closest known variable, and starts as it would without it
(``unknown_variables``).
"""

from __future__ import annotations

import difflib
import json
import os
import threading
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from intentvcs.core.segmentation import DEFAULT_SEGMENT

ENV_PREFIX = "INTENTVCS_"
# Execution providers by the names users give them: "auto" takes CUDA when
# onnxruntime offers it, else the CPU (intentvcs.service.onnx_session maps them).
PROVIDERS = ("auto", "cpu", "cuda")
# Texts per graph run of the engine: a call is cut into length-sorted chunks of
# at most this many (intentvcs.service.onnx_session). Here, in a module that
# loads no onnxruntime, so that the command line can show it as a default.
DEFAULT_MAX_BATCH = 32
# Which graph of a bundle serves (intentvcs.service.bundle.serving_graph): "auto"
# serves the int8 graph when the export recorded that it passed its accuracy gate,
# "on" serves it in any case, "off" serves the fp32 graph.
QUANTIZED_MODES = ("auto", "on", "off")
DEFAULT_QUANTIZED = "auto"
# Where `intentvcs demo` works (checkpoint/, bundle/), so the bundle the service serves by default.
DEMO_DIR = "runs/default"
# The INTENTVCS_* variables this project reads outside this module, by their names after the prefix, here so
# that one list (KNOWN_VARIABLES, at the end of this module) knows every variable of the prefix: a set
# variable it does not know is a misspelling the service would otherwise ignore without a word.
OTHER_VARIABLES = {
    "DATA": "the data root of training, `intentvcs data` and the benchmarks (intentvcs.training.loaders)",
    "WORDNET_DIR": "WordNet's files for the perturbation operators (intentvcs.core.perturb.wordnet)",
    "CMUDICT": "the CMU Pronouncing Dictionary for the perturbation operators (intentvcs.core.perturb.phonetic)",
    # Read by docker compose on the host for deploy/compose.yaml; a shell that sets them may run the CLI too.
    "BUNDLE_NAME": "the bundle of the mounted folder (deploy/compose.yaml)",
    "MODELS_DIR": "the folder mounted at /models (deploy/compose.yaml)",
    "PORT": "the host port published (deploy/compose.yaml)",
}


# Each reader takes the environment to read (``os.environ`` by default), so that
# ``intentvcs serve`` can check the settings a server will read before it starts.

# Where a container's CPU limit (docker --cpus, a Kubernetes CPU limit) is read, as the container sees it.
CGROUP_ROOT = Path("/sys/fs/cgroup")


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the platform has one (a cpuset, ``taskset``,
    a Kubernetes pod's dedicated cores), else the machine's count, and no more than its container's CPU limit
    (rounded up, as Go's runtime reads it). ``os.cpu_count()`` counts the machine's, so inside a container
    limited to 2 CPUs of a 64-core host the defaults started 64 workers."""
    try:
        cores = len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # macOS, Windows: no affinity to read
        cores = os.cpu_count() or 1
    limit = cgroup_cpu_limit(CGROUP_ROOT)
    return max(1, min(cores, limit)) if limit else cores


def cgroup_cpu_limit(root: Path) -> int | None:
    """The CPU quota of the cgroup at ``root`` in whole CPUs, rounded up (cgroup v2 ``cpu.max``, else v1
    ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``); None without one ("max", -1, or no such files)."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        try:
            quota = (root / "cpu" / "cpu.cfs_quota_us").read_text().strip()
            period = (root / "cpu" / "cpu.cfs_period_us").read_text().strip()
        except (OSError, ValueError):  # ValueError: bytes that are no text; never a reason not to start
            return None
    try:
        quota_us, period_us = int(quota), int(period)
    except ValueError:  # "max": no limit
        return None
    return -(-quota_us // period_us) if quota_us > 0 and period_us > 0 else None


def _env_bool(name: str, default: bool, environ: Mapping[str, str] = os.environ) -> bool:
    given = environ.get(ENV_PREFIX + name, "")
    raw = given.strip().lower()
    if raw == "":
        return default
    if raw not in ("1", "true", "yes", "0", "false", "no"):
        # Quoted as set, not as normalised: the user looks for the value they wrote.
        raise ValueError(f"{ENV_PREFIX}{name}={given!r} is not a boolean (1/0, true/false, yes/no)")
    return raw in ("1", "true", "yes")


def _env_int(name: str, default: int, minimum: int = 1, environ: Mapping[str, str] = os.environ,
             maximum: int | None = None) -> int:
    raw = environ.get(ENV_PREFIX + name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{ENV_PREFIX}{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise ValueError(f"{ENV_PREFIX}{name}={value} is below its minimum {minimum}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{ENV_PREFIX}{name}={value} is above its maximum {maximum}")
    return value


def _env_str(name: str, default: str, environ: Mapping[str, str] = os.environ) -> str:
    """A word or path: unset, empty or blank, the default (as every reader here takes them: a compose file's
    ``${VAR:-}`` sets an empty one); surrounding whitespace dropped (a value pasted with its space)."""
    return environ.get(ENV_PREFIX + name, "").strip() or default


def env_bundle(environ: Mapping[str, str] = os.environ) -> str:
    """The bundle folder the service serves: ``INTENTVCS_BUNDLE``, else the demo's (``Settings.bundle``); here
    so that ``intentvcs serve --bundle``'s default is the one the service itself reads."""
    return _env_str("BUNDLE", Settings.bundle, environ)


def _env_json_object(name: str, environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    raw = environ.get(ENV_PREFIX + name, "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{ENV_PREFIX}{name} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{ENV_PREFIX}{name} must be a JSON object, got {type(value).__name__}")
    return value


def _check_intent_name(name: str, value: str) -> None:
    # An intent name a client will match on: printable, no surrounding whitespace, and no longer
    # than the service's default limit on a label in a request (Limits.max_label_chars).
    if not value.strip() or value != value.strip() or len(value) > Limits.max_label_chars \
            or not value.isprintable():
        raise ValueError(f"{ENV_PREFIX}{name}={value!r} is not an intent name (1 to {Limits.max_label_chars} "
                         "printable characters, no leading or trailing whitespace)")


@dataclass(frozen=True)
class Limits:
    """Request limits; each is also published in the OpenAPI schema."""

    max_text_chars: int = 1000  # per utterance, in Unicode code points
    max_texts: int = 256  # utterances per /predict request
    max_top_k: int = 100  # top_k above the label count returns every label
    default_top_k: int = 10  # ranked intents per utterance when a request gives no top_k
    max_audit_rows: int = 2000  # rows per /audit request
    max_labels_per_row: int = 32  # labels of one audit row
    max_label_chars: int = 200  # characters of one label name
    # Request body bytes, checked before parsing (intentvcs.service.body_limit). The
    # largest valid audit (2,000 rows of 1,000 characters and 32 labels, plus
    # as many training rows) fits in about 30 MB of JSON.
    max_body_bytes: int = 32 * 1024 * 1024
    max_spans_per_row: int = 64  # entity spans of one audit row
    # The cost of one /audit (intentvcs.service.audit_control). The duplicate
    # search compares new intents pairwise (at most AuditConfig.max_new_pairs
    # pairs, the closest); uncapped, 100 new intents of 3 rows each took 17 s
    # with a tiny model on 2 cores (4,950 pairs) and 200 over a minute. Bigger
    # batches belong to `intentvcs audit`, which has no deadline.
    max_audit_new_intents: int = 100  # labels the bundle does not know, per request; beyond: 413
    audit_timeout_s: int = 45  # from parsed request to report, queueing included; beyond: 504, the audit stops
    max_audits_in_flight: int = 2  # per worker, the one computing included (they run one at a time); beyond: 429
    # Audit jobs (intentvcs.service.audit_jobs): batches past the synchronous
    # cap, one job at a time per worker on a thread of its own. A 100,000-row
    # job of short utterances is about 10 MB of JSON, within max_body_bytes.
    max_audit_job_rows: int = 100_000  # rows per /audit/job submit (and as many training rows)
    max_audit_jobs: int = 4  # per worker, submitted and unfinished; beyond: 429
    audit_job_timeout_s: int = 3600  # from the job's start to its report; beyond, it stops and fails

    def __post_init__(self) -> None:
        if self.default_top_k > self.max_top_k:
            raise ValueError(f"{ENV_PREFIX}DEFAULT_TOP_K={self.default_top_k} exceeds "
                             f"{ENV_PREFIX}MAX_TOP_K={self.max_top_k}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Limits:
        """``INTENTVCS_MAX_TEXT_CHARS``, ``INTENTVCS_MAX_TEXTS``, ... override the defaults."""
        values = {f.name: _env_int(f.name.upper(), f.default, environ=environ) for f in fields(cls)}
        if not environ.get(ENV_PREFIX + "DEFAULT_TOP_K", "").strip():
            # Lowering the maximum alone lowers the default with it.
            values["default_top_k"] = min(values["default_top_k"], values["max_top_k"])
        return cls(**values)


@dataclass(frozen=True)
class Settings:
    """Where the bundle is and how to run it."""

    bundle: str = f"{DEMO_DIR}/bundle"  # relative to the working directory: the demo's bundle
    provider: str = "auto"  # one of PROVIDERS
    quantized: str = DEFAULT_QUANTIZED  # one of QUANTIZED_MODES
    threads: int | None = None  # onnxruntime intra-op threads; None: the engine decides
    # The defaults below are chosen from benchmarks/service_defaults.py
    # (docs/RESULTS.md, "Service defaults, measured"). Workers: one per core with one ONNX
    # Runtime thread each on CPU (the most throughput, idle latency within
    # 1 ms of one worker), one on a GPU (one CUDA context). Batch sizes
    # 16, 32 and 64 measured within the noise (about 10 %) of one another; 32
    # is the engine's largest graph run on CPU (it cuts a batch of mixed lengths into several). The
    # access log is a per-request cost (about 5 %) that /metrics makes redundant.
    workers: int = 1  # BentoML worker processes, each with its own engine; from_env: onnx_session.default_workers
    max_batch_size: int = DEFAULT_MAX_BATCH  # utterances per engine call (its graph runs hold at most as many)
    max_latency_ms: int = 10_000  # past this a queued request is refused with 503
    access_log: bool = False  # one log line per request; off by default (see above)
    # BentoML's OpenTelemetry middleware costs ~0.4 ms of CPU per request even
    # when no trace is sampled (its default); turn it on when traces are exported.
    trace_requests: bool = False
    # Busy-waiting ONNX Runtime threads between graph runs (ORT's default).
    # Turning it off was measured to cost idle latency and no throughput gain.
    ort_spin: bool = True
    # The bundle's spelling normaliser (misspelt words back to training words),
    # when it has one; off serves the graph the raw texts.
    spelling: bool = True
    # Answer every request of a chained utterance (INTENTVCS_SEGMENT=0 decides each text whole).
    segment: bool = DEFAULT_SEGMENT
    # A bearer token the API routes (/predict, /model/parse, /audit) require when set
    # (intentvcs.service.auth); health probes and the OpenAPI document stay open.
    # Not in repr: Settings may be logged.
    api_token: str | None = field(default=None, repr=False)
    # Require the token on /metrics too (INTENTVCS_METRICS_TOKEN_REQUIRED=1);
    # off by default because Prometheus scrapes usually come from inside.
    metrics_token_required: bool = False
    # AuditConfig overrides for /audit (INTENTVCS_AUDIT_CONFIG, a JSON object of
    # thresholds and caps, as `intentvcs audit --config` takes them).
    audit_config: Mapping[str, Any] = field(default_factory=dict)
    # GPUs the service asks the platform for (BentoML's resources: {gpu: N}),
    # shared by its workers: BentoML gives every worker the same N GPUs, and
    # worker i runs on the ((i - 1) % N)-th of them (onnx_session.cuda_device_id),
    # so INTENTVCS_GPUS=N with INTENTVCS_WORKERS=N puts one worker on each GPU.
    # The GPU bento sets 1 (one worker by default on a GPU). Zero: no request,
    # whatever the provider.
    gpus: int = 0
    # Seconds between checks for a replaced bundle folder, which is then served
    # without a restart (intentvcs.service.reload); 0 turns the watch off.
    reload_interval_s: int = 5
    # The intent name /model/parse gives an out-of-scope utterance
    # (intentvcs.service.rasa): Rasa's FallbackClassifier's name by default, so
    # that an assistant's rules and stories for "nlu_fallback" apply unchanged.
    fallback_intent: str = "nlu_fallback"

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise ValueError(f"{ENV_PREFIX}PROVIDER={self.provider!r} is not one of {list(PROVIDERS)}")
        if self.quantized not in QUANTIZED_MODES:
            raise ValueError(f"{ENV_PREFIX}QUANTIZED={self.quantized!r} is not one of {list(QUANTIZED_MODES)}")
        if self.metrics_token_required and not self.api_token:
            raise ValueError(f"{ENV_PREFIX}METRICS_TOKEN_REQUIRED is set but {ENV_PREFIX}API_TOKEN is not")
        _check_intent_name("FALLBACK_INTENT", self.fallback_intent)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        from intentvcs.service.onnx_session import default_workers

        provider = _env_str("PROVIDER", cls.provider, environ)
        workers = _env_int("WORKERS", default_workers(provider), environ=environ)
        threads = environ.get(ENV_PREFIX + "THREADS", "").strip()
        return cls(
            bundle=env_bundle(environ),
            provider=provider,
            quantized=_env_str("QUANTIZED", cls.quantized, environ).lower(),
            # The cores shared out among the workers: no oversubscription.
            threads=_env_int("THREADS", 0, environ=environ) if threads else max(1, usable_cores() // workers),
            workers=workers,
            max_batch_size=_env_int("MAX_BATCH_SIZE", cls.max_batch_size, minimum=2, environ=environ),
            max_latency_ms=_env_int("MAX_LATENCY_MS", cls.max_latency_ms, environ=environ),
            access_log=_env_bool("ACCESS_LOG", cls.access_log, environ),
            trace_requests=_env_bool("TRACE_REQUESTS", cls.trace_requests, environ),
            ort_spin=_env_bool("ORT_SPIN", cls.ort_spin, environ),
            spelling=_env_bool("SPELLING", cls.spelling, environ),
            segment=_env_bool("SEGMENT", cls.segment, environ),
            api_token=_env_str("API_TOKEN", "", environ) or None,
            metrics_token_required=_env_bool("METRICS_TOKEN_REQUIRED", cls.metrics_token_required, environ),
            audit_config=_env_json_object("AUDIT_CONFIG", environ),
            gpus=_env_int("GPUS", cls.gpus, minimum=0, environ=environ),
            # The watcher's wait (threading) takes at most TIMEOUT_MAX seconds; beyond, its thread would die.
            reload_interval_s=_env_int("RELOAD_INTERVAL_S", cls.reload_interval_s, minimum=0, environ=environ,
                                       maximum=int(threading.TIMEOUT_MAX)),
            # Unset or empty: the default; anything else is checked as given (not stripped).
            fallback_intent=environ.get(ENV_PREFIX + "FALLBACK_INTENT") or cls.fallback_intent,
        )

    def service_config(self, api_routes: list[str], timeout_s: int = 60) -> dict:
        """Keyword arguments of ``@bentoml.service`` (BentoML's service config schema).

        ``timeout_s``: BentoML's own request timeout (504), which must outlast
        the service's own deadlines so that they, not it, end a request.
        """
        config = {
            "workers": self.workers,
            "traffic": {"timeout": timeout_s},
            "logging": {"access": {"enabled": self.access_log}},
        }
        if not self.trace_requests:
            config["tracing"] = {"excluded_urls": api_routes}
        if self.gpus:
            config["resources"] = {"gpu": self.gpus}
        return config


# Every INTENTVCS_* variable the project reads: each field of Settings and Limits from its name in capitals
# (from_env), and OTHER_VARIABLES. tests/test_settings_known_variables.py checks it against every name the
# project's files read or document.
KNOWN_VARIABLES = frozenset(ENV_PREFIX + name for name in (*(f.name.upper() for f in fields(Settings)),
                                                           *(f.name.upper() for f in fields(Limits)),
                                                           *OTHER_VARIABLES))


def unknown_variables(environ: Mapping[str, str] = os.environ) -> list[str]:
    """A warning for each variable of ``environ`` that looks like one of ours (the prefix, in any case) and is
    none of ``KNOWN_VARIABLES``, naming the closest known one (difflib) when one is close.

    A warning, not an error: such a variable is ignored, and the service starts as it would without it
    (another tool may use the prefix). Only names are told, never values (a misspelt token's)."""
    known = sorted(KNOWN_VARIABLES)
    warnings = []
    for name in sorted(environ):
        if not name.upper().startswith(ENV_PREFIX) or name in KNOWN_VARIABLES:
            continue
        # Compared after the prefix, which every candidate shares and would make every one look close.
        close = difflib.get_close_matches(name.upper()[len(ENV_PREFIX):], [k[len(ENV_PREFIX):] for k in known],
                                          n=1, cutoff=0.6)
        hint = f"did you mean {ENV_PREFIX}{close[0]}?" if close else "no variable intentvcs reads is close to it"
        warnings.append(f"{name} is set but intentvcs reads no such variable, so it is ignored; {hint}")
    return warnings
