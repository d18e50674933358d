"""Second review of the data readers and atomic writes: what still changed or dropped rows without a word,
named a line the file does not have, or replaced what the user made (intentvcs.core.team_formats,
intentvcs.core.dataio, intentvcs.core.atomic)."""

from __future__ import annotations

import json
import os
import stat

import pytest
import yaml

from intentvcs.core import atomic
from intentvcs.core.dataio import DataError, Span, parse_row, read_jsonl
from intentvcs.core.team_formats import read_examples, read_numbered


def _refused(path, body: str) -> DataError:
    path.write_text(body, encoding="utf-8")
    with pytest.raises(DataError) as caught:
        read_examples(path)
    return caught.value


# ------------------------------------------------------------------ Rasa: keys the schema does not have
@pytest.mark.parametrize("body, line, key", [
    # A second block under a misspelt key: YAML reads it, the reader ignored it, its rows were lost.
    ("nlu:\n- intent: greet\n  examples: |\n    - hi\n  exmaples: |\n    - hello\n", 5, "exmaples"),
    # An intent misspelt beside a synonym: the entry was skipped as a synonym, its rows with it.
    ("nlu:\n- intent: greet\n  examples: |\n    - hi\n- synonym: two\n  intnet: count\n  examples: |\n"
     "    - 2\n", 6, "intnet"),
    # Two kinds in one entry: Rasa's schema has no such entry, and one of the two was dropped.
    ("nlu:\n- intent: greet\n  synonym: hi\n  examples: |\n    - hi\n", 3, "synonym"),
])
def test_an_nlu_entry_key_outside_rasas_schema_is_refused_at_its_line(tmp_path, body, line, key):
    error = _refused(tmp_path / "nlu.yml", body)
    assert error.line == line and repr(key) in error.reason


def test_intent_metadata_is_still_read_past(tmp_path):
    path = tmp_path / "nlu.yml"
    path.write_text("nlu:\n- intent: greet\n  metadata:\n    owner: team-a\n  examples: |\n    - hi\n"
                    "- lookup: city\n  examples: |\n    - berlin\n", encoding="utf-8")
    assert [row.text for row in read_examples(path)] == ["hi"]


# ------------------------------------------------------------------ Rasa: a folded block
def test_a_folded_examples_block_is_refused_not_read_as_one_example(tmp_path):
    # '>' folds "- hello\n- bye" into "- hello - bye": two examples became one row "hello - bye".
    error = _refused(tmp_path / "nlu.yml", "nlu:\n- intent: greet\n  examples: >\n    - hello\n    - bye\n")
    assert error.line == 3 and "'|'" in error.reason


# ------------------------------------------------------------------ Rasa: lines of a quoted examples string
def test_examples_in_a_quoted_string_are_named_by_the_line_the_string_is_on(tmp_path):
    # What yaml.dump writes for a team's generated nlu.yml: every example on one line of the file, where
    # the reader counted one line per example (line 5 of a 3-line file).
    path = tmp_path / "nlu.yml"
    body = yaml.dump({"nlu": [{"intent": "greet", "examples": "- hello\n- [bob](name)\n- \n"}]}, sort_keys=False)
    assert len(body.splitlines()) == 3 and body.splitlines()[2].startswith("  examples: \"")
    error = _refused(path, body)
    assert error.line == 3 and error.reason == "'text' is empty"
    path.write_text(body.replace("- \\n", ""), encoding="utf-8")
    assert [(line, row.text, row.spans) for line, row in read_numbered(path)] == [
        (3, "hello", ()), (3, "bob", (Span(0, 3, "name"),))]


def test_a_literal_block_still_counts_its_own_lines(tmp_path):
    path = tmp_path / "nlu.yml"
    path.write_text("nlu:\n- intent: greet\n  examples: |\n\n    - hello\n    - bye\n", encoding="utf-8")
    assert [line for line, _ in read_numbered(path)] == [5, 6]


