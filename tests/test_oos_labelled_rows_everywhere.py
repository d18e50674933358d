"""Rows labelled "oos" alone are out-of-scope rows wherever labelled rows are read, as train and evaluate
read them (``intentvcs.core.team_formats.out_of_scope_as_such``): the audit's batch (a new intent "oos" is
one no model answers, and the fix's relations named a label they then dropped: the report crashed), the
export's parity rows (read as in-scope rows of a train-rule model's "oos" class, a gate of 0 -> 0 passed),
``refit`` of a checkpoint trained before that with "oos" as an intent (its own rows were refused), and
``evaluate`` still refuses a bad data file before the model loads.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from intentvcs.core.decision import Decision
from intentvcs.core.oos import TrainRule
from intentvcs.core.outputs import GraphOutputs
from intentvcs.service.audit import AuditConfig, audit_batch
from tests.test_audit import FakeEngine, World


def jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def test_an_audit_batch_whose_out_of_scope_rows_are_labelled_oos_reports_no_oos_intent():
    world = World(0)
    batch = world.rows("oos", 40, "X") + world.rows("oos_chat", 40, "X") + world.rows("newY", 40, "Y")
    report = audit_batch(FakeEngine(world.table), batch, world.training(), AuditConfig(progress=False))
    assert "oos" not in [finding.verdict.intent for finding in report.findings]
    assert "oos" not in report.to_dict()["fix"]["relations"]["labels"]


def test_an_audit_batch_row_naming_oos_beside_an_intent_is_refused_by_index():
    from intentvcs.service.audit.batch import AuditInputError

    world = World(0)
    batch = world.rows("newY", 40, "Y") + [{"text": "play it and tell a joke", "labels": ["newY", "oos"]}]
    with pytest.raises(AuditInputError, match=r"rows\[40\]: labels \['newY', 'oos'\] name 'oos'"):
        audit_batch(FakeEngine(world.table), batch, world.training(), AuditConfig(progress=False))


def test_parity_rows_labelled_oos_are_out_of_scope_rows_for_the_int8_gate(tmp_path):
    """A train-rule model (a, b, oos) and parity rows all labelled "oos": int8 answering every one of them
    with an intent must fail the gate on OOS recall, not pass it on figures of 0 for both graphs."""
    from intentvcs.export.parity import held_out_rows
    from intentvcs.export.quantize import accuracy_gate

    labels = ["a", "b", "oos"]
    path = jsonl(tmp_path / "parity.jsonl", [{"text": f"joke {i}", "labels": ["oos"]} for i in range(30)])
    decision = Decision(labels=labels, activation="softmax", temperature=1.0, label_scale=[1, 1, 1],
                        thresholds=[0.5] * 3, oos=TrainRule(2), relations=None)
    held = held_out_rows(path, labels, oos_rule="train")
    assert all(not example.labels for example in held.examples)
    fp32, int8 = np.zeros((30, 3)), np.zeros((30, 3))
    fp32[:, 2], int8[:, 0] = 5.0, 5.0  # fp32: out of scope (right); int8: intent a (wrong)
    outputs = lambda logits: GraphOutputs(logits, np.zeros((30, 4)), np.zeros((30, 4)))  # noqa: E731
    gate = accuracy_gate(outputs(fp32), outputs(int8), decision, held.examples, held.source)
    assert gate is None or not gate["passed"]


def test_refit_reads_oos_rows_as_the_intent_of_a_checkpoint_trained_with_one(tmp_path):
    """A checkpoint trained (before rows labelled "oos" were read as out of scope) under the distance rule has an
    "oos" intent; refit with its own training file is accepted, not refused for lacking that label's rows."""
    from intentvcs.cli.commands.train import read_splits
    from intentvcs.training.pipeline import check_refit_rows

    rows = ([{"text": f"play song {i}", "labels": ["play"]} for i in range(3)]
            + [{"text": f"weather today {i}", "labels": ["weather"]} for i in range(3)]
            + [{"text": f"tell me a joke {i}", "labels": ["oos"]} for i in range(3)])
    train, valid = jsonl(tmp_path / "train.jsonl", rows), jsonl(tmp_path / "valid.jsonl", rows[::2])
    meta = {"labels": ["oos", "play", "weather"], "decision": {"oos": {"rule": "distance"}}}
    read, _, _ = read_splits(train, valid, None, "distance", oos_is_intent=True,
                             check_train=lambda r: check_refit_rows("ckpt", r, "distance", train, meta))
    assert [list(row.labels) for row in read][-1] == ["oos"]


def test_evaluate_refuses_a_bad_data_file_before_the_model_loads(tmp_path, monkeypatch, capsys):
    from intentvcs.cli import exit_codes
    from intentvcs.cli.commands import evaluate
    from intentvcs.cli.main import main

    monkeypatch.setattr(evaluate, "load_predictor", lambda args: pytest.fail("the model loaded first"))
    data = tmp_path / "data.jsonl"
    data.write_text("{not json\n", encoding="utf-8")
    code = main(["evaluate", "--bundle", str(tmp_path / "bundle"), "--data", str(data),
                 "--out", str(tmp_path / "out.json")])
    assert code == exit_codes.BAD_INPUT, capsys.readouterr().err


def test_post_audit_counts_no_oos_rows_among_its_new_intents(tmp_path):
    """The service's limit on new intents per request counted "oos" as one (a 413 for a batch within it)."""
    from intentvcs.cli.commands.serve import running
    from tests.helpers.bundle import make_tiny_bundle
    from tests.helpers.http import post

    bundle = make_tiny_bundle(tmp_path / "model")
    rows = [{"text": f"totally new request number {i}", "labels": ["brand_new"]} for i in range(12)]
    rows += [{"text": f"tell me a joke {i}", "labels": ["oos"]} for i in range(5)]
    with running(bundle, extra_env={"INTENTVCS_MAX_AUDIT_NEW_INTENTS": "1"}) as base:
        response = post(base, "/audit", {"rows": rows})
    assert response.status_code == 200, response.text
    assert [finding["intent"] for finding in response.json()["findings"]] == ["brand_new"]
