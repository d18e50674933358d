"""Read a source data file that is one JSON value (CLINC150's ``data_*.json``, the member of a ConvLab-2 zip)
with the refusals of the JSONL reader (``intentvcs.core.dataio.decode_line``), as a ``DataError`` naming the
file and, where it can be found, the line.

* a key given twice in one object (``DuplicateKey``): JSON would keep only the last value;
* invalid JSON, with the line;
* nesting past Python's recursion limit, a ``RecursionError`` (a traceback) from the parser, named with the line
  where the value first nests past ``MAX_NESTING`` levels (``dataio.too_deep``, as relations files). There is no
  ``MAX_NESTING`` pre-check as on a JSONL line: a whole file always holds more brackets than that, and the exact
  (Python-speed) count doubled the time to read a ConvLab-2 split (1-2 s on 27-35 MB), while the public files
  nest 3 (CLINC150) to 9 (MultiWOZ) levels deep;
* an integer of more digits than Python converts (``sys.get_int_max_str_digits``), in the JSONL reader's words
  (without Python's advice to call ``sys.set_int_max_str_digits``, which is for programmers), with the line of the
  first integer of so many digits.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

from intentvcs.core.dataio import (DataError, DuplicateKey, line_and_column, strict_loads, too_deep,
                                   unconvertible_json)


def loads(where: str | os.PathLike, text: str) -> Any:
    """The JSON value of ``text``, the whole content of the file ``where`` names; ``DataError`` as above."""
    try:
        return strict_loads(text)
    except DuplicateKey as exc:
        raise DataError(where, None, str(exc)) from None
    except json.JSONDecodeError as exc:
        raise DataError(where, exc.lineno, f"invalid JSON: {exc.msg}") from None
    except RecursionError:
        line, reason = too_deep(text)
        raise DataError(where, line, f"invalid JSON: {reason}") from None
    except ValueError as exc:  # an integer past the digit limit: the one other ValueError json raises
        raise DataError(where, _long_integer_line(text), unconvertible_json(exc)) from None


def _long_integer_line(text: str) -> int | None:
    """The line of the first JSON integer of more digits than Python converts; None when none is found.

    Strings are set aside first (a string of digits has no limit; JSON strings hold no raw line break, so the
    lines stay where they were); an integer is then a run of digits, after an optional minus sign, that is
    neither part of a number already begun (a fraction's or an exponent's digits) nor followed by one's rest.
    """
    limit = sys.get_int_max_str_digits()
    if not limit:
        return None
    numbers = re.sub(r'"[^"\\]*(?:\\.[^"\\]*)*"', '""', text)
    match = re.search(rf"(?<![\d.eE+-])-?\d{{{limit + 1},}}(?![\d.eE])", numbers)
    return None if match is None else line_and_column(numbers, match.start())[0]
