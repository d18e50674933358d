"""Rasa nlu.yml and text,intent CSV read as canonical rows (intentvcs.core.team_formats), with the
same errors as JSONL: file, line and reason. What Rasa 3 reads is read (examples with metadata, synonym, regex
and lookup entries); what it refuses, or what would drop rows silently, is refused with file, line and reason."""

from __future__ import annotations

import csv
import json
import logging
from types import SimpleNamespace

import pytest

from intentvcs.core.dataio import DataError, Example, Span
from intentvcs.core.team_formats import read_examples, read_numbered

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


# ------------------------------------------------------------------ Rasa 3's reading, read_numbered's refusals
def _refusal(path, body: str | bytes) -> DataError:
    if isinstance(body, bytes):
        path.write_bytes(body)
    else:
        path.write_text(body, encoding="utf-8")
    with pytest.raises(DataError) as caught:
        read_numbered(path)
    assert caught.value.path == str(path)
    return caught.value


def _rows(path, body: str) -> list[tuple[int, Example]]:
    path.write_text(body, encoding="utf-8")
    return read_numbered(path)


# ------------------------------------------------------------------ 1. examples with metadata
def test_rasa_examples_with_metadata_are_read_by_their_text(tmp_path):
    """RasaYAMLWriter writes examples that carry metadata as a list of {text, metadata} mappings."""
    body = ('version: "3.1"\nnlu:\n- intent: greet\n  metadata:\n    sentiment: neutral\n  examples:\n'
            '  - text: |\n      hi\n    metadata:\n      sentiment: neutral\n'
            '  - text: |\n      hey [Bob](name)\n'
            '  - text: hello there\n')
    assert _rows(tmp_path / "nlu.yml", body) == [
        (7, Example("hi", ("greet",))),
        (11, Example("hey Bob", ("greet",), spans=(Span(4, 7, "name"),))),
        (13, Example("hello there", ("greet",))),
    ]


def test_an_example_item_without_text_is_refused_at_its_line(tmp_path):
    body = "nlu:\n- intent: greet\n  examples:\n  - text: hi\n  - metadata: {a: 1}\n"
    error = _refusal(tmp_path / "nlu.yml", body)
    assert error.line == 5 and "'text'" in error.reason


# ------------------------------------------------------------------ 2. duplicate keys
@pytest.mark.parametrize("body, line, key", [
    # two top-level nlu: keys (YAML would keep only the second section)
    ("nlu:\n- intent: greet\n  examples: |\n    - hi\nnlu:\n- intent: thanks\n  examples: |\n    - thanks\n",
     5, "nlu"),
    # an entry with examples: twice (the first block would be lost)
    ("nlu:\n- intent: greet\n  examples: |\n    - hi\n  examples: |\n    - hello there\n", 5, "examples"),
    # intent: twice (the rows would go to the second)
    ("nlu:\n- intent: bye\n  intent: thanks\n  examples: |\n    - thanks a lot\n", 3, "intent"),
])
def test_a_duplicate_yaml_key_is_refused_at_the_repeated_key(tmp_path, body, line, key):
    error = _refusal(tmp_path / "nlu.yml", body)
    assert error.line == line
    assert error.reason.startswith(f"duplicate key {key!r}")


# ------------------------------------------------------------------ 3. unknown nlu entries
@pytest.mark.parametrize("entry, shown", [
    ("- intnet: bye\n  examples: |\n    - bye\n", "intnet"),
    ("- Intent: thanks\n  examples: |\n    - thanks\n", "Intent"),
    ("- just a string\n", "just a string"),
])
def test_an_nlu_entry_that_is_no_intent_synonym_regex_or_lookup_is_refused(tmp_path, entry, shown):
    body = "nlu:\n- intent: greet\n  examples: |\n    - hi\n" + entry
    error = _refusal(tmp_path / "nlu.yml", body)
    assert error.line == 5
    assert shown in error.reason and "intent" in error.reason


def test_synonym_regex_and_lookup_entries_are_skipped(tmp_path):
    body = ("nlu:\n- synonym: two\n  examples: |\n    - 2\n- regex: zip\n  examples: |\n    - [0-9]{5}\n"
            "- lookup: city\n  examples: |\n    - Paris\n- intent: greet\n  examples: |\n    - hi\n")
    assert _rows(tmp_path / "nlu.yml", body) == [(13, Example("hi", ("greet",)))]


# ------------------------------------------------------------------ 4. a list of entity dicts
def test_a_list_of_entities_on_one_text_is_refused_as_overlapping_spans(tmp_path):
    body = ('nlu:\n- intent: book\n  examples: |\n    - book [two](count) seats\n'
            '    - fly to [Paris][{"entity": "city"}, {"entity": "location"}] now\n')
    error = _refusal(tmp_path / "nlu.yml", body)
    assert error.line == 5
    assert "2 entities" in error.reason and "overlap" in error.reason


