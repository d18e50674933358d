"""The export's int8 gate on parity rows the model cannot be judged on, damaged checkpoints, and what a
failed export writes.

1. parity rows none of whose in-scope rows carries a label of the model's are refused as ``evaluate``
   refuses them (exit 2, naming the file); the accuracy gate is not measured (``None``: int8 then serves
   only when asked) when no in-scope row with a known label is left to judge, and rows with labels the
   model lacks do not count towards the rows that earn a figure its one-row allowance;
2. a hand-edited ``checkpoint.json`` (``entities``, ``backbone``, ``metrics``) is refused when it is read,
   naming the file and the field (exit 2), not by an AttributeError or, after the whole export, by the
   bundle's field;
3. a checkpoint without its tokenizer files (or encoder configuration) is refused naming its ``encoder``
   folder and what is missing, before any weight loads (exit 2, not transformers' TypeError);
4. a parity failure writes no ``--result`` file (an earlier one stays, as the earlier bundle does);
5. ``export --name``'s help says which folder names the model by default.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from intentvcs.cli import exit_codes
from intentvcs.cli.main import main
from intentvcs.core.dataio import Example
from intentvcs.core.decision import Decision
from intentvcs.core.oos import ThresholdRule
from intentvcs.core.outputs import GraphOutputs
from tests.helpers.bundle import DEFAULT_LABELS, make_tiny_checkpoint


def run_cli(*args) -> tuple[int, str]:
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main([str(arg) for arg in args])
    return code, stdout.getvalue()


def write_rows(path: Path, rows: list[tuple[str, list[str]]]) -> Path:
    path.write_text("".join(json.dumps({"text": text, "labels": labels}) + "\n" for text, labels in rows))
    return path


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A tiny checkpoint with an entity head (its meta has ``entities``); never altered by a test."""
    return make_tiny_checkpoint(tmp_path_factory.mktemp("gate") / "checkpoint", entity_types=("city",))


def copy_of(checkpoint: Path, tmp_path: Path, name: str = "copy") -> Path:
    target = tmp_path / name
    shutil.copytree(checkpoint, target)
    return target


# ------------------------------------------------------------ 1. parity rows of labels the model lacks

OTHER_TEAMS_ROWS = [(text, ["SomeoneElsesIntent"]) for text in
                    ("play music", "book a table for two", "will it rain tomorrow", "rate this book", "call mom")]


def test_parity_rows_of_none_of_the_models_labels_are_refused_as_evaluate_refuses_them(checkpoint, tmp_path,
                                                                                        capsys):
    rows = write_rows(tmp_path / "parity.jsonl", OTHER_TEAMS_ROWS)
    code, _ = run_cli("evaluate", "--checkpoint", checkpoint, "--data", rows, "--out", tmp_path / "eval.json")
    evaluate_error = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == exit_codes.BAD_INPUT and "no row carries a label the model was trained on" in evaluate_error

    code, stdout = run_cli("export", "--checkpoint", checkpoint, "--out", tmp_path / "bundle", "--parity-data", rows)
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == exit_codes.BAD_INPUT and stdout == ""
    assert error.startswith(f"intentvcs export: error: {rows}: no row carries a label the model was trained on")
    assert "SomeoneElsesIntent (5)" in error
    assert not (tmp_path / "bundle").exists()


def test_held_out_rows_refuse_rows_of_unknown_labels_and_keep_rows_all_out_of_scope(tmp_path):
    from intentvcs.export.parity import held_out_rows

    with pytest.raises(ValueError, match="no row carries a label the model was trained on"):
        held_out_rows(write_rows(tmp_path / "other.jsonl", OTHER_TEAMS_ROWS + [("hi", [])]), DEFAULT_LABELS)
    # As evaluate: rows all out of scope have no label to know, and one known label among unknown ones will do.
    assert len(held_out_rows(write_rows(tmp_path / "oos.jsonl", [("hi", []), ("ok", [])]), DEFAULT_LABELS)
               .examples) == 2
    assert len(held_out_rows(write_rows(tmp_path / "some.jsonl", OTHER_TEAMS_ROWS + [("play", ["PlayMusic"])]),
                             DEFAULT_LABELS).examples) == 6


def _outputs(top: list[int], labels: int = 3) -> GraphOutputs:
    logits = np.full((len(top), labels), -4.0, dtype=np.float32)
    logits[np.arange(len(top)), top] = 4.0
    pooled = np.zeros((len(top), 4), dtype=np.float32)
    return GraphOutputs(logits, pooled, pooled, None)


DECISION = Decision(("a", "b", "c"), activation="softmax", thresholds=[0.5] * 3, oos=ThresholdRule(0.9))


@pytest.mark.parametrize("labels", [["zzz"], []], ids=["unknown labels", "out of scope"])
def test_the_gate_is_not_measured_without_an_in_scope_row_of_a_known_label(labels):
    from intentvcs.export.quantize import accuracy_gate

    examples = [Example(f"text {i}", tuple(labels)) for i in range(40)]
    top = [i % 3 for i in range(40)]
    assert accuracy_gate(_outputs(top), _outputs(top), DECISION, examples, "rows.jsonl") is None