# ------------------------------------------------------------------ JSONL: a key given twice
@pytest.mark.parametrize("line, key", [
    # json keeps the last value: this row trained as out of scope, not as greet.
    ('{"text": "hi", "labels": ["greet"], "labels": []}', "labels"),
    ('{"text": "hi bob", "labels": ["greet"], "spans": [{"start": 3, "end": 6, "label": "name", '
     '"label": "city"}]}', "label"),
])
def test_a_jsonl_key_given_twice_is_refused_at_its_line(tmp_path, line, key):
    error = _refused(tmp_path / "rows.jsonl", '{"text": "ok", "labels": ["greet"]}\n' + line + "\n")
    assert error.line == 2 and error.reason.startswith(f"duplicate key {key!r}")


# ------------------------------------------------------------------ JSONL: a span type with spaces
def test_a_span_label_with_surrounding_whitespace_is_refused_as_an_intent_label_is(tmp_path):
    # "city " would be an entity type of its own beside "city" (B-city  and B-city tags).
    error = _refused(tmp_path / "rows.jsonl",
                     '{"text": "to Paris", "labels": ["fly"], "spans": [{"start": 3, "end": 8, "label": "city "}]}\n')
    assert error.line == 1 and error.reason == "the span label 'city ' has leading or trailing whitespace"
    # A row read to predict is not trained or scored on its spans, as on its labels.
    row = parse_row({"text": "to Paris", "spans": [{"start": 3, "end": 8, "label": "city "}]}, require_labels=False)
    assert row.text == "to Paris"


# ------------------------------------------------------------------ atomic writes
def test_writing_through_a_symbolic_link_replaces_the_file_not_the_link(tmp_path):
    real, link = tmp_path / "shared" / "train.jsonl", tmp_path / "train.jsonl"
    real.parent.mkdir()
    real.write_text("old\n")
    link.symlink_to(real)
    atomic.write_text(link, "new\n")
    assert link.is_symlink() and real.read_text() == "new\n"
    with atomic.streamed(link) as handle:
        handle.write(b"streamed\n")
    assert link.is_symlink() and real.read_text() == "streamed\n"
    assert sorted(p.name for p in real.parent.iterdir()) == ["train.jsonl"]


def test_rewriting_a_file_keeps_its_permissions(tmp_path):
    target = tmp_path / "private.jsonl"
    target.write_text("old\n")
    target.chmod(0o600)
    atomic.write_text(target, "new\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    with atomic.streamed(target) as handle:
        handle.write(b"x")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    fresh = tmp_path / "fresh.jsonl"
    atomic.write_text(fresh, "x")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~mask


# ------------------------------------------------------------------ convert: an output that is a source file
def test_convert_refuses_to_replace_a_file_of_the_data_set_folder_it_reads(tmp_path, capsys):
    from intentvcs.cli.main import main

    split = tmp_path / "snips" / "train"
    split.mkdir(parents=True)
    sources = {"seq.in": "play jazz\n", "seq.out": "O B-genre\n", "label": "PlayMusic\n"}
    for name, body in sources.items():
        (split / name).write_text(body)
    (tmp_path / "link.jsonl").symlink_to(split / "seq.in")
    for out in (split / "label", tmp_path / "link.jsonl"):
        assert main(["convert", "--format", "snips", "--input", str(tmp_path / "snips"), "--split", "train",
                     "--out", str(out)]) == 2
        assert "lies in the input folder" in capsys.readouterr().err
    assert {name: (split / name).read_text() for name in sources} == sources
    # A new file in the folder destroys nothing.
    assert main(["convert", "--format", "snips", "--input", str(tmp_path / "snips"), "--split", "train",
                 "--out", str(tmp_path / "snips" / "train.jsonl")]) == 0


def test_a_jsonl_file_of_carriage_return_line_endings_says_so(tmp_path):
    """Old Mac line endings made the whole file one line: 'invalid JSON: Extra data' and nothing more."""
    path = tmp_path / "mac.jsonl"
    path.write_bytes(b'{"text": "hi", "labels": ["greet"]}\r{"text": "bye", "labels": ["bye"]}\r')
    with pytest.raises(DataError, match=r":1: invalid JSON: Extra data .*carriage return alone"):
        read_jsonl(path)
    crlf = tmp_path / "windows.jsonl"
    crlf.write_bytes(b'{"text": "hi", "labels": ["greet"]}\r\n{"text": "bye", "labels": ["bye"]}\r\n')
    assert [ex.text for ex in read_jsonl(crlf)] == ["hi", "bye"]


def test_a_stored_sample_with_a_padded_span_label_is_still_read(tmp_path):
    """A checkpoint's or bundle's references.jsonl written before padded span labels were refused: refused on
    reading, the bundle would no longer open (the sample is read when it opens)."""
    from intentvcs.core.references import REFERENCES_FILE, read_references

    row = '{"text": "weather in boston", "labels": ["GetWeather"], "spans": [{"start": 11, "end": 17, "label": "city "}]}\n'
    (tmp_path / REFERENCES_FILE).write_text(row)
    with pytest.raises(DataError, match="the span label 'city ' has leading or trailing whitespace"):
        read_jsonl(tmp_path / REFERENCES_FILE)  # a user's file to train on
    [stored] = read_references(tmp_path)
    assert stored.spans[0].label == "city "


def test_writing_through_a_dangling_link_into_no_folder_fails_as_open_does(tmp_path):
    """The folders the link pointed into were created, where open() raises."""
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "nowhere" / "deeper" / "out.json")
    with pytest.raises(FileNotFoundError, match="in a folder that does not exist"):
        atomic.write_text(link, "{}")
    assert not (tmp_path / "nowhere").exists()