def test_a_list_of_one_entity_is_that_entity(tmp_path):
    body = 'nlu:\n- intent: book\n  examples: |\n    - fly to [Paris][{"entity": "city", "role": "to"}] now\n'
    assert _rows(tmp_path / "nlu.yml", body) == [(4, Example("fly to Paris now", ("book",),
                                                             spans=(Span(7, 12, "city"),)))]


# ------------------------------------------------------------------ 5. where the file is not UTF-8
FILLER = 2000  # lines before the bad byte: well past a text decoder's first chunk


def test_a_csv_byte_that_is_not_utf8_is_named_by_line_and_column(tmp_path):
    body = "text,intent\n" + "".join(f"hello number {n},greet\n" for n in range(FILLER))
    path = tmp_path / "rows.csv"
    error = _refusal(path, body.encode("utf-8") + b"caf\xe9 au lait,order\n")
    assert str(error) == f"{path}:{FILLER + 2}: not UTF-8: byte 0xe9 at column 4"


def test_a_yaml_byte_that_is_not_utf8_is_named_by_line_and_column(tmp_path):
    body = "nlu:\n- intent: greet\n  examples: |\n" + "".join(f"    - hello number {n}\n" for n in range(FILLER))
    path = tmp_path / "nlu.yml"
    error = _refusal(path, body.encode("utf-8") + b"    - caf\xe9\n")
    assert str(error) == f"{path}:{FILLER + 4}: not UTF-8: byte 0xe9 at column 10"


def test_a_yaml_control_character_is_named_by_line_and_column(tmp_path):
    error = _refusal(tmp_path / "nlu.yml", "nlu:\n- intent: greet\n  examples: |\n    - hi\n    - ring \x07 bell\n")
    assert error.line == 5
    assert error.reason == ("invalid YAML: unacceptable character #x0007 at column 12: "
                            "special characters are not allowed")


# ------------------------------------------------------------------ 6. a CSV header repeating a column
@pytest.mark.parametrize("header, repeated", [("text,intent,text", "text"), ("Text,intent,ID,id", "id"),
                                              ("intent,text,intent", "intent")])
def test_a_csv_header_repeating_a_read_column_is_refused(tmp_path, header, repeated):
    cells = ",".join("hi" if name.lower() == "text" else "greet" for name in header.split(","))
    error = _refusal(tmp_path / "rows.csv", f"{header}\n{cells}\n")
    assert error.line == 1 and repr(repeated) in error.reason and "more than once" in error.reason


def test_a_csv_header_may_repeat_a_column_it_ignores(tmp_path):
    assert _rows(tmp_path / "rows.csv", "text,intent,note,note\nhi,greet,a,b\n") == [(2, Example("hi", ("greet",)))]


# ------------------------------------------------------------------ 8. a comment in an examples block
def test_a_comment_line_in_an_examples_block_is_skipped_with_a_warning(tmp_path, caplog):
    path = tmp_path / "nlu.yml"
    body = 'version: "3.1"\nnlu:\n- intent: greet\n  examples: |\n    # greetings\n    - hi\n    - hello\n'
    with caplog.at_level(logging.WARNING, logger="intentvcs.core.team_formats"):
        assert _rows(path, body) == [(6, Example("hi", ("greet",))), (7, Example("hello", ("greet",)))]
    assert f"{path}:5: " in caplog.text and "comment" in caplog.text


def test_a_jsonl_file_that_starts_with_a_byte_order_mark_is_read(tmp_path):
    """Saved as "UTF-8 with BOM" (Windows Notepad), a JSONL file was refused at line 1 ("invalid JSON:
    Unexpected UTF-8 BOM") while a CSV with the same mark is read; the mark is no part of the row."""
    from intentvcs.core.dataio import read_jsonl

    path = tmp_path / "train.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"text": "play jazz", "labels": ["play_music"]}\n'
                     b'{"text": "stop", "labels": ["stop_music"]}\n')
    assert [(ex.text, ex.labels) for ex in read_jsonl(path)] == [("play jazz", ("play_music",)),
                                                                ("stop", ("stop_music",))]


def test_a_csv_whose_lines_end_in_a_carriage_return_alone_says_so(tmp_path):
    """Lines ended by CR alone (classic Mac OS, some exports) got csv's advice for programmers from batch
    prediction, which reads rows by byte offsets of LF-ended lines: "new-line character seen in unquoted
    field - do you need to open the file in universal-newline mode?"."""
    from intentvcs.service.batch_predict import Source

    path = tmp_path / "rows.csv"
    path.write_bytes(b"text,id\rplay jazz,a\rstop,b\r")
    with pytest.raises(DataError) as error:
        Source.open(path)
    assert "carriage return alone" in str(error.value) and "universal-newline" not in str(error.value)


def test_a_jsonl_line_cut_short_is_refused_at_its_own_column(tmp_path):
    """A line missing its closing brace was refused at "column 1": the error lay past the line's newline."""
    from intentvcs.core.dataio import read_jsonl

    path = tmp_path / "cut.jsonl"
    path.write_text('{"text": "wake me up at seven", "labels": ["set_alarm"]\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"cut.jsonl:1: invalid JSON: .*\(column 56\)"):
        read_jsonl(path)
