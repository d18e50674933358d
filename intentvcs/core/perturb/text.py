"""Tokens, protected spans and span-preserving edits: the one place where text
is changed, so every operator gets correct span offsets for free.

An operator describes its change as a list of :class:`Edit` (replace the
characters ``[start, end)`` of the *original* text with ``text``) and calls
:func:`apply_edits`, which refuses any edit that would touch the inside of a
protected span, shifts the spans, and returns ``None`` when nothing changed.
The operators that swap an entity's value for another (``values``) call
:func:`replace_spans` instead, which replaces whole spans and re-maps the rest
the same way.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from intentvcs.core.dataio import Example, Span, readable


@functools.cache
def _token_re() -> re.Pattern:
    """The token pattern. A word keeps inner apostrophes ("don't", "what's") and the combining
    marks after its letters, which ``re`` counts as \\W: split at them, a decomposed
    "Zu\\u0308rich" became "Zu rich" under ``punctuation`` and "ZüRich" under ``casing``, and
    Thai or Arabic words fell apart at their vowel signs. Anything else that is not a word
    character or space is a one-character punctuation token. The mark class is the spelling
    normaliser's (nonspacing marks, Unicode Mn), built on first use (about 10 ms)."""
    from intentvcs.core.spelling import _mark_class

    word = rf"\w[\w{_mark_class()}]*"
    return re.compile(rf"{word}(?:['\u2019]{word})*|[^\w\s]")


# Marks that may touch a word standing on its own (``Utterance.stands_alone``);
# any other symbol belongs to the word it touches (``$100``, ``40%``, ``e-mail``).
_SENTENCE_MARKS = frozenset(".,;:!?\"'()[]\u2018\u2019\u201c\u201d")


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int
    protected: bool  # overlaps a protected span: never edited, moved or copied

    @property
    def is_word(self) -> bool:
        return self.text[0].isalnum() or self.text[0] == "_"

    @property
    def is_alpha(self) -> bool:
        """Letters (and inner apostrophes) only: the words lexicons know."""
        return self.text.replace("'", "").replace("\u2019", "").isalpha()

    @property
    def lower(self) -> str:
        return self.text.lower().replace("\u2019", "'")


@dataclass(frozen=True)
class Edit:
    """Replace ``[start, end)`` of the original text by ``text`` (insert when start == end)."""

    start: int
    end: int
    text: str


