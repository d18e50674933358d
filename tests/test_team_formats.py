"""Rasa nlu.yml and text,intent CSV read as canonical rows (intentvcs.core.team_formats), with the
same errors as JSONL: file, line and reason."""

from __future__ import annotations

import csv
import json
from types import SimpleNamespace

import pytest

from intentvcs.core.dataio import DataError, Example, Span
from intentvcs.core.team_formats import read_examples

RASA = '''version: "3.1"
nlu:
- intent: book_table
  examples: |
    - book a table at [Chez Paul](restaurant) for [two](party_size:2)
    - reserve [Nopi]{"entity": "restaurant", "role": "venue"} tonight

    - a table please
- synonym: two
  examples: |
    - 2
- regex: zipcode
  examples: |
    - [0-9]{5}
- intent: greet
  examples: |
    - hello
'''


def test_rasa_rows_carry_their_intent_and_entity_spans(tmp_path):
    path = tmp_path / "nlu.yml"
    path.write_text(RASA, encoding="utf-8")
    rows = read_examples(path)
    assert [r.text for r in rows] == ["book a table at Chez Paul for two", "reserve Nopi tonight",
                                     "a table please", "hello"]
    assert [r.labels for r in rows] == [("book_table",)] * 3 + [("greet",)]
    first, second = rows[0], rows[1]
    assert first.spans == (Span(16, 25, "restaurant"), Span(30, 33, "party_size"))
    assert first.text[16:25] == "Chez Paul" and first.text[30:33] == "two"
    assert second.spans == (Span(8, 12, "restaurant"),)


def test_rasa_and_csv_read_as_the_jsonl_rows(tmp_path):
    jsonl = tmp_path / "rows.jsonl"
    rows = [Example("play jazz", ("play_music",)), Example("what is this", ())]
    jsonl.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows), encoding="utf-8")
    csv_path = tmp_path / "rows.csv"
    csv_path.write_text('text,Intent,notes\nplay jazz,play_music,x\n"what is this",,out of scope\n', encoding="utf-8")
    assert read_examples(jsonl) == rows == read_examples(csv_path)
    yml = tmp_path / "rows.yaml"
    yml.write_text("nlu:\n- intent: play_music\n  examples: |\n    - play jazz\n", encoding="utf-8")
    assert read_examples(yml) == rows[:1]


@pytest.mark.parametrize("name, body, line, reason", [
    ("bad.yml", "nlu:\n- intent: greet\n  examples: |\n    - hello\n    hi there\n", 5, "must start with '- '"),
    ("bad.yml", "nlu:\n- intent: greet\n  examples: |\n    - hello [x]{not json}\n", 4, "not a JSON object"),
    ("bad.yml", "nlu:\n- intent: greet\n", 2, "has no 'examples' block"),
    ("bad.yml", "nlu:\n- intent: greet\n  examples: |\n    - [hi](greeting) [hi](greeting)\n", None, None),
    ("bad.yml", "version: '3.1'\n", None, "no 'nlu' section"),
    ("bad.yml", "nlu: [\n", 2, "invalid YAML"),
    ("bad.csv", "utterance,intent\nhi,greet\n", 1, "names no text column"),
    ("bad.csv", "text,intent\nhi,greet\nhello,greet,extra\n", 3, "the row has 3 fields; the header has 2"),
    ("bad.csv", "text,intent\nhi,greet\n   ,greet\n", 3, "'text'"),
    ("empty.csv", "text,intent\n", None, "no rows"),
    # "X " trained as an intent of its own beside "X"
    ("bad.jsonl", '{"text": "hi", "labels": ["greet"]}\n{"text": "hey", "labels": ["greet "]}\n', 2,
     "the label 'greet ' has leading or trailing whitespace"),
])
def test_a_bad_file_names_file_line_and_reason(tmp_path, name, body, line, reason):
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    if reason is None:  # two annotations of one text are two spans, not an error
        assert len(read_examples(path)[0].spans) == 2
        return
    with pytest.raises(DataError) as caught:
        read_examples(path)
    assert (caught.value.path, caught.value.line) == (str(path), line)
    assert reason in caught.value.reason


