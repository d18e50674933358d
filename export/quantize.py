"""The int8 graph (``model.int8.onnx``), its agreement with fp32 and its accuracy gate.

Two quantisations, tried in this order (``METHODS``); the export keeps the
first whose accuracy gate passes, or the first when none does (or when
nothing is gated: the rows are unlabelled, or no in-scope row carries one of
the model's labels). Chosen by measurement
(all-MiniLM-L6-v2; 2 CPU threads, AVX-512 VNNI; figures in docs/RESULTS.md
"Performance" and "Which int8 graph"):

- ``dynamic``: weights int8 offline, activations uint8 per batch at run time,
  one scale per tensor. No calibration data, and the fastest: of the graph
  the exporter fused (``intentvcs.export.fusion``) each ``Attention`` op
  becomes one ``QAttention`` beside the int8 matrix products of the
  feed-forward blocks, 2.3-2.4x the fp32 graph. Per-channel weight scales: on
  a trained SNIPS-VCS PU checkpoint label-set agreement with fp32 was 99.0%
  per channel vs 93.6% per tensor (97.7% per channel with ``reduce_range``).
- ``weight-only``: int8 weights in blocks of 64 (``MatMulNBits``), computed
  at accuracy level 4 (activations int8 per block of each row, so no scale
  is shared across the batch), the fused attention left fp32. Blocks of 64
  put the logits 20% closer to fp32 than blocks of 128 (mean |diff| 0.0086
  vs 0.0107 on the embedded default's validation and test texts, 0.0109 vs
  0.0140 on SNIPS test) at the same speed within noise; blocks of 32 closer
  still (0.0073 / 0.0083) but 5-14% slower at one text per call. Slower
  (1.7-1.8x fp32 at one text per call, 1.2-1.3x at 32) and closer to fp32: on
  the embedded default, whose entity confidences sit near their cut, the
  dynamic graph lost 1.0 point of slot F1 on the gated rows and this one none.
  Calibrated static int8 (QDQ) measured within noise of it, and needs a
  calibration pass over training texts, so it is not shipped.

Both leave the intent head (a ``Gemm``) and the entity head (a ``MatMul``
over every token) fp32: they cost little, and the tag logits decide span
boundaries, where int8 rounding moved whole entities.

The export records agreement with the fp32 graph (label sets, OOS verdicts,
entity sets, gaps) and the speed-up on the parity utterances, and, when those
rows are labelled (an in-scope row with a label of the model's at least), the
*accuracy gate*: every task figure the rows support (``GATED_FIGURES``)
computed for both graphs through the decision layer (for a graph with an entity head on rows
without spans, its entity answers' agreement with fp32's in place of the slot figures). The
gate passes when no figure loses more than ``MAX_LOSS`` (0.5 points; 0.005 of
AUROC), or one row's share where a figure rests on fewer rows than that
resolves (a figure over 150 rows moves in steps of 0.67 points), as long as one
row is at most ``MAX_ROW_SHARE`` of the figure (20 rows): on fewer, one row is a
loss too large to wave through (the only labelled row wrong passed), so no loss
is allowed and a graph that loses one is served fp32 (rows of labels the
model lacks do not count towards the 20). The service serves int8 by default
only when the gate passed (``INTENTVCS_QUANTIZED``).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import onnx
from onnxruntime.quantization import QuantType, quantize_dynamic

from intentvcs.core.dataio import Example
from intentvcs.core.decision import Decision, DecisionResult
from intentvcs.core.entities import span_set
from intentvcs.core.evaluation import evaluate, headline, knows_some
from intentvcs.core.outputs import GraphOutputs
from intentvcs.export.onnx_export import ENCODER_SCOPE, MODEL_SCOPE
from intentvcs.export.parity import compare
from intentvcs.export.quiet import quiet_logger

DYNAMIC = {"method": "dynamic", "weight_type": "int8", "activation_type": "uint8",
           "per_channel": True, "op_types": ["MatMul", "Attention"], "heads": "fp32"}
WEIGHT_ONLY = {"method": "weight-only", "weight_type": "int8", "activation_type": "int8 per block (accuracy level 4)",
               "block_size": 64, "accuracy_level": 4, "op_types": ["MatMul"], "attention": "fp32", "heads": "fp32"}
METHODS = (DYNAMIC, WEIGHT_ONLY)  # the order the export tries them: fastest first
TIMING_TEXTS = 256
# What the report keeps of the int8 graph's answers alone against its answers in batches (``alone``).
ALONE_FIELDS = ("utterances", "label_set_agreement", "oos_agreement", "entity_set_agreement", "max_confidence_diff",
                "mismatched")
TIMING_REPEATS = 3
# The figures of ``intentvcs.core.evaluation.evaluate`` the gate compares, each with
# the row count (a key of the same figures) its one-row resolution is read from.
GATED_FIGURES = {"accuracy": "n_in_scope", "f1": "n_in_scope", "exact_match": "n_in_scope",
                 "in_scope_accuracy": "n_in_scope", "oos_recall": "n_oos", "auroc": None,
                 "slot_f1": "n_in_scope", "overall_accuracy": "n_in_scope"}
# Gated instead of the slot figures for a graph with an entity head on rows none of whose in-scope rows carries a
# span: the share of rows whose answered entity set is the fp32 graph's (fp32: 1).
ENTITY_AGREEMENT = "entity_set_agreement"
MAX_LOSS = 0.005
MAX_ROW_SHARE = 0.05  # the largest one-row step the gate allows for; figures over fewer rows allow MAX_LOSS


def quantize_int8(fp32_path: str | Path, int8_path: str | Path, settings: dict[str, Any] = DYNAMIC) -> dict[str, Any]:
    """Write the int8 graph of ``fp32_path`` that ``settings`` (one of ``METHODS``) describe to
    ``int8_path``; return a copy of ``settings``."""
    nodes = encoder_nodes(fp32_path, settings["op_types"])
    # The quantisers log one root-logger line per tensor they skip, and recommend
    # pre-processing that the fusions (export/fusion.py) already did. Their own loggers too: the MatMulNBits
    # module, imported inside the block, calls logging.basicConfig(level=INFO), which lowers the root logger's
    # level again where the caller configured no logging.
    with quiet_logger(None, logging.ERROR), quiet_logger("onnxruntime.quantization", logging.ERROR):
        if settings["method"] == "dynamic":
            quantize_dynamic(Path(fp32_path), Path(int8_path), op_types_to_quantize=settings["op_types"],
                             per_channel=settings["per_channel"], weight_type=QuantType.QInt8,
                             nodes_to_quantize=nodes,
                             # The fused ops (com.microsoft domain) defeat the quantiser's shape
                             # inference; every tensor they produce is float.
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        elif settings["method"] == "weight-only":
            # Imported here: it needs onnx-ir, which only this method uses.
            from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

            model = onnx.load(str(fp32_path))
            # Named by exclusion: this quantiser takes every node of its op types, listed or not.
            encoder = set(nodes)
            heads = [node.name for node in model.graph.node
                     if node.op_type in settings["op_types"] and node.name not in encoder]
            quantizer = MatMulNBitsQuantizer(model, bits=8, block_size=settings["block_size"], is_symmetric=True,
                                             accuracy_level=settings["accuracy_level"], nodes_to_exclude=heads)
            quantizer.process()
            quantizer.model.save_model_to_file(str(int8_path), use_external_data_format=False)
        else:
            raise ValueError(f"unknown quantisation method {settings['method']!r}")
    return dict(settings)


def encoder_nodes(path: str | Path, op_types: Sequence[str]) -> list[str]:
    """The names of the graph's ``op_types`` nodes inside the encoder: the ones to quantise.

    A list of what to quantise rather than of what to leave: the quantiser
    rewrites a ``Gemm`` as a renamed ``MatMul`` + ``Add`` before it quantises,
    so an exclusion by the head's name would miss it. Encoder nodes are those
    in the encoder's scope and those the offline fusions created (named outside
    the model's scope); pooling and the two heads are neither.
    """
    graph = onnx.load(str(path), load_external_data=False).graph
    return [node.name for node in graph.node if node.op_type in op_types
            and (node.name.startswith(ENCODER_SCOPE) or not node.name.startswith(MODEL_SCOPE))]


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


def quantization_report(settings: dict[str, Any], fp32_outputs: GraphOutputs, int8_outputs: GraphOutputs,
                        fp32_infer, int8_infer, decision: Decision, texts: Sequence[str]) -> dict[str, Any]:
    """``settings`` (how the int8 graph was made), its agreement with fp32 on ``texts`` and its speed-up.

    ``fp32_outputs`` / ``int8_outputs`` are the two graphs' outputs on ``texts``
    (computed once by the caller, which uses them for the gate too);
    ``fp32_infer`` / ``int8_infer`` map texts to outputs, for the timing, which
    uses at most ``TIMING_TEXTS`` of the texts to bound export time.

    ``alone``: the int8 graph's answers to each text read on its own against
    its answers in the batches above. An int8 graph whose activations are
    quantised with scales shared across a run answers a text differently
    beside other texts (measured: the dynamic graph of a SNIPS entity model, 15
    of 700 test texts; the weight-only graph of the embedded default, none of
    182, within 3e-7); the fp32 graph answers the same either way. So the service's int8
    answers can depend on the requests batched with them; the report says how
    often, and ``INTENTVCS_QUANTIZED=off`` serves answers that never do.
    """
    agreement = compare(fp32_outputs, int8_outputs, decision, texts)
    alone = GraphOutputs.concatenate([int8_infer([text]) for text in texts])
    consistency = compare(int8_outputs, alone, decision, texts)
    timed = list(texts[:TIMING_TEXTS])
    fp32_s, int8_s = seconds_per_pass(fp32_infer, timed), seconds_per_pass(int8_infer, timed)
    return {
        **settings,
        "agreement": agreement,
        "alone": {key: consistency[key] for key in ALONE_FIELDS if key in consistency}
        | {"answers_differ": answers_differ(int8_outputs, alone, decision)},
        "timing": {"utterances": len(timed), "repeats": TIMING_REPEATS,
                   "fp32_ms": round(1000 * fp32_s, 3), "int8_ms": round(1000 * int8_s, 3),
                   "speedup": round(fp32_s / int8_s, 3)},
    }


def answers_differ(first: GraphOutputs, second: GraphOutputs, decision: Decision) -> int:
    """Rows whose answer differs between two readings: accepted set, OOS verdict, answered entity set (the
    decision's entity floor applied) or, for a graph with a boundary head, request starts (where the service
    cuts a chained request to answer it part by part)."""
    a, b = decision.apply(*first.scores), decision.apply(*second.scores)
    differ = np.any(a.accepted != b.accepted, axis=1) | (a.out_of_scope != b.out_of_scope)
    if first.entities is not None:
        differ |= ~_same_entities(first, second, decision)
    if first.starts is not None:
        differ |= np.array([tuple(x) != tuple(y) for x, y in zip(first.starts, second.starts)], dtype=bool)
    return int(differ.sum())


def accuracy_gate(fp32_outputs: GraphOutputs, int8_outputs: GraphOutputs, decision: Decision,
                  examples: Sequence[Example], source: str,
                  results: tuple[DecisionResult, DecisionResult] | None = None) -> dict[str, Any] | None:
    """Every ``GATED_FIGURES`` figure that ``examples`` support, for both graphs, and whether int8 passes;
    None (not gated, as for unlabelled rows) when no in-scope row carries a label of ``decision``'s.

    A figure passes when int8 loses at most ``MAX_LOSS`` of it, or at most one
    row's share of the rows it is computed over when that is more and at most
    ``MAX_ROW_SHARE`` (a gain is never a loss). ``passed`` is true when every figure passes. ``results``: the
    two graphs' decisions as served (``intentvcs.service.engine.read_as_served``:
    chained requests part by part); without them each text is decided whole.

    Rows of labels the model lacks are in scope for ``evaluate``, and always missed by both graphs: with no
    in-scope row of a label it knows, the intent figures read 0 for both (a "loss" of nothing) and the only
    figures left are the out-of-scope ones, so nothing says int8 answers the model's intents as fp32 does.
    Nor does an in-scope row of a label the model lacks count towards the ``MAX_ROW_SHARE`` bound
    (``known_in_scope_rows``: the rows whose labels it all knows): ten rows of its labels among thirty of
    another's earn no one-row allowance.

    For a graph with an entity head on rows whose in-scope ones carry no span (a CSV cannot), no figure scores
    the entities the service answers; ``ENTITY_AGREEMENT``, the share of rows whose answered entity set is the
    fp32 graph's, is gated in their place (one row's share allowed as above): without it an int8 graph that
    lost entities passed on the intents alone and was served by default.
    """
    if not knows_some(examples, decision.labels):
        return None
    known = set(decision.labels)
    in_scope = [example for example in examples if not example.is_out_of_scope]
    judged = sum(1 for example in in_scope if known.issuperset(example.labels))
    fp32_result, int8_result = results or (None, None)
    fp32 = headline(evaluate(decision, fp32_outputs, examples, include_tables=False, result=fp32_result))
    int8 = headline(evaluate(decision, int8_outputs, examples, include_tables=False, result=int8_result))
    figures = {}
    for name, rows_key in GATED_FIGURES.items():
        if name not in fp32:
            continue
        allowed = MAX_LOSS if rows_key is None else \
            _allowed_loss(fp32[rows_key], judged if rows_key == "n_in_scope" else None)
        figures[name] = _figure(fp32[name], int8[name], allowed)
    if fp32_outputs.entities is not None and "slot_f1" not in fp32:
        # No in-scope row carries a span (a CSV cannot), so no figure scores the entities the service answers:
        # the int8 graph is held to the fp32 graph's own answers instead, row by row.
        agreement = _same_entities(fp32_outputs, int8_outputs, decision).mean()
        figures[ENTITY_AGREEMENT] = _figure(1.0, float(agreement), _allowed_loss(len(examples)))
    return {"data": source, "rows": len(examples), "known_in_scope_rows": judged, "figures": figures,
            "passed": bool(figures) and all(figure["passed"] for figure in figures.values())}


def _same_entities(first: GraphOutputs, second: GraphOutputs, decision: Decision) -> np.ndarray:
    """bool ``[N]``: each row answers the same entities from both graphs (the decision's entity floor applied)."""
    return np.array([span_set(x) == span_set(y) for x, y in zip(decision.kept_entities(first.entities),
                                                                decision.kept_entities(second.entities))],
                    dtype=bool)


def _figure(fp32: float, int8: float, allowed: float) -> dict[str, Any]:
    """One gated figure: both values, the loss, what may be lost, and whether int8 passes."""
    loss = fp32 - int8
    return {"fp32": round(fp32, 5), "int8": round(int8, 5), "loss": round(loss, 5), "allowed": round(allowed, 5),
            "passed": bool(loss <= allowed + 1e-12)}


def _allowed_loss(rows: int, judged: int | None = None) -> float:
    """What a figure over ``rows`` rows may lose: ``MAX_LOSS``, or one row's share where that is more and at
    most ``MAX_ROW_SHARE``. ``judged``: how many of the ``rows`` can tell the graphs apart (default all); the
    share's bound is read on them, the share itself on ``rows`` (one row of the figure, never more)."""
    step = 1 / max(rows, 1)
    judged = rows if judged is None else judged
    return max(MAX_LOSS, step) if 1 / max(judged, 1) <= MAX_ROW_SHARE else MAX_LOSS
