"""Optional dynamic int8 graph (``model.int8.onnx``) and its measured cost in accuracy.

Settings, chosen by measurement (all-MiniLM-L6-v2; 2 CPU threads, AVX-512 VNNI):

- dynamic quantisation (weights int8 offline, activations uint8 per batch at
  run time): needs no calibration data, and encoder CPU time is dominated by
  MatMuls whose weights dominate the file;
- ``MatMul`` only: the attention/FFN projections. The head is a ``Gemm`` and
  stays fp32, which keeps confidences close to fp32's;
- per-channel weight scales. On a trained SNIPS-VCS PU checkpoint (33 labels,
  700 validation utterances) label-set agreement with fp32 was 99.0% per
  channel vs 93.6% per tensor (97.7% per channel with ``reduce_range``);
  keeping the FFN output projections in fp32 gained nothing and halved speed;
- no ``quant_pre_process`` / offline fusion first: with a random 16-label
  head the error was the same (0.072 max logit gap with or without) and speed
  within noise, since the engine's ``ORT_ENABLE_ALL`` applies those
  optimisations at load anyway (and its symbolic shape inference fails on
  this graph without extra flags).
Speed-up there was about 1.7-1.8x (batch 1 and 32).

Agreement with the fp32 graph (label sets, OOS verdicts, max confidence gap)
and the speed-up are measured on the parity utterances and recorded in the
manifest; they are reported, not gated, because int8 is an explicit trade.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Sequence

from onnxruntime.quantization import QuantType, quantize_dynamic

from intentvcs.export.parity import compare
from intentvcs.core.decision import Decision
from intentvcs.core.outputs import GraphOutputs

SETTINGS = {"method": "dynamic", "weight_type": "int8", "activation_type": "uint8",
            "per_channel": True, "op_types": ["MatMul"]}
TIMING_TEXTS = 256
TIMING_REPEATS = 3


def quantize_int8(fp32_path: str | Path, int8_path: str | Path) -> dict[str, Any]:
    """Write the dynamic int8 graph of ``fp32_path`` to ``int8_path``; return ``SETTINGS``."""
    with _quiet_root_logger():
        quantize_dynamic(Path(fp32_path), Path(int8_path), op_types_to_quantize=SETTINGS["op_types"],
                         per_channel=SETTINGS["per_channel"], weight_type=QuantType.QInt8)
    return dict(SETTINGS)


@contextmanager
def _quiet_root_logger():
    """The ORT quantiser logs one root-logger line per tensor it skips, and
    recommends the pre-processing deliberately not done (module docstring)."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def seconds_per_pass(infer, texts: Sequence[str], repeats: int = TIMING_REPEATS) -> float:
    """Best wall time of ``infer(texts)`` over ``repeats`` runs, after one warm-up.

    The minimum, not the mean: on a shared host the noise is only ever added.
    """
    infer(texts)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        infer(texts)
        times.append(time.perf_counter() - start)
    return min(times)


def quantization_report(fp32_outputs: GraphOutputs, fp32_infer, int8_infer,
                        decision: Decision, texts: Sequence[str]) -> dict[str, Any]:
    """Agreement of the int8 graph with fp32 on ``texts`` and its speed-up.

    ``fp32_outputs`` are the fp32 graph's outputs on ``texts`` (already
    computed for parity); ``fp32_infer`` / ``int8_infer`` map texts to outputs. Timing uses at most ``TIMING_TEXTS`` of the texts to bound
    export time.
    """
    agreement = compare(fp32_outputs, int8_infer(texts), decision, texts)
    timed = list(texts[:TIMING_TEXTS])
    fp32_s, int8_s = seconds_per_pass(fp32_infer, timed), seconds_per_pass(int8_infer, timed)
    return {
        **SETTINGS,
        "agreement": agreement,
        "timing": {"utterances": len(timed), "repeats": TIMING_REPEATS,
                   "fp32_ms": round(1000 * fp32_s, 3), "int8_ms": round(1000 * int8_s, 3),
                   "speedup": round(fp32_s / int8_s, 3)},
    }
