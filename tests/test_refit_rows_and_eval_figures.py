"""Defects a review of ``evaluate`` and ``refit`` found, each reproduced first: refit read its validation and
test rows without train's checks (another file of the training rows: no word; test rows that are the validation
rows, span types the model cannot tag, too few rows), and two figures of data that cannot support them."""

from __future__ import annotations

import json
import shutil

import numpy as np

from intentvcs.core.dataio import Example, Span
from intentvcs.core.decision import Decision
from intentvcs.core.entities import Entity
from intentvcs.core.evaluation import evaluate
from intentvcs.core.outputs import GraphOutputs
from intentvcs.core.scoring import oos_metrics
from tests.helpers.bundle import make_tiny_checkpoint
from tests.test_refit_settings import TEXTS, refit, write_rows

CITY = {"A": "play music in paris", "B": "book a table in rome", "C": "will it rain in oslo"}


def spanned_rows(path, tail="", bogus=False):
    """One row per label with a city span (a ``bogus_type`` span instead when ``bogus``), then the label's texts."""
    rows = []
    for label, text in CITY.items():
        text += tail
        start = text.index(" in ") + 4
        rows.append({"text": text, "labels": [label],
                     "spans": [{"start": start, "end": start + 4, "label": "bogus_type" if bogus else "city"}]})
        rows += [{"text": other + tail, "labels": [label]} for other in TEXTS[label]]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_refit_names_a_copy_of_the_training_rows_given_as_validation_rows(tmp_path, caplog):
    ckpt = make_tiny_checkpoint(tmp_path / "ckpt", labels=("A", "B", "C"))
    train = write_rows(tmp_path / "train.jsonl", "ABC")
    copy = shutil.copy(train, tmp_path / "copy.jsonl")
    with caplog.at_level("WARNING"):
        assert refit(ckpt, train, str(copy)) == 0
    assert f"{copy}: all of 15 row(s) are also training rows ({train})" in caplog.text


def test_refit_refuses_test_rows_that_are_the_validation_file(tmp_path, capsys):
    ckpt = make_tiny_checkpoint(tmp_path / "ckpt", labels=("A", "B", "C"))
    train, valid = write_rows(tmp_path / "train.jsonl", "ABC"), write_rows(tmp_path / "v.jsonl", "ABC", tail=" now")
    assert refit(ckpt, train, valid, "--test", valid) == 2
    assert f"--test {valid} is the --valid file" in capsys.readouterr().err


def test_refit_refuses_a_span_type_the_training_rows_never_show(tmp_path, capsys):
    ckpt = make_tiny_checkpoint(tmp_path / "ckpt", labels=("A", "B", "C"), entity_types=("city",))
    train = spanned_rows(tmp_path / "train.jsonl")
    valid = spanned_rows(tmp_path / "valid.jsonl", tail=" please", bogus=True)
    assert refit(ckpt, train, valid) == 2
    assert f"{valid}:1: span type(s) ['bogus_type'] do not occur in the training data" in capsys.readouterr().err


def test_refit_names_training_rows_of_another_model_before_judging_the_validation_rows(tmp_path, capsys):
    """A --train file of other data was blamed on --valid ("valid.jsonl:1: span type(s) [...] do not occur in
    the training data"): the checkpoint's labels are asked of the training rows first."""
    ckpt = make_tiny_checkpoint(tmp_path / "ckpt", labels=("A", "B", "C"), entity_types=("city",))
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"text": "rate this book", "labels": ["RateBook"]}) + "\n")
    valid = spanned_rows(tmp_path / "valid.jsonl", tail=" please")
    assert refit(ckpt, str(other), valid) == 2
    err = capsys.readouterr().err
    assert f"{other}: rows carry labels the checkpoint was not trained on: ['RateBook']" in err, err


def test_refit_warns_of_too_few_validation_rows_as_train_does(tmp_path, caplog):
    ckpt = make_tiny_checkpoint(tmp_path / "ckpt", labels=("A", "B", "C"))
    train, valid = write_rows(tmp_path / "train.jsonl", "ABC"), write_rows(tmp_path / "v.jsonl", "ABC", tail=" now")
    with caplog.at_level("WARNING"):
        assert refit(ckpt, train, valid) == 0
    assert any("in-scope row(s) fit the out-of-scope cut" in message for message in caplog.messages)


def test_data_without_spans_gets_no_slot_figures():
    """A CSV holds no spans: every entity the model found counted as wrong, and slot F1 read 0."""
    decision = Decision(("A", "B"))
    outputs = GraphOutputs(np.array([[3.0, -3.0], [-3.0, 3.0]], dtype=np.float32), np.zeros((2, 4), np.float32),
                           None, np.array([[Entity("city", 0, 4, 0.9)], []], dtype=object))
    plain = [Example("rome trip", ("A",)), Example("book it", ("B",))]
    assert "slot_f1" not in evaluate(decision, outputs, plain, include_tables=False)
    spanned = [Example("rome trip", ("A",), spans=(Span(0, 4, "city"),)), plain[1]]
    assert evaluate(decision, outputs, spanned, include_tables=False)["slot_f1"] == 1.0


def test_no_in_scope_accuracy_of_no_in_scope_rows():
    figures = oos_metrics(np.array([True, False]), np.array([True, True]), np.array([False, False]))
    assert "in_scope_accuracy" not in figures and figures["n_in_scope"] == 0
    assert oos_metrics(np.array([False]), np.array([False]), np.array([True]))["in_scope_accuracy"] == 1.0
