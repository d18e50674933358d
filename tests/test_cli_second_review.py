"""CLI second review: each test failed on the code before its fix.

- ``evaluate``, ``robustness`` and ``audit --checkpoint ""`` (``--checkpoint "$CKPT"``, the variable unset) was an
  internal error, exit 3 and a traceback, where an empty path is the user's to fix (exit 2).
- ``audit`` and ``robustness --train ""`` ran as if no ``--train`` were given (the audit then advised passing
  ``--train``), and an empty ``--md``, ``--html``, ``--bundle`` or ``--data`` was read as the working folder.
- ``--out -`` wrote a file named ``-`` in the working folder (the summary on standard output reading as if the
  answers were there), where ``--out /dev/stdout`` writes standard output; ``-`` now is standard output for every
  file output, and is refused for an output folder (``export --out -`` made a bundle named ``-``).
- ``export --name ""`` (``--name "$MODEL"``, the variable unset) exported under the folder's name without a word,
  the name /status and the metrics then report.
- ``train``, ``refit`` and ``demo`` took the same empty paths and ``--out -`` (a checkpoint folder named ``-``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from intentvcs.cli import exit_codes
from intentvcs.cli.main import main
from tests.helpers.bundle import DEFAULT_LABELS, make_tiny_bundle


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return make_tiny_bundle(tmp_path_factory.mktemp("second-review") / "model")


def run(argv: list[str]) -> int:
    """``main(argv)``'s exit status, an argparse refusal (``SystemExit``) included."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def labelled(path: Path, rows: int = 3) -> Path:
    path.write_text("".join(json.dumps({"text": f"play song number {i}", "labels": [DEFAULT_LABELS[0]]}) + "\n"
                            for i in range(rows)), encoding="utf-8")
    return path


@pytest.fixture
def no_model(monkeypatch):
    """Any model load fails the test: every refusal below comes before it."""
    def load(args):
        raise AssertionError("the model was loaded")

    for command in ("evaluate", "robustness", "audit"):
        monkeypatch.setattr(f"intentvcs.cli.commands.{command}.load_predictor", load)


@pytest.mark.parametrize("command", ["evaluate", "robustness", "audit"])
def test_an_empty_checkpoint_path_is_bad_input_not_an_internal_error(command, tmp_path, capsys, no_model):
    data = str(labelled(tmp_path / "d.jsonl"))
    given = ["--batch", data] if command == "audit" else ["--data", data]
    code = run([command, "--checkpoint", "", *given, "--out", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT, err
    assert "Traceback" not in err and "argument --checkpoint: empty" in err, err


@pytest.mark.parametrize("command, option", [("audit", "--train"), ("robustness", "--train"), ("robustness", "--md"),
                                             ("audit", "--html"), ("evaluate", "--bundle"), ("evaluate", "--data")])
def test_an_empty_path_is_refused_not_ignored_or_read_as_the_working_folder(command, option, tmp_path, capsys,
                                                                            no_model):
    data = str(labelled(tmp_path / "d.jsonl"))
    options = {"--bundle": str(tmp_path / "bundle"), "--batch" if command == "audit" else "--data": data,
               "--out": str(tmp_path / "r.json"), option: ""}
    code = run([command, *(word for pair in options.items() for word in pair)])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT, err
    assert f"argument {option}: empty" in err, err
    assert not (tmp_path / "r.json").exists()


def test_predict_out_dash_is_standard_output_and_writes_no_file(bundle, tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    data = labelled(tmp_path / "d.jsonl")
    assert run(["predict", "--bundle", str(bundle), "--data", str(data), "--out", "-"]) == exit_codes.OK
    out, err = capfd.readouterr()
    assert not (tmp_path / "-").exists()
    answers = [json.loads(line) for line in out.splitlines()]
    assert [answer["text"] for answer in answers] == [f"play song number {i}" for i in range(3)]
    assert json.loads(err.strip().splitlines()[-1])["rows"] == 3  # the summary on stderr, off the answers


def test_evaluate_out_dash_is_standard_output_as_dev_stdout_is(bundle, tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    data = labelled(tmp_path / "d.jsonl")
    assert run(["evaluate", "--bundle", str(bundle), "--data", str(data), "--out", "-"]) == exit_codes.OK
    out, _ = capfd.readouterr()
    assert not (tmp_path / "-").exists()
    assert json.loads(out)["n"] == 3  # one document: the figures, the headline off standard output


def test_convert_out_dash_is_standard_output(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "data_full.json"
    source.write_text(json.dumps({"train": [["hello there", "greet"]], "oos_train": [["what is love", "oos"]]}),
                      encoding="utf-8")
    assert run(["convert", "--format", "clinc150", "--input", str(source), "--split", "train",
                "--out", "-"]) == exit_codes.OK
    out, _ = capfd.readouterr()
    assert not (tmp_path / "-").exists()
    assert [json.loads(line)["text"] for line in out.splitlines()] == ["hello there", "what is love"]


@pytest.fixture
def no_export(monkeypatch):
    def export_bundle(*args, **kwargs):
        raise AssertionError("the export ran")

    monkeypatch.setattr("intentvcs.export.exporter.export_bundle", export_bundle)


def test_export_out_dash_is_refused_not_a_bundle_named_dash(bundle, tmp_path, monkeypatch, capsys, no_export):
    monkeypatch.chdir(tmp_path)
    code = run(["export", "--checkpoint", str(bundle.parent / "checkpoint"), "--out", "-"])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT and "argument --out: - is standard output" in err, err
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("name", ["", "  "])
def test_export_refuses_an_empty_name_rather_than_use_the_folders(name, bundle, tmp_path, capsys, no_export):
    code = run(["export", "--checkpoint", str(bundle.parent / "checkpoint"), "--out", str(tmp_path / "b"),
                "--name", name])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT and "argument --name: empty" in err, err


@pytest.mark.parametrize("argv", [
    ["train", "--train", "", "--valid", "V", "--out", "O"],
    ["train", "--train", "T", "--valid", "V", "--out", ""],
    ["train", "--train", "T", "--valid", "V", "--out", "-"],
    ["train", "--train", "T", "--valid", "V", "--out", "O", "--relations", " "],
    ["refit", "--checkpoint", "", "--train", "T", "--valid", "V"],
    ["refit", "--checkpoint", "C", "--train", "T", "--valid", ""],
    ["demo", "--out", "-", "--no-serve"],
])
def test_train_refit_and_demo_refuse_an_empty_path_or_a_dash_folder_as_the_other_commands_do(argv, tmp_path,
                                                                                             monkeypatch, capsys):
    """The same options as the other commands: an empty path (an unset shell variable) was read as the working
    folder or as no option, and ``--out -`` named a checkpoint folder ``-``."""
    monkeypatch.chdir(tmp_path)
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert "empty (an unset shell variable?)" in err or "- is standard output" in err
    assert not any(tmp_path.iterdir())
