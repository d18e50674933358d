"""Spelling normalisation: misspelt words back to the training vocabulary.

Keyboard typos turn a word the model knows into word pieces it never saw
(``balance`` -> ``balsnce``), and no amount of augmented training recovers all
of it (the robustness benchmark's ``typo_keyboard`` drop). A word that is in
neither the training vocabulary nor an English word list is usually a typo
(or a name), and the closest training word is usually what was meant, so the
model reads that instead. Real words are never touched: a typo that makes
another English word (``book`` -> ``boot``) is left to the model. Nor are
chat spellings of contractions (``dont``: "don" would lose the negation; ``yall``), the stem of a
negative contraction (``doesn't``: not "does't"), currency codes (``usd``: not "us") or,
in text that is not all one case, capitalised words after the first (names:
``Gare du Nord``, ``my Amex``) and short ALL-CAPS words wherever they stand
(acronyms: ``AMEX balance``, ``RBC balance please`` were read as "ALEX",
"BBC"). Nor are the words of URLs, email addresses and identifiers
(``www.balanse.com``, ``bank.de/savngs``, ``savngs@bank.com``, ``#savngs``, ``my_balanse_v2``, ``ordr123``,
``ordr-123``): not spelling.
Nor, for a model with an entity head, are
words it reads as part of an entity (``infer_normalised``): names are the
non-words a normaliser built from training words gets most wrong. Nor are
words in a script other than Latin, the English list's: there a word the
training rows lack may as well be a real word ("выключи", "turn off", one edit
from a training word "включи", "turn on"; Hangul's "꺼주세요" and "켜주세요"),
and in the scripts written without spaces (Han, kana, Thai, Lao, Khmer,
Myanmar) a run of letters is a phrase, where one edit swaps a word
("我不想听音乐" is one deletion from "我想听音乐": the negation).

The index is SymSpell's symmetric-delete lookup (``symspellpy``) over the
training vocabulary only, so it is small (thousands of words, built in well
under a second) and can only suggest words the model was trained on; the
English list (SymSpell's bundled 82,765-word frequency dictionary) is only
consulted as "is this a real word". Candidates are the training words at the
smallest Damerau-Levenshtein distance (at most 1 for words of 3-7 letters, 2 for
longer ones; shorter words are left alone), ties going to the more frequent.

Serialised as ``spelling.json`` in checkpoints and bundles (``to_dict``, a
versioned file: ``SPELLING_FORMAT``, ``intentvcs.core.formats``); pure Python,
no torch, so the serving engine applies it before tokenising.
"""

from __future__ import annotations

import bisect
import functools
import json
import os
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from symspellpy import SymSpell, Verbosity

from intentvcs.core import atomic
from intentvcs.core.dataio import Example
from intentvcs.core.entities import Entity
from intentvcs.core.formats import FileFormat, FormatError, json_object, message_error
from intentvcs.core.outputs import GraphOutputs, tuple_array

