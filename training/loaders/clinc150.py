"""CLINC150 (Larson et al. 2019) JSON files → canonical examples.

A ``data_*.json`` file is one object with the keys ``train``, ``val``,
``test`` (in-scope rows) and ``oos_train``, ``oos_val``, ``oos_test``
(out-of-scope rows); every row is ``[text, intent]``. Out-of-scope rows become
``labels == ()`` whatever their intent field says (it is ``"oos"``). An in-scope
intent with whitespace around it, and a text or intent holding a lone surrogate
(a ``\\ud800`` escape), are refused naming the file, key and index; a key
given twice in one object (JSON would keep only the last) is refused naming it,
and so is JSON nested past Python's recursion limit or an integer of more digits
than Python reads, with the line (:mod:`intentvcs.training.loaders.json_document`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from intentvcs.core.dataio import DataError, Example, check_unicode, read_utf8, text_problem
from intentvcs.training.loaders import json_document

SPLITS = ("train", "valid", "test")
# Our split names → the file's key for that split.
_KEYS = {"train": "train", "valid": "val", "test": "test"}


def load_split(path: str | os.PathLike, split: str, *, include_oos: bool = True) -> list[Example]:
    """Return the in-scope rows of ``split`` followed by its out-of-scope rows.

    ``split`` is ``train``, ``valid`` or ``test``. Ids are ``"<key>:<index>"``
    (e.g. ``"oos_val:7"``), so a row can be found in the source file.
    """
    if split not in _KEYS:
        raise ValueError(f"CLINC150 has no split {split!r}; choose from {', '.join(SPLITS)}")
    path = Path(path)
    data = _read_object(path)
    key = _KEYS[split]
    examples = _rows(path, data, key, in_scope=True)
    if include_oos:
        examples += _rows(path, data, f"oos_{key}", in_scope=False)
    return examples


def _read_object(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise DataError(path, None, "file not found")
    # Strict: a second "train" key replaced the first one's rows without a word.
    data = json_document.loads(path, read_utf8(path))
    if not isinstance(data, dict):
        raise DataError(path, None, f"expected a JSON object, got {type(data).__name__}")
    return data


def _rows(path: Path, data: dict[str, Any], key: str, *, in_scope: bool) -> list[Example]:
    rows = data.get(key)
    if not isinstance(rows, list):
        raise DataError(path, None, f"key {key!r} is missing or not a list")
    examples = []
    for index, row in enumerate(rows):
        # The files are one JSON value, so a row is located by key and index.
        where = f"{key}[{index}]"
        if not (isinstance(row, list) and len(row) == 2 and all(isinstance(x, str) for x in row)):
            raise DataError(path, None, f"{where}: expected [text, intent], got {row!r}")
        text, intent = row
        if not text.strip():
            raise DataError(path, None, f"{where}: empty text")
        if (problem := text_problem(text, "the text")) is not None:  # over the limit every reader refuses
            raise DataError(path, None, f"{where}: {problem}")
        if in_scope and not intent.strip():
            raise DataError(path, None, f"{where}: empty intent")
        if in_scope and intent != intent.strip():
            # "greet " would be an intent of its own beside "greet", and the canonical reader refuses it.
            raise DataError(path, None, f"{where}: intent {intent!r} has leading or trailing whitespace")
        try:  # a JSON escape can decode to a lone surrogate, which no later step can write or tokenize
            check_unicode("the text", text)
            if in_scope:
                check_unicode("the intent", intent)
        except ValueError as exc:
            raise DataError(path, None, f"{where}: {exc}") from None
        labels = (intent,) if in_scope else ()
        examples.append(Example(text=text, labels=labels, id=f"{key}:{index}"))
    return examples
