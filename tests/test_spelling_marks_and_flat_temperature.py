"""The spelling vocabulary reads words as ``rewrite`` does (combining marks and all), and a temperature
fitted on a flat objective is 1 (no scaling), not the lower bound."""

from __future__ import annotations

import json
import math
import re
import unicodedata

import numpy as np
import pytest

from intentvcs.core import calibration
from intentvcs.core.calibration import TEMPERATURE_BOUNDS, fit_temperature, nll
from intentvcs.core.dataio import Example, Span, read_jsonl
from intentvcs.core.spelling import Spelling, entity_vocabulary, vocabulary
from intentvcs.training import DEFAULT_DATA


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


# ------------------------------------------------------------------ spelling: words with combining marks
# Training texts whose words carry nonspacing marks: decomposed accents (NFD), Devanagari, Bengali and Tamil
# vowel signs and viramas, Hebrew niqqud, Arabic harakat.
MARKED = {
    "english_nfd": [nfd("update my résumé please"), nfd("find a café nearby"), nfd("naïve fiancée")],
    "hindi": ["सुबह सात बजे अलार्म लगाओ", "अलार्म सेट करो सुबह सात बजे", "मुझे एक कमरा चाहिए"],
    "bengali": ["আমাকে একটি ঘর দরকার", "গান বাজাও"],
    "tamil": ["எனக்கு ஒரு அறை வேண்டும்", "பாட்டு போடு"],
    "hebrew_niqqud": ["שָׁלוֹם עֲלֵיכֶם", "הַזְמֵן שֻׁלְחָן"],
    "arabic_harakat": ["مَرْحَبًا بِكُمْ", "اِحْجِزْ طَاوِلَةً", "شَغِّلْ المُوسِيقَى"],
    "vietnamese_nfd": [nfd("đặt bàn cho hai người"), nfd("bật nhạc lên"), nfd("thời tiết hôm nay")],
}


@pytest.mark.parametrize("language", sorted(MARKED))
def test_training_texts_with_combining_marks_are_left_as_written(language):
    texts = MARKED[language]
    spelling = Spelling.from_texts(texts)
    # Whole words, composed, lowercase: a letter with nonspacing marks (Mn) after it is one word to the
    # normaliser. (Spacing vowel signs, Mc, as in most Bengali and Tamil words, still end a word there.)
    whole = {unicodedata.normalize("NFKC", word).lower() for text in texts for word in text.split()
             if all(unicodedata.category(ch) != "Mc" for ch in word)}
    assert whole <= spelling.counts.keys()
    for text in texts:
        assert spelling.rewrite(text).edits == (), text
        assert spelling.normalise(text) == text
        # Composed or decomposed, a training word is a training word.
        for form in ("NFC", "NFD"):
            assert spelling.normalise(unicodedata.normalize(form, text)) == unicodedata.normalize(form, text)


def test_the_vocabulary_holds_whole_words_in_the_form_they_are_looked_up_in():
    spelling = Spelling.from_texts([nfd("find a café nearby"), nfd("update my résumé please")])
    assert sorted(spelling.counts) == ["a", "café", "find", "my", "nearby", "please", "résumé", "update"]
    assert all(unicodedata.is_normalized("NFKC", word) for word in spelling.counts)
    assert spelling.normalise("find a café nearby") == "find a café nearby"
    assert spelling.normalise("find a cafe nearby") == "find a cafe nearby"  # a word, not a typo: "café" as well
    assert spelling.normalise("find a cafw nearby") == "find a café nearby"  # a typo still mended
    hindi = Spelling.from_texts(["सुबह सात बजे अलार्म लगाओ"])
    assert "बजे" in hindi.counts and "बज" not in hindi.counts
    assert hindi.normalise("सुबह सात बजे अलार्म लगाओ") == "सुबह सात बजे अलार्म लगाओ"
    # Compatibility forms are counted in the letters they are looked up in.
    assert vocabulary(["ｆｉｎｄ ﬁles"]) == {"find": 1, "files": 1}


def test_a_capital_that_lowercases_to_a_letter_and_a_mark_is_a_word():
    # "İ" lowercases to "i" + U+0307: such words were left out of the vocabulary, and a training word with
    # one was "corrected" (Turkish "İki" -> "Iki", another letter). Numerals are still not words.
    train = ["İki bilet al", "iki kişi için masa ayır", "İstanbul'da hava nasıl"]
    spelling = Spelling.from_texts(train)
    assert [spelling.normalise(text) for text in train] == train
    assert vocabulary(["İstanbul Ⅷ ½ m²"]) == {"i̇stanbul": 1}


def test_entity_words_keep_their_marks():
    text = nfd("book a table at café zürich")
    start = text.index(nfd("café"))
    rows = [Example(text, ("book",), spans=(Span(start, len(text), "place"),))]
    assert entity_vocabulary(rows) == {"place": ["café", "zürich"]}
    spelling = Spelling.from_examples(rows)
    assert spelling.holds("place", "Café") and spelling.holds("place", nfd("zürich"))


def test_words_with_marks_are_valid_vocabulary_entries():
    assert Spelling({"बजे": 2, "i̇stanbul": 1, "café": 1}).normalise("सात बजे") == "सात बजे"
    for bad in ({"Caps": 1}, {"a1": 1}, {"two words": 1}, {"\u0301a": 1}, {"": 1}):
        with pytest.raises(ValueError, match="lowercase"):
            Spelling(bad)


