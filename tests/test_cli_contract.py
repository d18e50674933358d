"""The command line's contract: bad input is exit 2 naming file, line and reason; nothing is lost or half-written.

Exit codes (``intentvcs.cli.exit_codes``): 0 ok, 1 a gate said no, 2 bad input,
3 an internal error. A data file is read before any model loads, so each bad
file below fails in milliseconds; outputs are written all or none; an output
folder that is not an earlier output of the same command is never replaced
without ``--force``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from intentvcs.cli import exit_codes
from intentvcs.cli.main import main
from intentvcs.core.dataio import MAX_NESTING, MAX_TEXT_CHARS
from tests.helpers.bundle import make_tiny_bundle

GOOD = b'{"text": "play some music", "labels": ["PlayMusic"]}\n'


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A tiny exported model: ``tiny/checkpoint`` and ``tiny/bundle``."""
    return make_tiny_bundle(tmp_path_factory.mktemp("contract") / "model").parent


def leftovers(folder: Path) -> list[str]:
    """Files of ``folder`` a failed command must not leave: temporaries and partial outputs."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or p.suffix in (".json", ".png", ".html"))


BAD_FILES = {
    "spans not a list": (GOOD + b'{"text": "hi", "labels": [], "spans": 5}\n', 2, "'spans' must be a list"),
    "deep nesting": (b'{"text": "hi", "labels": [], "meta": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n", 1,
                     f"nested deeper than {MAX_NESTING}"),
    "lone surrogate": (b'{"text": "caf\\ud800", "labels": []}\n', 1, "lone surrogate (\\ud800 at character 3)"),
    "not UTF-8": (GOOD + GOOD + b'{"text": "caf\xe9", "labels": []}\n', 3, "not UTF-8: byte 0xe9 at column 14"),
    "text too long": (b'{"text": "' + b"a" * (MAX_TEXT_CHARS + 1) + b'", "labels": []}\n', 1,
                      f"the limit is {MAX_TEXT_CHARS}"),
    "invalid JSON": (GOOD + b'{"text": "hi", "labels": [}\n', 2, "invalid JSON"),
    "unknown key": (b'{"text": "hi", "label": "x"}\n', 1, "unknown key(s) ['label']"),
    "span outside the text": (b'{"text": "hi", "labels": [], "spans": [{"start": 0, "end": 9, "label": "x"}]}\n', 1,
                              "span [0, 9) is outside the text"),
    # An optional field may be absent or null; a value of another type is a broken row, not "none".
    "spans an empty string": (GOOD + b'{"text": "hi", "labels": [], "spans": ""}\n', 2,
                              "'spans' must be a list of {start, end, label} objects, got a string\n"),
    "spans 0": (GOOD + b'{"text": "hi", "labels": [], "spans": 0}\n', 2,
                "'spans' must be a list of {start, end, label} objects, got 0\n"),
    "spans false": (GOOD + b'{"text": "hi", "labels": [], "spans": false}\n', 2,
                    "'spans' must be a list of {start, end, label} objects, got false\n"),
    "meta an array": (GOOD + b'{"text": "hi", "labels": [], "meta": []}\n', 2, "'meta' must be an object, got an array\n"),
    "meta false": (GOOD + b'{"text": "hi", "labels": [], "meta": false}\n', 2, "'meta' must be an object, got false\n"),
    "span offsets booleans": (b'{"text": "hi", "labels": [], "spans": [{"start": false, "end": true, "label": "x"}]}\n',
                              1, "span 'start' must be an integer, got false\n"),
    "integer too long": (GOOD + b'{"text": "hi", "labels": [], "meta": {"n": ' + b"9" * 5000 + b'}}\n', 2,
                         f"invalid JSON: Exceeds the limit ({sys.get_int_max_str_digits()} digits) for integer string "
                         f"conversion: value has 5000 digits\n"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
@pytest.mark.parametrize("command", ["evaluate", "robustness", "audit"])
def test_a_bad_data_file_is_exit_2_with_file_line_and_reason(case, command, tiny, tmp_path, capsys):
    content, line, reason = BAD_FILES[case]
    data = tmp_path / "data.jsonl"
    data.write_bytes(content)
    option = "--batch" if command == "audit" else "--data"
    code = main([command, "--bundle", str(tiny / "bundle"), option, str(data), "--out", str(tmp_path / "out.json")])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT
    assert err.startswith(f"intentvcs {command}: error: {data}:{line}: ") and reason in err, err
    assert "Traceback" not in err
    assert leftovers(tmp_path) == []


def test_a_directory_given_as_data_says_so(tiny, tmp_path, capsys):
    code = main(["evaluate", "--bundle", str(tiny / "bundle"), "--data", str(tmp_path), "--out", str(tmp_path / "o")])
    assert code == exit_codes.BAD_INPUT and "is a directory, not a JSONL file" in capsys.readouterr().err


def test_an_output_path_that_is_a_directory_fails_before_the_model_runs(tiny, tmp_path, capsys, monkeypatch):
    from intentvcs.cli import model_options

    monkeypatch.setattr(model_options, "load_predictor", lambda args: pytest.fail("the model was loaded"))
    data = tmp_path / "data.jsonl"
    data.write_bytes(GOOD)
    code = main(["evaluate", "--bundle", str(tiny / "bundle"), "--data", str(data), "--out", str(tmp_path)])
    assert code == exit_codes.BAD_INPUT and f"{tmp_path} is a directory" in capsys.readouterr().err


def test_evaluate_writes_its_json_and_heatmap_together_or_not_at_all(tiny, tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_bytes(GOOD * 3)
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the heatmap's folder should be")
    out, heatmap = tmp_path / "x.json", blocker / "h.png"
    code = main(["evaluate", "--bundle", str(tiny / "bundle"), "--data", str(data), "--out", str(out),
                 "--heatmap", str(heatmap)])
    assert code == exit_codes.BAD_INPUT
    assert leftovers(tmp_path) == []  # no x.json beside a missing picture, no temporary file
    code = main(["evaluate", "--bundle", str(tiny / "bundle"), "--data", str(data), "--out", str(out),
                 "--heatmap", str(tmp_path / "h.png")])
    assert code == exit_codes.OK and leftovers(tmp_path) == ["h.png", "x.json"]
    assert (tmp_path / "h.png").read_bytes().startswith(b"\x89PNG")


def test_audit_writes_report_page_and_relations_together_or_not_at_all(tiny, tmp_path):
    batch = tmp_path / "batch.jsonl"
    batch.write_text("".join(json.dumps({"text": f"play some music {i}", "labels": ["PlayTunes"]}) + "\n"
                             for i in range(6)))
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    code = main(["audit", "--bundle", str(tiny / "bundle"), "--batch", str(batch), "--out", str(tmp_path / "r.json"),
                 "--html", str(blocker / "r.html"), "--relations-out", str(tmp_path / "rel.json")])
    assert code == exit_codes.BAD_INPUT and leftovers(tmp_path) == []


def test_export_replaces_only_an_earlier_bundle_unless_forced(tiny, tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("the user's own work")
    args = ["export", "--checkpoint", str(tiny / "checkpoint"), "--out", str(mine)]
    assert main(args) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert f"{mine} exists and holds no manifest.json" in err and "pass --force" in err
    assert (mine / "notes.txt").read_text() == "the user's own work"
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]  # no temporary folder either
    earlier = tmp_path / "bundle"
    assert main(["export", "--checkpoint", str(tiny / "checkpoint"), "--out", str(earlier)]) == exit_codes.OK
    assert main(["export", "--checkpoint", str(tiny / "checkpoint"), "--out", str(earlier)]) == exit_codes.OK
    assert main(args + ["--force"]) == exit_codes.OK
    assert (mine / "manifest.json").is_file() and not (mine / "notes.txt").exists()


def test_an_output_folder_that_is_a_file_is_never_replaced(tiny, tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("keep me")
    code = main(["export", "--checkpoint", str(tiny / "checkpoint"), "--out", str(target), "--force"])
    assert code == exit_codes.BAD_INPUT and "is not a directory" in capsys.readouterr().err
    assert target.read_text() == "keep me"


def test_an_unexpected_error_is_exit_3_with_its_traceback(tiny, tmp_path, capsys, monkeypatch):
    from intentvcs.core import evaluation

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(evaluation, "evaluate", broken)
    data = tmp_path / "data.jsonl"
    data.write_bytes(GOOD)
    code = main(["evaluate", "--bundle", str(tiny / "bundle"), "--data", str(data), "--out", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert code == exit_codes.INTERNAL_ERROR
    assert "Traceback" in err and "ZeroDivisionError: a bug" in err and "internal error" in err


def test_write_files_is_all_or_nothing_when_a_write_fails(tmp_path):
    from intentvcs.core import atomic

    first, second = tmp_path / "a.json", tmp_path / "b.txt"
    first.write_text("the earlier a")
    with pytest.raises(UnicodeEncodeError):
        atomic.write_files({first: "the new a", second: "not text: \ud800"})  # the second cannot be encoded
    assert first.read_text() == "the earlier a" and not second.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]  # no temporary file either
    atomic.write_files({first: "the new a", second: "b"})
    assert (first.read_text(), second.read_text()) == ("the new a", "b")


def test_a_failing_rename_leaves_no_temporary_file_and_a_none_content_removes_its_file(tmp_path, monkeypatch):
    from intentvcs.core import atomic

    first, second, gone = tmp_path / "a.json", tmp_path / "b.txt", tmp_path / "old.json"
    gone.write_text("stale")
    real, calls = atomic.os.replace, []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError("rename failed")
        return real(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(OSError, match="rename failed"):
        atomic.write_files({first: "a", second: "b", gone: None})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "old.json"]  # no temporary file left
    monkeypatch.undo()
    atomic.write_files({first: "a", second: "b", gone: None})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.txt"]


@pytest.mark.parametrize("command", ["evaluate", "robustness"])
def test_scoring_names_the_gold_labels_the_model_cannot_answer(command, tiny, tmp_path, caplog):
    """As train and refit do: a misspelt label would otherwise only lower the figures."""
    data = tmp_path / "data.jsonl"
    data.write_bytes(GOOD + b'{"text": "play a tune", "labels": ["PlayMuzic"]}\n' * 2)
    extra = ["--operators", "casing", "--draws", "1"] if command == "robustness" else []
    with caplog.at_level("WARNING"):
        assert main([command, "--bundle", str(tiny / "bundle"), "--data", str(data),
                     "--out", str(tmp_path / "e.json"), *extra]) == exit_codes.OK
    assert f"{data}: 2 label(s) the model was not trained on, counted as missed: PlayMuzic (2)" in caplog.text
