"""The export's second review: what the parity gate reads, and what a bundle carries.

- a checkpoint tokenizer that truncates on the left is served truncating on the left (tokenizer.json
  was written truncating on the right, so every text longer than max_length was read differently);
- parity always also runs the built-in probe texts, one of them longer than max_length, whatever
  --parity-data holds (a data file of short rows let the tokenizer fault above pass the gate);
- parity gates the embeddings (``pooled``, ``pooled_mid``) that the distance OOS rule and the audit read;
- a bundle exported with --no-references carries none of the parity rows' utterances in its manifest;
- the manifest names the ONNX Runtime that fused the graph and made the int8 one.

Each test exports (or refuses) a tiny checkpoint (``tests.helpers.bundle``) in a second or two.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from tokenizers import Tokenizer

from intentvcs.core.decision import Decision
from intentvcs.core.outputs import GraphOutputs
from intentvcs.export.parity import PARITY_ATOL, ParityError, check_parity
from intentvcs.service.engine import Engine
from tests.helpers.bundle import make_tiny_checkpoint

ENTITY_TYPES = ("city", "date")
# Short labelled held-out rows, as a team's valid split is: none reaches max_length.
SHORT_ROWS = [("play the album", ["PlayMusic"]), ("book a table for two", ["BookRestaurant"]),
              ("will it rain in paris", ["GetWeather"]), ("rate this book", ["RateBook"]),
              ("find the movie", ["SearchCreativeWork"]), ("tell me a joke", [])]
# A text far longer than the tiny checkpoint's max_length (24 tokens), its words varied, so that its first and
# last 24 tokens differ.
LONG_TEXT = ("what is the weather tomorrow in paris and will it rain, then play some jazz music by the artist "
             "please and add this song to my playlist, book a table for two people tonight at the restaurant")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("review2")
    make_tiny_checkpoint(root / "entities", entity_types=ENTITY_TYPES)
    left = make_tiny_checkpoint(root / "left", entity_types=ENTITY_TYPES)
    config = left / "encoder" / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "truncation_side": "left"}))
    return root


@pytest.fixture
def left(checkpoints, tmp_path) -> Path:
    """A checkpoint whose tokenizer truncates on the left (``truncation_side``, as some backbones ship)."""
    return Path(shutil.copytree(checkpoints / "left", tmp_path / "checkpoint"))


@pytest.fixture
def entities(checkpoints, tmp_path) -> Path:
    return Path(shutil.copytree(checkpoints / "entities", tmp_path / "checkpoint"))


def short_rows(path: Path) -> Path:
    # A blank line first: a row's line in the file is then not its position among the rows.
    path.write_text("\n" + "".join(json.dumps({"text": text, "labels": labels}) + "\n" for text, labels in SHORT_ROWS))
    return path


# ------------------------------------------------------------ 1. the tokenizer truncates as the checkpoint's does

def test_a_tokenizer_that_truncates_on_the_left_is_served_truncating_on_the_left(left, tmp_path):
    from intentvcs.export.exporter import export_bundle
    from intentvcs.training.predict import TorchPredictor

    bundle = tmp_path / "bundle"
    export_bundle(left, bundle, quantize=False, parity_data=short_rows(tmp_path / "rows.jsonl"))
    assert Tokenizer.from_file(str(bundle / "tokenizer.json")).truncation["direction"] == "left"
    served = Engine(bundle, provider="cpu").infer([LONG_TEXT])
    reference = TorchPredictor(left).infer([LONG_TEXT])
    assert np.abs(served.logits - reference.logits).max() <= PARITY_ATOL


# ------------------------------------------------------------ 2. parity probes past max_length, whatever the data

def _right_truncating_tokenizer(tokenizer, max_length: int, path: Path) -> None:
    """The tokenizer writer before the fix: truncation on the right, whatever the checkpoint's side."""
    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.enable_truncation(max_length)
    backend.enable_padding(pad_id=tokenizer.pad_token_id, pad_token=tokenizer.pad_token)
    backend.save(str(path))


def test_parity_with_short_rows_still_catches_a_graph_that_reads_long_texts_otherwise(left, tmp_path, monkeypatch):
    import intentvcs.export.exporter as exporter

    monkeypatch.setattr(exporter, "_write_tokenizer", _right_truncating_tokenizer)
    earlier = tmp_path / "bundle"
    with pytest.raises(ParityError, match="probe") as info:
        exporter.export_bundle(left, earlier, quantize=False, parity_data=short_rows(tmp_path / "rows.jsonl"))
    report = info.value.report
    # The rows themselves agree (none is long enough to be truncated); the probes do not.
    assert report["max_abs_logit_diff"] <= PARITY_ATOL and report["label_set_mismatches"] == 0
    assert not report["probes"]["passed"] and report["probes"]["max_abs_logit_diff"] > PARITY_ATOL
    assert not earlier.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint", "rows.jsonl"]


