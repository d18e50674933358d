"""Merging label relations again keeps every merge's details, and relations read off a model's answers
name only its intents, never the out-of-scope verdict "oos" (the train OOS rule's column)."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from intentvcs.core.dataio import Example
from intentvcs.core.decision import Decision
from intentvcs.core.oos import OOS_LABEL, TrainRule
from intentvcs.core.outputs import GraphOutputs
from intentvcs.core.relation_discovery import decide_with_discovered, discover_relations, with_discovered
from intentvcs.core.relations import Duplicate, LabelRelations, RelationsError, Subset, extend_relations
from intentvcs.training.config import DecisionConfig
from intentvcs.training.decision_fit import fit_decision

# -- 1. a re-merge keeps the details of every merge ------------------------------------------------------------


def test_discovering_again_keeps_what_an_earlier_discovery_recorded():
    labels = ["a", "b", "c"]
    once = with_discovered(None, [Subset("a", "b")], labels)
    twice = with_discovered(once, [Subset("c", "b")], labels)
    assert set(twice.relations) == {Subset("a", "b"), Subset("c", "b")}
    # Both relations are held, and the details say where both came from (the second merge dropped the first).
    assert twice.details["discovered"] == [Subset("a", "b").to_dict(), Subset("c", "b").to_dict()]


def test_a_merge_applied_twice_changes_nothing_details_included():
    labels = ["a", "b", "c"]
    known = LabelRelations(tuple(labels), (Duplicate("a", "b"),), details={"benchmark": "snips-vcs", "seed": 0})
    found = [Subset("c", "b")]
    once = with_discovered(known, found, labels)
    assert with_discovered(once, found, labels) == once
    assert once.details == {"benchmark": "snips-vcs", "seed": 0, "discovered": [Subset("c", "b").to_dict()]}


def test_the_data_sets_details_and_an_audits_findings_survive_later_merges():
    labels = ["a", "b", "x", "y"]
    builder = {"benchmark": "snips-vcs", "seed": 0, "pivots": {"a": "state"}, "versioned": ["a"]}
    known = LabelRelations(tuple(labels), (Duplicate("a", "b"),), details=builder)
    kept = copy.deepcopy(known.details)
    audited = extend_relations(known, labels, [Subset("x", "a")],
                               {"audit": {"proposed_by": "intentvcs-audit-report", "findings": {"x": "subset"}}})
    again = extend_relations(audited, labels, [Duplicate("y", "b")],
                             {"audit": {"proposed_by": "intentvcs-audit-report", "findings": {"y": "duplicate"}},
                              "pivots": {"b": "artist"}, "versioned": ["b"]})
    discovered = with_discovered(again, [Subset("b", "a")], labels)
    details = discovered.details
    assert {k: details[k] for k in ("benchmark", "seed")} == {"benchmark": "snips-vcs", "seed": 0}
    assert details["audit"] == {"proposed_by": "intentvcs-audit-report", "findings": {"x": "subset", "y": "duplicate"}}
    assert details["pivots"] == {"a": "state", "b": "artist"} and details["versioned"] == ["a", "b"]
    assert details["discovered"] == [Subset("b", "a").to_dict()]
    assert known.details == kept  # the relations merged into are left as they were
    # What is written is what is read back.
    assert LabelRelations.from_dict(json.loads(json.dumps(discovered.to_dict()))) == discovered


def test_where_two_merges_say_different_things_of_one_detail_the_relations_held_first_keep_theirs():
    known = LabelRelations(("a", "b"), (), details={"seed": 0, "audit": {"findings": {"x": "subset"}}})
    merged = extend_relations(known, ["a", "b"], [], {"seed": 1, "audit": {"findings": {"x": "duplicate"}},
                                                      "extra": [1, {"k": 2}]})
    assert merged.details == {"seed": 0, "audit": {"findings": {"x": "subset"}}, "extra": [1, {"k": 2}]}


# -- 2. relations name the model's intents, never the out-of-scope verdict -------------------------------------


def test_discovered_relations_do_not_list_the_out_of_scope_verdict_among_their_labels():
    labels = ["a", "b", OOS_LABEL]
    merged = with_discovered(None, [Subset("a", "b")], labels)
    assert merged.labels == ("a", "b")
    known = LabelRelations(("a", "b"), (Duplicate("a", "b"),))
    assert with_discovered(known, [], labels).labels == ("a", "b")
    assert with_discovered(known, [Subset("a", "b")], [OOS_LABEL, "b", "a"]).labels == ("a", "b")


def test_a_found_relation_naming_the_out_of_scope_verdict_is_refused_by_name():
    with pytest.raises(RelationsError, match=r"subset \['a', 'oos'\] names 'oos', the out-of-scope verdict"):
        with_discovered(None, [Subset("a", OOS_LABEL)], ["a", "b", OOS_LABEL])


def test_a_train_rule_decision_discovers_relations_over_its_intents_alone():
    labels = ("a", "b", OOS_LABEL)
    decision = Decision(labels, activation="sigmoid", oos=TrainRule.fit(labels))
    # b's rows accept a: b is a subset of a; "oos" rows accept a too, which says nothing of an intent.
    logits = np.array([[3.0, -3.0, -3.0]] * 10 + [[3.0, 3.0, -3.0]] * 10 + [[3.0, -3.0, 3.0]] * 10)
    observed = np.repeat(np.eye(3, dtype=bool), 10, axis=0)
    decided, found = decide_with_discovered(decision, logits, observed, 0.8)
    assert found == [Subset("b", "a")]
    assert decided.relations.labels == ("a", "b")
    assert decided.apply(np.array([[-3.0, 3.0, -3.0]])).accepted.tolist() == [[True, True, False]]
    assert Decision.from_dict(json.loads(json.dumps(decided.to_dict()))).relations == decided.relations


def test_fitting_with_the_train_rule_and_discovery_stores_relations_without_the_verdict():
    labels = ["a", "b", OOS_LABEL]
    rng = np.random.default_rng(1)
    observed = np.repeat(np.eye(3, dtype=bool), 30, axis=0)
    logits = np.where(observed, 3.0, -3.0) + rng.normal(0, 0.2, observed.shape)
    logits[observed[:, 1], 0] = 3.0  # b rows: a is accepted as well
    rows = [Example(f"row {i}", (labels[int(observed[i].argmax())],)) for i in range(len(observed))]
    outputs = GraphOutputs(logits, rng.normal(size=(len(rows), 4)), rng.normal(size=(len(rows), 4)))
    config = DecisionConfig(oos_rule="train", discover_relations=0.9)
    decision, report = fit_decision(labels, "sigmoid", rows, outputs, rows, None, config)
    assert report["discovered_relations"] == [{"type": "subset", "child": "b", "parent": "a"}]
    assert decision.relations.labels == ("a", "b")
    assert OOS_LABEL not in decision.relations.to_dict()["labels"]


def test_discovery_itself_reads_no_relation_of_the_verdict():
    """What ``with_discovered`` refuses, ``discover_relations`` never produces: "oos" rows that accept an intent
    every time make no relation."""
    labels = ["a", OOS_LABEL]
    observed = np.repeat(np.eye(2, dtype=bool), 10, axis=0)
    accepted = np.ones_like(observed)
    assert discover_relations(accepted, observed, labels, 0.8) == []


def test_an_audits_fix_over_a_train_rule_models_labels_lists_no_out_of_scope_verdict():
    """``extend_relations`` is where every merge (an audit's fix over ``model.labels``, discovery) drops the train
    rule's "oos" column: the audit's fix listed it among the relations' labels."""
    merged = extend_relations(None, ["a", "b", OOS_LABEL, "new"], [Subset("new", "a")], {"audit": {}})
    assert merged.labels == ("a", "b", "new")
