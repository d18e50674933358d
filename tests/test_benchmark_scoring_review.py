"""A review of the benchmark scripts' scoring and result handling (benchmarks/audit_bench.py, mix_bench.py):
each figure is what its name says, over the set it names, and a re-run loses no record it did not redo."""

from __future__ import annotations

import json

import pytest

from benchmarks import audit_bench, common, mix_bench

# --------------------------------------------------------------------------- audit_bench.score: over the truth

TRUTH = {
    "format": "intentvcs-relations", "format_version": 1,
    "labels": ["play_music", "set_alarm", "play_jazz", "set_morning_alarm"],
    "relations": [{"type": "subset", "child": "play_jazz", "parent": "play_music"},
                  {"type": "subset", "child": "set_morning_alarm", "parent": "set_alarm"}],
    "expected": {"play_jazz": {"relation": "subset", "existing": ["play_music"]},
                 "set_morning_alarm": {"relation": "subset", "existing": ["set_alarm"]}},
}


def _finding(intent: str, relation: str, existing: list[str]) -> dict:
    return {"intent": intent, "relation": relation, "existing": existing, "severity": "warning",
            "borderline": False, "containment": []}


def _document(findings: list[dict], relations: list[dict]) -> dict:
    labels = ["play_music", "set_alarm", *(f["intent"] for f in findings)]
    return {"findings": findings, "new_pairs": [],
            "fix": {"relations": {"format": "intentvcs-relations", "format_version": 1, "labels": labels,
                                  "relations": relations}}}


def test_audit_scores_a_new_intent_the_report_left_out_as_a_miss():
    """relation accuracy is "the share of new intents typed right" and pair recall is over the truth's pairs: a
    new intent of the truth with no finding (a report that dropped it) counts as wrong, not as absent from
    both the numerator and the denominator. It read 100% relation accuracy and 100% pair recall here."""
    document = _document([_finding("play_jazz", "subset", ["play_music"])],
                         [{"type": "subset", "child": "play_jazz", "parent": "play_music"}])
    figures, rows = audit_bench.score(document, TRUTH)
    assert figures["new_intents"] == 2
    assert figures["relation_acc"] == pytest.approx(0.5)
    assert figures["exact_acc"] == pytest.approx(0.5)
    assert figures["pair_precision"] == pytest.approx(1.0)
    assert figures["pair_recall"] == pytest.approx(0.5)  # set_morning_alarm -> set_alarm missed
    assert figures["typed_pair_recall"] == pytest.approx(0.5)
    missed = next(r for r in rows if r["intent"] == "set_morning_alarm")
    assert missed["relation"] != missed["expected"]


def test_audit_scores_a_complete_report_as_before():
    document = _document([_finding("play_jazz", "subset", ["play_music"]),
                          _finding("set_morning_alarm", "novel", [])],
                         [{"type": "subset", "child": "play_jazz", "parent": "play_music"}])
    figures, rows = audit_bench.score(document, TRUTH)
    assert [r["intent"] for r in rows] == ["play_jazz", "set_morning_alarm"]
    assert (figures["new_intents"], figures["relation_acc"], figures["pair_precision"], figures["pair_recall"]) == (
        2, 0.5, 1.0, 0.5)


# --------------------------------------------------------------------------- audit_bench: records kept per path

def _audit_records(scenario: str, path: str, acc: float) -> list[dict]:
    return [{"scenario": scenario, "path": path, "measure": "accuracy", "new_intents": 1, "relation_acc": acc,
             "exact_acc": acc, "pair_precision": None, "pair_recall": None, "typed_pair_precision": None,
             "typed_pair_recall": None, "new_duplicate_pairs": 0},
            {"scenario": scenario, "path": path, "measure": "verdict", "intent": "x", "expected": "novel",
             "relation": "novel", "existing": "", "new_in_existing": None, "existing_in_new": None,
             "entity_pivot": None}]


