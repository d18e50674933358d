"""The upgrade audit (intentvcs.service.audit) on synthetic batches with known relations.

A fake engine returns controlled logits and pooled vectors per text, and the
real ``intentvcs.core.decision.Decision`` (sigmoid, threshold 0.5) decides, so each
case pins down what the model "accepts" and where utterances lie.

Geometry: every existing intent has a centroid in R^24; intent A has two
sub-regions, ``a1`` (60 % of A) and the pivot region ``a2`` (40 %), so that a
new intent drawn from ``a2`` is a genuine subset of A. P and K carry a known
relation (K is a child of P) that the decision layer closes over.
"""

from __future__ import annotations

import dataclasses
import json
import time
import typing

import numpy as np
import pytest

from intentvcs.core.decision import Decision
from intentvcs.core.oos import ThresholdRule
from intentvcs.core.outputs import GraphOutputs
from intentvcs.core.relations import LabelRelations, Subset
from intentvcs.service.audit import (
    SCHEMA_PATH,
    AuditConfig,
    AuditInputError,
    audit_batch,
    pairs_csv,
    render_html,
)
from intentvcs.service.audit.containment import (
    existing_in_new,
    independent_accepted,
    normalise,
    two_sample_test,
    wilson,
)
from intentvcs.service.audit.segments import splits as segment_splits

H = 24
EXISTING = ("A", "B", "C", "D", "P", "K")
A_MIX = ("a1", "a1", "a1", "a2", "a2")  # A's rows: 60 % a1, 40 % a2
KNOWN = LabelRelations(labels=EXISTING, relations=(Subset(child="K", parent="P"),))


class FakeEngine:
    """An ``intentvcs.core.predictor.Predictor`` (``labels``, ``decision``, ``info``, ``infer``) over a fixed table."""

    def __init__(self, table: dict[str, tuple[np.ndarray, np.ndarray]], relations=KNOWN):
        self.labels = list(EXISTING)
        self.decision = Decision(self.labels, activation="sigmoid", relations=relations)
        self.table = table
        self.info = {"bundle": "fake"}
        self.calls = 0
        self.references = None  # the model's sample of its training rows (None: it keeps none)

    def reference_rows(self):
        return self.references

    def infer(self, texts):
        self.calls += 1
        logits = np.stack([self.table[t][0] for t in texts])
        pooled = np.stack([self.table[t][1] for t in texts])
        return GraphOutputs(logits, pooled, pooled)


