"""Request boundaries (intentvcs.core.boundaries): targets from chained rows' segments, starts from logits."""

import numpy as np

from intentvcs.core.boundaries import boundary_targets, request_starts, segment_starts
from intentvcs.core.entities import IGNORE, Word

# "play jazz dim the lights": [CLS] play jazz dim the light ##s [SEP]
WORDS = [Word(1, 0, 4), Word(2, 5, 9), Word(3, 10, 13), Word(4, 14, 17), Word(5, 18, 24)]


def test_targets_mark_the_first_piece_of_each_later_request_start():
    assert boundary_targets([10], WORDS, 8) == [IGNORE, 0, 0, 1, 0, 0, IGNORE, IGNORE]
    assert boundary_targets(None, WORDS, 8) == [IGNORE, 0, 0, 0, 0, 0, IGNORE, IGNORE]
    # The first word never starts a *further* request.
    assert boundary_targets([0], WORDS, 8)[1] == 0


def test_segment_starts_read_a_chained_rows_meta():
    meta = {"segments": [{"start": 0, "end": 9, "intent": "a"}, {"start": 10, "end": 24, "intent": "b"}]}
    assert segment_starts(meta) == [10]
    assert segment_starts({"segments": []}) is None and segment_starts(None) is None and segment_starts({}) is None


def test_request_starts_are_the_words_scored_above_zero_after_the_first():
    logits = np.full((2, 8), -3.0, dtype=np.float32)
    logits[0, 1] = logits[0, 3] = 2.0  # the first word above 0 is no boundary
    logits[1, 6] = 5.0  # a later piece of a word is not read
    assert request_starts(logits, [WORDS, WORDS]) == [(10,), ()]
    assert request_starts(logits[:1], [[]]) == [()]


# -- trained, exported and served: the tiny random BERT, chains built from the embedded default data ------------

import json  # noqa: E402

import pytest  # noqa: E402

from intentvcs.cli.main import main  # noqa: E402
from intentvcs.training import DEFAULT_DATA  # noqa: E402
from tests.helpers.tiny import make_tiny_backbone  # noqa: E402

TRAIN, VALID = (str(DEFAULT_DATA / f"{split}.jsonl") for split in ("train", "valid"))
CHAINED = ["play some jazz turn off the lights", "what's the weather in paris and set an alarm for 7",
           "book a table for two", "remind me to call mom also whats the weather"]


def _train(backbone, out, *extra):
    return main(["train", "--train", TRAIN, "--valid", VALID, "--out", str(out), "--backbone", str(backbone),
                 "--epochs", "2", "--batch-size", "64", "--oos-rule", "none", "--chains", "1.0", *extra])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("boundaries")
    backbone = make_tiny_backbone(root / "backbone")
    assert _train(backbone, root / "ckpt") == 0
    assert main(["export", "--checkpoint", str(root / "ckpt"), "--out", str(root / "bundle"), "--quantize"]) == 0
    return root, backbone


def test_chains_train_a_boundary_head_that_the_bundle_serves_with_parity(trained):
    import onnx

    from intentvcs.service.engine import Engine
    from intentvcs.training.predict import TorchPredictor

    root, _ = trained
    assert (root / "ckpt" / "boundary.safetensors").is_file()
    assert json.loads((root / "ckpt" / "checkpoint.json").read_text())["train_config"]["boundary_weight"] == 1.0
    graph = onnx.load(str(root / "bundle" / "model.onnx"), load_external_data=False).graph
    output = next(o for o in graph.output if o.name == "boundary_logits")
    assert [d.dim_param or d.dim_value for d in output.type.tensor_type.shape.dim] == ["batch_size",
                                                                                      "sequence_length"]
    manifest = json.loads((root / "bundle" / "manifest.json").read_text())
    assert manifest["parity"]["passed"] and manifest["parity"]["start_mismatches"] == 0
    engine = Engine(root / "bundle", provider="cpu", quantized="off")
    assert engine.info["request_boundaries"] is True
    served = engine.infer(CHAINED).starts
    assert list(served) == list(TorchPredictor(root / "ckpt").infer(CHAINED).starts)
    assert all(all(0 < start < len(text) for start in found) for text, found in zip(CHAINED, served))


def test_no_boundary_head_without_its_weight(trained, tmp_path):
    from intentvcs.service.engine import Engine

    _, backbone = trained
    assert _train(backbone, tmp_path / "ckpt", "--boundary-weight", "0") == 0
    assert not (tmp_path / "ckpt" / "boundary.safetensors").exists()
    assert main(["export", "--checkpoint", str(tmp_path / "ckpt"), "--out", str(tmp_path / "bundle")]) == 0
    engine = Engine(tmp_path / "bundle", provider="cpu")
    assert engine.info["request_boundaries"] is False and engine.infer(CHAINED).starts is None


def test_a_perturbed_copy_takes_no_part_in_the_boundary_loss(tmp_path):
    from intentvcs.core.dataio import Example
    from intentvcs.training.config import TrainConfig
    from intentvcs.training.model import load_tokenizer
    from intentvcs.training.trainer import Trainer

    tokenizer = load_tokenizer(make_tiny_backbone(tmp_path / "backbone"))
    trainer = Trainer(TrainConfig(chain_ratio=1.0))
    trainer.boundaries = True
    segments = [{"start": 0, "end": 9, "intent": "a"}, {"start": 10, "end": 24, "intent": "b"}]
    chain = Example("play jazz dim the lights", ("a", "b"), "c", (), {"segments": segments})
    copy = Example("play uh jazz dim the lights", ("a", "b"), "c~x", (), {"segments": segments,
                                                                         "augmented_from": "c"})
    encoded = trainer._encode(tokenizer, [chain, copy], ["a", "b"])
    assert encoded.boundary_targets[0].count(1) == 1
    assert set(encoded.boundary_targets[1]) == {IGNORE}