def test_an_audit_run_without_http_keeps_the_http_records_it_did_not_measure(tmp_path, monkeypatch):
    """A scenario re-run on the CLI path alone (no --http) replaces its CLI records and keeps its POST /audit
    ones, with the command that measured them: they were dropped, the --http command still listed."""
    earlier = _audit_records("assistant-upgrade", "cli", 80.0) + _audit_records("assistant-upgrade", "http", 70.0)
    http_command = "python -m benchmarks.audit_bench --bundle B --http --timing-rows 0"
    (tmp_path / "audit.json").write_text(json.dumps({"command": http_command, "machine": {}, "date": "2026-01-01",
                                                     "records": earlier}))
    monkeypatch.setattr(audit_bench, "run_scenario", lambda name, *args, **kwargs: _audit_records(name, "cli", 90.0))
    monkeypatch.setattr(audit_bench, "keep_previous", lambda name, records, redone: common.keep_previous(
        name, records, redone, directory=tmp_path))
    monkeypatch.setattr(audit_bench, "write_results", lambda name, records, markdown, **kw: common.write_results(
        name, records, markdown, directory=tmp_path, **kw))
    assert audit_bench.main(["--bundle", "B", "--timing-rows", "0"]) == 0
    written = json.loads((tmp_path / "audit.json").read_text())
    summaries = {(r["scenario"], r["path"]): r["relation_acc"] for r in written["records"]
                 if r["measure"] == "accuracy"}
    assert summaries == {("assistant-upgrade", "cli"): 90.0, ("assistant-upgrade", "http"): 70.0}
    assert sum(r["measure"] == "verdict" for r in written["records"]) == 2
    assert written["command"].startswith(http_command + " && ")
    assert "POST /audit, batch alone" in (tmp_path / "audit.md").read_text()


def test_an_audit_run_with_http_replaces_both_paths(tmp_path, monkeypatch):
    earlier = _audit_records("assistant-upgrade", "cli", 80.0) + _audit_records("assistant-upgrade", "http", 70.0)
    (tmp_path / "audit.json").write_text(json.dumps({"command": "python -m benchmarks.audit_bench --bundle B",
                                                     "machine": {}, "date": "2026-01-01", "records": earlier}))
    monkeypatch.setattr(audit_bench, "run_scenario", lambda name, *args, **kwargs: (
        _audit_records(name, "cli", 90.0) + _audit_records(name, "http", 91.0)))
    monkeypatch.setattr(audit_bench, "keep_previous", lambda name, records, redone: common.keep_previous(
        name, records, redone, directory=tmp_path))
    monkeypatch.setattr(audit_bench, "write_results", lambda name, records, markdown, **kw: common.write_results(
        name, records, markdown, directory=tmp_path, **kw))
    assert audit_bench.main(["--bundle", "B", "--timing-rows", "0", "--http"]) == 0
    written = json.loads((tmp_path / "audit.json").read_text())
    assert sorted((r["path"], r["relation_acc"]) for r in written["records"] if r["measure"] == "accuracy") == [
        ("cli", 90.0), ("http", 91.0)]


# --------------------------------------------------------------------------- mix_bench: a run that measured nothing

def test_a_mix_run_that_measured_nothing_leaves_the_results_file_as_it_was(tmp_path, monkeypatch):
    """Every checkpoint missing (warned): no figure was measured, so the file keeps its command, machine and
    date. It was rewritten dated today, on this machine, its command listed as if it had measured a part."""
    recorded = {"command": "python -m benchmarks.mix_bench --parts standard", "machine": {"cores": 16},
                "date": "2026-01-01", "anchors": {}, "targets": {}, "recipes": {},
                "records": [{"part": "standard", "dataset": "snips", "evaluated_on": "mix-standard", "segment": True,
                             "seeds": 3, "intent_acc": 96.0, "intent_f1": 98.0, "runs": []}]}
    text = json.dumps(recorded)
    (tmp_path / "mix.json").write_text(text)
    monkeypatch.setattr(mix_bench, "trained_part", lambda *args: [])
    monkeypatch.setattr(mix_bench, "keep_previous", lambda name, records, redone: common.keep_previous(
        name, records, redone, directory=tmp_path))
    monkeypatch.setattr(mix_bench, "write_results", lambda name, records, markdown, **kw: common.write_results(
        name, records, markdown, directory=tmp_path, **kw))
    assert mix_bench.main(["--parts", "standard"]) == 0
    assert (tmp_path / "mix.json").read_text() == text


