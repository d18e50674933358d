"""Where training runs (``TrainConfig.device``): the checkpoint says, CUDA without a GPU is refused, and on a
GPU (skipped without one) training and PyTorch inference run there and answer as the CPU does."""

import json

import numpy as np
import pytest
import torch

from intentvcs.cli.main import main
from intentvcs.training import DEFAULT_DATA
from intentvcs.training.config import TrainConfig
from intentvcs.training.model import ENCODER_DIR, IntentModel, load_tokenizer
from intentvcs.training.predict import infer
from intentvcs.training.trainer import Trainer, training_device
from tests.helpers.tiny import make_tiny_backbone

TRAIN, VALID = (str(DEFAULT_DATA / f"{split}.jsonl") for split in ("train", "valid"))
GPU = torch.cuda.is_available()


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    return make_tiny_backbone(tmp_path_factory.mktemp("backbone"))


def _run(backbone, out, device: str) -> int:
    return main(["train", "--train", TRAIN, "--valid", VALID, "--out", str(out), "--backbone", str(backbone),
                 "--epochs", "1", "--batch-size", "64", "--oos-rule", "none", "--device", device])


def _train(backbone, out, device: str) -> dict:
    assert _run(backbone, out, device) == 0
    return json.loads((out / "checkpoint.json").read_text())


def test_the_checkpoint_records_where_it_was_trained(backbone, tmp_path):
    meta = _train(backbone, tmp_path / "ckpt", "cpu")
    assert meta["train_config"]["device"] == "cpu" and meta["trained_on"] == "cpu"


def test_auto_takes_the_gpu_only_when_torch_sees_one():
    assert training_device("auto").type == ("cuda" if GPU else "cpu")
    assert training_device("cpu").type == "cpu"
    with pytest.raises(ValueError, match="unknown device"):
        TrainConfig(device="tpu")


@pytest.mark.skipif(GPU, reason="checks the refusal on a machine without a CUDA GPU")
def test_cuda_without_a_gpu_is_refused_before_training(backbone, tmp_path, capsys):
    with pytest.raises(ValueError, match="device 'cuda' requested but torch .* sees no CUDA GPU"):
        Trainer(TrainConfig(device="cuda"))
    out = tmp_path / "ckpt"
    assert _run(backbone, out, "cuda") == 2
    assert "sees no CUDA GPU" in capsys.readouterr().err and not out.exists()


@pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")
def test_training_on_the_gpu_hands_back_a_cpu_model_that_reads_as_on_the_gpu(backbone, tmp_path):
    out = tmp_path / "ckpt"
    meta = _train(backbone, out, "cuda")
    assert meta["trained_on"].startswith("cuda (") and meta["history"][0]["train_loss"] > 0
    model = IntentModel.from_checkpoint(out)
    tokenizer = load_tokenizer(out / ENCODER_DIR)
    texts = ["play some jazz", "turn off the lights in the kitchen", "what is the weather like tomorrow"]
    on_cpu = infer(model, tokenizer, texts, meta["max_length"])
    on_gpu = infer(model.to("cuda"), tokenizer, texts, meta["max_length"])
    np.testing.assert_allclose(on_gpu.logits, on_cpu.logits, atol=1e-4)
    np.testing.assert_allclose(on_gpu.pooled, on_cpu.pooled, atol=1e-4)
