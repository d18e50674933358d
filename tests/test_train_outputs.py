"""What train and refit write, and refuse, on the tiny random BERT: outputs all or none, the OOS rule "train"
scored on the rows as given and refused before training without rows to learn from, and no refit on the
training rows."""

from __future__ import annotations

import errno
import hashlib
import json
import shutil

import pytest

from intentvcs.cli.main import main
from intentvcs.core import atomic
from intentvcs.core.dataio import read_jsonl, write_jsonl
from tests.helpers.tiny import default_splits, make_tiny_backbone, train_cli

TRAIN, VALID, TEST = default_splits()


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    return make_tiny_backbone(tmp_path_factory.mktemp("backbone"))


def _train(backbone, out, *extra, train=TRAIN, valid=VALID):
    return train_cli(backbone, out, *extra, train=train, valid=valid, epochs=1)


@pytest.fixture(scope="module")
def checkpoint(backbone, tmp_path_factory):
    out = tmp_path_factory.mktemp("trained") / "ckpt"
    assert _train(backbone, out, "--oos-rule", "none") == 0
    return out


def _digests(folder) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _disk_full_for(monkeypatch, name: str) -> None:
    """Make the temporary file of output ``name`` fail as a full disk would."""
    real = atomic.tempfile.mkstemp

    def mkstemp(*args, prefix="", **kwargs):
        if prefix.startswith(f".{name}."):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, prefix=prefix, **kwargs)

    monkeypatch.setattr(atomic.tempfile, "mkstemp", mkstemp)


def test_a_result_file_that_cannot_be_written_leaves_the_earlier_checkpoint(backbone, checkpoint, tmp_path,
                                                                             monkeypatch, capsys):
    out = tmp_path / "ckpt"
    shutil.copytree(checkpoint, out)
    before = _digests(out)
    _disk_full_for(monkeypatch, "result.json")
    assert _train(backbone, out, "--oos-rule", "none", "--seed", "1", "--result", str(tmp_path / "result.json")) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert _digests(out) == before and not (tmp_path / "result.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # no temporary file or folder left
    monkeypatch.undo()
    assert _train(backbone, out, "--oos-rule", "none", "--seed", "1", "--result", str(tmp_path / "result.json")) == 0
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["checkpoint"] == str(out) and _digests(out) != before


def test_a_refit_that_cannot_write_its_decision_keeps_the_spelling_it_was_fitted_with(checkpoint, tmp_path,
                                                                                       monkeypatch, capsys):
    out = tmp_path / "ckpt"
    shutil.copytree(checkpoint, out)
    before = _digests(out)
    assert "spelling.json" in before
    _disk_full_for(monkeypatch, "checkpoint.json")
    assert main(["refit", "--checkpoint", str(out), "--train", TRAIN, "--valid", VALID, "--no-spelling"]) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert _digests(out) == before
    monkeypatch.undo()
    assert main(["refit", "--checkpoint", str(out), "--train", TRAIN, "--valid", VALID, "--no-spelling"]) == 0
    assert "spelling.json" not in _digests(out)
    assert json.loads((out / "checkpoint.json").read_text())["spelling"] is None


def test_refit_refuses_the_training_rows_as_validation_rows(checkpoint, capsys):
    before = _digests(checkpoint)
    assert main(["refit", "--checkpoint", str(checkpoint), "--train", TRAIN, "--valid", TRAIN]) == 2
    assert "is the --train file; give held-out rows" in capsys.readouterr().err
    assert _digests(checkpoint) == before


def test_the_oos_rule_train_without_unlabelled_training_rows_is_refused_before_training(backbone, tmp_path,
                                                                                        capsys, caplog):
    assert _train(backbone, tmp_path / "ckpt", "--oos-rule", "train") == 2
    assert "the training rows have none" in capsys.readouterr().err
    assert "epoch" not in caplog.text and list(tmp_path.iterdir()) == []


def test_the_oos_rule_train_is_scored_with_out_of_scope_rows_as_out_of_scope(backbone, tmp_path):
    """Training makes the unlabelled rows a class to learn; the figures still count them as out of scope, as
    intentvcs evaluate does (they were scored as in-scope rows of an intent 'oos')."""
    rows = list(read_jsonl(TRAIN)) + [ex for ex in read_jsonl(TEST) if ex.is_out_of_scope]
    train = tmp_path / "train.jsonl"
    write_jsonl(train, rows)
    assert _train(backbone, tmp_path / "ckpt", "--oos-rule", "train", "--test", TEST, train=str(train)) == 0
    metrics = json.loads((tmp_path / "ckpt" / "checkpoint.json").read_text())["metrics"]
    for split, path in (("valid", VALID), ("test", TEST)):
        examples = list(read_jsonl(path))
        assert metrics[split]["n_in_scope"] == sum(not ex.is_out_of_scope for ex in examples)
        assert {"oos_recall", "in_scope_accuracy", "auroc"} <= set(metrics[split])
    out = tmp_path / "evaluated.json"
    assert main(["evaluate", "--checkpoint", str(tmp_path / "ckpt"), "--data", TEST, "--out", str(out)]) == 0
    evaluated = json.loads(out.read_text())
    for figure in ("oos_recall", "in_scope_accuracy", "accuracy"):
        assert metrics["test"][figure] == pytest.approx(evaluated[figure])
