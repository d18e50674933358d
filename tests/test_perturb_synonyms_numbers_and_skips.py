"""Defects a reviewer reproduced in the perturbation operators and the robustness
report (scripts in /tmp/review_robust), one test each: phrasal verbs and
ungrammatical stop-word swaps, wrong WordNet senses, EDA swaps next to entity
spans, numbers and abbreviations torn apart, ``simplify`` eating ``a.m.`` and
the thank_you intent, huge numbers crashing ``asr_numbers``, and named operators
silently left out of a report."""

from __future__ import annotations

import re

import pytest

from intentvcs.cli.main import main
from intentvcs.core.dataio import Example, Span, write_jsonl
from intentvcs.core.perturb import VALUE_OPERATORS, perturb
from intentvcs.core.perturb.thesaurus import synonyms
from intentvcs.core.robustness import render_markdown, run_suite
from tests.helpers.bundle import DEFAULT_LABELS, make_tiny_bundle
from tests.test_robustness import FakeModel, predictor

SEEDS = range(20)


def ex(text: str, *spans: Span) -> Example:
    return Example(text, ("intent",), None, tuple(spans), {})


def outputs(text: str, op_name: str, *spans: Span) -> set[str]:
    """Every text ``op_name`` makes of ``text`` over ``SEEDS`` (None: did not apply)."""
    return {o.text if (o := perturb(ex(text, *spans), op_name, seed)) else None for seed in SEEDS}


# -- 1. syn_stopword ------------------------------------------------------------------------
def test_syn_stopword_keeps_phrasal_particles_and_grammar():
    assert outputs("turn on the lights", "syn_stopword") == {None}
    assert not any("around" in o for o in outputs("look at my calendar", "syn_stopword") - {None})
    assert not any("within" in o for o in outputs("log in to my account", "syn_stopword") - {None})
    # a particle after the object ("turn the lights on") has no object of its own: no preposition either
    assert not any(o.endswith("upon") for o in outputs("turn the lights on", "syn_stopword") - {None})
    # "a few" takes a plural ("play a few music" is no English); "a" is no "one" ("one few songs")
    assert outputs("play some music", "syn_stopword") == {None}
    assert outputs("i want a few songs", "syn_stopword") == {None}
    assert outputs("play some songs", "syn_stopword") == {"play a few songs"}
    # a preposition that heads its own phrase still gets its near-synonym
    assert "what's the weather within paris" in outputs("what's the weather in paris", "syn_stopword")


# -- 2. WordNet senses ----------------------------------------------------------------------
@pytest.mark.parametrize("word, pos, wrong", [
    ("alarm", "n", {"consternation", "dismay"}),
    ("turn", "v", {"change state"}),
    ("text", "n", {"textual matter"}),
    ("table", "n", {"tabular array"}),
    ("light", "n", {"visible radiation", "visible light"}),
    ("lights", "n", {"visible radiations"}),
    ("call", "v", {"name"}),
    ("remind", "v", {"prompt"}),  # sense 2
    ("get", "v", {"become", "go"}),  # sense 2
    # the synonym's own first sense is another one: a reader takes it in that one
    ("car", "n", {"machine"}),
    ("taxi", "n", {"hack"}),
    ("send", "v", {"direct"}),
])
def test_synonyms_are_single_words_of_the_assistant_sense(word, pos, wrong):
    found = synonyms(word, pos)
    assert not wrong & set(found)
    assert all(" " not in s for s in found)


def test_the_assistant_sense_of_book_and_call_is_the_listed_one():
    assert synonyms("booked", "v") == ("reserved", "held")  # sense 2: reserve a table, not hire a band
    assert synonyms("call", "v") == ("telephone", "phone", "ring")  # sense 3: call mom, not name her


def test_syn_any_no_longer_turns_an_alarm_into_consternation():
    banned = re.compile(r"consternation|dismay|change state|textual matter|tabular array|visible radiation")
    for text in ("Could you cancel every alarm for the weekend", "turn on the lamp in the living room",
                 "text the babysitter that we'll be home by 11", "I'd like to book a table for lunch tomorrow"):
        for op_name in ("syn_any", "syn_verb", "eda_synonym", "eda_insert"):
            assert not any(banned.search(o) for o in outputs(text, op_name) - {None}), (text, op_name)


# -- 3. eda_swap next to a span -------------------------------------------------------------
def test_eda_swap_never_moves_a_word_next_to_a_span():
    text = "i need a flight from ontario to memphis"
    spans = (Span(21, 28, "fromloc.city_name"), Span(32, 39, "toloc.city_name"))
    for seed in range(40):
        out = perturb(ex(text, *spans), "eda_swap", seed)
        assert out is not None
        before = [out.text[:s.start] for s in out.spans]  # each cue word stays right before its span
        assert before[0].endswith(" from ") and before[1].endswith(" to "), out.text


