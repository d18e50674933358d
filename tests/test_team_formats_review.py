"""Review of the team data readers (intentvcs.core.team_formats): valid Rasa and CSV data read as Rasa and a
spreadsheet would, and bad data refused as a DataError naming file, line and reason (exit 2), not a traceback."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from intentvcs.core.dataio import DataError, Example
from intentvcs.core.team_formats import read_examples, read_numbered


def _refusal(path, body: str) -> DataError:
    path.write_text(body, encoding="utf-8")
    with pytest.raises(DataError) as caught:
        read_numbered(path)
    assert caught.value.path == str(path)
    return caught.value


# ------------------------------------------------------------------ an entity annotation Python's JSON cannot read
@pytest.mark.parametrize("annotation", [
    # nested past Python's recursion limit: a RecursionError, a traceback and exit 1
    '{"entity": "city", "role": ' + "[" * 5000 + "}",
    "[" + '{"a": ' * 5000 + "1" + "}" * 5000 + "]",
    # an integer of more digits than Python converts: a ValueError naming neither file nor line
    '{"entity": "city", "role": ' + "1" * 5000 + "}",
    '[{"entity": "city", "role": ' + "1" * 5000 + "}]",
])
def test_an_entity_annotation_json_cannot_read_is_refused_at_its_line(tmp_path, annotation):
    body = f"nlu:\n- intent: fly\n  examples: |\n    - fly home\n    - fly to [Paris]{annotation} now\n"
    error = _refusal(tmp_path / "nlu.yml", body)
    assert error.line == 5
    assert error.reason.startswith("entity annotation ")
    assert "sys.set_int_max_str_digits" not in error.reason  # advice for programmers, not users


def test_the_audit_command_refuses_an_annotation_nested_too_deep_with_exit_2(tmp_path, capsys, monkeypatch):
    """It ended in a RecursionError: exit 3 and a traceback, not exit 2 naming the file and line."""
    from intentvcs.cli.commands import audit as audit_command
    from intentvcs.cli.main import main

    # The batch is read after the model loads: a model that knows its labels will do (as in test_team_formats).
    monkeypatch.setattr(audit_command, "load_predictor", lambda args: SimpleNamespace(labels=["fly"]))
    train, batch = tmp_path / "train.jsonl", tmp_path / "nlu.yml"
    train.write_text('{"text": "fly home", "labels": ["fly"]}\n', encoding="utf-8")
    batch.write_text('nlu:\n- intent: fly\n  examples: |\n    - fly to [Paris]{"entity": "city", "role": '
                     + "[" * 5000 + "}\n", encoding="utf-8")
    code = main(["audit", "--bundle", "unused", "--batch", str(batch), "--train", str(train),
                 "--out", str(tmp_path / "report.json")])
    assert code == 2
    assert capsys.readouterr().err.startswith(f"intentvcs audit: error: {batch}:4: entity annotation [Paris]: ")


# ------------------------------------------------------------------ an intent without examples
@pytest.mark.parametrize("examples", ["  examples:\n", "  examples: []\n", '  examples: ""\n',
                                      "  examples: |\n    # - hi there\n"])
def test_an_intent_with_an_empty_examples_block_is_refused_as_one_without_the_block(tmp_path, examples):
    """Without its 'examples' key an intent is refused; with an empty one it vanished without a word (its
    rows, commented out or never written, absent from the model, which then cannot answer it)."""
    body = f"nlu:\n- intent: greet\n  examples: |\n    - hi\n- intent: goodbye\n{examples}"
    error = _refusal(tmp_path / "nlu.yml", body)
    assert error.line == 5
    assert "intent 'goodbye' has no" in error.reason and "example" in error.reason


def test_an_intent_with_examples_beside_commented_ones_is_read(tmp_path):
    path = tmp_path / "nlu.yml"
    path.write_text("nlu:\n- intent: greet\n  examples: |\n    # - hey\n    - hi\n", encoding="utf-8")
    assert read_numbered(path) == [(5, Example("hi", ("greet",)))]


# ------------------------------------------------------------------ an intent name quoted with spaces
def test_a_quoted_intent_name_is_read_without_its_surrounding_spaces_as_rasa_and_the_csv_reader_read_it(tmp_path):
    """Rasa strips an intent's name (TrainingData.sanitize_examples), as the CSV reader strips its intent cell;
    a quoted '"greet "' was refused at each example's line, where no label is written."""
    path = tmp_path / "nlu.yml"
    path.write_text('nlu:\n- intent: " greet "\n  examples: |\n    - hi\n', encoding="utf-8")
    csv_path = tmp_path / "rows.csv"
    csv_path.write_text("text,intent\nhi, greet \n", encoding="utf-8")
    assert read_numbered(path) == [(4, Example("hi", ("greet",)))]
    assert read_numbered(csv_path) == [(2, Example("hi", ("greet",)))]


# ------------------------------------------------------------------ a Unicode line separator inside an example
@pytest.mark.parametrize("example, char, column", [
    # PyYAML (YAML 1.1) ends a line at U+2028, Rasa's YAML 1.2 and every editor do not: one line of the file
    # was read as two examples (the second, and every later one, named a line too far on)...
    ("- good morning\u2028    - hi there", "U+2028", 19),
    # ...or refused as invalid YAML at the line after it, with a parser's report of where it gave up.
    ("- wait\x85 ok", "U+0085", 11),
    ("- wait\u2029", "U+2029", 11),
])
def test_a_unicode_line_separator_in_a_rasa_file_is_refused_at_its_own_line_and_column(tmp_path, example, char,
                                                                                       column):
    body = f"nlu:\n- intent: greet\n  examples: |\n    {example}\n    - hello\n"
    error = _refusal(tmp_path / "nlu.yml", body)
    assert error.line == 4
    assert error.reason.startswith(f"the character {char} ") and f" at column {column}" in error.reason


# ------------------------------------------------------------------ a quoted examples string folding its lines
@pytest.mark.parametrize("examples", ['"- hi\n    - hello"', "'- hi\n    - hello'", '"- hi\\t\n    - hello"'])
def test_a_quoted_examples_string_folding_two_examples_into_one_is_refused(tmp_path, examples):
    """A line break inside a quoted string folds into a space, as '>' folds its block (refused): "- hi" and
    "- hello" on two lines of the file were read as one example, "hi - hello"."""
    error = _refusal(tmp_path / "nlu.yml", f"nlu:\n- intent: greet\n  examples: {examples}\n")
    assert error.line == 4 and "'|'" in error.reason


def test_a_quoted_examples_string_whose_line_breaks_are_escaped_is_read(tmp_path):
    """yaml.dump wraps a long string with escaped line breaks ('\\' at the end of the line), and a "\\n" before
    a folded break keeps the examples apart: neither joins two examples."""
    import yaml

    path = tmp_path / "nlu.yml"
    long = "play " + "some very long music " * 8
    path.write_text(yaml.dump({"nlu": [{"intent": "play", "examples": f"- {long}\n- [jazz](genre) -now\n"}]},
                              sort_keys=False), encoding="utf-8")
    assert len(path.read_text(encoding="utf-8").splitlines()) > 3  # wrapped
    assert [row.text for row in read_examples(path)] == [long.strip(), "jazz -now"]
    path.write_text('nlu:\n- intent: greet\n  examples: "- hi\\n\n    - hello\\n\n\n    - hey"\n', encoding="utf-8")
    assert [row.text for row in read_examples(path)] == ["hi", "hello", "hey"]
