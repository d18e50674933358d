"""A reviewer's Rasa and CSV inputs (intentvcs.core.team_formats): what Rasa 3 reads is read, what it
refuses or what would drop rows silently is refused with file, line and reason."""

from __future__ import annotations

import logging

import pytest

from intentvcs.core.dataio import DataError, Example, Span
from intentvcs.core.team_formats import read_numbered


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
