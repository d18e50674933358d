"""User-facing messages of the command line: a mistake is one line saying what is wrong and what to do.

Each test pins a message that used to mislead: a busy port reported as a page of
circus traceback, an option typo answered with the top-level usage, "give --format"
for a format --format does not take, an empty or ';'-separated CSV reported as a
header without the right columns, and a checkpoint passed as --bundle reported as
"not a bundle directory?".
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from intentvcs.cli import exit_codes
from intentvcs.cli.commands.serve import free_port
from intentvcs.cli.main import main
from intentvcs.core.dataio import DataError
from intentvcs.core.team_formats import read_examples
from tests.helpers.bundle import make_tiny_bundle

GOOD = '{"text": "play some music", "labels": ["PlayMusic"]}\n'


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """A tiny exported model's bundle; its checkpoint is ``bundle.parent / "checkpoint"``."""
    return make_tiny_bundle(tmp_path_factory.mktemp("messages") / "model")


# ------------------------------------------------------------------ 1. serve on a busy port

def test_serve_on_a_port_in_use_is_one_line_before_the_server_starts(bundle, tmp_path):
    host = "127.0.0.1"
    with socket.socket() as holder:
        port = free_port(host)
        holder.bind((host, port))
        holder.listen()
        result = subprocess.run([sys.executable, "-m", "intentvcs.cli.main", "serve", "--bundle", str(bundle),
                                 "--host", host, "--port", str(port)], capture_output=True, text=True, timeout=60,
                                env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    err = result.stderr
    assert result.returncode == exit_codes.BAD_INPUT, err[-2000:]
    assert f"intentvcs serve: error: cannot serve on {host}:{port}: the port is already in use" in err, err[-2000:]
    assert "choose another --port, or stop what holds it" in err
    assert "Traceback" not in err and "serving" not in err and len(err.strip().splitlines()) == 1, err[-2000:]


# ------------------------------------------------------------------ 2. an option typo

def test_an_option_typo_names_the_subcommand_and_the_closest_option(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--train", "t.jsonl", "--valid", "v.jsonl", "--out", "o", "--epohcs", "3"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2, err  # argparse's usage error
    assert err.startswith("usage: intentvcs train "), err
    assert "intentvcs train: error: unrecognized arguments: --epohcs 3 (did you mean --epochs?)" in err, err


def test_an_option_typo_before_the_command_is_the_top_level_parsers(capsys):
    """--verbsoe before "train" was reported by train's parser and matched against train's options."""
    with pytest.raises(SystemExit) as exit_:
        main(["--verbsoe", "train", "--train", "t.jsonl", "--valid", "v.jsonl", "--out", "o"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith("usage: intentvcs [-h]"), err
    assert "intentvcs: error: unrecognized arguments: --verbsoe (did you mean --verbose?)" in err, err


def test_an_option_typo_with_a_value_and_an_unknown_word():
    from intentvcs.cli.main import _subparser, build_parser, unrecognized

    train = _subparser(build_parser(), "train")
    assert unrecognized(train, ["--epohcs=3", "--lrr", "1", "stray"]) == (
        "unrecognized arguments: --epohcs=3 --lrr 1 stray (did you mean --epochs for --epohcs, --lr for --lrr?)")
    assert unrecognized(train, ["--zzzzzz"]) == "unrecognized arguments: --zzzzzz"


# ------------------------------------------------------------------ 3. predict on a file of another format

def test_predict_on_yaml_names_the_formats_it_reads(bundle, tmp_path, capsys):
    data = tmp_path / "nlu.yml"
    data.write_text("nlu:\n- intent: greet\n  examples: |\n    - hello\n", encoding="utf-8")
    code = main(["predict", "--bundle", str(bundle), "--data", str(data), "--out", str(tmp_path / "o.jsonl")])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT, err
    assert "cannot tell the format from the suffix '.yml': predict reads jsonl (.jsonl, .ndjson, .json), " \
           "csv (.csv) or parquet (.parquet, .pq); convert the file to one of them" in err, err


# ------------------------------------------------------------------ 4. an empty or ';'-separated CSV

@pytest.mark.parametrize("content", [b"", b"\xef\xbb\xbf", b"  \n\n\t\r\n", b"\xef\xbb\xbf\n"],
                         ids=["zero bytes", "a BOM", "whitespace", "a BOM and a newline"])
def test_an_empty_csv_is_called_empty(tmp_path, content):
    path = tmp_path / "rows.csv"
    path.write_bytes(content)
    with pytest.raises(DataError) as error:
        read_examples(path)
    assert str(error.value).startswith(f"{path}: the file is empty"), error.value
    assert "names no" not in str(error.value)


@pytest.mark.parametrize("header, seen", [("text;intent", "';'"), ("text\tintent", "tabs")])
def test_a_csv_with_another_delimiter_says_so(tmp_path, header, seen):
    path = tmp_path / "rows.csv"
    path.write_text(f"{header}\nhi{header[4]}greet\n", encoding="utf-8")
    with pytest.raises(DataError) as error:
        read_examples(path)
    message = str(error.value)
    assert message.startswith(f"{path}:1: the header names no text or intent column"), message
    assert f"the file seems to separate its columns with {seen}: this reader expects commas" in message


def test_a_comma_header_without_the_columns_gets_no_delimiter_hint(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text("utterance;x,intent\nhi,greet\n", encoding="utf-8")
    with pytest.raises(DataError) as error:
        read_examples(path)
    assert str(error.value) == f"{path}:1: the header names no text column (expected at least text, intent)"


# ------------------------------------------------------------------ 5. a checkpoint given as --bundle

def test_evaluate_on_a_checkpoint_given_as_bundle_says_to_pass_checkpoint(bundle, tmp_path, capsys):
    checkpoint = bundle.parent / "checkpoint"
    assert (checkpoint / "checkpoint.json").is_file() and not (checkpoint / "manifest.json").exists()
    data = tmp_path / "test.jsonl"
    data.write_text(GOOD, encoding="utf-8")
    code = main(["evaluate", "--bundle", str(checkpoint), "--data", str(data), "--out", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT, err
    assert f"is a checkpoint (it holds checkpoint.json), not a bundle; pass --checkpoint {checkpoint}" in err, err
    assert "export it first" in err and "not a bundle directory?" not in err


def test_a_folder_that_is_neither_keeps_the_plain_message(tmp_path):
    from intentvcs.core.manifest import BundleError, read

    with pytest.raises(BundleError) as error:
        read(tmp_path / "manifest.json")
    assert str(error.value).endswith("missing (not a bundle directory?)"), error.value
