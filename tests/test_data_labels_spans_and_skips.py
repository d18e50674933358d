"""The data path review's defects: Mix intents missing from train, typed capitals that move offsets,
labels with whitespace, lone surrogates, VCS labels missing from train, --train-rows, skipped source rows."""

from __future__ import annotations

import json
import logging
import random
import zipfile
from pathlib import Path

import pytest

from intentvcs.cli.main import main
from intentvcs.core.dataio import DataError, Example, Span, read_jsonl
from intentvcs.training import loaders
from intentvcs.training import mix_builder as mix
from intentvcs.training import vcs_builder as vcs
from intentvcs.training.loaders import clinc150, crosswoz, multiwoz, slot_folder
from tests.test_loaders import DATA, cw_msg, mw_turn, needs_data, write_convlab_zip, write_slot_folder

ROOT = Path(__file__).resolve().parents[1]

# "ground" has single-intent rows in test only; train and valid have it inside a multi-intent row alone.
TRAIN = [
    ("book a flight to boston", "O O O O B-city", "flight"),
    ("what is the fare to denver", "O O O O O B-city", "airfare"),
    ("which airline flies to miami", "O O O O B-city", "airline"),
    ("fares and transport in reno", "O O O O B-city", "airfare#ground"),
]
TEST = TRAIN + [("show ground transport in dallas", "O O O O B-city", "ground")]


@pytest.fixture()
def mix_root(tmp_path):
    for split, rows in (("train", TRAIN), ("valid", TRAIN), ("test", TEST)):
        write_slot_folder(tmp_path / "atis", split, rows)
    return tmp_path


# ---------------------------------------------------- 1. Mix: intents the train split never shows
def test_mix_info_records_the_intents_train_never_shows_and_the_cli_warns(mix_root, tmp_path, capsys, caplog):
    out = tmp_path / "mix"
    with caplog.at_level(logging.WARNING):
        assert main(["build-mix", "--dataset", "atis", "--data-root", str(mix_root), "--out", str(out),
                     "--train-rows", "60", "--valid-rows", "20", "--test-rows", "40"]) == 0
    info = json.loads((out / "info.json").read_text())
    test = read_jsonl(out / "test.jsonl")
    ground = sum("ground" in row.labels for row in test)
    assert ground > 0 and not any("ground" in row.labels for row in read_jsonl(out / "train.jsonl"))
    assert info["labels_missing_from_train"] == {"valid": {}, "test": {"ground": ground}}
    assert json.loads(capsys.readouterr().out)["labels_missing_from_train"]["test"] == {"ground": ground}
    warning = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warning) == 1 and f"ground ({ground} rows)" in warning[0] and "test.jsonl" in warning[0]


def test_research_doc_says_mix_rows_outside_train_are_a_ceiling():
    text = (ROOT / "docs" / "RESEARCH.md").read_text(encoding="utf-8")
    section = text[text.index("## 5. Multi-intent"):text.index("## 6.")]
    assert "labels_missing_from_train" in section and "ceiling" in section


# ------------------------------------------------------- 2. typed capitals keep every offset right
def test_capital_first_letter_only_where_it_is_one_character():
    assert mix.capitalised("play jazz") == "Play jazz" and mix.capitalised("") == ""
    assert mix.capitalised("ßo weit") == "ßo weit" and mix.capitalised("ﬁnd it") == "ﬁnd it"


def spans_read_back(rows, values):
    for row in rows:
        for span in row.spans:
            assert row.text[span.start:span.end] == values[span.label], (row.text, span)
        for segment in row.meta["segments"]:
            piece = row.text[segment["start"]:segment["end"]]
            assert piece.lower().startswith(("ß", "ﬁ")), (row.text, segment)


def test_chained_and_hard_rows_keep_spans_where_uppercase_is_longer(tmp_path):
    rows = [Example("ßtraße to berlin", ("drive",), spans=(Span(10, 16, "city"),)),
            Example("ﬁnd a flight to paris", ("fly",), spans=(Span(16, 21, "town"),)),
            Example("ßpiel jazz now", ("play",), spans=(Span(6, 10, "genre"),))]
    values = {"city": "berlin", "town": "paris", "genre": "jazz"}
    chains = mix.chained_rows(rows, 200, seed=0)
    assert any(row.text[0] in "ßﬁ" for row in chains)
    spans_read_back(chains, values)
    hard = mix.build_split(rows, 200, "hard", random.Random(0), "t")
    spans_read_back(hard, values)