SPELLING_FILE = "spelling.json"
MIN_LENGTH = 3
# Words up to this many letters get edit distance 1, longer ones 2. A keyboard
# typo is one edit; at 2 edits a word of up to 7 letters is within reach of too
# many others, and the out-of-vocabulary non-words it catches are mostly names
# (SNIPS: "jawad" -> "away", "dwele" -> "twelve", "heber" -> "here"), which the
# entity head then misreads. Measured on a SNIPS joint model against the former
# 4: validation slot F1 95.61 -> 95.78, overall accuracy 89.71 -> 90.14, test
# 94.37 -> 94.79 and 87.29 -> 88.14; keyboard-typo intent accuracy unchanged on
# SNIPS validation and test, and on the embedded set's validation rows.
SHORT_WORD = 7
MAX_EDIT_DISTANCE = 2
# Acronyms are short ("ABC", "AMEX", "MSNBC"), and at one edit a 3-5 letter one reaches a training word ("ABC" ->
# "BBC", "AMEX" -> "ALEX"); a longer ALL-CAPS word opening a text is more often shouted ("BALSNCE please!"): mended.
ACRONYM_LENGTH = 5
ENGLISH_DICTIONARY = "frequency_dictionary_en_82_765.txt"
# Apostrophe-less contractions and chat shorthand: real words to their writers,
# absent from the English list, and one edit from a word of another meaning.
INFORMAL_WORDS = frozenset({
    "dont", "cant", "wont", "didnt", "doesnt", "isnt", "arent", "wasnt", "werent", "havent", "hasnt",
    "hadnt", "wouldnt", "couldnt", "shouldnt", "aint", "im", "ive", "youre", "youve", "youll", "youd",
    "theyre", "theyve", "theyll", "whats", "thats", "theres", "heres", "wheres", "whos", "hows", "lets",
    "hes", "shes", "weve", "gonna", "wanna", "gotta", "pls", "plz", "thx", "thanx", "lol", "btw", "asap",
    # With the demo bundle's words these were read as another word: "yall" -> "call", "shouldve" -> "should",
    # "hed" -> "hey", "cuz" -> "cut", "whod" -> "who", "itd" -> "it", "yknow" -> "know", "tbh" -> "th".
    "yall", "shouldve", "wouldve", "couldve", "mightve", "mustve", "mustnt", "neednt", "mightnt", "shant",
    "hed", "itd", "itll", "thatd", "thatll", "whod", "wholl", "whatd", "whatll", "whered", "howd", "yknow",
    "cuz", "coz", "tbh", "idk", "imo", "omg",
})
# Currency codes (ISO 4217, the most traded): one edit from an English word and absent from the English list,
# "convert 100 usd to eur" was read as "100 us".
CURRENCY_CODES = frozenset({
    "usd", "eur", "gbp", "jpy", "cny", "rmb", "chf", "cad", "aud", "nzd", "inr", "rub", "brl", "mxn", "krw",
    "sek", "nok", "dkk", "pln", "hkd", "sgd", "zar", "try", "thb", "idr", "huf", "czk", "ils", "php", "myr",
    "aed", "sar", "twd", "ars", "clp", "cop", "pen", "ngn", "egp", "pkr", "vnd", "uah", "ron", "bgn", "isk",
})
# What follows the stem of a negative contraction ("doesn't", "isn’t"): the stem ("doesn", "isn", "couldn")
# is no English word and one edit from the positive one, and was "corrected" to it ("does't": the negation).
_NEGATION = re.compile(r"['\u2019\u02bc][tT](?![^\W\d_])")
# Non-blank runs that are addresses or code, not words: a URL (a scheme, "www.", a domain of a common top-level
# domain), an email address or a handle ("@"), an identifier ("_", or letters glued to a digit: an order number,
# a user name, a flight or product code, "ordr123", "jonh42", whose letters were "corrected" to "order123",
# "john42"). Tried from the start of a run only: from every character of a long run, each try scanning the rest
# of it, the search is quadratic (8,000 letters: 0.7 s). So too a hashtag ("#balanse" was read as "#balance"),
# letters joined to digits by a separator ("ordr-123", "123-ordr", "ordr#123": "order-123") and a path under a
# domain of any top-level domain ("bank.de/savngs": "bank.de/savings").
_CODE = re.compile(r"(?<!\S)\S*?(?:://|@|_|#\w|\bwww\.|\w\.(?:com|org|net|edu|gov|io)(?!\w)|\w\.[^\W\d_]{2,}/"
                   r"|[^\W\d_][-#./:]?\d|\d[-#./:]?[^\W\d_])\S*", re.IGNORECASE)
