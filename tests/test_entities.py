"""Entities: the BIO scheme over words, decoding, span scoring (checked against seqeval),
offsets through the spelling normaliser, and the data rules on spans."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from intentvcs.core.dataio import DataError, Span, parse_row
from intentvcs.core.team_formats import check_span_types
from intentvcs.core.entities import (
    IGNORE,
    OUTSIDE,
    Word,
    aligned,
    bio_path,
    chunks,
    decode,
    entity_types,
    spans_of,
    tag_vocabulary,
    token_targets,
    word_tags,
    words,
)
from intentvcs.core.scoring import span_metrics
from intentvcs.core.spelling import Spelling
from intentvcs.training.loaders.slot_folder import bio_to_spans


def test_tag_vocabulary_is_outside_then_b_and_i_of_sorted_types():
    tags = tag_vocabulary(["time", "city", "time"])
    assert tags == ["O", "B-city", "I-city", "B-time", "I-time"]
    assert entity_types(tags) == ["city", "time"]


def test_words_group_pieces_and_skip_special_tokens():
    # [CLS] wake me up at 6 : 30 ##am [SEP]: "6:30am" is three words, the last of two pieces.
    word_ids = [None, 0, 1, 2, 3, 4, 5, 6, 6, None]
    offsets = [(0, 0), (0, 4), (5, 7), (8, 10), (11, 13), (14, 15), (15, 16), (16, 18), (18, 20), (0, 0)]
    assert words(word_ids, offsets) == [Word(1, 0, 4), Word(2, 5, 7), Word(3, 8, 10), Word(4, 11, 13),
                                        Word(5, 14, 15), Word(6, 15, 16), Word(7, 16, 20)]


def test_word_tags_targets_and_decoding_round_trip():
    text = "wake me at 6:30 in new york"
    text_words = [Word(i + 1, s, e) for i, (s, e) in enumerate(
        [(0, 4), (5, 7), (8, 10), (11, 12), (12, 13), (13, 15), (16, 18), (19, 22), (23, 27)])]
    spans = (Span(11, 15, "time"), Span(19, 27, "city"))
    tags = word_tags(spans, text_words)
    assert tags == ["O", "O", "O", "B-time", "I-time", "I-time", "O", "B-city", "I-city"]
    assert spans_of(tags, text_words) == spans
    vocabulary = tag_vocabulary(["city", "time"])
    index = {tag: i for i, tag in enumerate(vocabulary)}
    targets = token_targets(spans, text_words, 11, index)
    assert targets[0] == IGNORE and targets[10] == IGNORE
    assert [vocabulary[t] for t in targets[1:10]] == tags
    assert token_targets(None, text_words, 11, index) == [IGNORE] * 11
    # Logits that favour the gold tags decode to the gold spans, with a confidence per entity.
    logits = np.zeros((11, len(vocabulary)), dtype=np.float32)
    for token, tag in enumerate(targets):
        if tag != IGNORE:
            logits[token, tag] = 5.0
    found = decode(logits, text_words, vocabulary)
    assert [(e.start, e.end, e.label) for e in found] == [(11, 15, "time"), (19, 27, "city")]
    assert all(0.9 < e.confidence <= 1.0 for e in found)
    assert found[1].to_dict(text) == {"entity": "city", "value": "new york", "start": 19, "end": 27,
                                      "confidence": found[1].confidence}


def test_decoding_follows_conlleval_for_a_stray_inside_tag():
    assert chunks(["I-a", "I-a", "O", "B-a", "I-b", "B-b"]) == [("a", 0, 2), ("a", 3, 4), ("b", 4, 5), ("b", 5, 6)]
    assert chunks([OUTSIDE] * 3) == []


def _well_formed(sequence):
    return all(not tag.startswith("I-") or (previous is not None and previous[2:] == tag[2:] and previous != OUTSIDE)
               for previous, tag in zip((None, *sequence), sequence))


@pytest.mark.parametrize("seed", range(20))
def test_bio_path_is_the_best_well_formed_sequence(seed):
    tags = tuple(tag_vocabulary(["a", "b"]))
    log_probs = np.log(np.random.default_rng(seed).dirichlet(np.ones(len(tags)), size=1 + seed % 4))
    candidates = [seq for seq in itertools.product(range(len(tags)), repeat=len(log_probs))
                  if _well_formed([tags[k] for k in seq])]
    best = max(candidates, key=lambda seq: log_probs[np.arange(len(seq)), seq].sum())
    assert bio_path(log_probs, tags).tolist() == list(best)


def test_decoding_never_opens_an_entity_with_an_inside_tag_or_breaks_one_across_types():
    # Word by word the head says O, I-city, I-time: the best well-formed reading is one city entity.
    vocabulary = tag_vocabulary(["city", "time"])
    text_words = [Word(1, 0, 2), Word(2, 3, 6), Word(3, 7, 11)]  # "to new york"
    probs = {0: {"O": 0.9}, 1: {"I-city": 0.5, "B-city": 0.4}, 2: {"I-time": 0.5, "I-city": 0.45}}
    logits = np.full((5, len(vocabulary)), -20.0)
    for word, row in probs.items():
        for tag, p in row.items():
            logits[word + 1, vocabulary.index(tag)] = np.log(p)
    assert [(e.start, e.end, e.label) for e in decode(logits, text_words, vocabulary)] == [(3, 11, "city")]


def test_a_span_inside_a_word_is_counted_as_not_aligned():
    text_words = [Word(1, 0, 7), Word(2, 8, 12)]  # "newyork city"
    assert aligned((Span(3, 7, "city"),), text_words) == 0
    assert aligned((Span(0, 7, "city"), Span(8, 12, "kind")), text_words) == 2


def _random_bio(rng: random.Random, length: int) -> list[str]:
    return [rng.choice(["O", "O", "B-a", "I-a", "B-b", "I-b"]) for _ in range(length)]


def test_span_f1_matches_seqeval_on_random_tag_sequences():
    from seqeval.metrics import f1_score, precision_score, recall_score

    rng = random.Random(0)
    gold_tags, predicted_tags, gold_spans, predicted_spans = [], [], [], []
    for _ in range(300):
        tokens = [f"w{i}" for i in range(rng.randint(1, 12))]
        gold, predicted = _random_bio(rng, len(tokens)), _random_bio(rng, len(tokens))
        gold_tags.append(gold)
        predicted_tags.append(predicted)
        gold_spans.append({(s.start, s.end, s.label) for s in bio_to_spans(tokens, gold)})
        predicted_spans.append({(s.start, s.end, s.label) for s in bio_to_spans(tokens, predicted)})
    ours = span_metrics(gold_spans, predicted_spans)
    assert ours["slot_f1"] == pytest.approx(f1_score(gold_tags, predicted_tags), abs=1e-12)
    assert ours["slot_precision"] == pytest.approx(precision_score(gold_tags, predicted_tags), abs=1e-12)
    assert ours["slot_recall"] == pytest.approx(recall_score(gold_tags, predicted_tags), abs=1e-12)
    assert 0.0 < ours["slot_f1"] < 1.0


def test_span_metrics_exact_rows():
    figures = span_metrics([{(0, 3, "a")}, set()], [{(0, 3, "a")}, {(1, 2, "b")}])
    assert figures["entities_exact"] == 0.5
    assert figures["slot_recall"] == 1.0 and figures["slot_precision"] == 0.5


def test_offsets_in_a_rewritten_text_map_back_to_the_text_as_sent():
    spelling = Spelling.from_texts(["wake me up tomorrow in the kitchen"])
    rewrite = spelling.rewrite("wake me tomorow in the kitchne, ok")
    assert rewrite.text == "wake me tomorrow in the kitchen, ok"
    for word, sent in (("tomorrow", "tomorow"), ("kitchen", "kitchne"), ("the", "the"), ("ok", "ok")):
        start = rewrite.text.index(word)
        original = rewrite.to_original(start, start + len(word))
        assert rewrite.original[original[0]:original[1]] == sent
    # A span over several words, a corrected one among them, covers the words as sent.
    start = rewrite.text.index("in the kitchen")
    begin, end = rewrite.to_original(start, start + len("in the kitchen"))
    assert rewrite.original[begin:end] == "in the kitchne"
    assert spelling.rewrite("nothing to fix").edits == ()


def test_overlapping_spans_are_refused():
    row = {"text": "new york city", "labels": ["x"],
           "spans": [{"start": 0, "end": 8, "label": "city"}, {"start": 4, "end": 13, "label": "place"}]}
    with pytest.raises(ValueError, match="overlap"):
        parse_row(row)
    row["spans"][1]["start"] = 9
    assert len(parse_row(row).spans) == 2


def test_a_span_type_unknown_to_training_is_refused_with_file_and_line(tmp_path):
    path = tmp_path / "valid.jsonl"
    path.write_text('{"text": "to paris", "labels": ["x"], "spans": [{"start": 3, "end": 8, "label": "city"}]}\n\n'
                    '{"text": "at noon", "labels": ["x"], "spans": [{"start": 3, "end": 7, "label": "time"}]}\n')
    check_span_types(path, {"city", "time"})
    with pytest.raises(DataError) as error:
        check_span_types(path, {"city"})
    assert error.value.line == 3 and "time" in error.value.reason
