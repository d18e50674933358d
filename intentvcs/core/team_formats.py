"""Training data in the formats teams keep it in: Rasa ``nlu.yml`` and a ``text,intent`` CSV.

``read_examples(path)`` (``iter_examples`` to stream) picks the reader by the file's suffix: ``.yml`` /
``.yaml`` a Rasa NLU file, ``.csv`` a CSV, anything else canonical JSONL
(``intentvcs.core.dataio``). Every row goes through the canonical checks
(``parse_row``), and every error is a ``DataError`` naming file, line and reason,
so a team's file is refused exactly like a JSONL one.

Rasa (``nlu:`` entries with ``intent`` and ``examples``, the block of ``- ``
lines Rasa 2 and 3 write, or the list of ``text`` (and ``metadata``) items
RasaYAMLWriter writes for examples with metadata, which is not read): entity
annotations ``[text](type)``, ``[text](type:value)`` (a synonym: the value is
Rasa's to map, the span is the text), ``[text]{"entity": "type", ...}`` and
``[text][{"entity": "type"}]`` become spans on the plain text; a list of several
entities on one text is refused, as overlapping spans are. An entity's ``role`` or ``group``, which a span
cannot hold, is dropped with a warning naming the line. An annotation whose text holds a ``[`` (one nested in
another's brackets) or whose ``(type:value)`` holds a ``(`` (its value cut at the first ``)``, the rest left in
the text) is refused. A ``#`` line in an
examples block is a comment Rasa skips: skipped with a warning. Synonym, regex
and lookup entries carry no training rows and are skipped; any other entry (a
misspelt ``intnet:``), a key Rasa's schema does not give an entry (a misspelt
second ``exmaples:`` block), a key given twice in a mapping, an examples
block folded with ``>`` (its lines joined into one example), an intent whose
examples are empty (``examples:``, ``[]``, only ``#`` lines) as one without
them, and U+0085, U+2028 or U+2029 (line ends to PyYAML's YAML 1.1, text to
Rasa's 1.2) are refused, as silently dropped or split rows would be. An intent's
name is read without surrounding spaces, as Rasa reads it. Examples in a quoted
string (what ``yaml.dump`` writes) are named by the line the string begins on.
An entity annotation whose JSON Python cannot read (nested past its recursion
limit, an integer of more digits than it converts) is refused at its line.

CSV: a header row naming at least ``text`` and ``intent`` (``id`` is kept when
present, other columns are ignored); an empty ``intent`` marks an out-of-scope
row, as ``labels: []`` does in JSONL. A row with more or fewer cells than the
header, or a quote never closed, is an error (not a row without an intent, or
one text holding the rest of the file), and so is a header naming ``text``,
``intent`` or ``id`` twice; a UTF-8 byte-order mark (Excel's "CSV UTF-8") is
ignored. In every format a byte that is not UTF-8 is named by line and column.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from intentvcs.core.csv_records import records
from intentvcs.core.dataio import (DataError, DuplicateKey, Example, counts_text, decode_utf8,
                                   iter_jsonl_numbered, line_and_column, parse_row, read_utf8, strict_loads,
                                   too_deep, unconvertible_json, unknown_labels)

# How a command's help names the files it reads rows from (by suffix).
FORMATS_HELP = "JSONL, a Rasa nlu.yml (.yml, .yaml) or a CSV of text,intent (.csv)"
RASA_SUFFIXES = (".yml", ".yaml")
CSV_SUFFIXES = (".csv",)
CSV_REQUIRED = ("text", "intent")
# The columns a row is read from: named twice, one would be read and the other silently dropped.
CSV_READ = CSV_REQUIRED + ("id",)
# Lists and mappings a Rasa file may nest: an NLU file needs 3 (nlu > entry >
# field), stories and rules a few more; hundreds would exhaust the YAML
# composer's recursion.
RASA_MAX_NESTING = 64
# [text](type) or [text](type:value), [text]{"entity": ...}, or Rasa's list form [text][{"entity": ...}, ...]
# (several entities on one text; a list that does not start with "{" is left as text, "[1][2]")
ANNOTATION = re.compile(r"\[(?P<text>[^\]]+)\](?:\((?P<short>[^)]+)\)|(?P<json>\{[^}]*\})|\[(?P<list>\s*\{[^\]]*)\])")
# Attributes of a Rasa entity that change what it is (a "departure" vs a "destination" city, which pizza a
# topping goes with) and that a span, a type alone, cannot hold: dropped with a warning naming the line.
RASA_ENTITY_DROPPED = ("role", "group")
# 'nlu' entries Rasa reads that carry no training rows here; any other entry is refused, not skipped: a
# misspelt "intnet:" would otherwise drop its rows without a word.
RASA_SKIPPED = ("synonym", "regex", "lookup")
# The keys each kind of 'nlu' entry may have (Rasa's schema, rasa/shared/nlu/training_data/schemas/nlu.yml, which
# refuses any other): a misspelt second block ("exmaples:") or an "intnet:" beside a "synonym:" was read past,
# its rows dropped without a word.
RASA_ENTRY_KEYS = {"intent": ("intent", "examples", "metadata"),
                   **{kind: (kind, "examples") for kind in RASA_SKIPPED}}
# Characters PyYAML (YAML 1.1) reads as line ends and YAML 1.2 (Rasa's ruamel) and editors as text: inside an
# example one split it into two examples, or made the parser refuse the file at a line past it.
YAML11_LINE_BREAK_NAMES = {"\x85": "next line", "\u2028": "line separator", "\u2029": "paragraph separator"}
YAML11_LINE_BREAKS = re.compile(f"[{''.join(YAML11_LINE_BREAK_NAMES)}]")
# The end of a line of a double-quoted YAML string whose line break does not fold into a space: an odd run of
# backslashes escapes the break itself, or ends in "\n", a line break of the value already.
QUOTED_BREAK_KEPT = re.compile(r"(?<!\\)(?:\\\\)*\\n?$")
log = logging.getLogger(__name__)


def read_examples(path: str | os.PathLike) -> list[Example]:
    """The rows of a JSONL, Rasa NLU YAML or CSV file (by suffix); ``DataError`` when malformed or empty."""
    return list(iter_examples(path))


def read_numbered(path: str | os.PathLike) -> list[tuple[int, Example]]:
    """``read_examples``'s rows with the line each begins on, for a caller that checks them by line too."""
    return list(iter_numbered(path))


