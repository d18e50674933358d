"""Tests for intentvcs.core.spelling: what is corrected and what is left alone, casing,
ties, serialisation and its errors, and recovery of the typo operator's output."""

from __future__ import annotations

import json
import re

import pytest

from intentvcs.core.dataio import Example
from intentvcs.core.perturb import perturb
from intentvcs.core.spelling import SpellingError, Spelling, english_words, vocabulary

TRAINING = [
    "What is my account balance",
    "Play some jazz music in the kitchen",
    "Will it rain tomorrow in Boston",
    "Transfer money from savings to checking",
    "Book a table for four at Olive Garden",
]


@pytest.fixture(scope="module")
def spelling() -> Spelling:
    return Spelling.from_texts(TRAINING)


@pytest.mark.parametrize("typed, meant", [
    ("what is my acount balsnce", "what is my account balance"),  # deletion, substitution
    ("play some jazz muisc", "play some jazz music"),  # transposition counts as one edit
    ("trasnfer from svaings to chekcing", "transfer from savings to checking"),
    ("will it rain tomorow", "will it rain tomorrow"),
])
def test_typos_go_back_to_the_training_word(spelling, typed, meant):
    assert spelling.normalise(typed) == meant


def test_casing_spacing_punctuation_and_digits_are_kept(spelling):
    assert spelling.normalise("BALSNCE please!") == "BALANCE please!"
    assert spelling.normalise("Balsnce,  now?") == "Balance,  now?"
    assert spelling.normalise("trasnfer $50 at 5:30pm") == "transfer $50 at 5:30pm"


@pytest.mark.parametrize("text", [
    "boot a table",            # a real English word: a real-word typo is the model's to handle
    "play some rock music",    # English words outside the training vocabulary
    "xyzzy qwfpgj",            # too far from every training word
    "a tb ok",                 # under three letters
    "will it rqxn",            # two edits from "rain": too many for a four-letter word
])
def test_real_words_and_hopeless_words_are_left_alone(spelling, text):
    assert spelling.normalise(text) == text


def test_words_up_to_seven_letters_get_one_edit_longer_words_two(spelling):
    assert spelling.normalise("will it raim") == "will it rain"
    assert spelling.normalise("my acount") == "my account"  # one deletion, six letters
    assert spelling.normalise("my acout") == "my acout"  # two deletions, five letters: more often a name
    assert spelling.normalise("to chekcnig") == "to checking"  # two transpositions, eight letters


def test_chat_contractions_are_words():
    spelling = Spelling.from_texts(["don is my friend", "wake me up", "what time is it"])
    assert spelling.normalise("dont wake me up") == "dont wake me up"  # not "don": the negation stays
    assert spelling.normalise("whats the tiem") == "whats the time"


@pytest.mark.parametrize("typed, meant", [
    ("get me a car to Gare du Nord", "get me a car to Gare du Nord"),  # names in mixed-case text stay
    ("what is the balsnce on my Amex", "what is the balance on my Amex"),
    ("Balsnce of my Acount", "Balance of my Acount"),  # the first word is capitalised as a sentence start
    ("BALSNCE OF MY ACOUNT", "BALANCE OF MY ACCOUNT"),  # one case throughout: every word is fair game
    ("Balsnce Of My Acount", "Balance Of My Account"),
])
def test_capitals_mark_names_only_in_mixed_case_text(typed, meant):
    spelling = Spelling.from_texts(["what is the balance of my account", "get me a car to the station"])
    assert spelling.normalise(typed) == meant


def test_only_training_words_are_suggested():
    # "weathr" is one edit from the English "weather", which was never trained on.
    assert "weather" in english_words()
    assert Spelling.from_texts(["play music"]).normalise("weathr") == "weathr"
    assert Spelling.from_texts(["the weather today"]).normalise("weathr") == "weather"


def test_ties_go_to_the_more_frequent_training_word():
    # "bxat" is one edit from both.
    spelling = Spelling({"boat": 5, "beat": 2})
    assert spelling.normalise("bxat") == "boat"
    assert Spelling({"boat": 1, "beat": 9}).normalise("bxat") == "beat"


def test_vocabulary_counts_lowercase_letter_words():
    assert vocabulary(["Play it, play IT again!", "it's 5 o'clock"]) == {
        "play": 2, "it": 3, "again": 1, "s": 1, "o": 1, "clock": 1}


