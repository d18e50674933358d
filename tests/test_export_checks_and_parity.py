"""Export (``intentvcs export``, ``intentvcs.export``): its checks before the long work, the parity gate, and
what a bundle carries.

- outputs committed together (the result file and the bundle, both or neither), inputs never overwritten, a
  folder commit that cleans up;
- checkpoints and parity data checked against the model before the long work (span types, labels, damaged
  weights, max_length, the tag count); quiet third-party logs;
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

import contextlib
import io
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from tokenizers import Tokenizer

from intentvcs.cli import exit_codes
from intentvcs.cli.main import main
from intentvcs.core import atomic
from intentvcs.core.decision import Decision
from intentvcs.core.manifest import BUNDLE_FORMAT, BUNDLE_OUTPUT, MANIFEST_FILE
from intentvcs.core.outputs import GraphOutputs, tuple_array
from intentvcs.export.parity import PARITY_ATOL, ParityError, check_parity
from intentvcs.service.engine import Engine
from tests.helpers.bundle import make_tiny_checkpoint

ENTITY_TYPES = ("city", "date")  # 5 BIO tags: O, B-city, I-city, B-date, I-date
# Short labelled held-out rows, as a team's valid split is: none reaches max_length.
SHORT_ROWS = [("play the album", ["PlayMusic"]), ("book a table for two", ["BookRestaurant"]),
              ("will it rain in paris", ["GetWeather"]), ("rate this book", ["RateBook"]),
              ("find the movie", ["SearchCreativeWork"]), ("tell me a joke", [])]
# A text far longer than the tiny checkpoint's max_length (24 tokens), its words varied, so that its first and
# last 24 tokens differ.
LONG_TEXT = ("what is the weather tomorrow in paris and will it rain, then play some jazz music by the artist "
             "please and add this song to my playlist, book a table for two people tonight at the restaurant")


def run_cli(*args: str) -> tuple[int, str]:
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main([str(arg) for arg in args])
    return code, stdout.getvalue()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> Path:
    """The tiny checkpoints the tests copy, written once: ``plain`` (intent head only), ``entities`` (a tagger
    over ``ENTITY_TYPES``) and ``left`` (``entities`` with a tokenizer that truncates on the left)."""
    root = tmp_path_factory.mktemp("export")
    make_tiny_checkpoint(root / "plain")
    make_tiny_checkpoint(root / "entities", entity_types=ENTITY_TYPES)
    left = Path(shutil.copytree(root / "entities", root / "left"))
    config = left / "encoder" / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "truncation_side": "left"}))
    return root


@pytest.fixture
def plain(checkpoints, tmp_path) -> Path:
    """A copy of the plain checkpoint this test may damage."""
    return Path(shutil.copytree(checkpoints / "plain", tmp_path / "checkpoint"))


@pytest.fixture
def entities(checkpoints, tmp_path) -> Path:
    return Path(shutil.copytree(checkpoints / "entities", tmp_path / "checkpoint"))


@pytest.fixture
def left(checkpoints, tmp_path) -> Path:
    """A checkpoint whose tokenizer truncates on the left (``truncation_side``, as some backbones ship)."""
    return Path(shutil.copytree(checkpoints / "left", tmp_path / "checkpoint"))


def edit_meta(checkpoint: Path, **fields) -> None:
    path = checkpoint / "checkpoint.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


def write_rows(path: Path, *rows: dict) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def hidden(folder: Path) -> list[str]:
    """Leftovers of a commit: the temporary siblings are hidden."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def short_rows(path: Path) -> Path:
    # A blank line first: a row's line in the file is then not its position among the rows.
    path.write_text("\n" + "".join(json.dumps({"text": text, "labels": labels}) + "\n" for text, labels in SHORT_ROWS))
    return path



# ------------------------------------------------------------ 1. the result file and the bundle, both or neither

def test_a_result_that_cannot_be_written_leaves_the_bundle_unwritten(plain, tmp_path, monkeypatch, capsys):
    real = tempfile.mkstemp

    def refuse_the_result(*args, prefix=None, **kwargs):
        if prefix and prefix.startswith(".result.json."):
            raise PermissionError(13, "Permission denied", str(tmp_path / "result.json"))
        return real(*args, prefix=prefix, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", refuse_the_result)
    out = tmp_path / "bundle"
    code, stdout = run_cli("export", "--checkpoint", plain, "--out", out, "--no-quantize",
                           "--result", tmp_path / "result.json")
    assert code == exit_codes.BAD_INPUT and "Permission denied" in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "result.json").exists() and stdout == ""
    assert hidden(tmp_path) == []


def test_the_result_file_is_written_with_the_bundle(plain, tmp_path):
    code, stdout = run_cli("export", "--checkpoint", plain, "--out", tmp_path / "bundle", "--no-quantize",
                           "--result", tmp_path / "result.json")
    assert code == 0 and json.loads((tmp_path / "result.json").read_text()) == json.loads(stdout)