# -- 4. numbers and abbreviations stay whole ------------------------------------------------
@pytest.mark.parametrize("op_name", ["eda_swap", "eda_delete", "disfluency_repeat"])
def test_word_edits_keep_numbers_and_abbreviations_whole(op_name):
    for text, kept in [("convert 2.5 miles to km", ["2.5"]), ("wake me at 7:30 a.m. please", ["7:30", "a.m."]),
                       ("who was the 1,000,000th visitor today", ["1,000,000th"]),
                       ("set an alarm for 6 a.m. tomorrow morning", ["a.m."]),
                       ("transfer $100 from my checking to saving account", ["$100"])]:
        for out in outputs(text, op_name) - {None}:
            assert all(re.search(rf"(^|\s){re.escape(k)}(\s|$)", out) for k in kept), (op_name, text, out)
            assert out.count(".") == text.count("."), (op_name, text, out)  # nothing repeated from a.m.


# -- 5. simplify ----------------------------------------------------------------------------
def test_simplify_keeps_am_and_thanks():
    assert outputs("set an alarm for 6 a.m.", "simplify") == {"set alarm for 6 a.m."}
    assert outputs("thanks for helping", "simplify") == {None}
    assert outputs("thank you so much", "simplify") == {None}
    # the request scaffolding around a thank-you still goes
    assert outputs("could you play the news please, thanks", "simplify") == {"play news, thanks"}


# -- 6. asr_numbers on huge numbers ---------------------------------------------------------
SAID = dict(zip("0123456789", "zero one two three four five six seven eight nine".split()))


def said(digits: str) -> str:
    return " ".join(SAID[c] for c in digits if c.isdigit())


@pytest.mark.parametrize("text, spoken", [
    ("pin " + "7" * 5000, "pin " + said("7" * 5000)),
    ("code 1" + "0" * 4400 + "th", "code " + said("1" + "0" * 4399) + " zeroth"),
    ("it costs $" + "9" * 4500, "it costs " + said("9" * 4500) + " dollars"),
    ("rate " + "1" * 4400 + "%", "rate " + said("1" * 4400) + " percent"),
    ("x " + "2" * 4400 + ".5", "x " + said("2" * 4400) + " point five"),
    ("we are " + ",".join(["100"] * 1500) + " strong", "we are " + said("100" * 1500) + " strong"),
])
def test_asr_numbers_reads_a_huge_number_digit_by_digit(text, spoken):
    assert perturb(ex(text), "asr_numbers", 0).text == spoken


# -- 7. the report and inapplicable operators -----------------------------------------------
PLAIN = [Example("play some jazz", ("music",)), Example("will it rain", ("weather",)),
         Example("play the new album", ("music",))]
MODEL = predictor(FakeModel().infer)  # test_robustness's: "music" when "play" is in the text


@pytest.mark.parametrize("named", [["unseen_entities"], ["slot_value_replacement", "casing"], ["raddle"]])
def test_a_named_operator_the_data_cannot_feed_is_refused(named):
    with pytest.raises(ValueError, match=r"(unseen_entities|slot_value_replacement) needs entity values"):
        run_suite(PLAIN, MODEL, named, draws=1, progress=False)


def test_the_default_set_says_which_operators_it_skipped_and_why():
    report = run_suite(PLAIN, MODEL, None, draws=1, progress=False)
    assert set(report["skipped"]) == VALUE_OPERATORS
    assert all("entity values" in why for why in report["skipped"].values())
    assert not VALUE_OPERATORS & set(report["operators"])
    markdown = render_markdown(report)
    assert "Skipped: slot_value_replacement, unseen_entities" in markdown
    # data with spans skips nothing, and its report keeps the shape it had
    spans = [Example("play jazz", ("music",), spans=(Span(5, 9, "genre"),)), *PLAIN]
    assert "skipped" not in run_suite(spans, MODEL, None, draws=1, progress=False)


def test_cli_refuses_a_named_operator_without_entity_values(tmp_path, capsys):
    bundle = make_tiny_bundle(tmp_path)
    data = tmp_path / "test.jsonl"
    write_jsonl(data, [Example("play the new album", (DEFAULT_LABELS[0],)),
                       Example("will it rain tomorrow", (DEFAULT_LABELS[2],))])
    out = tmp_path / "report.json"
    args = ["robustness", "--bundle", str(bundle), "--data", str(data), "--out", str(out), "--draws", "1"]
    assert main([*args, "--operators", "unseen_entities"]) == 2
    assert "unseen_entities needs entity values" in capsys.readouterr().err
    assert not out.exists()
    assert main(args) == 0  # the default set runs, and says what it left out
    assert "Skipped: slot_value_replacement, unseen_entities" in capsys.readouterr().out