def iter_examples(path: str | os.PathLike) -> Iterator[Example]:
    """``read_examples`` one row at a time, for files larger than memory should hold (JSONL and CSV
    stream; a Rasa file is parsed whole). A missing file is refused at once; a malformed row when it is
    read, and a file without rows at its end (``DataError``)."""
    return (example for _, example in iter_numbered(path))


def iter_numbered(path: str | os.PathLike) -> Iterator[tuple[int, Example]]:
    """``iter_examples``'s rows with the line each begins on (a Rasa example's own line)."""
    path = Path(path)
    suffix = path.suffix.lower()
    jsonl = suffix not in RASA_SUFFIXES + CSV_SUFFIXES
    if not path.is_file():
        kind = "a JSONL file" if jsonl else "a data file"
        raise DataError(path, None, f"is a directory, not {kind}" if path.is_dir() else "file not found")
    rows = (iter_jsonl_numbered(path) if jsonl else _rasa_rows(path) if suffix in RASA_SUFFIXES
            else _csv_rows(path))
    return _not_empty(path, rows)


def check_span_types(path: str | os.PathLike, known: Iterable[str],
                     rows: Iterable[tuple[int, Example]] | None = None) -> None:
    """Refuse a row of ``path`` whose span type is not in ``known`` (the training data's types).

    A model cannot learn a type it never saw, and scoring it would only count
    misses, so the data is refused with the file, line and reason instead.
    ``rows``: the file's rows as ``read_numbered`` gave them, when the caller
    has read it already (else it is read here).
    """
    known = set(known)
    for line, example in iter_numbered(path) if rows is None else rows:
        unknown = sorted({span.label for span in example.spans} - known)
        if unknown:
            shown = sorted(known)[:20]
            more = f" and {len(known) - len(shown)} more" if len(known) > len(shown) else ""
            raise DataError(path, line, f"span type(s) {unknown} do not occur in the training data "
                                        f"(types there: {shown}{more})")


