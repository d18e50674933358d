"""Replacement words for a surface word, already inflected to fit its slot.

``synonyms`` draws on the most frequent WordNet senses only, since later senses
drift (``cheap`` sense 2 is ``tawdry``); ``distractors`` returns co-hyponyms
(``jazz`` -> ``rap``, ``monday`` -> ``tuesday``), the near-miss words that
speakers correct in a repair. Results are cached per (word, pos).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable

from intentvcs.core.perturb import lexicon
from intentvcs.core.perturb.morph import inflect, is_offensive, readings
from intentvcs.core.perturb.wordnet import wordnet

_PLAIN = re.compile(r"[a-z]+(?:[ -][a-z]+)?")  # lower-case, at most two words
_WORD = re.compile(r"[a-z]+")


def _usable(candidate: str, lemma: str, pos: str) -> bool:
    """Keep common, plain, lower-case, inoffensive candidates that do not contain the lemma."""
    if not _PLAIN.fullmatch(candidate) or candidate == lemma:
        return False
    if lemma in candidate.split() or candidate in lemma.split() or is_offensive(candidate):
        return False
    # SemCor tag count > 0 keeps words people use ("reserve") and drops rare
    # ones ("shew"); multi-word entries have no separate count, so they pass.
    return " " in candidate or wordnet().tag_count(candidate, pos) > 0


def _forms(word: str, pos: str, source: Callable[[str, str], list[str]], limit: int | None = None) -> tuple[str, ...]:
    """Usable candidates from ``source(lemma, pos)``, inflected like ``word``;
    the first ``limit`` only (ranked sources can be hundreds long)."""
    out: list[str] = []
    for reading_pos, lemma, tag in readings(word):
        if reading_pos != pos:
            continue
        for candidate in source(lemma, pos):
            if not _usable(candidate, lemma, pos):
                continue
            form = inflect(candidate, tag)
            if form and form != word and form not in out:
                out.append(form)
                if len(out) == limit:
                    return tuple(out)
    return tuple(out)


@lru_cache(maxsize=1 << 16)
def synonyms(word: str, pos: str) -> tuple[str, ...]:
    """Inflected WordNet synonyms of lower-case ``word`` read as ``pos``: single
    words of the one sense the word most likely has (``_sense_synonyms``)."""
    return _forms(word, pos, _sense_synonyms)


def _sense_synonyms(lemma: str, pos: str) -> list[str]:
    """Single-word lemmas of the sense ``lemma`` has in a request to an
    assistant: the one ``lexicon.ASSISTANT_SENSES`` names, else its most frequent.

    A synonym stands in for the word wherever it occurs, so both must be read
    in the sense they share. WordNet orders senses by SemCor frequency, the only
    frequency data it ships, and only for words SemCor tagged (``tag_count``);
    its corpus is not an assistant's, hence the listed exceptions. Later senses
    drift (``get`` sense 2 lends ``become``, ``remind`` sense 2 ``prompt``).
    Outside the list, a candidate's own most frequent sense must be the shared
    one too, or a reader takes it in that one (``car`` -> ``machine``, ``taxi``
    -> ``hack``, ``send`` -> ``direct``). Single words only: WordNet's
    multi-word lemmas are glosses more than words (``turn`` -> ``change
    state``, ``table`` -> ``tabular array``).
    """
    net = wordnet()
    senses = net.synsets(lemma, pos)
    listed = lexicon.ASSISTANT_SENSES[pos]
    if lemma in listed:  # a sense chosen by hand, read in context: its lemmas need no further check
        number = listed[lemma]
        return [] if number is None else [c for c in senses[number - 1].lemmas if _WORD.fullmatch(c) and c != lemma]
    if not senses or (len(senses) > 1 and not net.tag_count(lemma, pos)):  # no sense, or none ranked
        return []
    first = senses[0]
    return [c for c in first.lemmas
            if _WORD.fullmatch(c) and c != lemma and net.synsets(c, pos)[:1] == [first]]


@lru_cache(maxsize=1 << 16)
def distractors(word: str, pos: str) -> tuple[str, ...]:
    """Up to 8 inflected co-hyponyms of ``word``, most common (SemCor count) first."""
    net = wordnet()

    def ranked(lemma: str, p: str) -> list[str]:
        found = [c.lower() for c in net.siblings(lemma, p, senses=2)]
        return sorted(found, key=lambda c: -net.tag_count(c, p))

    return _forms(word, pos, ranked, limit=8)


def stopword_synonyms(word: str) -> tuple[str, ...]:
    """Hand-listed near-synonyms of a function word (WordNet has none)."""
    return lexicon.STOPWORD_SYNONYMS.get(word, ())
