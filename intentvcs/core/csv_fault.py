"""Where a broken CSV record went wrong, in the user's terms.

``csv.reader`` reports an error where it gave up (past its field size limit,
or at the end of the file for a quote never closed), which is not where the
user has to look. Both CSV readers of the product (team data,
``intentvcs.core.team_formats``; batch input, ``intentvcs.service.batch_predict``)
keep the lines of the record being read and ask ``broken_field`` which field
broke it.
"""

from __future__ import annotations

import csv
from typing import Sequence


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
