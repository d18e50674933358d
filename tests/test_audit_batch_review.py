"""Audit batch review: each test failed on the code before its fix.

An ``Example`` row skipped every check a dict row gets, so a blank text was scored, labels given as a string
became one new intent per character and a row labelled twice with one intent counted as two of its rows.
A ``rows`` that is no collection at all (None, a number) raised a bare TypeError instead of ``AuditInputError``.
A report of a batch without new intents had no ``timing_s.inference``, a figure the report's format lists.
A config whose permutation test can never reach ``same_alpha`` (too few permutations, or an alpha of 0) was
accepted, which silently stops the two-sample test from ever telling two intents apart.
A config whose caps leave fewer rows than ``min_rows`` (``intent_cap`` or ``reference_cap`` below it) was
accepted, under which no containment estimate or two-sample test can ever run.
The audit split rows at connectors other than where the service cuts them (``segmentation.cut``): not at a
connector in full-width letters, which the service cuts, so such chained rows were no composite; and inside a
quotation, a range or before a self-repair, which the service keeps whole.
"""

from __future__ import annotations

import numpy as np
import pytest

from intentvcs.core.dataio import Example
from intentvcs.service.audit import AuditConfig, AuditInputError, audit_batch
from intentvcs.service.audit.segments import splits as segment_splits
from tests.test_audit import FakeEngine, World

CONFIG = AuditConfig(progress=False)


@pytest.fixture(scope="module")
def world() -> World:
    return World()


def _text(world: World, region: str = "X", accept: tuple[str, ...] = ()) -> str:
    return world.utterance("review", region, accept)


@pytest.mark.parametrize("make, reason", [
    (lambda text: Example("   ", ("fresh",)), "'text' is empty"),
    (lambda text: Example(text, "fresh"), "'labels' must be a list of non-empty strings"),
    (lambda text: Example(text, ("fresh", "fresh")), "'labels' has duplicates"),
    (lambda text: Example(text, ("",)), "'labels' must be a list of non-empty strings"),
    (lambda text: Example(text, ("fresh ",)), "fresh "),
])
def test_an_example_row_is_checked_as_a_dict_row_is(world, make, reason):
    text = _text(world)
    world.table["   "] = world.table[text]
    good = [Example(_text(world), ("fresh",))]
    with pytest.raises(AuditInputError, match=rf"^rows\[1\]: .*{reason}"):
        audit_batch(FakeEngine(world.table), good + [make(text)], config=CONFIG)
    with pytest.raises(AuditInputError, match=rf"^training_rows\[0\]: .*{reason}"):
        audit_batch(FakeEngine(world.table), good, [make(text)], config=CONFIG)


def test_a_row_labelled_twice_with_one_intent_is_refused_not_counted_twice(world):
    # Before the fix: one row, reported as 2 rows of "fresh", 2 of them scored.
    with pytest.raises(AuditInputError, match="duplicates"):
        audit_batch(FakeEngine(world.table), [Example(_text(world), ("fresh", "fresh"))], config=CONFIG)


@pytest.mark.parametrize("rows, kind", [(None, "NoneType"), (42, "int")])
def test_rows_that_are_no_collection_are_refused_by_name(world, rows, kind):
    with pytest.raises(AuditInputError, match=rf"^rows: expected a list of rows, got {kind}"):
        audit_batch(FakeEngine(world.table), rows, config=CONFIG)
    if rows is not None:  # training_rows=None is no training rows
        good = [{"text": _text(world), "labels": ["fresh"]}]
        with pytest.raises(AuditInputError, match=rf"^training_rows: expected a list of rows, got {kind}"):
            audit_batch(FakeEngine(world.table), good, rows, config=CONFIG)


def test_a_report_without_new_intents_still_times_its_inference(world):
    rows = [{"text": _text(world, "A", ("A",)), "labels": ["A"]}]
    timing = audit_batch(FakeEngine(world.table), rows, config=CONFIG).to_dict()["summary"]["timing_s"]
    assert set(timing) == {"reading", "inference", "total"} and timing["inference"] == 0.0