def check_scored_rows(path: str | os.PathLike, rows: Sequence[tuple[int, Example]], labels: Sequence[str],
                      entity_types: Iterable[str]) -> None:
    """What every command that scores labelled rows (``read_numbered``'s) checks before it does: a gold label
    the model has no output for is named (a misspelt label would otherwise only lower the figures), and a
    span type it cannot tag is refused (``DataError``, file and line), as train and refit do. ``labels`` and
    ``entity_types``: the model's; no entity types, no span check."""
    unknown = unknown_labels([example for _, example in rows], labels)
    if unknown:
        log.warning("%s: %d label(s) the model was not trained on, counted as missed: %s", path,
                    sum(unknown.values()), counts_text(unknown))
    entity_types = list(entity_types)
    if entity_types:
        check_span_types(path, entity_types, rows)


def _not_empty(path: Path, rows: Iterator[tuple[int, Example]]) -> Iterator[tuple[int, Example]]:
    empty = True
    for row in rows:
        empty = False
        yield row
    if empty:
        raise DataError(path, None, "no rows")


def _row(path: Path, line: int, obj: dict[str, Any]) -> Example:
    try:
        return parse_row(obj)
    except ValueError as exc:
        raise DataError(path, line, str(exc)) from None


# ------------------------------------------------------------------ CSV
def _csv_rows(path: Path) -> Iterator[tuple[int, Example]]:
    # utf-8-sig: Excel's "CSV UTF-8" starts with a byte-order mark, which would
    # otherwise be part of the first column's name. surrogateescape: a byte that
    # is not UTF-8 reaches _Lines, which names its line; the text stream's own
    # error gives an offset into its decoding chunk, not a line.
    with path.open(encoding="utf-8-sig", errors="surrogateescape", newline="") as handle:
        rows = records(path, _Lines(path, handle))
        line, first = next(rows, (1, []))
        if not any(cell.strip() for cell in first) and not any(
                cell.strip() for _, record in rows for cell in record):
            # Nothing but whitespace (or a byte-order mark): not a header naming the wrong columns.
            raise DataError(path, None, f"the file is empty (expected a header row naming at least "
                                        f"{', '.join(CSV_REQUIRED)}, then one row per example)")
        header = _csv_header(path, line, first)
        for line, record in rows:
            yield line, _csv_row(path, line, header, record)


def _csv_header(path: Path, line: int, first: list[str]) -> list[str]:
    """The header's column names, lower-cased; refused when it lacks a column rows are read from, or
    names one twice (a row would keep one of the two cells and drop the other without a word)."""
    header = [name.strip().lower() for name in first]
    missing = [name for name in CSV_REQUIRED if name not in header]
    if missing:
        raise DataError(path, line, f"the header names no {' or '.join(missing)} column "
                                    f"(expected at least {', '.join(CSV_REQUIRED)}){delimiter_hint(first)}")
    repeated = [name for name in CSV_READ if header.count(name) > 1]
    if repeated:
        raise DataError(path, line, f"the header names the {' and '.join(map(repr, repeated))} column "
                                    f"more than once: which one holds the rows' values is unclear")
    return header


def delimiter_hint(header: list[str]) -> str:
    """A hint when the header line holds no comma but a ';' or a tab: the file seems to use another
    delimiter (Excel writes ';' where the decimal separator is a comma), which this reader does not."""
    if len(header) != 1 or "," in header[0]:
        return ""
    used = [name for char, name in ((";", "';'"), ("\t", "tabs")) if char in header[0]]
    if not used:
        return ""
    return (f"; the file seems to separate its columns with {' or '.join(used)}: this reader expects "
            "commas (save it as comma-separated CSV)")


class _Lines:
    """The lines of a text file for ``csv.reader``, counted, with those of the record being read kept:
    csv's errors say neither where a record began nor where its broken field did."""

    def __init__(self, path: Path, handle: Any):
        self.path, self.handle, self.line, self.record = path, handle, 0, []

    def __iter__(self) -> "_Lines":
        return self

    def __next__(self) -> str:
        text = self.handle.readline()
        if not text:
            raise StopIteration
        self.line += 1
        if not text.isascii():
            _check_utf8(self.path, self.line, text)
        self.record.append(text)
        return text


