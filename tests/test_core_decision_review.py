"""Review of the served decision's core: entity confidences and offsets, calibration targets, the manifest's
refusals of numbers JSON cannot carry. Pure numpy and stdlib (plus ``tokenizers`` for one real pre-tokenizer)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from intentvcs.core import manifest
from intentvcs.core.calibration import brier, fit_temperature, nll
from intentvcs.core.decision import Decision
from intentvcs.core.entities import Entity, Word, decode, decode_batch, tag_vocabulary, whole_words, words
from intentvcs.core.manifest import BundleError

TAGS = tag_vocabulary(["city"])  # O, B-city, I-city


# -- entity confidences -------------------------------------------------------------------------------------

def test_an_entity_confidence_is_at_most_one_and_the_same_in_a_batch_as_alone():
    """The mean probability of an entity's tags was read off a running sum over the whole batch's words: a
    certain word after many others came out as 1.0000000000000002, and a text's confidences changed with the
    texts batched before it."""
    rng = np.random.default_rng(0)
    batch, length = 64, 40
    logits = rng.normal(size=(batch, length, len(TAGS))) * 3
    logits[..., TAGS.index("B-city")] += np.where(rng.random((batch, length)) < 0.2, 60.0, 0.0)
    per_text = [[Word(t, 2 * t, 2 * t + 1) for t in range(length)] for _ in range(batch)]
    found = decode_batch(logits, per_text, TAGS)
    confidences = [entity.confidence for entities in found for entity in entities]
    assert confidences and max(confidences) <= 1.0 and min(confidences) > 0.0
    for row in range(batch):
        assert found[row] == decode(logits[row], per_text[row], TAGS)


# -- entity offsets over a SentencePiece-style pre-tokenizer --------------------------------------------------

def test_an_entity_answered_over_metaspace_words_leaves_out_the_space_before_it():
    """A Metaspace pre-tokenizer (SentencePiece backbones: XLM-R, ALBERT, T5) gives a word's first piece
    "▁york" the offsets of the space it stands for: "new york" answered from 3, value " new york"."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = [("<unk>", 0.0), ("▁to", -1.0), ("▁new", -1.0), ("▁york", -1.0)]
    tokenizer = Tokenizer(models.Unigram(vocab, 0))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    text = "to new york"
    encoding = tokenizer.encode(text)
    text_words = words(encoding.word_ids, encoding.offsets)
    assert [text[w.start:w.end] for w in text_words] == ["to", " new", " york"]  # what the tokenizer says
    logits = np.full((len(encoding.ids), len(TAGS)), -10.0)
    for word, tag in zip(text_words, ("O", "B-city", "I-city")):
        logits[word.token, TAGS.index(tag)] = 10.0
    (entity,) = whole_words(decode(logits, text_words, TAGS), text, text_words)
    assert entity.to_dict(text)["value"] == "new york" and (entity.start, entity.end) == (3, 11)


def test_whole_words_still_widens_a_cut_word_and_keeps_an_entity_without_spaces_as_it_is():
    text = "to kitchen"
    text_words = [Word(1, 0, 2), Word(2, 3, 10)]
    cut = Entity("room", 3, 6, 0.9)  # "kit": the last kept piece of a truncated reading
    assert whole_words([cut], text, text_words) == (Entity("room", 3, 10, 0.9),)
    whole = Entity("room", 3, 10, 0.9)
    assert whole_words([whole], text, text_words)[0] is whole


# -- calibration targets ------------------------------------------------------------------------------------

@pytest.mark.parametrize("targets", [[[2, 0]], [[np.nan, 0]], [[0.5, 1]]])
def test_sigmoid_targets_other_than_zero_or_one_are_refused(targets):
    """Softmax label sets had to be 0/1, sigmoid targets did not: a NaN target made every NLL NaN and the fit
    answered the upper bound (20) in silence; a 2 gave a negative NLL."""
    logits = np.array([[1.0, -2.0]])
    for figure in (lambda: nll(logits, np.array(targets), "sigmoid"),
                   lambda: brier(logits, np.array(targets), "sigmoid"),
                   lambda: fit_temperature(logits, np.array(targets), "sigmoid")):
        with pytest.raises(ValueError, match="sigmoid targets must be 0/1"):
            figure()


