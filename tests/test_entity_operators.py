"""The operators that replace entity values (LAUG's slot-value replacement,
RADDLE's unseen entities), their value pools, and that without a pool the
registry's random sets and augmentation draw exactly what they drew before."""

from __future__ import annotations

import random

import pytest

from intentvcs.core.dataio import Example, Span
from intentvcs.core.perturb import (FAMILIES, OPERATORS, VALUE_OPERATORS, EntityValues, augment, mix_values,
                                    perturb, perturbed_copies, random_set, usable)
from intentvcs.core.perturb.text import replace_spans
from intentvcs.core.perturb.values import ValuePool


def row(text: str, *spans: tuple[str, str], labels: tuple[str, ...] = ("flight",)) -> Example:
    """An example whose spans are given by (substring, label), found left to right."""
    found, cursor = [], 0
    for sub, label in spans:
        start = text.index(sub, cursor)
        found.append(Span(start, start + len(sub), label))
        cursor = start + len(sub)
    return Example(text, labels, id=text[:8], spans=tuple(found))


def values_of(example: Example) -> list[str]:
    return [example.text[s.start:s.end] for s in example.spans]


TEST = [
    row("fly from boston to denver tonight", ("boston", "from"), ("denver", "to"), ("tonight", "time")),
    row("Fly from Austin to New York", ("Austin", "from"), ("New York", "to")),
    row("fly from chicago to denver at 7 pm", ("chicago", "from"), ("denver", "to"), ("7 pm", "time")),
    row("show me flights", labels=("list",)),
]
TRAIN = [row("fly from boston to seattle", ("boston", "from"), ("seattle", "to")),
         row("a flight to NEW YORK", ("NEW YORK", "city"))]


def test_pools_merge_spellings_and_subtract_training_values_of_any_type():
    values = EntityValues.build(TEST, train=TRAIN)
    assert values.data.by_type == {"from": ("Austin", "boston", "chicago"), "time": ("7 pm", "tonight"),
                                   "to": ("denver", "New York")}
    # "boston" was a training value; "New York" was one too, under another type.
    assert values.unseen.by_type == {"from": ("Austin", "chicago"), "time": ("7 pm", "tonight"), "to": ("denver",)}
    assert values.summary() == {"types": 3, "values": 7, "unseen_values": 5, "unseen_checked_against_training": True}
    unchecked = EntityValues.build(TEST)
    assert unchecked.unseen == unchecked.data and not unchecked.checked
    assert ValuePool.of([row("New  York", ("New  York", "to")), row("new york", ("new york", "to"))]).by_type == {
        "to": ("New  York",)}
    assert not EntityValues.build(TEST[3:]) and EntityValues.build(TEST)


def test_replace_spans_moves_later_spans_only():
    e = TEST[0]
    out = replace_spans(e, {0: "san francisco", 2: "now"})
    assert out.text == "fly from san francisco to denver now"
    assert values_of(out) == ["san francisco", "denver", "now"]
    assert [s.label for s in out.spans] == ["from", "to", "time"]
    assert replace_spans(e, {1: "denver"}) is None  # nothing changed


def test_slot_value_replacement_swaps_one_value_for_another_of_its_type():
    values = EntityValues.build(TEST)
    seen = set()
    for seed in range(20):
        out = perturb(TEST[0], "slot_value_replacement", seed, values)
        changed = [(old, new) for old, new in zip(values_of(TEST[0]), values_of(out)) if old != new]
        assert len(changed) == 1
        old, new = changed[0]
        label = TEST[0].spans[values_of(TEST[0]).index(old)].label
        assert new.lower() in {v.lower() for v in values.data.by_type[label]}
        assert new == new.lower()  # lower-case text keeps lower-case values
        seen.add(changed[0])
    assert {old for old, _ in seen} == {"boston", "denver", "tonight"}
    # "to" has "new york" besides "denver": the cased row takes it as the data spelled it.
    assert {perturb(TEST[1], "slot_value_replacement", s, values).text for s in range(20)} >= {
        "Fly from boston to New York", "Fly from chicago to New York", "Fly from Austin to denver"}


