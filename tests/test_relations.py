"""Label relations: parsing, validation, queries and closure (intentvcs.core.relations)."""

import json

import numpy as np
import pytest

from intentvcs.core.relations import Closure, LabelRelations, RelationsError


def _file(relations, labels=("a", "b", "c", "d", "e"), **extra):
    return {"format": "intentvcs-relations", "format_version": 1, "labels": list(labels),
            "relations": relations, **extra}


RELATIONS = [
    {"type": "duplicate", "a": "a", "b": "b"},
    {"type": "subset", "child": "b", "parent": "c"},
    {"type": "composite", "composite": "e", "parts": ["a", "d"]},
]


def _implied(rel, labels=None):
    """Per label, the set of labels it implies (readable form of the matrix)."""
    order = list(labels or rel.labels)
    matrix = rel.implication_matrix(order)
    return {order[i]: {order[j] for j in np.flatnonzero(matrix[i])} for i in range(len(order))}


def test_implication_matrix_is_the_transitive_closure():
    rel = LabelRelations.from_dict(_file(RELATIONS))
    assert _implied(rel) == {
        "a": {"a", "b", "c"},            # duplicate, then b's parent
        "b": {"a", "b", "c"},
        "c": {"c"},                      # a parent implies nothing below it
        "d": {"d"},
        "e": {"e", "a", "d", "b", "c"},  # parts, and everything a implies
    }


def test_closure_passes_through_labels_not_requested():
    rel = LabelRelations.from_dict(_file([{"type": "subset", "child": "a", "parent": "b"},
                                          {"type": "subset", "child": "b", "parent": "c"}]))
    # b is not a column, yet a still implies c; "oos" is unknown and implies itself only.
    assert _implied(rel, ["c", "a", "oos"]) == {"c": {"c"}, "a": {"a", "c"}, "oos": {"oos"}}


def test_close_on_rows():
    rel = LabelRelations.from_dict(_file(RELATIONS))
    accepted = np.array([[0, 0, 0, 0, 1], [0, 0, 1, 0, 0], [0, 0, 0, 0, 0]], dtype=bool)
    closed = rel.close(accepted)
    assert closed.tolist() == [[True] * 5, [False, False, True, False, False], [False] * 5]
    with pytest.raises(ValueError):
        rel.close(accepted[:, :3])


def test_closure_matches_a_boolean_matrix_product():
    rng = np.random.default_rng(0)
    implication = (rng.random((12, 12)) < 0.15) | np.eye(12, dtype=bool)
    accepted = rng.random((20, 12)) < 0.2
    expected = (accepted.astype(int) @ implication.astype(int)) > 0
    assert np.array_equal(Closure(implication)(accepted), expected)
    assert np.array_equal(Closure(np.eye(12, dtype=bool))(accepted), accepted)


def test_round_trip_through_json_and_file(tmp_path):
    obj = _file(RELATIONS, families={"A": ["a", "b"]}, details={"source": "test"})
    rel = LabelRelations.from_dict(json.loads(json.dumps(obj)))
    assert rel.to_dict() == obj
    rel.save(tmp_path / "relations.json")
    assert LabelRelations.load(tmp_path / "relations.json").to_dict() == obj


def test_queries():
    rel = LabelRelations.from_dict(_file(RELATIONS + [{"type": "duplicate", "a": "d", "b": "c"}],
                                         families={"A": ["a", "b", "c"], "E": ["e"]}))
    assert rel.pairs("duplicate") == {("a", "b"), ("c", "d")}  # symmetric pairs in sorted order
    assert rel.pairs("subset") == {("b", "c")}
    assert rel.pairs("composite") == {("e", "a"), ("e", "d")}
    assert ("subset", "b", "c") in rel.typed_pairs() and len(rel.typed_pairs()) == 5
    assert [r.to_dict()["type"] for r in rel.of_type("subset")] == ["subset"]


