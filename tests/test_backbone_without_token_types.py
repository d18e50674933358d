"""A backbone without segment embeddings (DistilBERT-style) trains, exports and serves.

``IntentModel.forward`` passed ``token_type_ids`` to every encoder, and DistilBERT's refuses the argument:
``intentvcs train --backbone <a DistilBERT folder>`` ended in an internal error (exit 3).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from intentvcs.cli import exit_codes
from intentvcs.cli.main import main
from tests.helpers.tiny import make_tiny_backbone, train_cli


@pytest.fixture(scope="module")
def distilbert(tmp_path_factory) -> Path:
    """A tiny random DistilBERT with the tiny BERT's WordPiece tokenizer."""
    import torch
    from transformers import BertTokenizerFast, DistilBertConfig, DistilBertModel

    root = tmp_path_factory.mktemp("distilbert")
    tokenizer = BertTokenizerFast.from_pretrained(make_tiny_backbone(root / "bert"))
    directory = root / "backbone"
    tokenizer.save_pretrained(directory)
    torch.manual_seed(0)
    config = DistilBertConfig(vocab_size=tokenizer.vocab_size, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                              max_position_embeddings=128)
    DistilBertModel(config).save_pretrained(directory, safe_serialization=True)
    return directory


def test_a_model_on_an_encoder_without_token_types_reads_batches_that_carry_them(distilbert):
    import torch

    from intentvcs.training.model import IntentModel

    model = IntentModel.from_backbone(distilbert, num_labels=3).eval()
    ids = torch.tensor([[2, 10, 11, 3]])
    mask = torch.ones_like(ids)
    with torch.no_grad():
        with_types = model(ids, mask, torch.zeros_like(ids))[0]
        without = model(ids, mask)[0]
    assert not model.reads_token_types
    assert torch.equal(with_types, without)


def test_a_distilbert_backbone_trains_exports_and_serves(distilbert, tmp_path):
    from intentvcs.service.engine import Engine

    assert train_cli(distilbert, tmp_path / "checkpoint", "--threads", "1", epochs=1) == exit_codes.OK
    assert main(["export", "--checkpoint", str(tmp_path / "checkpoint"), "--out", str(tmp_path / "bundle"),
                 "--no-quantize"]) == exit_codes.OK
    answer = Engine(tmp_path / "bundle", provider="cpu").predict(["play some music"])[0]
    assert answer["text"] == "play some music" and answer["intents"]
