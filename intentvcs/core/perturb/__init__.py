"""Seeded perturbation operators for robustness evaluation and augmentation.

Three families, after the papers they reproduce (docs/RESEARCH.md section 3):
``nature`` (NATURE: fillers, synonyms, speako), ``laug`` (LAUG: EDA edits,
disfluencies, ASR errors, slot-value replacement) and ``raddle`` (RADDLE:
typos, verbosity, simplification, casing, punctuation, unseen entities).
Every operator is ``op(example, rng) -> Example | None`` and never edits a
protected span (``Example.spans``); spans are re-mapped to their new offsets.
The exceptions are the two value operators (``VALUE_OPERATORS``), which
replace entity values on purpose with values of the same type from an
``EntityValues`` the caller gives (``op(example, rng, values)``).

Module map: ``text`` (tokens, span-safe edits), ``lexicon`` (word lists),
``wordnet`` / ``morph`` / ``thesaurus`` (synonyms), ``phonetic`` (sound-alikes),
``numbers`` (spoken numbers), ``tagging`` (POS heuristic), ``sites`` (where
word replacements apply), ``values`` (entity value pools), ``nature`` /
``laug`` / ``raddle`` (operators), ``registry`` (names, ``perturb``,
``random_set``, ``augment``).

Resources (WordNet, CMU dictionary, LemmInflect) load on first use and stay
cached; call :func:`warm_up` to pay that cost up front. Nothing is fetched
from the network.
"""

from intentvcs.core.perturb.registry import (
    FAMILIES,
    FAMILY_OF,
    OPERATORS,
    VALUE_OPERATORS,
    augment,
    mix_values,
    perturb,
    perturbed_copies,
    random_set,
    unusable,
    usable,
)
from intentvcs.core.perturb.values import EntityValues


def warm_up() -> None:
    """Load every lexical resource now (about 2-3 s) instead of on first use."""
    from intentvcs.core.perturb.morph import common_words, readings
    from intentvcs.core.perturb.phonetic import phonetic_index
    from intentvcs.core.perturb.wordnet import wordnet

    wordnet().is_offensive("")  # WordNet files and the blocked-word set
    readings("booked")  # LemmInflect's lemma and inflection tables
    common_words()
    phonetic_index()


__all__ = ["FAMILIES", "FAMILY_OF", "OPERATORS", "VALUE_OPERATORS", "EntityValues", "augment", "mix_values",
           "perturb", "perturbed_copies", "random_set", "unusable", "usable", "warm_up"]
