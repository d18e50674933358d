"""The records of a CSV file with the line each begins on, and where a broken one went wrong.

Both CSV readers of the product (team data, ``intentvcs.core.team_formats``;
batch input over byte spans, ``intentvcs.service.batch_predict``) feed
``records`` their own line source; it reads strictly (an unterminated quote
is an error, not a field that swallows the rest of the file). ``csv.reader``
reports an error where it gave up (past its field size limit, or at the end
of the file for a quote never closed), which is not where the user has to
look, so the lines of the record being read are kept and ``broken_field``
names the field that broke it.
"""

from __future__ import annotations

import csv
import os
from typing import Iterator, Protocol, Sequence

from intentvcs.core.dataio import DataError


class Lines(Protocol):
    """A line source for ``csv.reader`` that counts its lines (``line``: the last one read) and keeps those
    read since ``record`` was last reset."""

    line: int
    record: list[str]

    def __iter__(self) -> Iterator[str]: ...

    def __next__(self) -> str: ...


def records(path: str | os.PathLike, lines: Lines) -> Iterator[tuple[int, list[str]]]:
    """``(line where it begins, fields)`` of every non-blank record; ``DataError`` (file, line) for broken CSV."""
    reader = csv.reader(lines, strict=True)
    while True:
        begins, lines.record = lines.line + 1, []
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            line, fault = broken_field(begins, lines.record)
            if fault is None and "new-line character seen in unquoted field" in str(exc):
                # csv's own words advise a programmer to open the file in universal-newline mode.
                fault = ("lines end in a carriage return alone (classic Mac OS): save the file with LF or CRLF "
                         "line endings")
            raise DataError(path, line, fault or f"not CSV: {exc}") from None
        if record:
            yield begins, record


def broken_field(first: int, lines: Sequence[str]) -> tuple[int, str | None]:
    """The line where the field at fault of a record (``lines``, from line ``first``) begins, and what
    is wrong with it when that is an overlong field or an unclosed quote.

    csv's error comes where it gave up (past the size limit, or at the end of
    the file), which is not where the user has to look.
    """
    limit, begins, size, state = csv.field_size_limit(), first, 0, "start"
    for number, text in enumerate(lines, start=first):
        for char in text:
            if char == "," and state != "quoted":
                begins, size, state = number, 0, "start"
                continue
            state, content = _csv_step(state, char)
            size += content
            if size > limit:
                return begins, f"a field longer than {limit} characters (the CSV reader's limit)"
    if state == "quoted":
        return begins, "a quoted field begins on this line and is never closed (a missing '\"')"
    return begins, None


def _csv_step(state: str, char: str) -> tuple[str, bool]:
    """The state after ``char`` inside a CSV field, and whether ``char`` is part of the field's value.

    States: ``start`` of a field, ``plain`` (unquoted), ``quoted``, ``quote``
    (a quote inside a quoted field: its end, or the first of a doubled one).
    """
    if state == "start" and char == '"':
        return "quoted", False
    if state == "quoted":
        return ("quote", False) if char == '"' else ("quoted", True)
    if state == "quote" and char == '"':
        return "quoted", True  # a doubled quote stands for one
    return "plain", True
