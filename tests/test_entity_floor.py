"""The entity floor: fitted on validation spans, stored in the decision, applied to every answer and figure."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from intentvcs.cli.options import floor_or_fit
from intentvcs.core.dataio import Example, Span
from intentvcs.core.decision import Decision, DecisionError
from intentvcs.core.entities import Entity
from intentvcs.core.entity_floor import FLOORS, fit_floor
from intentvcs.core.evaluation import evaluate
from intentvcs.core.outputs import GraphOutputs, tuple_array
from intentvcs.core.segmentation import decide_segmented
from intentvcs.training.config import DecisionConfig
from intentvcs.training.decision_fit import fit_decision

LABELS = ("play", "lights")
TEXT = "play jazz in the kitchen"
JAZZ, KITCHEN = Span(5, 9, "genre"), Span(17, 24, "room")


def rows(n: int = 20) -> list[Example]:
    return [Example(TEXT, ("play",), spans=(JAZZ, KITCHEN)) for _ in range(n)]


def found(*entities: tuple[int, int, str, float]) -> tuple[Entity, ...]:
    return tuple(Entity(label, start, end, confidence) for start, end, label, confidence in entities)


def outputs(per_text: list[tuple[Entity, ...]], logits: list[list[float]] | None = None) -> GraphOutputs:
    n = len(per_text)
    scores = np.array(logits if logits is not None else [[4.0, -4.0]] * n)
    return GraphOutputs(scores, np.zeros((n, 2)), np.zeros((n, 2)), tuple_array(per_text))


def test_the_fitted_floor_drops_the_unsure_wrong_entities_and_keeps_the_sure_right_ones():
    # Right entities decoded at 0.9 and 0.55, a wrong one on every row at 0.35: any floor in (0.35, 0.55]
    # gives perfect F1, and the lowest such floor of the grid is chosen.
    per_text = [found((5, 9, "genre", 0.9), (17, 24, "room", 0.55), (0, 4, "genre", 0.35))] * 20
    floor, scores = fit_floor(rows(), tuple_array(per_text))
    assert floor == 0.4 and scores["0.4"] == scores["0.5"] == {"slot_f1": 1.0, "entities_exact": 1.0}
    assert scores["0.0"]["slot_f1"] == pytest.approx(0.8) and scores["0.0"]["entities_exact"] == 0.0
    assert scores["0.6"]["slot_f1"] == pytest.approx(2 / 3, abs=1e-5)
    assert set(scores) == {f"{f:.1f}" for f in FLOORS}


def test_a_floor_that_wins_f1_but_breaks_rows_is_not_chosen():
    """Ten rows whose second entity is right but unsure (0.3), four rows of many unsure wrong entities and one
    sure wrong one: a floor of 0.4 raises slot F1 (0.57 -> 0.67: the wrong spans outnumber the right ones it
    drops) but leaves no row exact where floor 0 had ten; within one row of floor 0's exact rows, floor 0 is
    the best."""
    examples, per_text = [], []
    for _ in range(10):
        examples.append(Example(TEXT, ("play",), spans=(JAZZ, KITCHEN)))
        per_text.append(found((5, 9, "genre", 0.9), (17, 24, "room", 0.3)))
    for _ in range(4):
        examples.append(Example(TEXT, ("play",), spans=(JAZZ,)))
        per_text.append(found((5, 9, "genre", 0.9), (0, 4, "genre", 0.9), *[(k, k + 1, "room", 0.35) for k in range(8)]))
    floor, scores = fit_floor(examples, tuple_array(per_text))
    assert scores["0.4"]["slot_f1"] > scores["0.0"]["slot_f1"] and scores["0.4"]["entities_exact"] == 0.0
    assert floor == 0.0


def test_a_tie_keeps_every_entity_and_rows_without_gold_spans_fit_nothing():
    right = tuple_array([found((5, 9, "genre", 0.2), (17, 24, "room", 0.3))] * 20)
    assert fit_floor(rows(), right)[0] == 0.0  # every right entity must stay: floor 0 is the best
    no_spans = [Example(TEXT, ("play",)) for _ in range(5)] + [Example("hello", ())]
    assert fit_floor(no_spans, tuple_array([found((5, 9, "genre", 0.2))] * 6)) is None


def test_the_decision_keeps_entities_at_or_above_its_floor_and_round_trips():
    decision = Decision(LABELS, entity_floor=0.5)
    per_text = tuple_array([found((5, 9, "genre", 0.5), (17, 24, "room", 0.49)), ()])
    kept = decision.kept_entities(per_text)
    assert [[e.label for e in row] for row in kept] == [["genre"], []]
    assert [list(row) for row in decision.kept_entities(kept)] == [list(row) for row in kept]  # idempotent
    assert Decision(LABELS).kept_entities(per_text) is per_text and decision.kept_entities(None) is None
    assert Decision.from_dict(decision.to_dict()).entity_floor == 0.5


def test_a_decision_written_before_the_floor_existed_keeps_every_entity():
    stored = Decision(LABELS).to_dict()
    del stored["entity_floor"]
    assert Decision.from_dict(stored).entity_floor == 0.0


@pytest.mark.parametrize("floor", [1.0, -0.1, float("nan"), "high", True])
def test_a_floor_outside_0_to_1_is_refused_by_name(floor):
    with pytest.raises(DecisionError, match="entity_floor"):
        Decision(LABELS, entity_floor=floor)


def test_fit_decision_fits_the_floor_on_validation_or_takes_the_one_given():
    valid = rows()
    per_text = [found((5, 9, "genre", 0.9), (17, 24, "room", 0.55), (0, 4, "genre", 0.35))] * 20
    graph = outputs(per_text)
    fitted, report = fit_decision(LABELS, "sigmoid", valid, graph, valid, None, DecisionConfig(oos_rule="none"))
    assert fitted.entity_floor == 0.4
    assert report["entity_floor"]["fitted"] and report["entity_floor"]["valid"]["0.4"]["slot_f1"] == 1.0
    given, report = fit_decision(LABELS, "sigmoid", valid, graph, valid, None,
                                 DecisionConfig(oos_rule="none", entity_floor=0.7))
    assert given.entity_floor == 0.7 and report["entity_floor"] == {"floor": 0.7, "fitted": False}
    intents_only = outputs(per_text)._replace(entities=None)
    plain, report = fit_decision(LABELS, "sigmoid", valid, intents_only, valid, None, DecisionConfig(oos_rule="none"))
    assert plain.entity_floor == 0.0 and "entity_floor" not in report


@pytest.mark.parametrize("floor", ["fitted", 1.0, -0.5, True])
def test_the_setting_is_fit_or_a_number_in_0_to_1(floor):
    with pytest.raises(ValueError, match="entity_floor"):
        DecisionConfig(entity_floor=floor)


def test_the_command_line_reads_fit_or_a_floor():
    assert floor_or_fit("fit") == "fit" and floor_or_fit("0.4") == 0.4 and floor_or_fit("0") == 0.0
    for bad in ("1", "-0.2", "auto"):
        with pytest.raises(argparse.ArgumentTypeError):
            floor_or_fit(bad)


def test_answers_and_figures_show_only_the_entities_above_the_floor():
    """What the service answers (decide_segmented) and what evaluate scores: the same floored entities,
    the parts of a chained request as well as whole texts."""
    decision = Decision(LABELS, activation="sigmoid", entity_floor=0.5)
    chained = "play jazz and turn on the kitchen lights"

    def infer(texts):
        per_text = []
        for text in texts:
            jazz = text.find("jazz")
            per_text.append(found(*([(jazz, jazz + 4, "genre", 0.3)] if jazz >= 0 else []),
                                  *([(text.find("kitchen"), text.find("kitchen") + 7, "room", 0.8)]
                                    if "kitchen" in text else [])))
        logits = [[4.0 if "play" in t else -4.0, 4.0 if "lights" in t else -4.0] for t in texts]
        return outputs(per_text, logits)

    graph, segmented = decide_segmented(decision, infer, [TEXT, chained])
    assert [[e.label for e in row] for row in graph.entities] == [["room"], ["room"]]
    assert len(segmented.parts[1]) == 2  # answered part by part: the parts' entities are floored too
    figures = evaluate(decision, infer([TEXT]), [Example(TEXT, ("play",), spans=(KITCHEN,))], include_tables=False)
    assert figures["slot_precision"] == 1.0 and figures["slot_f1"] == 1.0


def test_a_floor_that_costs_exactly_one_exact_row_may_be_chosen():
    """Counted in rows, not rounded shares: on three rows, a floor that breaks one row's set (row 1's right
    but unsure entity) and wins F1 (row 2's unsure wrong ones) is within the rule; a rounded share once
    refused it. Two rows lost are refused."""
    wrong = [(k, k + 1, "room", 0.35) for k in range(10, 14)]
    examples = [Example(TEXT, ("play",), spans=(JAZZ,)) for _ in range(3)]
    per_text = [found((5, 9, "genre", 0.3)), found((5, 9, "genre", 0.9), (0, 4, "room", 0.9), *wrong),
                found((5, 9, "genre", 0.9))]
    floor, scores = fit_floor(examples, tuple_array(per_text))
    assert scores["0.0"]["entities_exact"] == pytest.approx(2 / 3, abs=1e-5)
    assert scores["0.4"]["entities_exact"] == pytest.approx(1 / 3, abs=1e-5)
    assert scores["0.4"]["slot_f1"] > scores["0.0"]["slot_f1"] and floor == 0.4
    # Row 3 unsure too, and more unsure wrong entities on row 2: floor 0.4 still wins F1, but breaks two rows.
    per_text[1] = found((5, 9, "genre", 0.9), (0, 4, "room", 0.9), *[(k, k + 1, "room", 0.35) for k in range(10, 22)])
    per_text[2] = found((5, 9, "genre", 0.3))
    floor, scores = fit_floor(examples, tuple_array(per_text))
    assert scores["0.4"]["slot_f1"] > scores["0.0"]["slot_f1"]
    assert scores["0.4"]["entities_exact"] == 0.0 and floor == 0.0


def test_rows_labelled_oos_are_out_of_scope_for_the_floor():
    """The OOS rule "train" hands the decision its out-of-scope rows labelled "oos"; their (absent) spans
    must not pick the floor, as evaluate scores in-scope rows only."""
    in_scope = [Example(TEXT, ("play",), spans=(JAZZ,)) for _ in range(4)]
    out_of_scope = [Example("what is the meaning of life", ("oos",)) for _ in range(8)]
    per_text = [found((5, 9, "genre", 0.3))] * 4 + [found((23, 27, "genre", 0.35))] * 8
    floor, scores = fit_floor(in_scope + out_of_scope, tuple_array(per_text))
    assert floor == 0.0 and scores["0.0"]["slot_f1"] == 1.0


def test_the_exports_agreement_figures_count_the_entities_answered():
    """Two readings that differ only in an entity under the floor answer alike: the int8 report's 'answers
    differ' and the parity report's entity-set agreement say so (they counted it as a difference)."""
    from intentvcs.export.parity import compare
    from intentvcs.export.quantize import answers_differ

    decision = Decision(LABELS, activation="sigmoid", entity_floor=0.5)
    first = outputs([found((5, 9, "genre", 0.9))] * 2)
    second = outputs([found((5, 9, "genre", 0.9), (17, 24, "room", 0.2))] * 2)
    assert answers_differ(first, second, decision) == 0
    assert compare(first, second, decision, [TEXT, TEXT])["entity_set_agreement"] == 1.0
    assert answers_differ(first, second, Decision(LABELS, activation="sigmoid")) == 2
