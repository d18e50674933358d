"""The command line's review findings: each refused early, named by the user's file or option, exit 2.

An output never replaces an input or lands in the model it was computed from; an unwritable output folder
fails before the work; data that is not UTF-8 is named with file and line; an option the command would
ignore is refused; ``-v`` is this package's debug logging, not every library's; a reader closing the pipe
ends the command quietly.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from intentvcs.cli import exit_codes
from intentvcs.cli.main import build_parser, main
from intentvcs.core.dataio import DataError
from tests.test_options import subcommand

ROOT = Path(__file__).resolve().parents[1]
ROW = json.dumps({"text": "play some music", "labels": ["PlayMusic"]}) + "\n"


def rows(path: Path, *lines: str) -> str:
    path.write_text("".join(lines), encoding="utf-8")
    return str(path)


def slot_folder(root: Path, seq_in: bytes = b"play music \nbook a table \n") -> Path:
    """A SNIPS-style data set folder with a two-row train split."""
    folder = root / "train"
    folder.mkdir(parents=True)
    (folder / "seq.in").write_bytes(seq_in)
    (folder / "seq.out").write_text("O O \nO O O \n", encoding="utf-8")
    (folder / "label").write_text("PlayMusic\nBookRestaurant\n", encoding="utf-8")
    return root


def option(command: str, flag: str) -> argparse.Action:
    return next(a for a in subcommand(command)._actions if flag in a.option_strings)


def no_model(monkeypatch, module) -> None:
    """Fail the test if ``module``'s command loads a model: each refusal here comes before it."""
    monkeypatch.setattr(module, "load_predictor", lambda args: pytest.fail("the model was loaded"))


# ------------------------------------------------------- 1, 2, 9: no output replaces an input
def test_robustness_refuses_a_report_that_is_the_training_file(tmp_path, capsys, monkeypatch):
    from intentvcs.cli.commands import robustness

    no_model(monkeypatch, robustness)
    data, train = rows(tmp_path / "test.jsonl", ROW), rows(tmp_path / "train.jsonl", ROW)
    code = main(["robustness", "--bundle", str(tmp_path / "bundle"), "--data", data, "--train", train,
                 "--out", train])
    assert code == exit_codes.BAD_INPUT
    assert f"the output {train} is the input {train}" in capsys.readouterr().err
    assert Path(train).read_text(encoding="utf-8") == ROW


def test_train_refuses_a_result_that_is_the_relations_file(tmp_path, capsys):
    relations = rows(tmp_path / "relations.json", '{"labels": []}\n')
    # Rows that fail the data checks right after the outputs' (if those let the result through, no training runs).
    other = json.dumps({"text": "book a table", "labels": ["BookRestaurant"]}) + "\n"
    code = main(["train", "--train", rows(tmp_path / "t.jsonl", ROW), "--valid", rows(tmp_path / "v.jsonl", other),
                 "--out", str(tmp_path / "ckpt"), "--relations", relations, "--result", relations])
    assert code == exit_codes.BAD_INPUT
    assert f"the output {relations} is the input {relations}" in capsys.readouterr().err
    assert Path(relations).read_text(encoding="utf-8") == '{"labels": []}\n'


def test_audit_refuses_an_output_that_is_its_config_file(tmp_path, capsys, monkeypatch):
    from intentvcs.cli.commands import audit

    no_model(monkeypatch, audit)
    config = rows(tmp_path / "audit.json", "{}\n")
    code = main(["audit", "--bundle", str(tmp_path / "bundle"), "--batch", rows(tmp_path / "b.jsonl", ROW),
                 "--out", str(tmp_path / "report.json"), "--html", config, "--config", config])
    assert code == exit_codes.BAD_INPUT
    assert f"the output {config} is the input {config}" in capsys.readouterr().err
    assert Path(config).read_text(encoding="utf-8") == "{}\n"


@pytest.mark.parametrize("source", ["--bundle", "--checkpoint"])
def test_evaluate_refuses_an_output_inside_the_model(source, tmp_path, capsys, monkeypatch):
    from intentvcs.cli.commands import evaluate

    no_model(monkeypatch, evaluate)
    model = tmp_path / "model"
    model.mkdir()
    manifest = model / "manifest.json"
    manifest.write_text("{}", encoding="utf-8")
    code = main(["evaluate", source, str(model), "--data", rows(tmp_path / "d.jsonl", ROW), "--out", str(manifest)])
    assert code == exit_codes.BAD_INPUT
    assert f"the output {manifest} lies in the input folder {model}" in capsys.readouterr().err
    assert manifest.read_text(encoding="utf-8") == "{}"