# Only words in Latin letters are corrected: the English list, which tells a real word from a typo, is written
# in them. A word in another script that the training rows lack may as well be a real word as a typo, and a
# correction there bent its meaning: with "включи" ("turn on") among the training words, "выключи свет" ("turn
# off the light") was rewritten to "включи свет". So too, with "불 켜주세요" ("turn the light on") trained, "불
# 꺼주세요" ("... off"), one syllable away; and in the scripts written without spaces (Han, kana, Thai, Lao,
# Khmer, Myanmar) a run of letters is a phrase, where one edit swaps a word ("我不想听音乐", "I don't want to
# hear music", is one deletion from "我想听音乐").
def _latin(word: str) -> bool:
    """Whether every letter of ``word`` is a Latin one (accented letters too: "café", "straße")."""
    return all(_latin_letter(char) for char in word if char.isalpha())


@functools.lru_cache(maxsize=4096)
def _latin_letter(char: str) -> bool:
    return unicodedata.name(char, "").startswith("LATIN ")


@functools.cache  # a scan of every code point, read by the normaliser's and the perturbation tokenizer's patterns
def _mark_class() -> str:
    """A regex character class body holding every nonspacing mark (Unicode category Mn).

    Only planes 0, 1 and 14 hold any (the others are ideographs and private use), which keeps this to ~10 ms.
    """
    planes = (range(0x20000), range(0xE0000, 0xF0000))
    marks = [code for plane in planes for code in plane if unicodedata.category(chr(code)) == "Mn"]
    ranges, start = [], marks[0]
    for previous, code in zip(marks, marks[1:] + [None]):
        if code != previous + 1:
            ranges.append(re.escape(chr(start)) + ("" if previous == start else "-" + re.escape(chr(previous))))
            start = code
    return "".join(ranges)


@functools.cache
def _word_pattern() -> re.Pattern:
    r"""The words ``rewrite`` corrects: runs of letters (any script: digits, amounts and times are not
    spelling, and splitting at apostrophes leaves contractions' short halves, "s", under MIN_LENGTH), each
    letter with the nonspacing marks after it, which ``re`` counts as \W. Text in decomposed form (NFD: "e" +
    U+0301 for "é") would otherwise split a word at every accent and "correct" the pieces ("re\u0301sume\u0301"
    -> "résomé"), as would Hebrew niqqud, Arabic harakat and the nonspacing vowel signs and viramas of Indic
    scripts ("बजे"). Spacing vowel signs (category Mc: Devanagari "ा", most Bengali and Tamil ones) still end a
    word, in the vocabulary as here. Built on first use, not at import: every command imports this module,
    few rewrite a text."""
    return re.compile(rf"[^\W\d_](?:[^\W\d_]|[{_mark_class()}])*")


def _words(text: str) -> list[re.Match]:
    """The words of ``text`` as the normaliser reads them: what ``rewrite`` corrects and what the vocabulary
    (``vocabulary``, ``entity_vocabulary``) counts, looked up and stored in their ``_lookup_form``. One reading
    for both: a vocabulary read otherwise (in runs of letters, which end at a combining mark) held "cafe" and
    "बज" for the training words "café" (decomposed) and "बजे", which ``rewrite`` then "corrected" to them."""
    return list(_word_pattern().finditer(text))


def _lookup_form(word: str) -> str:
    """``word`` as the vocabulary holds it and the index is asked for it: composed, out of its compatibility
    forms (NFKC: "ﬁnd", "ｆｉｎｄ" -> "find"; a decomposed accent composed), lowercase."""
    return unicodedata.normalize("NFKC", word).lower()


def _is_word(word: str) -> bool:
    """A letter, then letters and combining marks: what a vocabulary entry may be. A capital may lowercase to
    a letter and a mark ("İ" -> "i" + U+0307)."""
    return bool(word) and word[0].isalpha() and all(
        ch.isalpha() or unicodedata.category(ch).startswith("M") for ch in word[1:])


def _vocabulary_words(text: str) -> list[str]:
    """The words of ``text`` (``_words``) that are vocabulary entries, in their ``_lookup_form``: words of
    letters and marks as written and as looked up. Numerals are "word" characters to ``re`` (Roman, fractions:
    "Ⅷ", "½" -> "1⁄2"), and a few presentation forms stand for a phrase ("ﷺ", with spaces)."""
    words = (match.group(0) for match in _words(text))
    return [form for word in words if _is_word(word) and _is_word(form := _lookup_form(word))]


