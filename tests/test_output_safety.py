"""What a command may replace: nothing the user made, no input, no other output of the same run.

An output folder is replaced without ``--force`` only when it is an earlier
output of the same kind (its marker file ours, nothing in it we did not
write); a folder path without a name of its own (``.``) never; an output file
never when it is one of the command's inputs or another of its outputs. Each
refusal is exit 2 before the long work, and leaves every file as it was.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import pytest

from intentvcs.cli import exit_codes
from intentvcs.cli.main import build_parser, main
from intentvcs.core.manifest import BUNDLE_FILES
from intentvcs.training.checkpoint import CHECKPOINT_HOLDS
from tests.helpers.bundle import make_tiny_bundle

ROW = json.dumps({"text": "play some music", "labels": ["PlayMusic"]}) + "\n"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A tiny exported model: ``tiny/checkpoint`` and ``tiny/bundle``."""
    return make_tiny_bundle(tmp_path_factory.mktemp("safety") / "model").parent


def test_what_a_checkpoint_and_a_bundle_hold_is_what_may_be_replaced(tiny):
    assert all(any(fnmatch.fnmatchcase(p.name, pattern) for pattern in CHECKPOINT_HOLDS)
               for p in (tiny / "checkpoint").iterdir())
    assert {p.name for p in (tiny / "bundle").iterdir()} <= set(BUNDLE_FILES)


def test_a_folder_whose_marker_is_not_ours_is_not_replaced(tiny, tmp_path, capsys):
    webapp = tmp_path / "webapp"
    webapp.mkdir()
    (webapp / "manifest.json").write_text('{"name": "My PWA"}')
    (webapp / "index.html").write_text("<html></html>")
    args = ["export", "--checkpoint", str(tiny / "checkpoint"), "--out", str(webapp), "--no-quantize"]
    assert main(args) == exit_codes.BAD_INPUT
    assert f"{webapp / 'manifest.json'} is not the manifest.json of an earlier output" in capsys.readouterr().err
    (webapp / "index.html").unlink()  # the marker alone, still a web app's
    assert main(args) == exit_codes.BAD_INPUT
    assert (webapp / "manifest.json").read_text() == '{"name": "My PWA"}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["webapp"]  # no temporary folder either


def test_an_earlier_bundle_holding_a_users_file_is_not_replaced(tiny, tmp_path, capsys):
    bundle = tmp_path / "bundle"
    args = ["export", "--checkpoint", str(tiny / "checkpoint"), "--out", str(bundle), "--no-quantize"]
    assert main(args) == exit_codes.OK
    (bundle / "notes.txt").write_text("the user's own work")
    capsys.readouterr()
    assert main(args) == exit_codes.BAD_INPUT
    assert f"{bundle} holds what this command does not write (notes.txt)" in capsys.readouterr().err
    assert (bundle / "notes.txt").read_text() == "the user's own work"
    (bundle / "notes.txt").unlink()
    assert main(args) == exit_codes.OK  # an earlier bundle and nothing else: replaced


def test_a_folder_path_without_a_name_of_its_own_is_refused_before_any_work(tiny, tmp_path, capsys, monkeypatch):
    import intentvcs.export.exporter as exporter

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(exporter, "_load_model", lambda *args: pytest.fail("the model was loaded"))
    for out in (".", ".."):
        assert main(["export", "--checkpoint", str(tiny / "checkpoint"), "--out", out, "--force"]) == \
            exit_codes.BAD_INPUT
        assert "names no folder of its own" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_an_output_that_is_an_input_or_another_output_is_refused(tiny, tmp_path, capsys):
    data = tmp_path / "data.jsonl"
    data.write_text(ROW * 3)
    bundle = str(tiny / "bundle")
    assert main(["evaluate", "--bundle", bundle, "--data", str(data), "--out", str(data)]) == exit_codes.BAD_INPUT
    assert f"the output {data} is the input {data}" in capsys.readouterr().err
    same = tmp_path / "e.json"
    assert main(["evaluate", "--bundle", bundle, "--data", str(data), "--out", str(same),
                 "--heatmap", str(tmp_path / "." / "e.json")]) == exit_codes.BAD_INPUT
    assert "two outputs name the same file" in capsys.readouterr().err
    assert main(["audit", "--bundle", bundle, "--batch", str(data), "--out", str(data),
                 "--fail-on", "never"]) == exit_codes.BAD_INPUT
    assert data.read_text() == ROW * 3 and sorted(p.name for p in tmp_path.iterdir()) == ["data.jsonl"]