def test_predict_refuses_an_output_inside_the_bundle(tmp_path, capsys):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    out = bundle / "answers.jsonl"
    code = main(["predict", "--bundle", str(bundle), "--data", rows(tmp_path / "d.jsonl", ROW), "--out", str(out)])
    assert code == exit_codes.BAD_INPUT
    assert f"the output {out} lies in the input folder {bundle}" in capsys.readouterr().err
    assert not out.exists()


# ------------------------------------------------------- 4: an unwritable folder fails first
@pytest.fixture
def read_only(tmp_path, monkeypatch) -> Path:
    """A folder no new file can be created in. Root ignores its mode, so for root the kernel's refusal
    (EACCES on creating a file there, what a read-only mount gives as EROFS) is simulated at ``os.open``."""
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    if os.geteuid() == 0:
        real_open = os.open

        def refusing_open(path, flags, *args, **kwargs):
            inside = Path(path) == folder or Path(path).parent == folder
            if inside and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", refusing_open)
    yield folder
    folder.chmod(0o700)


def test_an_output_file_in_an_unwritable_folder_is_refused_before_the_work(read_only, tmp_path, capsys):
    out = read_only / "train.jsonl"
    code = main(["convert", "--format", "snips", "--input", str(slot_folder(tmp_path / "snips")), "--split", "train",
                 "--out", str(out)])
    captured = capsys.readouterr()
    assert code == exit_codes.BAD_INPUT
    assert f"cannot write {out}: {read_only} is not writable" in captured.err, captured.err
    assert ".tmp" not in captured.err and captured.out == ""  # before the work: no summary printed


