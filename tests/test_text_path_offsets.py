"""The text path of a request, reviewed: the spelling normaliser, the bundle's tokenizer, and the entity offsets the
engine answers, which must index the text as sent whatever the normaliser, Unicode or truncation did.

The tiny bundle's tagger is random, so the tests that check where entities lie replace its decoding with one that
tags words by position (``_tag_words``): every offset the engine answers then comes from the real tokenizer, the
real normaliser and the real mapping back onto the text as sent.
"""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
from tokenizers import Tokenizer

from intentvcs.core.entities import Entity, words
from intentvcs.core.spelling import Spelling
from intentvcs.service import onnx_session
from intentvcs.service.engine import Engine
from tests.helpers.bundle import MAX_LENGTH, make_tiny_bundle

SPELLING_TEXTS = ["wake me up tomorrow in the kitchen", "play some music in the kitchen",
                  "what is the weather in boston", "turn on the lights"]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return make_tiny_bundle(tmp_path_factory.mktemp("text_path"), entity_types=("city", "date"),
                            spelling_texts=SPELLING_TEXTS)


@pytest.fixture(scope="module")
def engine(bundle):
    return Engine(bundle, provider="cpu", threads=1)


def _tag_words(every: int):
    """A ``decode_batch`` that makes every ``every``-th word of each text an entity of its own."""
    def decode_batch(tag_logits, per_text_words, tags):
        return [tuple(Entity("city", word.start, word.end, 0.9) for index, word in enumerate(text_words)
                      if index % every == 0) for text_words in per_text_words]
    return decode_batch


def _values(answer: dict) -> list[str]:
    text = answer["text"]
    for entity in answer["entities"]:
        assert text[entity["start"]:entity["end"]] == entity["value"]
    return [entity["value"] for entity in answer["entities"]]


# -- spelling normaliser -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sent", [
    "我不想听音乐",      # "I don't want to listen to music": one edit from the training "我想听音乐" (the negation)
    "我想听音乐吗",      # the question particle
    "后天天气怎么样",    # "the day after tomorrow": one edit from "明天" (tomorrow)
    "音楽を再生しない",  # "don't play": two edits from "音楽を再生して" (play)
])
def test_runs_of_a_script_written_without_spaces_are_never_corrected(sent):
    """A run of Han, kana or Thai letters is a phrase, not a word: one "edit" there replaces a word (a negation,
    a date) with another, so the normaliser leaves it as sent; Latin typos in the same text are still mended."""
    spelling = Spelling.from_texts(["我想听音乐", "明天天气怎么样", "音楽を再生して", "play music in the kitchen"])
    assert spelling.normalise(sent) == sent
    assert spelling.normalise(f"play musc {sent}") == f"play music {sent}"


def test_corrections_next_to_punctuation_keep_it_and_the_offsets(engine, monkeypatch):
    """Corrections that change a word's length ("teh" -> "the" keeps it, "kitchn" -> "kitchen" adds one) shift
    every later offset; the answers still index the text as sent (entities on the uncorrected words only)."""
    monkeypatch.setattr(onnx_session, "decode_batch", _tag_words(2))
    text = "wake teh kitchn, up tomorow. kitchn"
    answer = engine.predict([text])[0]
    # "kitchn" at word 2 is an entity: a bent name, read as sent; the other corrections stay.
    assert answer["normalised"] == "wake the kitchn, up tomorrow. kitchen"
    # Words: wake teh kitchn , up tomorow . kitchn -> the even ones.
    assert _values(answer) == ["wake", "kitchn", "up", "."]


# -- entity offsets: whole words of the text as sent --------------------------------------------------------------

@pytest.mark.parametrize("form", ["NFC", "NFD"])
def test_an_entity_keeps_the_combining_marks_that_end_its_word(engine, monkeypatch, form):
    """A text in decomposed form ("Jose" + U+0301, as macOS and some keyboards send it): the tokenizer's accent
    stripping drops the final mark from its offsets, and the entity was "Jose", splitting the last letter from its
    accent. Both forms answer the whole word."""
    monkeypatch.setattr(onnx_session, "decode_batch", _tag_words(1))
    text = unicodedata.normalize(form, "call José at the café ñ")
    answer = engine.predict([text])[0]
    assert [unicodedata.normalize("NFC", value) for value in _values(answer)] == \
        ["call", "José", "at", "the", "café", "ñ"]