# ------------------------------------------------------------ 2. no output inside the checkpoint read

@pytest.mark.parametrize("option, path", [("--result", "checkpoint.json"), ("--result", "encoder/result.json"),
                                          ("--out", "bundle")])
def test_an_output_inside_the_checkpoint_is_refused(plain, tmp_path, capsys, option, path):
    before = {p: p.read_bytes() for p in plain.rglob("*") if p.is_file()}
    args = {"--out": tmp_path / "bundle", "--result": None, option: plain / path}
    code, _ = run_cli("export", "--checkpoint", plain, "--no-quantize",
                      *(arg for name, value in args.items() if value is not None for arg in (name, value)))
    assert code == exit_codes.BAD_INPUT
    assert f"lies in the input folder {plain}" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in plain.rglob("*") if p.is_file()} == before
    assert not (tmp_path / "bundle").exists()


# ------------------------------------------------------------ 3. parity data checked against the model

def test_a_parity_span_type_the_model_never_saw_is_refused(entities, tmp_path, capsys):
    data = write_rows(tmp_path / "parity.jsonl", {"text": "play jazz", "labels": ["PlayMusic"]},
                      {"text": "play jazz in paris", "labels": ["PlayMusic"],
                       "spans": [{"start": 13, "end": 18, "label": "citty"}]})
    code, _ = run_cli("export", "--checkpoint", entities, "--out", tmp_path / "bundle", "--no-quantize",
                      "--parity-data", data)
    assert code == exit_codes.BAD_INPUT
    assert f"{data}:2: span type(s) ['citty'] do not occur in the training data" in capsys.readouterr().err
    assert not (tmp_path / "bundle").exists()


