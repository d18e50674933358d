"""Entities: character spans <-> BIO tags over words, and tag scores back to spans (numpy only).

The entity head tags *words*, not word pieces. A word is what the tokenizer's
pre-tokenizer makes of the text (whitespace and punctuation split it), and
only a word's first piece carries its tag, in training as in decoding (the
convention of JointBERT, Chen et al. 2019): so a decoded entity always covers
whole words, and its character offsets are the tokenizer's offsets of its
first and last pieces (widened by both runtimes, ``whole_words``, over the rest
of a word that truncation cut and over the combining marks that end a word,
which an accent-stripping normaliser leaves out of the offsets, and cut of the space a SentencePiece word's
offsets begin with). Training (PyTorch, ``intentvcs.training``) and serving
(ONNX Runtime, ``intentvcs.service``) both call this module, so the two cannot
disagree on what a tag means.

Tags: ``O`` plus ``B-<type>`` and ``I-<type>`` per entity type, types sorted
(``tag_vocabulary``). The head's scores are decoded into well-formed tag
sequences only (``bio_path``); reading gold or other tag sequences into
entities (``chunks``) follows CoNLL's ``conlleval``: an ``I-x`` that does not
continue an ``x`` starts a new entity, because the tag still says which type
the word is.
"""

from __future__ import annotations

import bisect
import functools
import unicodedata
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, NamedTuple, Sequence

import numpy as np

from intentvcs.core.dataio import Span

OUTSIDE = "O"
# Token targets that take no part in the tagging loss: special tokens, a word's
# later pieces, and every token of a row without span annotations.
IGNORE = -100


@dataclass(frozen=True)
class Entity:
    """A decided entity: type, character offsets (end exclusive) and the head's confidence in it."""

    label: str
    start: int
    end: int
    confidence: float
    # Whether the entity ends at the last word the graph read (``decode_batch``): where ``max_length`` cut the text,
    # ``whole_words`` then checks that the text as sent does not go on inside the same token. Not part of the answer.
    last_read: bool = field(default=False, compare=False, repr=False)

    def to_dict(self, text: str) -> dict[str, Any]:
        """The answer's form: ``{entity, value, start, end, confidence}``, ``value`` cut from ``text``."""
        return {"entity": self.label, "value": text[self.start:self.end], "start": self.start, "end": self.end,
                "confidence": self.confidence}


class Word(NamedTuple):
    """A pre-tokenizer word: the index of its first piece, and its character extent."""

    token: int
    start: int
    end: int


def tag_vocabulary(types: Iterable[str]) -> list[str]:
    """``["O", "B-a", "I-a", "B-b", ...]`` for the entity types, sorted."""
    return [OUTSIDE] + [f"{prefix}-{kind}" for kind in sorted(set(types)) for prefix in ("B", "I")]


def entity_types(tags: Sequence[str]) -> list[str]:
    """The entity types of a tag vocabulary, in its order."""
    return [tag[2:] for tag in tags if tag.startswith("B-")]


def words(word_ids: Sequence[int | None], offsets: Sequence[tuple[int, int]]) -> list[Word]:
    """The words of one encoded text, in order, from the tokenizer's ``word_ids`` and ``offsets``.

    Special tokens (``word_ids`` None) belong to no word; a word cut by
    truncation ends at its last kept piece (the engine answers an entity
    there over the whole word: ``whole_words``).
    """
    found: list[Word] = []
    previous = None
    for token, word in enumerate(word_ids):
        if word is None:
            previous = None
            continue
        start, end = offsets[token]
        if word == previous:
            found[-1] = Word(found[-1].token, found[-1].start, max(found[-1].end, end))
        else:
            found.append(Word(token, start, end))
        previous = word
    return found


def word_tags(spans: Sequence[Span], text_words: Sequence[Word]) -> list[str]:
    """The gold tag of each word: a word whose first character lies inside a span belongs to it, and so does
    a word inside which a span begins. A SentencePiece word's offsets begin at the space before it ("▁new" is
    (2, 6) in "to new york"): read by its first character alone, the first word of every entity was tagged
    O, and a model on such a backbone never learnt where one begins. (WordPiece words begin at their first
    letter: no tag of the default data, SNIPS or ATIS moves.)"""
    tags = []
    open_span = None
    for word in text_words:
        span = next((s for s in spans if s.start <= word.start < s.end), None) or \
            next((s for s in spans if word.start < s.start < word.end), None)
        if span is None:
            tags.append(OUTSIDE)
        else:
            tags.append(("I-" if span is open_span else "B-") + span.label)
        open_span = span
    return tags


def token_targets(spans: Sequence[Span] | None, text_words: Sequence[Word], length: int,
                  tag_index: dict[str, int]) -> list[int]:
    """Per token, the index of its gold tag on a word's first piece, else ``IGNORE``.

    ``spans`` None (the row carries no annotations) ignores every token; a span
    type outside ``tag_index`` is read as ``O`` (the caller has refused such data).
    """
    targets = [IGNORE] * length
    if spans is None:
        return targets
    for word, tag in zip(text_words, word_tags(spans, text_words)):
        targets[word.token] = tag_index.get(tag, 0)
    return targets