def test_an_entity_on_a_word_cut_by_truncation_covers_the_whole_word(engine, monkeypatch):
    """A text longer than max_length: the word the cut falls in was read by its first pieces (where its tag is
    read) and answered as "kit" of "kitchen"; it is answered whole, and nothing past the cut is answered."""
    monkeypatch.setattr(onnx_session, "decode_batch", _tag_words(1))
    pieces = len(engine.bundle.tokenizer.encode(["kitchen"])[0].ids) - 2
    assert pieces > 3  # letter pieces: the cut below falls inside the word
    head = ["play"] * (MAX_LENGTH - 2 - 3)  # the cut leaves "kitchen" three pieces
    for last in ("kitchen", "kitchn"):  # the second through the normaliser (read as sent: a bent name)
        text = " ".join(head + [last, "tonight", "boston"])
        values = _values(engine.predict([text])[0])
        assert values == head + [last], values


def test_offsets_index_the_text_as_sent_across_unicode_and_blanks(bundle, engine, monkeypatch):
    """Every entity of every kind of text is one whole word of the text as sent (``text[start:end] == value``, and
    its start and end are a word's in the tokenizer's reading of the whole text)."""
    monkeypatch.setattr(onnx_session, "decode_batch", _tag_words(2))
    texts = ["  wake teh\tkitchn \n tomorow  ", "emoji 😀 kitchn 😀 tomorow", "東京 kitchn 北京 teh",
             "שלום kitchn עולם", "ｋｉｔｃｈｎ in teh ｋｉｔｃｈｎ", "ﬁnd teh kitchn", "zero\u200bwidth kitchn",
             "\u00a0nbsp kitchn teh", "KITCHN TOMOROW TEH", "Kitchn tomorow Boston", "re\u0301sume\u0301 kitchn teh",
             " ".join(["kitchn teh"] * 20)]
    untruncated = Tokenizer.from_file(str(bundle / "tokenizer.json"))
    untruncated.no_truncation()
    for text, answer in zip(texts, engine.predict(texts)):
        encoding = untruncated.encode(text)
        text_words = words(encoding.word_ids, encoding.offsets)
        _values(answer)
        starts, ends = {w.start for w in text_words}, {w.end for w in text_words}
        for entity in answer["entities"]:
            end = entity["end"]
            while end > entity["start"] and unicodedata.category(text[end - 1]) == "Mn":
                end -= 1  # the marks the tokenizer's offsets leave out
            assert entity["start"] in starts and end in ends, (text, entity)


# -- tokenizer -----------------------------------------------------------------------------------------------------

def test_the_bundle_tokenizer_encodes_as_training_did(bundle):
    """Same ids (lowercasing, accent stripping, truncation at max_length included) and the same words as the
    checkpoint's tokenizer through training's ``encode``; a text of nothing readable is [CLS] [SEP]."""
    from intentvcs.training.batching import encode
    from intentvcs.training.model import load_tokenizer
    from intentvcs.service.tokenization import BundleTokenizer

    texts = ["Play MUSIC", "café  in  Zürich", "cafe\u0301", "  lead \t\n", "zero\u200bwidth", "😀 東京", "ｋｉｔｃｈｎ",
             "ﬁnd", " ".join(["play music"] * 40), "", "\u200b", "\u0301", "İstanbul", "don't", "x" * 300]
    trained = encode(load_tokenizer(bundle.parent / "checkpoint" / "encoder"), texts, MAX_LENGTH, need_words=True)
    served = BundleTokenizer(bundle / "tokenizer.json", MAX_LENGTH).encode(texts)
    assert [e.ids for e in served] == trained.input_ids
    assert [words(e.word_ids, e.offsets) for e in served] == trained.words
    assert served[texts.index("")].ids == served[texts.index("\u200b")].ids == served[texts.index("\u0301")].ids


# -- batches -------------------------------------------------------------------------------------------------------

def test_a_text_answers_alike_alone_and_beside_much_longer_ones(bundle):
    """fp32: intents, confidences (1e-5) and entities of a text do not depend on the texts batched with it,
    through the normaliser and chained requests too."""
    engine = Engine(bundle, provider="cpu", threads=1, quantized="off")
    short = ["wake me up tomorow in the kitchn", "play teh music in boston", "kitchn", "hi", "",
             "play music and then wake me up tomorow", "café in Zürich tomorrow"]
    long = [" ".join(["play the new album by daft punk on spotify in the living room"] * 6)] * 4
    alone = [engine.predict([text])[0] for text in short]
    together = engine.predict(long + short + long)[len(long):len(long) + len(short)]
    for a, b in zip(alone, together):
        assert [i["intent"] for i in a["intents"]] == [i["intent"] for i in b["intents"]]
        np.testing.assert_allclose([i["confidence"] for i in a["intents"]],
                                   [i["confidence"] for i in b["intents"]], atol=1e-5)
        assert a["entities"] == b["entities"] and a["accepted"] == b["accepted"] and a["parts"] == b["parts"]
        assert a["normalised"] == b["normalised"]