@pytest.mark.parametrize("obj, message", [
    (_file([{"type": "subset", "child": "x", "parent": "a"}]), "unknown label"),
    (_file([{"type": "duplicate", "a": "a", "b": 3}]), "non-empty string"),
    (_file([{"type": "twin", "a": "a", "b": "b"}]), "unknown relation type"),
    (_file([{"type": "duplicate", "a": "a", "parent": "b"}]), "has keys"),
    (_file([{"type": "duplicate", "a": "a", "b": "a"}]), "repeats a label"),
    (_file([{"type": "composite", "composite": "e", "parts": ["a"]}]), "at least 2 parts"),
    (_file([{"type": "composite", "composite": "e", "parts": "a"}]), "list of strings"),
    (_file([], labels=["a", "a"]), "listed twice"),
    (_file([], families={"A": ["zzz"]}), "unknown label"),
    (_file({}), "expected a list"),
    ({**_file([]), "format_version": 2}, "format_version"),
    ({**_file([]), "format": "other"}, "format"),
])
def test_validation_errors(obj, message):
    with pytest.raises(RelationsError, match=message):
        LabelRelations.from_dict(obj)


def test_load_names_the_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_file([{"type": "subset", "child": "x", "parent": "a"}])))
    with pytest.raises(RelationsError, match="bad.json"):
        LabelRelations.load(path)


def test_relations_are_discovered_from_what_the_model_accepts_together():
    from intentvcs.core.relation_discovery import discover_relations, with_discovered
    from intentvcs.core.relations import Duplicate, Subset

    labels = ["x", "x_v1", "x_v2", "x_with_e", "y", "oos"]
    # Rows observed as each label (10 apiece), and what the model accepts on them.
    observed = np.repeat(np.eye(len(labels), dtype=bool), 10, axis=0)
    accepted = observed.copy()
    accepted[10:30, 1:3] = True        # x_v1 and x_v2 rows: both versions, always
    accepted[10:30, 0] = True          # ... and x, their parent
    accepted[30:40, 0] = True          # x_with_e rows are x rows too
    accepted[0:5, 3] = True            # half the x rows carry e
    accepted[40:48, 0] = True          # y rows accept x 8 times in 10: under a 0.9 rate
    accepted[50:60, 0] = True          # oos rows: never a relation
    found = set(discover_relations(accepted, observed, labels, min_rate=0.9))
    assert found == {Duplicate("x_v1", "x_v2"), Subset(child="x_v1", parent="x"), Subset(child="x_v2", parent="x"),
                     Subset(child="x_with_e", parent="x")}
    # A lower rate takes y as a subset of x; too few observed rows take nothing.
    assert Subset(child="y", parent="x") in discover_relations(accepted, observed, labels, min_rate=0.8)
    assert discover_relations(accepted, observed, labels, min_rate=0.9, min_rows=11) == []
    with pytest.raises(ValueError, match="min_rate"):
        discover_relations(accepted, observed, labels, min_rate=0.0)
    merged = with_discovered(None, sorted(found, key=repr), labels)
    assert set(merged.relations) == found and merged.details["discovered"]
    assert with_discovered(None, [], labels) is None


def test_a_cover_completes_a_parent_without_children_and_round_trips():
    from intentvcs.core.decision import Decision
    from intentvcs.core.relations import Cover

    labels = ("x", "x_with_e_v1", "x_with_e_v2", "x_without_e", "y")
    relations = LabelRelations.from_dict({
        "format": "intentvcs-relations", "format_version": 1, "labels": list(labels),
        "relations": [{"type": "duplicate", "a": "x_with_e_v1", "b": "x_with_e_v2"},
                      {"type": "cover", "parent": "x", "children": ["x_with_e_v1", "x_with_e_v2", "x_without_e"]}]})
    assert relations.of_type("cover") == [Cover("x", ("x_with_e_v1", "x_with_e_v2", "x_without_e"))]
    assert LabelRelations.from_dict(relations.to_dict()) == relations
    decision = Decision(labels, activation="sigmoid", relations=relations)
    logits = np.array([
        [3.0, -1.0, -2.0, -3.0, -3.0],   # x alone: the most confident child joins, then its duplicate
        [3.0, -3.0, -3.0, -0.5, -3.0],   # x alone again, the other split
        [-3.0, -3.0, -3.0, -3.0, 3.0],   # y: no cover involved
        [-3.0, -3.0, -3.0, 3.0, -3.0],   # a child alone brings its parent (closure), nothing more
    ])
    assert decision.apply(logits).accepted.tolist() == [
        [True, True, True, False, False], [True, False, False, True, False],
        [False, False, False, False, True], [True, False, False, True, False]]
    with pytest.raises(RelationsError, match="at least 2 children"):
        LabelRelations.from_dict({"format": "intentvcs-relations", "format_version": 1, "labels": ["x", "a"],
                                  "relations": [{"type": "cover", "parent": "x", "children": ["a"]}]})


