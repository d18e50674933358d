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

from intentvcs.core.dataio import Example
from intentvcs.training.loaders import clinc150, crosswoz, multiwoz, slot_folder

FORMATS = ("clinc150", "snips", "atis", "multiwoz", "crosswoz")


def load(fmt: str, path: str | os.PathLike, split: str, *, include_oos: bool = True,
         skipped: dict[str, int] | None = None) -> list[Example]:
    """Load one split of a data set in source format ``fmt`` (see the table above).

    ``include_oos`` only applies to CLINC150 (the other sets have no
    out-of-scope rows); with ``False`` its ``oos_*`` rows are left out.
    ``skipped``, when given, is incremented by the source rows the loader
    leaves out, by reason (MultiWOZ and CrossWOZ user turns without an intent;
    the other formats skip none: they refuse a bad row).
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    if fmt == "clinc150":
        return clinc150.load_split(path, split, include_oos=include_oos)
    if fmt in ("snips", "atis"):
        return slot_folder.load_split(path, split)
    if fmt == "multiwoz":
        return multiwoz.load_split(path, split, skipped)
    return crosswoz.load_split(path, split, skipped)