def test_whole_words_widens_a_cut_word_on_either_side_and_over_final_marks():
    """``whole_words`` alone: a start inside a word (truncation on the left) moves to the word's start, an end
    inside one (on the right) to its end, then over the combining marks after it; whole entities stay."""
    from intentvcs.core.entities import Word, whole_words

    text = "kitchen cite\u0301 now"
    text_words = [Word(1, 0, 7), Word(2, 8, 12), Word(3, 14, 17)]  # the mark is in no word's offsets
    found = (Entity("a", 3, 7, 0.5), Entity("b", 8, 10, 0.5), Entity("c", 14, 17, 0.5))
    assert [(e.start, e.end) for e in whole_words(found, text, text_words)] == [(0, 7), (8, 13), (14, 17)]
    assert whole_words(found[2:], text, text_words)[0] is found[2]
    assert whole_words((), text, text_words) == ()


def test_a_text_the_check_calls_uncut_encodes_the_same_with_and_without_the_cut(tmp_path_factory):
    # on_whole_words tokenises again, untruncated, only the texts BundleTokenizer.may_be_cut names; one it
    # passes over must read the same with max_length as without it, whatever its script. Texts of one piece per
    # character around the bound make a bound one character too loose fail.
    import random

    engine = Engine(make_tiny_bundle(tmp_path_factory.mktemp("uncut") / "model"), provider="cpu", threads=1)
    tokenizer = engine.session.tokenizer
    bound = tokenizer._uncut_chars
    dense = [mark * n for mark in ("!", "中", "🙂", "e\u0301") for n in range(bound - 3, bound + 4)]
    rng = random.Random(0)
    alphabet = "abc déf ñ 한국어 中文 ᾅ ǖ ﬁ 𝒜 🙂 İ ß!?" + "\u0301\u200b"
    texts = dense + ["".join(rng.choice(alphabet) for _ in range(rng.randrange(bound - 8, bound + 8)))
                     for _ in range(400)]
    passed = 0
    for text in texts:
        if not tokenizer.may_be_cut(text):
            passed += 1
            assert tokenizer.encode([text])[0].ids == tokenizer._whole.encode(text).ids, text
    assert passed > 50
    assert tokenizer.may_be_cut("!" * (bound + 1)) and not tokenizer.may_be_cut("!" * bound)


def test_a_tokenizer_whose_pieces_can_outnumber_characters_may_cut_every_text(tmp_path):
    # Byte-level BPE reads "🙂" as 4 bytes: the character bound holds for BERT's WordPiece only.
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    from intentvcs.service.tokenization import BundleTokenizer

    bpe = Tokenizer(models.BPE(vocab={chr(c): i for i, c in enumerate(range(33, 289))}, merges=[]))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.post_processor = processors.TemplateProcessing(single="$A", special_tokens=[])
    bpe.enable_truncation(16)
    bpe.enable_padding(pad_id=0)
    path = tmp_path / "tokenizer.json"
    bpe.save(str(path))
    tokenizer = BundleTokenizer(path, 16)
    assert tokenizer.may_be_cut("🙂🙂🙂🙂")


def test_the_checkpoint_answers_the_whole_words_the_bundle_does(bundle, engine, monkeypatch):
    """``evaluate --checkpoint`` and ``--bundle`` score the same entities: the PyTorch path widens over a word
    the cut fell in and over final combining marks as the engine does (it answered "kit" and "Jose")."""
    from intentvcs.training import predict as torch_predict

    monkeypatch.setattr(onnx_session, "decode_batch", _tag_words(1))
    monkeypatch.setattr(torch_predict, "decode_batch", _tag_words(1))
    checkpoint = torch_predict.TorchPredictor(bundle.parent / "checkpoint")
    texts = [" ".join(["play"] * (MAX_LENGTH - 5) + ["kitchen", "tonight"]),
             unicodedata.normalize("NFD", "call José at the café ñ")]
    served = [sorted((e.start, e.end) for e in row) for row in engine.infer(texts).entities]
    read = [sorted((e.start, e.end) for e in row) for row in checkpoint.infer(texts).entities]
    assert read == served


def test_a_text_of_replacement_characters_is_nothing_to_read_as_the_tokenizer_reads_it(bundle):
    """U+FFFD, a symbol, passed the request check, yet the tokenizer drops it: ``/predict`` answered a text of it
    alone with the model's guess for an empty string, where a blank text is refused (``empty_text``)."""
    from intentvcs.core.dataio import readable
    from intentvcs.service.schemas import PredictRequest
    from intentvcs.service.tokenization import BundleTokenizer

    served = BundleTokenizer(bundle / "tokenizer.json", MAX_LENGTH).encode(["\ufffd", "", "a\ufffd"])
    assert served[0].ids == served[1].ids != served[2].ids
    assert not readable("\ufffd \ufffd") and readable("a\ufffd")
    with pytest.raises(ValueError, match="non-whitespace"):
        PredictRequest.model_validate_json('{"text": "\\ufffd"}')
