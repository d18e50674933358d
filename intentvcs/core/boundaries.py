"""Request boundaries: the words at which a chained utterance's next request begins (numpy only).

Connectors show where most chained requests meet ("play jazz and turn off
the lights"), and ``intentvcs.core.segmentation`` cuts there. Users also chain
without one ("play some jazz turn off the lights"): no rule finds that cut,
and the whole text is answered with one intent. A model trained with
synthetic chains (``TrainConfig.chain_ratio``) knows where each of its chained
rows' requests begins, so it can learn to say so: a boundary head scores every
word, and a word scored above 0 (probability 0.5) starts a new request. As
with entities, a word's score is read at its first piece, in training as in
serving, and this module is the one both sides call.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from intentvcs.core.entities import IGNORE, Word


def boundary_targets(starts: Sequence[int] | None, text_words: Sequence[Word], length: int) -> list[int]:
    """Per token of one encoded text: 1 on the first piece of a word that begins a request other than the
    first (one of the character offsets ``starts`` lies in it), 0 on every other word's first piece,
    ``IGNORE`` elsewhere.

    ``starts`` None: the row is one request (every word 0); a text's first word is never a boundary.
    A start marks the word it lies in, not only one beginning at it: a SentencePiece word's offsets begin at
    the space before it ("▁dim" is (9, 13) in "play jazz dim ..."), while a segment starts at its first letter,
    so read by its first offset no word of such a backbone was ever a boundary (as ``entities.word_tags``).
    """
    targets = [IGNORE] * length
    begins = starts or ()
    for index, word in enumerate(text_words):
        targets[word.token] = int(index > 0 and any(word.start <= start < word.end for start in begins))
    return targets


def segment_starts(meta: dict | None) -> list[int] | None:
    """Where the requests after the first begin in a chained row (``intentvcs.training.mix_builder``
    records its segments in ``meta``); None for a row that is not a chain."""
    segments = (meta or {}).get("segments")
    return [segment["start"] for segment in segments[1:]] if segments else None


def request_starts(boundary_logits: np.ndarray, per_text_words: Sequence[Sequence[Word]]) -> list[tuple[int, ...]]:
    """Per row of a padded batch of boundary logits ``[B, T]``: the character offsets of the words, after
    its first, whose first piece scores above 0."""
    found = []
    for row, text_words in enumerate(per_text_words):
        above = boundary_logits[row, [word.token for word in text_words[1:]]] > 0.0
        found.append(tuple(word.start for word, start in zip(text_words[1:], above) if start))
    return found
