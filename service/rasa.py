"""The engine's answer in the shape of Rasa's NLU server (``POST /model/parse``).

A Rasa assistant whose ``endpoints.yml`` names an NLU server (``nlu: url:``)
posts ``{"text", "message_id", "token"}`` to ``<url>/model/parse`` and reads
``intent``, ``intent_ranking`` and ``entities`` from the answer (Rasa's
``RasaNLUHttpInterpreter``). Mapping one engine answer here, and only here,
keeps ``/model/parse`` a second view of ``/predict``'s decision, never a
second decision.

Out of scope is Rasa's ``FallbackClassifier``'s job in a Rasa pipeline, and
its answer is copied: ``intent`` becomes the fallback intent
(``INTENTVCS_FALLBACK_INTENT``, default ``nlu_fallback``), which is also put
first in ``intent_ranking`` ahead of the ranked labels (first by position,
as Rasa inserts it, not by confidence). Its confidence is ``1 - `` the top
label's calibrated confidence (how far the best in-scope reading falls
short), a value in [0, 1] whatever the bundle's OOS rule; the rule's own
score is not one (a distance rule's score is a distance), and Rasa's choice,
the fallback threshold, has no counterpart for such rules. It can be lower
than the top label's (an utterance at 0.55 under a 0.6 cut-off gets 0.45):
a client decides on ``intent`` or ``out_of_scope``, never on the largest
confidence in the ranking. Under the ``train`` rule the ``oos`` class is that
rule's verdict, no intent: it is left out of ``intent_ranking`` (and so never
``intent``, nor the top label the fallback's confidence is read from), as
Rasa's ranking holds intents and its two-stage fallback offers
``intent_ranking[1]`` to the user to affirm.

Two kinds of text are answered without the model, as Rasa's own server
answers them. A button's payload (``"/affirm"``, ``'/set_alarm{"time": "7
am"}'``, ``"/deny@0.8"``: Rasa posts it to ``/model/parse`` like any message,
and its two-stage fallback is built on such buttons) is the intent it names,
at confidence 1 (or the ``@`` value), with the entities its JSON gives
(``payload_answer``). A text with nothing to read (Rasa strips a message of
spaces to ``""``) is the fallback intent, where a refusal would reach the
assistant as an empty intent that matches no rule.
"""

from __future__ import annotations

import json
import logging
import math
import re
from typing import Any, Mapping

from intentvcs.core.oos import OOS_LABEL, TrainRule

EXTRACTOR = "intentvcs"  # Rasa names the component that found an entity
# A button's payload, in the format of Rasa's RegexMessageHandler: "/" then the intent, an optional
# "@confidence" and an optional JSON object of entity values, e.g. '/set_alarm@0.9{"time": "7 am"}'.
# Stricter than Rasa, which checks the name against its domain and reads anything after the entities as
# nothing: this service does not see the domain, so the name holds no white space and the payload must
# match whole (a user's "/ what time is it" is a message; Rasa's buttons never send more).
PAYLOAD = re.compile(r"/(?P<intent>[^{@\s]+)(?P<confidence>@[0-9.]+)?(?P<entities>\{.+\})?", re.DOTALL)
PAYLOAD_EXTRACTOR = "RegexMessageHandler"  # the Rasa component that reads payloads; their entities come from it
# How deep a payload's entity JSON may nest (the object of entities is level 1). Rasa sets no bound, but an
# answer's value sits four levels down in it and pydantic's serialiser stops at about 255, past which the
# request failed: a button's entity values are scalars or short lists, and 32 levels leaves room to spare.
MAX_PAYLOAD_DEPTH = 32
log = logging.getLogger(__name__)


def parse_answer(answer: Mapping[str, Any], fallback_intent: str) -> dict[str, Any]:
    """Rasa's parse result for one engine answer (``Engine.predict``), plus ``accepted`` and ``out_of_scope``.

    ``intent`` is the top-ranked label when in scope (as Rasa's classifiers
    answer; ``accepted`` keeps the multi-label decision), else the fallback.
    A chained request ("X and Y") names its first request's intent, ranked
    first: its requests' intents all rank near the top (several capped at
    1.0), and an assistant acting on ``intent`` alone should act on what the
    user asked first, not on whichever of them ranks highest.
    """
    verdict = _verdict_label(answer)
    ranking = [{"name": ranked["intent"], "confidence": ranked["confidence"]} for ranked in answer["intents"]
               if ranked["intent"] != verdict]
    if answer["out_of_scope"]:
        top = ranking[0]["confidence"] if ranking else 0.0
        intent = {"name": fallback_intent, "confidence": 1.0 - top}
        ranking = [intent, *ranking]
    else:
        if not ranking:
            # A ranking cut (top_k 1) to the train rule's oos class alone: the most confident accepted intent takes
            # its place. In scope, a message decided whole ranks it first only when it ties the top intent (the
            # rule's verdict is the oos class strictly above every other), whose confidence it then has; a chained
            # one answered part by part may rank it higher (the whole text out of scope, a part in scope), and the
            # intent is then shown with the oos class's confidence, the one figure such a ranking holds.
            ranking = [{"name": answer["accepted"][0], "confidence": answer["intents"][0]["confidence"]}]
        first = _first_request_intent(answer)
        intent = next((ranked for ranked in ranking if ranked["name"] == first), ranking[0])
        ranking = [intent, *(ranked for ranked in ranking if ranked is not intent)]
    return {
        "text": answer["text"],
        "intent": intent,
        "intent_ranking": ranking,
        "entities": [rasa_entity(entity) for entity in answer["entities"]],
        "accepted": list(answer["accepted"]),
        "out_of_scope": bool(answer["out_of_scope"]),
    }


