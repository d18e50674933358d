"""SNIPS / ATIS folder format (as in the SlotGated-SLU copies) → canonical examples.

A data set folder has one sub-folder per split (``train``, ``valid``,
``test``), each holding three line-aligned files:

``seq.in``   one utterance a line, whitespace-separated tokens;
``seq.out``  one BIO slot tag per token (``O``, ``B-<slot>``, ``I-<slot>``);
``label``    the intent; multi-intent rows join intents with ``#``
             (ATIS ``atis_flight#atis_airfare``) and become several labels;
             an intent with whitespace around it (``a # b``) or whitespace or
             a control character inside it (``Play Music``) is refused.

Lines end in ``\\n`` or ``\\r\\n``. A carriage return not followed by a line feed
is refused naming file, line and column: old Mac line endings made the whole
file one row (its intents joined by carriage returns into one label), and a
stray one inside a line split a token in two without a word.

The example text is the tokens joined by single spaces (the files carry
trailing blanks), and the tags become character ``spans`` on that text. A stray
``I-x`` that does not continue an ``x`` span starts a new one (the CoNLL
``conlleval`` convention), because the tag still says which slot the token is.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path

from intentvcs.core.dataio import DataError, Example, Span, cr_only_lines, line_and_column, read_utf8, text_problem

SPLITS = ("train", "valid", "test")
FILES = ("seq.in", "seq.out", "label")
MULTI_INTENT_SEPARATOR = "#"
# A run of carriage returns not ending in a line feed (before one, they end the line with it), matched once per
# run (possessive, from the run's start: "\r(?!\r*\n)" tried every position of a run, quadratic in its length).
_LONE_CR = re.compile(r"(?<!\r)\r++(?!\n)")
# Names for the characters an intent can hold by mistake that a message would not show.
_CHAR_NAMES = {" ": "a space", "\t": "a tab", "\r": "a carriage return"}


def load_split(root: str | os.PathLike, split: str) -> list[Example]:
    """Load ``root/split`` (``split`` in train, valid, test); ids are ``"<split>:<line>"``."""
    if split not in SPLITS:
        raise ValueError(f"no split {split!r}; choose from {', '.join(SPLITS)}")
    return load_folder(Path(root) / split, id_prefix=split)


def load_folder(folder: str | os.PathLike, id_prefix: str = "") -> list[Example]:
    """Load one split folder holding ``seq.in``, ``seq.out`` and ``label``."""
    folder = Path(folder)
    texts, tags, labels = (_read_lines(folder / name) for name in FILES)
    counts = {name: len(lines) for name, lines in zip(FILES, (texts, tags, labels))}
    if len(set(counts.values())) != 1:
        # Point at the first line of the longest file that has no counterpart.
        longest = max(counts, key=counts.get)
        raise DataError(
            folder / longest, min(counts.values()) + 1, f"no matching line in the other files; line counts {counts}"
        )
    examples = []
    for number, (text_line, tag_line, label_line) in enumerate(zip(texts, tags, labels), start=1):
        tokens, bio = text_line.split(), tag_line.split()
        if not tokens:
            raise DataError(folder / "seq.in", number, "empty utterance")
        # Over the limit, the row was written and refused by every reader of the product, at its converted line.
        if (problem := text_problem(" ".join(tokens), "the utterance")) is not None:
            raise DataError(folder / "seq.in", number, problem)
        if len(tokens) != len(bio):
            raise DataError(
                folder / "seq.out", number, f"{len(bio)} tags for {len(tokens)} tokens in seq.in"
            )
        intents = tuple(label_line.strip().split(MULTI_INTENT_SEPARATOR))
        if not all(intents) or len(set(intents)) != len(intents):
            raise DataError(folder / "label", number, f"bad intent field {label_line.strip()!r}")
        for intent in intents:
            if intent != intent.strip():
                # "AddToPlaylist # PlayMusic": "AddToPlaylist " would be an intent of its own beside
                # "AddToPlaylist", and the canonical reader refuses it.
                raise DataError(folder / "label", number,
                                f"intent {intent!r} has leading or trailing whitespace (in {label_line.strip()!r})")
            odd = next((i for i, char in enumerate(intent) if _invisible(char)), None)
            if odd is not None:
                # The field is one token: "PlayMusic\x0bRateBook" (or "Play\u200bMusic", a look-alike of
                # PlayMusic) would be an intent of its own; no data set names an intent with a space.
                raise DataError(folder / "label", number,
                                f"intent {intent!r} has {_char_name(intent[odd])} inside (character {odd + 1}); "
                                "an intent is one token")
        try:
            spans = bio_to_spans(tokens, bio)
        except ValueError as exc:
            raise DataError(folder / "seq.out", number, str(exc)) from None
        examples.append(
            Example(text=" ".join(tokens), labels=intents, id=f"{id_prefix}:{number}", spans=spans)
        )
    return examples


def bio_to_spans(tokens: list[str], tags: list[str]) -> tuple[Span, ...]:
    """Turn one BIO tag per token into character spans on ``" ".join(tokens)``.

    Raises ``ValueError`` on a tag that is not ``O``, ``B-<slot>`` or ``I-<slot>``.
    """
    spans: list[Span] = []
    open_label: str | None = None  # slot of the span the previous token belongs to
    start = end = 0
    offset = 0
    for index, (token, tag) in enumerate(zip(tokens, tags)):
        if tag == "O":
            label, begins = None, False
        elif tag[:2] in ("B-", "I-") and len(tag) > 2:
            label = tag[2:]
            begins = tag[0] == "B" or label != open_label
        else:
            raise ValueError(f"token {index + 1} ({token!r}) has tag {tag!r}; expected O, B-<slot> or I-<slot>")
        if open_label is not None and (begins or label is None):
            spans.append(Span(start, end, open_label))
            open_label = None
        if begins:
            open_label, start = label, offset
        end = offset + len(token)
        offset = end + 1  # the single space that joins tokens
    if open_label is not None:
        spans.append(Span(start, end, open_label))
    return tuple(spans)


def _invisible(char: str) -> bool:
    """Whitespace, or a control or format character (``\\x00``, ``\\u200b``): nothing an intent name holds."""
    return char.isspace() or unicodedata.category(char) in ("Cc", "Cf")


def _char_name(char: str) -> str:
    return _CHAR_NAMES.get(char, f"U+{ord(char):04X}")


def _read_lines(path: Path) -> list[str]:
    if not path.is_file():
        raise DataError(path, None, "file not found")
    # A leading byte-order mark (Windows editors) is no part of the first row: kept, it made the first
    # intent one of its own ("\ufeffPlayMusic"), which the whitespace check below does not see.
    text = read_utf8(path).removeprefix("\ufeff")
    _check_line_ends(path, text)
    # Split on newlines only: str.splitlines would also break on U+2028
    # and friends inside an utterance and misalign the three files.
    lines = [line.rstrip("\r") for line in text.split("\n")]
    # A final empty line is a trailing newline artefact, not a row.
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _check_line_ends(path: Path, text: str) -> None:
    """Refuse a carriage return not followed by a line feed (``\\r\\n``, and ``\\r\\r\\n`` of a CRLF file converted
    again, is a line end like ``\\n``).

    A file whose lines end in one (old Mac line endings: more such than line feeds) was one line: its three rows one
    row, its intents one label joined by carriage returns. Such a file is told so in the JSONL reader's words
    (``intentvcs.core.dataio.decode_line``); a stray one inside a line of a file that has line feeds, which
    ``str.split`` took for a space between two tokens, is named by its column.
    """
    match = _LONE_CR.search(text)
    if match is None:
        return
    line, column = line_and_column(text, match.start())
    if len(_LONE_CR.findall(text)) >= text.count("\n"):  # most lines end so (a final \n added or none)
        reason = cr_only_lines("this format")
    else:
        reason = (f"a carriage return not followed by a line feed (column {column}): lines end in \\n or \\r\\n, "
                  "and a carriage return is no part of a token, a tag or an intent")
    raise DataError(path, line, reason)
