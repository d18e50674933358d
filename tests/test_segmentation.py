"""Chained requests answered part by part (intentvcs.core.segmentation)."""

from __future__ import annotations

import numpy as np
import pytest

from intentvcs.core.decision import Decision
from intentvcs.core.entities import Entity
from intentvcs.core.evaluation import evaluate
from intentvcs.core.dataio import Example, Span
from intentvcs.core.oos import ThresholdRule
from intentvcs.core.outputs import GraphOutputs, tuple_array
from intentvcs.core.segmentation import _names_only, cut, decide_segmented

LABELS = ("play", "lights", "weather")
# A bare city is read as weather, as a real model forces some intent onto a name on its own.
KEYWORDS = {"jazz": "play", "lights": "lights", "weather": "weather", "help": "weather", "washington dc": "weather"}
WEAK = {"help"}  # recognised less surely (logit 1.5: confidence 0.82)
GENRES = ("jazz", "rock and roll")
CITIES = ("boston", "washington dc")


def fake_infer(calls: list):
    """A single-intent model: the first intent keyword of a text wins (sigmoid logits +-4); it tags
    genres and cities as entities."""

    def infer(texts: list[str]) -> GraphOutputs:
        calls.append(list(texts))
        logits = np.full((len(texts), len(LABELS)), -4.0)
        found = []
        for row, text in enumerate(texts):
            seen = sorted((text.index(word), word) for word in KEYWORDS if word in text)
            if seen:
                word = seen[0][1]
                logits[row, LABELS.index(KEYWORDS[word])] = 1.5 if word in WEAK else 4.0
            found.append(tuple(Entity(kind, text.index(g), text.index(g) + len(g), 0.9)
                               for kind, names in (("genre", GENRES), ("city", CITIES)) for g in names if g in text))
        pooled = np.zeros((len(texts), 2), dtype=np.float32)
        return GraphOutputs(logits, pooled, pooled, tuple_array(found))

    return infer


DECISION = Decision(LABELS, activation="sigmoid", oos=ThresholdRule(0.5))


def answer(text: str, segment: bool = True):
    calls: list = []
    outputs, segmented = decide_segmented(DECISION, fake_infer(calls), [text], segment)
    parts = [(text[p.start:p.end], [LABELS[j] for j in p.accepted], p.out_of_scope) for p in segmented.parts[0]]
    accepted = {LABELS[j] for j in np.flatnonzero(segmented.result.accepted[0])}
    return accepted, parts, bool(segmented.result.out_of_scope[0]), outputs, calls


def test_cut_at_connectors():
    text = "play some jazz and turn off the lights"
    assert [text[a:b] for a, b in cut(text)] == ["play some jazz", "turn off the lights"]
    text = "Play some jazz, turn off the lights and then what's the weather"
    assert [text[a:b] for a, b in cut(text)] == ["Play some jazz", "turn off the lights", "what's the weather"]
    text = "dim the lights after that play jazz; also check the weather"
    assert [text[a:b] for a, b in cut(text)] == ["dim the lights", "play jazz", "check the weather"]


def test_short_sides_and_entities_are_not_cut():
    assert cut("play rock and roll") == [(0, 18)]  # "roll" alone is no request
    text = "play songs by simon and garfunkel now"
    inside = (text.index("simon"), text.index(" now"))
    assert cut(text, [inside]) == [(0, len(text))]
    # A span that only ends at the connector (a tagger reading a chained text runs on) protects nothing.
    text = "add this to my chill playlist and then book a table"
    running_on = (text.index("chill"), text.index(" then"))
    assert [text[a:b] for a, b in cut(text, [running_on])] == ["add this to my chill playlist", "book a table"]


def test_a_short_middle_piece_stays_with_the_piece_before_it():
    """Words were counted to the end of the text, so "butter" was cut off its list and joined the next request."""
    for text, first in (("add bread and butter and turn off the lights", "add bread and butter"),
                        ("play rock and roll and turn off the lights", "play rock and roll"),
                        ("hi and play some jazz and turn off the lights", "hi and play some jazz")):
        assert [text[a:b] for a, b in cut(text)] == [first, "turn off the lights"]


