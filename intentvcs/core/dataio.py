"""The canonical data format: JSON Lines, one utterance per line.

Each line is an object with
  ``text``   non-empty string (required),
  ``labels`` list of intent names (required; ``[]`` means out of scope),
  ``id``     string (optional),
  ``spans``  list of ``{"start", "end", "label"}`` character spans of entities
             or slots, end exclusive (optional),
  ``meta``   free-form object (optional).
An optional field may be left out or null; any other value must have its type
(``"spans": ""`` or ``false`` is an error, not "no spans"), and span offsets are
integers, not ``true``/``false``.
Any other key is an error, so a typo such as ``"label"`` is caught instead of
silently training on nothing, and so is a key given twice in one object (JSON
would keep only the last). A label or span label with leading or trailing
whitespace is refused in rows read to train or score. Errors name the file,
the line and the reason: a line that is not UTF-8, not JSON (an integer of
more digits than Python reads included), nested deeper than ``MAX_NESTING``, or
whose text is longer than ``MAX_TEXT_CHARS`` or is not valid Unicode (a lone
surrogate such as ``"\ud800"``, which JSON can spell but no tokenizer reads).
"""

from __future__ import annotations

import json
import os
import unicodedata
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Iterator

from intentvcs.core import atomic

ALLOWED_KEYS = frozenset({"text", "labels", "id", "spans", "meta"})
# An utterance, not a document: the model reads at most its max_length tokens
# (64 by default), and a text of megabytes would cost minutes and gigabytes in
# tokenisation and reports before that truncation. 10,000 code points is two
# orders of magnitude above any utterance of the public sets.
MAX_TEXT_CHARS = 10_000
# JSON nesting (objects and lists) one row may have: a row needs 3 (spans);
# deeper input would only exhaust the parser's recursion.
MAX_NESTING = 32


class DataError(ValueError):
    """A data file is malformed; the message names file, line and reason."""

    def __init__(self, path: str | os.PathLike, line: int | None, reason: str):
        self.path = str(path)
        self.line = line
        self.reason = reason
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {reason}")


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    label: str

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "label": self.label}


@dataclass(frozen=True)
class Example:
    text: str
    labels: tuple[str, ...]
    id: str | None = None
    spans: tuple[Span, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_out_of_scope(self) -> bool:
        return not self.labels

    def with_labels(self, labels: Iterable[str]) -> "Example":
        return Example(self.text, tuple(labels), self.id, self.spans, dict(self.meta))

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {"text": self.text, "labels": list(self.labels)}
        if self.id is not None:
            row["id"] = self.id
        if self.spans:
            row["spans"] = [s.to_dict() for s in self.spans]
        if self.meta:
            row["meta"] = self.meta
        return row


def parse_row(obj: Any, require_labels: bool = True, stored: bool = False) -> Example:
    """Validate one decoded JSON value; raise ``ValueError`` with the reason.

    ``require_labels=False`` reads a row to predict, which may leave ``labels``
    out (it is then ``[]``); every other rule holds. ``stored=True`` reads rows the
    project wrote itself (a checkpoint's or bundle's sample of its training rows) as
    they were accepted when written: a span label with surrounding whitespace,
    refused only since format rules tightened, is read as it is, so that such a
    bundle still opens.
    """
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - ALLOWED_KEYS)
    if unknown:
        raise ValueError(f"unknown key(s) {unknown}; allowed: {sorted(ALLOWED_KEYS)}")
    text = obj.get("text")
    if not isinstance(text, str):
        raise ValueError("'text' must be a string")
    problem = text_problem(text, "'text'", stored)
    if problem is not None:
        raise ValueError(problem)
    check_unicode("'text'", text)
    if "labels" not in obj and require_labels:
        raise ValueError("'labels' is missing (use [] for out-of-scope)")
    labels = obj.get("labels", [])
    if not isinstance(labels, list) or not all(isinstance(x, str) and x.strip() for x in labels):
        raise ValueError("'labels' must be a list of non-empty strings")
    if len(set(labels)) != len(labels):
        raise ValueError(f"'labels' has duplicates: {labels}")
    for label in labels:
        check_unicode("a label", label)
        if require_labels:
            # "X " would train as an intent of its own beside "X", answered and counted apart; a row read
            # to predict is not trained or scored on its labels.
            _check_unpadded("the label", label)
    ident = obj.get("id")
    if ident is not None and not isinstance(ident, str):
        raise ValueError("'id' must be a string")
    if ident is not None:
        check_unicode("'id'", ident)
    # Optional fields: absent or null is none; any other value must have the field's type
    # ("spans": "" or false is a broken export, not "no spans").
    spans = obj.get("spans")
    spans = [] if spans is None else spans
    if not isinstance(spans, list):
        raise ValueError(f"'spans' must be a list of {{start, end, label}} objects, got {_json_type(spans)}")
    spans = tuple(_parse_span(s, len(text)) for s in spans)
    _check_disjoint(spans)
    if require_labels and not stored:
        for span in spans:
            _check_unpadded("the span label", span.label)  # "city " would be an entity type beside "city"
    meta = obj.get("meta")
    meta = {} if meta is None else meta
    if not isinstance(meta, dict):
        raise ValueError(f"'meta' must be an object, got {_json_type(meta)}")
    return Example(text=text, labels=tuple(labels), id=ident, spans=spans, meta=meta)


