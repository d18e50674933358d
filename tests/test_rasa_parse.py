"""Entities on /predict, Rasa's ``POST /model/parse`` and ``GET /status``, against a real ``bentoml serve``.

The bundle is a tiny random model with a random entity tagger over ``city``
and ``date`` (``tests.helpers.bundle``): which words it tags is arbitrary but
fixed, so the tests check the form of every answer (offsets into the text as
sent, types of the bundle, the Rasa mapping of the /predict answer), never
which words. Two servers: the defaults, and one with a custom fallback
intent and small limits. ``intentvcs.service.rasa`` is also tested alone.
"""

from __future__ import annotations

import json

import httpx
import pytest

from intentvcs.cli.commands.serve import running
from intentvcs.service.rasa import EXTRACTOR, parse_answer
from intentvcs.service.settings import Limits
from tests.helpers.bundle import DEFAULT_LABELS, make_tiny_bundle
from tests.helpers.http import assert_400_names, post

LIMITS = Limits()
ENTITY_TYPES = ("city", "date")
SPELLING_TEXTS = ("play some jazz music", "will it rain tomorrow in london")
TYPO = "play jazz muisc tomorrow in londn"  # the normaliser rewrites it; offsets must stay in the text as sent
TEXTS = ["play some music", "book a table for two tonight in paris", "will it rain tomorrow in london",
         "rate this book five stars", "find the movie schedule", "hello", "set an alarm for 7 am tomorrow", TYPO]
FALLBACK = "out_of_scope_custom"
TIGHT_ENV = {"INTENTVCS_FALLBACK_INTENT": FALLBACK, "INTENTVCS_MAX_TEXT_CHARS": "40",
             "INTENTVCS_MAX_BODY_BYTES": "4096", "INTENTVCS_DEFAULT_TOP_K": "2"}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return make_tiny_bundle(tmp_path_factory.mktemp("rasa"), spelling_texts=SPELLING_TEXTS, entity_types=ENTITY_TYPES)


@pytest.fixture(scope="module")
def url(bundle):
    with running(bundle) as base:
        yield base


@pytest.fixture(scope="module")
def tight_url(bundle):
    with running(bundle, extra_env=TIGHT_ENV) as base:
        yield base


def predictions(base: str, texts: list[str]) -> list[dict]:
    response = post(base, "/predict", {"texts": texts})
    assert response.status_code == 200, response.text
    return response.json()["predictions"]


def one_of_each(base: str, texts: list[str]) -> tuple[str, str]:
    """A text the model calls in scope and one it calls out of scope (the tiny decision makes both)."""
    answers = predictions(base, texts)
    in_scope = [a["text"] for a in answers if not a["out_of_scope"]]
    out_of_scope = [a["text"] for a in answers if a["out_of_scope"]]
    assert in_scope and out_of_scope, answers
    return in_scope[0], out_of_scope[0]


# ------------------------------------------------------------- the mapping alone
ANSWER = {"text": "rain in paris", "normalised": None, "accepted": ["GetWeather"],
          "intents": [{"intent": "GetWeather", "confidence": 0.7}, {"intent": "PlayMusic", "confidence": 0.2}],
          "entities": [{"entity": "city", "value": "paris", "start": 8, "end": 13, "confidence": 0.9}],
          "out_of_scope": False, "oos": {"rule": "threshold", "score": 0.3, "threshold": 0.4}}


def test_mapping_in_scope_keeps_the_ranking_and_names_the_extractor():
    parsed = parse_answer(ANSWER, "nlu_fallback")
    assert parsed["intent"] == {"name": "GetWeather", "confidence": 0.7}
    assert [r["name"] for r in parsed["intent_ranking"]] == ["GetWeather", "PlayMusic"]
    assert parsed["entities"] == [{"entity": "city", "start": 8, "end": 13, "value": "paris",
                                   "confidence_entity": 0.9, "extractor": EXTRACTOR}]
    assert (parsed["text"], parsed["accepted"], parsed["out_of_scope"]) == ("rain in paris", ["GetWeather"], False)