def test_value_operators_do_not_apply_without_spans_values_or_an_alternative():
    values = EntityValues.build(TEST)
    for name in VALUE_OPERATORS:
        assert perturb(TEST[3], name, 0, values) is None  # no span
        assert perturb(TEST[0], name, 0) is None  # no pool
        assert OPERATORS[name](TEST[0], random.Random(0)) is None  # called as op(example, rng)
        lonely = row("fly to paris", ("paris", "to"))
        assert perturb(lonely, name, 0, EntityValues.build([lonely])) is None  # no other value


def test_unseen_entities_uses_only_values_no_training_row_has():
    values = EntityValues.build(TEST, train=TRAIN)
    training = {v.lower() for ex in TRAIN for v in values_of(ex)}
    for seed in range(20):
        out = perturb(TEST[0], "unseen_entities", seed, values)
        new = values_of(out)
        # every entity with an unseen alternative is replaced: boston, tonight; denver has none left
        assert new[1] == "denver" and new[0] in {"austin", "chicago"} and new[2] == "7 pm"
        assert not {v.lower() for v in new[:1]} & training
    # a row whose only alternatives were training values is left alone
    assert perturb(row("to seattle", ("seattle", "to")), "unseen_entities", 0, values).text == "to denver"
    assert perturb(row("to denver", ("denver", "to")), "unseen_entities", 0, values) is None


def test_a_value_already_in_the_row_is_drawn_last():
    both = row("from denver to boston", ("denver", "city"), ("boston", "city"))
    values = EntityValues.build([both, row("paris", ("paris", "city"))])
    for seed in range(20):
        first, second = values_of(perturb(both, "unseen_entities", seed, values))
        assert first != second


# -- the registry without a pool: as before these operators existed ----------------------------------
DATA = [Example(f"book a table for {n} people at noon", ("book",), id=f"r{n}") for n in range(2, 9)] + TEST


def test_without_values_random_sets_and_mixes_leave_the_value_operators_out():
    old = [n for n in OPERATORS if n not in VALUE_OPERATORS]
    assert usable(OPERATORS) == old and usable(OPERATORS, EntityValues.build(TEST)) == list(OPERATORS)
    assert random_set(DATA, seed=3) == random_set(DATA, seed=3, operators=old)
    assert perturbed_copies(DATA, 2.0, None, seed=1) == perturbed_copies(DATA, 2.0, dict.fromkeys(old, 1.0), seed=1)
    old_laug = [n for n in FAMILIES["laug"] if n not in VALUE_OPERATORS]
    assert (perturbed_copies(DATA, 1.0, {"laug": 1.0}, seed=2)
            == perturbed_copies(DATA, 1.0, dict.fromkeys(old_laug, 1 / len(old_laug)), seed=2))
    with pytest.raises(ValueError, match="slot_value_replacement need entity values"):
        augment(DATA, 1.0, {"slot_value_replacement": 1.0})


def test_augmentation_can_draw_slot_values_from_the_training_rows():
    values = EntityValues.build(TEST, train=TEST)
    copies = perturbed_copies(TEST, 3.0, {"slot_value_replacement": 1.0, "unseen_entities": 1.0}, 0, values)
    assert copies and {c.meta["perturbation"] for _, c in copies} == {"slot_value_replacement"}
    for index, copy in copies:
        assert copy.labels == TEST[index].labels and len(copy.spans) == len(TEST[index].spans)


def test_a_mix_gets_the_rows_values_only_when_it_names_a_value_operator():
    # Uniform mixes and families keep their recorded draws (no values); naming the operator asks for them.
    assert mix_values(TEST, None) is None and mix_values(TEST, {"laug": 1.0}) is None
    values = mix_values(TEST, {"slot_value_replacement": 1.0, "typo_keyboard": 1.0})
    assert values == EntityValues.build(TEST, train=TEST) and "denver" in values.data.by_type["to"]
    copies = perturbed_copies(TEST, 2.0, {"slot_value_replacement": 1.0}, 0, values)
    assert any(values_of(copy) != values_of(TEST[index]) for index, copy in copies)
