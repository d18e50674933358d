"""Defects found by a review of label relations (loading, closure, cover completion, discovery), one test
or more each, and the closure semantics the review checked (kept as tests so they stay true)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from intentvcs.core.decision import Decision, DecisionError
from intentvcs.core.oos import ThresholdRule
from intentvcs.core.relation_discovery import decide_with_discovered
from intentvcs.core.relations import (Composite, Cover, Duplicate, LabelRelations, RelationsError, Subset,
                                      relation_from_dict)


def _file(relations, labels=("a", "b", "c")):
    return {"format": "intentvcs-relations", "format_version": 1, "labels": list(labels), "relations": relations}


def _answers(labels, accepted):
    return [[label for label, on in zip(labels, row) if on] for row in accepted]


def _complete(relations, labels, accepted, confidences):
    """What the decision layer does after its thresholds: closure, then cover completion."""
    closure, completion = relations.closure(labels), relations.completion(labels)
    closed = closure(np.asarray(accepted, dtype=bool))
    return completion(closed, np.asarray(confidences, dtype=float), closure) if completion else closed


# -- 1. a missing relations file is a RelationsError naming it, not a bare "[Errno 2]" -------------------------

def test_a_missing_relations_file_names_the_file_and_the_reason(tmp_path):
    with pytest.raises(RelationsError, match=r"missing\.json: relations file not found"):
        LabelRelations.load(tmp_path / "missing.json")
    with pytest.raises(RelationsError, match=r"is a directory, not a relations file"):
        LabelRelations.load(tmp_path)


def test_train_with_a_missing_relations_file_says_so(tmp_path, capsys):
    from intentvcs.cli import exit_codes
    from intentvcs.cli.main import main

    train, valid = tmp_path / "train.jsonl", tmp_path / "valid.jsonl"
    train.write_text('{"text": "play music", "labels": ["play"]}\n{"text": "stop it", "labels": ["stop"]}\n',
                     encoding="utf-8")
    valid.write_text('{"text": "play a song", "labels": ["play"]}\n{"text": "stop now", "labels": ["stop"]}\n',
                     encoding="utf-8")
    code = main(["train", "--train", str(train), "--valid", str(valid), "--out", str(tmp_path / "ckpt"),
                 "--relations", str(tmp_path / "missing.json")])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT
    assert "missing.json: relations file not found" in err and "Errno" not in err


# -- 2. a relation "type" that is a list or an object is a RelationsError, not a TypeError (exit 3) -------------

@pytest.mark.parametrize("kind", [["subset"], {"subset": 1}])
def test_an_unhashable_relation_type_is_refused_with_its_place(kind):
    body = _file([{"type": kind, "child": "a", "parent": "b"}])
    with pytest.raises(RelationsError, match=r"relations\[0\]: unknown relation type"):
        LabelRelations.from_dict(body)
    with pytest.raises(RelationsError, match="unknown relation type"):
        relation_from_dict({"type": kind})
    # Inside a decision (checkpoint.json, a bundle manifest) it is the decision's error, naming the field.
    decision = Decision(("a", "b", "c")).to_dict()
    decision["relations"] = body
    with pytest.raises(DecisionError, match=r"relations: relations\[0\]: unknown relation type"):
        Decision.from_dict(decision)


# -- 3. JSON that Python's reader cannot take is a RelationsError naming the file -------------------------------

def test_a_relations_file_nested_past_the_recursion_limit_names_file_and_line(tmp_path):
    path = tmp_path / "relations.json"
    path.write_text('{"format": "intentvcs-relations",\n "details": ' + "[" * 100_000 + "]" * 100_000 + "}",
                    encoding="utf-8")
    with pytest.raises(RelationsError, match=r"relations\.json:2: not JSON this intentvcs reads: nested deeper"):
        LabelRelations.load(path)


def test_a_relations_file_with_an_integer_past_pythons_digit_limit_names_the_file(tmp_path):
    path = tmp_path / "relations.json"
    path.write_text('{"format": "intentvcs-relations", "format_version": ' + "1" * 5000 + "}", encoding="utf-8")
    with pytest.raises(RelationsError, match=r"relations\.json: not JSON this intentvcs reads: .*digits"):
        LabelRelations.load(path)


# -- 4. cover completion does not depend on the order the relations are written in -----------------------------

def test_a_cover_satisfied_by_a_label_another_completion_implies_takes_no_child_of_its_own():
    # x is covered by a and b; a is a duplicate of x, so x always brings a: x's cover never needs a child.
    # y is covered by x and b. A row accepting y alone takes x (its likelier child), x brings a: nothing more.
    labels = ("x", "a", "b", "y")
    relations = [Cover("x", ("a", "b")), Duplicate("x", "a"), Cover("y", ("x", "b"))]
    confidences = [[0.97, 0.21, 0.55, 0.23]]
    for order in itertools.permutations(relations):
        answer = _answers(labels, _complete(LabelRelations(labels, order), labels, [[0, 0, 0, 1]], confidences))
        assert answer == [["x", "a", "y"]], order  # b was added when y's cover came first


def test_overlapping_covers_complete_the_same_whatever_their_order():
    # Two covers of one parent that share a child (a given cover and a discovered one, say): each takes its
    # most confident child, whichever is read first.
    labels = ("p", "a", "b", "c")
    relations = [Cover("p", ("a", "b")), Cover("p", ("c", "b"))]
    confidences = [[0.9, 0.1, 0.3, 0.4]]
    answers = {tuple(map(tuple, _answers(labels, _complete(LabelRelations(labels, order), labels,
                                                           [[1, 0, 0, 0]], confidences))))
               for order in itertools.permutations(relations)}
    assert answers == {(("p", "b", "c"),)}


def test_a_tie_between_children_goes_to_the_first_column_whatever_the_cover_lists_first():
    labels = ("p", "a", "b")
    for children in (("a", "b"), ("b", "a")):
        relations = LabelRelations(labels, (Cover("p", children),))
        assert _answers(labels, _complete(relations, labels, [[1, 0, 0]], [[0.9, 0.3, 0.3]])) == [["p", "a"]]


def test_cover_completion_is_independent_of_relation_order_on_random_relations():
    rng = np.random.default_rng(2)
    for _ in range(1500):
        n = int(rng.integers(3, 7))
        labels = tuple(f"l{i}" for i in range(n))
        relations = []
        for _ in range(int(rng.integers(1, 5))):
            kind = rng.integers(0, 4)
            if kind == 0:
                a, b = rng.choice(n, 2, replace=False)
                relations.append(Duplicate(labels[a], labels[b]))
            elif kind == 1:
                a, b = rng.choice(n, 2, replace=False)
                relations.append(Subset(labels[a], labels[b]))
            else:
                c = rng.choice(n, 3, replace=False)
                relations.append(Cover(labels[c[0]], (labels[c[1]], labels[c[2]])))
        accepted, confidences = rng.random((8, n)) < 0.3, rng.random((8, n))
        forward = _complete(LabelRelations(labels, tuple(relations)), labels, accepted, confidences)
        backward = _complete(LabelRelations(labels, tuple(relations[::-1])), labels, accepted, confidences)
        assert np.array_equal(forward, backward), relations
        again = _complete(LabelRelations(labels, tuple(relations)), labels, forward, confidences)
        assert np.array_equal(again, forward)  # idempotent


# -- 5. discovery reads no relation into the decision's own cover completion -----------------------------------

def test_discovery_does_not_read_a_cover_completion_as_a_duplicate():
    # p is covered by a and b. On p's rows the model accepts p alone, a its likelier split: the decision's
    # completion adds a on every p row, and a's rows bring p (a child implies its parent). That is no
    # evidence that every p is an a: b's rows are p rows too.
    labels = ("p", "a", "b")
    decision = Decision(labels, activation="sigmoid", relations=LabelRelations(labels, (Cover("p", ("a", "b")),)))
    logits = np.array([[3.0, -1.0, -2.0]] * 10 + [[3.0, 3.0, -3.0]] * 10 + [[3.0, -3.0, 3.0]] * 10)
    observed = np.repeat(np.eye(3, dtype=bool), 10, axis=0)
    decided, found = decide_with_discovered(decision, logits, observed, 0.8)
    assert Duplicate("p", "a") not in found and Subset("p", "a") not in found
    # A row accepting p and b keeps its answer: no relation puts a into it.
    assert _answers(labels, decided.apply(np.array([[3.0, -3.0, 3.0]])).accepted) == [["p", "b"]]


def test_discovery_still_finds_what_the_models_answers_say_beside_known_relations():
    labels = ("p", "a", "b", "v")
    decision = Decision(labels, activation="sigmoid", relations=LabelRelations(labels, (Cover("p", ("a", "b")),)))
    # v's rows accept a, a's rows accept v: two names of one intent, read off the model's answers.
    logits = np.array([[3.0, -3.0, -3.0, -3.0]] * 10 + [[3.0, 3.0, -3.0, 3.0]] * 10
                      + [[3.0, -3.0, 3.0, -3.0]] * 10 + [[3.0, 3.0, -3.0, 3.0]] * 10)
    observed = np.repeat(np.eye(4, dtype=bool), 10, axis=0)
    _, found = decide_with_discovered(decision, logits, observed, 0.8)
    assert Duplicate("a", "v") in found and Subset("a", "p") in found and Subset("b", "p") in found


# -- what the review checked and found right ---------------------------------------------------------------

def test_closure_semantics_chains_cycles_composites_and_nothing_unimplied():
    labels = ("a", "b", "c", "d", "e")

    def closed(relations, accepted):
        row = np.array([[label in accepted for label in labels]])
        return _answers(labels, LabelRelations(labels, tuple(relations)).close(row))[0]

    assert closed([Subset("a", "b"), Subset("b", "c")], {"a"}) == ["a", "b", "c"]  # transitive
    assert closed([Subset("a", "b"), Subset("b", "c")], {"c"}) == ["c"]             # a parent implies no child
    assert closed([Subset("a", "b"), Subset("b", "a")], {"b"}) == ["a", "b"]        # mutual subsets: one intent
    assert closed([Duplicate("a", "b"), Duplicate("b", "c"), Duplicate("c", "a")], {"c"}) == ["a", "b", "c"]
    assert closed([Composite("a", ("b", "c")), Subset("c", "d")], {"a"}) == ["a", "b", "c", "d"]
    assert closed([Composite("a", ("b", "c")), Duplicate("c", "d")], {"d"}) == ["c", "d"]  # a part implies no composite
    for self_relation in ({"type": "subset", "child": "a", "parent": "a"}, {"type": "duplicate", "a": "a", "b": "a"}):
        with pytest.raises(RelationsError, match="repeats a label"):
            LabelRelations.from_dict(_file([self_relation]))
    with pytest.raises(RelationsError, match=r"unknown label\(s\) \['z'\]"):
        LabelRelations.from_dict(_file([{"type": "subset", "child": "a", "parent": "z"}]))


def test_an_out_of_scope_row_gains_no_label_through_closure_or_completion():
    labels = ("p", "a", "b")
    relations = LabelRelations(labels, (Cover("p", ("a", "b")), Duplicate("a", "b")))
    decision = Decision(labels, activation="sigmoid", relations=relations, oos=ThresholdRule(0.5))
    result = decision.apply(np.array([[-1.0, -2.0, -3.0], [3.0, -3.0, -3.0]]))
    assert result.out_of_scope.tolist() == [True, False]
    assert _answers(labels, result.accepted) == [[], ["p", "a", "b"]]


def test_a_bad_relations_file_is_refused_with_the_file_and_reason(tmp_path):
    path = tmp_path / "relations.json"
    path.write_text(json.dumps(_file([{"type": "superset", "child": "a", "parent": "b"}])), encoding="utf-8")
    with pytest.raises(RelationsError, match=r"relations\.json: relations\[0\]: unknown relation type 'superset'"):
        LabelRelations.load(path)
    path.write_text('{\n  "labels": [1,\n}', encoding="utf-8")
    with pytest.raises(RelationsError, match=r"relations\.json: not JSON: .*line 3"):
        LabelRelations.load(path)


def test_discovery_reads_nothing_off_fewer_than_min_rows_and_is_deterministic():
    from intentvcs.core.relation_discovery import MIN_ROWS, discover_relations

    labels = ["x", "y", "z"]
    observed = np.zeros((3 * MIN_ROWS, 3), dtype=bool)
    observed[: MIN_ROWS - 1, 0] = True              # x written on one row too few
    observed[MIN_ROWS:2 * MIN_ROWS, 1] = True       # y on enough rows
    observed[2 * MIN_ROWS:, 2] = True
    accepted = observed.copy()
    accepted[: 2 * MIN_ROWS, :2] = True              # x and y accepted together on their rows
    found = discover_relations(accepted, observed, labels, min_rate=0.8)
    # y's rows say y implies x; x's four rows say nothing, so no duplicate, only the subset y's rows show.
    assert found == [Subset(child="y", parent="x")]
    assert found == discover_relations(accepted.copy(), observed.copy(), labels, min_rate=0.8)
