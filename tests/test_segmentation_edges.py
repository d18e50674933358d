"""Edges of cutting chained requests (intentvcs.core.segmentation): connectors at the ends of a text, Unicode
blanks around a connector, and the spans the parts name; a comma inside a number, a part of entities only
whatever ends the text, and a compatibility form (a ligature, full-width letters) of a known word."""

from __future__ import annotations

import pytest

from intentvcs.core.segmentation import CONNECTOR, cut
from tests.test_segmentation import answer


def parts(text: str, **kwargs) -> list[str]:
    return [text[a:b] for a, b in cut(text, **kwargs)]


@pytest.mark.parametrize("text, expected", [
    ("and turn off the lights and play some jazz", ["turn off the lights", "play some jazz"]),
    ("play some jazz and turn off the lights and", ["play some jazz", "turn off the lights"]),
    ("and then play some jazz, turn off the lights, and", ["play some jazz", "turn off the lights"]),
    (", play some jazz and turn off the lights", ["play some jazz", "turn off the lights"]),
    ("play some jazz, turn off the lights,", ["play some jazz", "turn off the lights"]),
    ("Also play some jazz and turn off the lights", ["play some jazz", "turn off the lights"]),
    ("  and  play some jazz and turn off the lights ; ", ["play some jazz", "turn off the lights"]),
])
def test_a_connector_opening_or_closing_a_text_is_in_no_part(text, expected):
    """"and turn off the lights and play some jazz" was cut "and turn off the lights" | "play some jazz": the
    piece before the opening connector had no word, joined the next one, connector and all, and the served part
    named (and the model read) "and turn off the lights"; a closing one stayed at the end of the last part."""
    assert parts(text) == expected


def test_the_service_names_and_reads_the_parts_without_a_dangling_connector():
    text = "and turn off the lights and play some jazz"
    accepted, served, _, _, calls = answer(text)
    assert accepted == {"play", "lights"}
    assert served == [("turn off the lights", ["lights"], False), ("play some jazz", ["play"], False)]
    assert calls[1] == ["turn off the lights", "play some jazz"]
    text = "play some jazz and turn off the lights and"
    _, served, _, _, calls = answer(text)
    assert [part for part, _, _ in served] == calls[1] == ["play some jazz", "turn off the lights"]


def test_a_dangling_connector_is_no_word_of_the_part_beside_it():
    """Short pieces still join their neighbour, named without the connector around them. An opening connector
    was counted as a word of the first piece: "and jazz" (two words) was cut off as a request of its own, where
    "jazz" alone is too short to be one (``MIN_WORDS``, "rock and roll" stays whole)."""
    assert parts("and jazz and turn off the lights") == ["jazz and turn off the lights"]
    assert parts("and rock and roll") == ["rock and roll"]
    assert parts("play rock and roll and") == ["play rock and roll"]
    assert parts("play jazz and turn off the lights and then rock") == ["play jazz", "turn off the lights and then rock"]


def test_a_text_of_blanks_or_connectors_only_is_one_forward_span():
    """cut("   ") was [(3, 0)], a span ending before it starts."""
    assert cut("and") == [(0, 3)]
    assert cut(" , and ") == [(1, 6)]
    for text in ("   ", "\u200b", ""):
        ((start, end),) = cut(text)
        assert 0 <= start <= end <= len(text) and not text[start:end].strip("\u200b ")


BLANKS = ["\u00a0", "\u2009", "\u202f", "\u3000", "\u200b", "\u2060", "\ufeff", "\u200b ", " \u200b", "\u00a0\u200b"]


@pytest.mark.parametrize("blank", BLANKS, ids=[ascii(b) for b in BLANKS])
@pytest.mark.parametrize("template", ["play jazz{b}and turn off the lights", "play jazz and{b}turn off the lights",
                                      "play jazz {b}and{b} turn off the lights", "play jazz,{b}turn off the lights",
                                      "play jazz{b}and then{b}turn off the lights",
                                      "play jazz and{b}then turn off the lights",
                                      "play jazz after{b}that turn off the lights"])
def test_unicode_blanks_around_a_connector_cut_as_a_space_does(template, blank):
    """"play jazz and\\u200b turn off the lights" (a zero-width space pasted from a chat app, which the
    tokenizer drops) was one part, where "play jazz and turn off the lights" is two."""
    text = template.format(b=blank)
    assert parts(text) == ["play jazz", "turn off the lights"] == parts(template.format(b=" "))


def test_invisible_blanks_at_the_ends_of_a_part_are_outside_its_span():
    assert parts("\u200bplay jazz\u200b and turn off the lights\ufeff") == ["play jazz", "turn off the lights"]
    assert parts("\u2060 play jazz and \u200bturn off the lights") == ["play jazz", "turn off the lights"]


def test_invisible_blanks_separate_words_when_parts_are_counted():
    # "rock\u200broll" reads as two words, like "rock roll": a part long enough to be cut off.
    assert parts("play jazz and rock\u200broll") == ["play jazz", "rock\u200broll"]
    # A joiner inside a word (emoji sequences, scripts) is no blank: "x\u200dand" is one word, no connector.
    assert parts("play jazz\u200dand turn off the lights") == ["play jazz\u200dand turn off the lights"]


