"""Pipeline review: each test failed on the code before its fix.

A relations file relating "oos" to an intent was refused only after the whole training.
A refit with --support-noise of a sigmoid checkpoint was refused only after the model had loaded and read every row.
A retention the OOS rule has no cut for, or a threshold rule under support decoding, was accepted by train and refit,
recorded as used, and changed nothing.
Test rows that repeat training or validation rows were scored as unseen without a word (validation rows were warned of).
--tagger-lr and --entity-floor where no entity head is trained (rows without spans), and refit's --entity-floor of a
checkpoint without one, were accepted and changed nothing.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from intentvcs.cli.main import main
from intentvcs.core.dataio import read_jsonl
from intentvcs.training import DEFAULT_DATA
from tests.helpers.bundle import make_tiny_checkpoint
from tests.test_refit_settings import edit_meta, refit, write_rows

TRAIN, VALID, TEST = (str(DEFAULT_DATA / f"{split}.jsonl") for split in ("train", "valid", "test"))


def no_training(monkeypatch) -> None:
    from intentvcs.training import trainer

    monkeypatch.setattr(trainer.Trainer, "fit", lambda *args: pytest.fail("the model was trained"))


def no_data_read(monkeypatch) -> None:
    from intentvcs.cli.commands import train

    monkeypatch.setattr(train, "read_splits", lambda *args, **kwargs: pytest.fail("the data was read"))


def no_model_loaded(monkeypatch) -> None:
    from intentvcs.training import pipeline

    monkeypatch.setattr(pipeline.IntentModel, "from_checkpoint",
                        lambda *args, **kwargs: pytest.fail("the model was loaded"))


def train(tmp_path: Path, *extra: str) -> int:
    return main(["train", "--train", TRAIN, "--valid", VALID, "--out", str(tmp_path / "ckpt"), "--no-spelling",
                 "--backbone", str(tmp_path / "no-backbone"), *extra])


@pytest.fixture
def data(tmp_path):
    return {"train": write_rows(tmp_path / "train.jsonl", "ABC"),
            "valid": write_rows(tmp_path / "valid.jsonl", "ABC", tail=" please")}


# ------------------------------------------------------------------ relations naming the out-of-scope verdict
def test_relations_naming_oos_are_refused_before_training(tmp_path, monkeypatch, capsys):
    no_training(monkeypatch)
    labels = sorted({label for ex in read_jsonl(TRAIN) for label in ex.labels})
    relations = tmp_path / "relations.json"
    relations.write_text(json.dumps({"format": "intentvcs-relations", "format_version": 1, "labels": [*labels, "oos"],
                                     "relations": [{"type": "subset", "child": "oos", "parent": labels[0]}]}))
    assert train(tmp_path, "--relations", str(relations)) == 2
    err = capsys.readouterr().err
    assert f"{relations}: subset ['oos', '{labels[0]}'] names 'oos', the out-of-scope verdict" in err, err
    assert not (tmp_path / "ckpt").exists()


# ------------------------------------------------------------------ refit: support decoding of a sigmoid model
def test_refit_refuses_support_decoding_of_a_sigmoid_checkpoint_before_the_model_loads(tmp_path, data, monkeypatch,
                                                                                       capsys):
    ckpt = make_tiny_checkpoint(tmp_path / "ckpt", labels=("A", "B", "C"))
    edit_meta(ckpt, method="bce")
    before = (ckpt / "checkpoint.json").read_bytes()
    no_model_loaded(monkeypatch)
    assert refit(ckpt, data["train"], data["valid"], "--support-noise", "0.003") == 2
    err = capsys.readouterr().err
    assert "--support-noise: support decoding reads a softmax's probabilities" in err and "'bce'" in err, err
    assert (ckpt / "checkpoint.json").read_bytes() == before


# ------------------------------------------------------------------ settings the decision does not read
@pytest.mark.parametrize("extra,said", [
    (("--oos-rule", "threshold", "--oos-retention", "0.8"), "--oos-retention 0.8 would change nothing"),
    (("--oos-rule", "none", "--oos-part-retention", "0.8"), "--oos-part-retention 0.8 would change nothing"),
    (("--oos-rule", "train", "--oos-retention", "0.9"), "--oos-retention 0.9 would change nothing"),
    (("--support-noise", "0.003", "--threshold-rule", "per_label_f1"),
     "--threshold-rule per_label_f1 would change nothing"),
])
def test_train_refuses_a_decision_setting_nothing_reads_before_reading_the_data(tmp_path, monkeypatch, capsys, extra,
                                                                                said):
    no_data_read(monkeypatch)
    assert train(tmp_path, *extra) == 2
    err = capsys.readouterr().err
    assert said in err, err
    assert not (tmp_path / "ckpt").exists()


def test_refit_refuses_a_retention_the_checkpoints_oos_rule_does_not_read(tmp_path, data, monkeypatch, capsys):
    """The checkpoint's rule is threshold (not given): its operating point is not --oos-retention."""
    ckpt = make_tiny_checkpoint(tmp_path / "ckpt", labels=("A", "B", "C"))
    before = (ckpt / "checkpoint.json").read_bytes()
    no_model_loaded(monkeypatch)
    assert refit(ckpt, data["train"], data["valid"], "--oos-retention", "0.8") == 2
    err = capsys.readouterr().err
    assert "--oos-retention 0.8 would change nothing: the OOS rule distance alone reads it (its cut), and " \
           "--oos-rule is threshold" in err, err
    assert (ckpt / "checkpoint.json").read_bytes() == before