# --------------------------------------------------- 3. labels with whitespace, lone surrogates
def test_slot_folder_refuses_an_intent_with_whitespace_naming_file_and_line(tmp_path):
    write_slot_folder(tmp_path / "snips", "train", [("play adele", "O B-artist", "PlayMusic"),
                                                    ("add it", "O O", "AddToPlaylist # PlayMusic")])
    with pytest.raises(DataError) as err:
        slot_folder.load_split(tmp_path / "snips", "train")
    assert err.value.path.endswith("label") and err.value.line == 2 and "'AddToPlaylist '" in err.value.reason
    out = tmp_path / "out.jsonl"
    assert main(["convert", "--format", "snips", "--input", str(tmp_path / "snips"), "--split", "train",
                 "--out", str(out)]) == 2 and not out.exists()


def write_clinc(path: Path, train: list) -> Path:
    path.write_text(json.dumps({"train": train, "val": [], "test": [], "oos_train": [["a joke", "oos "]],
                                "oos_val": [], "oos_test": []}))
    return path


def test_clinc150_refuses_an_intent_with_whitespace_naming_key_and_index(tmp_path, capsys):
    path = write_clinc(tmp_path / "data.json", [["hello there", "greet"], ["hi", "greet "]])
    with pytest.raises(DataError, match=r"train\[1\]: intent 'greet ' has leading or trailing whitespace"):
        clinc150.load_split(path, "train")
    out = tmp_path / "out.jsonl"
    assert main(["convert", "--format", "clinc150", "--input", str(path), "--split", "train", "--out", str(out)]) == 2
    assert str(path) in capsys.readouterr().err and not out.exists()
    # An out-of-scope row's intent field is never a label, whatever its spacing.
    assert clinc150.load_split(write_clinc(tmp_path / "ok.json", [["hi", "greet"]]), "train")[1].labels == ()


