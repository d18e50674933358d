"""Perturbation review: each test failed on the code before its fix.

Deleting a word next to a comma left the comma orphaned (``simplify`` made ``Please, call mom`` into
``, call mom``, ``yes, please, book it`` into ``yes,, book it`` and ``tomorrow, would you?`` into
``tomorrow,?``; ``eda_delete`` made ``Hey, call Anna's cell`` into ``, call Anna's cell``).
``asr_numbers`` tore apart a clock time written against its am/pm (``7:30am`` -> ``seven:thirty a m``,
``11.30pm`` -> ``eleven.thirty p m``).
``asr_numbers`` spelt out one part of a number glued to another (``1.5k`` -> ``one.5k``, ``v2.0`` ->
``v2.zero``, ``2,5`` -> ``two,five``) and left the euro and pound signs on the words (``€80`` -> ``€eighty``).
"""

from __future__ import annotations

import pytest

from intentvcs.core.dataio import Example, Span
from intentvcs.core.perturb import perturb
from intentvcs.core.perturb.text import Utterance, apply_edits

SEEDS = range(10)


def ex(text: str, *spans: Span) -> Example:
    return Example(text, ("intent",), None, tuple(spans), {})


def outputs(text: str, op_name: str, *spans: Span) -> set[str | None]:
    return {o.text if (o := perturb(ex(text, *spans), op_name, seed)) else None for seed in SEEDS}


# -- 1. a deleted word takes its orphaned comma with it -----------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("Please, call mom", "call mom"),
    ("yes, please, book it", "yes, book it"),
    ("get me up at 7 tomorrow, would you?", "get me up at 7 tomorrow?"),
    ("Could you please, play jazz", "play jazz"),
])
def test_simplify_leaves_no_orphaned_comma(text, expected):
    assert outputs(text, "simplify") == {expected}


def test_deleting_a_word_before_or_between_commas_takes_one_comma():
    utt = Utterance(ex("Hey, call Anna's cell"))
    assert apply_edits(utt.example, [utt.delete(0)]).text == "call Anna's cell"
    utt = Utterance(ex("okay, just, play jazz"))
    just = [t.text for t in utt.tokens].index("just")
    assert apply_edits(utt.example, [utt.delete(just)]).text == "okay, play jazz"
    # a comma that belongs to the words before stays ("book it, please" keeps none: nothing follows)
    utt = Utterance(ex("call mom, then text dad"))
    mom = [t.text for t in utt.tokens].index("mom")
    assert apply_edits(utt.example, [utt.delete(mom)]).text == "call, then text dad"


def test_eda_delete_never_starts_a_text_with_a_comma_and_keeps_spans():
    anna = Span(10, 16, "contact")
    e = ex("Hey, call Anna's cell", anna)
    seen = set()
    for seed in range(40):
        out = perturb(e, "eda_delete", seed)
        if out is None:
            continue
        seen.add(out.text)
        assert out.text[0].isalnum(), out.text
        assert ",," not in out.text
        assert out.text[out.spans[0].start:out.spans[0].end] == "Anna's"
    assert "call Anna's cell" in seen


# -- 2. asr_numbers: a clock time against its am/pm is one time ----------------------------------------
@pytest.mark.parametrize("text, spoken", [
    ("set an alarm for 7:30am", "set an alarm for seven thirty a m"),
    ("wake me at 10:00pm.", "wake me at ten p m."),
    ("meet at 11.30pm", "meet at eleven thirty p m"),
    ("meet at 7.30 p.m. sharp", "meet at seven thirty p m sharp"),
    # unchanged: a plain decimal and a time without am/pm
    ("rate it 3.5 of 5", "rate it three point five of five"),
    ("at 7:05 or 7:00", "at seven oh five or seven o'clock"),
])
def test_asr_numbers_reads_a_time_glued_to_am_pm_whole(text, spoken):
    assert outputs(text, "asr_numbers") == {spoken}


# -- 3. asr_numbers: part of a number is no number; euros and pounds are said ---------------------------
@pytest.mark.parametrize("text, spoken", [
    ("run 1.5k today", None),
    ("update to v2.0", None),
    ("about 2,5 liters", None),
    ("run 1.5k in 20 minutes", "run 1.5k in twenty minutes"),
    ("send €80 to Sophie", "send eighty euros to Sophie"),
    ("send £1 to Emma", "send one pound to Emma"),
    ("it was £5.50", "it was five pounds fifty pence"),
    ("it was €1.01", "it was one euro one cent"),
    ("it costs €5.5", None),
    # unchanged: dollars, thousands separators and a decimal at a period
    ("transfer $1,000.50 now", "transfer one thousand dollars fifty cents now"),
    ("we are 1,500 strong", "we are one thousand five hundred strong"),
    ("rate it 3.5.", "rate it three point five."),
])
def test_asr_numbers_leaves_glued_parts_whole_and_says_other_currencies(text, spoken):
    assert outputs(text, "asr_numbers") == {spoken}