class World:
    """Generates utterances: a text, its logits (accepted labels) and its pooled vector."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        basis = np.linalg.qr(self.rng.normal(size=(H, H)))[0]
        self.centres = {name: basis[i] * 3.0 for i, name in enumerate(EXISTING + ("X", "Y"))}
        # A's pivot region: A's centre moved along an unused axis.
        self.centres["a1"] = self.centres["A"]
        self.centres["a2"] = self.centres["A"] + basis[10] * 1.5
        self.centres["BD"] = (self.centres["B"] + self.centres["D"]) / 2
        self.table: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def utterance(self, tag: str, region: str, accept: tuple[str, ...], second: tuple[str, ...] = ()) -> str:
        """A new text; ``accept`` get confident logits, ``second`` a runner-up logit below the threshold."""
        text = f"{tag} {region} #{len(self.table)}"
        logits = np.full(len(EXISTING), -6.0) + self.rng.normal(0, 0.5, len(EXISTING))
        for name in second:
            logits[EXISTING.index(name)] = -1.0
        for name in accept:
            logits[EXISTING.index(name)] = 6.0
        pooled = self.centres[region] + self.rng.normal(0, 0.35, H)
        self.table[text] = (logits.astype(np.float32), pooled.astype(np.float32))
        return text

    def rows(self, label: str, n: int, region: str | tuple[str, ...], accept=(), accept_rate=1.0,
             second=()) -> list[dict]:
        """``n`` rows labelled ``label``; regions cycle; ``accept`` on the first ``accept_rate`` share.

        ``accept`` may be a function of the region; ``second`` (same forms) ranks
        second without being accepted.
        """
        regions = (region,) if isinstance(region, str) else region
        out = []
        for i in range(n):
            reg = regions[i % len(regions)]
            accepted = accept if i < round(accept_rate * n) else ()
            accepted = (accepted(reg) if callable(accepted) else accepted) or ()
            runner_up = (second(reg) if callable(second) else second) or ()
            out.append({"text": self.utterance(label, reg, accepted, runner_up), "labels": [label]})
        return out

    def training(self, per_label: int = 60) -> list[dict]:
        rows = []
        for name in EXISTING:
            region = A_MIX if name == "A" else name
            accept = ("K", "P") if name == "K" else (name,)
            # B and C are siblings: each is the other's habitual runner-up.
            second = {"B": ("C",), "C": ("B",)}.get(name, ())
            rows += self.rows(name, per_label, region, accept, second=second)
        return rows


def _batch(world: World) -> list[dict]:
    """One new intent per relation type, plus borderline cases that must come out novel."""
    per_region = {"B": ("B",), "C": ("C",)}
    return (
        world.rows("dupA", 40, A_MIX, ("A",), 0.95)
        + world.rows("subA", 40, "a2", ("A",), 0.95)
        + world.rows("superBC", 40, ("B", "C"), per_region.get, 1.0)
        + world.rows("compBD", 40, "BD", ("B", "D"), 0.9)
        + world.rows("novelX", 40, "X")
        # Embedded right inside A, but the model accepts A on only 20 %: overlap without containment.
        + world.rows("nearA", 40, A_MIX, ("A",), 0.2)
        # Half of it is B, the other half lies elsewhere and is accepted as nothing: a generic intent that
        # absorbs B and adds scope of its own, so a superset of B.
        + world.rows("halfB", 40, ("B", "Y"), per_region.get, 1.0)
        + world.rows("dupK", 40, "K", ("K", "P"), 0.95)
    )


@pytest.fixture(scope="module")
def world() -> World:
    return World()


@pytest.fixture(scope="module")
def audited(world):
    batch = _batch(world)
    training = world.training()
    engine = FakeEngine(world.table)
    report = audit_batch(engine, batch, training, AuditConfig(progress=False))
    return report, {f.verdict.intent: f for f in report.findings}


EXPECTED = {
    "dupA": ("duplicate", ("A",), "blocking"),
    "subA": ("subset", ("A",), "warning"),
    "superBC": ("superset", ("B", "C"), "warning"),
    "compBD": ("composite", ("B", "D"), "warning"),
    "novelX": ("novel", (), "info"),
    "nearA": ("novel", (), "info"),
    "halfB": ("superset", ("B",), "warning"),
    # K's parent P is accepted by closure on every row: still one intent, K, not a composite.
    "dupK": ("duplicate", ("K",), "blocking"),
}


@pytest.mark.parametrize("intent", sorted(EXPECTED))
def test_each_relation_type(audited, intent):
    _, findings = audited
    v = findings[intent].verdict
    relation, existing, severity = EXPECTED[intent]
    assert (v.relation, tuple(sorted(v.existing)), v.severity) == (relation, existing, severity), v.rationale


def test_summary_fix_and_cooccurrence(audited):
    report, findings = audited
    d = report.to_dict()
    assert d["summary"]["severity"] == "blocking" and report.fails("blocking")
    assert sorted(d["summary"]["blocking"]) == ["dupA", "dupK"]
    assert d["summary"]["new_intents"] == list(EXPECTED)  # order of first appearance
    assert d["fix"]["label_map"] == {"dupA": "A", "dupK": "K"}
    relations = LabelRelations.from_dict(d["fix"]["relations"])
    assert {("subset", "K", "P"), ("subset", "subA", "A"), ("subset", "B", "superBC"),
            ("subset", "C", "superBC"), ("subset", "B", "halfB"), ("composite", "compBD", "B"),
            ("composite", "compBD", "D"),
            ("duplicate", "A", "dupA"), ("duplicate", "K", "dupK")} == relations.typed_pairs()
    co = d["cooccurrence"]
    row = co["rate"][co["new"].index("dupA")]
    assert row[co["existing"].index("A")] == pytest.approx(0.95)
    assert findings["compBD"].multi_intent.rate == pytest.approx(0.9)
    assert findings["dupK"].multi_intent.k == 0


def test_directional_containment(audited):
    _, findings = audited
    pair = {c.existing: c for c in findings["subA"].containment}["A"]
    assert pair.new_in_existing.rate >= 0.9
    assert pair.existing_in_new.rate < 0.6 and pair.reference == "training"
    dup = {c.existing: c for c in findings["dupA"].containment}["A"]
    assert dup.existing_in_new.rate >= 0.6
    assert dup.new_in_existing.low < dup.new_in_existing.rate < dup.new_in_existing.high


def test_relabel_list_finds_the_pivot_rows(audited):
    _, findings = audited
    relabel = findings["subA"].relabel
    assert 0 < len(relabel) <= AuditConfig().relabel_cap
    assert all(r["existing"] == "A" and r["source"] == "training" for r in relabel)
    # The old A rows that belong to the subset are those from A's pivot region.
    assert sum(" a2 " in r["text"] for r in relabel) >= 0.9 * len(relabel)
    odds = [r["odds"] for r in relabel]
    assert odds == sorted(odds, reverse=True)


def test_examples_and_counter_examples(audited):
    _, findings = audited
    f = findings["dupA"]
    assert f.examples and all("A" in e["accepted"] for e in f.examples)
    assert f.counter_examples and all("A" not in e["accepted"] for e in f.counter_examples)
    assert len(f.examples) <= AuditConfig().examples_cap


def test_batch_rows_are_the_fallback_reference(world):
    batch = world.rows("dupB", 40, "B", ("B",)) + world.rows("B", 60, "B", ("B",))
    report = audit_batch(FakeEngine(world.table), batch, config=AuditConfig(progress=False))
    finding = report.findings[0]
    assert finding.verdict.relation == "duplicate"
    assert finding.containment[0].reference == "batch"


def test_without_rows_of_the_existing_intent_the_claim_is_subset(world):
    report = audit_batch(FakeEngine(world.table), world.rows("dupC", 30, "C", ("C",)),
                         config=AuditConfig(progress=False))
    v = report.findings[0].verdict
    assert (v.relation, v.existing) == ("subset", ("C",))
    assert "not excluded" in v.rationale
    assert report.findings[0].containment[0].existing_in_new is None
    assert "C" in report.to_dict()["summary"]["missing_references"]


def test_the_models_own_reference_rows_stand_in_for_training_rows(world):
    """The case above with the model keeping a sample of its training rows (as a bundle does): the
    audit reads them, gives the verdict that the same rows sent as training rows give, and says so."""
    from intentvcs.core.dataio import parse_row

    batch = world.rows("dupC", 30, "C", ("C",))
    training = world.training(20)
    engine = FakeEngine(world.table)
    engine.references = [parse_row(row) for row in training]
    kept = audit_batch(engine, batch, config=AuditConfig(progress=False)).to_dict()
    sent = audit_batch(FakeEngine(world.table), batch, training, AuditConfig(progress=False)).to_dict()
    assert kept["findings"][0]["relation"] == sent["findings"][0]["relation"] == "duplicate"
    assert kept["summary"]["missing_references"] == []
    assert kept["findings"][0]["containment"][0]["reference"] == "model"
    # Sent rows take precedence over the model's own.
    assert audit_batch(engine, batch, training, AuditConfig(progress=False)).findings[0].containment[0].reference \
        == "training"


def test_training_rows_and_the_models_sample_of_them_read_the_same_references(world):
    """With more training rows per intent than the references hold, the CLI drew its own sample of them,
    another than the bundle's (drawn at training by ``reference_sample``), so the two paths' containment
    figures differed on the same data (MultiWOZ: a composite's part read 12% one way, 15% the other)."""
    from intentvcs.core.dataio import parse_row
    from intentvcs.core.references import reference_sample

    config = AuditConfig(progress=False, reference_cap=10)
    batch = world.rows("dupC", 30, "C", ("C",)) + world.rows("subA", 30, "a2", ("A",))
    training = [parse_row(row) for row in world.training(60)]
    engine = FakeEngine(world.table)
    engine.references = reference_sample(training, cap=config.reference_cap)
    kept = audit_batch(engine, batch, config=config).to_dict()
    sent = audit_batch(FakeEngine(world.table), batch, training, config).to_dict()
    for own, given in zip(kept["findings"], sent["findings"]):
        assert own["relation"] == given["relation"]
        assert [{k: v for k, v in c.items() if k != "reference"} for c in own["containment"]] == \
            [{k: v for k, v in c.items() if k != "reference"} for c in given["containment"]]


def test_training_rows_without_an_intent_leave_it_the_models_own_rows(world):
    """A --train file of other data (none of the model's intents) left every existing intent without rows,
    though the bundle holds its own: the duplicates read as subsets and the CI gate passed."""
    from intentvcs.core.dataio import parse_row

    batch = world.rows("dupC", 30, "C", ("C",))
    engine = FakeEngine(world.table)
    engine.references = [parse_row(row) for row in world.training(20)]
    other = [{"text": f"something else {i}", "labels": ["elsewhere"]} for i in range(5)]
    report = audit_batch(engine, batch, other, AuditConfig(progress=False)).to_dict()
    assert report["findings"][0]["relation"] == "duplicate"
    assert report["findings"][0]["containment"][0]["reference"] == "model"
    assert report["summary"]["missing_references"] == []


def test_borderline_lowers_severity(world):
    # 15 rows with 11 accepted: 73 % >= high (70 %), but the interval holds 70 %.
    batch = world.rows("fewA", 15, A_MIX, ("A",), 11 / 15)
    report = audit_batch(FakeEngine(world.table), batch, world.training(20), AuditConfig(progress=False))
    v = report.findings[0].verdict
    assert v.relation == "duplicate" and v.borderline and v.severity == "warning"


def test_no_new_intents(world):
    report = audit_batch(FakeEngine(world.table), world.rows("A", 5, "a1", ("A",)),
                         config=AuditConfig(progress=False))
    d = report.to_dict()
    assert d["findings"] == [] and d["summary"]["severity"] == "info" and not report.fails("warning")
    _validate(d, _schema())


def test_single_label_composite_is_found_by_co_ranking(world):
    """A softmax-like model accepts one part per row and ranks the other second."""
    batch = world.rows("compBD1", 20, "BD", ("B",), second=("D",))
    batch += world.rows("compBD1", 20, "BD", ("D",), second=("B",))
    report = audit_batch(FakeEngine(world.table), batch, world.training(), AuditConfig(progress=False))
    f = report.findings[0]
    assert (f.verdict.relation, sorted(f.verdict.existing)) == ("composite", ["B", "D"]), f.verdict.rationale
    assert f.multi_intent.k == 0 and f.verdict.statistic.rate == 1.0


def test_single_label_composite_is_found_by_splitting_at_connectors(world):
    """The model accepts only the first request of "X and Y"; each half alone is accepted as its part."""
    batch = []
    for _ in range(30):
        left, right = world.utterance("ask", "B", ("B",)), world.utterance("ask", "D", ("D",))
        joined = f"{left} and {right}"
        world.table[joined] = (world.table[left][0], (world.table[left][1] + world.table[right][1]) / 2)
        batch.append({"text": joined, "labels": ["askBD"]})
    report = audit_batch(FakeEngine(world.table), batch, world.training(), AuditConfig(progress=False))
    v = report.findings[0].verdict
    assert (v.relation, sorted(v.existing)) == ("composite", ["B", "D"]), v.rationale
    assert "split at a connector" in v.rationale and v.statistic.rate == 1.0


def test_splits_at_the_services_connectors():
    cuts = segment_splits(["play some jazz and set an alarm", "call mom, then text dad now", "rock and roll",
                           "find flights; also book a hotel", "dim the lights, play some jazz",
                           "feed the cat after that water the plants"])
    assert [(c.row, c.left, c.right) for c in cuts] == [
        (0, "play some jazz", "set an alarm"), (1, "call mom", "text dad now"),
        (3, "find flights", "book a hotel"), (4, "dim the lights", "play some jazz"),
        (5, "feed the cat", "water the plants")]


def test_habitual_runner_ups_are_no_composite(world):
    """B and C rank each other second on their own rows too: co-ranking on N's rows is no evidence."""
    other = {"B": ("C",), "C": ("B",)}
    batch = world.rows("siblingsBC", 40, ("X", "Y"), lambda r: {"X": ("B",), "Y": ("C",)}[r],
                       second=lambda r: other[{"X": "B", "Y": "C"}[r]])
    report = audit_batch(FakeEngine(world.table), batch, world.training(), AuditConfig(progress=False))
    assert report.findings[0].verdict.relation == "novel", report.findings[0].verdict.rationale


def test_forced_choice_is_novel(world):
    """Accepted as A on 90 % of rows, but nothing of A resembles them: the model's forced choice."""
    report = audit_batch(FakeEngine(world.table), world.rows("farA", 40, "X", ("A",), 0.9), world.training(),
                         AuditConfig(progress=False))
    v = report.findings[0].verdict
    assert v.relation == "novel" and "forced choice" in v.rationale
    pair = report.findings[0].containment[0]
    assert pair.new_in_existing.rate == pytest.approx(0.9) and pair.existing_in_new.rate < 0.15


def _with_city(rows: list[dict], every: int = 1) -> list[dict]:
    """Mark every ``every``-th row's first word as a ``city`` entity."""
    return [{**row, "spans": [{"start": 0, "end": 3, "label": "city"}]} if i % every == 0 else row
            for i, row in enumerate(rows)]


def test_a_subset_by_entity_is_told_apart_from_a_duplicate(world):
    """N's utterances lie all over A (the embedding cannot tell them apart), but every one
    carries a city where only half of A's do: N is A restricted to utterances with a city."""
    training = world.training()
    training = [row for row in training if row["labels"] != ["A"]] + _with_city(
        [row for row in training if row["labels"] == ["A"]], every=2)
    batch = _with_city(world.rows("cityA", 60, A_MIX, ("A",), 0.95))
    report = audit_batch(FakeEngine(world.table), batch, training, AuditConfig(progress=False))
    finding = report.findings[0]
    assert (finding.verdict.relation, finding.verdict.existing) == ("subset", ("A",)), finding.verdict.rationale
    pivot = finding.containment[0].entity_pivot
    assert (pivot.entity, pivot.direction, pivot.new_share) == ("city", "with", 1.0)
    assert pivot.existing_share == pytest.approx(0.5) and pivot.p_value < AuditConfig().same_alpha
    assert "city" in finding.verdict.rationale
    # The same rows without annotations: nothing tells them apart, a duplicate.
    plain = audit_batch(FakeEngine(world.table), [{k: v for k, v in row.items() if k != "spans"} for row in batch],
                        world.training(), AuditConfig(progress=False))
    assert plain.findings[0].verdict.relation == "duplicate"


def _saying(world: World, rows: list[dict], words: str, every: int = 1) -> list[dict]:
    """Every ``every``-th row's text with ``words`` appended; the model reads it as before (same logits,
    same vector): the embedding does not see the words."""
    out = []
    for i, row in enumerate(rows):
        if i % every == 0:
            text = f"{row['text']} {words}"
            world.table[text] = world.table[row["text"]]
            row = {**row, "text": text}
        out.append(row)
    return out


def test_a_subset_by_word_is_told_apart_from_a_duplicate(world):
    """N's utterances lie all over A, but every one says "in the morning", which a third of A's
    do: N is A restricted to the morning (a word, not an entity, defines it)."""
    training = world.training()
    training = [row for row in training if row["labels"] != ["A"]] + _saying(
        world, [row for row in training if row["labels"] == ["A"]], "in the morning", every=3)
    batch = _saying(world, world.rows("morningA", 60, A_MIX, ("A",), 0.95), "in the morning")
    report = audit_batch(FakeEngine(world.table), batch, training, AuditConfig(progress=False))
    verdict = report.findings[0].verdict
    assert (verdict.relation, verdict.existing) == ("subset", ("A",)), verdict.rationale
    assert "'morning' is in 100% of morningA's rows and 33% of A's" in verdict.rationale
    # A word on no row of A names no part of A: the same rows without it in A's stay a duplicate.
    plain = audit_batch(FakeEngine(world.table), batch, world.training(), AuditConfig(progress=False))
    assert plain.findings[0].verdict.relation == "duplicate"


def test_the_word_pivot_needs_the_word_on_nearly_every_new_row_and_on_some_old_ones():
    from intentvcs.core.dataio import Example
    from intentvcs.service.audit.words import word_pivot

    def rows(texts):
        return [Example(text, ("X",)) for text in texts]

    old = rows([f"wake me at {h} in the morning" for h in range(10)] + [f"alarm for {h} pm" for h in range(30)])
    new = rows([f"morning alarm at {h}" for h in range(18)] + ["an alarm at 7 please", "alarm at 6"])
    pivot = word_pivot(new, old, min_rows=3, min_gap=0.1)
    assert (pivot.word, pivot.new_share, pivot.existing_share) == ("morning", 0.9, 0.25)
    assert pivot.p_value < 0.01 and pivot.tested == 2  # "morning" and "alarm" ("at" is a function word)
    assert word_pivot(rows(["at noon"] * 10), old, min_rows=3, min_gap=0.1) is None  # "noon": no old row
    # A word on fewer old rows than any estimate needs names no part of the old intent.
    stray = old + rows(["alarm at noon", "alarm for noon tomorrow"])
    assert word_pivot(rows(["at noon"] * 10), stray, min_rows=3, min_gap=0.1) is None
    assert word_pivot(rows(["at noon"] * 10), stray + rows(["noon alarm"]), min_rows=3, min_gap=0.1).word == "noon"
    assert word_pivot(new[:2], old, min_rows=3, min_gap=0.1) is None  # too few rows to test


def test_a_union_is_read_from_acceptance_when_containment_runs_low():
    """Half of N's rows accepted as X, half as Y, never ranked together: a union of X and Y (superset),
    even where the kNN estimate of contain(E->N) is below ``back_high`` or missing; ranked together on
    every row, the same acceptance is a composite's."""
    from intentvcs.service.audit.rules import Evidence, decide

    n = 20
    accepted = np.zeros((n, 2), dtype=bool)
    accepted[: n // 2, 0] = accepted[n // 2:, 1] = True
    own = accepted.copy()

    def evidence(ranked):
        return Evidence(intent="X|Y", candidates=("X", "Y"), to_existing=(wilson(10, n), wilson(10, n)),
                        to_new=(wilson(30, 100), None), accepted=accepted, independent=accepted, ranked=ranked,
                        pair_baseline=np.zeros((2, 2)), implication=np.zeros((2, 2), dtype=bool),
                        multi=wilson(0, n))

    union = decide(evidence(own), AuditConfig(progress=False))
    assert (union.relation, union.existing) == ("superset", ("X", "Y")), union.rationale
    together = decide(evidence(np.ones((n, 2), dtype=bool)), AuditConfig(progress=False))
    assert together.relation == "composite"


def _two_candidates(intent, accepted, to_existing, to_new):
    from intentvcs.service.audit.rules import Evidence

    n = len(accepted)
    return Evidence(intent=intent, candidates=("X", "Y"), to_existing=to_existing, to_new=to_new,
                    accepted=accepted, independent=accepted, ranked=accepted.copy(),
                    pair_baseline=np.zeros((2, 2)), implication=np.zeros((2, 2), dtype=bool),
                    multi=wilson(0, n))


def test_a_subset_whose_rows_also_carry_an_unrelated_intent_is_a_composite():
    """Rule 2a: N's rows accepted as X on 80%, as Y (unrelated, whose rows resemble N's) on 20%: N carries
    both; with Y on 5% of the rows, or Y's rows unlike N's (the model's forced choice), N stays X's subset."""
    from intentvcs.service.audit.rules import decide

    n = 20
    accepted = np.zeros((n, 2), dtype=bool)
    accepted[:16, 0] = accepted[16:, 1] = True
    both = decide(_two_candidates("X&Y", accepted, (wilson(16, n), wilson(4, n)), (wilson(30, 100), wilson(20, 100))),
                  AuditConfig(progress=False))
    assert (both.relation, both.existing) == ("composite", ("X", "Y")), both.rationale
    forced = decide(_two_candidates("X&Y", accepted, (wilson(16, n), wilson(4, n)), (wilson(30, 100), wilson(5, 100))),
                    AuditConfig(progress=False))
    assert (forced.relation, forced.existing) == ("subset", ("X",)), forced.rationale
    accepted[16:, 1] = False
    accepted[16, 1] = True
    rare = decide(_two_candidates("X@w", accepted, (wilson(16, n), wilson(1, n)), (wilson(30, 100), None)),
                  AuditConfig(progress=False))
    assert (rare.relation, rare.existing) == ("subset", ("X",)), rare.rationale


def test_an_unestimated_containment_names_the_side_with_too_few_rows():
    """contain(E->N) needs ``min_rows`` of N's rows accepting E and of E's rows: the rationale names which was
    short (it blamed E when the new intent itself had two rows)."""
    from intentvcs.service.audit.rules import decide

    config = AuditConfig(progress=False)
    two = np.zeros((2, 2), dtype=bool)
    two[:, 0] = True
    few_new = decide(_two_candidates("N", two, (wilson(2, 2), wilson(0, 2)), (None, None)), config)
    assert few_new.relation == "subset", few_new.rationale
    assert f"2 of N's rows accept X, {config.min_rows} needed" in few_new.rationale, few_new.rationale
    many = np.zeros((20, 2), dtype=bool)
    many[:, 0] = True
    few_old = decide(_two_candidates("N", many, (wilson(20, 20), wilson(0, 20)), (None, None)), config)
    assert f"too few rows of X, {config.min_rows} needed" in few_old.rationale, few_old.rationale


def test_the_entity_profile_test_is_fishers_exact_test():
    """Checked against scipy on random small and mid-sized tables, and on the case where the
    z-test it replaced was 4-5 times too confident (3 of 3 against 1 of 10)."""
    from scipy.stats import fisher_exact

    from intentvcs.service.audit.slots import fisher_exact_p

    assert fisher_exact_p(3, 3, 1, 10) == pytest.approx(0.013986, abs=1e-6)
    rng = np.random.default_rng(0)
    for _ in range(300):
        n1, n2 = (int(n) for n in rng.integers(1, 400, size=2))
        k1, k2 = int(rng.integers(0, n1 + 1)), int(rng.integers(0, n2 + 1))
        expected = fisher_exact([[k1, n1 - k1], [k2, n2 - k2]])[1]
        assert fisher_exact_p(k1, n1, k2, n2) == pytest.approx(expected, rel=1e-6, abs=1e-12), (k1, n1, k2, n2)


def test_the_pivot_states_its_test_and_correction(world):
    training = [row for row in world.training() if row["labels"] != ["A"]] + _with_city(
        [row for row in world.training() if row["labels"] == ["A"]], every=2)
    batch = _with_city(world.rows("cityA", 60, A_MIX, ("A",), 0.95))
    report = audit_batch(FakeEngine(world.table), batch, training, AuditConfig(progress=False))
    pivot = report.to_dict()["findings"][0]["containment"][0]["entity_pivot"]
    assert (pivot["test"], pivot["correction"]) == ("fisher_exact_two_sided", "bonferroni")
    assert pivot["tested"] >= 1


def test_new_intents_that_duplicate_each_other(world):
    """Two versions of one new intent, and two of one subset of A, are found as pairs; a
    different novel intent is not paired with them."""
    batch = (world.rows("newX1", 40, "X") + world.rows("newX2", 40, "X") + world.rows("newY", 40, "Y")
             + _with_city(world.rows("pivotA1", 40, "a2", ("A",), 0.95))
             + _with_city(world.rows("pivotA2", 40, "a2", ("A",), 0.95)))
    training = world.training()
    training = [row for row in training if row["labels"] != ["A"]] + _with_city(
        [row for row in training if row["labels"] == ["A"]], every=2)
    report = audit_batch(FakeEngine(world.table), batch, training, AuditConfig(progress=False))
    verdicts = {f.verdict.intent: f.verdict.relation for f in report.findings}
    assert verdicts == {"newX1": "novel", "newX2": "novel", "newY": "novel", "pivotA1": "subset",
                        "pivotA2": "subset"}
    assert {(p.first, p.second) for p in report.new_pairs} == {("newX1", "newX2"), ("pivotA1", "pivotA2")}
    d = report.to_dict()
    assert d["summary"]["new_duplicates"] == 2 and d["summary"]["severity"] == "blocking"
    assert d["fix"]["label_map"] == {"newX2": "newX1", "pivotA2": "pivotA1"}
    assert ("duplicate", "newX1", "newX2") in report.fix_relations().typed_pairs()
    _validate(d, _schema())
    assert "New intents that duplicate each other" in render_html(d)


def test_pairs_of_new_intents_are_capped_closest_first(world, monkeypatch):
    """With many candidate pairs, only max_new_pairs are tested, and a true duplicate pair is among them."""
    from intentvcs.service.audit import batch as batch_module

    tested = []
    real_test = batch_module.two_sample_test
    monkeypatch.setattr(batch_module, "two_sample_test",
                        lambda a, b, **kw: tested.append((len(a), len(b))) or real_test(a, b, **kw))
    rows = (world.rows("newX1", 40, "X") + world.rows("newX2", 40, "X")
            + [row for region in ("Y", "C", "D", "P") for row in world.rows(f"far{region}", 30, region)])
    report = audit_batch(FakeEngine(world.table), rows, world.training(),
                         AuditConfig(progress=False, max_new_pairs=1))
    assert len(tested) == 1  # without the cap: every candidate pair
    assert {(p.first, p.second) for p in report.new_pairs} == {("newX1", "newX2")}  # the closest pair


def test_out_of_scope_verdict_is_set_aside_and_reported(world):
    engine = FakeEngine(world.table)
    # Out of scope unless the top confidence is ~1: every row of this world is rejected.
    engine.decision = dataclasses.replace(engine.decision, oos=ThresholdRule(1e-6))
    report = audit_batch(engine, world.rows("dupA", 40, A_MIX, ("A",)), world.training(),
                         AuditConfig(progress=False))
    finding = report.findings[0]
    assert finding.verdict.relation == "duplicate"
    assert finding.out_of_scope.rate == 1.0


def test_rows_the_service_refuses_as_new_are_no_duplicate_of_the_intent_forced_on_them(world):
    """A new intent the distance rule refuses on every row, the classifier putting it in A: novel, its
    rationale saying why (a gift-card balance was typed a duplicate of loyalty points, a merge proposed,
    while the service refused all 8 of its rows). A refusal by confidence alone still decides as before
    (the test above)."""

    @dataclasses.dataclass
    class FarFromTraining(ThresholdRule):
        refusal_is_novelty: typing.ClassVar[bool] = True

    engine = FakeEngine(world.table)
    engine.decision = dataclasses.replace(engine.decision, oos=FarFromTraining(1e-6))
    report = audit_batch(engine, world.rows("dupA", 40, A_MIX, ("A",)), world.training(),
                         AuditConfig(progress=False))
    finding = report.findings[0]
    assert finding.verdict.relation == "novel", finding.verdict.rationale
    assert "out of scope" in finding.verdict.rationale and finding.out_of_scope.rate == 1.0


# ----------------------------------------------------------------- estimators
def test_wilson_interval():
    c = wilson(0, 10)
    assert c.low == 0.0 and c.high == pytest.approx(0.2775, abs=1e-4)
    c = wilson(5, 10)
    assert c.low == pytest.approx(0.2366, abs=1e-4) and c.high == pytest.approx(0.7634, abs=1e-4)
    assert wilson(0, 0).to_dict()["rate"] == 0.0


def test_pu_knn_membership_separates_duplicate_from_subset():
    rng = np.random.default_rng(1)
    a1, a2 = rng.normal(size=H) * 3, rng.normal(size=H) * 3

    def cloud(centre, n):
        return normalise(centre + rng.normal(0, 0.6, (n, H)))

    existing = np.concatenate([cloud(a1, 120), cloud(a2, 80)])  # 40 % in a2
    kwargs = dict(k=10, min_rows=3, reference_cap=200, level=0.95, rng=rng)
    dup = existing_in_new(np.concatenate([cloud(a1, 30), cloud(a2, 20)]), existing, **kwargs)
    sub = existing_in_new(cloud(a2, 50), existing, **kwargs)
    assert dup.count.rate > 0.7
    assert 0.25 < sub.count.rate < 0.55
    assert (sub.probability[120:] > 0.5).mean() > 0.8 and (sub.probability[:120] > 0.5).mean() < 0.1
    assert existing_in_new(cloud(a1, 2), existing, **kwargs) is None


def test_two_sample_test_separates_one_distribution_from_two():
    rng = np.random.default_rng(2)
    a1, a2 = rng.normal(size=H) * 3, rng.normal(size=H) * 3

    def cloud(centre, n):
        return normalise(centre + rng.normal(0, 0.6, (n, H)))

    kwargs = dict(k=10, min_rows=3, cap=200, permutations=200, rng=rng)
    mixed = np.concatenate([cloud(a1, 120), cloud(a2, 80)])
    same = two_sample_test(np.concatenate([cloud(a1, 60), cloud(a2, 40)]), mixed, **kwargs)
    part = two_sample_test(cloud(a1, 100), mixed, **kwargs)
    assert same.p_value > 0.05 and abs(same.statistic - same.null_mean) < 0.05
    assert part.p_value < 0.01 and part.statistic > part.null_mean + 0.1
    assert part.rows == (100, 100)  # balanced: the larger side is subsampled
    assert two_sample_test(cloud(a1, 2), mixed, **kwargs) is None


def test_independent_acceptance_modulo_relations():
    labels = ("x", "x2", "child", "parent", "y")
    rel = LabelRelations(labels=labels, relations=(Subset("child", "parent"),)).to_dict()
    rel["relations"].append({"type": "duplicate", "a": "x", "b": "x2"})
    implication = LabelRelations.from_dict(rel).implication_matrix()
    accepted = np.array([[1, 1, 0, 0, 0], [0, 0, 1, 1, 0], [1, 0, 0, 1, 1], [0, 1, 0, 0, 0]], dtype=bool)
    independent = independent_accepted(accepted, implication)
    assert independent.sum(axis=1).tolist() == [1, 1, 3, 1]
    assert independent[1].tolist() == [False, False, True, False, False]  # the child, not its parent
    assert independent[3].tolist() == [True, False, False, False, False]  # x2 counts as x


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize("row, reason", [
    ({"labels": ["A"]}, "'text' must be a string"),
    ({"text": "  ", "labels": ["A"]}, "'text' is empty"),
    ({"text": "hi"}, "'labels' is missing"),
    ({"text": "hi", "label": ["A"]}, "unknown key"),
    ("hi", "expected a JSON object"),
])
def test_row_validation_names_the_row(world, row, reason):
    good = world.rows("dupA", 2, "a1", ("A",))
    with pytest.raises(AuditInputError, match=rf"^rows\[2\]: .*{reason}"):
        audit_batch(FakeEngine(world.table), good + [row])
    with pytest.raises(AuditInputError, match=rf"^training_rows\[0\]: .*{reason}"):
        audit_batch(FakeEngine(world.table), good, [row])


def test_empty_or_non_list_batch_is_rejected(world):
    with pytest.raises(AuditInputError, match=r"^rows: no rows"):
        audit_batch(FakeEngine(world.table), [])
    with pytest.raises(AuditInputError, match=r"^rows: expected a list"):
        audit_batch(FakeEngine(world.table), {"text": "x", "labels": []})


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="high"):
        AuditConfig(high=1.5)
    with pytest.raises(ValueError, match="unknown audit config"):
        AuditConfig.from_dict({"hgih": 0.5})
    with pytest.raises(ValueError, match="severity"):
        AuditConfig(severity={"novel": "fatal"})


# A config file's value of the wrong type: refused by its setting's name, not a TypeError later.
WRONG_TYPES = [
    ({"high": "0.5"}, 'AuditConfig.high must be a number, got "0.5"'),
    ({"high": None}, "AuditConfig.high must be a number, got null"),
    ({"confidence": True}, "AuditConfig.confidence must be a number, got true"),
    ({"knn_k": 2.5}, "AuditConfig.knn_k must be an integer, got 2.5"),
    ({"knn_k": True}, "AuditConfig.knn_k must be an integer, got true"),  # bool is an int to Python only
    ({"seed": "x"}, 'AuditConfig.seed must be an integer, got "x"'),
    ({"embedding": 1}, "AuditConfig.embedding must be a string, got 1"),
    ({"progress": 1}, "AuditConfig.progress must be true, false or null, got 1"),
    ({"severity": [1]}, "AuditConfig.severity must be an object of relation -> severity, got [1]"),
]


@pytest.mark.parametrize("overrides, message", WRONG_TYPES)
def test_config_names_a_setting_of_the_wrong_type(overrides, message):
    with pytest.raises(ValueError) as caught:
        AuditConfig.from_dict(overrides)
    assert str(caught.value) == message


def test_config_accepts_an_integer_rate_and_null_progress():
    config = AuditConfig.from_dict({"high": 1, "progress": None, "seed": 7})
    assert (config.high, config.progress, config.seed) == (1, None, 7)


# -------------------------------------------------------------------- schema
def _schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
          "integer": int, "number": (int, float)}


