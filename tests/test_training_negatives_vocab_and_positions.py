"""Second review of ``intentvcs.training``: negative sampling's generator, ``extend_vocab``'s counts, the
position limit of RoBERTa-style encoders, ``tags_read_intents`` without an entity head, and the ids that
``extend_vocab`` gives its words beside a tokenizer's added tokens."""

import logging

import pytest
import torch

from intentvcs.core.dataio import Example, Span
from intentvcs.training import trainer as trainer_module
from intentvcs.training.checkpoint import max_length_problem
from intentvcs.training.config import TrainConfig
from intentvcs.training.model import load_tokenizer
from intentvcs.training.trainer import Trainer
from intentvcs.training.vocabulary import extend_vocabulary
from tests.helpers.tiny import WORDS, make_tiny_backbone

REQUESTS = [("play music", "music"), ("book table", "book"), ("weather rain", "weather"), ("set alarm", "alarm")]
TRAIN = [Example(f"{text} please {n}", (label,)) for n in range(4) for text, label in REQUESTS]
VALID = [Example(f"{text} now", (label,)) for text, label in REQUESTS]


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    return make_tiny_backbone(tmp_path_factory.mktemp("backbone"))


def _config(backbone, **settings) -> TrainConfig:
    return TrainConfig(**{"backbone": str(backbone), "epochs": 1, "batch_size": 8, "device": "cpu", "threads": 1,
                          **settings})


def make_tiny_roberta(directory, positions: int = 20):
    """A random RoBERTa (padding index 1, so ``positions - 2`` usable positions) with a WordPiece tokenizer
    whose [PAD] is id 1 too; saved like any backbone folder."""
    from transformers import BertTokenizerFast, RobertaConfig, RobertaModel

    directory.mkdir(parents=True, exist_ok=True)
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = list(dict.fromkeys(["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"] + list(WORDS) + letters
                               + [f"##{c}" for c in letters] + [str(d) for d in range(10)]))
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab_file=str(directory / "vocab.txt"), do_lower_case=True).save_pretrained(directory)
    config = RobertaConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, max_position_embeddings=positions, pad_token_id=1, bos_token_id=0,
                           eos_token_id=2, type_vocab_size=1)
    torch.manual_seed(0)
    RobertaModel(config, add_pooling_layer=False).save_pretrained(directory, safe_serialization=True)
    return directory


# -- 1. negative sampling: validation draws its negatives apart from training ----------------------------------

def _negative_draws(monkeypatch, config, valid):
    """The negative-sampling generator's state at each call, (training, validation) calls apart."""
    from intentvcs.training.losses import negative_sampling_loss as real

    training, validating = [], []

    def spy(logits, targets, theta=0.1, generator=None):
        (validating if torch.is_inference_mode_enabled() else training).append(generator.get_state().clone())
        return real(logits, targets, theta=theta, generator=generator)

    monkeypatch.setattr(trainer_module, "negative_sampling_loss", spy)
    Trainer(config).fit(TRAIN, valid)
    return training, validating


def test_the_validation_rows_do_not_change_the_training_negatives(backbone, monkeypatch):
    config = _config(backbone, method="negative_sampling", epochs=2, patience=5)
    few, _ = _negative_draws(monkeypatch, config, VALID)
    # Another validation file (more rows, more batches of validation negatives), the same training rows and seed.
    more = VALID + [Example(f"{text} tonight thanks {n}", (label,)) for n in range(40) for text, label in REQUESTS]
    many, validating = _negative_draws(monkeypatch, config, more)
    assert len(few) == len(many) == 2 * 2  # two epochs of two batches
    assert all(torch.equal(a, b) for a, b in zip(few, many)), "the training draws followed the validation file"
    # Each epoch's validation loss reads the same negatives, so it compares the weights alone.
    per_epoch = len(validating) // 2
    assert per_epoch and all(torch.equal(a, b) for a, b in zip(validating[:per_epoch], validating[per_epoch:]))


# -- 2. extend_vocab counts the user's rows, not the synthetic chains built from them -------------------------

def test_extend_vocab_counts_the_training_rows_not_their_chains(backbone):
    once = Example("play music 猫", ("music",))  # a word the tiny vocabulary cannot spell, written once
    config = _config(backbone, extend_vocab=2, freeze_embeddings=False, chain_ratio=3.0)
    result = Trainer(config).fit(TRAIN + [once], VALID)
    # Chains repeat the rows they join: counted, 猫 came up about ten times and became a word.
    assert result.tokenizer.tokenize("猫") == ["[UNK]"]
    twice = Trainer(config).fit(TRAIN + [once, Example("set alarm 猫", ("alarm",))], VALID)
    assert twice.tokenizer.tokenize("猫") == ["猫"]