@pytest.mark.parametrize("text", ["play jazz and and turn off the lights", "play jazz ,and turn off the lights",
                                  "play jazz, and, turn off the lights", "play jazz and, turn off the lights",
                                  "play jazz,,, turn off the lights", "play jazz and then, also turn off the lights"])
def test_a_run_of_connectors_and_marks_is_left_out_of_both_parts(text):
    assert [text[a:b] for a, b in cut(text)] == ["play jazz", "turn off the lights"]


@pytest.mark.parametrize("text", ["switch off the kitchen lamps, sorry the lights", "please play, i mean transfer $75",
                                  "turn off the lights, no wait turn on the lights"])
def test_a_self_repair_is_not_cut_from_what_it_corrects(text):
    """"..., sorry the lights" was a request of its own (answered as turning the lights on beside off)."""
    assert cut(text) == [(0, len(text))]


@pytest.mark.parametrize("text", ["turn off the lights and wait for ten minutes", "turn off the lights, actually play jazz"])
def test_words_that_also_start_requests_are_no_self_repair(text):
    assert len(cut(text)) == 2


def test_a_short_part_acting_on_a_pronoun_continues_the_request_before_it(monkeypatch):
    """"find me a comedy podcast and play it" answered podcasts and music (its "play it" part read as music);
    it is one request. Here "play" reads as the play intent wherever it appears."""
    monkeypatch.setitem(KEYWORDS, "play", "play")
    accepted, parts, _, _, _ = answer("check the weather and play it")
    assert accepted == {"weather"} and len(parts) == 1
    accepted, _, _, _, _ = answer("check the weather and play some songs")
    assert accepted == {"weather", "play"}
    # The first part has no request before it: "play it" stays a request of its own.
    accepted, _, _, _, _ = answer("play it and check the weather")
    assert accepted == {"weather", "play"}


def test_a_connector_must_be_a_word_of_its_own():
    assert cut("play rock-and-roll then dim the lights") == [(0, 18), (24, 38)]
    assert cut("play the band thence the lights") == [(0, 31)]


def test_learned_request_starts_cut_where_no_connector_does():
    text = "play some jazz turn off the lights"
    starts = (text.index("turn"),)
    assert [text[a:b] for a, b in cut(text, starts=starts)] == ["play some jazz", "turn off the lights"]
    # A start right after a connector is the connector's cut, not a second one.
    text = "play some jazz and turn off the lights"
    assert cut(text, starts=(text.index("turn"),)) == cut(text)
    # ... and where the connector may not cut (a side of one word), neither may the start after it.
    text = "dallas and also how many flights"
    assert [text[a:b] for a, b in cut(text, starts=(text.index("how"),))] == [text]
    # Inside an entity, or leaving a side of fewer than MIN_WORDS words, a start cuts nothing.
    text = "play simon garfunkel now please"
    assert cut(text, [(5, text.index(" now"))], starts=(text.index("garfunkel"),)) == [(0, len(text))]
    assert cut("play jazz loud", starts=(10,)) == [(0, 14)]


def test_a_text_with_request_starts_is_answered_part_by_part():
    text = "play some jazz turn off the lights"

    def with_starts(texts: list[str]) -> GraphOutputs:
        outputs = fake_infer([])(texts)
        return outputs._replace(starts=tuple_array([(t.index("turn"),) if "jazz turn" in t else () for t in texts]))

    outputs, segmented = decide_segmented(DECISION, with_starts, [text])
    assert [(text[p.start:p.end], [LABELS[j] for j in p.accepted]) for p in segmented.parts[0]] == [
        ("play some jazz", ["play"]), ("turn off the lights", ["lights"])]


def test_at_most_four_parts():
    text = "play jazz now and dim the lights and check the weather and play jazz again and dim lights too"
    assert len(cut(text)) == 4


def test_two_requests_are_both_answered_with_their_spans():
    accepted, parts, oos, _, calls = answer("play some jazz and turn off the lights")
    assert accepted == {"play", "lights"} and not oos
    assert parts == [("play some jazz", ["play"], False), ("turn off the lights", ["lights"], False)]
    assert calls == [["play some jazz and turn off the lights"], ["play some jazz", "turn off the lights"]]


