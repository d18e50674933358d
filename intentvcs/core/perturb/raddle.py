"""RADDLE-style operators (Peng et al., 2021): typos, verbosity, simplification,
casing, punctuation and unseen entities. Signature: ``op(example, rng) ->
Example | None``; ``unseen_entities`` also takes the registry's ``values``
(``perturb.values``) and does not apply without them.

Paraphrase and out-of-domain inputs from the RADDLE checklist need a generator
or new data, so they are not operators here.
"""

from __future__ import annotations

import random
import unicodedata

from intentvcs.core.dataio import Example
from intentvcs.core.perturb import lexicon
from intentvcs.core.perturb.tagging import sentence_type
from intentvcs.core.perturb.text import Edit, Utterance, apply_edits
from intentvcs.core.perturb.values import EntityValues, replace_values


# -- keyboard typos ------------------------------------------------------------
def _qwerty_neighbours() -> dict[str, str]:
    """Keys physically next to each letter on a QWERTY keyboard (rows are
    staggered, so key k of a row touches keys k and k+1 of the row below)."""
    rows = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
    near: dict[str, set[str]] = {c: set() for row in rows for c in row}
    for r, row in enumerate(rows):
        for k, c in enumerate(row):
            near[c].update(row[max(0, k - 1):k] + row[k + 1:k + 2])
            if r + 1 < len(rows):
                below = rows[r + 1][max(0, k - 1):k + 1]
                near[c].update(below)
                for b in below:
                    near[b].add(c)
    return {c: "".join(sorted(n)) for c, n in near.items()}


QWERTY = _qwerty_neighbours()
TYPO_KINDS = ("substitute", "delete", "transpose", "double")


def keyboard_typo(word: str, rng: random.Random) -> str | None:
    """One typo in ``word``: an adjacent key, a dropped, swapped or doubled letter."""
    kinds = list(TYPO_KINDS)
    rng.shuffle(kinds)
    for kind in kinds:
        if kind == "substitute":
            spots = [k for k, c in enumerate(word) if c.lower() in QWERTY]
            if spots:
                k = rng.choice(spots)
                key = rng.choice(QWERTY[word[k].lower()])
                return word[:k] + (key.upper() if word[k].isupper() else key) + word[k + 1:]
        elif kind == "delete" and len(word) >= 3:
            k = rng.randrange(len(word))
            return word[:k] + word[k + 1:]
        elif kind == "transpose":
            spots = [k for k in range(len(word) - 1) if word[k] != word[k + 1]]
            if spots:
                k = rng.choice(spots)
                return word[:k] + word[k + 1] + word[k] + word[k + 2:]
        elif kind == "double":
            k = rng.randrange(len(word))
            return word[:k + 1] + word[k] + word[k + 1:]
    return None


def typo_keyboard(example: Example, rng: random.Random) -> Example | None:
    """One keyboard typo in one unprotected word of 3+ letters (two words in
    utterances of 8+ words): ``book a table`` -> ``bool a table``."""
    utt = Utterance(example)
    sites = [i for i in utt.free_words() if sum(c.isalpha() for c in utt.tokens[i].text) >= 3]  # i'd: 2
    if not sites:
        return None
    n = 2 if len(utt.word_indices()) >= 8 else 1
    edits = []
    for i in sorted(rng.sample(sites, min(n, len(sites)))):
        typo = keyboard_typo(utt.tokens[i].text, rng)
        if typo is not None:
            edits.append(utt.replace(i, typo))
    return apply_edits(example, edits)


# -- verbosity and simplification -------------------------------------------------
_VERBOSE = {
    "command": lexicon.VERBOSE_COMMAND,
    "question": lexicon.VERBOSE_QUESTION,
    "request": lexicon.VERBOSE_STATEMENT,
    "statement": lexicon.VERBOSE_STATEMENT,
}


def verbosity(example: Example, rng: random.Random) -> Example | None:
    """Polite padding around the request: ``book a table`` -> ``could you please
    book a table for me``; questions get ``could you please tell me ...``."""
    utt = Utterance(example)
    if not utt.word_indices():
        return None
    prefix, suffix = rng.choice(_VERBOSE[sentence_type(utt)])
    return apply_edits(example, [*utt.prepend(prefix), utt.append(suffix, sep="")])


_DROPPABLE_BY_FIRST: dict[str, list[tuple[str, ...]]] = {}
for _phrase in lexicon.DROPPABLE_PHRASES:  # stays longest first within each list
    _DROPPABLE_BY_FIRST.setdefault(_phrase[0], []).append(_phrase)


def simplify(example: Example, rng: random.Random) -> Example | None:
    """Terse rewrite: drop articles, politeness and request scaffolding
    (``lexicon.DROPPABLE_PHRASES``, outside spans, within one clause):
    ``can you please book a table for me`` -> ``book table``. The scaffolding
    (``lexicon.CLAUSE_START_PHRASES``: ``can you``, ``i need to``, ...) goes only
    where a clause starts, so a question keeps its subject and modal (``how old
    will you be``, not ``how old be``). Words joined to another stay
    (``Utterance.stands_alone``: the ``a`` of ``6 a.m.`` is no article).
    Deterministic: ``rng`` is unused."""
    utt = Utterance(example)
    free = set(utt.free_words(whole=True))
    doomed: list[int] = []
    i = 0
    while i < len(utt.tokens):
        step = 1
        for phrase in _DROPPABLE_BY_FIRST.get(utt.tokens[i].lower, ()) if i in free else ():
            if phrase in lexicon.CLAUSE_START_PHRASES and not _starts_clause(utt, i):
                continue
            span = range(i, i + len(phrase))
            if span[-1] < len(utt.tokens) and all(
                k in free and utt.tokens[k].lower == w and (k == i or utt.prev_word(k) is not None)
                for k, w in zip(span, phrase)
            ):
                doomed.extend(span)
                step = len(phrase)
                break
        i += step
    if not doomed or len(doomed) == len(utt.word_indices()):
        return None
    return apply_edits(example, [utt.delete(k) for k in doomed])


