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

# How many senses (most frequent first) may lend synonyms, per part of speech.
_SENSES = {"v": 2, "n": 1, "a": 1, "r": 1}
_PLAIN = re.compile(r"[a-z]+(?:[ -][a-z]+)?")  # lower-case, at most two words


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
    """Inflected WordNet synonyms of lower-case ``word`` read as ``pos``."""
    return _forms(word, pos, lambda lemma, p: wordnet().synonyms(lemma, p, senses=_SENSES[p]))


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
