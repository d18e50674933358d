"""Growing the vocabulary by the training rows' unknown words (``TrainConfig.extend_vocab``): the words it
adds, the embedding rows, identical splits in training's and serving's tokenizers, and a trained, exported,
served model that reads them."""

import json

import pytest
from tokenizers import Tokenizer

from intentvcs.cli.main import main
from intentvcs.core.dataio import write_jsonl, Example
from intentvcs.service.engine import Engine
from intentvcs.training.config import TrainConfig
from intentvcs.training.model import _load_encoder, load_tokenizer
from intentvcs.training.vocabulary import extend_vocabulary, unknown_words
from tests.helpers.tiny import make_tiny_backbone

TEXTS = ["play music 音乐 now", "play 音乐", "book a table 餐馆", "book 餐馆 for two", "rain 雨 tomorrow 🙂"]


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    return make_tiny_backbone(tmp_path_factory.mktemp("backbone"))


def test_unknown_words_are_counted_as_the_tokenizer_splits_them(backbone):
    counts = unknown_words(load_tokenizer(backbone), TEXTS)
    # The normaliser makes each CJK character a word of its own; Latin words are spelt by the pieces.
    assert counts == {"音": 2, "乐": 2, "餐": 2, "馆": 2, "雨": 1, "🙂": 1}


def test_words_seen_often_enough_become_tokens_with_embedding_rows(backbone, tmp_path):
    tokenizer, encoder = load_tokenizer(backbone), _load_encoder(backbone)
    before = len(tokenizer)
    grown, words = extend_vocabulary(tokenizer, encoder, TEXTS, min_count=2)
    assert words == ["乐", "音", "餐", "馆"]  # most frequent first, then in order; 雨 and 🙂 were seen once
    assert len(grown) == before + 4 == encoder.get_input_embeddings().weight.shape[0]
    assert grown.tokenize("play 音乐 雨") == ["play", "音", "乐", "[UNK]"]
    assert unknown_words(grown, TEXTS) == {"雨": 1, "🙂": 1}
    # Serving reads tokenizer.json with the tokenizers library: the same ids and offsets as training.
    grown.save_pretrained(tmp_path)
    served = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for text in TEXTS + ["音乐餐馆", "play音乐"]:
        mine = grown(text, return_offsets_mapping=True)
        theirs = served.encode(text)
        assert theirs.ids == mine["input_ids"] and theirs.offsets == [tuple(o) for o in mine["offset_mapping"]]
    assert (tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines()[-4:] == words


def test_nothing_unknown_changes_nothing(backbone):
    tokenizer, encoder = load_tokenizer(backbone), _load_encoder(backbone)
    grown, words = extend_vocabulary(tokenizer, encoder, ["play music"], min_count=1)
    assert words == [] and grown is tokenizer and encoder.get_input_embeddings().weight.shape[0] == len(tokenizer)
    with pytest.raises(ValueError, match="min_count"):
        extend_vocabulary(tokenizer, encoder, TEXTS, min_count=0)


def test_growing_the_vocabulary_needs_trained_embeddings():
    with pytest.raises(ValueError, match="trained embeddings"):
        TrainConfig(extend_vocab=2)
    assert TrainConfig(extend_vocab=2, freeze_embeddings=False).extend_vocab == 2


def test_a_grown_model_trains_exports_and_serves_the_new_words(backbone, tmp_path):
    pairs = (("play 音乐", "play"), ("play some 音乐 now", "play"), ("book 餐馆", "book"), ("a 餐馆 for two", "book"))
    rows = [Example(text, (label,)) for _ in range(4) for text, label in pairs]
    write_jsonl(tmp_path / "train.jsonl", rows)
    write_jsonl(tmp_path / "valid.jsonl", rows[:4])
    ckpt, bundle = tmp_path / "ckpt", tmp_path / "bundle"
    assert main(["train", "--train", str(tmp_path / "train.jsonl"), "--valid", str(tmp_path / "valid.jsonl"),
                 "--out", str(ckpt), "--backbone", str(backbone), "--epochs", "1", "--oos-rule", "none",
                 "--train-embeddings", "--extend-vocab", "2"]) == 0
    assert json.loads((ckpt / "checkpoint.json").read_text())["train_config"]["extend_vocab"] == 2
    assert main(["export", "--checkpoint", str(ckpt), "--out", str(bundle)]) == 0  # the parity gate passed
    served = Tokenizer.from_file(str(bundle / "tokenizer.json"))
    assert "[UNK]" not in served.encode("play 音乐 at the 餐馆").tokens
    answer = Engine(bundle, provider="cpu", threads=1).predict(["play 音乐"])[0]
    assert answer["intents"][0]["intent"] in {"play", "book"}


def test_the_command_line_refuses_a_grown_vocabulary_with_frozen_embeddings(backbone, tmp_path, capsys):
    write_jsonl(tmp_path / "train.jsonl", [Example("play 音乐", ("play",)), Example("book 餐馆", ("book",))])
    code = main(["train", "--train", str(tmp_path / "train.jsonl"), "--valid", str(tmp_path / "train.jsonl"),
                 "--out", str(tmp_path / "ckpt"), "--backbone", str(backbone), "--extend-vocab", "2"])
    assert code == 2
    assert "--extend-vocab needs trained embeddings" in capsys.readouterr().err
    assert not (tmp_path / "ckpt").exists()