class SpellingError(FormatError):
    """A spelling file is unreadable or malformed; names the file (``path``) and the problem."""


# ``from_dict`` raises ValueError (no file to name); ``load`` makes it a SpellingError.
SPELLING_FORMAT = FileFormat(
    "intentvcs-spelling", 1, "spelling normaliser",
    "refit the checkpoint (intentvcs refit), then re-export it (intentvcs export)",
    fields={"vocabulary": json_object, "entity_words": json_object}, optional=frozenset({"entity_words"}),
    error=message_error(ValueError),
)


@lru_cache(maxsize=1)
def english_words() -> frozenset[str]:
    """The lowercase words of SymSpell's bundled English frequency dictionary."""
    text = (resources.files("symspellpy") / ENGLISH_DICTIONARY).read_text(encoding="utf-8")
    return frozenset(line.split(" ", 1)[0] for line in text.splitlines() if line)


def vocabulary(texts: Iterable[str]) -> dict[str, int]:
    """Lowercase word counts of ``texts`` (the words ``Spelling`` may correct to), each word as ``rewrite``
    reads it (``_words``: with its combining marks) and looks it up (``_lookup_form``: NFKC, lowercase)."""
    return dict(Counter(word for text in texts for word in _vocabulary_words(text)))


def entity_vocabulary(examples: Iterable[Example]) -> dict[str, list[str]]:
    """Entity type -> the sorted lowercase words its training spans hold."""
    words: dict[str, set[str]] = {}
    for ex in examples:
        for span in ex.spans:
            words.setdefault(span.label, set()).update(_vocabulary_words(ex.text[span.start:span.end]))
    return {label: sorted(found) for label, found in sorted(words.items())}