def test_a_parity_label_the_model_never_saw_is_named(plain, tmp_path, caplog):
    data = write_rows(tmp_path / "parity.jsonl", {"text": "play jazz", "labels": ["PlayMusic"]},
                      {"text": "book a table", "labels": ["BookRestaurnat"]})
    with caplog.at_level(logging.WARNING):
        code, _ = run_cli("export", "--checkpoint", plain, "--out", tmp_path / "bundle", "--no-quantize",
                          "--parity-data", data)
    assert code == 0
    assert any(f"{data}: 1 label(s) the model was not trained on" in r.getMessage() and "BookRestaurnat (1)"
               in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


# ------------------------------------------------------------ 4. damaged weights are the user's to fix

@pytest.mark.parametrize("file", ["head.safetensors", "tagger.safetensors"])
def test_truncated_weights_are_named(entities, tmp_path, capsys, file):
    weights = entities / file
    weights.write_bytes(weights.read_bytes()[:20])
    code, _ = run_cli("export", "--checkpoint", entities, "--out", tmp_path / "bundle", "--no-quantize")
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT and f"{weights}: cannot read the weights" in err


# ------------------------------------------------------------ 5. max_length checked before the export

@pytest.mark.parametrize("value, reason", [(200, "at most 128"), ("24", "expected an integer"),
                                           (0, "expected an integer")])
def test_a_bad_max_length_is_refused_naming_checkpoint_json(plain, tmp_path, capsys, value, reason):
    edit_meta(plain, max_length=value)
    code, _ = run_cli("export", "--checkpoint", plain, "--out", tmp_path / "bundle", "--no-quantize")
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT
    assert f"{plain / 'checkpoint.json'}: max_length" in err and reason in err


# ------------------------------------------------------------ 6. tag count against the tagger

@pytest.mark.parametrize("tags", [["O", "B-city", "I-city", "B-date"], ["O", "B-a", "I-a", "B-b", "I-b", "B-c"],
                                  None])
def test_tags_that_do_not_match_the_tagger_are_refused_naming_checkpoint_json(entities, tmp_path, capsys, tags):
    edit_meta(entities, entities=None if tags is None else {"tags": tags, "types": [], "weight": 1.0})
    code, _ = run_cli("export", "--checkpoint", entities, "--out", tmp_path / "bundle", "--no-quantize")
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT
    assert f"the entity head has 5 outputs but {entities / 'checkpoint.json'} lists {len(tags or [])}" in err
    assert ".tmp" not in err and "manifest" not in err


# ------------------------------------------------------------ 7. request starts in the parity message

def test_the_parity_error_counts_request_start_mismatches():
    decision = Decision(("a", "b"), activation="sigmoid", thresholds=[0.5, 0.5])
    logits, pooled = np.array([[0.0, 3.0]], np.float32), np.zeros((1, 4), np.float32)
    reference = GraphOutputs(logits, pooled, pooled, starts=tuple_array([(0,)]))
    candidate = GraphOutputs(logits, pooled, pooled, starts=tuple_array([(0, 5)]))
    with pytest.raises(ParityError, match="request starts differ on 1"):
        check_parity(reference, candidate, decision, ["play jazz then call mom"], "test")


# ------------------------------------------------------------ 8. ONNX Runtime's optimizer keeps quiet

def test_the_fusions_log_no_third_party_info_but_keep_its_warnings(plain, tmp_path, caplog, monkeypatch):
    from onnxruntime.transformers import optimizer

    from intentvcs.export.fusion import fuse_encoder
    from intentvcs.export.onnx_export import export_onnx
    from intentvcs.training.model import IntentModel

    real = optimizer.optimize_model

    def optimize_and_warn(*args, **kwargs):
        logging.getLogger("fusion_base").warning("a warning the user should see")
        return real(*args, **kwargs)

    monkeypatch.setattr(optimizer, "optimize_model", optimize_and_warn)
    model = IntentModel.from_checkpoint(plain)
    export_onnx(model, tmp_path / "model.onnx", None)
    with caplog.at_level(logging.INFO):
        caplog.clear()
        assert fuse_encoder(tmp_path / "model.onnx", model.encoder.config)
    chatty = [f"{r.name}: {r.getMessage()}" for r in caplog.records if not r.name.startswith("intentvcs.")]
    assert chatty == ["fusion_base: a warning the user should see"]


# ------------------------------------------------------------ 9. the folder commit

def _bundle_like(folder: Path, text: str) -> Path:
    folder.mkdir()
    (folder / MANIFEST_FILE).write_text(json.dumps({"format": BUNDLE_FORMAT.name, "note": text}))
    return folder


def _commit(final: Path, text: str) -> None:
    with atomic.directory(final, BUNDLE_OUTPUT) as tmp:
        (tmp / MANIFEST_FILE).write_text(json.dumps({"format": BUNDLE_FORMAT.name, "note": text}))


def test_a_failed_commit_leaves_the_earlier_folder_and_no_temporary_one(tmp_path, monkeypatch):
    final = _bundle_like(tmp_path / "bundle", "earlier")
    real = os.replace

    def fail_on_the_new_folder(src, dst):
        if Path(dst) == final and Path(src).name.endswith(".tmp") and ".old-" not in Path(src).name:
            raise OSError(5, "Input/output error")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", fail_on_the_new_folder)
    with pytest.raises(OSError, match="Input/output error"):
        _commit(final, "new")
    assert json.loads((final / MANIFEST_FILE).read_text())["note"] == "earlier"
    assert hidden(tmp_path) == []


def test_a_leftover_old_folder_does_not_block_the_commit(tmp_path):
    final = _bundle_like(tmp_path / "bundle", "earlier")
    stale = tmp_path / f".bundle.old-{os.getpid()}"  # a crashed run's, or one whose deletion failed
    stale.mkdir()
    (stale / "leftover").write_text("x")
    _commit(final, "new")
    assert json.loads((final / MANIFEST_FILE).read_text())["note"] == "new"
    assert hidden(tmp_path) == [stale.name]  # not ours to delete


def test_an_out_that_is_a_symbolic_link_is_named_so(tmp_path):
    target = _bundle_like(tmp_path / "bundle", "earlier")
    link = tmp_path / "current"
    link.symlink_to(target)
    with pytest.raises(FileExistsError, match=f"{link} is a symbolic link"):
        atomic.check_replaceable(link, BUNDLE_OUTPUT)


# ------------------------------------------------------------ 10. the tokenizer truncates as the checkpoint's does

def test_a_tokenizer_that_truncates_on_the_left_is_served_truncating_on_the_left(left, tmp_path):
    from intentvcs.export.exporter import export_bundle
    from intentvcs.training.predict import TorchPredictor

    bundle = tmp_path / "bundle"
    export_bundle(left, bundle, quantize=False, parity_data=short_rows(tmp_path / "rows.jsonl"))
    assert Tokenizer.from_file(str(bundle / "tokenizer.json")).truncation["direction"] == "left"
    served = Engine(bundle, provider="cpu").infer([LONG_TEXT])
    reference = TorchPredictor(left).infer([LONG_TEXT])
    assert np.abs(served.logits - reference.logits).max() <= PARITY_ATOL


# ------------------------------------------------------------ 11. parity probes past max_length, whatever the data

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


# ------------------------------------------------------------ 12. parity gates the embeddings too

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


# ------------------------------------------------------------ 13. --no-references: no utterance in the manifest

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


# ------------------------------------------------------------ 14. the manifest names the runtime that made the graphs

def test_the_manifest_names_the_onnxruntime_that_fused_and_quantised_the_graphs(entities, tmp_path):
    """The fused ops and the int8 graph are ONNX Runtime's making (a runtime without MatMulNBits cannot load
    the weight-only graph): its version is provenance as much as Optimum's and torch's."""
    import onnxruntime

    from intentvcs.export.exporter import export_bundle

    export_bundle(entities, tmp_path / "bundle", quantize=False)
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert f"onnxruntime {onnxruntime.__version__}" in manifest["model"]["exporter"]