def test_rows_of_unknown_labels_earn_no_one_row_allowance():
    from intentvcs.export.quantize import MAX_LOSS, accuracy_gate

    # 10 rows of the model's labels (too few for one row's allowance), 30 of a label it lacks.
    gold = [i % 3 for i in range(10)]
    examples = ([Example(f"known {i}", ("abc"[g],)) for i, g in enumerate(gold)]
                + [Example(f"other {i}", ("zzz",)) for i in range(30)])
    fp32 = gold + [0] * 30
    one_wrong = [(gold[0] + 1) % 3] + gold[1:] + [0] * 30
    gate = accuracy_gate(_outputs(fp32), _outputs(one_wrong), DECISION, examples, "rows.jsonl")
    assert gate["figures"]["accuracy"]["allowed"] == MAX_LOSS and gate["figures"]["accuracy"]["loss"] > MAX_LOSS
    assert not gate["passed"]


def test_with_enough_known_rows_one_row_of_the_figure_is_allowed_and_no_more():
    from intentvcs.export.quantize import accuracy_gate

    # 20 rows of the model's labels earn the allowance: one row's share of the 40 rows the figure is read over.
    gold = [i % 3 for i in range(20)]
    examples = ([Example(f"known {i}", ("abc"[g],)) for i, g in enumerate(gold)]
                + [Example(f"other {i}", ("zzz",)) for i in range(20)])
    fp32 = gold + [0] * 20
    one, two = ([(g + 1) % 3 if i < wrong else g for i, g in enumerate(gold)] + [0] * 20 for wrong in (1, 2))
    gate = accuracy_gate(_outputs(fp32), _outputs(one), DECISION, examples, "rows.jsonl")
    assert gate["passed"] and gate["figures"]["accuracy"]["allowed"] == pytest.approx(1 / 40)
    assert not accuracy_gate(_outputs(fp32), _outputs(two), DECISION, examples, "rows.jsonl")["passed"]


def test_parity_rows_all_out_of_scope_leave_int8_ungated_and_fp32_served(checkpoint, tmp_path, capsys):
    from intentvcs.service.engine import Engine

    rows = write_rows(tmp_path / "oos.jsonl", [(text, []) for text in
                                               ("what is the capital of australia", "tell me a joke", "hi there")])
    code, stdout = run_cli("export", "--checkpoint", checkpoint, "--out", tmp_path / "bundle", "--parity-data", rows)
    err = capsys.readouterr().err
    assert code == 0, err
    assert json.loads(stdout)["quantization"]["gate"] is None
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert manifest["quantization"]["gate"] is None
    assert "int8 gate  not measured" in err
    assert not Engine(tmp_path / "bundle", provider="cpu").quantized


# ------------------------------------------------------------ 2. hand-edited checkpoint.json

@pytest.mark.parametrize("field, value, reason", [
    ("entities", "city", "expected an object"),
    ("entities", {"tags": "O"}, "tags"),
    ("entities", {"tags": ["O", 3]}, "tags"),
    ("entities", {"types": ["city"]}, "tags"),
    ("metrics", [1], "expected an object"),
    ("backbone", 5, "expected a non-empty string"),
    ("backbone", "", "expected a non-empty string"),
])
def test_a_hand_edited_field_is_refused_when_the_checkpoint_is_read(checkpoint, tmp_path, field, value, reason):
    from intentvcs.training.checkpoint import read_checkpoint_meta

    copy = copy_of(checkpoint, tmp_path)
    meta = json.loads((copy / "checkpoint.json").read_text())
    (copy / "checkpoint.json").write_text(json.dumps({**meta, field: value}))
    with pytest.raises(ValueError, match=re.escape(f"{copy / 'checkpoint.json'}: {field}:")) as info:
        read_checkpoint_meta(copy)
    assert reason in str(info.value)


def test_a_checkpoint_of_no_entities_or_metrics_is_still_read(checkpoint, tmp_path):
    from intentvcs.training.checkpoint import checkpoint_tags, read_checkpoint_meta

    copy = copy_of(checkpoint, tmp_path)
    meta = json.loads((copy / "checkpoint.json").read_text())
    assert checkpoint_tags(read_checkpoint_meta(copy)) == ["O", "B-city", "I-city"]
    for body in ({**meta, "entities": None}, {k: v for k, v in meta.items() if k not in ("entities", "metrics")}):
        (copy / "checkpoint.json").write_text(json.dumps(body))
        assert checkpoint_tags(read_checkpoint_meta(copy)) == []


def test_checkpoint_tags_names_the_file_of_a_bad_entities_field():
    from intentvcs.training.checkpoint import checkpoint_tags

    with pytest.raises(ValueError, match=r"^ckpt/checkpoint\.json: entities: expected an object"):
        checkpoint_tags({"entities": "city"}, "ckpt/checkpoint.json")
    with pytest.raises(ValueError, match=r"checkpoint\.json: entities"):
        checkpoint_tags({"entities": {"tags": "O"}})