def test_words_of_any_script_are_whole_words():
    spelling = Spelling.from_texts(["café in Zürich", "weather in Istanbul"])
    assert {"café", "zürich"} <= spelling.counts.keys()
    # Accented words are neither split nor "corrected" piecewise; a typo in one is.
    assert spelling.normalise("müller's café, zürch") == "müller's café, zürich"
    # "İ" lowercases to "i" and a combining dot, which belongs to the word; numerals are no words.
    assert vocabulary(["İstanbul Ⅷ ½"]) == {"i\u0307stanbul": 1}


def test_round_trip_and_file(spelling, tmp_path):
    again = Spelling.from_dict(json.loads(json.dumps(spelling.to_dict())))
    assert again.counts == spelling.counts and len(again) == len(spelling)
    path = spelling.save(tmp_path / "spelling.json")
    assert Spelling.load(path).normalise("acount balsnce") == "account balance"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # written atomically


@pytest.mark.parametrize("content, reason", [
    ("{not json", "Expecting property name"),
    (json.dumps({"format": "something-else"}), "this is not a spelling normaliser"),
    (json.dumps({"format": "intentvcs-spelling", "format_version": 9, "vocabulary": {}}), "format_version"),
    (json.dumps({"format": "intentvcs-spelling", "format_version": 1, "vocabulary": ["a"]}), "vocabulary"),
    (json.dumps({"format": "intentvcs-spelling", "format_version": 1, "vocabulary": {"Caps": 1}}), "lowercase"),
    (json.dumps({"format": "intentvcs-spelling", "format_version": 1, "vocabulary": {"word": 0}}), "positive"),
])
def test_bad_files_name_the_file_and_the_reason(tmp_path, content, reason):
    path = tmp_path / "spelling.json"
    path.write_text(content)
    with pytest.raises(SpellingError, match=reason) as info:
        Spelling.load(path)
    assert info.value.path == str(path) and str(path) in str(info.value)


def test_missing_file_is_a_spelling_error(tmp_path):
    with pytest.raises(SpellingError, match="No such file"):
        Spelling.load(tmp_path / "absent.json")


def test_most_keyboard_typos_are_recovered():
    """The operator the normaliser exists for: typo_keyboard's copies of training
    utterances mostly come back exactly (the rest are real-word typos or too short)."""
    texts = [
        "what is the balance of my checking account", "play the latest album by coldplay",
        "what will the weather be like tomorrow morning", "book a restaurant for dinner tonight",
        "transfer two hundred dollars to my savings", "add this song to my workout playlist",
        "find me a flight from boston to denver", "how many calories are in a banana",
        "set an alarm for seven thirty tomorrow", "what movies are playing near me tonight",
    ]
    spelling = Spelling.from_texts(texts)
    recovered = total = 0
    for seed in range(5):
        for text in texts:
            typo = perturb(Example(text, ("x",)), "typo_keyboard", seed)
            if typo is None or typo.text == text:
                continue
            total += 1
            recovered += spelling.normalise(typo.text) == text
    assert total >= 40
    assert recovered / total >= 0.8, (recovered, total)  # 46 of 50 when written


def test_a_protected_span_keeps_its_words_as_written(spelling):
    text = "play some jazz muisc in the kitchne"
    protected = [(text.index("kitchne"), len(text))]
    assert spelling.rewrite(text, protected).text == "play some jazz music in the kitchne"


def city_model(reads: list[list[str]]):
    """A graph that tags "boston" / "bostn" as a city and answers each text with its length as a logit;
    it logs each run's texts in ``reads``."""
    import numpy as np

    from intentvcs.core.entities import Entity
    from intentvcs.core.outputs import GraphOutputs, tuple_array

    def infer(texts):
        reads.append(list(texts))
        found = []
        for text in texts:
            city = next((word for word in ("boston", "bostn") if word in text), None)
            found.append((Entity("city", text.index(city), text.index(city) + len(city), 0.9),) if city else ())
        logits = np.array([[float(len(text))] for text in texts], dtype=np.float32)
        return GraphOutputs(logits, logits, logits, tuple_array(found))

    return infer


def test_corrections_inside_an_entity_are_undone_and_the_text_read_again(spelling):
    """A model with an entity head reads "boston" / "bostn" as a city: a correction there (a name, not a typo)
    is undone, and the text is read again as sent there; a text corrected elsewhere is read once."""
    from intentvcs.core.spelling import infer_normalised

    reads: list[list[str]] = []
    texts = ["will it rain tomorow in bostn", "play some jazz muisc"]
    outputs, read = infer_normalised(spelling, texts, city_model(reads))
    assert reads == [["will it rain tomorrow in boston", "play some jazz music"], ["will it rain tomorrow in bostn"]]
    assert read == ["will it rain tomorrow in bostn", "play some jazz music"]
    assert [[e.to_dict(t)["value"] for e in found] for t, found in zip(texts, outputs.entities)] == [["bostn"], []]
    assert outputs.logits[:, 0].tolist() == [len(read[0]), len(read[1])]  # the second reading answers row 0


