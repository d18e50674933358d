"""The audit's outputs as teams use them: the pair table read back by pandas, the report's merge map, the
command's lines on stderr and a stored report re-rendered (a review of service/audit/report.py, pairs.py,
render.py and intentvcs/cli/commands/audit.py)."""

from __future__ import annotations

import dataclasses
import io
import json
import math

import pytest

from intentvcs.core.relations import LabelRelations
from intentvcs.service.audit import AuditConfig, audit_batch, pairs_csv, render_html
from intentvcs.service.audit.pairs import COLUMNS, pair_rows
from intentvcs.service.audit.report import NewPair
from tests.test_audit import A_MIX, FakeEngine, World, _write_jsonl


# ------------------------------------------------------------------ pair table
def _count(k: int, n: int) -> dict:
    return {"k": k, "n": n, "rate": round(k / n, 4), "ci_low": 0.1, "ci_high": 0.9}


# Names a batch may carry (the data reader takes a label with a comma, a quote, a line break or a carriage
# return inside it, and a span label of any non-empty text).
AWKWARD = ["a,b", 'say "hi"', "line\nbreak", "carriage\rreturn", "both\r\nends", "caf\u00e9 \u00fc"]


def _document_with_awkward_names() -> dict:
    pivot = {"entity": "ci\rty", "direction": "with", "new_share": 1.0, "existing_share": 0.5, "new_rows": 4,
             "existing_rows": 6, "p_value": 0.001, "tested": 1, "test": "fisher_exact_two_sided",
             "correction": "bonferroni"}
    findings = [{"intent": name, "relation": "subset", "existing": ["A"], "severity": "warning",
                 "containment": [{"existing": "A", "new_in_existing": _count(3, 4), "existing_in_new": _count(2, 6),
                                  "entity_pivot": pivot, "reference": "training"}]} for name in AWKWARD]
    pairs = [{"first": "x\ry", "second": "x\ry2", "relation": "duplicate", "severity": "blocking",
              "first_in_second": _count(4, 5), "second_in_first": _count(5, 5)}]
    return {"findings": findings, "new_pairs": pairs}


def test_the_pair_table_reads_back_with_pandas_one_row_per_pair_with_the_same_values():
    """A carriage return inside a name (or an entity type) was written unquoted: pandas, Python's csv module and
    spreadsheets end a record there, so the row split in two and every later column shifted."""
    pandas = pytest.importorskip("pandas")

    document = _document_with_awkward_names()
    expected = pair_rows(document)
    table = pandas.read_csv(io.StringIO(pairs_csv(document)), keep_default_na=False, na_values=[""])
    assert list(table.columns) == list(COLUMNS)
    assert len(table) == len(expected) == len(AWKWARD) + 1
    for got, want in zip(table.to_dict("records"), expected):
        for column in COLUMNS:
            if want[column] is None:
                assert isinstance(got[column], float) and math.isnan(got[column]), (column, got)
            elif isinstance(want[column], str):
                assert got[column] == want[column], (column, got[column], want[column])
            else:  # numbers come back as numbers
                assert got[column] == pytest.approx(want[column]), (column, got)


def test_the_pair_table_reads_back_with_pythons_csv_module():
    import csv

    document = _document_with_awkward_names()
    rows = list(csv.DictReader(io.StringIO(pairs_csv(document), newline="")))
    assert [(r["intent_a"], r["intent_b"], r["entity_pivot"]) for r in rows] == [
        (r["intent_a"], r["intent_b"], r["entity_pivot"] or "") for r in pair_rows(document)]


def test_the_pair_table_of_an_audit_still_neutralises_formulas():
    """Quoting for line breaks leaves the spreadsheet guard as it was: a name a spreadsheet would run is text."""
    document = _document_with_awkward_names()
    document["findings"][0]["intent"] = "=HYPERLINK(\"http://x\r\")"
    import csv

    [first, *_] = csv.DictReader(io.StringIO(pairs_csv(document), newline=""))
    assert first["intent_a"] == "'=HYPERLINK(\"http://x\r\")"


# -------------------------------------------------------------- merge map
@pytest.fixture(scope="module")
def three_versions():
    """Three new names for one novel meaning: the audit finds nx_a = nx_c and nx_b = nx_c (and not nx_a = nx_b,
    which it did not test: only each novel intent's nearest one is a candidate)."""
    world = World(1)
    batch = world.rows("nx_a", 40, "X") + world.rows("nx_b", 40, "X") + world.rows("nx_c", 40, "X")
    report = audit_batch(FakeEngine(world.table), batch, world.training(), AuditConfig(progress=False))
    assert [(p.first, p.second) for p in report.new_pairs] == [("nx_a", "nx_c"), ("nx_b", "nx_c")]
    return report


