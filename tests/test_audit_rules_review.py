"""Audit rules review: each test failed on the code before its fix.

A composite read from a subset (rule 2a) dropped the subset's own doubt: contain(N->E) whose interval holds
``high`` left the composite at full severity and not borderline, where the subset alone was borderline and info.
Rule 4 rejected a co-ranking excess of exactly ``corank_min`` (70% against a 40% baseline is 0.2999... in floats),
typing the composite novel, though the rule asks for an excess ">= corank_min".
A significant entity pivot was ignored when contain(E->N) could not be estimated: the rationale said "a
duplicate is not excluded" while the entity profile excluded it (a word pivot was already named there).
"""

from __future__ import annotations

import numpy as np

from intentvcs.service.audit import AuditConfig
from intentvcs.service.audit.containment import wilson
from intentvcs.service.audit.rules import Evidence, decide
from intentvcs.service.audit.slots import EntityPivot

CONFIG = AuditConfig(progress=False)


def _subset_with_part_beside(beside: bool) -> Evidence:
    """N's 40 rows: E accepted on 30 (75%, interval 60-86%: holds ``high``), contain(E->N) 20% (a subset);
    with ``beside``, an unrelated B accepted on 16 of E's rows (40%) whose own rows resemble N's (30%)."""
    n = 40
    accepted = np.zeros((n, 2), dtype=bool)
    accepted[:30, 0] = True
    if beside:
        accepted[:16, 1] = True
    to_existing = (wilson(30, n), wilson(int(accepted[:, 1].sum()), n))
    return Evidence(intent="N", candidates=("E", "B"), to_existing=to_existing,
                    to_new=(wilson(20, 100), wilson(30, 100)), accepted=accepted, independent=accepted,
                    ranked=accepted.copy(), pair_baseline=np.zeros((2, 2)),
                    implication=np.eye(2, dtype=bool), multi=wilson(0, n))


def test_a_composite_read_from_a_subset_keeps_the_subsets_doubt():
    subset = decide(_subset_with_part_beside(beside=False), CONFIG)
    assert (subset.relation, subset.borderline, subset.severity) == ("subset", True, "info"), subset.rationale
    composite = decide(_subset_with_part_beside(beside=True), CONFIG)
    assert composite.relation == "composite" and composite.existing == ("E", "B"), composite.rationale
    # 75% of 40 rows cannot establish contain(N->E) >= 70%: without E as target rule 2a does not hold.
    assert (composite.borderline, composite.severity) == (True, "info"), composite.rationale


def _co_ranked_at(together: int, n: int, baseline: float) -> Evidence:
    """A on the first half of N's rows, B on the second; both ranked first and second on ``together`` rows."""
    accepted = np.zeros((n, 2), dtype=bool)
    accepted[:n // 2, 0] = accepted[n // 2:, 1] = True
    ranked = np.zeros((n, 2), dtype=bool)
    ranked[:together] = True
    return Evidence(intent="N", candidates=("A", "B"), to_existing=(wilson(n // 2, n), wilson(n - n // 2, n)),
                    to_new=(wilson(10, 100), wilson(10, 100)), accepted=accepted, independent=accepted,
                    ranked=ranked, pair_baseline=np.array([[0.0, baseline], [baseline, 0.0]]),
                    implication=np.eye(2, dtype=bool), multi=wilson(0, n))


def test_a_co_ranking_excess_of_exactly_corank_min_is_a_composite():
    # 14 of 20 rows against 8 of 20 of their own: an excess of exactly 30%.
    verdict = decide(_co_ranked_at(14, 20, 8 / 20), CONFIG)
    assert verdict.relation == "composite" and verdict.existing == ("A", "B"), verdict.rationale
    assert "excess 30%, threshold 30%" in verdict.rationale, verdict.rationale
    # One row fewer stays under the threshold.
    assert decide(_co_ranked_at(13, 20, 8 / 20), CONFIG).relation == "novel"


def test_an_entity_pivot_is_named_when_containment_back_cannot_be_estimated():
    config = AuditConfig(progress=False, min_rows=10)
    n = 10
    accepted = np.zeros((n, 1), dtype=bool)
    accepted[:9] = True  # 9 of N's rows accept E: under min_rows, no contain(E->N)
    pivot = EntityPivot("city", 1.0, 0.2, n, 300, 1e-6, 1)
    evidence = Evidence(intent="N", candidates=("E",), to_existing=(wilson(9, n),), to_new=(None,),
                        accepted=accepted, independent=accepted, ranked=accepted.copy(),
                        pair_baseline=np.zeros((1, 1)), implication=np.ones((1, 1), dtype=bool),
                        multi=wilson(0, n), pivots=(pivot,))
    verdict = decide(evidence, config)
    assert verdict.relation == "subset", verdict.rationale
    assert "a duplicate is not excluded" not in verdict.rationale, verdict.rationale
    assert "'city' entity" in verdict.rationale and "could not be estimated" in verdict.rationale, verdict.rationale
    # Without the pivot the rationale still says what it said.
    plain = decide(Evidence(**{**evidence.__dict__, "pivots": (None,)}), config)
    assert plain.rationale.endswith("(9 of N's rows accept E, 10 needed), so a duplicate is not excluded")