class Spelling:
    """Correct out-of-vocabulary non-words to the closest training word.

    ``normalise(text)`` keeps everything but the corrected words as it was
    (spacing, punctuation, digits) and carries each word's casing over.
    ``entity_words`` (entity type -> the words the training spans of that type
    hold; ``None`` for a normaliser built before it was kept) tells a
    correction that lands inside an entity of a type that holds the corrected
    word ("tomorow" -> "tomorrow" in a date) from one that bends a name into a
    training word ("lindsey cardinale" -> "cardinal" in an artist):
    ``infer_normalised`` keeps the first and undoes the second.
    """

    def __init__(self, counts: Mapping[str, int], entity_words: Mapping[str, Iterable[str]] | None = None):
        # Combining marks are part of a word (``_is_word``); files of the former reading, which cut words at
        # them, hold only letters and load as they are (their pieces stay the words: refit to mend them).
        bad = [word for word, count in counts.items()
               if not (isinstance(word, str) and _is_word(word) and word == word.lower())
               or not isinstance(count, int) or isinstance(count, bool) or count < 1]
        if bad:
            raise ValueError("vocabulary entries must be lowercase letters (with any combining marks) "
                             f"with a positive count: {bad[:5]}")
        self.counts = dict(counts)
        self._index = SymSpell(max_dictionary_edit_distance=MAX_EDIT_DISTANCE, prefix_length=7)
        for word, count in self.counts.items():
            self._index.create_dictionary_entry(word, count)
        self._known = english_words() | INFORMAL_WORDS | CURRENCY_CODES | self.counts.keys()
        self._correct = lru_cache(maxsize=65536)(self._correct_word)
        self.entity_words = (None if entity_words is None else
                             {label: frozenset(words) for label, words in entity_words.items()})

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> "Spelling":
        """A normaliser of plain texts (no entity words: every correction inside an entity is undone)."""
        return cls(vocabulary(texts))

    @classmethod
    def from_examples(cls, examples: Sequence[Example]) -> "Spelling":
        """The normaliser of a training set: its words, and the words each entity type's spans hold."""
        return cls(vocabulary(ex.text for ex in examples), entity_vocabulary(examples))

    def holds(self, entity_type: str, word: str) -> bool:
        """Whether training spans of ``entity_type`` hold ``word`` (never, without ``entity_words``)."""
        return self.entity_words is not None and _lookup_form(word) in self.entity_words.get(entity_type, ())

    def __len__(self) -> int:
        return len(self.counts)

    def normalise(self, text: str) -> str:
        return self.rewrite(text).text

    def normalise_all(self, texts: Iterable[str]) -> list[str]:
        return [self.normalise(text) for text in texts]

    def rewrite(self, text: str, protected: Sequence[tuple[int, int]] = ()) -> "Rewrite":
        """``text`` normalised, with where each corrected word came from (to map offsets back); a word that
        overlaps a ``protected`` span ``(start, end)`` is kept as written (in plain letters: ``_folded``)."""
        words = _words(text)
        # Capitals mark names only where case is used at all: not in all-lowercase,
        # ALL-CAPS or Title Case text, where every word is corrected alike.
        names_marked = any(m.group(0)[0].islower() for m in words) and any(
            not m.group(0).islower() for m in words[1:])
        # A short ALL-CAPS word in text that is not all caps is an acronym even where it opens the text, which a
        # capital alone does not mark ("AMEX balance please" was read as "ALEX ...", and answered nothing).
        acronyms_marked = any(not m.group(0).isupper() for m in words)
        overlaps_kept = _overlap_test([*protected, *(m.span() for m in _CODE.finditer(text))])
        pieces, edits, end, length = [], [], 0, 0
        for index, match in enumerate(words):
            word = match.group(0)
            keep = (names_marked and index > 0 and not word.islower()) or (
                acronyms_marked and 1 < len(word) <= ACRONYM_LENGTH and word.isupper()) or (
                word[-1] in "nN" and _NEGATION.match(text, match.end()) is not None) or overlaps_kept(*match.span())
            # A word kept is kept in its letters, not in a compatibility form the tokenizer reads as [UNK].
            written = _folded(word) if keep else self._correct(word)
            length += match.start() - end
            if written != word:
                edits.append((match.start(), match.end(), length, length + len(written)))
            pieces += [text[end:match.start()], written]
            length += len(written)
            end = match.end()
        return Rewrite(text, "".join(pieces) + text[end:], tuple(edits))

    def _correct_word(self, word: str) -> str:
        # Looked up in ``_lookup_form`` (composed, plain letters), the form the vocabulary holds; a word kept is
        # kept as sent, but for its compatibility forms (a ligature pasted from a PDF, "ﬁnd"; full-width letters,
        # "ｆｉｎｄ"): it is read in its plain letters (NFKC, ``_folded``), which the tokenizer knows (looked up
        # as written, "ﬁnd" was one edit from "and"; kept as written, "ｂｏｓｔｏｎ" was read as [UNK]).
        lower = _lookup_form(word)
        if len(lower) < MIN_LENGTH or not _latin(lower) or lower in self._known:
            return _folded(word)
        distance = 1 if len(lower) <= SHORT_WORD else MAX_EDIT_DISTANCE
        suggestions = self._index.lookup(lower, Verbosity.CLOSEST, max_edit_distance=distance)
        if not suggestions:
            return _folded(word)
        best = max(suggestions, key=lambda s: (s.count, s.term)).term  # all at the same distance
        return _with_casing(best, word)

    # -- serialisation ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        body = {**SPELLING_FORMAT.stamp(), "vocabulary": dict(sorted(self.counts.items()))}
        if self.entity_words is not None:
            body["entity_words"] = {label: sorted(words) for label, words in sorted(self.entity_words.items())}
        return body

    @classmethod
    def from_dict(cls, body: Any) -> "Spelling":
        SPELLING_FORMAT.check(body)
        return cls(body["vocabulary"], body.get("entity_words"))

    def to_text(self) -> str:
        """What ``save`` writes (``spelling.json``)."""
        return json.dumps(self.to_dict(), ensure_ascii=False) + "\n"

    def save(self, path: str | os.PathLike) -> Path:
        return atomic.write_text(path, self.to_text())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Spelling":
        try:
            return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
            raise SpellingError(path, str(exc)) from None