def test_a_tagging_graph_reads_changed_texts_as_sent_in_the_same_run(spelling):
    """With ``tags``, the changed texts are read as sent beside the rewritten ones; a text whose only
    correction is inside an entity is answered from that reading (no second run); one with corrections
    inside and outside is read again with the outside ones kept. The answers are those of two runs."""
    from intentvcs.core.spelling import infer_normalised

    reads: list[list[str]] = []
    infer = city_model(reads)
    texts = ["weather in bostn", "will it rain tomorow in bostn", "play some jazz muisc", "play jazz"]
    outputs, read = infer_normalised(spelling, texts, infer, tags=True)
    assert reads == [["weather in boston", "will it rain tomorrow in boston", "play some jazz music", "play jazz",
                      "weather in bostn", "will it rain tomorow in bostn", "play some jazz muisc"],
                     ["will it rain tomorrow in bostn"]]
    assert read == ["weather in bostn", "will it rain tomorrow in bostn", "play some jazz music", "play jazz"]
    two_runs, read_in_two = infer_normalised(spelling, texts, infer)
    assert read_in_two == read and len(reads) == 4  # without tags: the rewritten texts, then both re-reads
    assert reads[-1] == ["weather in bostn", "will it rain tomorrow in bostn"]
    assert outputs.logits.tolist() == two_runs.logits.tolist() == [[float(len(text))] for text in read]
    assert list(outputs.entities) == list(two_runs.entities)


def test_a_correction_to_a_word_the_entity_type_holds_is_kept():
    """Built from examples, the normaliser knows which words each entity type's training spans hold: a
    correction inside a found entity to such a word ("tomorow" -> "tomorrow" in a date) is a typo mended
    and stays; one to a word the type never holds ("bostn" -> "boston" where no city span says boston) is
    a name bent and is undone, as every correction inside an entity is for a normaliser of plain texts."""
    import numpy as np

    from intentvcs.core.dataio import Span
    from intentvcs.core.entities import Entity
    from intentvcs.core.outputs import GraphOutputs, tuple_array
    from intentvcs.core.spelling import entity_vocabulary, infer_normalised

    rows = [Example(text, ("x",)) for text in TRAINING]
    rows += [Example("rain tomorrow", ("x",), spans=(Span(5, 13, "date"),)),
             Example("Paris weather", ("x",), spans=(Span(0, 5, "city"),))]
    assert entity_vocabulary(rows) == {"city": ["paris"], "date": ["tomorrow"]}
    spelling = Spelling.from_examples(rows)
    assert spelling.holds("date", "Tomorrow") and not spelling.holds("city", "boston")
    assert not Spelling.from_texts(TRAINING).holds("city", "paris")

    def tags_dates_and_cities(texts):
        """Tags whichever of "tomorrow", "tomorow" (dates) and "boston", "bostn" (cities) a text holds."""
        types = {"tomorrow": "date", "tomorow": "date", "boston": "city", "bostn": "city"}
        found = [tuple(Entity(types[word], match.start(), match.end(), 0.9)
                       for match in re.finditer(r"\w+", text) if (word := match.group(0)) in types)
                 for text in texts]
        logits = np.zeros((len(texts), 1), dtype=np.float32)
        return GraphOutputs(logits, logits, logits, tuple_array(found))

    _, read = infer_normalised(spelling, ["rain tomorow", "rain in bostn tomorow"], tags_dates_and_cities)
    assert read == ["rain tomorrow", "rain in bostn tomorrow"]
    _, read = infer_normalised(Spelling.from_texts(TRAINING), ["rain tomorow"], tags_dates_and_cities)
    assert read == ["rain tomorow"]


def test_entity_words_round_trip_and_older_files_read_without_them(tmp_path):
    from intentvcs.core.dataio import Span

    spelling = Spelling.from_examples([Example("Paris weather", ("x",), spans=(Span(0, 5, "city"),))])
    again = Spelling.load(spelling.save(tmp_path / "spelling.json"))
    assert again.entity_words == {"city": frozenset({"paris"})} and again.counts == spelling.counts
    older = spelling.to_dict()
    del older["entity_words"]
    assert Spelling.from_dict(older).entity_words is None
    with pytest.raises(ValueError, match="entity_words"):
        Spelling.from_dict({**older, "entity_words": ["paris"]})
