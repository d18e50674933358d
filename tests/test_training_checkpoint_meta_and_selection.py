"""Review of the training package: defects reproduced, one test each."""

import json
from types import SimpleNamespace

import pytest
import torch

from intentvcs.training.checkpoint import META_FILE, read_checkpoint_meta
from intentvcs.training.config import TrainConfig
from intentvcs.training.loaders import slot_folder
from intentvcs.training.trainer import Trainer, _Best


def test_a_checkpoint_json_that_is_not_utf8_is_named_in_the_error(tmp_path):
    """``read_checkpoint_meta`` promises errors naming the file; a checkpoint.json saved as UTF-16 (an editor's
    "Unicode") raised a bare UnicodeDecodeError, which the CLI printed without any path."""
    (tmp_path / META_FILE).write_bytes('{"labels": []}'.encode("utf-16"))
    with pytest.raises(ValueError, match=rf"{tmp_path / META_FILE}.*not UTF-8"):
        read_checkpoint_meta(tmp_path)


def test_a_byte_order_mark_does_not_become_part_of_the_first_intent(tmp_path):
    """A slot-folder split saved with a UTF-8 byte-order mark (Windows editors) made its first row's intent
    '\\ufeffPlayMusic', an intent of its own beside 'PlayMusic', without a word (the check for whitespace
    around intents does not see U+FEFF), and its text start with the invisible mark."""
    folder = tmp_path / "train"
    folder.mkdir()
    (folder / "seq.in").write_bytes(b"\xef\xbb\xbfplay music\nplay a song\n")
    (folder / "seq.out").write_bytes(b"O O\nO O B-x\n")
    (folder / "label").write_bytes(b"\xef\xbb\xbfPlayMusic\nPlayMusic\n")
    rows = slot_folder.load_split(tmp_path, "train")
    assert [ex.labels for ex in rows] == [("PlayMusic",), ("PlayMusic",)]
    assert rows[0].text == "play music"


def test_joint_selection_does_not_stop_a_run_whose_loss_still_falls_on_a_tied_overall_accuracy():
    """select_by="joint" (the default): an epoch that ties the best overall accuracy counted as no improvement,
    so with the default patience 1 a run stopped at epoch 3 and kept epoch 1 while the validation loss still fell
    (the tiny model's overall accuracy is 0.0 for its first epochs; ``intentvcs train``'s own advice for an entity
    head that found nothing, "train longer (--epochs)", could not take effect)."""
    trainer = Trainer(TrainConfig(select_by="joint", patience=1))
    run, best = SimpleNamespace(valid=[0], model=torch.nn.Linear(1, 1)), _Best()
    for epoch, loss in enumerate((0.9, 0.8, 0.7, 0.6), start=1):
        record = {"epoch": epoch, "train_loss": loss, "valid_loss": loss, "valid_overall": 0.0}
        assert trainer._keep_best(run, best, record), f"stopped at epoch {epoch}"
    assert best.epoch == 4


def test_a_checkpoint_of_an_unknown_method_is_refused_naming_the_file(tmp_path):
    """A checkpoint whose method this version does not know (written by a newer one) reached
    ``METHODS[meta["method"]]`` in refit as a bare KeyError, which the CLI answers as an internal error."""
    from intentvcs.training.checkpoint import CHECKPOINT_FORMAT

    meta = {**CHECKPOINT_FORMAT.stamp(), "labels": ["a"], "backbone": "x", "max_length": 16,
            "method": "contrastive_v9", "decision": {}}
    (tmp_path / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{tmp_path / META_FILE}.*method.*contrastive_v9"):
        read_checkpoint_meta(tmp_path)


def test_training_seconds_of_a_checkpoint_without_history():
    """The fallback (the epochs' sum) was computed even where the total is recorded: a KeyError without
    ``history``."""
    from intentvcs.training.checkpoint import training_seconds

    assert training_seconds({"train_seconds": 12.5}) == 12.5
    assert training_seconds({"history": [{"seconds": 1.25}, {"seconds": 2.0}]}) == 3.2