def test_a_chained_request_with_a_zero_width_space_is_answered_part_by_part():
    plain = answer("play some jazz and turn off the lights")
    pasted = answer("play some jazz and\u200b turn off the lights")
    assert pasted[0] == plain[0] == {"play", "lights"}
    assert pasted[1] == plain[1] == [("play some jazz", ["play"], False), ("turn off the lights", ["lights"], False)]


@pytest.mark.parametrize("between", ["  ", "\n", "\t", "\u00a0", " \u200b"])
def test_after_that_cuts_whatever_blank_is_between_its_words(between):
    """"play jazz after  that turn off the lights" (two spaces, a line break) was one part."""
    text = f"play jazz after{between}that turn off the lights"
    assert parts(text) == ["play jazz", "turn off the lights"]
    assert parts(f"play jazz and{between}then turn off the lights") == ["play jazz", "turn off the lights"]


@pytest.mark.parametrize("connector", ["And Then", "AND ALSO", "and, then", "and then,", "After That", ", and",
                                       " ;and ", "Plus", "and and"])
def test_case_and_punctuation_variants_of_connectors_cut(connector):
    text = f"play some jazz {connector} turn off the lights"
    assert parts(text) == ["play some jazz", "turn off the lights"]


TEXTS = ["and play some jazz and turn off the lights and", "play jazz, and, then turn off the lights; thanks a lot",
         "\u200b play rock and roll \u00a0and dim the lights after  that check the weather ,",
         "find a comedy podcast and play it", "what is the weather in washington dc and boston",
         "  turn off the lights  and  play some jazz  ", "play the top 1,000 songs, and then dim the lights,"]


@pytest.mark.parametrize("text", TEXTS)
def test_parts_are_ordered_disjoint_trimmed_and_never_start_or_end_in_a_connector(text):
    spans = cut(text)
    assert all(0 <= a <= b <= len(text) for a, b in spans)
    assert all(b1 <= a2 for (_, b1), (a2, _) in zip(spans, spans[1:]))
    for a, b in spans:
        part = text[a:b]
        assert part == part.strip().strip("\u200b\u2060\ufeff")
        if len(spans) > 1:  # a connector match at either end of a part would dangle
            assert not any(m.start() == 0 or m.end() == len(part) for m in CONNECTOR.finditer(part) if m.group())


# ------------------------------------------------- numbers, parts of entities only, compatibility forms
@pytest.mark.parametrize("text", ["play the top 1,000 songs", "transfer $1,500 to my savings account",
                                  "set a timer for 1,5 hours", "book a table for 2,000 people; 3,000 guests"])
def test_a_comma_inside_a_number_is_no_connector(text):
    """"play the top 1,000 songs" was cut into "play the top 1" | "000 songs" (the served answer named
    "play the top 1" out of scope beside a "000 songs" request)."""
    spans = cut(text)
    for a, b in spans:  # no part begins or ends at the comma of a number
        assert not (text[a - 2:a - 1].isdigit() and text[a - 1:a] == "," and text[a:a + 1].isdigit())
        assert not (text[b - 1:b].isdigit() and text[b:b + 1] == "," and text[b + 1:b + 2].isdigit())
    assert len(spans) == (2 if ";" in text else 1)


def test_a_comma_after_a_number_still_cuts():
    text = "set a timer for 5, turn off the lights"
    assert [text[a:b] for a, b in cut(text)] == ["set a timer for 5", "turn off the lights"]
    text = "play jazz,2 songs and turn off the lights"
    assert [text[a:b] for a, b in cut(text)] == ["play jazz", "2 songs", "turn off the lights"]


@pytest.mark.parametrize("end", [".", "?", "!", "..."])
def test_a_part_naming_entities_asks_nothing_however_the_text_ends(end):
    """"turn off the lights, washington dc and boston" is one request, but with a full stop ("boston.") the
    last word was not inside the entity "boston", so the cities were answered as a request of their own."""
    text = "turn off the lights, washington dc and boston" + end
    accepted, parts, _, _, _ = answer(text)
    assert accepted == {"lights"} and parts == [(text, ["lights"], False)]
    text = 'turn off the lights in boston and "washington dc"'
    accepted, parts, _, _, _ = answer(text)
    assert accepted == {"lights"} and parts == [(text, ["lights"], False)]


def test_a_compatibility_form_of_a_known_word_is_read_as_that_word():
    """"ﬁnd" (the ligature U+FB01 of text pasted from a PDF) was corrected to "and", one edit away from the
    unknown word; full-width letters alike. Read as their plain letters (NFKC), they are the known word."""
    from intentvcs.core.spelling import Spelling

    spelling = Spelling.from_texts(["find the movie schedule", "and then play music"])
    rewrite = spelling.rewrite("ﬁnd the movie schedule")
    assert rewrite.text == "find the movie schedule"
    assert rewrite.to_original(0, 4) == (0, 3)  # the word as sent, whatever its length
    assert spelling.normalise("ＦＩＮＤ the movie") == "FIND the movie"
    assert spelling.normalise("find the movei") == "find the movie"  # plain words as before
