"""One ONNX Runtime session over an intent graph, fed length-bucketed chunks.

``OnnxSession`` turns texts into the graph's raw ``GraphOutputs``. The
engine wraps it with the bundle checks and the decision layer; the export's
parity and int8 checks run it directly on the graph being written, so what
is verified is the serving code path itself (tokenizer.json, padding,
bucketing, session settings), not a reimplementation of it.

Execution settings and why:
- providers: ``"auto"`` takes CUDA when onnxruntime offers it, else CPU;
  ``"cuda"`` refuses to start on CPU (a silent fallback would hide a broken
  GPU install behind a 10-50x slower service).
- intra-op threads default to every core; the service passes each of its
  worker processes its share (``Settings.from_env``), so that they do not
  oversubscribe the cores; inter-op 1 and sequential execution because an encoder graph is one chain of
  large ops, where parallelism belongs inside each op.
- ``ORT_ENABLE_ALL`` graph optimisation (attention / layer-norm / GELU fusion).
- on CPU, a call is cut into length-sorted chunks where padding would cost
  more than another run (``CPU_RUN_COST_TOKENS``; measured on the SNIPS test
  split in calls of 32 with a one-off interleaved script, 3 rounds: fp32 275 ->
  392 utt/s, int8 413 -> 616 utt/s against fixed chunks of 32, a run's cost of
  8 tokens best among 4, 8, 16 and 32; perf_bench's batch-32 figures before and
  after, in two runs: fp32 270 -> 383, int8 408 -> 548); on CUDA, full chunks.
- on CUDA, IO binding with outputs allocated on the device and copied back
  once per chunk, instead of ORT's per-run host staging; full fp32 matmuls
  (``CUDA_OPTIONS``: TF32 off, for answers equal to the CPU's); the runs of a
  call on a worker thread, overlapping the host's padding and entity decoding
  (``OnnxSession._runs``); the CUDA and cuDNN libraries of the nvidia-* pip
  packages loaded by the session itself (``_load_cuda_libraries``), since the
  service imports no torch.
- which GPU: BentoML gives every worker of a service with ``resources: {gpu: N}``
  (``INTENTVCS_GPUS=N``) the same ``CUDA_VISIBLE_DEVICES``, the N GPUs it set aside
  for the service, and ONNX Runtime's CUDA provider takes the first visible one
  by default; so with several visible GPUs, BentoML worker i (counted from 1)
  takes visible GPU ``(i - 1) % N`` (``cuda_device_id``): N workers on N GPUs, one
  each. One visible GPU, a process that is no BentoML worker (the CLI, a Ray
  actor, which Ray gives a GPU of its own) and the CPU are left as they were.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import os
import sys
from typing import Iterator, Sequence

import numpy as np
import onnxruntime as ort

from intentvcs.core.boundaries import request_starts
from intentvcs.core.entities import decode_batch, words
from intentvcs.core.manifest import BundleError
from intentvcs.core.outputs import BOUNDARY_OUTPUT, GRAPH_OUTPUTS, TAG_OUTPUT, GraphOutputs, tuple_array
from intentvcs.service.settings import DEFAULT_MAX_BATCH, PROVIDERS, usable_cores
from intentvcs.core.length_buckets import length_buckets
from intentvcs.service.tokenization import SUPPORTED_INPUTS, BundleTokenizer, pad_chunk

log = logging.getLogger(__name__)

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
# TF32 matmuls (the CUDA provider's default) moved logits by up to 2.6e-3 from the
# CPU's on the SNIPS test split, 25x the export's parity tolerance, where answers
# can cross a calibrated threshold; with full fp32 the GPU answers as the CPU
# does, and this encoder's GPU time is dominated by host work anyway
# (docs/RESULTS.md, "Performance", GPU).
CUDA_OPTIONS = {"use_tf32": "0"}
# What one more graph run costs on CPU, in tokens of padded work
# (``intentvcs.core.length_buckets`` cuts a call where padding costs more).
CPU_RUN_COST_TOKENS = 8.0
# ONNX Runtime load-time fusions left out on CPU: its SkipLayerNormalization kernel runs 4-5x slower
# there than the Add + LayerNormalization it replaces (intentvcs.export.fusion). On CUDA they all run.
CPU_DISABLED_FUSIONS = ["SkipLayerNormFusion"]


class EngineError(ValueError):
    """The engine cannot run as configured (e.g. CUDA demanded but unavailable): a bad setting, not a bug."""


def default_threads() -> int:
    """Intra-op threads of an engine that is its process's only one (the CLI, a benchmark): every core.

    The service shares the cores out among its workers itself (``Settings.from_env``) and passes
    each engine its share.
    """
    return usable_cores()


def default_workers(provider: str = "auto") -> int:
    """Worker processes when none are set: one per core on CPU, one on a GPU.

    On CPU the per-request Python work (HTTP, JSON, tokenising, metrics) of
    one worker runs on one core at a time; one worker per core, each with one
    ONNX Runtime thread, spreads it (measured: docs/RESULTS.md "Service defaults, measured").
    On a GPU every worker would hold its own CUDA context and model copy.
    """
    return 1 if uses_cuda(provider) else usable_cores()


def uses_cuda(provider: str) -> bool:
    """Whether a session for ``provider`` (a name of ``PROVIDERS``) will ask ONNX Runtime for CUDA."""
    return provider != "cpu" and CUDA in ort.get_available_providers()


def check_provider(provider: str) -> None:
    """Refuse a name not in ``PROVIDERS`` (``ValueError``) and ``"cuda"`` where this onnxruntime offers no CUDA
    provider (``EngineError``); ``intentvcs serve`` calls it before its workers would fail in a loop."""
    if provider not in PROVIDERS:
        raise ValueError(f"provider must be one of {list(PROVIDERS)}, got {provider!r}")
    available = ort.get_available_providers()
    if provider == "cuda" and CUDA not in available:
        raise EngineError(f"provider 'cuda' requested but onnxruntime {ort.__version__} offers only {available} "
                          "(install onnxruntime-gpu with a matching CUDA/cuDNN)")


def _providers(provider: str, device_id: int | None = None) -> list[str | tuple[str, dict[str, str]]]:
    """ONNX Runtime provider list for a name of ``PROVIDERS`` (CUDA with its options, on ``device_id``
    when given), CPU always last."""
    check_provider(provider)
    if not uses_cuda(provider):
        return [CPU]
    _load_cuda_libraries()
    options = CUDA_OPTIONS if device_id is None else {**CUDA_OPTIONS, "device_id": str(device_id)}
    return [(CUDA, options), CPU]


def visible_gpu_count() -> int:
    """The GPUs CUDA lets this process see: those ``CUDA_VISIBLE_DEVICES`` lists (up to its first
    invalid entry, as CUDA reads it), else every GPU of the machine (NVML; 0 where it cannot tell)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        count = 0
        for entry in visible.split(","):
            entry = entry.strip()
            if not entry or entry.startswith("-"):
                break
            count += 1
        return count
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML library, no driver: nothing to share out
        return 0