def _parse_span(obj: Any, text_len: int) -> Span:
    if not isinstance(obj, dict) or not {"start", "end", "label"} <= set(obj):
        raise ValueError("each span needs 'start', 'end' and 'label'")
    start, end, label = obj["start"], obj["end"], obj["label"]
    for name, offset in (("start", start), ("end", end)):
        if not isinstance(offset, int) or isinstance(offset, bool):  # true is an int to Python, not to JSON
            raise ValueError(f"span {name!r} must be an integer, got {_json_type(offset)}")
    if not 0 <= start < end <= text_len:
        raise ValueError(f"span [{start}, {end}) is outside the text (length {text_len})")
    if not isinstance(label, str) or not label:
        raise ValueError("span 'label' must be a non-empty string")
    check_unicode("a span label", label)
    return Span(start, end, label)


def _check_unpadded(what: str, label: str) -> None:
    if label != label.strip():
        raise ValueError(f"{what} {label!r} has leading or trailing whitespace")


def _json_type(value: Any) -> str:
    """``value`` in JSON's words (the user wrote JSON): ``false``, ``1.5``, ``a string``, ``an array``..."""
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)[:40]
    names = {str: "a string", list: "an array", dict: "an object"}
    return next((name for kind, name in names.items() if isinstance(value, kind)), type(value).__name__)


def _check_disjoint(spans: tuple[Span, ...]) -> None:
    """Refuse overlapping spans: a word can be one entity only (the tagger gives each word one tag)."""
    ordered = sorted(spans, key=lambda s: (s.start, s.end))
    for first, second in zip(ordered, ordered[1:]):
        if second.start < first.end:
            raise ValueError(f"spans [{first.start}, {first.end}) {first.label!r} and [{second.start}, "
                             f"{second.end}) {second.label!r} overlap")


def known_spans_only(rows: Iterable[Example], types: set[str]) -> list[Example]:
    """``rows`` with only the spans whose type is in ``types``, every row kept: validation data that
    ``team_formats.check_span_types`` accepts for a model trained on rows with those types."""
    return [replace(row, spans=tuple(span for span in row.spans if span.label in types)) for row in rows]


# Unicode general categories of what a reader sees: letters, numbers, punctuation, symbols.
VISIBLE_CATEGORIES = frozenset("LNPS")
REPLACEMENT_CHARACTER = "\ufffd"


def readable(text: str) -> bool:
    """Whether ``text`` holds something to read: a letter, digit, punctuation mark or symbol. Nothing else
    (white space, control and format characters such as a zero-width space or a BOM, lone combining
    marks) tokenizes to anything; nor does U+FFFD, the replacement character, a symbol that stands for bytes
    that could not be decoded, which BERT's normaliser drops (a text of it alone was answered with the
    model's guess for an empty string). The service's requests and every data file are held to it."""
    return any(char != REPLACEMENT_CHARACTER and unicodedata.category(char)[0] in VISIBLE_CATEGORIES
               for char in text)


def text_problem(text: str, name: str, stored: bool = False) -> str | None:
    """Why ``text`` (called ``name`` in the message) is no utterance to read: empty, nothing ``readable`` (a row
    of a zero-width space alone was trained on, and audited, as an empty string), or over the limit. ``stored``:
    a row the project wrote itself (``parse_row``), held to the rule it was written under, white space only, so
    that a bundle whose references hold such a row still opens."""
    if not text.strip():
        return f"{name} is empty"
    if not stored and not readable(text):
        return f"{name} has nothing to read (no letter, digit, punctuation mark or symbol)"
    if len(text) > MAX_TEXT_CHARS:
        return f"{name} has {len(text)} characters; the limit is {MAX_TEXT_CHARS}"
    return None