def _starts_clause(utt: Utterance, i: int) -> bool:
    """Whether token ``i`` starts a clause: it is the first token, or follows a punctuation mark
    (``hi, can you``) or a ``lexicon.CLAUSE_OPENERS`` word (``and``, ``please``, ``okay``)."""
    if i == 0:
        return True
    before = utt.tokens[i - 1]
    if not before.is_word:
        return _is_punctuation(before.text)
    return before.lower in lexicon.CLAUSE_OPENERS


# -- casing and punctuation --------------------------------------------------------
def _random_case(word: str, rng: random.Random) -> str:
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in word)


_CASINGS = {
    "lower": lambda w, rng: w.lower(),
    "upper": lambda w, rng: w.upper(),
    "title": lambda w, rng: w[:1].upper() + w[1:].lower(),
    "random": _random_case,
}


def casing(example: Example, rng: random.Random) -> Example | None:
    """Re-case every unprotected word: all lower, ALL UPPER, Title Case or rAndOM
    (a random mode that changes something)."""
    utt = Utterance(example)
    words = utt.free_words(alpha=False)
    modes = list(_CASINGS)
    rng.shuffle(modes)
    for mode in modes:
        edits = []
        for i in words:
            cased = _CASINGS[mode](utt.tokens[i].text, rng)
            if cased != utt.tokens[i].text:
                edits.append(utt.replace(i, cased))
        if edits:
            return apply_edits(example, edits)
    return None


_TERMINAL = ".?!"


def _of_an_amount(token: str) -> bool:
    """A currency sign or a percent sign: part of the amount it writes (``$5``, ``40%``), which dropping it
    would change, not punctuation."""
    return token in ("%", "\u2030") or unicodedata.category(token[0]) == "Sc"


def _strip_punctuation(utt: Utterance, i: int) -> Edit | None:
    """Drop apostrophes from a word; drop a punctuation token, with the space
    after it when it stands alone (``a - b`` -> ``a b``, ``a, b`` -> ``a b``),
    a space in its place between two words (``milk,eggs`` -> ``milk eggs``: they
    would become one word, or one entity two). None for a mark between digits
    (``7:30``, ``3.5``): the number would change."""
    token, text = utt.tokens[i], utt.text
    if token.is_word:
        return utt.replace(i, token.text.replace("'", "").replace("\u2019", ""))
    between = 0 < token.start and token.end < len(text)
    if between and text[token.start - 1].isdigit() and text[token.end].isdigit():
        return None
    if between and text[token.start - 1].isalnum() and text[token.end].isalnum():
        return utt.replace(i, " ")
    alone = token.start == 0 or text[token.start - 1].isspace()
    if alone and token.end < len(text) and text[token.end].isspace():
        return utt.delete(i)
    return utt.replace(i, "")


def _is_punctuation(token: str) -> bool:
    """A punctuation mark (Unicode category P): what ``remove`` drops. Symbols (category S: ``+``, ``=``,
    ``<``, ``^``, ``|``, ``~``, emoji) write something, as the ``+`` of ``4 + 4`` or ``c++`` does, and stay."""
    return unicodedata.category(token[0]).startswith("P")


def punctuation(example: Example, rng: random.Random) -> Example | None:
    """Punctuation change, a random applicable mode: ``remove`` all punctuation
    (Unicode category P, not symbols: ``4 + 4`` keeps its ``+``) and apostrophes
    outside spans (``what's the time?`` -> ``whats the time``),
    ``add`` a missing end mark (``?`` for questions), or ``alter`` the end mark
    (``?`` -> ``.``, ``??``, ``?!``)."""
    utt = Utterance(example)
    modes = ["remove", "add", "alter"]
    rng.shuffle(modes)
    last = utt.tokens[-1] if utt.tokens else None
    has_end = last is not None and last.text in _TERMINAL and not last.protected
    for mode in modes:
        if mode == "remove":
            stripped = (_strip_punctuation(utt, i) for i, t in enumerate(utt.tokens)
                        if not t.protected and not _of_an_amount(t.text)
                        and (_is_punctuation(t.text) if not t.is_word else "'" in t.text or "\u2019" in t.text))
            edits = [e for e in stripped if e is not None]
        elif mode == "add" and last is not None and last.text not in _TERMINAL:
            question = sentence_type(utt) in ("question", "request")
            edits = [Edit(len(example.text.rstrip()), len(example.text.rstrip()),
                          "?" if question else rng.choice(".!"))]
        elif mode == "alter" and has_end:
            choices = [m for m in (".", "?", "!", last.text * 2, last.text + "!", "...") if m != last.text]
            edits = [utt.replace(len(utt.tokens) - 1, rng.choice(choices))]
        else:
            continue
        out = apply_edits(example, edits)
        if out is not None:
            return out
    return None


# -- unseen entities ---------------------------------------------------------------
def unseen_entities(example: Example, rng: random.Random, values: EntityValues | None = None) -> Example | None:
    """Every entity that can be replaced gets a value of its type that no training
    row has (``values.unseen``; see ``perturb.values`` for where it comes from when
    no training rows were given). None without spans or such a value."""
    if values is None:
        return None
    return replace_values(example, rng, values.unseen, limit=None)