def bentoml_worker_index() -> int | None:
    """This process's BentoML worker index (1, 2, ...), or None outside a BentoML worker."""
    if "bentoml" not in sys.modules:  # never import BentoML into the CLI or a Ray actor for this
        return None
    try:
        from bentoml import server_context
    except ImportError:
        return None
    return server_context.worker_index


def cuda_device_id() -> int | None:
    """The visible GPU this BentoML worker runs on: ``(worker_index - 1) % visible_gpu_count()`` when
    several are visible; None (ONNX Runtime's default, the first) otherwise. See the module docstring."""
    index = bentoml_worker_index()
    if index is None:
        return None
    count = visible_gpu_count()
    return (index - 1) % count if count > 1 else None


@functools.cache
def _load_cuda_libraries() -> None:
    """Load the CUDA and cuDNN libraries ONNX Runtime's CUDA provider needs, once per process.

    The serving process imports no torch, which otherwise loads them: without
    this, onnxruntime-gpu finds them only on the system's library path, not in
    the nvidia-* pip packages its ``cuda`` and ``cudnn`` extras install.
    ``preload_dlls`` looks in those packages, then on the library path; a
    library it cannot find is left to the provider's own load, whose failure
    the caller reports (``cuda_fallback``).
    """
    preload = getattr(ort, "preload_dlls", None)  # onnxruntime >= 1.21
    if preload is not None:
        try:
            preload()
        except OSError as exc:
            log.warning("onnxruntime.preload_dlls: %s", exc)


def _session_options(threads: int, spin: bool = True) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    if not spin:
        # Idle intra-op threads sleep instead of busy-waiting for the next run:
        # in the service they would otherwise take CPU from the HTTP event loop
        # and the tokenizer between batches.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return options


