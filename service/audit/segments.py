"""Segment evidence for composites: split each utterance where users join
requests and ask the model about each side.

A single-label (softmax) model shown "how many calories are in a banana and
what's my routing number" gives nearly all its mass to one intent, so neither
co-acceptance nor co-ranking reveals the second. Users write multi-intent
requests with connectors ("X and Y", "X, then Y", "X; also Y"), and the
halves are ordinary single-intent utterances. So: for a capped sample of a
new intent's rows, every split where the service cuts chained requests
(``intentvcs.core.segmentation.cut``: at its ``CONNECTOR``s, also in
full-width letters, never inside a quotation, a range or a number, nor before
a self-repair, with at least ``MIN_WORDS`` words a part; not, as the service
also does, inside an entity the model finds, since the rows are cut before the
model reads them; a narrower set of
connectors the audit once had, without "after that" and a bare comma, typed
the same verdicts on every scored scenario) is scored, the parts before the
cut against those after it; a row's split counts when both halves are
accepted as two different, unrelated existing intents (the split with the
most confident weaker half wins) and both halves are in scope for the
served OOS rule (the halves of a novel request are not requests the model
knows, whatever intent its softmax picks). The most frequent such pair, over all of
N's sampled rows, is the composite's candidate parts; ``rules`` decides with
its share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from intentvcs.core.segmentation import cut


@dataclass(frozen=True)
class Split:
    """One way to cut utterance ``row`` (an index into the sampled rows) into two halves."""

    row: int
    left: str
    right: str


def splits(texts: Sequence[str]) -> list[Split]:
    """Every split of each text where the service cuts it (``segmentation.cut``; at most ``segmentation.MAX_PARTS`` - 1 each).

    Splitting at every ``CONNECTOR`` match of the raw text, as the audit did, found no connector in
    full-width letters ("ｊａｚｚ ａｎｄ ｓｅｔ", which the service cuts) and cut inside a quotation, a range
    or before a self-repair ('remind me to "buy milk' | 'pay the rent"'), which the service keeps whole.
    """
    out = []
    for row, text in enumerate(texts):
        parts = cut(text)
        for k in range(1, len(parts)):  # cut gives at most segmentation.MAX_PARTS parts
            out.append(Split(row, text[parts[0][0]:parts[k - 1][1]], text[parts[k][0]:parts[-1][1]]))
    return out


def best_pairs(cuts: Sequence[Split], left: np.ndarray, left_accepted: np.ndarray, right: np.ndarray,
               right_accepted: np.ndarray, implication: np.ndarray, rows: int) -> list[tuple[int, int] | None]:
    """Per sampled row, the label pair ``(a, b)`` (a < b) its best split shows, or ``None``.

    ``left`` / ``right``: the halves' ranking ``[S, L]`` over the existing
    labels (the decision's uncapped ``DecisionResult.ranking``, so that capped
    confidences do not tie), ``*_accepted`` the decision layer's bool masks. A split counts
    when both halves' top labels are accepted, differ, and neither implies
    the other (``implication`` bool ``[L, L]``). Among a row's counting
    splits, the one whose weaker half is most confident wins.
    """
    out: list[tuple[int, int] | None] = [None] * rows
    strength = np.full(rows, -1.0)
    top_left, top_right = left.argmax(axis=1), right.argmax(axis=1)
    for i, split in enumerate(cuts):
        a, b = int(top_left[i]), int(top_right[i])
        if a == b or not (left_accepted[i, a] and right_accepted[i, b]) or implication[a, b] or implication[b, a]:
            continue
        weaker = min(left[i, a], right[i, b])
        if weaker > strength[split.row]:
            strength[split.row] = weaker
            out[split.row] = (min(a, b), max(a, b))
    return out
