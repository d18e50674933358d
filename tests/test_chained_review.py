"""Review of how chained requests are answered: spans, fragments and consistency (intentvcs.core.segmentation)."""

from __future__ import annotations

import pytest

from intentvcs.core.segmentation import cut
from tests.test_segmentation import answer


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
