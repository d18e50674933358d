"""One pass over an upgrade batch (``intentvcs.service.audit.sampling``): per new intent a uniform
sample of at most ``cap`` rows, per existing intent a few reference rows, every count of the whole batch;
and the audit's verdicts on a capped sample are those of the whole batch."""

from collections import Counter

import pytest

from intentvcs.core.dataio import Example
from intentvcs.service.audit import AuditConfig, audit_batch, render_html
from intentvcs.service.audit.sampling import sample_batch
from tests.test_audit import EXPECTED, FakeEngine, World, _batch


def _rows(spec: list[tuple[str, ...]]) -> list[Example]:
    return [Example(f"row {i}", labels) for i, labels in enumerate(spec)]


def test_every_new_intent_keeps_at_most_cap_rows_and_every_count_is_of_the_whole_batch():
    rows = _rows([("new",)] * 50 + [("old",)] * 30 + [("new", "other")] * 5 + [("old", "new")] * 5)
    sample = sample_batch(rows, ["old"], cap=10, reference_cap=4, seed=0)
    assert sample.new_intents == ["new", "other"]
    assert sample.batch_rows == 90 and sample.audited_rows == 60
    assert sample.rows_per_intent == {"new": 60, "other": 5}
    assert [len(sample.members[name]) for name in ("new", "other")] == [10, 5]
    # Each kept row is scored once, in batch order, and every sample points at rows of its own intent.
    assert len({id(row) for row in sample.rows}) == len(sample.rows) <= 15
    assert [int(row.text.split()[1]) for row in sample.rows] == sorted(int(row.text.split()[1]) for row in sample.rows)
    for name, members in sample.members.items():
        assert all(name in sample.rows[i].labels for i in members)
    # References: rows of existing intents only, never rows that carry a new intent.
    assert len(sample.existing["old"]) == 4 and all(row.labels == ("old",) for row in sample.existing["old"])


def test_the_sample_is_uniform_over_the_intents_rows():
    rows = _rows([("new",)] * 20)
    chosen = Counter(row.text for seed in range(2000)
                     for row in sample_batch(rows, [], cap=5, reference_cap=1, seed=seed).rows)
    # Each row is kept with probability 5/20: 500 of 2000 draws, standard deviation about 19.
    assert len(chosen) == 20 and all(400 < count < 600 for count in chosen.values()), chosen


def test_the_same_seed_keeps_the_same_rows():
    rows = _rows([("new",)] * 100)
    first, second = (sample_batch(rows, [], cap=7, reference_cap=1, seed=3) for _ in range(2))
    assert [row.text for row in first.rows] == [row.text for row in second.rows]


@pytest.fixture(scope="module")
def world() -> World:
    return World()


def test_a_capped_sample_of_a_streamed_batch_gives_the_whole_batchs_verdicts(world):
    batch, training = _batch(world), world.training()
    config = AuditConfig(progress=False, intent_cap=25)  # each new intent has 40 rows
    report = audit_batch(FakeEngine(world.table), iter(batch), training, config)
    found = {f.verdict.intent: f for f in report.findings}
    for intent, (relation, existing, severity) in EXPECTED.items():
        v = found[intent].verdict
        assert (v.relation, tuple(sorted(v.existing)), v.severity) == (relation, existing, severity), v.rationale
        assert (found[intent].rows, found[intent].scored_rows) == (40, 25)
    document = report.to_dict()
    summary = document["summary"]
    assert summary["batch_rows"] == summary["audited_rows"] == len(batch)
    assert summary["scored_rows"] == 25 * len(EXPECTED)
    assert "40 rows, figures from a seeded sample of 25" in render_html(document)