class Utterance:
    """Tokenised, read-only view of an example, with helpers that build edits."""

    def __init__(self, example: Example):
        self.example = example
        self.text = example.text
        self.spans = example.spans
        self.tokens: tuple[Token, ...] = tuple(
            Token(m.group(), m.start(), m.end(), self.overlaps_span(m.start(), m.end()))
            for m in _token_re().finditer(example.text)
        )

    def overlaps_span(self, start: int, end: int) -> bool:
        """True when ``[start, end)`` shares a character with a protected span."""
        return any(start < s.end and end > s.start for s in self.spans)

    def inside_span(self, position: int) -> bool:
        """True when an insertion at ``position`` would split a protected span."""
        return any(s.start < position < s.end for s in self.spans)

    # -- selections -------------------------------------------------------
    def free_words(self, alpha: bool = True, whole: bool = False) -> list[int]:
        """Indices of unprotected word tokens (letters only when ``alpha``; only
        words that stand alone, see :meth:`stands_alone`, when ``whole``)."""
        return [
            i for i, t in enumerate(self.tokens)
            if t.is_word and not t.protected and (t.is_alpha or not alpha) and (not whole or self.stands_alone(i))
        ]

    def stands_alone(self, i: int) -> bool:
        """True unless word ``i`` is joined, with no space between, to another word
        or to a symbol that belongs to it (the ``7`` of ``7:30``, the ``a`` of
        ``a.m.``, the ``100`` of ``$100``): moving, deleting or repeating part of
        such a run tears it apart (``at:30``, ``6.m.``, ``$checking``). Sentence
        punctuation does not join: ``please?`` and ``lights,`` stand alone."""
        return not (self._joined(i, -1) or self._joined(i, 1))

    def _joined(self, i: int, step: int) -> bool:
        """Whether token ``i`` is joined to a word or a symbol (see :meth:`stands_alone`) in direction ``step``."""
        return self._joined_to(i, step) is not None

    def _joined_to(self, i: int, step: int) -> int | None:
        """The word or symbol token ``i`` is joined to in direction ``step`` (:meth:`stands_alone`), or None."""
        k = i
        while 0 <= k + step < len(self.tokens):
            left, right = sorted((k, k + step))
            if self.tokens[left].end != self.tokens[right].start:
                return None
            k += step
            if self.tokens[k].is_word or self.tokens[k].text not in _SENTENCE_MARKS:
                return k
        return None

    def run(self, i: int) -> tuple[int, int]:
        """First and last token of the run that word ``i`` belongs to: the words and symbols
        joined to it with no space between (``e-mail``, ``4-star``, ``7:30``; just ``i`` when
        it stands alone, see :meth:`stands_alone`). A word put in beside word ``i`` goes
        before the first or after the last, or it would land inside a word (``e-just mail``)."""
        first = last = i
        while (k := self._joined_to(first, -1)) is not None:
            first = k
        while (k := self._joined_to(last, 1)) is not None:
            last = k
        return first, last

    def in_compound(self, i: int) -> bool:
        """True when word ``i`` is joined to another word with no space between
        (:meth:`run`): the ``carry`` or ``on`` of ``carry-on``, the ``star`` of ``4-star``.
        A symbol alone does not count (``awards/``, ``$x``)."""
        first, last = self.run(i)
        return any(self.tokens[k].is_word for k in range(first, last + 1) if k != i)

    def next_to_span(self, i: int) -> bool:
        """True when a token right beside token ``i`` belongs to a protected span."""
        return any(0 <= k < len(self.tokens) and self.tokens[k].protected for k in (i - 1, i + 1))

    def word_indices(self) -> list[int]:
        return [i for i, t in enumerate(self.tokens) if t.is_word]

    def prev_word(self, i: int) -> Token | None:
        """The word right before token ``i``; None at the start or after punctuation."""
        if i == 0 or not self.tokens[i - 1].is_word:
            return None
        return self.tokens[i - 1]

    def next_word(self, i: int) -> Token | None:
        if i + 1 >= len(self.tokens) or not self.tokens[i + 1].is_word:
            return None
        return self.tokens[i + 1]

    def gaps(self) -> list[int]:
        """Starts of words after a space (not the ``30`` of ``7:30``) where an
        insertion splits no span: the places a word can go in."""
        return [
            t.start for t in self.tokens[1:]
            if t.is_word and self.text[t.start - 1].isspace() and not self.inside_span(t.start)
        ]

    def body_end(self) -> int:
        """End of the last word: where an end-of-sentence phrase goes (before ``?``/``.``)."""
        words = self.word_indices()
        return self.tokens[words[-1]].end if words else len(self.text.rstrip())

    # -- edits ------------------------------------------------------------
    def replace(self, i: int, text: str) -> Edit:
        t = self.tokens[i]
        return Edit(t.start, t.end, text)

    def replace_word(self, i: int, word: str) -> list[Edit]:
        """Replace token ``i`` by ``word`` in the token's casing, and make a
        preceding unprotected ``a``/``an`` agree (``a cheap`` -> ``an inexpensive``)."""
        token = self.tokens[i]
        edits = [Edit(token.start, token.end, match_case(token.text, word))]
        prev = self.prev_word(i)
        if prev is not None and not prev.protected and prev.lower in ("a", "an"):
            article = indefinite_article(word)
            if article != prev.lower:
                edits.append(Edit(prev.start, prev.end, match_case(prev.text, article)))
        return edits

    def delete(self, i: int) -> Edit:
        """Remove token ``i`` with the whitespace after it, or the whitespace before
        it when punctuation or the end of the text follows (``to paris?`` -> ``to?``)."""
        t = self.tokens[i]
        after = t.end
        while after < len(self.text) and self.text[after].isspace():
            after += 1
        if t.end < after < len(self.text):
            return Edit(t.start, after, "")
        start = t.start
        while start > 0 and self.text[start - 1].isspace():
            start -= 1
        # "quickly, please?" loses "please" and its comma, not "quickly,?".
        if start > 0 and self.text[start - 1] == "," and (after == len(self.text) or self.text[after] in ".?!"):
            start -= 1
        return Edit(start, t.end, "")

    def insert_before(self, i: int, text: str) -> list[Edit]:
        """Insert ``text`` before token ``i`` (via :meth:`prepend` at the very start)."""
        if self.tokens[i].start == 0:
            return self.prepend(text)
        return [Edit(self.tokens[i].start, self.tokens[i].start, self.styled(text) + " ")]

    def insert_after(self, i: int, text: str) -> Edit:
        return Edit(self.tokens[i].end, self.tokens[i].end, " " + self.styled(text))

    def styled(self, phrase: str) -> str:
        """Write an inserted phrase in the utterance's style: all lower-case text
        (CLINC150 style) keeps ``i``; cased text gets ``I``."""
        if self.text == self.text.lower():
            return phrase
        return " ".join("I" + w[1:] if w == "i" or w.startswith("i'") else w for w in phrase.split(" "))

    def prepend(self, phrase: str, sep: str = " ") -> list[Edit]:
        """Put ``phrase`` first, moving the sentence-initial capital onto it.

        ``Book a table`` + ``okay so`` -> ``Okay so book a table``; the first word is
        lower-cased only when it is unprotected and not ``I`` or an acronym.
        """
        edits = []
        phrase = self.styled(phrase)
        first = self.tokens[0] if self.tokens else None
        if self.text[:1].isupper():
            phrase = phrase[:1].upper() + phrase[1:]
            if (first is not None and first.is_word and not first.protected
                    and first.start == 0 and not first.text.isupper()
                    and first.lower not in {"i", "i'm", "i'd", "i'll", "i've"}):
                edits.append(Edit(0, 1, first.text[0].lower()))
        edits.append(Edit(0, 0, phrase + sep))
        return edits

    def append(self, phrase: str, sep: str = " ") -> Edit:
        """Put ``phrase`` after the last word, before closing punctuation."""
        at = self.body_end()
        return Edit(at, at, sep + self.styled(phrase))


