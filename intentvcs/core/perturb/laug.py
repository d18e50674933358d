"""LAUG operators (Liu et al., 2021): EDA word edits, speech disfluencies and
speech-recognition errors, all outside protected (slot) spans, and LAUG's
slot-value replacement, the one that changes a span on purpose.

Signature as everywhere: ``op(example, rng) -> Example | None``; the slot-value
replacement also takes the registry's ``values`` (``perturb.values``) and does
not apply without them. EDA operators change ``max(1, round(alpha * words))``
words, with EDA's default alpha 0.1.

Word edits never move, delete or repeat part of a run of words and symbols with
no space between them (``7:30``, ``2.5``, ``a.m.``, ``$100``:
``Utterance.stands_alone``), and a
swap leaves the words right beside a span where they are (``from`` in ``a flight
from <fromloc>``: moved, it gives the span another role than its label says).
Such words are still drawn and then passed over, rather than left out of the
draw, so that every edit that was already safe stays exactly what it was and
recorded robustness reports and augmented sets reproduce.
"""

from __future__ import annotations

import random

from intentvcs.core.dataio import Example
from intentvcs.core.perturb import lexicon
from intentvcs.core.perturb.numbers import spoken_numbers
from intentvcs.core.perturb.sites import distractor_sites, soundalike_sites, synonym_sites
from intentvcs.core.perturb.text import Edit, Utterance, apply_edits, indefinite_article, match_case
from intentvcs.core.perturb.values import EntityValues, replace_values

EDA_ALPHA = 0.1
# A repair restarts at a determiner or preposition right before the wrong word.
_REPAIR_ANCHORS = lexicon.DETERMINERS | lexicon.PREPOSITIONS


def _count(utt: Utterance, alpha: float) -> int:
    return max(1, round(alpha * len(utt.word_indices())))


# -- EDA ---------------------------------------------------------------------
def eda_synonym(example: Example, rng: random.Random, alpha: float = EDA_ALPHA) -> Example | None:
    """Synonym replacement: ``alpha`` of the words get a WordNet synonym."""
    utt = Utterance(example)
    edits = []
    for i, options in synonym_sites(utt, rng, n=_count(utt, alpha)):
        edits.extend(utt.replace_word(i, rng.choice(options)))
    return apply_edits(example, edits)


def eda_insert(example: Example, rng: random.Random, alpha: float = EDA_ALPHA) -> Example | None:
    """Random insertion: synonyms of ``alpha`` of the words, each inserted
    between two words (or at either end) where no span is split."""
    utt = Utterance(example)
    positions = [0, *utt.gaps(), utt.body_end()]
    edits, first = [], []
    for _, options in synonym_sites(utt, rng, n=_count(utt, alpha)):
        word = rng.choice(options)
        at = rng.choice(positions)
        if at == 0:
            first.append(word)
        elif at == utt.body_end():
            edits.append(utt.append(word))
        else:
            edits.append(Edit(at, at, word + " "))
    if first:  # one prepend: two would each move the capital, and those edits overlap
        edits.extend(utt.prepend(" ".join(first)))
    return apply_edits(example, edits)


# Draws of two free words per swap before eda_swap picks among the movable pairs left instead. On the
# public sets' rows (ATIS, SNIPS, CLINC150, the assistant set; every split, seeds 0-9) a swap took at most
# 315 draws: rows with fewer keep the swaps they had. A row of many joined words and few movable ones
# took millions (600 of them: 106 s).
SWAP_DRAWS = 2000


def eda_swap(example: Example, rng: random.Random, alpha: float = EDA_ALPHA) -> Example | None:
    """Random swap: two unprotected words trade places, ``alpha`` times (not
    those beside a span or joined to another word: module docstring), each time
    two that have not traded places yet, so that no swap undoes an earlier one;
    when no such pair is left, the swaps made so far stand. A pair is drawn from
    all free words (``SWAP_DRAWS`` times at most) until both may move, then
    from the movable pairs left."""
    utt = Utterance(example)
    free = utt.free_words(alpha=False)
    movable = {i for i in free if utt.stands_alone(i) and not utt.next_to_span(i)}
    words = {i: utt.tokens[i].text for i in free}
    if len({words[i].lower() for i in movable}) < 2:
        return None
    swapped: set[frozenset[int]] = set()
    for _ in range(_count(utt, alpha)):
        # redrawn when a word may not move, for a no-op swap and for a pair already swapped
        for _draw in range(SWAP_DRAWS):
            a, b = rng.sample(free, 2)
            if (a in movable and b in movable and words[a].lower() != words[b].lower()
                    and frozenset((a, b)) not in swapped):
                break
        else:
            left = _unswapped_pairs(movable, words, swapped)
            if not left:
                break
            a, b = rng.choice(left)
        swapped.add(frozenset((a, b)))
        words[a], words[b] = words[b], words[a]
    return apply_edits(example, [utt.replace(i, w) for i, w in words.items() if w != utt.tokens[i].text])


def _unswapped_pairs(movable: set[int], words: dict[int, str], swapped: set[frozenset[int]]) -> list[tuple[int, int]]:
    """The pairs of movable words that differ and have not been swapped yet, in order. Built from
    the groups of equal words, so that a row of one word repeated lists only the pairs that differ."""
    groups: dict[str, list[int]] = {}
    for i in sorted(movable):
        groups.setdefault(words[i].lower(), []).append(i)
    members = list(groups.values())
    return sorted((min(a, b), max(a, b)) for k, these in enumerate(members) for those in members[k + 1:]
                  for a in these for b in those if frozenset((a, b)) not in swapped)