def _verdict_label(answer: Mapping[str, Any]) -> str | None:
    """The label that is the OOS rule's verdict, no intent (the train rule's ``oos`` class), or None."""
    return OOS_LABEL if (answer.get("oos") or {}).get("rule") == TrainRule.name else None


def _first_request_intent(answer: Mapping[str, Any]) -> str | None:
    """The first intent of the first in-scope request of a chained answer (its ``parts`` in text order), or
    None for an answer of one request."""
    requests = [part for part in answer.get("parts") or () if part["accepted"] and not part["out_of_scope"]]
    if len(requests) < 2:
        return None
    return min(requests, key=lambda part: part["start"])["accepted"][0]


def rasa_entity(entity: Mapping[str, Any]) -> dict[str, Any]:
    """One engine entity (``{entity, value, start, end, confidence}``) as Rasa's extractors write it."""
    return {"entity": entity["entity"], "start": entity["start"], "end": entity["end"], "value": entity["value"],
            "confidence_entity": entity["confidence"], "extractor": EXTRACTOR}


def payload_answer(text: str) -> dict[str, Any] | None:
    """The parse of a button's payload (``PAYLOAD``), or None when ``text`` is not one (anything after the
    entities, too, makes it a message for the model).

    The intent is taken as named: the payload comes from the assistant's own
    buttons, and its domain, which this service does not see, may hold intents
    the model was not trained on (``/affirm``, ``/out_of_scope``). A malformed
    confidence reads as 0, one over 1 as 1, and entity JSON that is not an object
    as no entities, each with a warning, as Rasa reads them; entities span the
    whole payload, as Rasa's do. Entity JSON that no answer can carry (nested
    deeper than ``MAX_PAYLOAD_DEPTH``, escaping a lone surrogate, or a number
    JSON cannot write: ``NaN``, ``Infinity``, ``1e400``) also reads as no
    entities, with a warning, where Rasa would keep it.
    """
    payload = text.strip()
    match = PAYLOAD.fullmatch(payload)
    if match is None:
        return None
    intent = {"name": match["intent"], "confidence": _payload_confidence(match["confidence"], payload)}
    start = len(text) - len(text.lstrip())
    return {"text": text, "intent": intent, "intent_ranking": [dict(intent)],
            "entities": _payload_entities(match["entities"], payload, start, start + len(payload)),
            "accepted": [intent["name"]], "out_of_scope": False}


def _payload_confidence(given: str | None, payload: str) -> float:
    if given is None:
        return 1.0
    try:
        return min(1.0, float(given[1:]))
    except ValueError:
        log.warning("payload %r: confidence %r is not a number; read as 0", payload[:200], given[:50])
        return 0.0


def _payload_entities(given: str | None, payload: str, start: int, end: int) -> list[dict[str, Any]]:
    if given is None:
        return []
    try:
        values = json.loads(given)
    except (ValueError, RecursionError):  # not JSON (JSONDecodeError is a ValueError), or an integer past
        values = None                     # Python's digit limit, or nested past its recursion limit
    if not isinstance(values, dict):
        log.warning("payload %r: its entities are not a JSON object; read as none", payload[:200])
        return []
    if not _answerable(values, MAX_PAYLOAD_DEPTH):
        # Not read as Rasa reads them: no answer can carry them (which held the request until BentoML's
        # timeout, then answered a plain-text 500), so the payload's intent is answered without them.
        log.warning("payload %r: its entities nest deeper than %d levels or hold an escaped lone surrogate or "
                    "a non-finite number, which no answer can carry; read as none", payload[:200],
                    MAX_PAYLOAD_DEPTH)
        return []
    return [{"entity": entity, "start": start, "end": end, "value": value, "confidence_entity": 1.0,
             "extractor": PAYLOAD_EXTRACTOR}
            for entity, given_values in values.items()
            for value in (given_values if isinstance(given_values, list) else [given_values])]


def _answerable(value: Any, levels: int) -> bool:
    """Whether a JSON value (``json.loads``'s) can be sent in an answer: nested at most ``levels`` deep, every
    string (keys too) encodable as UTF-8, which an escaped lone surrogate (``"\\ud800"``) is not, and every
    number finite: ``json.loads`` reads ``NaN``, ``Infinity`` and ``1e400`` as floats JSON has no word for,
    which the answer wrote as ``null``, a value the payload never gave."""
    if isinstance(value, str):
        return _utf8(value)
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (dict, list)):
        if levels < 1:
            return False
        if isinstance(value, dict):
            return all(_utf8(key) and _answerable(item, levels - 1) for key, item in value.items())
        return all(_answerable(item, levels - 1) for item in value)
    return True  # an integer, a boolean or null


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def nothing_to_read(text: str) -> dict[str, Any]:
    """The engine-shaped answer for a text with nothing to read (``parse_answer`` makes it the fallback)."""
    return {"text": text, "intents": [], "accepted": [], "entities": [], "out_of_scope": True}
