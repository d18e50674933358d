"""Second review of evaluation and scoring: defects reproduced first, each test failing on the code before it.

- The robustness Hard set judged a variant right by its own rule (the arg-max column), not by the score it then
  reports (``evaluate``'s accuracy: the train rule's "oos" column is no intent; a row of several gold labels is
  right when the accepted set is exactly them), so it could keep a variant the score counts right over one it
  counts wrong.
- ``evaluate`` and ``robustness`` on rows none of whose gold labels the model knows scored every in-scope row
  missed (every figure 0) under a warning, exit 0; train and refit refuse such validation rows.
- ``evaluate`` reported slot F1 0 when only out-of-scope rows carried spans (slot figures are in-scope only).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from intentvcs.cli import exit_codes
from intentvcs.cli.main import main
from intentvcs.core.dataio import Example, Span
from intentvcs.core.decision import Decision
from intentvcs.core.entities import Entity
from intentvcs.core.evaluation import evaluate, gold_matrix
from intentvcs.core.oos import TrainRule
from intentvcs.core.outputs import GraphOutputs, tuple_array
from intentvcs.core.robustness import PerturbedSets, hard_set, infer_distinct, outcomes
from tests.helpers.bundle import make_tiny_bundle

TRAIN_RULE = Decision(("A", "B", "oos"), oos=TrainRule(2))


def graph(logits) -> GraphOutputs:
    logits = np.asarray(logits, dtype=np.float32)
    return GraphOutputs(logits, np.zeros((len(logits), 3), np.float32), None)


def per_row_accuracy(decision: Decision, logits, examples) -> list[bool]:
    """``evaluate``'s accuracy of each row on its own."""
    return [evaluate(decision, graph([row]), [ex], include_tables=False)["accuracy"] == 1.0
            for row, ex in zip(logits, examples)]


@pytest.mark.parametrize("decision, logits, labels", [
    # The train rule calls it out of scope ("oos" strictly top), yet its top intent, A, is gold.
    (TRAIN_RULE, [[2.0, 0.0, 3.0]], ("A",)),
    # Two gold labels, only A accepted: evaluate's accuracy wants the set; A on top is not enough.
    (Decision(("A", "B")), [[3.0, -3.0]], ("A", "B")),
])
def test_hard_set_outcomes_judge_a_row_as_the_accuracy_does(decision, logits, labels):
    examples = [Example("x", labels)]
    gold, _ = gold_matrix(examples, decision.labels)
    right, _ = outcomes(decision, decision.apply(np.asarray(logits)), gold, "accuracy")
    assert right.tolist() == per_row_accuracy(decision, logits, examples)


def test_hard_set_keeps_the_variant_the_score_counts_wrong():
    """Variant 1 is judged out of scope with A its top intent (right, by evaluate's accuracy); variant 2 answers
    B (wrong). Read by arg-max both were wrong, and the less firm one, variant 1, was kept: Hard read 100%."""
    logits = {"play jazz": [3.0, 0.0, 0.0], "PLAY JAZZ": [2.0, 0.0, 3.0], "play jazz.": [1.0, 1.5, -5.0]}
    examples = [Example("play jazz", ("A",))]
    variants = [Example("PLAY JAZZ", ("A",)), Example("play jazz.", ("A",))]
    sets = PerturbedSets({"casing": (np.array([0]), variants[:1]), "punctuation": (np.array([0]), variants[1:])},
                         [], [])
    outputs = infer_distinct(lambda texts: graph([logits[t] for t in texts]), list(logits), TRAIN_RULE,
                             segment=False, progress=False)
    rows, chosen, names = hard_set(TRAIN_RULE, outputs, examples, sets, "accuracy")
    assert (rows.tolist(), names) == ([0], ["punctuation"])
    assert chosen == variants[1:]


def test_slot_figures_need_a_gold_span_on_an_in_scope_row():
    """Slot figures are over in-scope rows; a span on an out-of-scope row gave the in-scope rows, which carry
    none, a slot F1 of 0 (every entity found counted wrong), as data without spans did before."""
    decision = Decision(("A", "B"))
    outputs = GraphOutputs(np.array([[3.0, -3.0], [0.0, 0.0]], dtype=np.float32), np.zeros((2, 3), np.float32),
                           None, tuple_array([(Entity("city", 0, 4, 0.9),), ()]))
    rows = [Example("rome trip", ("A",)), Example("a walk in paris", (), spans=(Span(10, 15, "city"),))]
    assert "slot_f1" not in evaluate(decision, outputs, rows, include_tables=False)
    rows[0] = Example("rome trip", ("A",), spans=(Span(0, 4, "city"),))
    assert evaluate(decision, outputs, rows, include_tables=False)["slot_f1"] == 1.0


# -- the CLI --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return make_tiny_bundle(tmp_path_factory.mktemp("pass2") / "model")


@pytest.mark.parametrize("command", ["evaluate", "robustness"])
def test_scoring_refuses_rows_of_no_label_the_model_knows(command, bundle, tmp_path, capsys):
    """Another model's data (every gold label unknown) read as a model that misses everything: figures of 0."""
    data = tmp_path / "other.jsonl"
    data.write_text(json.dumps({"text": "show me flights to boston", "labels": ["atis_flight"]}) + "\n"
                    + json.dumps({"text": "hello there", "labels": []}) + "\n")
    out = tmp_path / "out.json"
    extra = ["--operators", "casing", "--draws", "1"] if command == "robustness" else []
    assert main([command, "--bundle", str(bundle), "--data", str(data), "--out", str(out), *extra]) \
        == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert f"{data}: no row carries a label the model was trained on (atis_flight (1))" in err, err
    assert not out.exists()


def test_scoring_takes_rows_that_are_all_out_of_scope(bundle, tmp_path):
    """Out-of-scope rows carry no label to know: they are scored (OOS recall), not refused."""
    data = tmp_path / "oos.jsonl"
    data.write_text(json.dumps({"text": "hello there", "labels": []}) + "\n")
    out = tmp_path / "out.json"
    assert main(["evaluate", "--bundle", str(bundle), "--data", str(data), "--out", str(out)]) == exit_codes.OK
    assert "oos_recall" in json.loads(out.read_text())


def test_train_and_refit_refuse_test_rows_of_no_label_they_learn(tmp_path):
    """``--test`` rows of another data set trained for minutes, then wrote test figures of 0 under a warning."""
    from intentvcs.cli.commands.train import read_splits

    rows = {"train": ["play some jazz", "play the radio"], "valid": ["play a song"]}
    for split, texts in rows.items():
        (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps({"text": text, "labels": ["play_music"]}) + "\n"
                                                         for text in texts))
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"text": "show me flights to boston", "labels": ["atis_flight"]}) + "\n")
    with pytest.raises(ValueError, match=r"other\.jsonl: no row carries a label the model was trained on "
                                         r"\(atis_flight \(1\)\)"):
        read_splits(str(tmp_path / "train.jsonl"), str(tmp_path / "valid.jsonl"), str(other), "none")