def test_an_output_folder_in_an_unwritable_folder_is_refused_before_the_work(read_only, tmp_path, capsys):
    out = read_only / "mix"
    code = main(["build-mix", "--dataset", "snips", "--data-root", str(tmp_path / "missing"), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT
    assert f"cannot write {out}: {read_only} is not writable" in err, err


# ------------------------------------------------------- 6: demo checks its port and folder first
@pytest.fixture
def no_training(monkeypatch):
    from intentvcs.training import pipeline

    monkeypatch.setattr(pipeline, "train_pipeline", lambda *a, **k: pytest.fail("the demo trained"))


def test_demo_refuses_a_busy_port_before_training(no_training, tmp_path, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = main(["demo", "--out", str(tmp_path / "demo"), "--port", str(port)])
    assert code == exit_codes.BAD_INPUT
    assert f"127.0.0.1:{port}: the port is already in use" in capsys.readouterr().err


def test_demo_refuses_a_folder_it_did_not_write_before_training_and_its_advice_works(no_training, tmp_path,
                                                                                      capsys):
    out = tmp_path / "demo"
    (out / "bundle").mkdir(parents=True)
    (out / "bundle" / "notes.txt").write_text("mine", encoding="utf-8")
    code = main(["demo", "--out", str(out), "--no-serve"])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT
    assert f"{out / 'bundle'} exists and holds no manifest.json" in err, err
    # The advice names an option the demo has.
    assert "--force" in err and "--force" in subcommand("demo").format_help()


# ------------------------------------------------------- 7: not UTF-8, with file and line
def test_a_snips_folder_not_in_utf8_names_file_and_line(tmp_path, capsys):
    root = slot_folder(tmp_path / "snips", seq_in=b"play music \nbook a caf\xe9 \n")
    code = main(["convert", "--format", "snips", "--input", str(root), "--split", "train",
                 "--out", str(tmp_path / "o.jsonl")])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT
    assert f"{root / 'train' / 'seq.in'}:2: not UTF-8: byte 0xe9 at column 11" in err, err


def test_a_clinc150_file_not_in_utf8_names_file_and_line(tmp_path):
    from intentvcs.training.loaders import clinc150

    path = tmp_path / "data_full.json"
    path.write_bytes(b'{\n"train": [["caf\xe9", "x"]]\n}\n')
    with pytest.raises(DataError, match=r"data_full\.json:2: not UTF-8: byte 0xe9 at column 16"):
        clinc150.load_split(path, "train")


def test_a_relations_file_not_in_utf8_names_file_and_line(tmp_path):
    from intentvcs.core.relations import LabelRelations

    path = tmp_path / "relations.json"
    path.write_bytes(b'{\n  "labels": ["caf\xe9"]\n}\n')
    with pytest.raises(DataError, match=r"relations\.json:2: not UTF-8: byte 0xe9 at column 18"):
        LabelRelations.load(path)


# ------------------------------------------------------- 8: no option is accepted and ignored
def test_predict_refuses_cpus_per_worker_without_ray(tmp_path, capsys):
    code = main(["predict", "--bundle", str(tmp_path / "b"), "--data", rows(tmp_path / "d.jsonl", ROW),
                 "--out", str(tmp_path / "o.jsonl"), "--cpus-per-worker", "4"])
    assert code == exit_codes.BAD_INPUT
    assert "--cpus-per-worker apply to --engine ray only" in capsys.readouterr().err
    assert option("predict", "--cpus-per-worker").default is None
    assert "(default: 1)" in option("predict", "--cpus-per-worker").help


@pytest.mark.parametrize("given, named", [
    (["--quantized", "on"], "--quantized is"), (["--provider", "cuda"], "--provider is"),
    (["--quantized", "off", "--provider", "cpu"], "--quantized and --provider are")])
def test_evaluate_refuses_bundle_options_with_a_checkpoint(given, named, tmp_path, capsys, monkeypatch):
    from intentvcs.cli.commands import evaluate

    no_model(monkeypatch, evaluate)
    code = main(["evaluate", "--checkpoint", str(tmp_path / "ckpt"), "--data", rows(tmp_path / "d.jsonl", ROW),
                 "--out", str(tmp_path / "o.json"), *given])
    assert code == exit_codes.BAD_INPUT
    assert f"{named} for --bundle only" in capsys.readouterr().err


def test_a_bundles_options_keep_their_defaults_in_help():
    from intentvcs.service.settings import DEFAULT_QUANTIZED, Settings

    assert f"(default {DEFAULT_QUANTIZED})" in option("evaluate", "--quantized").help
    assert f"(default {Settings.provider})" in option("evaluate", "--provider").help


def test_an_augment_mix_without_augmentation_is_refused():
    from intentvcs.training.config import TrainConfig

    with pytest.raises(ValueError, match="augment_mix needs augment_ratio > 0"):
        TrainConfig(augment_mix={"nature": 1.0})
    assert TrainConfig(augment_ratio=1.0, augment_mix={"nature": 1.0}).augment_mix == {"nature": 1.0}


# ------------------------------------------------------- 10: -v is this package's debug logging
LOGGING_RUN = """
import logging, sys
from intentvcs.cli.commands import data
from intentvcs.cli.main import main

def noisy(args):
    for name in ("matplotlib.font_manager", "intentvcs.cli.commands.data", "intentvcs.training.trainer"):
        logging.getLogger(name).debug("%s debug", name)
        logging.getLogger(name).info("%s info", name)
    return 0

data.run_convert = noisy
sys.exit(main([*sys.argv[1:], "convert", "--format", "snips", "--input", "x", "--split", "train", "--out", "o"]))
"""


@pytest.mark.parametrize("verbose", [True, False])
def test_verbose_is_this_packages_debug_not_every_librarys(verbose):
    run = subprocess.run([sys.executable, "-c", LOGGING_RUN, *(["-v"] if verbose else [])], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "matplotlib" not in run.stderr  # neither its debug nor its info lines
    for ours in ("intentvcs.cli.commands.data", "intentvcs.training.trainer"):
        assert f"{ours} info" in run.stderr
        assert (f"{ours} debug" in run.stderr) == verbose


# ------------------------------------------------------- 11: defaults shown, one home
def test_data_root_defaults_to_intentvcs_data(tmp_path, monkeypatch):
    monkeypatch.setenv("INTENTVCS_DATA", str(tmp_path))
    for command in ("build-vcs", "build-mix"):
        args = build_parser().parse_args([command, "--dataset", "snips", "--out", "o"])
        assert args.data_root == str(tmp_path)
        assert "$INTENTVCS_DATA" in option(command, "--data-root").help


@pytest.mark.parametrize("command, flag", [("build-vcs", "--data-root"), ("build-mix", "--data-root"),
                                           ("demo", "--out"), ("demo", "--port"), ("serve", "--port"),
                                           ("robustness", "--metric")])
def test_help_shows_the_default(command, flag, monkeypatch):
    monkeypatch.delenv("INTENTVCS_DATA", raising=False)
    action = option(command, flag)
    assert action.help and "default" in action.help, (command, flag, action.help)
    assert str(action.default) in subcommand(command).format_help()


# ------------------------------------------------------- 12: messages that say what is wrong
def test_convert_clinc150_given_a_folder_says_so(tmp_path, capsys):
    code = main(["convert", "--format", "clinc150", "--input", str(tmp_path), "--split", "train",
                 "--out", str(tmp_path / "o.jsonl")])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT
    assert f"{tmp_path}: is a folder; clinc150 reads a data_*.json file" in err, err


def test_convert_multiwoz_given_the_zip_says_to_give_its_folder(tmp_path, capsys):
    archive = tmp_path / "val.json.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("val.json", "{}")
    code = main(["convert", "--format", "multiwoz", "--input", str(archive), "--split", "valid",
                 "--out", str(tmp_path / "o.jsonl")])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT
    assert f"{archive}: is a file; multiwoz reads the data set folder" in err, err
    assert "val.json.zip/val.json.zip" not in err


def test_serve_names_its_threads_option_not_the_variable(tmp_path, capsys):
    (tmp_path / "manifest.json").write_text("{}", encoding="utf-8")
    code = main(["serve", "--bundle", str(tmp_path), "--threads", "0"])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT
    assert "--threads must be >= 1, got 0" in err and "INTENTVCS_THREADS" not in err, err


def test_a_reader_closing_the_pipe_ends_the_command_quietly(tmp_path):
    root = slot_folder(tmp_path / "snips")
    out = tmp_path / "o.jsonl"
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader (head -1) has gone before the command writes
    try:
        run = subprocess.run([sys.executable, "-m", "intentvcs.cli.main", "convert", "--format", "snips", "--input",
                              str(root), "--split", "train", "--out", str(out)], cwd=ROOT, stdout=write_end,
                             stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert run.returncode == exit_codes.BROKEN_PIPE, run.stderr
    assert run.stderr == ""
    assert len(out.read_text(encoding="utf-8").splitlines()) == 2  # the file was written all the same


def test_the_audit_config_is_still_checked_as_the_command_line_is_read(tmp_path, capsys):
    config = rows(tmp_path / "audit.json", '{"high": 2}\n')
    with pytest.raises(SystemExit) as caught:
        main(["audit", "--bundle", "b", "--batch", "b.jsonl", "--out", "r.json", "--config", config])
    assert caught.value.code == exit_codes.BAD_INPUT
    assert f"argument --config: {config}: AuditConfig.high must be in [0, 1], got 2" in capsys.readouterr().err
    parsed = build_parser().parse_args(["audit", "--bundle", "b", "--batch", "b.jsonl", "--out", "r.json"])
    assert parsed.config is None


def test_a_settings_refusal_names_the_option_not_the_field(capsys):
    """"learning_rate must be > 0" (the setting's field, checked where every caller meets it) named nothing
    the user typed: on the command line it reads as the option, "--lr must be > 0"."""
    from intentvcs.cli import exit_codes
    from intentvcs.cli.main import main

    data = "training/default_data/assistant"
    for option, value, said in (("--lr", "-1", "--lr must be > 0"), ("--epochs", "0", "--epochs must be >= 1")):
        assert main(["train", "--train", f"{data}/train.jsonl", "--valid", f"{data}/valid.jsonl", option, value,
                     "--out", "/nonexistent-intentvcs/ck"]) == exit_codes.BAD_INPUT
        err = capsys.readouterr().err
        assert f"intentvcs train: error: {said}" in err, err


def test_serve_names_a_bundle_folder_that_does_not_exist_as_such(tmp_path, capsys):
    """A mistyped --bundle read "is not a bundle (no manifest.json); run intentvcs export first", as if the
    folder were there."""
    from intentvcs.cli import exit_codes
    from intentvcs.cli.main import main

    assert main(["serve", "--bundle", str(tmp_path / "bundel")]) == exit_codes.BAD_INPUT
    assert f"{tmp_path / 'bundel'}: no such folder" in capsys.readouterr().err


def test_a_long_list_in_a_refusal_says_how_many_it_leaves_out(tmp_path):
    from intentvcs.core.dataio import DataError, Example, Span
    from intentvcs.core.team_formats import check_span_types

    rows = [(1, Example("in paris", ("a",), spans=(Span(3, 8, "zzz"),)))]
    with pytest.raises(DataError, match=r"types there: \[.*\] and 5 more\)"):
        check_span_types(tmp_path / "v.jsonl", [f"type{i:02d}" for i in range(25)], rows)
