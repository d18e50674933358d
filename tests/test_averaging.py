"""The moving average of the trained weights (``intentvcs.training.averaging``) and the trainer's use of it."""

import json

import pytest
import torch
from safetensors.torch import load_file

from intentvcs.cli.main import main
from intentvcs.training import DEFAULT_DATA
from intentvcs.training.averaging import WeightAverage
from tests.helpers.tiny import make_tiny_backbone

TRAIN, VALID = (str(DEFAULT_DATA / f"{split}.jsonl") for split in ("train", "valid"))


def test_the_average_follows_the_weights_and_forgets_the_start_quickly():
    param = torch.nn.Parameter(torch.zeros(3))
    average = WeightAverage([param], decay=0.9)
    for value in (1.0, 2.0):
        param.data.fill_(value)
        average.update()
    # Update 1 folds in at 1 - 2/11, update 2 at 1 - min(0.9, 3/12) = 0.75.
    first = 1.0 * (1 - 2 / 11)
    assert torch.allclose(average.shadow[0], torch.full((3,), first + (2.0 - first) * 0.75))


def test_applied_swaps_the_average_in_and_the_weights_back_even_on_error():
    param = torch.nn.Parameter(torch.ones(2))
    average = WeightAverage([param], decay=0.5)
    average.shadow[0].fill_(7.0)
    with pytest.raises(RuntimeError), average.applied():
        assert param.tolist() == [7.0, 7.0]
        raise RuntimeError("validation failed")
    assert param.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("decay", [0.0, 1.0, -0.5])
def test_a_decay_outside_the_open_interval_is_refused(decay):
    with pytest.raises(ValueError, match="decay must lie strictly between 0 and 1"):
        WeightAverage([torch.nn.Parameter(torch.zeros(1))], decay)


def test_training_keeps_the_averaged_weights(tmp_path):
    backbone = make_tiny_backbone(tmp_path / "backbone")
    heads = {}
    for name, extra in (("raw", []), ("averaged", ["--ema-decay", "0.99"])):
        out = tmp_path / name
        assert main(["train", "--train", TRAIN, "--valid", VALID, "--out", str(out), "--backbone", str(backbone),
                     "--epochs", "1", "--batch-size", "64", "--oos-rule", "none", *extra]) == 0
        heads[name] = load_file(str(out / "head.safetensors"))["weight"]
        assert json.loads((out / "checkpoint.json").read_text())["train_config"]["ema_decay"] == (
            0.99 if extra else 0.0)
    # Same seed, same steps: the averaged head lags the raw one, so they differ.
    assert not torch.allclose(heads["raw"], heads["averaged"])