@dataclass(frozen=True)
class Rewrite:
    """A text as the normaliser rewrote it: ``original`` -> ``text``.

    ``edits`` holds, per corrected word, ``(original start, original end,
    start, end)``; everything between edits is unchanged, only shifted. An
    entity found in ``text`` is reported at ``to_original``'s offsets in the
    text as sent.
    """

    original: str
    text: str
    edits: tuple[tuple[int, int, int, int], ...] = ()

    def to_original(self, start: int, end: int) -> tuple[int, int]:
        """Offsets ``[start, end)`` of ``text`` as offsets of ``original``; a corrected word maps whole."""
        return self._position(start, is_end=False), self._position(end, is_end=True)

    def _position(self, offset: int, is_end: bool) -> int:
        shift = 0
        for original_start, original_end, new_start, new_end in self.edits:
            inside = (new_start < offset <= new_end) if is_end else (new_start <= offset < new_end)
            if inside:
                return original_end if is_end else original_start
            if new_end > offset:  # this edit and the later ones lie after the offset
                break
            shift += (original_end - original_start) - (new_end - new_start)
        return offset + shift


def infer_normalised(spelling: Spelling | None, texts: Sequence[str],
                     infer: Callable[[list[str]], GraphOutputs], tags: bool = False) -> tuple[GraphOutputs, list[str]]:
    """``infer`` run on ``texts`` as ``spelling`` rewrites them (unchanged without one).

    A text whose corrected words the model reads as part of an entity is read
    again with those words as sent, and answered from that reading: there they
    are names (SNIPS test: 62 of the normaliser's 66 corrections lie inside
    gold entities, "lindsey cardinale" -> "lindsey cardinal"), and the entity
    head reads a name better than the training word nearest to it. Unless the
    entity's type holds the corrected word in training (``Spelling.holds``):
    "tomorow" -> "tomorrow" inside a date is a typo mended, not a name bent.

    ``tags``: the graph tags entities. Every text a correction changed is then
    read as sent in the same run as the rewritten texts, and a text whose
    corrections all lie inside the entities found is answered from that
    reading: no second run for the usual case, where a correction bends a name
    (SNIPS test at batch 32, int8: 57 of 700 texts re-read, in 21 more runs of
    2-3 texts each; ``Engine.predict`` ran at 838 utt/s, 941 with the
    normaliser off). A text with corrections both inside and outside its
    entities is read once more with the outside ones kept. Either way a row
    is answered from the same graph on the same text (with an int8 graph, whose
    activation scales are set per run, up to the noise of other rows in it).

    Returns the outputs, with entity offsets and request starts mapped back
    onto ``texts`` (an entity on a corrected word covers the word as sent),
    and the texts the model read.
    """
    if spelling is None:
        return infer(list(texts)), list(texts)
    rewrites = [spelling.rewrite(text) for text in texts]
    changed = [row for row, rewrite in enumerate(rewrites) if rewrite.edits] if tags else []
    # Where each changed text's reading as sent lies in the first run's rows (after the rewritten texts).
    as_sent = {row: len(texts) + i for i, row in enumerate(changed)}
    first = infer([rewrite.text for rewrite in rewrites] + [texts[row] for row in as_sent])
    outputs = _on_originals(first.rows(slice(0, len(texts))), rewrites)
    if outputs.entities is not None:
        # Entities are at offsets into ``texts`` now, where the edits are too.
        bent = {row: _bent_names(spelling, found, rewrite)
                for row, (found, rewrite) in enumerate(zip(outputs.entities, rewrites)) if rewrite.edits}
        again = {row: spelling.rewrite(texts[row], protected=[(entity.start, entity.end) for entity in names])
                 for row, names in bent.items() if names}
        read_already = [row for row, rewrite in again.items() if not rewrite.edits and row in as_sent]
        if read_already:
            outputs = outputs.with_rows(read_already, first.rows([as_sent[row] for row in read_already]))
        reread = [row for row in again if row not in read_already]
        if reread:
            texts_again = [again[row] for row in reread]
            outputs = outputs.with_rows(reread, _on_originals(infer([r.text for r in texts_again]), texts_again))
        rewrites = [again.get(row, rewrite) for row, rewrite in enumerate(rewrites)]
    return outputs, [rewrite.text for rewrite in rewrites]


