"""Team formats second review: each test failed on the code before its fix.

An entity's Rasa ``role`` or ``group`` ("departure" vs "destination" city) was dropped without a word, both
cities trained and scored as one type; it is now named in a warning at its line. A ``[text](type:value)`` whose value (or type)
holds a '(' ended at the value's own ')', leaving a stray ')' in the example's text; it is refused at its line.
An annotation nested in another's brackets (``[[NYC](city)](place)``) read as the text "[NYC](place)" with a span
over "[NYC", markup trained as words; it is refused at its line.
"""

from __future__ import annotations

import logging

import pytest

from intentvcs.core.team_formats import read_numbered
from tests.test_team_formats_review import _refusal


def _nlu(*examples: str) -> str:
    return ('version: "3.1"\nnlu:\n- intent: fly\n  examples: |\n    - fly home\n'
            + "".join(f"    - {example}\n" for example in examples))


# ------------------------------------------------------------------ role and group
@pytest.mark.parametrize("annotation, said", [
    ('[Berlin]{"entity": "city", "role": "departure"}', "role 'departure'"),
    ('[Berlin]{"entity": "city", "group": "1"}', "group '1'"),
    ('[Berlin][{"entity": "city", "role": "departure"}]', "role 'departure'"),
    ('[Berlin]{"entity": "city", "value": "Berlin", "role": "departure", "group": "2"}', "role 'departure' and group '2'"),
])
def test_an_entity_role_or_group_is_named_at_its_line_not_dropped_silently(tmp_path, caplog, annotation, said):
    """'fly from [Berlin]{... "role": "departure"} to [Paris]{... "role": "destination"}' read as two 'city' spans:
    the distinction the file draws (Rasa's DIET learns it) was gone, without a word. It is still read as its type
    (test_team_formats pins that a role-annotated entity reads), now with a warning naming file and line."""
    path = tmp_path / "nlu.yml"
    path.write_text(_nlu(f"fly from {annotation} to [Paris](city)"), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="intentvcs.core.team_formats"):
        (_, _), (line, example) = read_numbered(path)
    assert line == 6 and example.text == "fly from Berlin to Paris"
    assert [example.text[span.start:span.end] for span in example.spans] == ["Berlin", "Paris"]
    warned = [record.getMessage() for record in caplog.records]
    assert len(warned) == 1 and warned[0].startswith(f"{path}:6: entity annotation [Berlin] gives {said}: ")


def test_an_entity_without_role_or_group_still_reads(tmp_path):
    path = tmp_path / "nlu.yml"
    path.write_text(_nlu('to [NYC]{"entity": "city", "value": "New York", "role": null}'), encoding="utf-8")
    (_, _), (line, example) = read_numbered(path)
    assert line == 6 and example.text == "to NYC"
    assert [(span.start, span.end, span.label) for span in example.spans] == [(3, 6, "city")]


# ------------------------------------------------------------------ a '(' inside the short form
@pytest.mark.parametrize("annotation", ["[NYC](city:New York (US))", "[NYC]((city))"])
def test_a_parenthesis_inside_a_short_annotation_is_refused_not_left_in_the_text(tmp_path, annotation):
    """'fly to [NYC](city:New York (US)) now' read as the text 'fly to NYC) now': the value ended at its own ')'."""
    error = _refusal(tmp_path / "nlu.yml", _nlu(f"fly to {annotation} now"))
    assert error.line == 6
    assert "'('" in error.reason


def test_an_annotation_inside_parentheses_still_reads(tmp_path):
    path = tmp_path / "nlu.yml"
    path.write_text(_nlu("fly (to [NYC](city:New York)) now"), encoding="utf-8")
    (_, _), (_, example) = read_numbered(path)
    assert example.text == "fly (to NYC) now"
    assert [example.text[span.start:span.end] for span in example.spans] == ["NYC"]


# ------------------------------------------------------------------ an annotation nested in another's brackets
@pytest.mark.parametrize("annotation", ["[[NYC](city)](place)", "[New [York](city)"])
def test_an_annotation_whose_text_holds_a_bracket_is_refused(tmp_path, annotation):
    """'[[NYC](city)](place)' read as the text '[NYC](place)' with a 'city' span over '[NYC'."""
    error = _refusal(tmp_path / "nlu.yml", _nlu(f"fly to {annotation} now"))
    assert error.line == 6
    assert "'['" in error.reason