@pytest.mark.parametrize("max_length", [24, 128])
def test_parity_probes_a_text_longer_than_max_length(tmp_path, max_length):
    from intentvcs.export.exporter import export_bundle

    checkpoint = make_tiny_checkpoint(tmp_path / "checkpoint", max_length=max_length)
    parity = export_bundle(checkpoint, tmp_path / "bundle", quantize=False,
                           parity_data=short_rows(tmp_path / "rows.jsonl"))["parity"]
    assert parity["utterances"] == len(SHORT_ROWS)  # the rows' figures are the rows'
    probes = parity["probes"]
    assert probes["passed"] and probes["longest_tokens"] > max_length
    assert probes["utterances"] > 1 and probes["label_set_mismatches"] == probes["oos_mismatches"] == 0
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert manifest["parity"]["probes"] == probes


# ------------------------------------------------------------ 3. parity gates the embeddings too

def test_parity_fails_embeddings_that_drift_though_logits_and_decisions_agree():
    decision = Decision(("a", "b"), activation="sigmoid", thresholds=[0.5, 0.5])
    logits = np.array([[2.0, -2.0]], dtype=np.float32)
    pooled = np.zeros((1, 4), dtype=np.float32)
    check_parity(GraphOutputs(logits, pooled, pooled), GraphOutputs(logits, pooled, pooled), decision, ["x"], "t")
    for drifted in (GraphOutputs(logits, pooled + 1e-2, pooled), GraphOutputs(logits, pooled, pooled + 1e-2)):
        with pytest.raises(ParityError, match="pooled") as info:
            check_parity(GraphOutputs(logits, pooled, pooled), drifted, decision, ["x"], "t")
        assert info.value.report["label_set_mismatches"] == info.value.report["oos_mismatches"] == 0


def test_an_export_whose_middle_embedding_drifts_is_refused(entities, tmp_path, monkeypatch):
    import intentvcs.export.exporter as exporter

    real = exporter.torch_infer

    def drifted(*args, **kwargs):  # the graph's pooled_mid 1e-2 away from PyTorch's; its logits exact
        outputs = real(*args, **kwargs)
        return outputs._replace(pooled_mid=outputs.pooled_mid + 1e-2)

    monkeypatch.setattr(exporter, "torch_infer", drifted)
    with pytest.raises(ParityError):
        exporter.export_bundle(entities, tmp_path / "bundle", quantize=False)
    assert not (tmp_path / "bundle").exists()


# ------------------------------------------------------------ 4. --no-references: no utterance in the manifest

def _int8_that_answers_otherwise(fp32_path, int8_path, settings):
    """An "int8 graph" that answers differently from fp32 on many rows: the fp32 graph with its intent and
    tag biases moved (deterministic, where a real int8 graph's few flips depend on the CPU)."""
    model = onnx.load(str(fp32_path))
    for tensor in model.graph.initializer:
        if tensor.name in ("model.head.bias", "model.tagger.bias"):
            values = numpy_helper.to_array(tensor).copy()
            values[len(values) // 2] += 3.0
            tensor.CopyFrom(numpy_helper.from_array(values, tensor.name))
    onnx.save(model, str(int8_path))
    return dict(settings)


def test_a_bundle_without_references_carries_no_parity_utterance(entities, tmp_path, monkeypatch):
    import intentvcs.export.exporter as exporter

    monkeypatch.setattr(exporter, "quantize_int8", _int8_that_answers_otherwise)
    rows = short_rows(tmp_path / "rows.jsonl")
    result = exporter.export_bundle(entities, tmp_path / "bundle", parity_data=rows, references=False)
    agreement = result["quantization"]["agreement"]
    assert agreement["mismatched"] or agreement["entity_mismatched"]  # the operator's result names them
    text = (tmp_path / "bundle" / "manifest.json").read_text()
    assert not [t for t, _ in SHORT_ROWS if json.dumps(t) in text]
    recorded = json.loads(text)["quantization"]["agreement"]
    # The same rows, by their line in the parity data (a JSONL row per line here).
    rows_named = [entry["line"] for entry in recorded["mismatched"] + recorded["entity_mismatched"]]
    assert rows_named and all(2 <= row <= len(SHORT_ROWS) + 1 for row in rows_named)
    texts = [t for t, _ in SHORT_ROWS]
    assert [texts.index(entry["text"]) + 2 for entry in agreement["mismatched"]] == \
        [entry["line"] for entry in recorded["mismatched"]]
    for entry in recorded["entity_mismatched"]:
        assert all("value" not in entity for entity in entry["reference"] + entry["candidate"])


# ------------------------------------------------------------ 5. the manifest names the runtime that made the graphs

def test_the_manifest_names_the_onnxruntime_that_fused_and_quantised_the_graphs(entities, tmp_path):
    """The fused ops and the int8 graph are ONNX Runtime's making (a runtime without MatMulNBits cannot load
    the weight-only graph): its version is provenance as much as Optimum's and torch's."""
    import onnxruntime

    from intentvcs.export.exporter import export_bundle

    export_bundle(entities, tmp_path / "bundle", quantize=False)
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert f"onnxruntime {onnxruntime.__version__}" in manifest["model"]["exporter"]
