"""Word readings and re-inflection (LemmInflect lexicon + WordNet coverage).

A *reading* of a surface word is ``(pos, lemma, tag)``: a WordNet part of
speech (``v``/``n``/``a``/``r``), the lemma WordNet knows, and the Penn tag of
the surface form (``booked`` -> ``("v", "book", "VBD")``). Replacements are put
back into the same form with :func:`inflect` (``reserve`` + ``VBD`` ->
``reserved``). LemmInflect ships its lexicon in the wheel and fetches nothing.
"""

from __future__ import annotations

from functools import lru_cache

import lemminflect

from intentvcs.core.perturb.wordnet import wordnet

UPOS = {"v": "VERB", "n": "NOUN", "a": "ADJ", "r": "ADV"}
BASE_TAG = {"VERB": "VB", "NOUN": "NN", "ADJ": "JJ", "ADV": "RB"}
_BASE_TAGS = frozenset(BASE_TAG.values()) | {"VBP"}
# Comparatives and superlatives of a synonym come out wrong ("inexpensivest"),
# so such words get no replacement.
_NO_INFLECT = frozenset({"JJR", "JJS", "RBR", "RBS"})

Reading = tuple[str, str, str]


@lru_cache(maxsize=1 << 16)
def readings(word: str) -> tuple[Reading, ...]:
    """All ``(pos, lemma, tag)`` readings of a lower-case ``word`` that WordNet covers."""
    found = lemminflect.getAllLemmas(word)
    net = wordnet()
    out: list[Reading] = []
    for pos, upos in UPOS.items():
        for lemma in found.get(upos, ()):
            tag = _tag_of(word, lemma, upos)
            if tag and net.has(lemma, pos):
                out.append((pos, lemma, tag))
    if not found:  # not in LemmInflect's lexicon: trust WordNet's own entry
        out.extend((pos, word, BASE_TAG[upos]) for pos, upos in UPOS.items() if net.has(word, pos))
    return tuple(out)


def pos_set(word: str) -> frozenset[str]:
    """The WordNet parts of speech ``word`` can have."""
    return frozenset(r[0] for r in readings(word))


def is_plural_noun(word: str) -> bool:
    """True when every noun reading of lower-case ``word`` is a plural (``songs``;
    not ``music``, nor ``people``, which LemmInflect also reads as a singular)."""
    return {tag for pos, _, tag in readings(word) if pos == "n"} == {"NNS"}


def _tag_of(word: str, lemma: str, upos: str) -> str | None:
    # The lemma itself is the base form even where LemmInflect also lists it as
    # a plural (uncountable nouns: NNS of "flight" includes "flight").
    if word == lemma:
        return BASE_TAG[upos]
    for tag, forms in lemminflect.getAllInflections(lemma, upos=upos).items():
        if word in forms:
            return tag
    return None


def inflect(lemma: str, tag: str) -> str | None:
    """``lemma`` (possibly multi-word) in the form ``tag``; None when unreliable.

    Multi-word verbs inflect their first word (``look into`` -> ``looked into``),
    multi-word nouns their last (``alarm clock`` -> ``alarm clocks``).
    """
    if tag in _BASE_TAGS:
        return lemma
    if tag in _NO_INFLECT:
        return None
    words = lemma.split()
    head = 0 if tag.startswith("VB") else len(words) - 1
    forms = lemminflect.getInflection(words[head], tag=tag)
    if not forms:
        return None
    words[head] = forms[0]
    return " ".join(words)


@lru_cache(maxsize=1)
def common_words() -> dict[str, int]:
    """Surface form -> commonness, for every inflection of every WordNet lemma
    that SemCor has tagged (single words only); the value is the largest tag
    count among the lemmas it inflects. About 33k forms; built once (~0.3 s)."""
    score: dict[str, int] = {}
    for lemma, pos, count in wordnet().counted_lemmas():
        if " " in lemma:
            continue
        forms = {lemma}
        for group in lemminflect.getAllInflections(lemma, upos=UPOS[pos]).values():
            forms.update(group)
        for form in forms:
            if score.get(form, 0) < count:
                score[form] = count
    return score


@lru_cache(maxsize=1 << 16)
def lemmas(word: str) -> frozenset[str]:
    """Every lemma of ``word`` under any part of speech (``{word}`` when unknown)."""
    found = lemminflect.getAllLemmas(word)
    return frozenset(l for group in found.values() for l in group) or frozenset({word})


def is_offensive(word: str) -> bool:
    """True when ``word`` or one of its lemmas is a slur or obscenity."""
    net = wordnet()
    return any(net.is_offensive(w) for w in lemmas(word) | {word})