def test_a_chained_request_names_its_first_requests_intent():
    """Both requests' intents capped at 1.0: the ranking put the second request's first (the README's demo:
    "play some jazz and turn off the lights" named turn_off_lights), where Rasa acts on the first."""
    chained = {**ANSWER, "text": "play some jazz and rain in paris", "accepted": ["GetWeather", "PlayMusic"],
               "intents": [{"intent": "GetWeather", "confidence": 1.0}, {"intent": "PlayMusic", "confidence": 1.0},
                           {"intent": "BookRestaurant", "confidence": 0.1}],
               "parts": [{"start": 19, "end": 32, "text": "rain in paris", "accepted": ["GetWeather"],
                          "out_of_scope": False},
                         {"start": 0, "end": 14, "text": "play some jazz", "accepted": ["PlayMusic"],
                          "out_of_scope": False}]}
    parsed = parse_answer(chained, "nlu_fallback")
    assert parsed["intent"] == {"name": "PlayMusic", "confidence": 1.0}
    assert [r["name"] for r in parsed["intent_ranking"]] == ["PlayMusic", "GetWeather", "BookRestaurant"]
    assert parsed["accepted"] == ["GetWeather", "PlayMusic"]


def test_mapping_out_of_scope_puts_the_fallback_first():
    parsed = parse_answer({**ANSWER, "accepted": [], "out_of_scope": True}, "my_fallback")
    assert parsed["intent"] == {"name": "my_fallback", "confidence": pytest.approx(0.3)}
    assert [r["name"] for r in parsed["intent_ranking"]] == ["my_fallback", "GetWeather", "PlayMusic"]
    assert parsed["out_of_scope"] is True and parsed["accepted"] == []


# ------------------------------------------------------------------ /predict
def test_predict_carries_entities_with_offsets_into_the_text_as_sent(url):
    answers = predictions(url, TEXTS)
    found = [(answer["text"], entity) for answer in answers for entity in answer["entities"]]
    assert len(found) >= 3, answers  # the tagger does tag some words
    for text, entity in found:
        assert set(entity) == {"entity", "value", "start", "end", "confidence"}
        assert entity["entity"] in ENTITY_TYPES
        assert 0 <= entity["start"] < entity["end"] <= len(text)
        assert text[entity["start"]:entity["end"]] == entity["value"]
        assert 0.0 <= entity["confidence"] <= 1.0
    typo = next(answer for answer in answers if answer["text"] == TYPO)
    assert typo["normalised"] not in (None, TYPO)  # the graph read another text; offsets above still held


def test_openapi_documents_entities_and_the_parse_route(url):
    spec = httpx.get(f"{url}/docs.json", timeout=10).json()
    schemas = spec["components"]["schemas"]
    entity = schemas["Prediction"]["properties"]["entities"]["items"]["$ref"].rsplit("/", 1)[-1]
    assert set(schemas[entity]["properties"]) == {"entity", "value", "start", "end", "confidence"}
    assert "post" in spec["paths"]["/model/parse"]
    request = schemas["ParseRequest"]["properties"]
    assert set(request) == {"text", "message_id", "token", "lang", "metadata"}  # what Rasa's server takes
    assert request["text"]["maxLength"] == LIMITS.max_text_chars
    rasa_entity = schemas["RasaEntity"]["properties"]
    assert {"entity", "start", "end", "value", "confidence_entity", "extractor"} == set(rasa_entity)