def _check_utf8(path: Path, line: int, text: str) -> None:
    """Refuse a line read with ``surrogateescape`` that held a byte that is not UTF-8 (now a lone
    surrogate, which valid UTF-8 never decodes to), by line and column as every reader names it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        decode_utf8(path, line, text.encode("utf-8", "surrogateescape"))  # raises the DataError


def _csv_row(path: Path, line: int, header: list[str], record: list[str]) -> Example:
    if len(record) != len(header):
        # A missing cell would otherwise read as an empty intent: out of scope.
        raise DataError(path, line, f"the row has {len(record)} fields; the header has {len(header)}")
    cells = dict(zip(header, record))
    intent = cells["intent"].strip()
    obj: dict[str, Any] = {"text": cells["text"], "labels": [intent] if intent else []}
    if cells.get("id"):
        obj["id"] = cells["id"]
    return _row(path, line, obj)


# ------------------------------------------------------------------ Rasa
def _rasa_rows(path: Path) -> Iterator[tuple[int, Example]]:
    import yaml

    root = _compose(path)
    entries = _mapping(path, root).get("nlu")
    if entries is None:
        raise DataError(path, None, "no 'nlu' section: not a Rasa NLU training data file")
    if not isinstance(entries, yaml.SequenceNode):
        raise DataError(path, entries.start_mark.line + 1, "'nlu' must be a list of entries")
    for entry in entries.value:
        fields = _mapping(path, entry)
        kind = next((kind for kind in RASA_ENTRY_KEYS if kind in fields), None)
        if kind is None:
            skipped = f"{', '.join(RASA_SKIPPED[:-1])} or {RASA_SKIPPED[-1]}"
            raise DataError(path, entry.start_mark.line + 1, f"an 'nlu' entry must be an 'intent' (or a {skipped} "
                                                             f"entry, which carry no rows), got {_entry_shown(entry)}")
        _check_entry_keys(path, entry, kind)
        if kind == "intent":
            yield from _intent_rows(path, fields)


def _check_entry_keys(path: Path, entry: Any, kind: str) -> None:
    """Refuse a key of a ``kind`` 'nlu' entry that Rasa's schema does not give it, at the key's line."""
    _check_keys(path, entry, RASA_ENTRY_KEYS[kind], f"{kind!r} entry")


def _check_keys(path: Path, node: Any, allowed: Sequence[str], what: str) -> None:
    """Refuse a key of the mapping ``node`` other than ``allowed`` (Rasa's schema), at the key's line."""
    import yaml

    for key, _ in node.value:
        scalar = isinstance(key, yaml.ScalarNode)
        if not scalar or key.value not in allowed:
            shown = repr(key.value) if scalar else "(a list or mapping)"
            raise DataError(path, key.start_mark.line + 1,
                            f"unknown key {shown} in this {what} (its keys: {', '.join(map(repr, allowed))}): "
                            "what it holds would be dropped; Rasa refuses the file")


def _compose(path: Path) -> Any:
    """The YAML node tree of ``path``; ``DataError`` with the line for bytes that are not UTF-8 or YAML."""
    import yaml

    text = read_utf8(path)
    separator = YAML11_LINE_BREAKS.search(text)
    if separator:
        line, column = line_and_column(text, separator.start())
        char = separator.group()
        raise DataError(path, line, f"the character U+{ord(char):04X} ({YAML11_LINE_BREAK_NAMES[char]}) at column "
                                    f"{column}: this reader's YAML (1.1) ends a line there, Rasa's (1.2) and editors "
                                    "do not, so its lines would be read apart; replace it with a space")
    try:
        return yaml.compose(text, Loader=_nesting_loader())
    except yaml.reader.ReaderError as exc:
        # A character YAML does not allow (a control character): PyYAML names only its offset in the text.
        line, column = line_and_column(text, exc.position)
        raise DataError(path, line, f"invalid YAML: unacceptable character #x{exc.character:04x} at "
                                    f"column {column}: {exc.reason}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise DataError(path, None if mark is None else mark.line + 1, f"invalid YAML: {exc}") from None


def _entry_shown(node: Any) -> str:
    """An 'nlu' entry as a refusal names it: its keys, or its text."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        return "an entry with key(s) " + ", ".join(repr(key.value) for key, _ in node.value
                                                    if isinstance(key, yaml.ScalarNode))
    if isinstance(node, yaml.ScalarNode):
        return f"{node.value[:40]!r} (not a mapping)"
    return "a list (not a mapping)"