def test_refit_refuses_an_entity_floor_for_a_checkpoint_without_an_entity_head(tmp_path, data, monkeypatch, capsys):
    ckpt = make_tiny_checkpoint(tmp_path / "ckpt", labels=("A", "B", "C"))
    assert not json.loads((ckpt / "checkpoint.json").read_text(encoding="utf-8")).get("entities")
    no_model_loaded(monkeypatch)
    assert refit(ckpt, data["train"], data["valid"], "--entity-floor", "0.3") == 2
    err = capsys.readouterr().err
    assert "--entity-floor 0.3 would change nothing" in err and "has no entity head" in err, err


def test_a_setting_the_decision_reads_is_still_taken():
    from intentvcs.cli.commands.train import check_read_settings
    from intentvcs.training.config import DecisionConfig

    check_read_settings(DecisionConfig(oos_rule="threshold", oos_part_retention=0.8), ["oos_rule",
                                                                                       "oos_part_retention"])
    check_read_settings(DecisionConfig(oos_rule="distance", oos_retention=0.8), ["oos_retention"])
    check_read_settings(DecisionConfig(support_noise=0.003, threshold_rule="global"), ["support_noise"])
    # Recorded by the checkpoint, not given: carried as it is.
    check_read_settings(DecisionConfig(oos_rule="none", oos_retention=0.8), ["oos_rule"])


# ------------------------------------------------------------------ test rows that are training rows
def test_test_rows_that_repeat_training_or_validation_rows_are_warned_of(tmp_path, caplog):
    from intentvcs.cli.commands.train import read_splits

    train, valid = write_rows(tmp_path / "train.jsonl", "ABC"), write_rows(tmp_path / "valid.jsonl", "ABC", tail=" now")
    copy = tmp_path / "copy.jsonl"
    copy.write_text(Path(train).read_text())
    mixed = tmp_path / "mixed.jsonl"  # one validation row, then four new ones
    fresh = Path(write_rows(tmp_path / "fresh.jsonl", "A", oos=False, tail=" later")).read_text()
    mixed.write_text(Path(valid).read_text().splitlines(keepends=True)[0] + fresh)
    with caplog.at_level(logging.WARNING, logger="intentvcs.cli.commands.train"):
        read_splits(train, valid, str(copy), "distance")
    # The out-of-scope rows are no training rows the distance rule learns from: the 12 in-scope ones.
    assert f"{copy}: 12 of 15 row(s) are also rows the model was trained on ({train})" in caplog.text, caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="intentvcs.cli.commands.train"):
        read_splits(train, valid, str(mixed), "distance")
    assert f"{mixed}: 1 of 5 row(s) are also rows the decision layer was fitted on ({valid})" in caplog.text
    assert "the model was trained on" not in caplog.text
    caplog.clear()
    held_out = write_rows(tmp_path / "test.jsonl", "ABC", tail=" later")
    with caplog.at_level(logging.WARNING, logger="intentvcs.cli.commands.train"):
        read_splits(train, valid, held_out, "distance")
    assert "are also rows" not in caplog.text


@pytest.mark.parametrize("option", [["--tagger-lr", "1e-2"], ["--entity-floor", "0.3"]])
def test_an_entity_setting_is_refused_before_the_model_loads_where_no_entity_head_is_trained(option, tmp_path,
                                                                                             capsys):
    """Rows without spans train no entity head: --tagger-lr and --entity-floor were recorded as used and changed
    nothing (refused now, before the backbone loads: the folder named by --backbone does not exist)."""
    rows = "".join(json.dumps({"text": f"play song {i}", "labels": ["play"]}) + "\n" for i in range(4)) + \
        "".join(json.dumps({"text": f"stop song {i}", "labels": ["stop"]}) + "\n" for i in range(4))
    (tmp_path / "t.jsonl").write_text(rows, encoding="utf-8")
    (tmp_path / "v.jsonl").write_text(rows.replace("song", "track"), encoding="utf-8")
    code = main(["train", "--train", str(tmp_path / "t.jsonl"), "--valid", str(tmp_path / "v.jsonl"),
                 "--out", str(tmp_path / "ck"), "--backbone", str(tmp_path / "no-such-backbone"), *option])
    err = capsys.readouterr().err
    assert code == 2 and "would change nothing: no entity head is trained (no training row carries an entity span)" \
        in err, err
