"""MixATIS / MixSNIPS builder (intentvcs.training.mix_builder, intentvcs build-mix)."""

from __future__ import annotations

import json
import random

import pytest

from intentvcs.cli.main import main
from intentvcs.core.dataio import read_jsonl
from intentvcs.core.oos import OOS_LABEL
from intentvcs.training import mix_builder as mix
from intentvcs.training import DEFAULT_DATA
from intentvcs.training.oos_class import oos_as_class
from tests.test_loaders import DATA, needs_data, write_slot_folder

DEFAULT_TRAIN = DEFAULT_DATA / "train.jsonl"

# (tokens, BIO tags, intent): a city slot in each, several intents, one multi-intent source row.
SOURCE = [
    ("book a flight to boston", "O O O O B-city", "flight"),
    ("what is the fare to denver", "O O O O O B-city", "airfare"),
    ("show ground transport in dallas", "O O O O B-city", "ground"),
    ("which airline flies to miami", "O O O O B-city", "airline"),
    ("fares and flights to reno", "O O O O B-city", "airfare#flight"),
]


@pytest.fixture()
def data_root(tmp_path):
    for split in ("train", "valid", "test"):
        write_slot_folder(tmp_path / "atis", split, SOURCE)
    return tmp_path


def test_standard_rows_follow_agifs_construction(data_root, tmp_path):
    info = mix.build("atis", data_root, tmp_path / "out", seed=0, sizes={"train": 2000, "valid": 20, "test": 20})
    rows = read_jsonl(tmp_path / "out" / "train.jsonl")
    assert info["counts"] == {"train": 2000, "valid": 20, "test": 20} and len(rows) == 2000
    shares = info["intents_per_row_train"]
    assert abs(shares["1"] - 0.3) < 0.04 and abs(shares["2"] - 0.5) < 0.04 and abs(shares["3"] - 0.2) < 0.04
    assert set(info["connectors_train"]) == {",", "and", "and then", "and also"}
    for row in rows:
        assert len(set(row.labels)) == len(row.labels) and "airfare#flight" not in row.labels
        assert list(row.labels) == sorted(row.labels)  # alphabetical, as the released files
        assert row.meta["mix_label"] == "#".join(row.labels)
        segments = row.meta["segments"]
        assert [s["intent"] for s in segments] == list(row.labels)
        # Every city span still covers a city word, inside its own segment.
        for span in row.spans:
            assert row.text[span.start:span.end] in ("boston", "denver", "dallas", "miami")
            assert any(s["start"] <= span.start and span.end <= s["end"] for s in segments)
        if len(segments) == 3:
            assert row.text[segments[0]["end"]:segments[1]["start"]] == " , "


def test_valid_known_keeps_every_validation_row_with_the_training_splits_span_types(data_root, tmp_path):
    # Only "train" knows the airline type: the validation rows keep their text and intents, not that span.
    write_slot_folder(data_root / "atis", "valid", SOURCE + [("which airline is delta", "O O O B-airline", "airline")])
    info = mix.build("atis", data_root, tmp_path / "out", seed=0, sizes={"train": 200, "valid": 60, "test": 5})
    valid = read_jsonl(tmp_path / "out" / "valid.jsonl")
    known = read_jsonl(tmp_path / "out" / mix.KNOWN_VALID_FILE)
    assert [(r.text, r.labels) for r in known] == [(r.text, r.labels) for r in valid]
    assert {s.label for r in known for s in r.spans} == {"city"}
    dropped = sum(s.label == "airline" for r in valid for s in r.spans)
    assert dropped > 0 and info["valid_known_spans_dropped"] == dropped


def test_hard_rows_break_the_regularities(data_root, tmp_path):
    mix.build("atis", data_root, tmp_path / "hard", seed=0, variant="hard", sizes={"train": 2000})
    rows = read_jsonl(tmp_path / "hard" / "train.jsonl")
    info = json.loads((tmp_path / "hard" / "info.json").read_text())
    assert {"also", "then", "after that", ",", ""} <= set(info["connectors_train"])
    multi = [row for row in rows if len(row.labels) > 1]
    assert 0.3 < sum(list(row.labels) != sorted(row.labels) for row in multi) / len(multi) < 0.7
    assert any(row.text[0].isupper() for row in rows) and any(row.text.endswith("?") for row in rows)
    for row in rows:
        for span in row.spans:
            assert row.text[span.start:span.end] in ("boston", "denver", "dallas", "miami")


def test_the_same_seed_builds_the_same_rows(data_root, tmp_path):
    sizes = {"train": 50, "valid": 5, "test": 5}
    mix.build("atis", data_root, tmp_path / "a", seed=3, sizes=sizes)
    mix.build("atis", data_root, tmp_path / "b", seed=3, sizes=sizes)
    mix.build("atis", data_root, tmp_path / "c", seed=4, sizes=sizes)
    read = lambda name: (tmp_path / name / "train.jsonl").read_bytes()  # noqa: E731
    assert read("a") == read("b") != read("c")


def test_mix_row_moves_spans_and_records_segments():
    from intentvcs.core.dataio import Example, Span

    a = Example("play jazz", ("play",), spans=(Span(5, 9, "genre"),))
    b = Example("dim the lights", ("lights",))
    row = mix.mix_row([a, b], ["and then"], "x")
    assert row.text == "play jazz and then dim the lights"
    assert row.spans == (Span(5, 9, "genre"),) and row.labels == ("play", "lights")
    assert row.meta["segments"] == [{"start": 0, "end": 9, "intent": "play"},
                                    {"start": 19, "end": 33, "intent": "lights"}]
    assert mix.typed(row, random.Random(0)).spans == row.spans