@functools.cache
def _nesting_loader() -> type:
    """PyYAML's safe loader, refusing lists and mappings nested deeper than ``RASA_MAX_NESTING``.

    Its composer recurses once per level, so deeper input would end in a
    RecursionError (a traceback) instead of an error naming the line.
    """
    import yaml

    class Loader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.depth >= RASA_MAX_NESTING:
                raise yaml.composer.ComposerError(None, None, f"nested deeper than {RASA_MAX_NESTING} levels",
                                                  self.peek_event().start_mark)
            self.depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return Loader


def _mapping(path: Path, node: Any) -> dict[str, Any]:
    """A YAML mapping node's values by (scalar) key; {} for any other node.

    A key given twice is refused at the second: YAML keeps the last value and
    drops the first without a word (a second 'nlu:' section or 'examples:'
    block loses rows), and Rasa refuses such a file.
    """
    import yaml

    if not isinstance(node, yaml.MappingNode):
        return {}
    fields: dict[str, Any] = {}
    keys: dict[str, Any] = {}
    for key, value in node.value:
        if not isinstance(key, yaml.ScalarNode):
            continue
        if key.value in keys:
            raise DataError(path, key.start_mark.line + 1,
                            f"duplicate key {key.value!r} (first on line {keys[key.value].start_mark.line + 1}): "
                            "YAML would keep only the last; Rasa refuses the file")
        keys[key.value], fields[key.value] = key, value
    return fields


def _intent_rows(path: Path, fields: dict[str, Any]) -> Iterator[tuple[int, Example]]:
    import yaml

    intent, examples = fields["intent"], fields.get("examples")
    where = intent.start_mark.line + 1
    if not isinstance(intent, yaml.ScalarNode) or not intent.value.strip():
        raise DataError(path, where, "'intent' must be a non-empty name")
    # Stripped as Rasa strips it (TrainingData.sanitize_examples) and the CSV reader its intent cell: a quoted
    # "greet " is Rasa's "greet", not a label refused at every example's line.
    name = intent.value.strip()
    if isinstance(examples, yaml.SequenceNode):
        marked = _listed_examples(path, examples)
    elif isinstance(examples, yaml.ScalarNode) and examples.style == ">":
        # A folded block joins its lines: "- hello\n- bye" is one example "hello - bye", two rows lost as one.
        raise DataError(path, examples.start_mark.line + 1, f"intent {name!r}: an 'examples' block folded "
                                                            "with '>' joins its lines into one example; write '|'")
    elif isinstance(examples, yaml.ScalarNode):
        folded = _folded_example_line(examples)
        if folded is not None:
            raise DataError(path, folded, f"intent {name!r}: this '- ' line of an 'examples' string (not a '|' block) "
                                          "folds onto the line before it, both read as one example; write a '|' block")
        marked = _block_examples(path, examples)
    else:
        raise DataError(path, where, f"intent {name!r} has no 'examples' block of '- ' lines "
                                     "(nor a list of 'text' items)")
    read = False
    for number, example in marked:
        text, spans = _annotated(path, number, example)
        read = True
        yield number, _row(path, number, {"text": text, "labels": [name], "spans": spans})
    if not read:
        # An empty block ("examples:", "[]", only '#' lines) is refused as a missing one is: the intent
        # vanished without a word, absent from the model (Rasa warns that it "has no examples").
        raise DataError(path, where, f"intent {name!r} has no examples: its 'examples' holds no '- ' line "
                                     "(nor 'text' item); write them, or remove the intent")


def _folded_example_line(examples: Any) -> int | None:
    """The line of the file where a quoted (or plain) ``examples`` string folds a ``- `` line onto the line before
    it, or None. A line break in such a string reads as a space, as in a '>' block: "- hi" and "- hello" on two
    lines were one example "hi - hello". A blank line, or in double quotes a break escaped with '\\' (how
    yaml.dump wraps a long string) or after a "\\n", keeps them apart."""
    start, end = examples.start_mark, examples.end_mark
    if examples.style == "|" or start.line == end.line or start.buffer is None:
        return None
    lines = start.buffer[start.index:end.index].splitlines()
    for number, (before, line) in enumerate(zip(lines, lines[1:]), start=start.line + 2):
        escaped = examples.style == '"' and QUOTED_BREAK_KEPT.search(before.rstrip(" \t"))
        if line.lstrip(" \t").startswith("-") and before.strip() and not escaped:
            return number
    return None