def test_a_results_block_names_the_machine_of_records_measured_elsewhere(tmp_path, monkeypatch):
    """A merged result's header is the last run's: mix.json's MixSNIPS standard rows, measured on a lent H100,
    were rendered as measured on the 2 CPU cores (only perf's GPU setup record was looked for)."""
    from benchmarks import render_results

    cpu = {"cores": 2, "cpu": "AMD EPYC", "gpu": None, "python": "3.11.7"}
    gpu = {"cores": 16, "cpu": "Xeon", "gpu": "NVIDIA H100", "python": "3.12.3"}
    (tmp_path / "mix.md").write_text("| table |\n")
    meta = {"date": "2026-11-27", "machine": cpu, "command": "python -m benchmarks.mix_bench",
            "records": [{"setting": "product"}, {"setting": "standard", "machine": gpu},
                        {"setting": "chains", "machine": cpu}]}
    monkeypatch.setattr(render_results, "RESULTS", tmp_path)
    monkeypatch.setattr(render_results, "load", lambda name: meta)
    block = render_results.render_block("mix")
    assert "on 2 cores, AMD EPYC (GPU part: 16 cores, Xeon, GPU NVIDIA H100) with" in block


def test_records_kept_from_a_run_on_another_machine_keep_its_machine_and_date(tmp_path, monkeypatch):
    """The merged file's header names this run's machine: the records an earlier run on another machine left
    read as measured here (mix.json's product rows, measured on an AMD EPYC, under a later Xeon run's header)."""
    from benchmarks import common, render_results

    epyc = {"cores": 2, "cpu": "AMD EPYC", "gpu": None, "python": "3.11.7"}
    xeon = {"cores": 2, "cpu": "Xeon", "gpu": None, "python": "3.11.7"}
    h100 = {"cores": 16, "cpu": "Xeon", "gpu": "NVIDIA H100", "python": "3.12.3"}
    earlier = {"command": "python -m benchmarks.mix_bench --parts product", "machine": epyc, "date": "2026-11-27",
               "records": [{"part": "product"}, {"part": "standard", "machine": h100}, {"part": "chains"}]}
    (tmp_path / "mix.json").write_text(json.dumps(earlier))
    monkeypatch.setattr(common, "machine", lambda: xeon)
    merged, _ = common.keep_previous("mix", [{"part": "chains", "new": True}], lambda r: r["part"] == "chains",
                                     directory=tmp_path)
    assert merged == [{"machine": epyc, "date": "2026-11-27", "part": "product"},
                      {"machine": h100, "date": "2026-11-27", "part": "standard"},  # its own machine stays
                      {"part": "chains", "new": True}]
    same, _ = common.keep_previous("mix", [], lambda r: False, directory=tmp_path, host=epyc)
    assert same == earlier["records"]  # merged under the earlier header: nothing to stamp
    (tmp_path / "mix.md").write_text("| table |\n")
    monkeypatch.setattr(render_results, "RESULTS", tmp_path)
    monkeypatch.setattr(render_results, "load", lambda name: {**earlier, "machine": xeon, "records": merged})
    block = render_results.render_block("mix")
    assert "on 2 cores, Xeon (GPU part: 16 cores, Xeon, GPU NVIDIA H100) (part measured on: 2 cores, AMD EPYC) " \
        "with" in block