def test_an_out_of_scope_part_is_named_and_the_known_request_answered():
    accepted, parts, oos, _, _ = answer("what is the capital of peru and turn off the lights")
    assert accepted == {"lights"} and not oos
    assert parts == [("what is the capital of peru", [], True), ("turn off the lights", ["lights"], False)]


def test_parts_of_an_out_of_scope_text_must_pass_the_stricter_part_cut():
    def infer(texts):  # the whole text reads as nothing the model knows, its parts as usual
        outputs = fake_infer([])(texts)
        logits = outputs.logits.copy()
        logits[["nanny cam" in text and " and " in text for text in texts]] = -4.0
        return outputs._replace(logits=logits)

    text = "check the nanny cam and can you help"  # its second part: weather, less surely (score 0.18)
    for part_cut, accepted, out_of_scope in ((None, {"weather"}, False), (0.5, {"weather"}, False),
                                             (0.1, set(), True)):
        decision = Decision(LABELS, activation="sigmoid", oos=ThresholdRule(0.5, part_cut))
        _, segmented = decide_segmented(decision, infer, [text])
        assert {LABELS[j] for j in np.flatnonzero(segmented.result.accepted[0])} == accepted
        assert bool(segmented.result.out_of_scope[0]) is out_of_scope
    # The part cut leaves the parts of a text in scope as a whole alone.
    strict = Decision(LABELS, activation="sigmoid", oos=ThresholdRule(0.5, 0.01))
    _, segmented = decide_segmented(strict, fake_infer([]), ["play some jazz and turn off the lights"])
    assert segmented.result.accepted[0].sum() == 2


def test_one_request_stays_one_part():
    # Both sides are the same request; the short out-of-scope side is a fragment, not a request.
    for text in ("play jazz now and more jazz later", "turn off the lights and the lamp"):
        accepted, parts, _, _, _ = answer(text)
        assert len(parts) == 1 and parts[0][0] == text and len(accepted) == 1
    accepted, parts, _, _, calls = answer("play some jazz")
    assert parts == [("play some jazz", ["play"], False)] and len(calls) == 1  # nothing to cut: one graph run


def test_a_follow_up_less_sure_than_the_whole_text_is_no_request_of_its_own():
    accepted, parts, _, _, _ = answer("turn off the lights, can you help me")
    assert accepted == {"lights"} and len(parts) == 1
    # As sure as the whole reading: a request.
    accepted, _, _, _, _ = answer("turn off the lights, what is the weather")
    assert accepted == {"lights", "weather"}


def test_a_part_that_only_names_entities_asks_nothing():
    # "washington dc" is read as weather on its own, but it is the second city of one request.
    text = "turn off the lights in boston and washington dc"
    accepted, parts, _, _, _ = answer(text)
    assert accepted == {"lights"} and parts == [(text, ["lights"], False)]
    calls: list = []
    _, segmented = decide_segmented(DECISION, fake_infer(calls), [text], names_are_fragments=False)
    assert [LABELS[j] for p in segmented.parts[0] for j in p.accepted] == ["lights", "weather"]


@pytest.mark.parametrize("text", ["turn off the lights in boston and the washington dc",
                                  "turn off the lights in boston and washington dc please"])
def test_a_part_of_names_framed_by_an_article_or_please_asks_nothing(text):
    """"the washington dc", "the living room": a name and the words that frame it continue the request before
    them; read as a request of its own (three words), the part was answered as weather, or out of scope."""
    accepted, parts, _, _, _ = answer(text)
    assert accepted == {"lights"} and parts == [(text, ["lights"], False)]