def _bent_names(spelling: Spelling, found: Sequence[Entity], rewrite: Rewrite) -> list[Entity]:
    """The entities of ``found`` (offsets in the text as sent) holding a correction to a word that their
    type's training spans never hold: names the normaliser bent."""
    # A word only folded out of a compatibility form ("ｂｏｓｔｏｎ" -> "boston") is the word as sent, in letters the
    # tokenizer reads: undone, the entity was read as [UNK] again ("weather in ｂｏｓｔｏｎ" found no city).
    return [entity for entity in found
            if any(entity.start < original_end and original_start < entity.end
                   and not spelling.holds(entity.label, rewrite.text[start:end])
                   and rewrite.text[start:end] != _folded(rewrite.original[original_start:original_end])
                   for original_start, original_end, start, end in rewrite.edits)]


def _on_originals(outputs: GraphOutputs, rewrites: Sequence[Rewrite]) -> GraphOutputs:
    """``outputs`` of the rewritten texts with entity offsets and request starts moved into the originals."""
    # Most texts have no edit, and their offsets stand as they are.
    if outputs.entities is not None:
        outputs = outputs._replace(entities=tuple_array(
            [tuple(_on_original(entity, rewrite) for entity in found) if rewrite.edits else found
             for found, rewrite in zip(outputs.entities, rewrites)]))
    if outputs.starts is not None:
        outputs = outputs._replace(starts=tuple_array(
            [tuple(rewrite.to_original(start, start)[0] for start in found) if rewrite.edits else found
             for found, rewrite in zip(outputs.starts, rewrites)]))
    return outputs


def _on_original(entity, rewrite: Rewrite):
    """``entity`` (an ``intentvcs.core.entities.Entity`` found in ``rewrite.text``) at its offsets in the original."""
    start, end = rewrite.to_original(entity.start, entity.end)
    return replace(entity, start=start, end=end)


def _overlap_test(spans: Sequence[tuple[int, int]]) -> Callable[[int, int], bool]:
    """Whether ``[start, end)`` overlaps any of ``spans`` (in any order, overlapping or not), in log time: a
    scan of every span for every word was quadratic in a text of many codes ("x1 x1 ...": 0.4 s at 10,000
    characters)."""
    ordered = sorted(spans)
    starts = [start for start, _ in ordered]
    reach, furthest = [], -1  # the furthest end among the spans up to each one
    for _, end in ordered:
        furthest = max(furthest, end)
        reach.append(furthest)

    def overlaps(start: int, end: int) -> bool:
        before = bisect.bisect_left(starts, end)  # the spans starting before ``end``
        return before > 0 and reach[before - 1] > start
    return overlaps


def _folded(word: str) -> str:
    """``word`` out of its compatibility forms (NFKC: a ligature pasted from a PDF, "ﬁnd"; full-width letters,
    "ｆｉｎｄ"), its casing as written; a word without any as written (a decomposed accent stays decomposed)."""
    plain = unicodedata.normalize("NFKC", word)
    return word if plain == unicodedata.normalize("NFC", word) else plain


def _with_casing(word: str, original: str) -> str:
    """``word`` cased like ``original``: ALL CAPS, Capitalised or lowercase."""
    if len(original) > 1 and original.isupper():
        return word.upper()
    if original[0].isupper():
        return word.capitalize()
    return word
