"""Several GPUs for several workers: each BentoML worker runs its ONNX Runtime session on a GPU of its own.

BentoML gives every worker of a service with ``resources: {gpu: N}`` (``INTENTVCS_GPUS=N``)
the same ``CUDA_VISIBLE_DEVICES``, and ONNX Runtime's CUDA provider takes the first
visible GPU unless told a ``device_id``; so worker i takes visible GPU ``(i - 1) % N``
(``intentvcs.service.onnx_session.cuda_device_id``). No GPU is needed: BentoML's
worker index and the visible devices are set here, and ONNX Runtime's session is
replaced by one that records the providers it is given (and runs on the CPU).
"""

from __future__ import annotations

import bentoml
import pytest

from intentvcs.service import onnx_session
from intentvcs.service.onnx_session import CPU, CUDA, CUDA_OPTIONS
from tests.helpers.bundle import make_tiny_bundle


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return make_tiny_bundle(tmp_path_factory.mktemp("gpus") / "model")


@pytest.fixture
def worker(monkeypatch):
    """Set this process's BentoML worker index (as BentoML does in a worker before it loads the service)."""
    def set_index(index: int | None) -> None:
        monkeypatch.setattr(bentoml.server_context, "worker_index", index)
    return set_index


@pytest.mark.parametrize("visible, count", [("0,1", 2), ("3", 1), ("", 0), ("-1", 0), ("2,3,-1,4", 2),
                                            ("GPU-8f1c,GPU-77a0", 2), (" 0 , 1 ", 2)])
def test_visible_gpus_are_counted_as_cuda_reads_the_variable(visible, count, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert onnx_session.visible_gpu_count() == count


def test_each_worker_takes_the_next_visible_gpu(worker, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")  # BentoML's allocation: the same for every worker
    chosen = []
    for index in range(1, 6):
        worker(index)
        chosen.append(onnx_session.cuda_device_id())
    assert chosen == [0, 1, 0, 1, 0]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    worker(3)
    assert onnx_session.cuda_device_id() == 2
    # One visible GPU, or no BentoML worker (the CLI, a Ray actor): ONNX Runtime's default.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert onnx_session.cuda_device_id() is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    worker(None)
    assert onnx_session.cuda_device_id() is None


@pytest.fixture
def sessions(monkeypatch):
    """CUDA offered (as onnxruntime-gpu reports it); each session's providers recorded, then run on the CPU."""
    monkeypatch.setattr(onnx_session.ort, "get_available_providers", lambda: [CUDA, CPU])
    monkeypatch.setattr(onnx_session, "_load_cuda_libraries", lambda: None)
    recorded = []
    cpu_only = onnx_session.ort.InferenceSession

    def session(path, options, providers, **kwargs):
        recorded.append(providers)
        return cpu_only(path, options, providers=[CPU], **kwargs)

    monkeypatch.setattr(onnx_session.ort, "InferenceSession", session)
    return recorded


def device_of(bundle, provider: str = "auto") -> int:
    """The GPU the bundle's session says it runs on (its providers are in ``sessions``). The session itself,
    not an ``Engine``'s: the recorded session runs on the CPU, which an engine takes for a CUDA that did not
    start and opens the bundle again for the CPU (``Engine``, ``cuda_fallback``)."""
    from intentvcs.service.bundle import open_bundle

    opened = open_bundle(bundle, quantized="off")
    return onnx_session.OnnxSession(opened.model_path, opened.tokenizer, provider).device_id


def test_the_worker_s_gpu_is_the_cuda_provider_s_device_id(bundle, worker, sessions, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    worker(2)
    assert device_of(bundle) == 1
    assert sessions[-1] == [(CUDA, {**CUDA_OPTIONS, "device_id": "1"}), CPU]
    worker(3)
    assert device_of(bundle) == 0
    assert sessions[-1] == [(CUDA, {**CUDA_OPTIONS, "device_id": "0"}), CPU]


def test_one_gpu_and_the_cpu_are_left_as_they_were(bundle, worker, sessions, monkeypatch):
    worker(2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert device_of(bundle) == 0
    assert sessions[-1] == [(CUDA, CUDA_OPTIONS), CPU]  # no device_id: ONNX Runtime's default
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert device_of(bundle, provider="cpu") == 0
    assert sessions[-1] == [CPU]
    worker(None)  # not a BentoML worker
    assert device_of(bundle) == 0
    assert sessions[-1] == [(CUDA, CUDA_OPTIONS), CPU]


def test_outputs_are_bound_on_the_session_s_gpu():
    """IO binding allocates the outputs on the GPU the session runs on, not on the first one."""
    calls = []

    class Binding:
        def bind_cpu_input(self, name, array):
            calls.append(("input", name))

        def bind_output(self, name, device_type="cpu", device_id=0):
            calls.append(("output", name, device_type, device_id))

        def copy_outputs_to_cpu(self):
            return []

    class Session:
        def io_binding(self):
            return Binding()

        def run_with_iobinding(self, binding):
            calls.append(("run",))

    session = object.__new__(onnx_session.OnnxSession)
    session.provider, session.device_id, session._outputs, session._session = CUDA, 1, ["logits"], Session()
    session._run({"input_ids": None})
    assert ("output", "logits", "cuda", 1) in calls
