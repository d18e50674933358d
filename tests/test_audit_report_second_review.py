"""Audit report second review: each test failed on the code before its fix.

A top confidence or relabel probability within 0.00005 of none or all was rounded to exactly 0 or 1 in the report,
and the page, which reads the report, wrote "0%" or "100%" for it (the demo report: transfer_money at 0.00003, "0%").
A rate just under a decision threshold was rounded onto it on the page: the rationale said "only 49% of E lies in
N: too specific" (99 of 199) while the containment table beside it said 50%, the threshold of a duplicate.
A duplicate pair's own fix merged its second name into its first whatever the report's label map did with the
family: for pairs b = c then a = b it said {"nx_b": "nx_a"} where the report merged nx_a into nx_b.
The pair table listed only the intents the audit measured containment for, so a composite found by splitting at a
connector, whose part the whole utterances never accept, had no row naming that part: the verdict's pair was missing.
"""

from __future__ import annotations

import csv
import io
import json
import re

import jsonschema
import numpy as np

from intentvcs.core.dataio import Example
from intentvcs.service.audit import AuditConfig, audit_batch, pairs_csv, render, render_html
from intentvcs.service.audit.containment import Count, Membership, wilson
from intentvcs.service.audit.evidence import Reference, Scored, examples, relabel_list
from intentvcs.service.audit.pairs import pair_rows
from intentvcs.service.audit.report import SCHEMA_PATH, AuditReport, Cooccurrence, Finding, NewPair, PairContainment
from intentvcs.service.audit.rules import Verdict, decide
from tests.test_audit import A_MIX, EXISTING, FakeEngine, World
from tests.test_audit_rule_boundaries import _one_target

CONFIG = AuditConfig(progress=False)


def _validate(document: dict) -> None:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    validator.validate(json.loads(json.dumps(document)))


# --------------------------------------------------- figures near none or all
def test_a_confidence_near_none_or_all_is_not_written_as_none_or_all():
    labels = ["A", "B", "C"]
    confidences = np.array([[0.99996, 3.4e-5, 0.0]])
    verdict = Verdict("N", "duplicate", ("A",), "blocking", False, "", np.ones(1, dtype=bool))
    scored = Scored([Example("t", ("N",))], confidences, confidences >= 0.5, confidences)
    [row], _ = examples(verdict, scored, labels, cap=5)
    top = {t["intent"]: t["confidence"] for t in row["top"]}
    assert 0.0 < top["B"] < 1e-4 and 0.9999 < top["A"] < 1.0 and top["C"] == 0.0, top
    page = render._rows_table([row], "Examples")
    assert "A &gt;99%, B &lt;1%, C 0%" in page, page


def test_a_relabel_probability_near_all_is_not_written_as_all():
    reference = Reference([Example("old row", ("E",))], "training", [])
    membership = Membership(wilson(1, 1), np.array([0]), np.array([0.99997]), np.array([0.9]))
    [entry] = relabel_list({"E": membership}, {"E": reference}, cap=5)
    assert 0.9999 < entry["probability"] < 1.0, entry
    assert "&gt;99%" in render._relabel_table([entry])


# ------------------------------------------------ rates just under a threshold
def _subset_report(backward: Count) -> AuditReport:
    verdict = decide(_one_target(backward), CONFIG)
    n = 100
    finding = Finding(verdict=verdict, rows=n, scored_rows=n,
                      containment=(PairContainment("E", wilson(n, n), backward, "training"),),
                      multi_intent=wilson(0, n), out_of_scope=wilson(0, n), examples=[], counter_examples=[],
                      relabel=[])
    return AuditReport(findings=[finding], cooccurrence=Cooccurrence(["N"], ["E"], [[n]], [n]), config=CONFIG,
                       known_relations=None, labels=["E"], batch_rows=n, audited_rows=n, scored_rows=n)


def test_the_page_never_rounds_a_rate_under_a_threshold_onto_it():
    document = _subset_report(wilson(99, 199)).to_dict()  # 49.7% of E lies in N, back_high is 50%
    _validate(document)
    finding = document["findings"][0]
    assert finding["relation"] == "subset" and "but only 49% of E lies in N" in finding["rationale"]
    page = render_html(document)
    cell = re.search(r"<td>E</td><td>[^/]*/100, [^<]*</span></td><td>(.*?)</td>", page).group(1)
    assert cell.startswith("49% <span class=\"muted\">(99/199,"), cell
    # The interval holds 50% (the verdict is borderline) and reads so; a rate at the threshold reads as itself.
    low, high = re.search(r"CI (.*?)&ndash;(.*?)\)", cell).groups()
    assert (low, high) == ("43%", "57%"), cell
    duplicate = render_html(_subset_report(wilson(100, 199)).to_dict())
    assert "<td>50% <span class=\"muted\">(100/199" in duplicate


