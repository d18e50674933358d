"""Connectors that lie inside one value and cut nothing, whether or not the model tags that value
(intentvcs.core.segmentation.cut): a range ("between 4 and 5 pm"), a number ("two hundred and fifty",
"3 and a half"), a quotation ('"call mom and pay the rent"')."""

from __future__ import annotations

import pytest

from intentvcs.core.segmentation import cut
from tests.test_segmentation import answer


def parts(text: str, **kwargs) -> list[str]:
    return [text[a:b] for a, b in cut(text, **kwargs)]


@pytest.mark.parametrize("text", ["show flights between boston and denver on monday", "flights between 4 and 5 pm",
                                  "what is the distance between pittsburgh airport and downtown pittsburgh",
                                  "Show flights Between Boston AND Denver on monday"])
def test_the_and_of_a_between_range_cuts_nothing(text):
    """"flights between 4 and 5 pm" was cut "flights between 4" | "5 pm" (ATIS has some 400 such rows); the
    model's entities do not protect it, since each end of the range is an entity of its own."""
    assert parts(text) == [text]


def test_a_connector_after_a_between_range_still_cuts():
    text = "what flights leave between 6 and 10 am and then book a hotel room in denver"
    assert parts(text) == ["what flights leave between 6 and 10 am", "book a hotel room in denver"]
    text = "show flights between boston and denver and turn off the lights"
    assert parts(text) == ["show flights between boston and denver", "turn off the lights"]
    # A learnt request start inside the range cuts nothing either.
    text = "flights between boston and denver on monday"
    assert parts(text, starts=(text.index("boston"),)) == [text]


@pytest.mark.parametrize("text", ["transfer two hundred and fifty dollars to alex",
                                  "set a timer for 3 and a half hours", "will it be cold 7 weeks and a half from now", "it is 4 and a quarter miles away",
                                  "book a table for one thousand and 20 people"])
def test_the_and_of_a_number_cuts_nothing(text):
    """"transfer two hundred and fifty dollars to alex" was cut "transfer two hundred" | "fifty dollars to alex"."""
    assert parts(text) == [text]


@pytest.mark.parametrize("text, expected", [
    ("set a timer for 3 minutes and play some jazz", ["set a timer for 3 minutes", "play some jazz"]),
    ("play a hundred songs and turn off the lights", ["play a hundred songs", "turn off the lights"]),
])
def test_an_and_after_a_number_that_starts_a_request_still_cuts(text, expected):
    assert parts(text) == expected


@pytest.mark.parametrize("text", ['remind me to "call mom and pay the rent" tomorrow',
                                  "send a message saying “running late and then heading home” to john",
                                  "add a note «buy bread, then milk and eggs» to my list"])
def test_a_connector_inside_quotes_cuts_nothing(text):
    """'remind me to "call mom and pay the rent" tomorrow' was cut inside the quoted reminder, each part holding
    one quotation mark."""
    assert parts(text) == [text]


def test_a_connector_between_quotations_still_cuts():
    text = 'play "jazz" and turn off the lights "now"'
    assert parts(text) == ['play "jazz"', 'turn off the lights "now"']


def test_a_range_is_answered_as_one_request():
    """What the service answers: one part for the text (the range's "and" cut off a part of its own before)."""
    text = "turn off the lights between 6 and 10 pm"
    accepted, served, _, _, calls = answer(text)
    assert accepted == {"lights"} and served == [(text, ["lights"], False)] and len(calls) == 1