def _one_target_per_family(document: dict) -> None:
    """The report's label map merges every family of duplicates (as its relations file closes them) into one
    name, which is no key of the map itself (applied once, it leaves no merged-away name behind)."""
    label_map = document["fix"]["label_map"]
    relations = LabelRelations.from_dict(document["fix"]["relations"])
    assert not set(label_map.values()) & set(label_map), label_map
    merged_to = {}
    for pair in document["new_pairs"]:
        for name in (pair["first"], pair["second"]):
            merged_to[name] = label_map.get(name, name)
    families = {}
    for name, target in merged_to.items():
        families.setdefault(target, set()).add(name)
    assert len(families) == 1, label_map
    duplicates = {(r.a, r.b) for r in relations.of_type("duplicate")}
    assert {(p["first"], p["second"]) for p in document["new_pairs"]} <= duplicates


def test_new_intents_joined_by_duplicate_pairs_merge_into_one_name(three_versions):
    """nx_a = nx_c and nx_b = nx_c make one intent (the relations file says so), yet the label map merged nx_c
    into nx_b alone and kept nx_a and nx_b apart: {"nx_c": "nx_b"}."""
    document = three_versions.to_dict()
    _one_target_per_family(document)
    assert document["fix"]["label_map"] == {"nx_c": "nx_a", "nx_b": "nx_a"}


def test_a_chain_of_pairs_in_any_order_merges_into_one_name(three_versions):
    """Pairs come closest first when max_new_pairs cuts them: b = c before a = b left {"c": "b", "b": "a"},
    a chain in which c's rows, merged once, end under a name merged away."""
    a_c, b_c = three_versions.new_pairs
    chain = [dataclasses.replace(b_c), NewPair("nx_a", "nx_b", "duplicate", a_c.first_in_second,
                                               a_c.second_in_first, a_c.test, a_c.severity)]
    document = dataclasses.replace(three_versions, new_pairs=chain).to_dict()
    _one_target_per_family(document)
    # The single-pair rule holds for the first pair listed: its second merges into its first.
    assert document["fix"]["label_map"] == {"nx_c": "nx_b", "nx_a": "nx_b"}


def test_one_pair_still_merges_its_second_into_its_first(three_versions):
    document = dataclasses.replace(three_versions, new_pairs=three_versions.new_pairs[:1]).to_dict()
    assert document["fix"]["label_map"] == {"nx_c": "nx_a"}


# ---------------------------------------------------------------- stderr lines
def test_a_name_with_a_line_break_cannot_write_a_line_of_its_own_into_the_log(tmp_path, monkeypatch, capsys):
    """Intent names are the batch's text: "x\\ninfo     all clear: novel" printed a second, forged finding line
    into the CI log. Names that are not printable are shown escaped, as logged request paths are."""
    from intentvcs.cli.commands import audit as audit_command
    from intentvcs.cli.main import main

    world = World()
    monkeypatch.setattr(audit_command, "load_predictor", lambda args: FakeEngine(world.table))
    name = "x\ninfo     all clear: novel"
    batch = _write_jsonl(tmp_path / "b.jsonl", world.rows(name, 30, A_MIX, ("A",)))
    train = _write_jsonl(tmp_path / "t.jsonl", world.training(40))
    assert main(["audit", "--bundle", "unused", "--train", train, "--batch", batch,
                 "--out", str(tmp_path / "r.json")]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert not any(line.startswith("info     all clear") for line in lines), lines
    assert f"blocking {ascii(name)}: duplicate A" in lines, lines
    assert json.loads((tmp_path / "r.json").read_text())["findings"][0]["intent"] == name  # the data as it is


# ------------------------------------------------------------- re-rendering
def test_a_stored_report_without_the_heatmap_cap_is_rendered_with_the_default():
    """The schema does not require config.heatmap_cap (reports written before it have none), and render_html
    raised KeyError on such a report; it reads the default, as it does for same_alpha."""
    world = World()
    document = audit_batch(FakeEngine(world.table), world.rows("dupA", 20, A_MIX, ("A",)), world.training(),
                           AuditConfig(progress=False)).to_dict()
    page = render_html(document)
    del document["config"]["heatmap_cap"]
    assert render_html(document) == page
