"""Review of the upgrade audit's text and evidence: a share that is not exactly 1 (or 0) never reads "100%" (or
"0%") in a rationale or on the page; a finding's example rows, and each row's top intents, are ranked by the
decision's uncapped ranking, as every other ranking of the audit is, not by confidences tied at the cap."""

from __future__ import annotations

import inspect

import numpy as np

from intentvcs.core.dataio import Example
from intentvcs.core.decision import Decision
from intentvcs.core.oos import OOS_LABEL, TrainRule
from intentvcs.core.outputs import GraphOutputs
from intentvcs.service.audit import AuditConfig, audit_batch
from intentvcs.service.audit import render, rules, words
from intentvcs.service.audit.containment import percent, wilson
from intentvcs.service.audit.evidence import Scored, examples
from intentvcs.service.audit.rules import Evidence, Verdict, decide
from intentvcs.service.audit.slots import EntityPivot
from tests.test_audit import A_MIX, EXISTING, KNOWN, FakeEngine, World
from tests.test_audit_rationale_repeats_and_progress import _co_ranked
from tests.test_audit_rule_boundaries import _one_target

CONFIG = AuditConfig(progress=False)


# ------------------------------------------------------------- shares in text
def test_percent_never_rounds_a_share_to_all_or_none():
    assert [percent(x) for x in (0.0, 1.0, 0.5, 0.994, 0.006, 17 / 103)] == ["0%", "100%", "50%", "99%", "1%", "17%"]
    assert [percent(x) for x in (0.995, 0.996, 299 / 300, 0.99999)] == [">99%"] * 4
    assert [percent(x) for x in (0.005, 0.004, 1 / 300, 1e-9)] == ["<1%"] * 4


def test_a_rationale_never_reads_100_or_0_percent_for_a_share_that_is_not():
    """``:.0%`` rounded 299 of 300 to "100%" and 1 of 300 to "0%": "only 0% of E resembles N" when some of it
    does, "100% of E lies in N" when not all of it does."""
    forced = decide(_one_target(wilson(1, 300)), CONFIG)  # E accepted on every row, 1 of E's 300 rows like N's
    assert forced.relation == "novel", forced.rationale
    assert "(only <1% of E resembles N" in forced.rationale, forced.rationale
    assert "accepted on 100% of N's rows" in forced.rationale  # all of them: exactly 1 stays 100%

    duplicate = decide(_one_target(wilson(299, 300)), CONFIG)
    assert duplicate.relation == "duplicate", duplicate.rationale
    assert "and >99% of E lies in N: same meaning" in duplicate.rationale, duplicate.rationale

    most = _one_target(wilson(150, 300), n=250)
    most = Evidence(**{**most.__dict__, "to_existing": (wilson(249, 250),)})
    verdict = decide(most, CONFIG)
    assert "the model accepts E on >99% of N's rows" in verdict.rationale, verdict.rationale

    # Through ``_under`` (a rate under its threshold), and exactly 0 still reads 0%.
    apart = decide(_co_ranked((wilson(1, 300), wilson(0, 100))), CONFIG)
    assert apart.rationale.endswith("and neither lies inside N (<1% of A and 0% of B lie in it, under 40%)"), \
        apart.rationale


def test_the_page_never_reads_100_or_0_percent_for_a_share_that_is_not():
    """The page's counts, intervals, heatmap, entity pivots and two-sample figures alike."""
    count = wilson(1, 300).to_dict()
    cell = render._count(count)
    assert cell.startswith("&lt;1% ") and "(1/300, CI &lt;1%&ndash;" in cell, cell
    assert render._count(wilson(299, 300).to_dict()).startswith("&gt;99% ")
    assert render._count(wilson(0, 300).to_dict()).startswith("0% ")

    svg = render.heatmap_svg({"new": ["N"], "existing": ["A", "B"], "counts": [[299, 1]], "rows": [300]}, 30)
    assert "<title>N -&gt; A: &gt;99%</title>" in svg and "<title>N -&gt; B: &lt;1%</title>" in svg, svg
    assert ">100<" not in svg and 'fill="#fff">&gt;99</text>' in svg, svg

    pivot = EntityPivot("city", 299 / 300, 1 / 300, 300, 300, 1e-9, 1).to_dict()
    assert "city: on &gt;99% of the new rows, &lt;1% of the old" in render._pivot(pivot), render._pivot(pivot)

    same = render._same({"statistic": 0.996, "null_mean": 0.004, "p_value": 0.5})
    assert "same-sample neighbours &gt;99%, &lt;1% expected" in same, same


def test_rules_and_render_write_every_share_through_percent():
    """One helper: no share is formatted with a bare ``:.0%`` in the rationales or on the page."""
    for module in (rules, render, words):
        assert ":.0%}" not in inspect.getsource(module), module.__name__


