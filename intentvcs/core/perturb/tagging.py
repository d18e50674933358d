"""A light part-of-speech heuristic: no tagger model, just the lexicon and the
word before.

``guess_pos`` reads a token as ``v``/``n``/``a``/``r`` (WordNet's parts of
speech) or ``None`` for function words and words the lexicon does not know:

1. function words (``lexicon.FUNCTION_WORDS``) are never content words;
2. the candidate parts of speech are the word's LemmInflect readings that
   WordNet also lists (``morph.pos_set``); a single candidate wins;
3. ``-ly`` words that can be adverbs are adverbs;
4. after a verb cue (``to``, a modal, a subject pronoun, ``please``) or at the
   start of a clause (imperatives: "book a table") a word that can be a verb is
   a verb; ``-ly`` adverbs in between are looked through ("please quickly book");
5. after a linking verb or degree adverb (``is``, ``very``) a word that can
   be an adjective is one ("is it *safe*");
6. after a determiner, a word that can be an adjective and is followed by a
   possible noun is an adjective ("a cheap flight"), otherwise a noun;
7. otherwise nouns beat adjectives beat verbs beat adverbs.

``find_verb`` is the first unprotected token read as a verb, falling back to the
first unprotected auxiliary ("what *is* the weather"). The heuristic is wrong on
garden paths (an imperative noun-verb like "weather ..." at the start reads as
a verb) but needs nothing beyond the lexicons already loaded.
"""

from __future__ import annotations

from intentvcs.core.perturb import lexicon
from intentvcs.core.perturb.morph import pos_set
from intentvcs.core.perturb.text import Utterance

_FALLBACK_ORDER = ("n", "a", "v", "r")
_AUXILIARY_LIKE = lexicon.AUXILIARIES | lexicon.MODALS


def guess_pos(utt: Utterance, i: int) -> str | None:
    """WordNet part of speech of token ``i`` in context, or None (see module doc)."""
    token = utt.tokens[i]
    word = token.lower
    if not token.is_alpha or word in lexicon.FUNCTION_WORDS:
        return None
    candidates = pos_set(word)
    if len(candidates) <= 1:
        return next(iter(candidates), None)
    if "r" in candidates and word.endswith("ly"):
        return "r"
    prev_word = _previous(utt, i)
    if "v" in candidates and (prev_word is None or prev_word in lexicon.VERB_CUES):
        return "v"
    if "a" in candidates and prev_word in lexicon.ADJECTIVE_CUES:
        return "a"
    if prev_word in lexicon.DETERMINERS:
        nxt = utt.next_word(i)
        if "a" in candidates and nxt is not None and "n" in pos_set(nxt.lower):
            return "a"
        if "n" in candidates:
            return "n"
    return next(p for p in _FALLBACK_ORDER if p in candidates)


def _previous(utt: Utterance, i: int) -> str | None:
    """The word before token ``i``, looking through ``-ly`` adverbs ("please
    *quickly* book": the cue for ``book`` is ``please``); None at a clause start."""
    k = i
    while True:
        prev = utt.prev_word(k)
        if prev is None:
            return None
        word = prev.lower
        if not (word.endswith("ly") and "r" in pos_set(word)):
            return word
        k -= 1


def is_particle(utt: Utterance, i: int) -> bool:
    """True when token ``i`` is a preposition read as a verb's particle: right
    after a verb ("turn *on* the lights", "log *in* to", "look *at*") or with no
    word after it to be its object ("turn the lights *on*", "where are you *from*?")."""
    if utt.tokens[i].lower not in lexicon.PREPOSITIONS:
        return False
    return utt.next_word(i) is None or (utt.prev_word(i) is not None and guess_pos(utt, i - 1) == "v")


def find_verb(utt: Utterance) -> int | None:
    """Token index of the main verb (see module doc), or None."""
    auxiliary = None
    for i in utt.free_words():
        if guess_pos(utt, i) == "v":
            return i
        if auxiliary is None and utt.tokens[i].lower in _AUXILIARY_LIKE:
            auxiliary = i
    return auxiliary


_QUESTION_OPENERS = frozenset({"is", "are", "was", "were", "am", "do", "does", "did", "have", "has"})


def sentence_type(utt: Utterance) -> str:
    """``question`` (wh-word or auxiliary first), ``request`` (modal first: "can
    you ..."), ``command`` (a verb first) or ``statement`` (anything else)."""
    words = utt.word_indices()
    if not words:
        return "statement"
    first = utt.tokens[words[0]].lower
    if first in lexicon.WH_WORDS or first.split("'")[0] in lexicon.WH_WORDS or first in _QUESTION_OPENERS:
        return "question"
    if first in lexicon.MODALS:
        return "request"
    if guess_pos(utt, words[0]) == "v":
        return "command"
    return "statement"