def eda_delete(example: Example, rng: random.Random, p: float = EDA_ALPHA) -> Example | None:
    """Random deletion: each unprotected word goes with probability ``p``
    (at least one goes; at least one word always stays; a word joined to
    another stays: module docstring)."""
    utt = Utterance(example)
    free = utt.free_words(alpha=False)
    whole = {i for i in free if utt.stands_alone(i)}
    if not whole or (len(whole) == len(utt.word_indices()) and len(whole) < 2):
        return None
    doomed = [i for i in free if rng.random() < p and i in whole] or [_choose(rng, free, whole)]
    if len(doomed) == len(utt.word_indices()):
        doomed.remove(rng.choice(doomed))
    return apply_edits(example, [utt.delete(i) for i in doomed])


def _choose(rng: random.Random, pool: list[int], allowed: set[int]) -> int:
    """``rng.choice(pool)``, drawn again until it is ``allowed`` (why not from ``allowed``: module docstring)."""
    while (pick := rng.choice(pool)) not in allowed:
        pass
    return pick


# -- disfluency --------------------------------------------------------------
def disfluency_pause(example: Example, rng: random.Random) -> Example | None:
    """Filled pause: ``i want um to book a table``; None for a text with no word."""
    utt = Utterance(example)
    if not utt.word_indices():
        return None
    pause = rng.choice(lexicon.FILLED_PAUSES)
    positions = [0, *utt.gaps()]
    at = rng.choice(positions)
    edits = utt.prepend(pause) if at == 0 else [Edit(at, at, pause + " ")]
    return apply_edits(example, edits)


def disfluency_repeat(example: Example, rng: random.Random) -> Example | None:
    """Repetition of one or two words: ``i i want to book``, ``i want i want to book``
    (whole words only: repeating the ``7`` of ``7:30`` or the ``a`` of ``a.m.`` is
    not a spoken repeat)."""
    utt = Utterance(example)
    free = set(utt.free_words(whole=True))
    starts = []
    for i in sorted(free):
        starts.append((i, 1))
        if i + 1 in free and utt.next_word(i) is not None:
            starts.append((i, 2))
    if not starts:
        return None
    i, length = rng.choice(starts)
    last = utt.tokens[i + length - 1]
    copy = utt.text[utt.tokens[i].start:last.end]
    return apply_edits(example, utt.insert_before(i, copy))


def disfluency_restart(example: Example, rng: random.Random) -> Example | None:
    """Restart: a false start abandoned with a dash, ``i just— i want to book``; None for a
    text with no word."""
    utt = Utterance(example)
    if not utt.word_indices():
        return None
    return apply_edits(example, utt.prepend(rng.choice(lexicon.RESTART_STARTERS), sep="\u2014 "))


def disfluency_repair(example: Example, rng: random.Random) -> Example | None:
    """Repair that keeps the meaning: a wrong word, an edit term, then the
    original words again: ``play jazz`` -> ``play rap, sorry i mean jazz``;
    ``book a flight`` -> ``book a train, sorry i mean a flight``. The wrong word
    is a co-hyponym of the original (``sites.distractor_sites``)."""
    utt = Utterance(example)
    sites = distractor_sites(utt, rng)
    if not sites:
        return None
    i, options = sites[0]
    wrong = match_case(utt.tokens[i].text, rng.choice(options[:5]))
    # Speakers restart the correction at the determiner ("a train, i mean a flight").
    j = i
    prev = utt.prev_word(i)
    if prev is not None and not prev.protected and prev.lower in _REPAIR_ANCHORS:
        j = i - 1
    lead = utt.text[utt.tokens[j].start:utt.tokens[i].start]
    if j < i and utt.tokens[j].lower in ("a", "an"):  # "an alarm" -> "a drive"
        lead = match_case(utt.tokens[j].text, indefinite_article(wrong)) + " "
    reparandum = lead + wrong
    marker = rng.choice(lexicon.REPAIR_MARKERS)
    return apply_edits(example, utt.insert_before(j, f"{reparandum}, {marker}"))


# -- speech recognition --------------------------------------------------------
def asr_soundalike(example: Example, rng: random.Random) -> Example | None:
    """Misheard words: one word (two in utterances of 8+ words) replaced by a
    sound-alike within one phoneme, homophones included (``for`` -> ``four``)."""
    utt = Utterance(example)
    n = 2 if len(utt.word_indices()) >= 8 else 1
    edits = []
    for i, options in soundalike_sites(utt, rng, max_distance=1, function_words=True, n=n):
        edits.extend(utt.replace_word(i, rng.choice(options[:3])))
    return apply_edits(example, edits)


def asr_numbers(example: Example, rng: random.Random) -> Example | None:
    """Numbers as a recogniser writes them: ``set an alarm for 7:30 am`` ->
    ``set an alarm for seven thirty a m`` (every number outside spans;
    see ``numbers.spoken_numbers``). Deterministic: ``rng`` is unused."""
    utt = Utterance(example)
    edits = [
        Edit(start, end, words) for start, end, words in spoken_numbers(example.text)
        if not utt.overlaps_span(start, end)
    ]
    return apply_edits(example, edits)


# -- slot values -----------------------------------------------------------------
def slot_value_replacement(example: Example, rng: random.Random, values: EntityValues | None = None) -> Example | None:
    """One entity's value replaced by another value of its type from the data being
    perturbed (``values.data``): ``play jazz`` -> ``play blues``. The replaced span
    covers the new value; later spans shift. None without spans or an alternative."""
    if values is None:
        return None
    return replace_values(example, rng, values.data, limit=1)
