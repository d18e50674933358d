"""What users would run instead of the engine, on the same checkpoint: the perf benchmark's baselines.

Each ``*_backend`` returns ``infer(texts) -> logits [N, L]``: the encoder,
mean pooling and the intent head, with none of the engine's extras
(spelling, the middle layer's pooled output, entity decoding, the decision),
so the comparison favours the baseline.

- ``transformers_backend``: what a user writes with transformers:
  ``AutoModel`` forward, mean pooling over the attention mask, the linear
  head, under ``torch.inference_mode`` on ``threads`` torch threads; a call is
  cut into chunks of ``max_batch`` texts in the order given, each padded to its
  longest text. With ``sort_by_length`` (``transformers-sorted`` in the perf
  benchmark) a careful user's variant: the call's texts sorted by token length
  first, so each chunk pads little, the answers put back in the given order.
  Against it the engine's speed-up is its runtime's alone; against the plain
  one it also holds the engine's length buckets.
- ``sentence_transformers_backend``: sentence-transformers' ONNX backend
  (Optimum's ``ORTModelForFeatureExtraction`` under ``SentenceTransformer``)
  on the same encoder, fp32 or its dynamic int8 export for this CPU
  (``export_dynamic_quantized_onnx_model`` with the ``avx512_vnni``,
  ``avx512`` or ``avx2`` configuration, whichever the CPU has), with
  ``encode(batch_size=max_batch)`` (which sorts a call by length, as the
  engine does), then the head in numpy. Its documentation measures ONNX int8
  at 3.08x PyTorch fp32 on CPU for short texts: the anchor of the int8 target.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

# sentence-transformers' quantisation configurations, best first; the first the CPU has is used.
ST_QUANTIZATION = (("avx512_vnni", {"avx512_vnni"}), ("avx512", {"avx512f"}), ("avx2", {"avx2"}))


def _head(checkpoint: Path) -> tuple[np.ndarray, np.ndarray]:
    """The checkpoint's intent head: ``weight [L, H]`` and ``bias [L]`` as float32 arrays."""
    from safetensors.numpy import load_file

    from intentvcs.training.model import HEAD_FILE

    state = load_file(str(checkpoint / HEAD_FILE))
    return state["weight"].astype(np.float32), state["bias"].astype(np.float32)


def transformers_backend(checkpoint: str | Path, max_length: int, threads: int, max_batch: int,
                         sort_by_length: bool = False) -> Callable[[list[str]], np.ndarray]:
    """A plain transformers forward of the checkpoint's encoder with its head (see the module docstring)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from intentvcs.training.model import ENCODER_DIR

    checkpoint = Path(checkpoint)
    torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint / ENCODER_DIR)
    encoder = AutoModel.from_pretrained(checkpoint / ENCODER_DIR).eval()
    weight, bias = (torch.from_numpy(array) for array in _head(checkpoint))

    @torch.inference_mode()
    def infer(texts: list[str]) -> np.ndarray:
        order = list(range(len(texts)))
        if sort_by_length:
            lengths = [len(ids) for ids in tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]]
            order.sort(key=lengths.__getitem__)
        logits = []
        for start in range(0, len(texts), max_batch):
            batch = tokenizer([texts[i] for i in order[start:start + max_batch]], padding=True, truncation=True,
                              max_length=max_length, return_tensors="pt")
            hidden = encoder(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            logits.append(pooled @ weight.T + bias)
        ordered = torch.cat(logits).numpy()
        answers = np.empty_like(ordered)
        answers[order] = ordered
        return answers

    return infer


def st_quantization_config(cpu_flags: set[str]) -> str:
    """The sentence-transformers int8 configuration for a CPU with ``cpu_flags``."""
    for name, needs in ST_QUANTIZATION:
        if needs <= cpu_flags:
            return name
    raise ValueError("sentence-transformers' int8 export needs AVX2 at least")


def cpu_flags() -> set[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty off Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return set()
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return set(line.partition(":")[2].split())


class SentenceTransformersBaselines:
    """sentence-transformers' ONNX fp32 and int8 backends over one copy of the checkpoint's encoder.

    The encoder folder is copied to a temporary folder (the ONNX export writes
    beside the weights, and the checkpoint is not ours to change); ``close``
    removes it.
    """

    def __init__(self, checkpoint: str | Path, max_length: int, threads: int, max_batch: int):
        from intentvcs.training.model import ENCODER_DIR

        self._folder = Path(tempfile.mkdtemp(prefix="intentvcs-st-"))
        self.model_dir = self._folder / "encoder"
        shutil.copytree(Path(checkpoint) / ENCODER_DIR, self.model_dir)
        self.head = _head(Path(checkpoint))
        self.max_length, self.threads, self.max_batch = max_length, threads, max_batch
        self.int8_config = st_quantization_config(cpu_flags())

    def backends(self) -> dict[str, Callable[[list[str]], np.ndarray]]:
        """``{"st-onnx": infer, "st-onnx-int8": infer}``."""
        from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model

        # As its documentation has users do: export once (onnx/model.onnx), save, quantise from it.
        exported = SentenceTransformer(str(self.model_dir), backend="onnx", device="cpu")
        exported.save_pretrained(str(self.model_dir))
        export_dynamic_quantized_onnx_model(exported, self.int8_config, str(self.model_dir))
        # It names the file after the configuration (model_qint8_avx512_vnni.onnx, model_quint8_avx2.onnx).
        int8_file = next((self.model_dir / "onnx").glob(f"model_*int8_{self.int8_config}.onnx"))
        fp32, int8 = (self._load(f"onnx/{name}") for name in ("model.onnx", int8_file.name))
        return {"st-onnx": self._infer(fp32), "st-onnx-int8": self._infer(int8)}

    def _load(self, file_name: str):
        """The saved ONNX graph ``file_name`` on ``threads`` ONNX Runtime threads."""
        import onnxruntime as ort
        from sentence_transformers import SentenceTransformer

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        kwargs = {"provider": "CPUExecutionProvider", "session_options": options, "file_name": file_name}
        model = SentenceTransformer(str(self.model_dir), backend="onnx", device="cpu", model_kwargs=kwargs)
        model.max_seq_length = self.max_length
        return model

    def _infer(self, model) -> Callable[[list[str]], np.ndarray]:
        weight, bias = self.head

        def infer(texts: list[str]) -> np.ndarray:
            embeddings = model.encode(texts, batch_size=self.max_batch, convert_to_numpy=True,
                                      show_progress_bar=False)
            return embeddings @ weight.T + bias

        return infer

    def close(self) -> None:
        shutil.rmtree(self._folder, ignore_errors=True)