def check_unicode(what: str, value: str) -> None:
    """Refuse a lone surrogate: valid in a JSON string, not text, and fatal to the tokenizer later."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{what} holds a lone surrogate (\\u{ord(value[exc.start]):04x} at character "
                         f"{exc.start}), which is not valid Unicode text") from None


def line_nested_past(text: str, depth: int) -> int | None:
    """The line (from 1) where ``text``'s JSON first nests objects and lists deeper than ``depth`` (brackets
    inside strings do not count); None when it never does."""
    level, in_string, escaped, line = 0, False, False, 1
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            level += 1
            if level > depth:
                return line
        elif char in "]}":
            level -= 1
        if char == "\n":
            line += 1
    return None


def too_deep(text: str) -> tuple[int | None, str]:
    """The line and the reason for a whole JSON ``text`` that Python's parser gave up on with a
    ``RecursionError``: where the parser gave out is not known, so the line is where the value first nests
    past ``MAX_NESTING`` levels (None when it never does), where the deep nesting starts."""
    line = line_nested_past(text, MAX_NESTING)
    return line, ("nested deeper than Python's recursion limit"
                  f"{'' if line is None else f' (past {MAX_NESTING} levels from this line)'}")


def iter_jsonl(path: str | os.PathLike, stored: bool = False) -> Iterator[Example]:
    """Yield examples from a JSONL file; blank lines are skipped (``stored``: ``parse_row``'s).

    Raises ``DataError`` naming the file, and the line where there is one.
    """
    return (example for _, example in iter_jsonl_numbered(path, stored))


def iter_jsonl_numbered(path: str | os.PathLike, stored: bool = False) -> Iterator[tuple[int, Example]]:
    """``iter_jsonl``'s examples with the line each is on."""
    path = Path(path)
    if path.is_dir():
        raise DataError(path, None, "is a directory, not a JSONL file")
    if not path.is_file():
        raise DataError(path, None, "file not found")
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            for example in _parse_line(path, number, raw, stored):
                yield number, example


def _parse_line(path: Path, number: int, raw: bytes, stored: bool = False) -> Iterator[Example]:
    """The example on one line, as 0 (blank) or 1 item; ``DataError`` for anything else."""
    obj = decode_line(path, number, raw)
    if obj is None:
        return
    try:
        yield parse_row(obj, stored=stored)
    except ValueError as exc:
        raise DataError(path, number, str(exc)) from None


def read_utf8(path: str | os.PathLike) -> str:
    """The whole text of ``path`` (a source data set's file, a relations file), decoded as UTF-8, without
    newline translation; a byte that is not UTF-8 is a ``DataError`` naming its line and column
    (``decode_utf8``)."""
    return decode_utf8(path, 1, Path(path).read_bytes())


def decode_utf8(path: str | os.PathLike, first_line: int, raw: bytes) -> str:
    """``raw`` (bytes of ``path`` from the start of line ``first_line``) decoded as UTF-8; a byte that is not
    is a ``DataError`` naming its line and (byte) column, the words every reader of the product uses."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = line_and_column(raw, exc.start)
        raise DataError(path, first_line + line - 1,
                        f"not UTF-8: byte 0x{raw[exc.start]:02x} at column {column}") from None


def line_and_column(text: str | bytes, offset: int) -> tuple[int, int]:
    """The line and column (both from 1) of ``offset`` in ``text``: in characters of a str, bytes of bytes."""
    newline = "\n" if isinstance(text, str) else b"\n"
    return text.count(newline, 0, offset) + 1, offset - (text.rfind(newline, 0, offset) + 1) + 1


def cr_only_lines(format_name: str) -> str:
    """Why a file whose lines end in a carriage return alone (old Mac line endings) reads as one line."""
    return (f"its lines end in a carriage return alone (old Mac line endings), which {format_name} does not read as "
            "line ends: convert them to \\n")


def without_bom(number: int, line: str) -> str:
    """Line ``number``'s text without the byte-order mark a first line may start with (Notepad's "UTF-8 with
    BOM"): no part of the first row, as in a CSV."""
    return line.removeprefix("\ufeff") if number == 1 else line


def decode_line(path: str | os.PathLike, number: int, raw: bytes) -> Any:
    """The JSON value on line ``number`` of ``path`` (``raw`` bytes), or None for a blank line.

    ``DataError`` names the file and line for a line that is not UTF-8, nests
    deeper than ``MAX_NESTING``, is not JSON or names a key twice in one object;
    ``parse_row`` checks the value.
    """
    line = without_bom(number, decode_utf8(path, number, raw))
    if not line.strip():
        return None
    # Nesting deeper than MAX_NESTING needs more brackets than that: the exact
    # (Python-speed) count runs only on the rare line that has so many.
    if raw.count(b"[") + raw.count(b"{") > MAX_NESTING and line_nested_past(line, MAX_NESTING) is not None:
        raise DataError(path, number, f"JSON nested deeper than {MAX_NESTING} levels")
    try:
        # Without its line ending: an error at the end of the line ("}" missing) was placed at column 1 of
        # the line after it.
        return strict_loads(line.rstrip("\r\n"))
    except DuplicateKey as exc:
        raise DataError(path, number, str(exc)) from None
    except json.JSONDecodeError as exc:
        reason = f"invalid JSON: {exc.msg} (column {exc.colno})"
        # Lines cut by a carriage return alone: the whole file is one "line", with data after its first value.
        if exc.msg == "Extra data" and "\r" in line.rstrip("\r\n"):
            reason += f"; {cr_only_lines('JSONL')}"
        raise DataError(path, number, reason) from None
    except ValueError as exc:
        raise DataError(path, number, unconvertible_json(exc)) from None


def unconvertible_json(exc: ValueError) -> str:
    """Why ``json`` refused valid JSON with a ``ValueError`` of its own (not a ``JSONDecodeError``): an integer of
    more digits than Python converts (``sys.get_int_max_str_digits``), in words for users: its advice to call
    ``sys.set_int_max_str_digits`` is for programmers."""
    return f"invalid JSON: {str(exc).split(';')[0]}"


class DuplicateKey(ValueError):
    """A JSON object names a key twice (``key``); its text is the refusal's words."""

    def __init__(self, key: str):
        super().__init__(f"duplicate key {key!r}: JSON would keep only its last value and drop the other "
                         "without a word")
        self.key = key


def strict_loads(text: str) -> Any:
    """``json.loads(text)``, raising ``DuplicateKey`` for a key given twice in one object: ``json`` keeps the
    last value, so a second ``"labels"`` silently replaced the first (a row of an intent read as out of scope),
    as YAML's would; in a source data set a dialogue id given twice lost a dialogue (``training.loaders``)."""
    return json.loads(text, object_pairs_hook=_unique_keys)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        raise DuplicateKey(next(key for key, _ in pairs if key in seen or seen.add(key)))
    return obj


def read_jsonl(path: str | os.PathLike, stored: bool = False) -> list[Example]:
    examples = list(iter_jsonl(path, stored))
    if not examples:
        raise DataError(path, None, "no rows")
    return examples


def write_jsonl(path: str | os.PathLike, examples: Iterable[Example]) -> Path:
    """Write examples atomically (temp file, then rename)."""
    lines = [json.dumps(e.to_dict(), ensure_ascii=False) for e in examples]
    return atomic.write_text(path, "\n".join(lines) + ("\n" if lines else ""))


def unknown_labels(rows: Iterable[Example], labels: Iterable[str]) -> Counter:
    """How often each label outside ``labels`` (a model's) is written on ``rows``: what the model can only miss."""
    known = set(labels)
    return Counter(label for ex in rows for label in ex.labels if label not in known)


def counts_text(counts: Counter, top: int = 5) -> str:
    """The ``top`` most common of ``counts`` as the warnings name them: ``label (n), ...``."""
    return ", ".join(f"{label} ({n})" for label, n in counts.most_common(top))


def label_inventory(*datasets: Iterable[Example]) -> list[str]:
    """Sorted union of all labels seen in the given datasets."""
    return sorted({label for ds in datasets for ex in ds for label in ex.labels})


def fingerprint(*datasets: Iterable[Example]) -> str:
    """A content hash of datasets (order-sensitive), recorded with every model."""
    import hashlib

    digest = hashlib.sha256()
    for ds in datasets:
        for ex in ds:
            digest.update(json.dumps(ex.to_dict(), ensure_ascii=False, sort_keys=True).encode("utf-8"))
            digest.update(b"\n")
        digest.update(b"\x00")
    return f"sha256:{digest.hexdigest()}"