def test_a_spelling_file_of_word_fragments_still_loads_and_answers_as_before(tmp_path):
    # What the former code wrote for the NFD "find a café nearby": the word in pieces at its accent.
    old = {"format": "intentvcs-spelling", "format_version": 1,
           "vocabulary": {"a": 1, "cafe": 1, "find": 1, "nearby": 1, "re": 1, "sume": 1}}
    path = tmp_path / "spelling.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    loaded = Spelling.load(path)
    assert loaded.counts == old["vocabulary"]
    # Its reading of a text is unchanged (the words it holds are the pieces): refitting is what mends it.
    assert loaded.normalise("find a café nearby") == "find a cafe nearby"
    assert Spelling.from_texts([nfd("find a café nearby")]).normalise("find a café nearby") == "find a café nearby"


def _former_words(text: str) -> list[str]:
    """How the vocabulary was read before: runs of letters, lowercased, letters only."""
    return [word.lower() for word in re.findall(r"[^\W\d_]+", text) if word.lower().isalpha()]


def test_the_embedded_training_data_gives_the_same_vocabulary_as_before():
    rows = read_jsonl(DEFAULT_DATA / "train.jsonl")
    former: dict[str, int] = {}
    for ex in rows:
        for word in _former_words(ex.text):
            former[word] = former.get(word, 0) + 1
    assert vocabulary(ex.text for ex in rows) == former
    former_entities: dict[str, set[str]] = {}
    for ex in rows:
        for span in ex.spans:
            former_entities.setdefault(span.label, set()).update(_former_words(ex.text[span.start:span.end]))
    assert entity_vocabulary(rows) == {label: sorted(words) for label, words in sorted(former_entities.items())}
    assert any(span for ex in rows for span in ex.spans)  # the entity words are compared on something


# ------------------------------------------------------------------ temperature: a flat objective is T = 1
@pytest.mark.parametrize("logits, targets, activation", [
    (np.array([[3.0], [1.0]]), np.array([0, 0]), "softmax"),  # one class: p = 1 at every T
    (np.zeros((5, 3)), np.array([0, 1, 2, 0, 1]), "softmax"),  # equal logits: uniform at every T
    (np.full((4, 3), 2.5), np.eye(3, dtype=int)[[0, 1, 2, 0]] | np.eye(3, dtype=int)[[1, 1, 0, 2]], "softmax"),
    (np.zeros((4, 2)), np.zeros((4, 2)), "sigmoid"),  # sigmoid logits of 0: p = 0.5 at every T
    (np.zeros((4, 2)), np.eye(2)[[0, 1, 1, 0]], "sigmoid"),
    (np.array([[1e300, -1e300], [0.0, 0.0]]), np.array([0, 1]), "softmax"),  # saturated and uniform rows
])
def test_a_flat_objective_gives_no_scaling(logits, targets, activation):
    lo, hi = TEMPERATURE_BOUNDS
    assert nll(logits, targets, activation, lo) == pytest.approx(nll(logits, targets, activation, hi), abs=1e-12)
    assert fit_temperature(logits, targets, activation) == 1.0
    # Bounds that leave 1 out: the one nearest to it.
    assert fit_temperature(logits, targets, activation, bounds=(2.0, 8.0)) == 2.0
    assert fit_temperature(logits, targets, activation, bounds=(0.1, 0.5)) == 0.5


def test_flat_means_within_a_billionth_of_a_nat_over_the_bounds():
    # Rows all right by a margin of 500 logits: at T = 20 the NLL is still ~1e-11 nats. Nothing to fit.
    assert fit_temperature(np.array([[500.0, 0.0], [0.0, 500.0]]), np.array([0, 1]), "softmax") == 1.0
    # By 300: ~3e-7 nats at T = 20, a set separated perfectly, sharpened to the lower bound as before.
    logits = np.array([[300.0, 0.0], [0.0, 300.0]])
    assert fit_temperature(logits, np.array([0, 1]), "softmax") == pytest.approx(TEMPERATURE_BOUNDS[0], rel=1e-4)
    assert calibration.FLAT_NLL == 1e-9


def _former_fit(logits, targets, activation, bounds=TEMPERATURE_BOUNDS, tol=1e-5) -> float:
    """``fit_temperature`` before a flat objective answered 1: the golden-section search alone."""
    objective = lambda u: nll(logits, targets, activation, math.exp(u))  # noqa: E731
    return float(math.exp(calibration._golden_section(objective, math.log(bounds[0]), math.log(bounds[1]), tol)))


def _realistic_cases():
    rng = np.random.default_rng(11)
    for n, n_labels, scale, t_true in [(200, 5, 3.0, 2.0), (60, 19, 6.0, 0.5), (500, 3, 1.5, 1.0), (30, 8, 4.0, 4.0)]:
        z = rng.normal(size=(n, n_labels)) * scale
        p = np.exp(z / t_true - (z / t_true).max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        yield z, np.array([rng.choice(n_labels, p=row) for row in p]), "softmax"
    z = rng.normal(size=(80, 6)) * 3
    sets = (rng.random(z.shape) < 0.15) | np.eye(6, dtype=bool)[z.argmax(1)]
    yield z, sets.astype(int), "softmax"  # label sets
    z = rng.normal(size=(300, 4)) * 3
    yield z, (rng.random(z.shape) < 0.5 * (1 + np.tanh(0.5 * z / 1.7))).astype(float), "sigmoid"
    yield np.array([[2.0, 0.0, 0.0]]), np.array([0]), "softmax"  # NLL falls to the lower bound
    yield np.array([[2.0, 0.0, 0.0]]), np.array([1]), "softmax"  # and rises to the upper one
    z = rng.normal(size=(50, 5))
    yield z, z.argmax(1), "softmax"


@pytest.mark.parametrize("case", range(9))
def test_a_temperature_the_objective_decides_is_the_same_as_before(case):
    logits, targets, activation = list(_realistic_cases())[case]
    assert fit_temperature(logits, targets, activation) == _former_fit(logits, targets, activation)