# --------------------------------------------------------------- /model/parse
def test_parse_is_the_predict_answer_in_rasas_shape(url):
    for text in TEXTS:
        [want] = predictions(url, [text])
        response = post(url, "/model/parse", {"text": text})
        assert response.status_code == 200, response.text
        assert "@sha256:" in response.headers["x-intentvcs-model"]
        got = response.json()
        assert set(got) == {"text", "intent", "intent_ranking", "entities", "accepted", "out_of_scope"}
        assert got["text"] == text and got["accepted"] == want["accepted"]
        assert got["out_of_scope"] == want["out_of_scope"]
        ranked = [r["name"] for r in got["intent_ranking"]]
        assert ranked[-len(want["intents"]):] == [i["intent"] for i in want["intents"]]
        assert len(want["intents"]) == min(LIMITS.default_top_k, len(DEFAULT_LABELS))
        if not got["out_of_scope"]:
            assert got["intent"] == got["intent_ranking"][0]
            assert got["intent"]["name"] == want["intents"][0]["intent"]
        assert [(e["entity"], e["start"], e["end"], e["value"]) for e in got["entities"]] == \
            [(e["entity"], e["start"], e["end"], e["value"]) for e in want["entities"]]
        for entity in got["entities"]:
            assert entity["extractor"] == "intentvcs" and 0 <= entity["confidence_entity"] <= 1
            assert text[entity["start"]:entity["end"]] == entity["value"]


def test_out_of_scope_is_rasas_fallback_intent(url):
    _, outside = one_of_each(url, TEXTS)
    got = post(url, "/model/parse", {"text": outside}).json()
    top = got["intent_ranking"][1]["confidence"]
    assert got["out_of_scope"] is True and got["accepted"] == []
    assert got["intent"] == got["intent_ranking"][0] == {"name": "nlu_fallback", "confidence": pytest.approx(1 - top)}
    assert "nlu_fallback" not in [r["name"] for r in got["intent_ranking"][1:]]


def test_rasas_own_request_is_accepted(url):
    """What Rasa's RasaNLUHttpInterpreter posts: text, message_id (the sender), token (often null; a number
    when endpoints.yml's YAML reads it as one)."""
    for body in ({"text": "hello", "message_id": "sender-42", "token": None},
                 {"text": "hello", "message_id": None, "token": "secret"},
                 {"text": "hello", "message_id": "s", "token": 12345}):
        response = post(url, "/model/parse", body)
        assert response.status_code == 200, response.text
        assert response.json()["text"] == "hello"


@pytest.mark.parametrize("text", ["", " \t", "\u200b"])
def test_a_message_with_nothing_to_read_is_the_fallback_intent_not_a_refusal(url, text):
    """Rasa strips a message of spaces to "": a 400 would reach the assistant as an empty intent."""
    answer = post(url, "/model/parse", {"text": text, "message_id": "s", "token": None})
    assert answer.status_code == 200, answer.text
    parsed = answer.json()
    assert parsed["intent"] == {"name": "nlu_fallback", "confidence": 1.0}
    assert (parsed["text"], parsed["entities"], parsed["accepted"], parsed["out_of_scope"]) == (text, [], [], True)


@pytest.mark.parametrize("text, intent, confidence, entities", [
    ("/PlayMusic", "PlayMusic", 1.0, []),
    ("/affirm", "affirm", 1.0, []),  # an intent of the assistant's domain the model does not know
    ("/GetWeather@0.4", "GetWeather", 0.4, []),
    ('/GetWeather{"city": "paris"}', "GetWeather", 1.0, [("city", "paris")]),
    ('/BookRestaurant{"party_size": [2, 4]}', "BookRestaurant", 1.0, [("party_size", 2), ("party_size", 4)]),
    ('/GetWeather{"city": oops}', "GetWeather", 1.0, []),  # entities that are no JSON object: none, as Rasa reads them
])
def test_a_buttons_payload_is_the_intent_it_names(url, text, intent, confidence, entities):
    """Rasa posts a button's payload like any message, and its two-stage fallback is built on such buttons:
    the payload names the intent (and entities), as Rasa's RegexMessageHandler reads it; the model is not run."""
    parsed = post(url, "/model/parse", {"text": text}).json()
    assert parsed["intent"] == {"name": intent, "confidence": confidence} == parsed["intent_ranking"][0]
    assert len(parsed["intent_ranking"]) == 1 and parsed["accepted"] == [intent] and not parsed["out_of_scope"]
    assert [(e["entity"], e["value"]) for e in parsed["entities"]] == entities
    assert all((e["start"], e["end"]) == (0, len(text)) for e in parsed["entities"])