@pytest.mark.parametrize("refused, accepted", [
    ({"permutations": 50}, {"permutations": 100}), ({"permutations": 99}, {}),
    ({"permutations": 19, "same_alpha": 0.05}, {"permutations": 20, "same_alpha": 0.05}),
    ({"same_alpha": 0.0}, {"same_alpha": 1.0})])
def test_a_permutation_test_that_can_never_reach_same_alpha_is_refused(refused, accepted):
    # permutations=50: the smallest p-value is 1/51 = 0.0196, never below same_alpha 0.01.
    with pytest.raises(ValueError, match=r"AuditConfig\.(permutations|same_alpha)"):
        AuditConfig(**refused)
    AuditConfig(**accepted)


@pytest.mark.parametrize("overrides, name", [({"intent_cap": 2}, "intent_cap"),
                                             ({"reference_cap": 2}, "reference_cap"),
                                             ({"min_rows": 30, "intent_cap": 20}, "intent_cap")])
def test_a_cap_below_min_rows_is_refused(overrides, name):
    with pytest.raises(ValueError, match=rf"AuditConfig\.{name}"):
        AuditConfig(**overrides)


def test_rows_are_split_where_the_service_cuts_them():
    texts = ['remind me to "buy milk and pay the rent"',        # a quotation holds one value
             "book flights between 4 and 5 pm tomorrow",          # a range
             "turn off the lamps, sorry the lights please",       # a self-repair
             "ｐｌａｙ\u3000ｓｏｍｅ\u3000ｊａｚｚ\u3000ａｎｄ\u3000ｓｅｔ ａｎ ａｌａｒｍ",  # full-width letters
             "play some jazz and set an alarm"]
    assert [(c.row, c.left, c.right) for c in segment_splits(texts)] == [
        (3, "ｐｌａｙ\u3000ｓｏｍｅ\u3000ｊａｚｚ", "ｓｅｔ ａｎ ａｌａｒｍ"), (4, "play some jazz", "set an alarm")]


def test_a_composite_chained_in_full_width_letters_is_found_by_splitting(world):
    """Before the fix the audit found no split in these rows (the service cuts them) and typed them novel."""
    batch = []
    for _ in range(30):
        left, right = world.utterance("ask", "B", ("B",)), world.utterance("ask", "D", ("D",))
        joined = f"{left}\u3000ａｎｄ\u3000{right}"
        world.table[joined] = (world.table[left][0], (world.table[left][1] + world.table[right][1]) / 2)
        batch.append({"text": joined, "labels": ["askBD"]})
    report = audit_batch(FakeEngine(world.table), batch, world.training(), CONFIG)
    v = report.findings[0].verdict
    assert (v.relation, sorted(v.existing)) == ("composite", ["B", "D"]), v.rationale
    assert "split at a connector" in v.rationale


def test_an_intent_accepted_on_exactly_part_min_of_the_rows_is_a_candidate():
    """7 of 100 rows is a part_min of 0.07, which the rules count as enough (7 / 100 >= 0.07); in floats
    0.07 * 100 is 7.000000000000001, and the intent was no candidate."""
    from intentvcs.service.audit.batch import _Audit

    accepted = np.zeros((100, 2), dtype=bool)
    accepted[:7, 0] = True
    audit = _Audit(config=AuditConfig(part_min=0.07), labels=["a", "b"], decision=None, examples=[],
                   members={"n": list(range(100))}, rows_per_intent={"n": 100}, confidences=None, ranking=None, accepted=accepted, ranked=accepted,
                   out_of_scope=None, oos_rule=None, vectors=None, implication=np.zeros((2, 2), dtype=bool),
                   rng=np.random.default_rng(0))
    assert audit.candidates("n")[2] == [0]