def indefinite_article(word: str) -> str:
    """``a`` or ``an`` before ``word``, by spelling with the common exceptions."""
    w = word.lower()
    if w.startswith(("hour", "honest", "honor", "honour", "heir")):
        return "an"
    if w.startswith(("uni", "use", "usu", "uti", "eu", "one", "once")):
        return "a"
    return "an" if w[:1] in ("a", "e", "i", "o", "u") else "a"


def match_case(source: str, word: str) -> str:
    """Give ``word`` the casing pattern of ``source`` (UPPER, Capitalised or lower)."""
    if len(source) > 1 and source.isupper():
        return word.upper()
    if source[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def apply_edits(example: Example, edits: Iterable[Edit]) -> Example | None:
    """Apply ``edits`` (offsets into ``example.text``) and re-map the spans.

    Overlapping deletions (empty ``text``) are merged, so deleting two adjacent
    words composes. Returns a new example (labels, id and meta copied) or
    ``None`` when other edits overlap each other, touch the inside of a protected span, leave the text
    empty, or change nothing. Span ``[s, e)`` moves to ``[s', s' + e - s)`` where
    ``s'`` counts every edit ending at or before ``s``: an insertion exactly at
    a span's start lands before the span, one at its end lands after it.
    """
    ordered = [_tidy(e, example.text) for e in _merge_deletions(sorted(edits, key=lambda e: (e.start, e.end)))]
    if not ordered:
        return None
    for a, b in zip(ordered, ordered[1:]):
        if b.start < a.end:
            return None
    for edit in ordered:
        if not 0 <= edit.start <= edit.end <= len(example.text):
            raise ValueError(f"edit {edit} is outside the text")
        for span in example.spans:
            if edit.start == edit.end:
                if span.start < edit.start < span.end:
                    return None
            elif edit.start < span.end and edit.end > span.start:
                return None
    return _rebuilt(example, ordered, tuple(_shift(span, ordered) for span in example.spans))


def replace_spans(example: Example, values: Mapping[int, str]) -> Example | None:
    """Give protected spans new values: ``values`` maps a span's index in
    ``example.spans`` to its new text (the one edit allowed inside a span, as
    it replaces the whole span).

    The replaced span covers its new value and keeps its label; every span
    after it shifts by the change in length. ``None`` when nothing changed.
    """
    edits = [Edit(example.spans[i].start, example.spans[i].end, value) for i, value in values.items()]
    ordered = sorted(edits, key=lambda e: e.start)
    spans = []
    for i, span in enumerate(example.spans):
        moved = _shift(span, ordered)  # an edit of the span itself ends after its start: not counted
        spans.append(Span(moved.start, moved.start + len(values[i]), span.label) if i in values else moved)
    return _rebuilt(example, ordered, tuple(spans))


def _rebuilt(example: Example, ordered: Sequence[Edit], spans: tuple[Span, ...]) -> Example | None:
    """``example`` with the sorted, disjoint ``ordered`` edits applied and ``spans`` as its spans;
    ``None`` when the text is unchanged or left blank."""
    pieces = []
    cursor = 0
    for edit in ordered:
        pieces.append(example.text[cursor:edit.start])
        pieces.append(edit.text)
        cursor = edit.end
    pieces.append(example.text[cursor:])
    text = "".join(pieces)
    if text == example.text or not readable(text):
        return None
    return Example(text, example.labels, example.id, spans, dict(example.meta))


def _merge_deletions(edits: list[Edit]) -> list[Edit]:
    merged: list[Edit] = []
    for edit in edits:
        last = merged[-1] if merged else None
        if last is not None and not last.text and not edit.text and edit.start <= last.end:
            merged[-1] = Edit(last.start, max(last.end, edit.end), "")
        else:
            merged.append(edit)
    return merged


def _tidy(edit: Edit, text: str) -> Edit:
    """A deletion that now ends the text (or meets closing punctuation) also
    takes the whitespace before it: "book a table for me" minus "for me" is
    "book a table", not "book a table ".

    A deletion of words leaves no comma orphaned either: one that meets a comma
    (or ``;``/``:``) at the start of the text takes it and the space after it
    ("Please, call mom" -> "call mom", not ", call mom"), and one between a comma
    and closing punctuation takes the comma before it ("yes, please, book it" ->
    "yes, book it", "tomorrow, would you?" -> "tomorrow?", not "yes,, book it"
    and "tomorrow,?"). A deletion of punctuation alone is left as it is."""
    if edit.text or edit.start == edit.end:
        return edit
    if edit.end < len(text) and text[edit.end] not in ".?!,;:":
        return edit
    start, end = edit.start, edit.end
    while start > 0 and text[start - 1].isspace():
        start -= 1
    if any(c.isalnum() for c in text[edit.start:edit.end]):
        if start == 0 and end < len(text) and text[end] in ",;:":
            end += 1
            while end < len(text) and text[end].isspace():
                end += 1
        elif start > 0 and text[start - 1] == ",":
            start -= 1
    return Edit(start, end, "")


def _shift(span: Span, edits: Sequence[Edit]) -> Span:
    delta = sum(len(e.text) - (e.end - e.start) for e in edits if e.end <= span.start)
    return Span(span.start + delta, span.end + delta, span.label)
