"""NATURE operators (Alfonso-Hermelo et al., 2021; docs/RESEARCH.md section 3): one small, realistic change per utterance.

Every operator has the signature ``op(example, rng) -> Example | None``: it
returns a perturbed copy (labels, id, meta kept; spans re-mapped) or ``None``
when the utterance offers no place to apply it. Protected spans are never
edited.
"""

from __future__ import annotations

import random

from intentvcs.core.dataio import Example
from intentvcs.core.perturb import lexicon
from intentvcs.core.perturb.sites import Site, soundalike_sites, stopword_sites, synonym_sites
from intentvcs.core.perturb.tagging import find_verb
from intentvcs.core.perturb.text import Utterance, apply_edits


def _pick_phrase(rng: random.Random, options: tuple[str, ...], *avoid: str | None) -> str:
    """A random phrase, avoiding a stutter with the words next to it ("please please"):
    ``avoid`` are those words (None where there is none)."""
    fresh = [p for p in options if p.split()[0] not in avoid and p.split()[-1] not in avoid]
    return rng.choice(fresh or list(options))


def filler_begin(example: Example, rng: random.Random) -> Example | None:
    """``book a table`` -> ``okay so book a table``; None for a text with no word
    (``""`` is no place for ``"okay so "``, nor ``?!`` for ``hey ?!``)."""
    utt = Utterance(example)
    if not utt.word_indices():
        return None
    first = utt.tokens[0].lower
    return apply_edits(example, utt.prepend(_pick_phrase(rng, lexicon.FILLERS_BEGIN, first)))


def filler_end(example: Example, rng: random.Random) -> Example | None:
    """``book a table?`` -> ``book a table please?`` (before closing punctuation)."""
    utt = Utterance(example)
    words = utt.word_indices()
    if not words:
        return None
    last = utt.tokens[words[-1]].lower
    return apply_edits(example, [utt.append(_pick_phrase(rng, lexicon.FILLERS_END, last))])


def _filler_at_verb(example: Example, rng: random.Random, after: bool) -> Example | None:
    """The filler goes right before or after the verb's word: the whole run of words and
    symbols it is part of (``Utterance.run``: ``please actually e-mail john``, not ``e-actually
    mail``). It differs from the verb, and from the word on its other side too (``would
    like like``, ``just just book``): a filler drawn the same as that word is drawn again,
    so that every other draw stays what it was."""
    utt = Utterance(example)
    verb = find_verb(utt)
    if verb is None:
        return None
    first, last = utt.run(verb)
    phrase = _pick_phrase(rng, lexicon.FILLERS_VERB, utt.tokens[verb].lower)
    beside = utt.next_word(last) if after else utt.prev_word(first)
    if beside is not None and phrase.split()[-1 if after else 0] == beside.lower:
        phrase = _pick_phrase(rng, lexicon.FILLERS_VERB, utt.tokens[verb].lower, beside.lower)
    edits = [utt.insert_after(last, phrase)] if after else utt.insert_before(first, phrase)
    return apply_edits(example, edits)


def filler_before_verb(example: Example, rng: random.Random) -> Example | None:
    """``i want to book`` -> ``i actually want to book`` (verb: ``tagging.find_verb``; where: ``_filler_at_verb``)."""
    return _filler_at_verb(example, rng, after=False)


def filler_after_verb(example: Example, rng: random.Random) -> Example | None:
    """``i want to book`` -> ``i want like to book``."""
    return _filler_at_verb(example, rng, after=True)


def _replace_one(utt: Utterance, rng: random.Random, sites: list[Site], closest: bool = False) -> Example | None:
    """Replace the (single) site by one of its replacements (the first when ``closest``)."""
    if not sites:
        return None
    i, options = sites[0]
    word = options[0] if closest else rng.choice(options)
    return apply_edits(utt.example, utt.replace_word(i, word))


def _synonym(example: Example, rng: random.Random, pos: str | None) -> Example | None:
    utt = Utterance(example)
    return _replace_one(utt, rng, synonym_sites(utt, rng, pos))


def syn_verb(example: Example, rng: random.Random) -> Example | None:
    """``book a table`` -> ``reserve a table``: a WordNet synonym of one verb
    (part of speech from ``tagging.guess_pos``)."""
    return _synonym(example, rng, "v")


def syn_adj(example: Example, rng: random.Random) -> Example | None:
    """``a cheap hotel`` -> ``an inexpensive hotel``: one adjective."""
    return _synonym(example, rng, "a")


def syn_adv(example: Example, rng: random.Random) -> Example | None:
    """``drive quickly`` -> ``drive rapidly``: one adverb."""
    return _synonym(example, rng, "r")


def syn_any(example: Example, rng: random.Random) -> Example | None:
    """A WordNet synonym of one content word of any part of speech."""
    return _synonym(example, rng, None)


def syn_stopword(example: Example, rng: random.Random) -> Example | None:
    """``what is the weather`` -> ``which is the weather``: a listed near-synonym
    of one function word (``lexicon.STOPWORD_SYNONYMS``)."""
    utt = Utterance(example)
    return _replace_one(utt, rng, stopword_sites(utt, rng))


def speako(example: Example, rng: random.Random) -> Example | None:
    """``what's the weather`` -> ``what's the whether``: one word replaced by the
    closest-sounding common word (phonetic.PhoneticIndex.neighbours: itself,
    homographs and its own inflections excluded)."""
    utt = Utterance(example)
    return _replace_one(utt, rng, soundalike_sites(utt, rng), closest=True)