# ------------------------------------------------------- example rows' order
def _capped_engine(world: World) -> FakeEngine:
    """The fake engine with a PU label scale of 0.6: every accepted logit (sigmoid >= 0.6) caps at confidence 1,
    while the decision's ranking (p / c) keeps their order."""
    engine = FakeEngine(world.table)
    engine.decision = Decision(list(EXISTING), activation="sigmoid", label_scale=np.full(len(EXISTING), 0.6),
                               relations=KNOWN)
    return engine


def _utterance(world: World, tag: str, region: str, logits: dict[str, float]) -> str:
    """``world.utterance`` with the given labels' logits set (others stay far below the threshold)."""
    text = world.utterance(tag, region, ())
    row, pooled = world.table[text]
    row = row.copy()
    for name, value in logits.items():
        row[EXISTING.index(name)] = value
    world.table[text] = (row, pooled)
    return text


def test_examples_are_the_rows_the_decisions_ranking_puts_first():
    """Ten rows accepted as A, every confidence capped at 1, in the batch from the weakest to the strongest: the
    examples were the first five in batch order (a tie at the cap), not the five the model ranks highest."""
    world = World(3)
    strengths = [1.0 + 0.5 * i for i in range(10)]  # sigmoid / 0.6 > 1 for each: all capped
    texts = [_utterance(world, "capA", A_MIX[i % len(A_MIX)], {"A": s}) for i, s in enumerate(strengths)]
    engine = _capped_engine(world)
    finding = audit_batch(engine, [{"text": t, "labels": ["capA"]} for t in texts], world.training(),
                          CONFIG).findings[0]
    assert finding.verdict.existing == ("A",), finding.verdict.rationale
    assert all(row["top"][0] == {"intent": "A", "confidence": 1.0} for row in finding.examples)
    assert [row["text"] for row in finding.examples] == texts[::-1][:CONFIG.examples_cap]


def _answer_order(world: World, text: str) -> list[str]:
    """The first two intents of the decision's own ranked answer for ``text`` (what the service lists)."""
    result = _capped_engine(world).decision.apply(world.table[text][0][None, :])
    return [EXISTING[j] for j in np.argsort(-result.ranking[0], kind="stable")[:2]]


def test_a_rows_top_intents_follow_the_decisions_ranking():
    """Both A and B capped at 1 on every row, B the stronger: each row's top intents listed A first (label order),
    where the service's answer ranks B first."""
    world = World(4)
    texts = [_utterance(world, "capAB", A_MIX[i % len(A_MIX)], {"A": 2.0, "B": 4.0}) for i in range(12)]
    finding = audit_batch(_capped_engine(world), [{"text": t, "labels": ["capAB"]} for t in texts],
                          world.training(), CONFIG).findings[0]
    rows = finding.examples + finding.counter_examples
    assert rows
    for row in rows:
        assert [t["intent"] for t in row["top"][:2]] == ["B", "A"], row
        assert _answer_order(world, row["text"]) == ["B", "A"]


def test_a_composites_examples_rank_by_mean_confidence_then_by_the_ranking():
    """Over several intents the ranking only breaks ties: a row with A far past the cap and B weak is no better
    example of "A and B" than one confident in both (an uncapped mean would put it first)."""
    labels = ["A", "B"]
    confidences = np.array([[1.0, 0.3], [0.95, 0.95], [1.0, 1.0], [1.0, 1.0]])
    ranking = np.array([[3.0, 0.3], [0.95, 0.95], [1.1, 1.2], [1.5, 1.2]])
    rows = [Example(f"row {i}", ("AB",)) for i in range(4)]
    verdict = Verdict("AB", "composite", ("A", "B"), "warning", False, "", np.ones(4, dtype=bool))
    good, counter = examples(verdict, Scored(rows, confidences, confidences >= 0.5, ranking), labels, cap=4)
    assert [row["text"] for row in good] == ["row 3", "row 2", "row 1", "row 0"] and counter == []
    assert [t["intent"] for t in good[1]["top"]] == ["B", "A"]  # row 2: B ranks first, both at 1


def test_exact_ties_in_the_ranking_keep_batch_order_every_time():
    """Rows the model scores alike (same logits) are a tie in the ranking too: broken by their order in the batch,
    the same on every run."""
    world = World(5)
    texts = [_utterance(world, "tieA", A_MIX[i % len(A_MIX)], {"A": 3.0}) for i in range(8)]
    batch = [{"text": t, "labels": ["tieA"]} for t in texts]
    runs = [audit_batch(_capped_engine(world), batch, world.training(), CONFIG).findings[0] for _ in range(2)]
    assert [r["text"] for r in runs[0].examples] == texts[:CONFIG.examples_cap]
    assert runs[0].examples == runs[1].examples and runs[0].counter_examples == runs[1].counter_examples


