"""Spelling second review: each test failed on the code before its fix.

The stem of a negative contraction ("doesn't", "isn't", "couldn't") was "corrected" to the positive word
("does't", "in't", "could't"), dropping the negation. Apostrophe-less contractions and chat words missing
from the informal list were bent into other words ("yall" -> "call", "shouldve" -> "should", "hed" -> "hey",
"cuz" -> "cut"). Hashtags were rewritten ("#balanse" -> "#balance") although handles were not. Codes joined to
their digits by a separator ("ordr-123", "123-ordr", "ordr#123") and URL paths under a domain outside the short
top-level-domain list ("bank.de/savngs") were rewritten. Currency codes absent from the English list were
bent into training words ("100 usd" -> "100 us"). (Which words lie in a kept span is now found by a binary
search, not against every span for every word: 10,000 characters of "x1 x1 ..." took 0.37 s, now 0.006 s; not
a test here, a timing. The guard below checks the search keeps the words it kept.)
"""

from __future__ import annotations


import pytest

from intentvcs.core.spelling import Spelling

TRAINING = [
    "what does the balance say",
    "is it in my savings account",
    "could you call my order in",
    "you should check the balance",
    "hey who is there",
    "how do i cut the cable",
    "we need to know where it is",
    "tell us the rate",
]


@pytest.fixture(scope="module")
def spelling() -> Spelling:
    return Spelling.from_texts(TRAINING)


@pytest.mark.parametrize("text", [
    "it doesn't say", "it doesn’t say", "it isn't in savings", "i couldn't call", "we needn't know",
    "i didn't order", "you shouldn't check", "DOESN'T SAY",
])
def test_negative_contractions_keep_their_stem(spelling, text):
    assert spelling.normalise(text) == text


@pytest.mark.parametrize("text", ["yall call", "you shouldve called", "hed call", "cuz i cut it", "whod call",
                                  "howd you know", "whered it go", "itd be in"])
def test_apostrophe_less_contractions_are_words(spelling, text):
    assert spelling.normalise(text) == text


@pytest.mark.parametrize("text", ["post to #balanse", "tweet #savngs please", "#ordr now"])
def test_hashtags_are_not_spelling(spelling, text):
    assert spelling.normalise(text) == text


@pytest.mark.parametrize("text", ["track ordr-123", "track 123-ordr", "track ordr#123", "ticket ordr/123",
                                  "go to bank.de/savngs", "see mybank.co.uk/balanse"])
def test_codes_with_separators_and_url_paths_are_not_spelling(spelling, text):
    assert spelling.normalise(text) == text


def test_a_typo_next_to_a_code_is_still_mended(spelling):
    assert spelling.normalise("ordr-123 balsnce") == "ordr-123 balance"
    assert spelling.normalise("#tag balsnce") == "#tag balance"


@pytest.mark.parametrize("text", ["convert 100 usd to eur", "rate of USD", "100 gbp in us"])
def test_currency_codes_are_not_spelling(text):
    spelling = Spelling.from_texts(["tell us the rate", "give me a gap", "convert it to euro"])
    assert spelling.normalise(text) == text


def test_protected_spans_in_any_order_and_overlapping_still_keep_their_words(spelling):
    text = "balsnce savngs balsnce savngs"
    rewrite = spelling.rewrite(text, protected=[(15, 22), (0, 3), (1, 5), (23, 25)])
    assert rewrite.text == "balsnce savings balsnce savngs"