def _block_examples(path: Path, examples: Any) -> Iterator[tuple[int, str]]:
    """``(line, annotated text)`` of each ``- `` line of an ``examples: |`` block (or string)."""
    if examples.style == "|":
        # A literal block starts on the line after its indicator, one line of the file per line of text.
        numbers: Iterator[int] = itertools.count(examples.start_mark.line + 2)
    else:
        # A quoted or plain string (what yaml.dump writes): its line breaks are "\n" escapes or folded, not
        # the file's lines, so each example is named by the line the string begins on (counting on named
        # lines past the end of the file).
        numbers = itertools.repeat(examples.start_mark.line + 1)
    for number, raw in zip(numbers, examples.value.splitlines()):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            # YAML keeps a '#' line of a block scalar as text; Rasa skips it as a comment. Said, not
            # refused: it is no example, so nothing is lost, but a commented-out example is named.
            log.warning("%s:%d: a '#' comment line in an 'examples' block, skipped as Rasa skips it: %r",
                        path, number, line[:40])
            continue
        if not line.startswith("-"):
            raise DataError(path, number, f"an example line must start with '- ', got {line[:40]!r}")
        yield number, line[1:].strip()


def _listed_examples(path: Path, examples: Any) -> Iterator[tuple[int, str]]:
    """``(line, annotated text)`` of each item of the list form RasaYAMLWriter writes for examples with
    metadata (``- text: |`` then ``metadata:``); the metadata is Rasa's, not read here."""
    import yaml

    for item in examples.value:
        number, fields = item.start_mark.line + 1, _mapping(path, item)
        text = fields.get("text")
        if not isinstance(text, yaml.ScalarNode):
            raise DataError(path, number, "an item of an 'examples' list must be a mapping with a 'text' "
                                          "(and an optional 'metadata')")
        _check_keys(path, item, ("text", "metadata"), "item of an 'examples' list")
        # As Rasa does: the line end a "text: |" block adds, and spaces, are not the utterance's.
        yield number, text.value.strip("\n\r ")


def _annotated(path: Path, line: int, marked: str) -> tuple[str, list[dict[str, Any]]]:
    """Plain text and spans of one Rasa example with ``[text](type)`` annotations."""
    parts, spans, cursor, length = [], [], 0, 0
    for match in ANNOTATION.finditer(marked):
        if "[" in match["text"]:
            # Rasa's pattern takes the text from the first '[' on: "[[NYC](city)](place)" read as "[NYC](place)"
            # with a span over "[NYC", its markup trained as words.
            raise DataError(path, line, f"entity annotation {match.group(0)!r}: its text holds a '[' (an annotation "
                                        "nested in another's brackets, or a '[' never closed); annotate the words "
                                        "once, without brackets inside")
        before = marked[cursor:match.start()]
        parts.append(before)
        length += len(before)
        entity = _entity_type(path, line, match)
        spans.append({"start": length, "end": length + len(match["text"]), "label": entity})
        parts.append(match["text"])
        length += len(match["text"])
        cursor = match.end()
    parts.append(marked[cursor:])
    return "".join(parts), spans


def _entity_type(path: Path, line: int, match: re.Match) -> str:
    if match["short"] is not None:
        if "(" in match["short"]:
            # "[NYC](city:New York (US))" ends at the value's own ')': the text read "NYC)", as Rasa reads it too.
            raise DataError(path, line, f"entity annotation {match.group(0)!r}: a '(' inside [text](type:value) "
                                        "ends it at the first ')', leaving the rest in the text; write "
                                        '[text]{"entity": "type", "value": "..."}')
        entity = match["short"].split(":", 1)[0].strip()
    else:
        attributes = _entity_object(path, line, match)
        dropped = {key: attributes[key] for key in RASA_ENTITY_DROPPED if attributes.get(key) is not None}
        if dropped:
            # "departure" and "destination" cities both train and score as "city": said at the line, not silently.
            log.warning("%s:%d: entity annotation [%s] gives %s: this product tags entity types only, so it is "
                        "dropped and the entity read as its type %r (entities Rasa tells apart by it are one here); "
                        "to keep the distinction make it part of the type", path, line, match["text"],
                        " and ".join(f"{key} {value!r}" for key, value in dropped.items()), attributes.get("entity"))
        entity = attributes.get("entity")
    if not isinstance(entity, str) or not entity.strip():
        raise DataError(path, line, f"entity annotation {match.group(0)!r} names no entity type")
    return entity.strip()