def _validate(value, schema, root=None, path="$"):
    """The JSON Schema subset report.schema.json uses: $ref, anyOf, type, enum,
    required, properties, additionalProperties, items, minItems, minimum, maximum."""
    root = root or schema
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    if "anyOf" in schema:
        errors = []
        for option in schema["anyOf"]:
            try:
                return _validate(value, option, root, path)
            except AssertionError as exc:
                errors.append(str(exc))
        raise AssertionError(f"{path}: no anyOf option matches: {errors}")
    if "type" in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        ok = any(isinstance(value, _TYPES[k]) and not (k in ("integer", "number") and isinstance(value, bool))
                 for k in kinds)
        assert ok, f"{path}: expected {kinds}, got {type(value).__name__}"
    if "enum" in schema:
        assert value in schema["enum"], f"{path}: {value!r} not in {schema['enum']}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        assert value >= schema.get("minimum", -np.inf) and value <= schema.get("maximum", np.inf), path
    if isinstance(value, dict):
        for key in schema.get("required", []):
            assert key in value, f"{path}: missing {key!r}"
        props, extra = schema.get("properties", {}), schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                _validate(item, props[key], root, f"{path}.{key}")
            elif extra is False:
                raise AssertionError(f"{path}: unexpected key {key!r}")
            elif isinstance(extra, dict):
                _validate(item, extra, root, f"{path}.{key}")
    if isinstance(value, list):
        assert len(value) >= schema.get("minItems", 0), path
        for i, item in enumerate(value):
            if "items" in schema:
                _validate(item, schema["items"], root, f"{path}[{i}]")


