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
confidence in the ranking.
"""

from __future__ import annotations

from typing import Any, Mapping

EXTRACTOR = "intentvcs"  # Rasa names the component that found an entity


def parse_answer(answer: Mapping[str, Any], fallback_intent: str) -> dict[str, Any]:
    """Rasa's parse result for one engine answer (``Engine.predict``), plus ``accepted`` and ``out_of_scope``.

    ``intent`` is the top-ranked label when in scope (as Rasa's classifiers
    answer; ``accepted`` keeps the multi-label decision), else the fallback.
    """
    ranking = [{"name": ranked["intent"], "confidence": ranked["confidence"]} for ranked in answer["intents"]]
    if answer["out_of_scope"]:
        top = ranking[0]["confidence"] if ranking else 0.0
        intent = {"name": fallback_intent, "confidence": 1.0 - top}
        ranking = [intent, *ranking]
    else:
        intent = ranking[0]
    return {
        "text": answer["text"],
        "intent": intent,
        "intent_ranking": ranking,
        "entities": [rasa_entity(entity) for entity in answer["entities"]],
        "accepted": list(answer["accepted"]),
        "out_of_scope": bool(answer["out_of_scope"]),
    }


def rasa_entity(entity: Mapping[str, Any]) -> dict[str, Any]:
    """One engine entity (``{entity, value, start, end, confidence}``) as Rasa's extractors write it."""
    return {"entity": entity["entity"], "start": entity["start"], "end": entity["end"], "value": entity["value"],
            "confidence_entity": entity["confidence"], "extractor": EXTRACTOR}
