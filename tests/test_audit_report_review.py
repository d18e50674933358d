"""Review of the audit's outputs: the JSON report against its schema, the HTML page, the pairs CSV and the
example rows a finding shows."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from intentvcs.core.dataio import Example
from intentvcs.service.audit import render
from intentvcs.service.audit.evidence import Scored, examples
from intentvcs.service.audit.report import SCHEMA_PATH
from intentvcs.service.audit.rules import Verdict


def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


# ------------------------------------------------------ a novel intent's examples
def test_a_novel_intents_examples_are_rows_the_service_answers_with_no_existing_intent():
    """The novel rule marks as support the rows accepting none of the *candidates*; a row the model accepts as
    another existing intent (here C, confident) was shown first among the novel intent's examples, its
    ``accepted`` column contradicting "novel". It is a counter-example."""
    labels = ["A", "B", "C"]
    confidences = np.array([[0.1, 0.2, 0.97], [0.4, 0.1, 0.1], [0.3, 0.1, 0.1], [0.9, 0.1, 0.1]])
    accepted = confidences >= 0.5
    rows = [Example(f"row {i}", ("N",)) for i in range(4)]
    support = ~accepted[:, :2].any(axis=1)  # the rule's: no candidate (A, B) accepted
    verdict = Verdict("N", "novel", (), "info", False, "", support)
    good, counter = examples(verdict, Scored(rows, confidences, accepted, confidences), labels, cap=5)
    assert all(not row["accepted"] for row in good), good
    assert [row["text"] for row in good] == ["row 1", "row 2"]
    assert [row["text"] for row in counter] == ["row 0", "row 3"]


def test_a_novel_intent_without_candidates_shows_no_accepted_row_as_an_example():
    labels = ["A", "B"]
    confidences = np.array([[0.2, 0.1], [0.1, 0.8]])
    accepted = confidences >= 0.5
    rows = [Example(f"row {i}", ("N",)) for i in range(2)]
    verdict = Verdict("N", "novel", (), "info", False, "", np.ones(2, dtype=bool))
    good, counter = examples(verdict, Scored(rows, confidences, accepted, confidences), labels, cap=5)
    assert [row["text"] for row in good] == ["row 0"] and [row["text"] for row in counter] == ["row 1"]


def test_other_verdicts_examples_are_unchanged():
    labels = ["A", "B"]
    confidences = np.array([[0.9, 0.1], [0.2, 0.8]])
    accepted = confidences >= 0.5
    rows = [Example(f"row {i}", ("N",)) for i in range(2)]
    verdict = Verdict("N", "duplicate", ("A",), "blocking", False, "", accepted[:, 0])
    good, counter = examples(verdict, Scored(rows, confidences, accepted, confidences), labels, cap=5)
    assert [row["text"] for row in good] == ["row 0"] and [row["text"] for row in counter] == ["row 1"]


# ---------------------------------------------------------- the relations schema
@pytest.mark.parametrize("relation", [
    {"type": "duplicate"},                                         # no names at all
    {"type": "duplicate", "a": "x"},                               # one side missing
    {"type": "subset", "child": "x"},                              # no parent
    {"type": "composite", "composite": "x"},                       # no parts
    {"type": "cover", "parent": "x"},                              # no children
    {"type": "duplicate", "a": "x", "b": "y", "parts": ["p", "q"]},  # another type's field
])
def test_the_schema_refuses_a_relation_without_its_fields(relation):
    """``relation_object`` required only ``type``: a proposed ``{"type": "duplicate"}`` naming no intents, or a
    subset without its parent, validated, though no relations file reader can take it."""
    fix = {"action": "merge", "label_map": {}, "relations": [relation]}
    validator = jsonschema.Draft202012Validator({"$ref": "#/$defs/fix", "$defs": _validator().schema["$defs"]})
    assert list(validator.iter_errors(fix)), relation


@pytest.mark.parametrize("relation", [
    {"type": "duplicate", "a": "x", "b": "y"},
    {"type": "subset", "child": "x", "parent": "y"},
    {"type": "composite", "composite": "x", "parts": ["p", "q"]},
    {"type": "cover", "parent": "x", "children": ["p", "q"]},
])
def test_the_schema_accepts_every_relation_the_report_writes(relation):
    fix = {"action": "merge", "label_map": {}, "relations": [relation]}
    validator = jsonschema.Draft202012Validator({"$ref": "#/$defs/fix", "$defs": _validator().schema["$defs"]})
    assert not list(validator.iter_errors(fix))


# ---------------------------------------------------------- figures on the page
def test_the_page_never_rounds_a_relabel_probability_or_a_confidence_to_all_or_none():
    """The relabel table wrote P(in new intent) 0.9996 as "1.00", and a row's top confidences 0.996 as "1.00" and
    0.0001 as "0.00": all or none where the report says otherwise (every other figure on the page goes through
    ``percent``, which reads ">99%" and "<1%")."""
    relabel = render._relabel_table([{"text": "t", "labels": ["E"], "existing": "E", "probability": 0.9996,
                                      "odds": 9.0, "source": "model"}])
    assert "1.00" not in relabel and "&gt;99%" in relabel, relabel
    rows = render._rows_table([{"text": "t", "accepted": ["A"],
                                "top": [{"intent": "A", "confidence": 0.996}, {"intent": "B", "confidence": 0.0001},
                                        {"intent": "C", "confidence": 1.0}]}], "Examples")
    assert "1.00" not in rows and "0.00" not in rows, rows
    assert "A &gt;99%, B &lt;1%, C 100%" in rows, rows