def test_report_matches_schema(audited):
    report, _ = audited
    document = json.loads(json.dumps(report.to_dict()))  # JSON-safe: no numpy scalars
    _validate(document, _schema())
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(_schema())
    jsonschema.Draft202012Validator(_schema()).validate(document)


def test_small_validator_catches_violations(audited):
    report, _ = audited
    document = json.loads(json.dumps(report.to_dict()))
    document["findings"][0]["relation"] = "twin"
    with pytest.raises(AssertionError, match="twin"):
        _validate(document, _schema())


# -------------------------------------------------------------------- render
def test_html_is_self_contained_and_escaped(world):
    batch = world.rows("dupA", 10, "a1", ("A",))
    batch[0]["text"] = "<script>alert(1)</script>"
    world.table[batch[0]["text"]] = world.table[world.utterance("dupA", "a1", ("A",))]
    page = render_html(audit_batch(FakeEngine(world.table), batch, config=AuditConfig(progress=False)).to_dict())
    assert "<svg" in page and "<script>" not in page and "&lt;script&gt;" in page
    assert "src=" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


# ----------------------------------------------------------------------- CLI
def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_cli_exit_codes_and_outputs(world, tmp_path, monkeypatch):
    from intentvcs.cli.main import main
    from intentvcs.cli.commands import audit as audit_command

    monkeypatch.setattr(audit_command, "load_predictor", lambda args: FakeEngine(world.table))
    blocking = _write_jsonl(tmp_path / "blocking.jsonl", world.rows("dupA", 30, A_MIX, ("A",)))
    subset = _write_jsonl(tmp_path / "subset.jsonl", world.rows("subA", 30, "a2", ("A",)))
    train = _write_jsonl(tmp_path / "train.jsonl", world.training(40))
    out, page, rel = tmp_path / "r.json", tmp_path / "r.html", tmp_path / "relations.json"
    common = ["audit", "--bundle", "unused", "--train", train, "--out", str(out)]
    assert main(common + ["--batch", blocking, "--html", str(page), "--relations-out", str(rel)]) == 1
    assert json.loads(out.read_text())["summary"]["blocking"] == ["dupA"]
    assert "<svg" in page.read_text()
    assert ("duplicate", "A", "dupA") in LabelRelations.load(rel).typed_pairs()
    assert main(common + ["--batch", blocking, "--fail-on", "never"]) == 0
    assert main(common + ["--batch", subset]) == 0
    assert main(common + ["--batch", subset, "--fail-on", "warning"]) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "hi", "labels": ["A"]}\n{"text": "", "labels": []}\n', encoding="utf-8")
    assert main(common + ["--batch", str(bad)]) == 2