@pytest.mark.parametrize("field, value", [("entities", "city"), ("backbone", 5), ("metrics", [1])])
def test_export_and_evaluate_refuse_a_hand_edited_checkpoint_with_exit_2_naming_it(checkpoint, tmp_path, capsys,
                                                                                   field, value):
    copy = copy_of(checkpoint, tmp_path)
    meta = json.loads((copy / "checkpoint.json").read_text())
    (copy / "checkpoint.json").write_text(json.dumps({**meta, field: value}))
    rows = write_rows(tmp_path / "rows.jsonl", [("play music", ["PlayMusic"]), ("hi", [])])
    for command in (("export", "--checkpoint", copy, "--out", tmp_path / "bundle", "--no-quantize"),
                    ("evaluate", "--checkpoint", copy, "--data", rows, "--out", tmp_path / "eval.json")):
        code, _ = run_cli(*command)
        err = capsys.readouterr().err
        assert code == exit_codes.BAD_INPUT, err
        assert f"{copy / 'checkpoint.json'}: {field}:" in err.strip().splitlines()[-1]
    assert not (tmp_path / "bundle").exists() and not (tmp_path / "eval.json").exists()


# ------------------------------------------------------------ 3. a checkpoint without its tokenizer files

def _without_tokenizer(folder: Path) -> None:
    for pattern in ("tok*", "vocab*"):
        for path in (folder / "encoder").glob(pattern):
            path.unlink()


def test_a_checkpoint_without_its_tokenizer_is_refused_naming_its_encoder_folder(checkpoint, tmp_path, capsys):
    copy = copy_of(checkpoint, tmp_path)
    _without_tokenizer(copy)
    code, stdout = run_cli("export", "--checkpoint", copy, "--out", tmp_path / "bundle", "--no-quantize")
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == exit_codes.BAD_INPUT and stdout == "", error
    assert error.startswith(f"intentvcs export: error: {copy / 'encoder'}: ") and "tokenizer.json" in error
    assert not (tmp_path / "bundle").exists()


def test_the_encoder_folder_is_checked_before_any_weight_loads(checkpoint, tmp_path):
    from intentvcs.training.model import IntentModel

    copy = copy_of(checkpoint, tmp_path)
    _without_tokenizer(copy)
    (copy / "head.safetensors").write_bytes(b"garbage")  # read first, it would be the error named
    with pytest.raises(ValueError, match=re.escape(f"{copy / 'encoder'}: ") + ".*tokenizer.json"):
        IntentModel.from_checkpoint(copy)
    (copy / "encoder" / "config.json").unlink()
    with pytest.raises(ValueError, match=re.escape(f"{copy / 'encoder'}: ") + ".*config.json"):
        IntentModel.from_checkpoint(copy)


def test_load_tokenizer_names_a_folder_without_tokenizer_files(checkpoint, tmp_path):
    from intentvcs.training.model import load_tokenizer

    copy = copy_of(checkpoint, tmp_path)
    _without_tokenizer(copy)
    with pytest.raises(ValueError, match=re.escape(f"{copy / 'encoder'}: ") + ".*tokenizer"):
        load_tokenizer(copy / "encoder")


# ------------------------------------------------------------ 4. a parity failure writes no --result

def test_a_parity_failure_writes_no_result_and_keeps_an_earlier_one(checkpoint, tmp_path, monkeypatch, capsys):
    import intentvcs.export.parity as parity

    bundle, result = tmp_path / "bundle", tmp_path / "result.json"
    args = ("export", "--checkpoint", checkpoint, "--out", bundle, "--no-quantize", "--result", result)
    code, _ = run_cli(*args)
    assert code == 0 and json.loads(result.read_text())["ok"]
    before = {path.name: path.read_bytes() for path in (*bundle.iterdir(), result)}

    monkeypatch.setattr(parity, "_passes", lambda report, atol: False)  # a graph that fails parity
    capsys.readouterr()
    code, stdout = run_cli(*args)
    assert code == exit_codes.GATE_FAILED
    assert "no bundle written" in capsys.readouterr().err
    report = json.loads(stdout)  # the failure's report goes to stdout only
    assert not report["ok"] and report["bundle"] is None and not report["parity"]["passed"]
    assert {path.name: path.read_bytes() for path in (*bundle.iterdir(), result)} == before

    code, _ = run_cli("export", "--checkpoint", checkpoint, "--out", tmp_path / "fresh", "--no-quantize",
                      "--result", tmp_path / "fresh.json")
    assert code == exit_codes.GATE_FAILED
    assert not (tmp_path / "fresh").exists() and not (tmp_path / "fresh.json").exists()


# ------------------------------------------------------------ 5. --name's help

def test_the_name_help_says_what_default_name_does(capsys):
    from intentvcs.export.exporter import default_name

    with pytest.raises(SystemExit):
        main(["export", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "default: the checkpoint folder's own name" in help_text
    assert "'default' for runs/default/checkpoint" in help_text
    assert default_name("runs/default/checkpoint") == "default"
    assert default_name("runs/team/model-v2") == "model-v2"