def test_cli_writes_the_build_and_refuses_bad_arguments(data_root, tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["build-mix", "--dataset", "atis", "--data-root", str(data_root), "--out", str(out),
                 "--train-rows", "30", "--valid-rows", "5", "--test-rows", "5"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["benchmark"] == "MixATIS" and summary["counts"] == {"train": 30, "valid": 5, "test": 5}
    assert sorted(p.name for p in out.iterdir()) == ["info.json", "test-known.jsonl", "test.jsonl", "train.jsonl",
                                                     "valid-known.jsonl", "valid.jsonl"]
    assert main(["build-mix", "--dataset", "atis", "--data-root", str(data_root), "--out", str(out),
                 "--train-rows", "0"]) == 2
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    assert main(["build-mix", "--dataset", "atis", "--data-root", str(data_root), "--out", str(mine)]) == 2
    assert (mine / "notes.txt").read_text() == "keep"


@needs_data
@pytest.mark.parametrize("dataset, intents", [("atis", 18), ("snips", 7)])
def test_shared_data_released_sizes(tmp_path, dataset, intents):
    info = mix.build(dataset, DATA, tmp_path / dataset, seed=0)
    assert info["counts"] == mix.SIZES[dataset] and info["intents"] == intents


def test_chained_training_rows_join_distinct_intents_and_carry_their_spans():
    rows = [ex for ex in read_jsonl(DEFAULT_TRAIN) if ex.labels]
    chains = mix.chained_rows(rows, 300, seed=0)
    assert len(chains) == 300 and chains == mix.chained_rows(rows, 300, seed=0)
    counts = [len(row.labels) for row in chains]
    assert set(counts) == {2, 3} and 0.6 < counts.count(2) / len(counts) < 0.85  # 5 : 2
    sources = {ex.text: ex for ex in rows}
    for row in chains:
        assert len(set(row.labels)) == len(row.labels)
        for segment in row.meta["segments"]:
            piece = row.text[segment["start"]:segment["end"]]
            source = sources.get(piece) or sources.get(piece[0].lower() + piece[1:])  # typed: a capital first letter
            assert source is not None and source.labels == (segment["intent"],)
        assert all(any(s["start"] <= span.start and span.end <= s["end"] for s in row.meta["segments"])
                   for span in row.spans)
    assert mix.chained_rows(rows[:1], 10, seed=0) == []  # one intent: nothing to chain


def test_chains_leave_out_the_out_of_scope_class():
    """Under the "train" OOS rule the out-of-scope rows are a class of their own; chained beside a request
    they taught that a text is out of scope and carries an intent at once."""
    rows = oos_as_class(read_jsonl(DEFAULT_DATA / "test.jsonl"))  # the embedded split with out-of-scope rows
    assert any(OOS_LABEL in row.labels for row in rows)
    chains = mix.chained_rows(rows, 300, seed=0)
    assert len(chains) == 300 and not [row for row in chains if OOS_LABEL in row.labels]


def test_oos_chains_join_a_request_and_out_of_scope_parts_as_each_kind_asks():
    rows = read_jsonl(DEFAULT_DATA / "test.jsonl")  # the embedded split with out-of-scope rows
    unknown = {ex.text for ex in rows if not ex.labels}
    requests = {ex.text: ex for ex in rows if len(ex.labels) == 1}
    built = mix.oos_chains(rows, 200, seed=0)
    assert list(built) == list(mix.OOS_CHAIN_KINDS) and all(len(kind) == 200 for kind in built.values())
    assert built == mix.oos_chains(rows, 200, seed=0) != mix.oos_chains(rows, 200, seed=1)
    for kind, chained in built.items():
        first_is_request = []
        for row in chained:
            segments = row.meta["segments"]
            assert len(segments) == 2
            gap = row.text[segments[0]["end"]:segments[1]["start"]]
            assert gap.strip() in mix.STANDARD_CONNECTORS
            for segment in segments:
                piece = row.text[segment["start"]:segment["end"]]
                if segment["intent"] is None:
                    assert piece in unknown
                else:
                    assert requests[piece].labels == (segment["intent"],)
            assert row.labels == tuple(s["intent"] for s in segments if s["intent"] is not None)
            first_is_request.append(segments[0]["intent"] is not None)
        wanted = {"request+oos": 1, "oos+oos": 0, "request+request": 2}[kind]
        assert all(len(row.labels) == wanted for row in chained)
        if kind == "request+request":
            assert all(len(set(row.labels)) == 2 for row in chained)
        if kind == "request+oos":  # both orders, about half each
            assert 0.35 < sum(first_is_request) / len(first_is_request) < 0.65
    with pytest.raises(ValueError, match="out-of-scope rows"):
        mix.oos_chains([ex for ex in rows if ex.labels], 5)


def test_a_source_split_without_single_intent_rows_is_refused():
    """Every mixed row would be an empty text, which no reader of the product accepts."""
    from intentvcs.core.dataio import Example

    rows = [Example("play jazz and book a table", ("PlayMusic", "BookRestaurant")), Example("what is life", ())]
    with pytest.raises(ValueError, match=r"no single-intent row to build mixed rows from \(the test rows\)"):
        mix.build_split(rows, 5, "standard", random.Random(0), "test")