@pytest.mark.parametrize("overrides, message", [WRONG_TYPES[0], ({"high": 2}, "AuditConfig.high must be in [0, 1], got 2")])
def test_cli_bad_config_is_exit_2_naming_file_and_setting(tmp_path, capsys, monkeypatch, overrides, message):
    from intentvcs.cli.commands import audit as audit_command
    from intentvcs.cli.main import main

    monkeypatch.setattr(audit_command, "load_predictor", lambda args: pytest.fail("the model was loaded"))
    config = tmp_path / "audit.json"
    config.write_text(json.dumps(overrides), encoding="utf-8")
    with pytest.raises(SystemExit) as caught:  # refused as the command line is read
        main(["audit", "--bundle", "unused", "--batch", str(tmp_path / "b.jsonl"), "--out", str(tmp_path / "r.json"),
              "--config", str(config)])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err.endswith(f"intentvcs audit: error: argument --config: {config}: {message}\n"), err
    assert "Traceback" not in err


def test_cli_reads_rasa_and_csv_and_writes_the_pair_table(world, tmp_path, monkeypatch):
    """The batch as a Rasa nlu.yml and the old data as a text,intent CSV give the JSONL report;
    --pairs-csv tabulates it, one row per measured pair."""
    import csv

    from intentvcs.cli.commands import audit as audit_command
    from intentvcs.cli.main import main

    monkeypatch.setattr(audit_command, "load_predictor", lambda args: FakeEngine(world.table))
    batch, train = world.rows("dupA", 30, A_MIX, ("A",)), world.training(40)
    jsonl = {"batch": _write_jsonl(tmp_path / "b.jsonl", batch), "train": _write_jsonl(tmp_path / "t.jsonl", train)}
    rasa = tmp_path / "batch.yml"
    rasa.write_text("nlu:\n- intent: dupA\n  examples: |\n" + "".join(f"    - {r['text']}\n" for r in batch),
                    encoding="utf-8")
    table = tmp_path / "train.csv"
    with table.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerows([("text", "intent")] + [(r["text"], r["labels"][0] if r["labels"] else "") for r in train])
    reports = {}
    for name, (batch_file, train_file) in {"jsonl": (jsonl["batch"], jsonl["train"]),
                                           "teams": (str(rasa), str(table))}.items():
        out, pairs = tmp_path / f"{name}.json", tmp_path / f"{name}.csv"
        assert main(["audit", "--bundle", "unused", "--batch", batch_file, "--train", train_file, "--out", str(out),
                     "--pairs-csv", str(pairs), "--fail-on", "never"]) == 0
        reports[name] = (json.loads(out.read_text())["findings"], pairs.read_text())
    assert reports["teams"] == reports["jsonl"]
    findings, text = reports["teams"]
    rows = list(csv.DictReader(text.splitlines()))
    named = [r for r in rows if r["relation"] != "candidate"]
    assert [(r["intent_a"], r["intent_b"], r["relation"]) for r in named] == [("dupA", "A", "duplicate")]
    assert float(named[0]["a_in_b"]) == findings[0]["containment"][0]["new_in_existing"]["rate"]
    assert len(rows) == sum(len(f["containment"]) for f in findings)