def chunks(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """``(type, first word, last word + 1)`` of each entity in a tag sequence (conlleval rules)."""
    found: list[tuple[str, int, int]] = []
    open_type: str | None = None
    for index, tag in enumerate(tags):
        kind = tag[2:] if tag != OUTSIDE else None
        begins = kind is not None and (tag.startswith("B-") or kind != open_type)
        if kind is None or begins:
            open_type = None
        if begins:
            found.append((kind, index, index + 1))
            open_type = kind
        elif kind is not None:
            found[-1] = (kind, found[-1][1], index + 1)
    return found


def spans_of(tags: Sequence[str], text_words: Sequence[Word]) -> tuple[Span, ...]:
    """The character spans a tag sequence over ``text_words`` stands for."""
    return tuple(Span(text_words[first].start, text_words[last - 1].end, kind)
                 for kind, first, last in chunks(tags))


def decode(tag_logits: np.ndarray, text_words: Sequence[Word], tags: Sequence[str]) -> tuple[Entity, ...]:
    """Entities of one text from its tag logits ``[T, K]`` (K = ``len(tags)``).

    Each word's tag is read at its first piece, and the words take the most
    probable *well-formed* tag sequence (``bio_path``); an entity's confidence
    is the mean probability of its words' tags.
    """
    return decode_batch(tag_logits[None], [text_words], tags)[0]


def decode_batch(tag_logits: np.ndarray, per_text_words: Sequence[Sequence[Word]],
                 tags: Sequence[str]) -> list[tuple[Entity, ...]]:
    """``decode`` for each row of a padded batch of tag logits ``[B, T, K]``, ``per_text_words[b]`` the
    words of row ``b``.

    Every word of the batch is handled in one numpy pass over a flat word
    axis: softmax, best tags, the rows whose best tags are not well formed
    (searched again, ``bio_path``; few rows), entity boundaries and mean
    confidences. Per-text numpy calls had been most of the host time of a
    GPU batch (docs/RESULTS.md, "Performance", GPU).
    """
    tags = tuple(tags)
    inside, begin = _bio_structure(tags)
    counts = np.fromiter((len(text_words) for text_words in per_text_words), dtype=np.int64,
                         count=len(per_text_words))
    flat = [word for text_words in per_text_words for word in text_words]
    rows = np.repeat(np.arange(len(per_text_words)), counts)
    tokens = np.fromiter((word.token for word in flat), dtype=np.int64, count=len(flat))
    scores = tag_logits[rows, tokens].astype(np.float64)
    scores -= scores.max(axis=1, keepdims=True)
    log_probs = scores - np.log(np.exp(scores).sum(axis=1, keepdims=True))
    best = log_probs.argmax(axis=1)
    offsets = np.concatenate(([0], np.cumsum(counts)))  # row b's words: flat[offsets[b]:offsets[b + 1]]
    row_start = np.zeros(len(flat), dtype=bool)
    row_start[offsets[:-1][counts > 0]] = True
    # An I-x that opens a row or follows anything but x: that row's best tags are not well formed.
    continues = np.concatenate(([False], begin[best[1:]] == begin[best[:-1]])) & ~row_start
    for row in np.unique(rows[inside[best] & ~continues]):
        best[offsets[row]:offsets[row + 1]] = bio_path(log_probs[offsets[row]:offsets[row + 1]], tags)
    chosen = np.exp(log_probs[np.arange(len(best)), best])
    # Well formed now: an entity is a B-x and the I-x words after it, so it ends at the next word
    # that is not an I- (a row never opens with one).
    not_inside = ~inside[best]
    starts = np.flatnonzero(not_inside & (best != tags.index(OUTSIDE)))
    breaks = np.append(np.flatnonzero(not_inside), len(best))
    ends = breaks[np.searchsorted(breaks, starts, side="right")]
    # Each entity's own words summed (every other reduceat slice is the gap to the next entity; the 0 appended
    # lets the last entity end at the batch's end). A running sum over the batch, differenced, answered 1 + 2e-16
    # for a certain word after many others, and a text's confidences depended on the texts batched before it.
    sums = np.add.reduceat(np.append(chosen, 0.0), np.ravel([starts, ends], order="F"))[::2] if len(starts) else []
    found: list[list[Entity]] = [[] for _ in per_text_words]
    for first, last, row, total in zip(starts.tolist(), ends.tolist(), rows[starts].tolist(), sums):
        found[row].append(Entity(tags[best[first]][2:], flat[first].start, flat[last - 1].end,
                                 float(total / (last - first)), last_read=bool(last == offsets[row + 1])))
    return [tuple(entities) for entities in found]


def bio_path(log_probs: np.ndarray, tags: tuple[str, ...]) -> np.ndarray:
    """The tag indices, one per word, of the most probable sequence in which every ``I-x`` continues an
    ``x`` (Viterbi over ``log_probs [W, K]``).

    Reading each word's best tag alone lets an entity go on as another type (``B-x I-y``) or an
    ``I-x`` follow ``O``; the constraint removes those readings, and on the test splits lifted slot F1 by
    0.2-0.5 points for the same weights (``benchmarks.entities_bench --parts decoding``). The search
    is linear in K: ``O`` and ``B-x`` may follow any tag, ``I-x`` only ``B-x`` or ``I-x``.
    """
    inside, begin = _bio_structure(tags)
    best = log_probs.argmax(axis=1)
    if not inside[best[0]] and not (inside[best[1:]] & (begin[best[:-1]] != begin[best[1:]])).any():
        return best  # each word's best tag is already well formed, hence the best such sequence (most texts)
    columns = np.arange(len(tags))
    score = np.where(inside, -np.inf, log_probs[0])
    back = []
    for row in log_probs[1:]:
        previous = np.where(inside, np.where(score[begin] >= score, begin, columns), int(score.argmax()))
        score = score[previous] + row
        back.append(previous)
    path = [int(score.argmax())]
    for previous in reversed(back):
        path.append(int(previous[path[-1]]))
    return np.array(path[::-1])


@functools.lru_cache(maxsize=32)
def _bio_structure(tags: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Per tag: whether it is an ``I-x``, and the index of the ``B-x`` it continues (itself for the others)."""
    index = {tag: k for k, tag in enumerate(tags)}
    inside = np.array([tag.startswith("I-") for tag in tags])
    begin = np.array([index.get("B-" + tag[2:], k) if tag.startswith("I-") else k for k, tag in enumerate(tags)])
    return inside, begin


def whole_words(found: Sequence[Entity], text: str, text_words: Sequence[Word]) -> tuple[Entity, ...]:
    """``found`` (offsets into ``text``) widened to the whole words of ``text`` they touch.

    ``text_words`` are the words of all of ``text``, untruncated (``BundleTokenizer.words``; none where
    ``max_length`` cut nothing: only the combining marks are then added). Decoded over a
    truncated reading, the word the cut falls in ends at its last kept piece ("kit" of "kitchen"), though its
    tag, read at its first piece, is the whole word's: it covers the word. And an end is carried over the
    combining marks that follow it, which a normaliser that strips accents drops from the offsets: a text
    in decomposed form (NFD, "Jose" + U+0301) would otherwise answer "Jose", the accent cut from its letter.
    Whitespace at either end, which a SentencePiece word's offsets include, is left out. An entity that ends
    at the last word the graph read (``Entity.last_read``) where the text goes on, with no whitespace between, to
    letters or digits (words of ``text_words`` after it) is not answered: its value would be a
    fragment of a token as sent, "7:" of "7:30" (a pre-tokenizer splits at punctuation, so the cut can fall
    between ":" and "30"). Where the cut falls at whitespace nothing tells whether the entity went on.
    """
    if not found:
        return tuple(found)
    starts = [word.start for word in text_words]
    widened = []
    for entity in found:
        start, end = entity.start, entity.end
        first = bisect.bisect_right(starts, start) - 1  # the last word starting at or before the entity
        if first >= 0 and start < text_words[first].end:
            start = text_words[first].start
        last = bisect.bisect_left(starts, end) - 1  # the last word starting before the entity's end
        if last >= 0 and end < text_words[last].end:
            end = text_words[last].end
        while end < len(text) and unicodedata.category(text[end]).startswith("M"):
            end += 1
        if entity.last_read and _fragment_at_cut(end, text, text_words[bisect.bisect_left(starts, end):]):
            continue
        # A Metaspace pre-tokenizer (SentencePiece backbones) gives a word's first piece, "▁york", the offsets of
        # the space it stands for: no entity starts or ends in whitespace (one of whitespace only is left as is).
        if text[start:end].strip():
            while text[start].isspace():
                start += 1
            while text[end - 1].isspace():
                end -= 1
        widened.append(entity if (start, end) == (entity.start, entity.end)
                       else replace(entity, start=start, end=end))
    return tuple(widened)


def _fragment_at_cut(end: int, text: str, following: Sequence[Word]) -> bool:
    """Whether the ``following`` words glued to an entity ending at ``end`` (no whitespace between; words the
    graph never read, for one that ends at the last word read) hold a letter or a digit: the entity is then a
    fragment of a token of ``text`` (only punctuation, "Station" + ",", may end a token)."""
    for word in following:
        if any(character.isspace() for character in text[end:word.start]):
            return False
        if any(character.isalnum() for character in text[word.start:word.end]):
            return True
        end = word.end
    return False


def span_set(items: Iterable[Span | Entity]) -> set[tuple[int, int, str]]:
    """``(start, end, type)`` of gold spans or decided entities: what span-level scoring compares."""
    return {(item.start, item.end, item.label) for item in items}


def aligned(spans: Sequence[Span], text_words: Sequence[Word]) -> int:
    """How many of ``spans`` the word tags reproduce exactly (the rest start or end inside a word)."""
    return len(set(spans) & set(spans_of(word_tags(spans, text_words), text_words)))