def test_the_carriage_return_hint_is_for_line_ends_only(tmp_path):
    """A raw carriage return inside a value is an invalid control character, not old Mac line endings."""
    path = tmp_path / "cr.jsonl"
    path.write_bytes(b'{"text": "hi\rthere", "labels": ["greet"]}\n')
    with pytest.raises(DataError, match="Invalid control character") as error:
        read_jsonl(path)
    assert "carriage return alone" not in str(error.value)


def test_an_entity_annotation_or_relations_file_naming_a_key_twice_is_refused(tmp_path):
    """The JSONL reader refused a key given twice; a Rasa annotation and relations.json kept the last."""
    from intentvcs.core.relations import LabelRelations, RelationsError

    nlu = tmp_path / "nlu.yml"
    nlu.write_text('version: "3.1"\nnlu:\n- intent: weather\n  examples: |\n'
                   '    - weather in [boston]{"entity": "city", "entity": "town"}\n')
    with pytest.raises(DataError, match=r"nlu\.yml:5: entity annotation .*duplicate key 'entity'"):
        read_examples(nlu)
    relations = tmp_path / "relations.json"
    relations.write_text('{"format": "intentvcs-relations", "format_version": 1, "labels": ["a", "b"], '
                         '"relations": [{"type": "duplicate", "a": "a", "b": "b"}], "relations": []}')
    with pytest.raises(RelationsError, match="duplicate key 'relations'"):
        LabelRelations.load(relations)


def test_a_key_outside_rasas_schema_in_a_listed_example_is_refused(tmp_path):
    nlu = tmp_path / "nlu.yml"
    nlu.write_text('version: "3.1"\nnlu:\n- intent: greet\n  examples:\n  - text: hello\n    metdata: x\n')
    with pytest.raises(DataError, match=r"nlu\.yml:6: unknown key 'metdata' in this item of an 'examples' list"):
        read_examples(nlu)


def test_writing_to_a_loop_of_symbolic_links_is_an_os_error(tmp_path):
    """Python 3.11's resolve() raises RuntimeError on a loop, which the command line took for a bug."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(OSError, match="a loop of symbolic links"):
        atomic.write_text(tmp_path / "a", "{}")


@pytest.mark.parametrize("text", ["\u200b", "\ufeff \u2060", "\ufffd", "\u0301"])
def test_a_row_with_nothing_readable_is_refused_as_the_service_refuses_it(tmp_path, text):
    """A zero-width space, a BOM, a replacement character or a lone accent tokenizes to nothing: the service
    refuses such a text (schemas.readable), but a data file's row of it was trained on, and audited, as an
    empty string."""
    path = tmp_path / "rows.jsonl"
    path.write_text('{"text": "play jazz", "labels": ["play"]}\n' + json.dumps({"text": text, "labels": ["play"]})
                    + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"rows.jsonl:2: 'text' has nothing to read \(no letter, digit"):
        read_jsonl(path)
    # A sample the project wrote itself (a bundle's references) is read as it was accepted when written.
    assert read_jsonl(path, stored=True)[1].text == text