def test_cli_audits_a_checkpoint_as_it_audits_its_bundle(tmp_path):
    """``--checkpoint`` needs no export: PyTorch and the exported graph give one report."""
    from intentvcs.cli.main import main
    from tests.helpers.bundle import make_tiny_bundle

    bundle = make_tiny_bundle(tmp_path / "model")
    phrases = {"PlayMusic": "play music", "GetWeather": "will it rain", "BookRestaurant": "book a table",
               "AddSong": "add this song to my playlist", "Forecast": "weather forecast for tomorrow"}
    rows = [{"text": f"{phrase} {tail}", "labels": [label]} for label, phrase in phrases.items()
            for tail in ("please", "tonight", "now", "for two", "at the cinema", "in snow", "okay", "thanks")]
    batch = _write_jsonl(tmp_path / "batch.jsonl", rows)
    reports = {}
    for source in ("--checkpoint", "--bundle"):
        out = tmp_path / f"report{source}.json"
        model = bundle.parent / "checkpoint" if source == "--checkpoint" else bundle
        assert main(["audit", source, str(model), "--batch", batch, "--out", str(out), "--fail-on", "never"]) == 0
        reports[source] = json.loads(out.read_text())
    torch_report, onnx_report = reports["--checkpoint"], reports["--bundle"]
    assert torch_report["engine"]["runtime"] == "torch" and onnx_report["engine"]["provider"]
    verdicts = {source: {f["intent"]: (f["relation"], f["existing"]) for f in report["findings"]}
                for source, report in reports.items()}
    assert sorted(verdicts["--checkpoint"]) == ["AddSong", "Forecast"]
    assert verdicts["--checkpoint"] == verdicts["--bundle"]


