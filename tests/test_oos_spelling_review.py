"""Review of the OOS rules, the spelling normaliser, the reference sample and the boundary head's targets
(intentvcs.core.{oos, spelling, references, boundaries}): each test pins one defect found and fixed."""

from __future__ import annotations

import numpy as np
import pytest

from intentvcs.core.boundaries import boundary_targets
from intentvcs.core.dataio import Example
from intentvcs.core.entities import IGNORE, words
from intentvcs.core.oos import DistanceRule, NonFiniteInput
from intentvcs.core.references import reference_sample
from intentvcs.core.spelling import Spelling, vocabulary


# -- boundary targets over a SentencePiece-style pre-tokenizer -------------------------------------------------------

def test_boundary_targets_mark_a_metaspace_word_whose_letters_begin_the_next_request():
    """A Metaspace pre-tokenizer (XLM-R, ALBERT, T5) gives "▁dim" the offsets of the space before "dim", while a
    chained row's segment starts at the letter: matched on the word's first offset, no word was ever a boundary
    and the boundary head of such a backbone learnt that no request ever begins."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    text = "play jazz dim the lights"
    vocab = [("<unk>", 0.0)] + [("▁" + word, -1.0) for word in text.split()]
    tokenizer = Tokenizer(models.Unigram(vocab, 0))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    encoding = tokenizer.encode(text)
    text_words = words(encoding.word_ids, encoding.offsets)
    assert text[text_words[2].start:text_words[2].end] == " dim"  # what the tokenizer says
    assert boundary_targets([text.index("dim")], text_words, len(encoding.ids) + 1) == [0, 0, 1, 0, 0, IGNORE]
    # A start on the first word is still no boundary, whichever offset the word begins at.
    assert boundary_targets([0], text_words, len(encoding.ids)) == [0, 0, 0, 0, 0]


# -- the spelling normaliser ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def spelling() -> Spelling:
    return Spelling.from_texts(["track my order please", "what is my order status", "log in as john",
                                "turn on the light", "불 켜주세요", "음악 틀어주세요"])


@pytest.mark.parametrize("text", ["track order ordr123 please", "log in as jonh42", "status of 4ordr please"])
def test_letters_glued_to_digits_are_a_code_not_a_misspelt_word(spelling, text):
    """An order number, a user name, a flight or product code ("ordr123", "jonh42") is no word: its letters were
    "corrected" ("order123", "john42"), sending the model, and the entity head, a code that was never written."""
    assert spelling.normalise(text) == text


@pytest.mark.parametrize("text", ["불 꺼주세요", "음악 꺼주세요"])
def test_a_hangul_word_is_not_bent_into_another_training_word(spelling, text):
    """A Hangul character is a whole syllable: one "edit" swaps a syllable, never mends a typo. "불 꺼주세요"
    ("turn the light off") was rewritten to the training words "불 켜주세요" ("turn the light on")."""
    assert spelling.normalise(text) == text


# -- the distance rule's statistics --------------------------------------------------------------------------------

@pytest.mark.parametrize("argument", ["train_pooled", "train_mid"])
def test_the_distance_rule_refuses_non_finite_training_embeddings_naming_them(argument):
    """One NaN in the training embeddings made every statistic NaN; the fit then failed with "shrinkage must lie
    in [0, 1], got nan" (or, for the middle layer, "oos.bank rows must be L2-normalised"), which sends whoever
    reads it to the shrinkage setting, not to the model's outputs."""
    rng = np.random.default_rng(0)
    train = {"train_pooled": rng.normal(size=(40, 6)), "train_mid": rng.normal(size=(40, 6))}
    train[argument][3, 2] = np.nan
    with pytest.raises(NonFiniteInput, match=argument):
        DistanceRule.fit(train["train_pooled"], np.arange(40) % 4, rng.normal(size=(30, 6)),
                         train["train_mid"], rng.normal(size=(30, 6)))


# -- the reference sample ------------------------------------------------------------------------------------------

def test_the_reference_sample_holds_at_most_cap_rows_of_any_intent_with_chained_rows():
    """A row written "X and Y" counts toward both intents: drawn for X, it came on top of Y's own draw of ``cap``
    rows, and with chained training data an intent kept up to about twice ``cap`` rows (the bundle's sample and
    the audit's kNN test grew with it), against "at most ``cap`` rows of each intent"."""
    rows = [Example(f"chain {i}", ("a", "b")) for i in range(30)] + [Example(f"b {i}", ("b",)) for i in range(30)]
    sample = reference_sample(rows, cap=10, seed=0)
    counts = {label: sum(label in row.labels for row in sample) for label in ("a", "b")}
    assert counts == {"a": 10, "b": 10}
    assert sample == reference_sample(rows, cap=10, seed=0)


def test_the_reference_sample_of_single_label_rows_is_the_seeded_draw_per_intent():
    """Single-label rows: each intent's rows are ``cap`` drawn by the seeded generator, intents in sorted order
    (the sample bundles hold, unchanged by the cap's bookkeeping for rows of several intents)."""
    rows = [Example(f"{label} {i}", (label,)) for i in range(25) for label in ("y", "x")]
    rng = np.random.default_rng(3)
    expected = sorted(int(i) for label in ("x", "y")
                      for i in rng.choice([k for k, row in enumerate(rows) if row.labels == (label,)], 10, False))
    assert [rows.index(row) for row in reference_sample(rows, cap=10, seed=3)] == expected


@pytest.mark.parametrize("trained, sent", [
    ("включи свет", "выключи свет"),            # Cyrillic: "turn on the light" trained, "turn off ..." sent
    ("άναψε το φως", "σβήσε το φως"),          # Greek
    ("불 켜주세요", "불 꺼주세요"),              # Hangul
])
def test_a_word_in_a_script_other_than_latin_is_never_bent_into_a_training_word(trained, sent):
    """The English list tells a real word from a typo in Latin letters only: "выключи" ("turn off"), absent
    from the training rows, was one edit from the training word "включи" ("turn on") and was rewritten to it."""
    spelling = Spelling(vocabulary([trained] * 5))
    assert spelling.rewrite(sent).text == sent


def test_latin_words_with_accents_are_still_mended():
    spelling = Spelling(vocabulary(["book a table at the café", "straße"] * 5))
    assert spelling.rewrite("book a tabel").text == "book a table"
    assert spelling.rewrite("strase").text == "straße"
