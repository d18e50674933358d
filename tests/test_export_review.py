"""Export review: defects of the parity gate, the int8 graph and the export's logging, each reproduced.

- parity compared PyTorch's entities, widened to whole words (``training.predict.infer``), with the graph's
  raw ones: a correct graph failed on every text whose entity ``max_length`` cut mid-word;
- parity gated the entity sets but not the entity confidences the service answers;
- ``quiet_logger`` set the level it was given even where the logger was quieter already (louder, not
  quieter);
- the weight-only quantiser logged a line per node where the caller had configured no logging;
- the export summary named only the held-out rows' parity figure, not the probe texts the gate also ran;
- a graph too large for one file was refused as an internal error naming a temporary file;
- the int8 report's "answers as in a batch" ignored request starts, which cut a chained request.

Tiny random checkpoints (``tests.helpers.bundle``): a second or two per export.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from safetensors.torch import load_file, save_file

from intentvcs.core.decision import Decision
from intentvcs.core.entities import Entity, tag_vocabulary
from intentvcs.core.outputs import GraphOutputs, tuple_array
from intentvcs.export.parity import PARITY_ATOL, ParityError, check_parity
from intentvcs.export.quiet import quiet_logger
from tests.helpers.bundle import make_tiny_checkpoint

# A word the tiny vocabulary lacks: read letter by letter, so max_length can cut it mid-word.
UNKNOWN_WORD = "zqxwv"


def _tag_every_word(checkpoint: Path, entity_type: str) -> None:
    """Make the checkpoint's tagger read every word as an entity of ``entity_type`` (a B- tag on each)."""
    path = checkpoint / "tagger.safetensors"
    tensors = load_file(str(path))
    tags = tag_vocabulary([entity_type])
    tensors["weight"].zero_()
    tensors["bias"].zero_()
    tensors["bias"][tags.index(f"B-{entity_type}")] = 10.0
    save_file(tensors, str(path))


# ------------------------------------------------------------ 1. entities of a word cut by max_length

def test_parity_passes_a_correct_graph_whose_entity_word_is_cut_by_max_length(tmp_path):
    """PyTorch inference widens an entity to the whole word as sent (the service does too: ``on_whole_words``);
    parity compared that with the session's raw entities, which end at the cut, and refused a correct graph."""
    from intentvcs.export.exporter import export_bundle
    from intentvcs.service.engine import Engine
    from intentvcs.training.predict import TorchPredictor

    checkpoint = make_tiny_checkpoint(tmp_path / "checkpoint", entity_types=("city",), max_length=8)
    _tag_every_word(checkpoint, "city")
    text = f"play play play play {UNKNOWN_WORD}"  # [CLS], 4 words, z ##q, [SEP]: the cut falls inside the last word
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"text": text, "labels": ["PlayMusic"]}) + "\n")

    result = export_bundle(checkpoint, tmp_path / "bundle", quantize=False, parity_data=rows)

    assert result["parity"]["passed"] and result["parity"]["entity_mismatches"] == 0
    assert result["parity"]["probes"]["entity_mismatches"] == 0
    # What parity now compares is what each side answers: the whole word, in PyTorch and served.
    served = Engine(tmp_path / "bundle", provider="cpu").predict([text])[0]
    assert served["entities"][-1]["value"] == UNKNOWN_WORD
    reference = TorchPredictor(checkpoint).infer([text]).entities[0]
    assert text[reference[-1].start:reference[-1].end] == UNKNOWN_WORD


# ------------------------------------------------------------ 2. entity confidences are gated too

def _with_entity(confidence: float) -> GraphOutputs:
    logits = np.array([[2.0, -2.0]], dtype=np.float32)
    pooled = np.zeros((1, 4), dtype=np.float32)
    return GraphOutputs(logits, pooled, pooled, tuple_array([(Entity("city", 8, 13, confidence),)]))


def test_parity_fails_entity_confidences_that_drift_though_the_entity_sets_agree():
    """The service answers each entity's confidence (and an entity floor cuts on it); a graph whose tag
    logits drift keeps its argmax, so its entity sets, long before it keeps its confidences."""
    decision = Decision(("a", "b"), activation="sigmoid", thresholds=[0.5, 0.5])
    check_parity(_with_entity(0.9), _with_entity(0.9 + PARITY_ATOL / 2), decision, ["fly to paris"], "t")
    with pytest.raises(ParityError, match="entity confidence") as info:
        check_parity(_with_entity(0.9), _with_entity(0.6), decision, ["fly to paris"], "t")
    report = info.value.report
    assert report["entity_mismatches"] == 0 and report["max_entity_confidence_diff"] == pytest.approx(0.3)


# ------------------------------------------------------------ 3. quiet_logger only ever quietens

@pytest.mark.parametrize("name", [None, "intentvcs.service.engine"])
def test_quiet_logger_never_lets_through_what_the_caller_had_silenced(name):
    """A caller that silenced warnings (the root logger, or a parent of the named one, at ERROR) kept getting
    the warnings of the loggers the export "quietens" to WARNING (the fusions, the engine's load check)."""
    root, package = logging.getLogger(), logging.getLogger("intentvcs")
    before = root.level, package.level
    logger = logging.getLogger(name)
    try:
        root.setLevel(logging.ERROR)
        package.setLevel(logging.ERROR)
        with quiet_logger(name, logging.WARNING):
            assert not logger.isEnabledFor(logging.WARNING)
        root.setLevel(logging.DEBUG)
        package.setLevel(logging.DEBUG)
        with quiet_logger(name, logging.WARNING):
            assert not logger.isEnabledFor(logging.INFO) and logger.isEnabledFor(logging.WARNING)
        assert logger.isEnabledFor(logging.DEBUG)  # restored
    finally:
        root.setLevel(before[0])
        package.setLevel(before[1])