def test_a_missing_file_or_a_folder_is_refused(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        read_examples(tmp_path / "nope.csv")
    (tmp_path / "dir.yml").mkdir()
    with pytest.raises(DataError, match="is a directory"):
        read_examples(tmp_path / "dir.yml")


# A row missing its intent cell, then a quote never closed: neither may read as rows.
SHORT = 'text,intent\nplay some jazz,play_jazz\nput on jazz music\n"play jazz please,play_jazz\nplay smooth jazz,play_jazz\n'
UNCLOSED = "a quoted field begins on this line and is never closed (a missing '\"')"


@pytest.mark.parametrize("body, message", [
    (SHORT, "3: the row has 1 fields; the header has 2"),
    (SHORT.replace("put on jazz music\n", ""), f"3: {UNCLOSED}"),
    # The record begins on line 2; its unclosed field on line 3, after a closed one of two lines.
    ('text,intent\n"two\nlines","open\nrest\n', f"3: {UNCLOSED}"),
    ("text,intent\nhi,greet\n" + "x" * (csv.field_size_limit() + 1) + ",greet\n",
     f"3: a field longer than {csv.field_size_limit()} characters (the CSV reader's limit)"),
    ('text,intent\nhi,greet\n"a\n' + "x" * csv.field_size_limit() + '",greet\n',
     f"3: a field longer than {csv.field_size_limit()} characters (the CSV reader's limit)"),
    ('text,intent\n"hi"there,greet\n', "2: not CSV: ',' expected after '\"'"),
])
def test_a_malformed_csv_row_is_refused_at_its_line(tmp_path, body, message):
    path = tmp_path / "short.csv"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(DataError) as caught:
        read_examples(path)
    assert str(caught.value) == f"{path}:{message}"


def test_an_empty_intent_cell_is_out_of_scope_and_a_byte_order_mark_is_no_column_name(tmp_path):
    path = tmp_path / "excel.csv"
    # Excel's "CSV UTF-8": a byte-order mark, CRLF line ends, a blank line.
    path.write_bytes("\ufeffText,intent\r\nplay jazz,play_music\r\n\r\n\"say \"\"hi\"\"\",\r\n".encode("utf-8"))
    assert read_examples(path) == [Example("play jazz", ("play_music",)), Example('say "hi"', ())]


def test_yaml_nested_beyond_the_limit_is_a_data_error_not_a_recursion_error(tmp_path):
    path = tmp_path / "deep.yml"
    path.write_text("nlu:\n- intent: greet\n  examples: |\n    - hi\nx: " + "[" * 5000 + "\n", encoding="utf-8")
    with pytest.raises(DataError) as caught:
        read_examples(path)
    assert (caught.value.path, caught.value.line) == (str(path), 5)
    assert caught.value.reason.startswith("invalid YAML: nested deeper than 64 levels\n")
    path.write_text("nlu:\n- intent: greet\n  examples: |\n    - hi\nx: " + "[" * 62 + "]" * 62 + "\n")
    assert read_examples(path) == [Example("hi", ("greet",))]


@pytest.mark.parametrize("option", ["--batch", "--train"])
def test_the_audit_command_refuses_a_malformed_csv_with_exit_2(tmp_path, capsys, monkeypatch, option):
    from intentvcs.cli.commands import audit as audit_command
    from intentvcs.cli.main import main

    # The batch is read as the audit runs, after the model loads: a model that knows its labels
    # (all the audit asks before it reads the batch) will do.
    monkeypatch.setattr(audit_command, "load_predictor", lambda args: SimpleNamespace(labels=["play_jazz"]))
    good, bad = tmp_path / "good.jsonl", tmp_path / "short.csv"
    good.write_text('{"text": "play jazz", "labels": ["play_jazz"]}\n', encoding="utf-8")
    bad.write_text(SHORT, encoding="utf-8")
    data = {"--batch": str(good), "--train": str(good), option: str(bad)}
    code = main(["audit", "--bundle", "unused", "--batch", data["--batch"], "--train", data["--train"],
                 "--out", str(tmp_path / "report.json")])
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"intentvcs audit: error: {bad}:3: the row has 1 fields; the header has 2\n"
    assert not (tmp_path / "report.json").exists()


def test_a_row_read_to_predict_is_not_refused_for_its_labels():
    """The whitespace check guards training and scoring; predict reads only the text (it refused the file)."""
    from intentvcs.core.dataio import parse_row

    assert parse_row({"text": "play jazz", "labels": ["PlayMusic "]}, require_labels=False).text == "play jazz"
    with pytest.raises(ValueError, match="leading or trailing whitespace"):
        parse_row({"text": "play jazz", "labels": ["PlayMusic "]})
