"""Training-stack review: each test failed on the code before its fix.

PyTorch inference answers an empty list as the ONNX engine does (zero rows, not the tokenizer's
IndexError), so an augmentation that draws no copy trains; a text's tag scores are its own tokens'
whatever its batch-mates; the trainer refuses, before the model loads, validation rows that carry none
of the trained labels and a fixed label list that repeats a label (both were refused only after the
whole training, by the decision fit), a softmax method over one label (it trained nothing and reported
perfect figures) and a backbone folder that does not exist (named as a malformed Hub repository id);
the decision fit names validation rows none of which is in scope for what they are.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from intentvcs.core.dataio import Example, read_jsonl
from intentvcs.core.outputs import GraphOutputs
from intentvcs.training import DEFAULT_DATA
from intentvcs.training.config import DecisionConfig, TrainConfig
from intentvcs.training.decision_fit import fit_decision
from intentvcs.training.model import IntentModel, load_tokenizer
from intentvcs.training.predict import infer, tag_scores
from intentvcs.training.trainer import Trainer
from tests.helpers.tiny import make_tiny_backbone

TAGS = ["O", "B-x", "I-x"]
TRAIN = [ex for ex in read_jsonl(DEFAULT_DATA / "train.jsonl") if ex.labels][:60]
VALID = [ex for ex in read_jsonl(DEFAULT_DATA / "valid.jsonl") if ex.labels][:20]


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    return make_tiny_backbone(tmp_path_factory.mktemp("backbone"))


@pytest.fixture(scope="module")
def tagging_model(backbone):
    return IntentModel.from_backbone(backbone, 3, num_tags=len(TAGS), boundaries=True), load_tokenizer(backbone)


def test_torch_inference_of_no_texts_is_zero_rows_of_every_output(tagging_model):
    model, tokenizer = tagging_model
    outputs = infer(model, tokenizer, [], 16, tags=TAGS)
    assert outputs.logits.shape == (0, 3)
    assert outputs.pooled.shape == outputs.pooled_mid.shape == (0, model.head.in_features)
    assert len(outputs.entities) == len(outputs.starts) == 0
    assert tag_scores(model, tokenizer, [], 16, TAGS) == []


def test_augmenting_rows_too_few_for_one_copy_trains_on_the_rows_alone(backbone, caplog):
    """round(0.1 x 4) = 0 copies: encoding none of them was the tokenizer's IndexError, in the set-up."""
    config = TrainConfig(backbone=str(backbone), epochs=1, device="cpu", threads=1, augment_ratio=0.1)
    with caplog.at_level("INFO", logger="intentvcs.training.trainer"):
        result = Trainer(config).fit(TRAIN[:4], VALID)
    assert len(result.history) == 1
    assert "augmented training data for epoch 1: 4 -> 4 rows" in caplog.text


def test_a_texts_tag_scores_are_its_own_tokens_whatever_its_batch_mates(tagging_model):
    model, tokenizer = tagging_model
    short, long = "play music", "book a table for two people tonight at the cheap restaurant please"
    alone = tag_scores(model, tokenizer, [short], 32, TAGS)[0][0]
    beside = tag_scores(model, tokenizer, [short, long], 32, TAGS)[0][0]
    tokens = len(tokenizer(short)["input_ids"])
    assert alone.shape == beside.shape == (tokens, len(TAGS))
    np.testing.assert_allclose(alone, beside, atol=1e-5)


def _refuse_loading(monkeypatch):
    def loading(*args, **kwargs):
        raise AssertionError("the backbone loaded before the refusal")

    monkeypatch.setattr(IntentModel, "from_backbone", loading)


def test_validation_rows_of_no_trained_label_are_refused_before_the_model_loads(backbone, monkeypatch):
    _refuse_loading(monkeypatch)
    config = TrainConfig(backbone=str(backbone), epochs=1, device="cpu", threads=1)
    unknown = [Example("hello there", ("not_a_trained_intent",))] * 3
    with pytest.raises(ValueError, match=r"no validation row carries a label the model learns "
                                         r"\(3 rows, labels not_a_trained_intent\)"):
        Trainer(config).fit(TRAIN, unknown)


def test_a_fixed_label_list_that_repeats_a_label_is_refused_before_the_model_loads(backbone, monkeypatch):
    _refuse_loading(monkeypatch)
    labels = sorted({label for ex in TRAIN for label in ex.labels})
    config = TrainConfig(backbone=str(backbone), epochs=1, device="cpu", threads=1, labels=labels + labels[:1])
    with pytest.raises(ValueError, match=rf"the fixed label list repeats \['{re.escape(labels[0])}'\]"):
        Trainer(config).fit(TRAIN, VALID)


def test_a_decision_fit_on_validation_rows_none_in_scope_names_them():
    rows = [Example("what is the meaning of life", ())] * 4 + [Example("hello", ("unknown",))]
    rng = np.random.default_rng(0)
    outputs = GraphOutputs(rng.normal(size=(5, 3)), rng.normal(size=(5, 4)), rng.normal(size=(5, 4)))
    with pytest.raises(ValueError, match=r"none of the 5 validation rows carries one of the model's labels"):
        fit_decision(["a", "b", "c"], "softmax", rows, outputs, [], None, DecisionConfig(oos_rule="threshold"))


def test_a_softmax_method_over_one_label_is_refused_before_the_model_loads(backbone, monkeypatch):
    """A softmax over one output is 1 whatever the model says: the loss is 0 with no gradient, and the run
    kept the untouched backbone while reporting perfect validation figures."""
    _refuse_loading(monkeypatch)
    one = [Example(text, ("play_music",)) for text in ("play some music", "play a song", "put on my playlist")]
    with pytest.raises(ValueError, match=r"method pu reads a softmax over the labels, and the training rows have "
                                         r"one \('play_music'\)"):
        Trainer(TrainConfig(backbone=str(backbone), epochs=1, device="cpu", threads=1)).fit(one, one[:1])


def test_a_backbone_folder_that_does_not_exist_is_named_as_missing(tmp_path):
    """transformers read the path as a Hub repository id: "Repo id must be in the form 'repo_name' ..."."""
    missing = tmp_path / "no-such-backbone"
    expected = rf"{re.escape(str(missing))}: no such folder \(the backbone: a local Hugging Face model directory\)"
    with pytest.raises(FileNotFoundError, match=expected):
        Trainer(TrainConfig(backbone=str(missing), epochs=1, device="cpu", threads=1)).fit(TRAIN, VALID)
