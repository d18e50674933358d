"""Read a ConvLab-2 data file: a zip archive holding one JSON object
``dialogue id -> dialogue``. Shared by the MultiWOZ and CrossWOZ loaders."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Any, Callable

from intentvcs.core.dataio import DataError, Example, check_unicode, decode_utf8, text_problem
from intentvcs.training.loaders import json_document
from intentvcs.training.loaders.alignment import AlignmentStats

# Our split names → the archive names ConvLab-2 uses.
SPLIT_FILES = {"valid": "val.json.zip", "test": "test.json.zip"}


def split_path(root: str | os.PathLike, split: str) -> Path:
    """``root/val.json.zip`` for ``valid``, ``root/test.json.zip`` for ``test``."""
    if split not in SPLIT_FILES:
        raise ValueError(f"no split {split!r}; choose from {', '.join(SPLIT_FILES)}")
    return Path(root) / SPLIT_FILES[split]


def read_dialogues(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """Return the archive's ``{dialogue id: dialogue object}``.

    Raises ``DataError`` when the file is missing, not a zip, holds other than
    exactly one ``.json`` member, is not UTF-8 or not valid JSON (with the line:
    nesting past Python's recursion limit and integers of more digits than it
    reads included, see :mod:`intentvcs.training.loaders.json_document`), names a
    key twice in one object (a dialogue id, an act), or is not an object of
    objects, or a dialogue id is not valid Unicode (with the dialogue id).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(path, None, "file not found")
    try:
        with zipfile.ZipFile(path) as archive:
            members = [name for name in archive.namelist() if name.endswith(".json")]
            if len(members) != 1:
                raise DataError(path, None, f"expected one .json member in the zip, found {members}")
            raw = archive.read(members[0])
    except zipfile.BadZipFile as exc:
        raise DataError(path, None, f"not a zip archive: {exc}") from None
    member = f"{path}!{members[0]}"
    # Strict: a dialogue id given twice (two files merged by hand) lost the first dialogue's turns.
    data = json_document.loads(member, decode_utf8(member, 1, raw))
    if not isinstance(data, dict):
        raise DataError(path, None, f"expected an object of dialogues, got {type(data).__name__}")
    for dialogue_id, dialogue in data.items():
        # The id is each row's id and meta["dialogue"]: a lone surrogate in it was refused only when written.
        check_text(path, f"dialogue {shown(dialogue_id)}", "the dialogue id", dialogue_id)
        if not isinstance(dialogue, dict):
            raise DataError(path, None, f"dialogue {dialogue_id}: expected an object")
    return data


def check_text(path: str | os.PathLike, where: str, what: str, value: str) -> None:
    """Refuse a lone surrogate (a JSON escape such as ``\\ud800``) in ``value``, a string of the file that
    becomes part of a row (text, label, span label, id), as ``DataError(path, None, "<where>: <what> holds
    ...")``: found only when the row was written, it named neither the file nor the dialogue."""
    try:
        check_unicode(what, value)
    except ValueError as exc:
        raise DataError(path, None, f"{where}: {exc}") from None


def check_utterance(path: str | os.PathLike, where: str, what: str, text: Any) -> None:
    """Refuse a turn's text (the field ``what``) that is missing, empty, or longer than every reader of the
    product takes (``text_problem``), naming the dialogue and turn (``where``): written, it was refused only
    at the converted file's line."""
    if not isinstance(text, str) or not text.strip():
        raise DataError(path, None, f"{where}: {what} is missing or empty")
    if (problem := text_problem(text.strip(), what)) is not None:
        raise DataError(path, None, f"{where}: {problem}")


def shown(value: str) -> str:
    """``value`` as a message can carry it: as it is when valid Unicode, else ``repr`` (``'d\\ud800'``), whose
    escapes any terminal or log can take."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return repr(value)
    return value


def composite(intents: set[str]) -> str:
    """The composite label of several intents: sorted parts joined by ``&``."""
    return "&".join(sorted(intents))


def split_alignment(
    load_file_with_stats: Callable[[Path], tuple[list[Example], AlignmentStats]], root: str | os.PathLike
) -> dict[str, AlignmentStats]:
    """``{split: AlignmentStats}`` of every split under ``root``, read by a
    loader's ``load_file_with_stats`` — the figures docs/RESEARCH.md reports."""
    return {split: load_file_with_stats(split_path(root, split))[1] for split in SPLIT_FILES}