@pytest.mark.parametrize("text", ["/ what time is it", "/PlayMusic now please", "play /PlayMusic"])
def test_a_message_that_only_looks_like_a_payload_is_read_by_the_model(url, text):
    parsed = post(url, "/model/parse", {"text": text}).json()
    assert len(parsed["intent_ranking"]) > 1  # the model's ranking, not a payload's single intent


TOO_LONG = "a" * (LIMITS.max_text_chars + 1)


@pytest.mark.parametrize("body, field, limit", [
    ({}, "text", "Field required"),
    ({"message_id": "x"}, "text", "Field required"),
    ({"text": TOO_LONG}, "text", f"at most {LIMITS.max_text_chars} characters"),
    ({"text": 5}, "text", "valid string"),
    ({"text": ["hello"]}, "text", "valid string"),
    ({"text": "hi", "message_id": 7}, "message_id", "valid string"),
    ({"text": "hi", "message_id": "m" * 201}, "message_id", "at most 200 characters"),
    ({"text": "hi", "top_k": 3}, "top_k", "Extra inputs"),
    ("{not json", "", "Invalid JSON"),
    ('"hello"', "", "should be an object"),
])
def test_bad_parse_requests_get_a_400_naming_field_and_limit(url, body, field, limit):
    assert_400_names(post(url, "/model/parse", body), field, limit)


def test_parse_refuses_what_predict_refuses_before_the_schema(url, tight_url):
    plain = httpx.post(f"{url}/model/parse", content='{"text": "hi"}', headers={"content-type": "text/plain"},
                       timeout=30)
    assert plain.status_code == 415, plain.text
    big = post(tight_url, "/model/parse", b'{"text": "' + b"x" * 5000 + b'"}')
    assert big.status_code == 413 and "INTENTVCS_MAX_BODY_BYTES" in big.json()["error"]
    long = post(tight_url, "/model/parse", {"text": "x" * 41})
    assert long.status_code == 400 and "at most 40 characters" in long.json()["detail"][0]["msg"]


def test_fallback_intent_and_ranking_length_come_from_the_settings(tight_url):
    texts = [text for text in TEXTS if len(text) <= 40]
    inside, outside = one_of_each(tight_url, texts)
    out = post(tight_url, "/model/parse", {"text": outside}).json()
    assert out["intent"]["name"] == FALLBACK and [r["name"] for r in out["intent_ranking"]][0] == FALLBACK
    assert len(out["intent_ranking"]) == 1 + 2  # the fallback, then INTENTVCS_DEFAULT_TOP_K=2
    inn = post(tight_url, "/model/parse", {"text": inside}).json()
    assert inn["intent"]["name"] != FALLBACK and len(inn["intent_ranking"]) == 2
    assert httpx.get(f"{tight_url}/status", timeout=10).json()["fallback_intent"] == FALLBACK


def test_parse_counts_in_the_same_metrics(url):
    def samples() -> dict[str, float]:
        from prometheus_client.parser import text_string_to_metric_families

        text = httpx.get(f"{url}/metrics", timeout=10).text
        found: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == "intentvcs_confidence_count" or s.labels.get("endpoint") == "/model/parse" \
                        and s.name == "bentoml_service_request_duration_seconds_count":
                    found[s.name] = found.get(s.name, 0) + s.value
        return found

    before = samples()
    assert post(url, "/model/parse", {"text": "play some music"}).status_code == 200
    after = samples()
    assert after["intentvcs_confidence_count"] == before["intentvcs_confidence_count"] + 1
    assert after["bentoml_service_request_duration_seconds_count"] == \
        before.get("bentoml_service_request_duration_seconds_count", 0) + 1


# -------------------------------------------------------------------- /status
def test_status_names_what_is_served(url, bundle):
    status = httpx.get(f"{url}/status", timeout=10).json()
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert status["bundle_digest"] == manifest["digest"]
    assert status["labels"] == list(DEFAULT_LABELS)
    assert status["entity_types"] == list(ENTITY_TYPES)
    assert status["provider"] == "CPUExecutionProvider" and status["quantized"] is False
    assert status["fallback_intent"] == "nlu_fallback"
