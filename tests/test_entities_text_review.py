"""Entity and text path review: each test failed on the code before its fix.

An entity that ends at the last word ``max_length`` let the graph read, where the text as sent goes on with letters
or digits in the same token ("7:" of "7:30", the cut falling between ":" and "30"), was answered with that fragment
as its value (the default bundle answered time "7:" and "7" for "... at 7:30 tomorrow" cut there); the graph never
read the rest, so such an entity is not answered, by the engine and the PyTorch path alike.
"""

from __future__ import annotations

import pytest

from intentvcs.core.entities import Entity
from intentvcs.service import onnx_session
from intentvcs.service.engine import Engine
from tests.helpers.bundle import MAX_LENGTH, make_tiny_bundle


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return make_tiny_bundle(tmp_path_factory.mktemp("entities_text_review"), entity_types=("city", "time"))


@pytest.fixture(scope="module")
def engine(bundle):
    return Engine(bundle, provider="cpu", threads=1, quantized="off")


def _last_words_read(count: int):
    """A ``decode_batch`` that makes the last ``count`` words each text's graph read one entity (ending at the
    last word read, as ``entities.decode_batch`` marks it)."""
    def decode_batch(tag_logits, per_text_words, tags):
        return [(Entity("time", text_words[-count].start, text_words[-1].end, 0.9, last_read=True),)
                if text_words else ()
                for text_words in per_text_words]
    return decode_batch


def test_an_entity_the_cut_leaves_inside_a_token_is_not_answered_as_a_fragment(bundle, engine, monkeypatch):
    from intentvcs.training import predict as torch_predict

    monkeypatch.setattr(onnx_session, "decode_batch", _last_words_read(2))
    monkeypatch.setattr(torch_predict, "decode_batch", _last_words_read(2))
    checkpoint = torch_predict.TorchPredictor(bundle.parent / "checkpoint", spelling=False)
    assert MAX_LENGTH == 24  # 22 pieces read: "play" and "at" are one piece each
    texts = {
        " ".join(["play"] * 19) + " at 7:30 tonight": [],  # read up to "7 :": "30" cut off the token
        " ".join(["play"] * 20) + " at 7:30": [],  # read up to "at 7": ":30" cut off
        " ".join(["play"] * 20) + " at 7 tonight": ["at 7"],  # the cut falls at a space: nothing to know
        " ".join(["play"] * 20) + " at 7, tonight": ["at 7"],  # only punctuation glued to it past the cut
        "play at 7": ["at 7"],  # nothing cut
    }
    for predictor in (engine, checkpoint):
        found = predictor.infer(list(texts)).entities
        values = [[text[e.start:e.end] for e in row] for text, row in zip(texts, found)]
        assert values == list(texts.values()), type(predictor).__name__