def test_clinc150_lone_surrogate_names_file_key_and_index(tmp_path, capsys):
    path = tmp_path / "data.json"
    path.write_text('{"train": [["hello", "greet"], ["bad \\ud800 text", "greet"]], "val": [], "test": [], '
                    '"oos_train": [], "oos_val": [], "oos_test": []}')
    with pytest.raises(DataError) as err:
        clinc150.load_split(path, "train")
    assert err.value.path == str(path) and "train[1]" in err.value.reason and "surrogate" in err.value.reason
    out = tmp_path / "out.jsonl"
    assert main(["convert", "--format", "clinc150", "--input", str(path), "--split", "train", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "train[1]" in err and not out.exists()


def test_dialogue_loaders_refuse_whitespace_act_types_and_lone_surrogates(tmp_path):
    bad = {"5": {"messages": [cw_msg("usr", "你好", [["Inform ", "餐馆", "名称", "x"]])]}}
    with pytest.raises(DataError, match="dialogue 5 message 0: act type 'Inform '"):
        crosswoz.load_file(write_convlab_zip(tmp_path / "c.zip", bad))
    path = tmp_path / "m.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("val.json", '{"D1": {"log": [{"text": "a \\udc00 hotel", "dialog_act": '
                                     '{"Hotel-Inform": [["Area", "east"]]}}]}}')
    with pytest.raises(DataError, match="dialogue D1 turn 0: 'text' holds a lone surrogate"):
        multiwoz.load_file(path)


# ----------------------------------------- 4. VCS: labels missing from what training sees
def test_vcs_labels_missing_from_train_are_those_train_jsonl_never_observes(tmp_path):
    for split in ("train", "valid", "test"):
        write_slot_folder(tmp_path / "snips", split, [("play adele", "O B-artist", "PlayMusic"),
                                                      ("play jazz", "O B-genre", "PlayMusic"),
                                                      ("rate it", "O O", "RateBook")])
    info = vcs.build("snips", tmp_path, tmp_path / "bench")
    labels = json.loads((tmp_path / "bench" / "relations.json").read_text())["labels"]
    observed = {label for row in read_jsonl(tmp_path / "bench" / "train.jsonl") for label in row.labels}
    assert info["labels_missing_from_train"] == sorted(set(labels) - observed) != []
    assert info["labels_missing_from_train_gold"] == []  # every label is in some train gold set


@needs_data
def test_atis_vcs_names_the_labels_its_train_split_never_observes(tmp_path):
    info = vcs.build("atis", DATA, tmp_path / "atis")
    assert info["labels_missing_from_train"] == [
        "atis_cheapest", "atis_cheapest_v1", "atis_city_without_airline_name_v1", "atis_day_name",
        "atis_day_name_v1", "atis_day_name_v2", "atis_flight_no_without_airline_name_v1", "atis_restriction_v1"]
    assert info["labels_missing_from_train_gold"] == ["atis_day_name", "atis_day_name_v1", "atis_day_name_v2"]


# ------------------------------------------------ 5. --train-rows draws other valid and test rows
def test_train_rows_changes_the_other_splits_as_the_docs_say(mix_root, tmp_path, capsys):
    mix.build("atis", mix_root, tmp_path / "a", sizes={"train": 30, "valid": 20, "test": 20})
    mix.build("atis", mix_root, tmp_path / "b", sizes={"train": 31, "valid": 20, "test": 20})
    assert (tmp_path / "a" / "valid.jsonl").read_bytes() != (tmp_path / "b" / "valid.jsonl").read_bytes()
    assert "another train size draws other valid and test rows" in " ".join(mix.build.__doc__.split())
    with pytest.raises(SystemExit):
        main(["build-mix", "--help"])
    assert "another --train-rows draws other valid and test rows too" in " ".join(capsys.readouterr().out.split())


# ------------------------------------------------------------ 6. skipped source rows are counted
MULTIWOZ = {"D1": {"log": [mw_turn("a hotel in the east", {"Hotel-Inform": [["Area", "east"]]}), mw_turn("ok"),
                           mw_turn("thanks", {"general-thank": [["none", "none"]]}), mw_turn("sure"),
                           mw_turn("hmm")]}}
CROSSWOZ = {"9": {"messages": [cw_msg("usr", "你好", [["General", "greet", "none", "none"]]), cw_msg("sys", "好"),
                               cw_msg("usr", "嗯", [])]}}


def test_dialogue_loaders_count_skipped_turns_by_reason(tmp_path, capsys):
    write_convlab_zip(tmp_path / "mw" / "val.json.zip", MULTIWOZ)
    skipped: dict[str, int] = {}
    assert len(loaders.load("multiwoz", tmp_path / "mw", "valid", skipped=skipped)) == 1
    assert skipped == {"no_kept_domain": 1, "no_dialogue_act": 1}
    write_convlab_zip(tmp_path / "cw" / "test.json.zip", CROSSWOZ, "test.json")
    skipped = {}
    assert len(crosswoz.load_split(tmp_path / "cw", "test", skipped)) == 1 and skipped == {"no_dialogue_act": 1}
    out = tmp_path / "out.jsonl"
    assert main(["convert", "--format", "multiwoz", "--input", str(tmp_path / "mw"), "--split", "valid",
                 "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == 1 and summary["skipped"] == {"no_dialogue_act": 1, "no_kept_domain": 1}


def test_builders_record_skipped_source_rows(mix_root, tmp_path):
    info = mix.build("atis", mix_root, tmp_path / "mix", sizes={"train": 10, "valid": 5, "test": 5})
    assert info["source_rows_skipped"] == {split: {"multi_intent": 1} for split in ("train", "valid", "test")}
    dialogues = {f"D{i}": MULTIWOZ["D1"] for i in range(5)}
    write_convlab_zip(tmp_path / "multiwoz" / "val.json.zip", dialogues)
    write_convlab_zip(tmp_path / "multiwoz" / "test.json.zip", MULTIWOZ, "test.json")
    info = vcs.build("multiwoz", tmp_path, tmp_path / "vcs")
    assert info["source_rows_skipped"] == {"valid": {"no_dialogue_act": 5, "no_kept_domain": 5},
                                           "test": {"no_dialogue_act": 1, "no_kept_domain": 1}}


# ------------------------------------------------------------ 7. the VCS builds keep their spans
def test_dialogue_vcs_builds_keep_spans_and_the_doc_says_so(tmp_path):
    write_convlab_zip(tmp_path / "multiwoz" / "val.json.zip", {f"D{i}": MULTIWOZ["D1"] for i in range(5)})
    write_convlab_zip(tmp_path / "multiwoz" / "test.json.zip", MULTIWOZ, "test.json")
    vcs.build("multiwoz", tmp_path, tmp_path / "vcs")
    assert all(row.spans for row in read_jsonl(tmp_path / "vcs" / "train.jsonl"))
    text = (ROOT / "docs" / "RESEARCH.md").read_text(encoding="utf-8")
    section = text[text.index("### 8.1"):text.index("## References")]
    assert "builds drop these spans" not in section and "DialogVCS builds of both sets included" in section