def test_export_checks_its_result_path_before_it_publishes_the_bundle(tiny, tmp_path, capsys):
    (tmp_path / "results").mkdir()
    code = main(["export", "--checkpoint", str(tiny / "checkpoint"), "--out", str(tmp_path / "bundle"),
                 "--no-quantize", "--result", str(tmp_path / "results")])
    assert code == exit_codes.BAD_INPUT and "is a directory" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


def test_an_output_folder_that_is_or_holds_an_input_or_output_is_refused_before_any_work(tiny, tmp_path, capsys,
                                                                                            monkeypatch):
    """``export --out`` the checkpoint itself with ``--force`` deleted the checkpoint; ``--result`` inside
    ``--out`` lost the result and made the next export refuse the bundle; ``train --out`` holding its data
    would delete it; an ``--out`` below a file failed after the model loaded."""
    import shutil

    import intentvcs.export.exporter as exporter

    monkeypatch.setattr(exporter, "_load_model", lambda *args: pytest.fail("the model was loaded"))
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(tiny / "checkpoint", checkpoint)
    before = sorted(p.name for p in checkpoint.iterdir())
    export = ["export", "--checkpoint", str(checkpoint), "--no-quantize"]
    assert main([*export, "--out", str(checkpoint), "--force"]) == exit_codes.BAD_INPUT
    assert f"the output folder {checkpoint} is the input {checkpoint}" in capsys.readouterr().err
    assert main([*export, "--out", str(tmp_path), "--force"]) == exit_codes.BAD_INPUT
    assert f"the output folder {tmp_path} holds the input {checkpoint}" in capsys.readouterr().err
    bundle = tmp_path / "bundle"
    assert main([*export, "--out", str(bundle), "--result", str(bundle / "result.json")]) == exit_codes.BAD_INPUT
    assert f"the output {bundle / 'result.json'} lies in the output folder {bundle}" in capsys.readouterr().err
    (tmp_path / "afile").write_text("mine")
    assert main([*export, "--out", str(tmp_path / "afile" / "bundle")]) == exit_codes.BAD_INPUT
    assert f"{tmp_path / 'afile'} is a file, not a folder" in capsys.readouterr().err
    data = tmp_path / "run" / "train.jsonl"
    data.parent.mkdir()
    data.write_text(ROW * 3)
    assert main(["train", "--train", str(data), "--valid", str(data.with_name("valid.jsonl")), "--out",
                 str(data.parent), "--force"]) == exit_codes.BAD_INPUT
    assert f"the output folder {data.parent} holds the input {data}" in capsys.readouterr().err
    assert sorted(p.name for p in checkpoint.iterdir()) == before and data.read_text() == ROW * 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "checkpoint", "run"]


def test_train_takes_the_epoch_rule_its_help_names():
    args = build_parser().parse_args(["train", "--train", "t.jsonl", "--valid", "v.jsonl", "--out", "o",
                                      "--select-by", "loss"])
    assert args.select_by == "loss"


def test_a_terminated_command_leaves_no_partial_output(tiny, tmp_path):
    """SIGTERM (a scheduler stopping a job) cleans up as Ctrl-C does: exit 143, no temporary file, no output."""
    import signal
    import subprocess
    import sys
    import time

    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"text": f"play some music number {i}"}) + "\n" for i in range(200_000)))
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "intentvcs.cli.main", "predict", "--data", str(data),
                             "--out", str(out), "--bundle", str(tiny / "bundle")], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".out.jsonl.*.tmp")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "predict ended before it could be terminated; give it more rows"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == exit_codes.TERMINATED and "terminated (SIGTERM)" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