def test_discovery_finds_a_cover_when_the_children_take_the_parents_rows():
    from intentvcs.core.relation_discovery import discover_relations
    from intentvcs.core.relations import Cover

    labels = ["x", "x_with", "x_without"]
    observed = np.repeat(np.eye(3, dtype=bool), 10, axis=0)
    accepted = observed.copy()
    accepted[10:30, 0] = True                      # each split's rows are x rows
    accepted[0:5, 1] = accepted[5:9, 2] = True     # 9 of 10 x rows carry one split or the other
    found = discover_relations(accepted, observed, labels, min_rate=0.9)
    assert Cover("x", ("x_with", "x_without")) in found
    assert Cover("x", ("x_with", "x_without")) not in discover_relations(accepted, observed, labels, min_rate=0.95)


def test_duplicate_groups_follow_duplicates_alone():
    relations = LabelRelations.from_dict({
        "format": "intentvcs-relations", "format_version": 1, "labels": ["x", "x_v1", "x_v2", "y", "y_v1", "z"],
        "relations": [{"type": "duplicate", "a": "x", "b": "x_v1"}, {"type": "duplicate", "a": "x_v1", "b": "x_v2"},
                      {"type": "duplicate", "a": "y", "b": "y_v1"}, {"type": "subset", "child": "z", "parent": "x"}]})
    assert relations.duplicate_groups(["z", "x_v2", "y_v1", "x", "y"]) == [["x_v2", "x"], ["y_v1", "y"]]
    # x_v1 is not a column, yet it links x and x_v2; y's group keeps one column, so it is no group.
    assert relations.duplicate_groups(["x", "x_v2", "y", "z", "oos"]) == [["x", "x_v2"]]


def test_a_pair_implied_both_ways_is_a_duplicate_only_at_a_constant_ratio():
    from intentvcs.core.relation_discovery import constant_ratio, discover_relations
    from intentvcs.core.relations import Duplicate

    # x and x_v1 are two names of one intent; x&y is a composite that holds x too: on rows written x or x_v1
    # the model accepts all three, so each pair is implied both ways.
    labels = ["x", "x_v1", "x&y", "y"]
    observed = np.repeat(np.eye(4, dtype=bool), 10, axis=0)
    accepted = observed.copy()
    accepted[:30, :3] = True
    rng = np.random.default_rng(0)
    probs = np.zeros((40, 4))
    # The names keep a 1:1 ratio on every row; the composite is a third on composite turns (rows 20-29),
    # where each name is a ninth, and near nothing on turns of x alone (rows 0-19), where each name is a half.
    probs[:20] = [0.49, 0.49, 0.02, 0.0]
    probs[20:30] = [1 / 9, 1 / 9, 1 / 3, 4 / 9]
    probs[30:] = [0.0, 0.0, 0.05, 0.95]
    probs[:30, :2] *= rng.uniform(0.9, 1.1, size=(30, 1))
    probs /= probs.sum(axis=1, keepdims=True)
    assert constant_ratio(probs, 0, 1) and not constant_ratio(probs, 0, 2)
    assert not constant_ratio(probs[:4], 0, 1)  # too few rows to tell
    duplicates = lambda found: {r for r in found if isinstance(r, Duplicate)}
    assert duplicates(discover_relations(accepted, observed, labels, 0.8)) == {
        Duplicate("x", "x_v1"), Duplicate("x", "x&y"), Duplicate("x_v1", "x&y")}
    assert duplicates(discover_relations(accepted, observed, labels, 0.8, probs=probs)) == {Duplicate("x", "x_v1")}