# ---------------------------------------------------------------------- cost
def test_cost_is_linear_and_capped(world):
    """20,000 rows of one new intent: the analysis stays well under a second or two."""
    engine = FakeEngine(world.table)
    base = world.rows("bigA", 50, ("a1", "a2"), ("A",))
    vectors = {r["text"]: world.table[r["text"]] for r in base}
    batch = [{"text": f"{r['text']} v{i}", "labels": ["bigA"]} for i in range(400) for r in base]
    for row in batch:
        engine.table[row["text"]] = vectors[row["text"].rsplit(" v", 1)[0]]
    started = time.perf_counter()
    report = audit_batch(engine, batch, world.training(20), AuditConfig(progress=False))
    assert time.perf_counter() - started < 5.0
    assert report.findings[0].rows == 20_000


# ---------------------------------------------------------- scored scenarios
def test_injected_relations_use_each_row_once():
    import random

    from benchmarks.audit_scenarios import expected_verdicts, inject
    from intentvcs.core.dataio import Example

    pool = {name: [Example(f"{name} request {i}", (name,), id=f"{name}:{i}") for i in range(n)]
            for name, n in (("a", 30), ("b", 20), ("c", 12), ("d", 40))}
    rows, relations = inject(pool, random.Random(0), versions=1, unions=1, joins=1)
    new = {ex.labels[0] for ex in rows}
    kinds = sorted(r.type for r in relations)
    assert len(new) == 3 and kinds == ["composite", "duplicate", "subset", "subset"]
    owners: dict[str, set[str]] = {}
    for ex in rows:
        for source in ex.id.split(">")[0].split("+"):
            owners.setdefault(source, set()).add(ex.labels[0])
    assert all(len(names) == 1 for names in owners.values())  # no old row serves two new intents
    union = next(x for x in new if "|" in x)
    parts = [ex.id.split(":")[0] for ex in rows if ex.labels == (union,)]
    assert parts.count(parts[0]) == len(parts) / 2  # a union takes as many rows of each part
    truth = LabelRelations(labels=tuple(pool) + tuple(sorted(new)), relations=tuple(relations))
    expected = expected_verdicts(truth, new, pool)
    assert sorted(v["relation"] for v in expected.values()) == ["composite", "duplicate", "superset"]
    assert all(len(v["existing"]) == (1 if v["relation"] == "duplicate" else 2) for v in expected.values())