# -- 3. RoBERTa-style encoders: positions start after the padding index ---------------------------------------

def test_the_position_limit_of_a_roberta_style_encoder_leaves_out_the_padding_offset(tmp_path):
    from transformers import BertConfig, RobertaConfig, XLMRobertaConfig

    assert max_length_problem(512, RobertaConfig(max_position_embeddings=514)) is None
    for config in (RobertaConfig(max_position_embeddings=514), XLMRobertaConfig(max_position_embeddings=514)):
        assert "at most 512" in max_length_problem(514, config)
        assert "at most 512" in max_length_problem(513, config)
    assert max_length_problem(512, BertConfig(max_position_embeddings=512)) is None  # BERT counts from 0


def test_a_roberta_backbone_refuses_a_length_past_its_positions_and_trains_at_its_limit(tmp_path):
    backbone = make_tiny_roberta(tmp_path / "roberta", positions=20)
    long = [Example(f"{text} " + "song " * 30, (label,)) for text, label in REQUESTS] * 2
    with pytest.raises(ValueError, match="max_length: expected at most 18"):
        Trainer(_config(backbone, max_length=20)).fit(long, long[:4])
    result = Trainer(_config(backbone, max_length=18)).fit(long, long[:4])  # every text cut at 18 tokens
    assert result.best_epoch == 1


# -- 4. tags_read_intents without an entity head ------------------------------------------------------------

def test_tags_read_intents_is_recorded_off_where_no_entity_head_is_trained():
    assert not TrainConfig(entity_weight=0.0, tags_read_intents=True).tags_read_intents
    assert not TrainConfig.from_stored({"entity_weight": 0.0, "tags_read_intents": True}).tags_read_intents
    assert TrainConfig(tags_read_intents=True).tags_read_intents


def test_tags_read_intents_on_rows_without_spans_is_said_aloud(backbone, caplog):
    caplog.set_level(logging.WARNING, logger="intentvcs.training.trainer")
    result = Trainer(_config(backbone, tags_read_intents=True)).fit(TRAIN, VALID)
    assert result.model.tagger is None
    assert "tags_read_intents" in caplog.text and "no entity head" in caplog.text
    caplog.clear()
    spans = [Example("play music please", ("music",), spans=(Span(5, 10, "thing"),))]
    Trainer(_config(backbone, tags_read_intents=True)).fit(TRAIN + spans, VALID)
    assert "tags_read_intents" not in caplog.text


# -- 5. extend_vocab beside a tokenizer's added tokens ------------------------------------------------------

def test_extend_vocab_keeps_the_ids_of_the_tokenizers_added_tokens(backbone, tmp_path):
    from transformers import AutoModel

    tokenizer = load_tokenizer(backbone)
    tokenizer.add_tokens(["<user>"])  # beyond the WordPiece vocabulary: id len(vocab)
    tokenizer.save_pretrained(tmp_path)
    tokenizer = load_tokenizer(tmp_path)
    added = tokenizer.convert_tokens_to_ids("<user>")
    encoder = AutoModel.from_pretrained(str(backbone))
    encoder.resize_token_embeddings(len(tokenizer))
    row = encoder.get_input_embeddings().weight[added].detach().clone()

    grown, words = extend_vocabulary(tokenizer, encoder, ["猫 猫 <user>"], 2)
    assert words == ["猫"]
    user, cat = grown.convert_tokens_to_ids(["<user>", "猫"])
    assert grown("<user> 猫")["input_ids"][1:-1] == [user, cat] and user != cat
    # The added token reads the row it read before the vocabulary grew; the new word a row of its own.
    embeddings = encoder.get_input_embeddings().weight
    assert embeddings.shape[0] == len(grown) == len(tokenizer) + 1
    assert torch.equal(embeddings[user], row)
    assert not torch.equal(embeddings[cat], row)
    # As the service reads it: the tokenizers library, from the saved tokenizer.json.
    from tokenizers import Tokenizer

    grown.save_pretrained(tmp_path / "grown")
    served = Tokenizer.from_file(str(tmp_path / "grown" / "tokenizer.json"))
    assert served.encode("<user> 猫").ids[1:-1] == [user, cat]