def test_sigmoid_targets_of_zeros_and_ones_in_any_numeric_dtype_are_read():
    logits = np.array([[1.0, -2.0], [0.5, 0.3]])
    expected = nll(logits, np.array([[1.0, 0.0], [0.0, 1.0]]), "sigmoid")
    for targets in (np.array([[1, 0], [0, 1]]), np.array([[True, False], [False, True]])):
        assert nll(logits, targets, "sigmoid") == expected


# -- manifest: numbers JSON cannot carry ----------------------------------------------------------------------

def _manifest_fields() -> dict:
    labels = ["a", "b"]
    entry = {"sha256": "sha256:" + "0" * 64, "bytes": 1}
    return dict(
        name="m", labels=labels, backbone="tiny", max_length=8, decision=Decision(tuple(labels)).to_dict(),
        relations=None, data_fingerprint=None, source={}, evaluation={"f1": 0.5},
        model={"inputs": ["input_ids"], "outputs": ["logits", "pooled", "pooled_mid"], "opset": 17,
               "hidden_size": 4, "mid_layer": 0},
        files={"model.onnx": entry, "tokenizer.json": entry}, parity={}, quantization=None, spelling=None,
        entities=None)


def test_a_manifest_number_too_large_for_a_float_is_a_bundle_error_naming_the_field(tmp_path):
    """json.loads reads 1e400 as Infinity without the NaN/Infinity literal check; the digest's canonical JSON
    then failed with a plain ValueError naming neither the file nor the field."""
    path = tmp_path / manifest.MANIFEST_FILE
    manifest.write(path, manifest.create(**_manifest_fields()))
    text = path.read_text()
    path.write_text(text.replace('"evaluation": {', '"evaluation": {"auroc": 1e400, ', 1))
    assert path.read_text() != text
    with pytest.raises(BundleError, match=r"manifest\.json: evaluation\b") as info:
        manifest.read(path)
    assert info.value.field == "evaluation"


def test_a_manifest_written_with_a_nan_figure_is_a_bundle_error_naming_the_field():
    fields = _manifest_fields()
    fields["evaluation"] = {"nll": math.nan}
    with pytest.raises(BundleError, match=r"evaluation\b.*NaN") as info:
        manifest.create(**fields)
    assert info.value.field == "evaluation"


def test_a_valid_manifest_reads_back_as_written(tmp_path):
    path = tmp_path / manifest.MANIFEST_FILE
    written = manifest.create(**_manifest_fields())
    manifest.write(path, written)
    assert manifest.read(path) == json.loads(json.dumps(written))


def test_gold_tags_over_metaspace_words_begin_at_the_entitys_first_word():
    """Training's side of the test above: "▁new" begins at the space before "new", so read by its first
    character the word lay outside the span "new york", was tagged O, and "▁york" opened the entity."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    from intentvcs.core.dataio import Span
    from intentvcs.core.entities import word_tags

    tokenizer = Tokenizer(models.Unigram([("<unk>", 0.0), ("▁to", -1.0), ("▁new", -1.0), ("▁york", -1.0)], 0))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    encoding = tokenizer.encode("to new york")
    text_words = words(encoding.word_ids, encoding.offsets)
    assert word_tags([Span(3, 11, "city")], text_words) == ["O", "B-city", "I-city"]
    assert word_tags([Span(7, 11, "city")], text_words) == ["O", "O", "B-city"]
    # WordPiece words begin at their first letter: tagged as before.
    assert word_tags([Span(3, 11, "city")], [Word(1, 0, 2), Word(2, 3, 6), Word(3, 7, 11)]) == \
        ["O", "B-city", "I-city"]