def test_a_split_halfs_intent_is_the_one_the_decision_ranks_first():
    """Rule 1b reads each half's top intent. A half accepted as A and as B, both capped at 1 and B the stronger,
    was read as A (the first column of the tie): "composite of A and D" where the model says B and D."""
    world = World(6)
    batch = []
    for i in range(20):
        left = _utterance(world, "ask", "B", {"A": 2.0, "B": 4.0})
        right = _utterance(world, "ask", "D", {"D": 6.0})
        joined = f"{left} and {right}"
        world.table[joined] = world.table[right]
        batch.append({"text": joined, "labels": ["askBD"]})
    verdict = audit_batch(_capped_engine(world), batch, world.training(), CONFIG).findings[0].verdict
    assert "split at a connector" in verdict.rationale, verdict.rationale
    assert (verdict.relation, verdict.existing) == ("composite", ("B", "D")), verdict.rationale


# ------------------------------------------- the "oos" class is no existing intent
class _WithOOSClass(FakeEngine):
    """The fake engine with the train rule's ``"oos"`` class as a last column (logit ``oos_logit[text]``)."""

    def __init__(self, table, oos_logit: dict[str, float]):
        super().__init__(table)
        self.labels = [*EXISTING, OOS_LABEL]
        self.decision = Decision(self.labels, activation="sigmoid", oos=TrainRule(len(EXISTING)), relations=KNOWN)
        self.oos_logit = oos_logit

    def infer(self, texts):
        out = super().infer(texts)
        extra = np.array([[self.oos_logit.get(t, -6.0)] for t in texts], dtype=np.float32)
        return GraphOutputs(np.hstack([out.logits, extra]), out.pooled, out.pooled_mid)


def test_the_oos_class_is_never_a_candidate_nor_the_novel_examples_nearest_intent():
    """With a trained ``"oos"`` class, the class ranked first on a new intent's rows made it a candidate: "closest
    existing intent oos is accepted on 0% of weird's rows ... they are not utterances of oos it knows", "oos" in
    the containment table and among the missing references; and a novel intent's examples were ranked by their
    ``"oos"`` confidence, not by their nearest existing intent. The decision never takes it for an intent."""
    world = World(8)
    oos, batch = {}, []
    for i in range(20):
        nearest = "A" if i % 2 else "B"
        text = _utterance(world, "weird", "X", {nearest: -3.0 + 0.1 * i})  # ranked second, never accepted
        oos[text] = 3.0 - 0.1 * i
        batch.append({"text": text, "labels": ["weird"]})
    report = audit_batch(_WithOOSClass(world.table, oos), batch, world.training(), CONFIG)
    finding = report.findings[0]
    assert finding.verdict.relation == "novel", finding.verdict.rationale
    assert OOS_LABEL not in [c.existing for c in finding.containment]
    assert OOS_LABEL not in report.missing_references
    assert f"intent {OOS_LABEL} " not in finding.verdict.rationale, finding.verdict.rationale
    assert finding.out_of_scope.rate == 1.0  # the served rule still refuses them
    # The examples (a novel intent's: rows accepting nothing) by their highest existing intent, A's or B's.
    assert [row["text"] for row in finding.examples] == [row["text"] for row in batch[::-1][:CONFIG.examples_cap]]


def test_a_refused_novel_intent_names_no_forced_choice_where_nothing_is_accepted():
    """The refusal clause explains why an intent the classifier accepts on N's rows is no target. Where the
    closest candidate is only ranked (accepted on none of them) it read "... accepting B is the classifier's
    forced choice" beside "B is accepted on 0% of N's rows"."""
    ranked_only = _one_target(None, n=20)
    nothing = np.zeros((20, 1), dtype=bool)
    ranked_only = Evidence(**{**ranked_only.__dict__, "candidates": ("B",), "to_existing": (wilson(0, 20),),
                              "accepted": nothing, "independent": nothing, "out_of_scope": wilson(20, 20)})
    verdict = decide(ranked_only, CONFIG)
    assert verdict.relation == "novel", verdict.rationale
    assert "accepting B" not in verdict.rationale and "forced choice" not in verdict.rationale, verdict.rationale
    # Accepted on some rows, the clause stays.
    some = np.zeros((20, 1), dtype=bool)
    some[:4] = True
    accepted = decide(Evidence(**{**ranked_only.__dict__, "to_existing": (wilson(4, 20),), "accepted": some,
                                  "independent": some}), CONFIG)
    assert "accepting B is the classifier's forced choice" in accepted.rationale, accepted.rationale
