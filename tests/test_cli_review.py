"""A review of the command line's contract. Defects reproduced, then fixed:

- ``robustness --out /dev/stdout`` (or ``--md /dev/stdout``) printed its Markdown table after the report on
  standard output, so ``| jq`` read one JSON document followed by text; the table goes to standard error then,
  as evaluate's headline does;
- ``convert --out /dev/stdout`` followed the JSONL rows with its JSON summary on standard output, a last
  "row" that is no row;
- ``INTENTVCS_PROVIDER=`` (empty) was refused as "'' is not one of ...", where every other variable reads
  empty as its default; ``INTENTVCS_BUNDLE=`` gave ``serve --bundle ""``, the working folder;
- ``demo`` refused a bad ``INTENTVCS_*`` setting, or a missing BentoML, only at its last step, after the
  minutes of training and export;
- ``serve`` without BentoML exec'd ``python -m bentoml`` anyway: "No module named bentoml", exit 1 (a gate's);
- ``serve --help`` gave the service's defaults of --workers and --threads, not the variables they come from;
- Ctrl-C while the command line loads its commands printed an import's traceback;
- a refused boolean variable was quoted lowercased and stripped, not as it was set.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.bundle import DEFAULT_LABELS, make_tiny_bundle

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return make_tiny_bundle(tmp_path_factory.mktemp("review") / "model")


def cli(*args: str) -> subprocess.CompletedProcess:
    """``intentvcs ARGS`` in a process of its own, standard output a pipe (as in ``| jq``)."""
    return subprocess.run([sys.executable, "-m", "intentvcs.cli.main", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def labelled(path: Path) -> Path:
    path.write_text("".join(json.dumps({"text": f"play song number {i}", "labels": [DEFAULT_LABELS[0]]}) + "\n"
                            for i in range(4)), encoding="utf-8")
    return path


@pytest.mark.parametrize("option", ["--out", "--md"])
def test_robustness_writing_to_stdout_keeps_its_table_off_stdout(bundle, tmp_path, option):
    other = {"--out": ("--md", tmp_path / "r.md"), "--md": ("--out", tmp_path / "r.json")}[option]
    done = cli("robustness", "--bundle", str(bundle), "--data", str(labelled(tmp_path / "d.jsonl")),
               "--operators", "casing", "--draws", "1", option, "/dev/stdout", *map(str, other))
    assert done.returncode == 0, done.stderr[-2000:]
    if option == "--out":
        assert json.loads(done.stdout)["draws"] == 1  # one document: the report
        table = other[1].read_text(encoding="utf-8")
    else:
        table = done.stdout
        assert table.count("| set |") == 1  # the table once: the output, not the summary after it
    assert table in done.stderr  # the summary, where a reader of the output does not take it for output


def test_convert_to_stdout_gives_the_rows_alone_on_stdout(tmp_path):
    source = tmp_path / "data_tiny.json"
    source.write_text(json.dumps({"train": [["fly me to paris", "book_flight"], ["wake me at 7", "alarm"]],
                                  "val": [], "test": [], "oos_train": [], "oos_val": [], "oos_test": []}))
    done = cli("convert", "--format", "clinc150", "--input", str(source), "--split", "train", "--out", "/dev/stdout")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [row["text"] for row in rows] == ["fly me to paris", "wake me at 7"]
    assert json.loads(done.stderr[done.stderr.index("{"):])["rows"] == 2  # the summary, on standard error


@pytest.mark.parametrize("value, provider", [("", "auto"), (" ", "auto"), (" cpu ", "cpu")])
def test_an_empty_or_padded_provider_variable_reads_as_the_others_do(value, provider):
    """INTENTVCS_PROVIDER= (a compose file's ``${VAR:-}``) was refused as "'' is not one of ...", where every
    other variable, INTENTVCS_QUANTIZED beside it, reads empty as its default and is stripped."""
    from intentvcs.service.settings import Settings

    assert Settings.from_env({"INTENTVCS_PROVIDER": value}).provider == provider


@pytest.mark.parametrize("value", ["", "  "])
def test_serve_bundle_defaults_as_the_service_does_when_the_variable_is_empty(monkeypatch, value):
    """--bundle's default is $INTENTVCS_BUNDLE or runs/default/bundle, as its help says and as the service reads
    it; INTENTVCS_BUNDLE= gave --bundle "", which resolved to the working folder ("... is not a bundle")."""
    from intentvcs.cli.main import build_parser, parse_args
    from intentvcs.service.settings import Settings

    monkeypatch.setenv("INTENTVCS_BUNDLE", value)
    assert parse_args(build_parser(), ["serve"]).bundle == Settings.bundle == Settings.from_env(
        {"INTENTVCS_BUNDLE": value, "INTENTVCS_PROVIDER": "cpu"}).bundle


def test_demo_refuses_a_bad_service_setting_before_training(monkeypatch, tmp_path, capsys):
    """The last step serves, and refuses a bad INTENTVCS_* value (exit 2): after the minutes of training and
    export, whereas the demo's port and folder are refused before them."""
    from intentvcs.cli import exit_codes
    from intentvcs.cli.main import main
    from intentvcs.training import pipeline

    monkeypatch.setattr(pipeline, "train_pipeline", lambda *a, **k: pytest.fail("the demo trained"))
    monkeypatch.setenv("INTENTVCS_WORKERS", "0")
    assert main(["demo", "--out", str(tmp_path / "demo"), "--port", "0"]) == exit_codes.BAD_INPUT
    assert "INTENTVCS_WORKERS=0 is below its minimum 1" in capsys.readouterr().err
    assert not (tmp_path / "demo").exists()
    # --no-serve serves nothing: the setting is not the demo's business then.
    monkeypatch.setattr(pipeline, "train_pipeline", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    assert main(["demo", "--out", str(tmp_path / "demo"), "--no-serve"]) == exit_codes.INTERRUPTED


@pytest.mark.parametrize("option, variable, value", [("--workers", "WORKERS", "3"), ("--threads", "THREADS", "2")])
def test_serve_help_names_the_variable_its_default_comes_from(monkeypatch, bundle, option, variable, value):
    """Left out, --workers and --threads are what INTENTVCS_WORKERS and INTENTVCS_THREADS say (they pass
    through), as for --provider and --quantized; their help gave only the service's own defaults."""
    from intentvcs.cli.commands import serve
    from intentvcs.cli.main import build_parser, main

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["serve"]
    assert f"$INTENTVCS_{variable}" in next(a for a in sub._actions if option in a.option_strings).help
    monkeypatch.setenv(f"INTENTVCS_{variable}", value)
    calls = []
    monkeypatch.setattr(serve.os, "execve", lambda path, argv, env: calls.append(env) or sys.exit(0))
    with pytest.raises(SystemExit):
        main(["serve", "--bundle", str(bundle), "--port", "0", "--provider", "cpu"])
    assert calls[0][f"INTENTVCS_{variable}"] == value  # what the help says: the variable, passed through


@pytest.fixture
def no_bentoml(monkeypatch):
    """This interpreter without the serve extra (BentoML), as after `pip install intentvcs[cpu]`."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "bentoml" else real(name, *a))


def test_serve_without_bentoml_is_bad_input_naming_the_extra(no_bentoml, bundle, monkeypatch, capsys):
    """`python -m bentoml` was exec'd anyway: "No module named bentoml", exit 1, which the contract gives to a
    gate; a missing optional package is exit 2 naming what to install."""
    from intentvcs.cli import exit_codes
    from intentvcs.cli.commands import serve
    from intentvcs.cli.main import main

    monkeypatch.setattr(serve.os, "execve", lambda *a: pytest.fail("bentoml serve was started"))
    assert main(["serve", "--bundle", str(bundle), "--port", "0", "--provider", "cpu"]) == exit_codes.BAD_INPUT
    assert "pip install 'intentvcs[serve]'" in capsys.readouterr().err


def test_demo_without_bentoml_is_refused_before_training(no_bentoml, monkeypatch, tmp_path, capsys):
    from intentvcs.cli import exit_codes
    from intentvcs.cli.main import main
    from intentvcs.training import pipeline

    monkeypatch.setattr(pipeline, "train_pipeline", lambda *a, **k: pytest.fail("the demo trained"))
    assert main(["demo", "--out", str(tmp_path / "demo"), "--port", "0"]) == exit_codes.BAD_INPUT
    assert "--no-serve" in capsys.readouterr().err  # what to do instead of installing it


def test_ctrl_c_while_the_commands_load_is_a_line_and_130_not_a_traceback(monkeypatch, capsys):
    """The parser imports every command's module (numpy among them): Ctrl-C in those first tenths of a second
    printed an import's traceback, where one a moment later is "interrupted" and exit 130."""
    from intentvcs.cli import exit_codes
    from intentvcs.cli import main as cli_main

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "build_parser", interrupted)
    assert cli_main.main(["evaluate", "--help"]) == exit_codes.INTERRUPTED
    assert capsys.readouterr().err == "intentvcs: interrupted\n"


def test_a_refused_boolean_variable_is_quoted_as_it_was_set():
    """The message quoted the value lowercased and stripped ('maybe' for "Maybe "), a value nobody set."""
    from intentvcs.service.settings import Settings

    with pytest.raises(ValueError, match=r"^INTENTVCS_SPELLING='Off ' is not a boolean"):
        Settings.from_env({"INTENTVCS_SPELLING": "Off ", "INTENTVCS_PROVIDER": "cpu"})