# ------------------------------------------------------------ 4. the weight-only quantiser is quiet in a library call

def test_the_weight_only_quantiser_logs_nothing_where_logging_was_never_configured(tmp_path, monkeypatch, capsys):
    """ONNX Runtime's MatMulNBits module calls ``logging.basicConfig(level=INFO)`` when first imported, inside
    the quantiser's quiet block: a library caller that had configured no logging (no CLI) got a line per node.
    Here as in such a caller: the root logger without handlers, the module not yet imported."""
    import sys

    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from intentvcs.export.onnx_export import ENCODER_SCOPE
    from intentvcs.export.quantize import WEIGHT_ONLY, quantize_int8

    # One encoder MatMul: all the quantiser needs to log its lines.
    weight = numpy_helper.from_array(np.random.default_rng(0).normal(size=(64, 64)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name=f"{ENCODER_SCOPE}MatMul")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], [weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "fp32.onnx"))
    monkeypatch.delitem(sys.modules, "onnxruntime.quantization.matmul_nbits_quantizer", raising=False)
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    before = root.level
    root.setLevel(logging.WARNING)  # Python's default (setLevel, not setattr: it clears the loggers' caches)
    try:
        quantize_int8(tmp_path / "fp32.onnx", tmp_path / "int8.onnx", WEIGHT_ONLY)
    finally:
        root.setLevel(before)

    assert root.handlers, "the module no longer calls basicConfig: this test no longer reproduces a caller"
    assert [node.op_type for node in onnx.load(str(tmp_path / "int8.onnx")).graph.node] == ["MatMulNBits"]
    assert "[INFO]" not in capsys.readouterr().err


# ------------------------------------------------------------ 5. the summary says what parity measured

def test_the_export_summary_names_the_probe_texts_parity_also_passed_and_their_figure(tmp_path, capsys):
    """The summary read "parity passed on 2 utterances: max |logit diff| <the rows' figure>", whereas the gate
    also ran the probe texts, one longer than max_length, whose gap may be the larger."""
    from intentvcs.cli.main import main

    checkpoint = make_tiny_checkpoint(tmp_path / "checkpoint")
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"text": text, "labels": ["PlayMusic"]}) + "\n" for text in ("play", "ok")))
    code = main(["export", "--checkpoint", str(checkpoint), "--out", str(tmp_path / "bundle"), "--no-quantize",
                 "--parity-data", str(rows)])
    out, err = capsys.readouterr()
    assert code == 0
    parity = json.loads(out)["parity"]
    probes = parity["probes"]
    [line] = [line for line in err.splitlines() if line.startswith("parity ")]
    assert (f"passed on 2 utterances and {probes['utterances']} probe texts (one of {probes['longest_tokens']} "
            f"tokens, max_length {probes['max_length']})") in line
    largest = max(parity["max_abs_logit_diff"], probes["max_abs_logit_diff"])
    assert f"max |logit diff| {largest:.2e}" in line


# ------------------------------------------------------------ 6. a graph too large for one file is the input's limit

def test_a_graph_too_large_for_one_file_is_refused_as_bad_input_not_as_a_bug(tmp_path, monkeypatch, capsys):
    """Optimum writes a graph over protobuf's 2 GB as external data, which a bundle cannot hold: the export
    refused it with a RuntimeError, reported as "internal error (a bug in intentvcs)" with a traceback, and named
    the temporary folder's file, gone by then."""
    import intentvcs.export.onnx_export as onnx_export
    from intentvcs.cli import exit_codes
    from intentvcs.cli.main import main

    checkpoint = make_tiny_checkpoint(tmp_path / "checkpoint")
    monkeypatch.setattr(onnx_export, "uses_external_data", lambda tensor: True)  # as for a > 2 GB backbone
    code = main(["export", "--checkpoint", str(checkpoint), "--out", str(tmp_path / "bundle")])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT, err
    [line] = [line for line in err.splitlines() if line.startswith("intentvcs export: error:")]
    assert "2 GB" in line and ".tmp" not in line and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


# ------------------------------------------------------------ 7. a request start read otherwise is an answer otherwise

def test_answers_differ_counts_a_row_whose_request_starts_change():
    """A chained request is answered part by part where its request starts cut it (``decide_segmented``): an
    int8 graph that finds another start alone than in a batch answers otherwise, which the report's "answers
    as in a batch on N of N" missed (only label sets, verdicts and entities were compared)."""
    from intentvcs.export.quantize import answers_differ

    decision = Decision(("a", "b"), activation="sigmoid", thresholds=[0.5, 0.5])
    logits = np.array([[2.0, -2.0], [2.0, -2.0]], dtype=np.float32)
    pooled = np.zeros((2, 4), dtype=np.float32)
    batched = GraphOutputs(logits, pooled, pooled, starts=tuple_array([(), (12,)]))
    alone = batched._replace(starts=tuple_array([(), ()]))
    assert answers_differ(batched, alone, decision) == 1
    assert answers_differ(batched, batched, decision) == 0
