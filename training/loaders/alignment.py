"""Dialogue-act values → character spans of the user's text.

MultiWOZ and CrossWOZ annotate *what* the user said (``[slot, value]`` pairs)
but not *where*. The joint intent + entity model needs character spans, so a
value becomes a span wherever it can be found in the text; a value that is
paraphrased ("cheap" for ``Price=inexpensive``) is left out rather than
guessed. :class:`AlignmentStats` counts both, so every report can say what
share of the annotation the spans cover.

Rules (one function, :func:`align`, for both data sets):

* values without a surface form (``none``, ``dontcare``, ``?``, yes/no flags;
  the set is the caller's, per language) are skipped and not counted;
* identical ``(label, value)`` pairs of one utterance are one value — MultiWOZ
  repeats a value under two domains (``Hotel-Inform Day`` and ``Train-Inform
  Day``) when the user said it once;
* longest value first, so ``Name=the cambridge belfry`` is placed before
  ``Area=cambridge`` could take part of it;
* case-insensitive; with ``word_boundaries`` a match must not touch a word
  character on either side (``east`` never matches inside ``eastern``); without
  (Chinese, written without spaces) any substring matches;
* a match overlapping an already placed span is passed over and the next
  occurrence tried, so a value said twice takes the first occurrence not yet
  used, and spans never overlap (``parse_row`` refuses overlaps).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from intentvcs.core.dataio import Span


@dataclass
class AlignmentStats:
    """How many dialogue-act values had a surface form, and how many became spans."""

    values: int = 0
    aligned: int = 0

    @property
    def share(self) -> float:
        """Aligned / values (0.0 when there were none)."""
        return self.aligned / self.values if self.values else 0.0

    def to_dict(self) -> dict[str, float | int]:
        return {"values": self.values, "aligned": self.aligned, "share": round(self.share, 4)}


def align(
    text: str,
    pairs: Iterable[tuple[str, str]],
    *,
    skip: frozenset[str],
    word_boundaries: bool,
    stats: AlignmentStats | None = None,
) -> tuple[Span, ...]:
    """Spans (sorted by start) for the ``(label, value)`` pairs found in ``text``.

    ``skip`` holds lowercased values without a surface form; non-strings and
    blank values are skipped too. ``stats``, when given, is incremented by the
    values considered and the spans placed. See the module docstring for why.
    """
    wanted = {}
    for label, value in pairs:
        if isinstance(label, str) and label and isinstance(value, str):
            value = value.strip()
            if value and value.lower() not in skip:
                wanted.setdefault((label, value.lower()), value)
    placed: list[Span] = []
    for (label, _), value in sorted(wanted.items(), key=lambda item: -len(item[1])):
        match = _first_free(text, value, placed, word_boundaries)
        if match is not None:
            placed.append(Span(match[0], match[1], label))
    if stats is not None:
        stats.values += len(wanted)
        stats.aligned += len(placed)
    return tuple(sorted(placed, key=lambda span: span.start))


def _first_free(text: str, value: str, placed: list[Span], word_boundaries: bool) -> tuple[int, int] | None:
    """``(start, end)`` of the first case-insensitive occurrence of ``value``
    that overlaps no placed span, or ``None``.

    The equality check guards against the few characters whose regex case
    folding differs from ``str.lower`` (the spans must read back as the value).
    """
    pattern = re.escape(value)
    if word_boundaries:
        pattern = rf"(?<!\w){pattern}(?!\w)"
    # A lookahead makes matches overlap, so a later occurrence is found even
    # when an earlier, blocked one shares characters with it.
    for match in re.finditer(rf"(?=({pattern}))", text, flags=re.IGNORECASE):
        start, end = match.span(1)
        if text[start:end].lower() != value.lower():
            continue
        if all(end <= span.start or start >= span.end for span in placed):
            return start, end
    return None