def test_the_audit_reads_the_pooled_layer_its_config_names():
    from intentvcs.service.audit.batch import _vectors
    from intentvcs.service.audit.containment import normalise

    rng = np.random.default_rng(0)
    final, middle = rng.normal(size=(4, 8)), rng.normal(size=(4, 8))
    outputs = GraphOutputs(np.zeros((4, 2), dtype=np.float32), final, middle, None)
    assert np.allclose(_vectors(outputs, AuditConfig(embedding="final")), normalise(final))
    assert np.allclose(_vectors(outputs, AuditConfig(embedding="middle")), normalise(middle))
    with pytest.raises(ValueError, match="embedding must be one of"):
        AuditConfig(embedding="first")


def test_the_pair_table_neutralises_a_name_a_spreadsheet_would_run():
    document = {"findings": [], "new_pairs": [{
        "first": "=cmd|' /C calc'!A0", "second": "+sum", "relation": "duplicate", "severity": "blocking",
        "first_in_second": {"rate": 1.0, "n": 3}, "second_in_first": {"rate": 0.5, "n": 4}}]}
    import csv

    [row] = csv.DictReader(pairs_csv(document).splitlines())
    assert (row["intent_a"], row["intent_b"], row["a_in_b"]) == ("'=cmd|' /C calc'!A0", "'+sum", "1.0")


def test_the_html_relations_block_is_a_relations_file(world, tmp_path):
    """What the page offers to copy as relations.json loads as one, as --relations-out's file does."""
    import html
    import re

    from intentvcs.core.relations import LabelRelations

    report = audit_batch(FakeEngine(world.table), world.rows("dupA", 10, "a1", ("A",)),
                         config=AuditConfig(progress=False)).to_dict()
    block = re.search(r"<summary>relations.json</summary><pre>(.*?)</pre>", render_html(report), re.S).group(1)
    (tmp_path / "relations.json").write_text(html.unescape(block), encoding="utf-8")
    assert LabelRelations.load(tmp_path / "relations.json").to_dict() == report["fix"]["relations"]


@pytest.mark.parametrize("setting, value, message", [
    ("examples_cap", -2, "examples_cap must be >= 0"), ("relabel_cap", -1, "relabel_cap must be >= 0"),
    ("heatmap_cap", 0, "heatmap_cap must be >= 1"), ("seed", -1, "seed must be >= 0")])
def test_audit_caps_that_would_slice_from_the_end_are_refused(setting, value, message):
    with pytest.raises(ValueError, match=message):
        AuditConfig(**{setting: value})
