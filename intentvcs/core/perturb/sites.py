"""Where a word-replacing operator acts: unprotected words paired with the
replacements they admit. Shared by NATURE (one word) and LAUG (several), so both
pick words the same way.

Each ``*_sites`` function returns up to ``n`` sites chosen at random by ``rng``.
Candidate words are tried in a shuffled order and looked up only until ``n``
sites are found, so a call costs one or two lexicon look-ups rather than one per
word of the utterance.

A word joined to another word with no space between (``Utterance.in_compound``:
part of ``carry-on``, ``twenty-one``, ``4-star``, ``e-mail``) is no site:
replaced, it makes a word that is none (``carry-upon``, ``twenty-ace``,
``4-stop``), read out of context (the part after a hyphen reads as a clause
start). Such words are still drawn and then passed over, so that every other
site stays what it was and recorded reports and augmented sets reproduce.
"""

from __future__ import annotations

import random
from typing import Callable, Iterable

from intentvcs.core.perturb import lexicon
from intentvcs.core.perturb.morph import is_plural_noun
from intentvcs.core.perturb.phonetic import phonetic_index
from intentvcs.core.perturb.tagging import guess_pos, is_particle
from intentvcs.core.perturb.text import Utterance
from intentvcs.core.perturb.thesaurus import distractors, stopword_synonyms, synonyms

Site = tuple[int, tuple[str, ...]]  # (token index, replacements in preference order)
Lookup = Callable[[int], tuple[str, ...]]


def _pick(rng: random.Random, utt: Utterance, groups: Iterable[list[int]], lookup: Lookup, n: int) -> list[Site]:
    """Up to ``n`` sites: each group's indices in random order, earlier groups first;
    parts of a compound are passed over (module docstring)."""
    out: list[Site] = []
    for group in groups:
        order = list(group)
        rng.shuffle(order)
        for i in order:
            found = () if utt.in_compound(i) else lookup(i)
            if found:
                out.append((i, found))
                if len(out) == n:
                    return out
    return out


def _content_words(utt: Utterance) -> list[int]:
    """Unprotected words outside the closed classes, of three letters or more:
    shorter ones are abbreviations (``pm``, ``tv``) whose WordNet senses mislead
    (``pm`` -> ``necropsy``)."""
    return [
        i for i in utt.free_words()
        if len(utt.tokens[i].text) >= 3 and utt.tokens[i].lower not in lexicon.FUNCTION_WORDS
    ]


def synonym_sites(utt: Utterance, rng: random.Random, pos: str | None = None, n: int = 1) -> list[Site]:
    """Content words (read as ``pos`` when given) with WordNet synonyms."""

    def lookup(i: int) -> tuple[str, ...]:
        guessed = guess_pos(utt, i)
        if guessed is None or (pos is not None and guessed != pos):
            return ()
        return synonyms(utt.tokens[i].lower, guessed)

    return _pick(rng, utt, [_content_words(utt)], lookup, n)


# Modals whose synonym ("ought to", "have to") cannot invert with its subject: "should i use" is no
# "ought to i use", "must we go" no "have to we go". Before a subject pronoun they keep their own word.
_BEFORE_A_VERB_ONLY = frozenset({"should", "must"})
_SUBJECTS = lexicon.SUBJECT_PRONOUNS | {"it"}


def stopword_sites(utt: Utterance, rng: random.Random, n: int = 1) -> list[Site]:
    """Function words with a hand-listed near-synonym that fits where they stand
    (``lexicon.STOPWORD_SYNONYMS``): none for a verb's particle, a plural-only
    one (``lexicon.PLURAL_ONLY``) only before a plural noun, none for ``should``
    and ``must`` before a subject pronoun (a question: ``should i``)."""

    def lookup(i: int) -> tuple[str, ...]:
        found = stopword_synonyms(utt.tokens[i].lower)  # most words have none: asked first, it is the cheap test
        if not found or is_particle(utt, i):
            return ()
        if utt.tokens[i].lower in _BEFORE_A_VERB_ONLY:
            after = utt.next_word(i)
            if after is not None and after.lower in _SUBJECTS:
                return ()
        if not lexicon.PLURAL_ONLY.intersection(found):
            return found
        after = utt.next_word(i)
        plural = after is not None and is_plural_noun(after.lower)
        return tuple(s for s in found if plural or s not in lexicon.PLURAL_ONLY)

    return _pick(rng, utt, [utt.free_words()], lookup, n)


def soundalike_sites(utt: Utterance, rng: random.Random, max_distance: int = 2,
                     function_words: bool = False, n: int = 1) -> list[Site]:
    """Words with common sound-alikes within ``max_distance`` phoneme edits,
    closest first. Function words take part only when ``function_words``, and
    then only with exact homophones (``for`` -> ``four``): a one-phoneme slip
    of a short word (``a`` -> ``uh``) is noise, not a misheard word."""
    index = phonetic_index()

    def lookup(i: int) -> tuple[str, ...]:
        word = utt.tokens[i].lower
        limit = 0 if word in lexicon.FUNCTION_WORDS else max_distance
        return tuple(nb.word for nb in index.neighbours(word, limit))

    candidates = _content_words(utt)
    if function_words:
        candidates += [i for i in utt.free_words() if utt.tokens[i].lower in lexicon.FUNCTION_WORDS]
    return _pick(rng, utt, [sorted(candidates)], lookup, n)


def distractor_sites(utt: Utterance, rng: random.Random, n: int = 1) -> list[Site]:
    """Nouns, then verbs and adjectives, with co-hyponyms a speaker could say by
    mistake (``jazz`` -> ``rap``); when none has any, sound-alikes. Nouns first
    because noun slips read as real repairs."""
    by_pos: dict[str, list[int]] = {"n": [], "v": [], "a": []}
    for i in _content_words(utt):
        pos = guess_pos(utt, i)
        if pos in by_pos:
            by_pos[pos].append(i)

    def lookup(i: int) -> tuple[str, ...]:
        return distractors(utt.tokens[i].lower, guess_pos(utt, i))

    return _pick(rng, utt, by_pos.values(), lookup, n) or soundalike_sites(utt, rng, max_distance=1, n=n)