@pytest.mark.parametrize("text, parts", [
    ("play the mandalorian on disney plus and turn off the lights",
     ["play the mandalorian on disney plus", "turn off the lights"]),
    ("turn off the lights and play the mandalorian on disney plus",
     ["turn off the lights", "play the mandalorian on disney plus"]),
    ("watch espn plus, then turn off the lights", ["watch espn plus", "turn off the lights"]),
    ("play some jazz plus turn off the lights", ["play some jazz", "turn off the lights"]),
    ("play some jazz, plus turn off the lights", ["play some jazz", "turn off the lights"]),
])
def test_plus_joins_requests_only_where_a_request_follows_it(text, parts):
    """Before another connector or at the end of the text "plus" ends a name: it was cut off the part."""
    assert [text[a:b] for a, b in cut(text)] == parts


def test_names_joined_by_plus_ask_nothing():
    """"the beatles plus queen" names two bands; read as a word of its own, "plus" made it a request."""
    text = "turn off the lights and the beatles plus queen"
    beatles, queen = text.index("beatles"), text.index("queen")
    found = (Entity("artist", beatles, beatles + 7, 0.9), Entity("artist", queen, queen + 5, 0.9))
    part = text[text.index("the beatles"):]
    shift = text.index("the beatles")
    assert _names_only(part, [Entity(e.label, e.start - shift, e.end - shift, 0.9) for e in found])
    assert [text[a:b] for a, b in cut(text, [(e.start, e.end) for e in found])] == [
        "turn off the lights", "the beatles plus queen"]


def test_entities_joined_by_a_connector_ask_nothing():
    """"washington dc and boston" names two cities ("and" did not cut: "boston" alone is too short); the "and"
    made it a request of its own, read as weather."""
    text = "turn off the lights, washington dc and boston"
    accepted, parts, _, _, _ = answer(text)
    assert accepted == {"lights"} and parts == [(text, ["lights"], False)]


def test_a_part_joined_from_pieces_is_read_again_for_its_entities():
    """"play jazz" | "rock and roll" | ... : the fragment joins its request; the joined part's entities are read
    from it as a whole, not from its pieces (a list split across pieces gave pieces of names)."""
    text = "turn off the lights and play jazz, rock and roll"
    _, _, _, outputs, calls = answer(text)
    assert calls[-1] == ["play jazz, rock and roll"]  # the one part of two pieces, read once more
    assert [text[e.start:e.end] for e in outputs.entities[0]] == ["jazz", "rock and roll"]


def test_a_fragment_lends_the_answer_none_of_its_confidences():
    """"help me" is weather at 0.82 on its own, less sure than the whole text's reading: a fragment, joined to the
    request before it. The answer's confidences come from the requests' own pieces (they came from every piece),
    so no intent shows above its threshold unaccepted."""
    text = "turn off the lights, help me and play some jazz"
    accepted, parts, _, _, _ = answer(text)
    assert accepted == {"lights", "play"}
    assert parts == [("turn off the lights, help me", ["lights"], False), ("play some jazz", ["play"], False)]
    _, segmented = decide_segmented(DECISION, fake_infer([]), [text])
    assert segmented.result.confidences[0, LABELS.index("weather")] < 0.5


def test_segment_off_decides_the_text_whole():
    accepted, parts, _, _, calls = answer("play some jazz and turn off the lights", segment=False)
    assert len(calls) == 1 and parts == [("play some jazz and turn off the lights", ["play"], False)]


def test_entities_of_a_chained_text_come_from_its_parts_at_offsets_into_the_text():
    text = "play some rock and roll please and turn off the lights"
    _, parts, _, outputs, _ = answer(text)
    assert [p[0] for p in parts] == ["play some rock and roll please", "turn off the lights"]
    (entity,) = outputs.entities[0]
    assert text[entity.start:entity.end] == "rock and roll"


def test_evaluation_scores_the_segmented_answer():
    rows = [Example("play some jazz and turn off the lights", ("play", "lights"), spans=(Span(10, 14, "genre"),)),
            Example("check the weather", ("weather",))]
    outputs, segmented = decide_segmented(DECISION, fake_infer([]), [r.text for r in rows])
    figures = evaluate(DECISION, outputs, rows, include_tables=False, result=segmented.result)
    assert figures["exact_match"] == 1.0 and figures["overall_exact_match"] == 1.0
    whole = evaluate(DECISION, outputs, rows, include_tables=False)
    assert whole["exact_match"] == pytest.approx(0.5)
