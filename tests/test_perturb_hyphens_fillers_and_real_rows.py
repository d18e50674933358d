"""Defects a second review reproduced in the perturbation operators, one test each:
fillers put inside a hyphenated word (``e-just mail``) or beside the same word
(``would like like``), word replacements that rewrite one part of a hyphenated
word (``carry-upon``, ``twenty-ace``), EDA swaps that undo each other, EDA
insertions that fail at the start of a cased text, and fillers added to a text
with no word. Plus property checks on rows of the public data sets (SNIPS, ATIS):
every operator keeps every gold span on its value, and a Random set does not
depend on the order of the rows."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from intentvcs.core.dataio import Example, Span
from intentvcs.core.perturb import OPERATORS, VALUE_OPERATORS, EntityValues, perturb, random_set, warm_up

SEEDS = range(20)


def ex(text: str, *spans: Span) -> Example:
    return Example(text, ("intent",), None, tuple(spans), {})


def outputs(text: str, op_name: str, seeds=SEEDS) -> set[str | None]:
    """Every text ``op_name`` makes of ``text`` over ``seeds`` (None: did not apply)."""
    return {o.text if (o := perturb(ex(text), op_name, seed)) else None for seed in seeds}


@pytest.fixture(scope="module", autouse=True)
def _warm():
    warm_up()


# -- 1. a filler at the verb goes at a word boundary, not inside a hyphenated word ---------------------
HYPHENATED_VERBS = [
    "please e-mail john",  # verb "mail" of e-mail
    "are my tires under-inflated",  # "inflated" of under-inflated
    "what carry-on restrictions does southwest impose",  # "carry" of carry-on
    "No , but I 'd like something with 4-star quality .",  # "star" of 4-star (MultiWOZ)
]


def _is_subsequence(small: list[str], big: list[str]) -> bool:
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


@pytest.mark.parametrize("op_name", ["filler_before_verb", "filler_after_verb"])
@pytest.mark.parametrize("text", HYPHENATED_VERBS)
def test_a_filler_at_the_verb_never_splits_a_hyphenated_word(op_name, text):
    """Before the fix: ``please e-just mail john``, ``what carry just-on restrictions``,
    ``something with 4-basically star quality``."""
    made = outputs(text, op_name) - {None}
    assert made, (op_name, text)
    for out in made:
        # The filler only adds whole words: every space-separated chunk of the text is still there, in order.
        assert _is_subsequence(text.split(), out.split()), (op_name, text, out)


# -- 2. a filler at the verb does not stutter with the word on its other side --------------------------
@pytest.mark.parametrize("op_name, text", [
    ("filler_after_verb", "I would like a hotel in the north ."),  # verb: "would"; was "would like like a hotel"
    ("filler_after_verb", "i would like it to have scandinavian food"),
    ("filler_before_verb", "No , thanks . I just need the address and phone number ."),  # was "I just just need"
    ("filler_before_verb", "can you really book it"),
])
def test_a_filler_at_the_verb_does_not_repeat_its_neighbour(op_name, text):
    doubled = re.compile(r"\b(\w+) \1\b", re.IGNORECASE)
    made = outputs(text, op_name) - {None}
    assert made
    for out in made:
        assert not doubled.search(out), (op_name, text, out)


# -- 3. word replacements leave a hyphenated word whole ------------------------------------------------
COMPOUNDS = [
    "what carry-on restrictions does southwest impose",  # syn_stopword: "carry-upon"
    "what day is it gonna be in twenty-one days",  # syn_any: "twenty-ace"; repair: "twenty-three, sorry one"
    "can i initiate a one-time transfer from my savings account",  # syn_verb: "one-clock"
    "i need a 4-star hotel in the north",  # speako: "4-stop"; repair (MultiWOZ): "2-carry, I mean star"
    "are my tires under-inflated",  # speako: "under-deflated"
    "please tell me my in-person transactions",  # eda_synonym: "in-mortal"
    "play my post-rock playlist",  # syn_verb: "post-sway"
    "please book me a well-rated hotel",  # syn_verb: "well-graded"; "book" can still be replaced
]
REPLACERS = ["syn_verb", "syn_adj", "syn_adv", "syn_any", "syn_stopword", "speako", "eda_synonym", "asr_soundalike",
             "disfluency_repair"]


@pytest.mark.parametrize("op_name", REPLACERS)
def test_word_replacements_keep_hyphenated_words_whole(op_name):
    applied = 0
    for text in COMPOUNDS:
        kept = [w for w in text.split() if "-" in w]
        for out in outputs(text, op_name, range(10)) - {None}:
            applied += 1
            chunks = [c.strip(",") for c in out.split()]
            assert all(k in chunks for k in kept), (op_name, text, out)
    assert applied or op_name in ("syn_adj", "syn_adv"), op_name  # the others still apply to a whole word


# -- 4. EDA swaps do not undo each other ----------------------------------------------------------------
# 18 distinct words: EDA's alpha 0.1 asks for two swaps.
DISTINCT = "Please find me one cheap hotel near the old market with free parking and a quiet garden view"


def test_eda_swap_makes_the_swaps_it_is_asked_for():
    """Before the fix seeds 277 and 420 drew the same pair twice: the second swap undid
    the first and the operator gave up (None) on a row full of movable words."""
    for seed in range(600):
        out = perturb(ex(DISTINCT), "eda_swap", seed)
        assert out is not None, seed
        moved = sum(a != b for a, b in zip(DISTINCT.split(), out.text.split()))
        assert moved >= 3, (seed, out.text)  # two different swaps of distinct words move 3 or 4 words


def test_eda_swap_with_a_high_rate_still_ends():
    """Few movable words and many swaps: once every pair has been used, pairs repeat."""
    import random

    from intentvcs.core.perturb.laug import eda_swap
    for seed in range(50):
        out = eda_swap(ex("play jazz now please"), random.Random(seed), alpha=3.0)
        assert out is None or sorted(out.text.split()) == sorted("play jazz now please".split())


# -- 5. EDA insertion at the start of a cased text, twice -----------------------------------------------
def test_eda_insert_puts_two_words_at_the_start_of_a_cased_text():
    """Seeds 257 and 567 put both insertions at the start; each moved the capital with an
    edit of the first letter, the two edits overlapped and the operator gave up (None)."""
    for seed in (257, 567):
        out = perturb(ex(DISTINCT), "eda_insert", seed)
        assert out is not None, seed
        assert out.text.endswith(" please find me one cheap hotel near the old market with free parking and a "
                                 "quiet garden view"), out.text
        assert out.text[0].isupper() and len(out.text.split()) == len(DISTINCT.split()) + 2, out.text
    for seed in range(200):
        assert perturb(ex(DISTINCT), "eda_insert", seed) is not None, seed


# -- 6. a text with no word gets no filler ----------------------------------------------------------------
@pytest.mark.parametrize("text", ["", " ", "\t\n", "?!", "..."])
def test_a_text_without_a_word_gets_no_filler_pause_or_restart(text):
    """Before the fix: ``""`` -> ``"okay so "``, ``" "`` -> ``"um  "``, ``"?!"`` -> ``"hey ?!"``
    (filler_end and verbosity already gave None there)."""
    for name in ("filler_begin", "filler_end", "disfluency_pause", "disfluency_restart", "verbosity"):
        assert outputs(text, name) == {None}, (name, text, outputs(text, name))
    if not text.strip():
        for name in OPERATORS:
            assert outputs(text, name, range(3)) == {None}, (name, text)


# -- 7. properties on the public data sets ----------------------------------------------------------------
def _data_rows() -> list[Example]:
    from intentvcs.training.loaders import data_root, load

    root = Path(data_root())
    if not (root / "snips" / "test").is_dir() or not (root / "atis" / "test").is_dir():
        pytest.skip(f"public data sets not found under {root}")
    return load("snips", root / "snips", "test") + load("atis", root / "atis", "test")


def _touching(text: str, span: Span) -> tuple[bool, bool]:
    return (span.start > 0 and text[span.start - 1].isalnum(), span.end < len(text) and text[span.end].isalnum())


def test_every_operator_keeps_the_gold_spans_of_real_rows():
    """SNIPS and ATIS test rows (1,593, most with slots), every operator, two seeds: each
    span indexes the perturbed text, keeps its label and order, is attached to its
    neighbours as before and covers the same value, or, for a value operator, a value
    of its type with the text around the spans unchanged."""
    rows = _data_rows()
    values = EntityValues.build(rows)
    pools = {label: {v.lower() for v in found} for label, found in values.data.by_type.items()}
    applied = dict.fromkeys(OPERATORS, 0)
    for name in OPERATORS:
        for seed in (0, 1):
            for e in rows:
                out = perturb(e, name, seed, values)
                if out is None:
                    continue
                applied[name] += 1
                assert out.text != e.text and out.labels == e.labels
                assert [s.label for s in out.spans] == [s.label for s in e.spans], (name, e.text, out.text)
                for old, new in zip(e.spans, out.spans):
                    assert 0 <= new.start < new.end <= len(out.text), (name, e.text, out.text, new)
                    assert _touching(out.text, new) == _touching(e.text, old), (name, e.text, out.text, new)
                    before, after = e.text[old.start:old.end], out.text[new.start:new.end]
                    if name in VALUE_OPERATORS and after != before:
                        assert after.lower() in pools[old.label], (name, e.text, out.text)
                    else:
                        assert after == before, (name, e.text, out.text)
                if name in VALUE_OPERATORS:
                    outside = [0, *(x for s in e.spans for x in (s.start, s.end)), len(e.text)]
                    moved = [0, *(x for s in out.spans for x in (s.start, s.end)), len(out.text)]
                    assert ([e.text[a:b] for a, b in zip(outside[::2], outside[1::2])]
                            == [out.text[a:b] for a, b in zip(moved[::2], moved[1::2])]), (name, e.text, out.text)
    # syn_adj finds no unprotected adjective with a synonym in these rows at these seeds.
    assert {n for n, c in applied.items() if not c} <= {"syn_adj"}, applied


def test_a_random_set_of_real_rows_does_not_depend_on_their_order():
    rows = _data_rows()[:400]
    values = EntityValues.build(rows)
    forward = {(e.text, e.spans): (o.text, o.spans, o.meta["perturbation"])
               for e, o in zip(rows, random_set(rows, 3, values=values))}
    backward = list(reversed(rows))
    again = {(e.text, e.spans): (o.text, o.spans, o.meta["perturbation"])
             for e, o in zip(backward, random_set(backward, 3, values=EntityValues.build(backward)))}
    assert forward == again


def test_removing_punctuation_keeps_the_symbols_of_amounts():
    # "$5" -> "5" and "40%" -> "40" change what is asked, not how it is punctuated.
    from intentvcs.core.perturb.raddle import punctuation

    removed = [out.text for seed in range(40)
               if (out := punctuation(Example("it costs $5 or 40% more, right?", ["x"]), random.Random(seed)))
               is not None and "," not in out.text and "?" not in out.text]
    assert removed and all("$5" in text and "40%" in text for text in removed)


def test_a_keyboard_typo_needs_a_word_of_three_letters_not_three_characters():
    from intentvcs.core.perturb.raddle import typo_keyboard

    for seed in range(40):
        out = typo_keyboard(Example("i'd go", ["x"]), random.Random(seed))
        assert out is None