def _entity_object(path: Path, line: int, match: re.Match) -> dict[str, Any]:
    """The JSON object of a ``{...}`` annotation, or the only one of Rasa's list form ``[{...}, ...]``."""
    listed = match["list"] is not None
    source = f"[{match['list']}]" if listed else match["json"]
    try:
        value = strict_loads(source)  # {"entity": "city", "entity": "town"} kept the last without a word
    except DuplicateKey as exc:
        raise DataError(path, line, f"entity annotation {match.group(0)!r}: {exc}") from None
    except json.JSONDecodeError:
        value = None
    except (RecursionError, ValueError) as exc:
        # JSON that Python's parser cannot hold (nesting past its recursion limit, an integer of more digits
        # than it converts) escaped as a traceback, or a ValueError naming neither file nor line.
        reason = too_deep(source)[1] if isinstance(exc, RecursionError) else unconvertible_json(exc)
        raise DataError(path, line, f"entity annotation [{match['text']}]: {reason}") from None
    if listed and isinstance(value, list):
        if len(value) > 1:
            # Rasa makes one entity of each object, all on the same text: spans that overlap, which the
            # product refuses (its tagger gives a word one tag). Keeping the first would drop the others
            # without a word, and which one the user means is theirs to say.
            raise DataError(path, line, f"entity annotation {match.group(0)!r} gives one text {len(value)} "
                                        "entities: spans may not overlap (a word is tagged with one entity); "
                                        "keep one")
        value = value[0] if value else None
    if not isinstance(value, dict):
        raise DataError(path, line, f"entity annotation {source!r} is not a JSON object")
    return value


def out_of_scope_as_such(path: str | os.PathLike, rows: Sequence[tuple[int, Example]],
                         oos_rule: str | None = None) -> list[tuple[int, Example]]:
    """``rows`` (line, row) with a row labelled ``"oos"`` alone (CLINC150's out-of-scope rows) read as an
    out-of-scope row, ``labels []``, whatever the OOS rule (``oos_rule``, its name, None where the data is
    read before the model, as scoring commands read it; it only sets how loudly this is said): ``"oos"`` names the
    out-of-scope verdict, and the decision layer answers no intent of that name. Trained as one, it was a
    column the model could never answer (distance, threshold, none), and scored as one, a miss on every such
    row; the train rule makes out-of-scope rows that class again. A row naming it beside an intent is a
    ``DataError``: a request is out of scope or it is not. Read by ``train``, ``refit``, ``evaluate``,
    ``robustness`` and the export's parity rows; the audit reads its batch rows by ``out_of_scope_row``."""
    from intentvcs.core.oos import OOS_LABEL, TrainRule

    read: list[tuple[int, Example]] = []
    named = 0
    for line, example in rows:
        try:
            read.append((line, out_of_scope_row(example)))
        except ValueError as exc:
            raise DataError(path, line, str(exc)) from None
        named += OOS_LABEL in example.labels
    if named:
        # Under the train rule these rows are its class, as the data meant: said, not warned of.
        log.log(logging.INFO if oos_rule == TrainRule.name else logging.WARNING,
                "%s: %d row(s) labelled %r are read as out-of-scope rows (labels []): %r names the service's "
                "out-of-scope verdict, no intent it can answer; %s", path, named, OOS_LABEL, OOS_LABEL,
                "the OOS rule train learns them as its out-of-scope class" if oos_rule == TrainRule.name else
                "write labels [] for such rows")
    return read


def out_of_scope_row(example: Example) -> Example:
    """``example``, or the out-of-scope row (``labels []``) it is when labelled ``"oos"`` alone
    (``out_of_scope_as_such``); ``ValueError`` when ``"oos"`` stands beside an intent."""
    from intentvcs.core.oos import OOS_LABEL

    if OOS_LABEL not in example.labels:
        return example
    if len(example.labels) > 1:
        raise ValueError(f"labels {list(example.labels)} name {OOS_LABEL!r}, the out-of-scope verdict, beside an "
                         "intent; an out-of-scope row carries no label (labels [] in JSONL, an empty intent in a CSV)")
    return example.with_labels(())