class OnnxSession:
    """Run ``model_path`` on texts tokenised by ``tokenizer``.

    ``provider``   ``"auto"``, ``"cpu"`` or ``"cuda"`` (see module docstring).
    ``threads``    intra-op threads; default ``default_threads()``.
    ``max_batch``  texts per graph run.
    ``spin``       whether idle intra-op threads busy-wait (ORT's default).
    ``tags``       the entity head's tag vocabulary, for a graph with ``tag_logits``
                   (whose last axis must have that size); its answers then carry entities.
    A graph with ``boundary_logits`` (a model trained with chains) also gives each
    text's request starts (``intentvcs.core.boundaries``).
    After construction ``provider`` is the active ONNX Runtime provider,
    ``output_widths`` maps each intent output name to its static second axis and
    ``boundaries`` says whether the graph scores request boundaries.
    Raises ``BundleError`` (naming ``model_path``) when the graph cannot be
    loaded or does not have the intent-graph signature, ``EngineError`` when
    the provider cannot be used.
    """

    def __init__(self, model_path: str | os.PathLike, tokenizer: BundleTokenizer, provider: str = "auto",
                 threads: int | None = None, max_batch: int = DEFAULT_MAX_BATCH, spin: bool = True,
                 tags: Sequence[str] = ()):
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        threads = default_threads() if threads is None else threads
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        # Which GPU, asked only where CUDA will be (so never of NVML on a CPU build).
        device_id = cuda_device_id() if uses_cuda(provider) else None
        self.device_id = device_id or 0  # the GPU its IO binding allocates outputs on
        providers = _providers(provider, device_id)
        try:
            self._session = ort.InferenceSession(str(model_path), _session_options(threads, spin),
                                                 providers=providers,
                                                 disabled_optimizers=CPU_DISABLED_FUSIONS if providers == [CPU] else [])
        except Exception as exc:  # ORT raises its own pybind exception types
            raise BundleError(model_path, f"ONNX Runtime cannot load the graph: {exc}") from None
        self.provider = self._session.get_providers()[0]
        # Why a CUDA build runs on the CPU, or None: reported in Engine.info (so in
        # /status and intentvcs_model_info), since a silent fallback would hide a
        # broken GPU install behind a 10-50x slower service.
        self.cuda_fallback: str | None = None
        if providers[0] != CPU and self.provider != CUDA:
            # ORT falls back to CPU when the CUDA libraries fail to load (onnxruntime-gpu
            # installed without a GPU, or without matching CUDA/cuDNN libraries).
            self.cuda_fallback = (f"onnxruntime {ort.__version__} offers {CUDA} but could not start it "
                                  "(its log above has the CUDA error)")
            if provider == "cuda":
                raise EngineError(f"provider 'cuda' requested but ONNX Runtime started {self.provider}: "
                                  f"{self.cuda_fallback}")
            log.error("%s; SERVING ON %s. Fix the CUDA install, or install the cpu extra in place of gpu "
                      "to run on CPU on purpose.", self.cuda_fallback, self.provider)
        self.input_names = [arg.name for arg in self._session.get_inputs()]
        unknown = sorted(set(self.input_names) - set(SUPPORTED_INPUTS))
        if unknown:
            raise BundleError(model_path, f"graph inputs {unknown} are not supported (known: {list(SUPPORTED_INPUTS)})")
        self.boundaries = BOUNDARY_OUTPUT in {arg.name for arg in self._session.get_outputs()}
        self.output_widths = _output_widths(model_path, self._session, list(tags), self.boundaries)
        self.tags = list(tags)
        self._outputs = (list(GRAPH_OUTPUTS) + ([TAG_OUTPUT] if self.tags else [])
                         + ([BOUNDARY_OUTPUT] if self.boundaries else []))
        self.tokenizer = tokenizer
        self.threads = threads
        self.max_batch = max_batch
        # On a GPU a run's fixed cost (launches, copies) outweighs padding: full chunks.
        self.run_cost_tokens = None if self.provider == CUDA else CPU_RUN_COST_TOKENS
        # One thread feeds the GPU (``_runs``); the engine lives as long as its process.
        self._gpu_worker = (concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="intentvcs-gpu")
                            if self.provider == CUDA else None)
        log.info("onnxruntime: %s on %s%s, %d intra-op thread(s), max batch %d",
                 os.path.basename(model_path), self.provider,
                 f" (device {self.device_id})" if self.provider == CUDA else "", threads, max_batch)

    def infer(self, texts: Sequence[str]) -> GraphOutputs:
        """Raw outputs (float32), rows in input order, with each text's entities when the graph tags them
        and its request starts when it scores boundaries."""
        arrays = [np.empty((len(texts), self.output_widths[name]), dtype=np.float32) for name in GRAPH_OUTPUTS]
        found: list[tuple] = [()] * len(texts)
        starts: list[tuple] = [()] * len(texts)
        if texts:
            encodings = self.tokenizer.encode(texts)
            chunks = length_buckets([len(e.ids) for e in encodings], self.max_batch, self.run_cost_tokens)
            feeds = ((rows, pad_chunk([encodings[i] for i in rows], self.input_names, self.tokenizer.pad_id))
                     for rows in chunks)
            for rows, results in self._runs(feeds):
                named = dict(zip(self._outputs, results))
                for array, name in zip(arrays, GRAPH_OUTPUTS):
                    array[rows] = named[name]
                if self.tags or self.boundaries:
                    chunk_words = [words(encodings[i].word_ids, encodings[i].offsets) for i in rows]
                if self.tags:
                    for i, entities in zip(rows, decode_batch(named[TAG_OUTPUT], chunk_words, self.tags)):
                        found[i] = entities
                if self.boundaries:
                    for i, begins in zip(rows, request_starts(named[BOUNDARY_OUTPUT], chunk_words)):
                        starts[i] = begins
        return GraphOutputs(*arrays, tuple_array(found) if self.tags else None,
                            tuple_array(starts) if self.boundaries else None)

    def _runs(self, feeds: Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]
              ) -> Iterator[tuple[np.ndarray, list[np.ndarray]]]:
        """Each chunk's rows and graph outputs, in order.

        On CUDA every run is handed to one worker thread as soon as its feed
        is padded (ONNX Runtime releases the GIL while the GPU works), so the
        host pads the next chunks and decodes the finished ones' entities
        while the GPU runs: host and GPU time overlap instead of adding up.
        On CPU the runs already use every core: one after another.
        """
        if self._gpu_worker is None:
            for rows, feed in feeds:
                yield rows, self._run(feed)
            return
        pending = [(rows, self._gpu_worker.submit(self._run, feed)) for rows, feed in feeds]
        for rows, future in pending:
            yield rows, future.result()

    def _run(self, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        if self.provider != CUDA:
            return self._session.run(self._outputs, feed)
        binding = self._session.io_binding()
        for name, array in feed.items():
            binding.bind_cpu_input(name, array)
        for name in self._outputs:
            binding.bind_output(name, "cuda", self.device_id)  # on the session's GPU
        self._session.run_with_iobinding(binding)
        return binding.copy_outputs_to_cpu()


def _output_widths(model_path, session: ort.InferenceSession, tags: list[str], boundaries: bool) -> dict[str, int]:
    """The static width of each intent output; raises ``BundleError`` unless the graph's outputs are the
    intent graph's, with ``tag_logits`` of ``len(tags)`` tags exactly when ``tags`` are given (and
    ``boundary_logits`` when ``boundaries``)."""
    shapes = {arg.name: arg.shape for arg in session.get_outputs()}
    expected = list(GRAPH_OUTPUTS) + ([TAG_OUTPUT] if tags else []) + ([BOUNDARY_OUTPUT] if boundaries else [])
    if sorted(shapes) != sorted(expected):
        raise BundleError(model_path, f"graph outputs are {sorted(shapes)}, expected {expected}")
    for name in GRAPH_OUTPUTS:
        shape = shapes[name]
        if len(shape) != 2 or not isinstance(shape[1], int):
            raise BundleError(model_path, f"output {name!r} has shape {shape}; expected [batch, static size]")
    if tags and (len(shapes[TAG_OUTPUT]) != 3 or shapes[TAG_OUTPUT][2] != len(tags)):
        raise BundleError(model_path, f"output {TAG_OUTPUT!r} has shape {shapes[TAG_OUTPUT]}; expected "
                                      f"[batch, sequence, {len(tags)}] for the manifest's {len(tags)} entity tags")
    if boundaries and len(shapes[BOUNDARY_OUTPUT]) != 2:
        raise BundleError(model_path, f"output {BOUNDARY_OUTPUT!r} has shape {shapes[BOUNDARY_OUTPUT]}; expected "
                                      "[batch, sequence]")
    return {name: shapes[name][1] for name in GRAPH_OUTPUTS}
