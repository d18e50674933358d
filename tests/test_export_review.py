"""The export's review findings: outputs committed together, inputs never overwritten, checkpoints and parity
data checked against the model before the long work, quiet logs, and a folder commit that cleans up.

Each test exports (or refuses) a tiny checkpoint (``tests.helpers.bundle``) in about a second.
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
import pytest

from intentvcs.cli import exit_codes
from intentvcs.cli.main import main
from intentvcs.core import atomic
from intentvcs.core.decision import Decision
from intentvcs.core.manifest import BUNDLE_FORMAT, BUNDLE_OUTPUT, MANIFEST_FILE
from intentvcs.core.outputs import GraphOutputs, tuple_array
from intentvcs.export.parity import ParityError, check_parity
from tests.helpers.bundle import make_tiny_checkpoint

ENTITY_TYPES = ("city", "date")  # 5 BIO tags: O, B-city, I-city, B-date, I-date


def run_cli(*args: str) -> tuple[int, str]:
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main([str(arg) for arg in args])
    return code, stdout.getvalue()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> Path:
    """``plain`` (intent head only) and ``entities`` (a tagger over ``ENTITY_TYPES``), written once."""
    root = tmp_path_factory.mktemp("review")
    make_tiny_checkpoint(root / "plain")
    make_tiny_checkpoint(root / "entities", entity_types=ENTITY_TYPES)
    return root


@pytest.fixture
def plain(checkpoints, tmp_path) -> Path:
    """A copy of the plain checkpoint this test may damage."""
    return Path(shutil.copytree(checkpoints / "plain", tmp_path / "checkpoint"))


@pytest.fixture
def entities(checkpoints, tmp_path) -> Path:
    return Path(shutil.copytree(checkpoints / "entities", tmp_path / "checkpoint"))


def edit_meta(checkpoint: Path, **fields) -> None:
    path = checkpoint / "checkpoint.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


def write_rows(path: Path, *rows: dict) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def hidden(folder: Path) -> list[str]:
    """Leftovers of a commit: the temporary siblings are hidden."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


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
