"""Loaders of public intent data sets, one module per source format.

Every loader returns ``list[intentvcs.core.dataio.Example]`` and raises
``intentvcs.core.dataio.DataError`` naming the file, the line (or dialogue id) and
the reason when its input is malformed.

=============  =====================================  ========================
format         ``path`` given to :func:`load`          splits
=============  =====================================  ========================
``clinc150``   a ``data_*.json`` file                  train, valid, test
``snips``      the data set folder (``train/`` ...)    train, valid, test
``atis``       the data set folder (``train/`` ...)    train, valid, test
``multiwoz``   the folder with ``{val,test}.json.zip`` valid, test
``crosswoz``   the folder with ``{val,test}.json.zip`` valid, test
=============  =====================================  ========================
"""

from __future__ import annotations

import os
from pathlib import Path

from intentvcs.core.dataio import DataError, Example
from intentvcs.training.loaders import clinc150, convlab_zip, crosswoz, multiwoz, slot_folder

# What ``path`` names for each format (the table above): a folder or not, and which.
_SETS = "the data set folder (train/, valid/, test/)"
_CONVLAB = "the data set folder (holding val.json.zip and test.json.zip)"
INPUTS = {"clinc150": (False, "a data_*.json file"), "snips": (True, _SETS), "atis": (True, _SETS),
          "multiwoz": (True, _CONVLAB), "crosswoz": (True, _CONVLAB)}
FORMATS = tuple(INPUTS)
# Where the public data sets are unless a command is told (build-vcs, build-mix --data-root): $INTENTVCS_DATA,
# else ../shared/data from the working folder, the repository's root in the layout the tests and benchmarks use.
DATA_ENV = "INTENTVCS_DATA"
DEFAULT_DATA_ROOT = "../shared/data"


def data_root() -> str:
    """The folder of the public data sets: ``$INTENTVCS_DATA``, else ``DEFAULT_DATA_ROOT``."""
    return os.environ.get(DATA_ENV) or DEFAULT_DATA_ROOT


def load(fmt: str, path: str | os.PathLike, split: str, *, include_oos: bool = True,
         skipped: dict[str, int] | None = None) -> list[Example]:
    """Load one split of a data set in source format ``fmt`` (see the table above).

    ``include_oos`` only applies to CLINC150 (the other sets have no
    out-of-scope rows); with ``False`` its ``oos_*`` rows are left out.
    ``skipped``, when given, is incremented by the source rows the loader
    leaves out, by reason (MultiWOZ and CrossWOZ user turns without an intent;
    the other formats skip none: they refuse a bad row). A split without a row
    is a ``DataError``: no reader of the product takes an empty file.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    check_path(fmt, path)
    left_out: dict[str, int] = {}
    if fmt == "clinc150":
        examples, where = clinc150.load_split(path, split, include_oos=include_oos), Path(path)
    elif fmt in ("snips", "atis"):
        examples, where = slot_folder.load_split(path, split), Path(path) / split
    else:
        module = multiwoz if fmt == "multiwoz" else crosswoz
        examples, where = module.load_split(path, split, left_out), convlab_zip.split_path(path, split)
    if skipped is not None:
        for reason, count in left_out.items():
            skipped[reason] = skipped.get(reason, 0) + count
    if not examples:
        # Written, it was an empty JSONL file (exit 0) that every reader of the product refuses ("no rows").
        why = "".join([f"; rows left out: {dict(sorted(left_out.items()))}" if left_out else "",
                       "; out-of-scope rows left out (--no-oos)" if fmt == "clinc150" and not include_oos else ""])
        raise DataError(where, None, f"no rows for the {split} split{why}")
    return examples


def check_path(fmt: str, path: str | os.PathLike) -> None:
    """Refuse a folder where ``fmt`` reads a file and a file where it reads a folder, naming what it reads: the
    loader would look for its file inside the path (``val.json.zip/val.json.zip``) and call it not found."""
    path = Path(path)
    folder, what = INPUTS[fmt]
    if path.is_file() if folder else path.is_dir():
        raise DataError(path, None, f"is a {'file' if folder else 'folder'}; {fmt} reads {what}")
