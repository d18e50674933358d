"""Rasa endpoint review: each test failed on the code before its fix.

Under the ``train`` out-of-scope rule (``--oos-rule train``) the ``oos`` class, which is the rule's verdict and
no intent, was mapped into Rasa's answer as one: an out-of-scope message's fallback intent got 1 - the ``oos``
class's own confidence (the surer the model was that the message is out of scope, the lower the fallback's
confidence) and ``intent_ranking[1]``, the intent Rasa's two-stage fallback asks the user to affirm, was
``oos``; and an in-scope message whose ``oos`` class tied the top intent at 1.0 was answered with ``intent``
``oos``, a name no Rasa domain has, while ``accepted`` named the intent.
"""

from __future__ import annotations

import pytest

from intentvcs.core.oos import OOS_LABEL
from intentvcs.service.rasa import parse_answer


def _train_rule_answer(intents: list[tuple[str, float]], accepted: list[str], out_of_scope: bool) -> dict:
    """An engine answer (``Engine.predict``'s shape) from a bundle under the train rule: ``oos`` is a label
    column, ranked among the intents, and the verdict is its score against the best other."""
    oos = dict(intents)[OOS_LABEL]
    best_other = max(confidence for name, confidence in intents if name != OOS_LABEL)
    return {"text": "what is the meaning of life", "normalised": None,
            "intents": [{"intent": name, "confidence": confidence} for name, confidence in intents],
            "accepted": accepted, "entities": [], "out_of_scope": out_of_scope,
            "parts": [{"start": 0, "end": 27, "text": "what is the meaning of life", "accepted": accepted,
                       "out_of_scope": out_of_scope}],
            "oos": {"rule": "train", "score": oos - best_other, "threshold": 0.0}}


def test_under_the_train_rule_an_out_of_scope_message_is_the_fallback_not_the_oos_class():
    answer = _train_rule_answer([(OOS_LABEL, 0.9), ("GetWeather", 0.2), ("PlayMusic", 0.05)], [], True)
    parsed = parse_answer(answer, "nlu_fallback")
    # 1 - the best in-scope reading (GetWeather), as for every other rule; it was 1 - 0.9 (the verdict's own).
    assert parsed["intent"] == {"name": "nlu_fallback", "confidence": pytest.approx(0.8)}
    # What Rasa's ActionDefaultAskAffirmation offers ("did you mean ...?") is intent_ranking[1]: an intent.
    assert [r["name"] for r in parsed["intent_ranking"]] == ["nlu_fallback", "GetWeather", "PlayMusic"]
    assert parsed["out_of_scope"] is True and parsed["accepted"] == []


def test_under_the_train_rule_an_in_scope_message_never_names_the_oos_class():
    # Both clipped at 1.0: the verdict's score is 0, not out of scope, but the oos column ranks first (its
    # unclipped p / c is the larger).
    answer = _train_rule_answer([(OOS_LABEL, 1.0), ("GetWeather", 1.0), ("PlayMusic", 0.1)], ["GetWeather"], False)
    parsed = parse_answer(answer, "nlu_fallback")
    assert parsed["intent"] == {"name": "GetWeather", "confidence": 1.0} == parsed["intent_ranking"][0]
    assert OOS_LABEL not in [r["name"] for r in parsed["intent_ranking"]]
    assert parsed["accepted"] == ["GetWeather"] and parsed["out_of_scope"] is False


def test_under_the_train_rule_a_ranking_cut_to_the_oos_class_alone_still_names_an_intent():
    """INTENTVCS_DEFAULT_TOP_K=1: the one ranked entry is the oos column (tied with the accepted intent)."""
    answer = _train_rule_answer([(OOS_LABEL, 1.0), ("GetWeather", 1.0)], ["GetWeather"], False)
    answer["intents"] = answer["intents"][:1]
    parsed = parse_answer(answer, "nlu_fallback")
    assert parsed["intent"] == {"name": "GetWeather", "confidence": 1.0}
    assert parsed["intent_ranking"] == [parsed["intent"]]


def test_a_label_named_oos_under_another_rule_is_an_intent_like_any_other():
    """Only the train rule reads the oos column as its verdict (``refit`` keeps it an intent otherwise)."""
    answer = _train_rule_answer([(OOS_LABEL, 0.9), ("GetWeather", 0.2)], [OOS_LABEL], False)
    answer["oos"] = {"rule": "threshold", "score": 0.1, "threshold": 0.4}
    parsed = parse_answer(answer, "nlu_fallback")
    assert parsed["intent"] == {"name": OOS_LABEL, "confidence": 0.9}
    assert [r["name"] for r in parsed["intent_ranking"]] == [OOS_LABEL, "GetWeather"]


def test_a_train_rule_bundles_out_of_scope_answers_offer_an_intent_to_affirm(tmp_path, monkeypatch):
    """The engine's own answers under the train rule (a tiny bundle whose decision is the train rule): out of
    scope, the oos class is the top confidence, and the fallback's is 1 - the best intent's."""
    import intentvcs.core.oos as oos
    from intentvcs.service.engine import Engine
    from tests.helpers.bundle import make_tiny_bundle

    # make_tiny_checkpoint builds its decision with ThresholdRule(threshold): the train rule in its place.
    monkeypatch.setattr(oos, "ThresholdRule", lambda threshold: oos.TrainRule(0))
    bundle = make_tiny_bundle(tmp_path, labels=(OOS_LABEL, "PlayMusic", "BookRestaurant", "GetWeather"), seed=3)
    monkeypatch.undo()
    engine = Engine(bundle, provider="cpu", threads=1)
    assert engine.info["oos_rule"] == "train"
    answers = engine.predict(["what is the meaning of life", "find the movie schedule", "play some music",
                              "book a table for two tonight in paris", "hello"], top_k=10)
    outside = [answer for answer in answers if answer["out_of_scope"]]
    assert outside and any(not answer["out_of_scope"] for answer in answers)  # the seed gives both
    for answer in answers:
        parsed = parse_answer(answer, "nlu_fallback")
        names = [ranked["name"] for ranked in parsed["intent_ranking"]]
        assert OOS_LABEL not in names and parsed["intent"]["name"] != OOS_LABEL
        if answer["out_of_scope"]:
            best = max(i["confidence"] for i in answer["intents"] if i["intent"] != OOS_LABEL)
            assert answer["intents"][0]["intent"] == OOS_LABEL  # the verdict: strictly the top confidence
            assert parsed["intent"] == {"name": "nlu_fallback", "confidence": pytest.approx(1 - best)}
            assert names[1] == max((i for i in answer["intents"] if i["intent"] != OOS_LABEL),
                                   key=lambda i: i["confidence"])["intent"]