def test_the_heatmap_never_rounds_a_rate_under_a_threshold_onto_it():
    document = _subset_report(wilson(99, 199)).to_dict()
    document["cooccurrence"] = {"new": ["N"], "existing": ["E"], "rows": [500], "counts": [[348]], "rate": [[0.696]]}
    page = render_html(document)  # E accepted on 69.6% of N's rows, under high (70%)
    assert "<title>N -&gt; E: 69%</title>" in page and 'fill="#fff">69</text>' in page, page


# ------------------------------------------------------- the verdict's pairs
def test_every_pair_a_verdict_names_has_a_row_in_the_pair_table():
    """A composite of B and D found by splitting "X and Y": the whole utterances are accepted as B and never rank
    D among their two most confident intents, so D was no candidate and the table had no (N, D) row."""
    world = World(5)
    batch = []
    for _ in range(30):
        left, right = world.utterance("ask", "B", ("B",)), world.utterance("ask", "D", ("D",))
        joined = f"{left} and {right}"
        logits = world.table[left][0].copy()
        logits[EXISTING.index("D")] = -12.0
        world.table[joined] = (logits, (world.table[left][1] + world.table[right][1]) / 2)
        batch.append({"text": joined, "labels": ["askBD"]})
    document = audit_batch(FakeEngine(world.table), batch, world.training(), CONFIG).to_dict()
    [finding] = document["findings"]
    assert (finding["relation"], sorted(finding["existing"])) == ("composite", ["B", "D"])
    assert "D" not in [c["existing"] for c in finding["containment"]]  # the case under test
    rows = list(csv.DictReader(io.StringIO(pairs_csv(document), newline="")))
    named = {r["intent_b"]: r for r in rows if r["relation"] == "composite"}
    assert sorted(named) == ["B", "D"], rows
    # contain(N->D) as the report's co-occurrence counts it (D accepted on none of N's 30 rows); E->N unknown.
    assert (named["D"]["a_in_b"], named["D"]["rows_a"], named["D"]["b_in_a"]) == ("0.0", "30", "")
    assert named["D"]["severity"] == finding["severity"]
    assert len(pair_rows(document)) == len({(r["intent_a"], r["intent_b"]) for r in pair_rows(document)})


# ----------------------------------------------------- a duplicate pair's fix
def _agrees(document: dict) -> None:
    """Each pair's label map is the report's, restricted to the pair's names, and merges both into one."""
    label_map = document["fix"]["label_map"]
    for pair in document["new_pairs"]:
        own = pair["fix"]["label_map"]
        assert all(label_map.get(name) == target for name, target in own.items()), (own, label_map)
        assert own.get(pair["first"], pair["first"]) == own.get(pair["second"], pair["second"]), own


def test_a_duplicate_pairs_fix_is_the_reports_label_map_for_its_names():
    world = World(1)
    batch = world.rows("nx_a", 40, "X") + world.rows("nx_b", 40, "X") + world.rows("nx_c", 40, "X")
    report = audit_batch(FakeEngine(world.table), batch, world.training(), CONFIG)
    a_c, b_c = report.new_pairs
    chain = [b_c, NewPair("nx_a", "nx_b", "duplicate", a_c.first_in_second, a_c.second_in_first, a_c.test,
                          a_c.severity)]
    for pairs in (report.new_pairs, chain):
        document = AuditReport(**{**report.__dict__, "new_pairs": pairs}).to_dict()
        _validate(document)
        _agrees(document)
    assert document["new_pairs"][1]["fix"]["label_map"] == {"nx_a": "nx_b"}


def test_a_pair_of_duplicates_of_one_existing_intent_merges_both_into_it():
    """Two new names, each a duplicate of A: the report merges both into A; the pair's fix said {second: first}."""
    world = World(2)
    batch = world.rows("dupA1", 40, A_MIX, ("A",)) + world.rows("dupA2", 40, A_MIX, ("A",))
    report = audit_batch(FakeEngine(world.table), batch, world.training(), CONFIG)
    assert [f.verdict.relation for f in report.findings] == ["duplicate", "duplicate"]
    assert [(p.first, p.second) for p in report.new_pairs] == [("dupA1", "dupA2")]
    document = report.to_dict()
    assert document["fix"]["label_map"] == {"dupA1": "A", "dupA2": "A"}
    _agrees(document)
