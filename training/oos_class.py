"""The "oos-train" scheme: out-of-scope rows become an ordinary class."""

from __future__ import annotations

from typing import Sequence

from intentvcs.core.dataio import Example
from intentvcs.core.oos import OOS_LABEL


def oos_as_class(examples: Sequence[Example]) -> list[Example]:
    """Rows with ``labels == []`` get the label ``"oos"``; others are unchanged."""
    return [ex if ex.labels else ex.with_labels([OOS_LABEL]) for ex in examples]
