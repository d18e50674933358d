"""Loaders of public data sets (intentvcs.training.loaders) and ``intentvcs convert``."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from intentvcs.cli.main import main
from intentvcs.core.dataio import DataError, Span, read_jsonl
from intentvcs.training import loaders
from intentvcs.training.loaders import clinc150, convlab_zip, crosswoz, multiwoz, slot_folder
from intentvcs.training.loaders.alignment import AlignmentStats, align

from benchmarks.common import SHARED_DATA as DATA  # ../shared/data, or $INTENTVCS_DATA
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared data not found at {DATA}")


# ------------------------------------------------------------------ helpers
def write_slot_folder(root: Path, split: str, rows: list[tuple[str, str, str]]) -> Path:
    """Write ``root/split/{seq.in,seq.out,label}`` from ``(tokens, tags, label)`` rows,
    with the trailing blanks the real files have."""
    folder = root / split
    folder.mkdir(parents=True, exist_ok=True)
    for index, name in enumerate(slot_folder.FILES):
        (folder / name).write_text("".join(f"{row[index]} \n" for row in rows), encoding="utf-8")
    return folder


def write_convlab_zip(path: Path, dialogues: dict, member: str = "val.json") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(member, json.dumps(dialogues, ensure_ascii=False))
    return path


def mw_turn(text: str, acts: dict | None = None) -> dict:
    return {"text": text, "metadata": {}, "dialog_act": acts or {}, "span_info": []}


def cw_msg(role: str, text: str, acts: list | None = None) -> dict:
    return {"role": role, "content": text, "dialog_act": acts or []}


# ----------------------------------------------------------------- CLINC150
CLINC = {
    "train": [["book a flight to rome", "book_flight"], ["what is my balance", "balance"]],
    "val": [["fly me to paris", "book_flight"]],
    "test": [["how much money do i have", "balance"]],
    "oos_train": [["who won the game", "oos"]],
    "oos_val": [["tell me a joke", "oos"]],
    "oos_test": [["what is love", "oos"]],
}


def test_clinc150_valid_split_reads_val_keys_and_marks_oos(tmp_path):
    path = tmp_path / "data_tiny.json"
    path.write_text(json.dumps(CLINC, indent=2))
    rows = clinc150.load_split(path, "valid")
    assert [(r.text, r.labels, r.id) for r in rows] == [
        ("fly me to paris", ("book_flight",), "val:0"),
        ("tell me a joke", (), "oos_val:0"),
    ]
    assert rows[1].is_out_of_scope
    without = clinc150.load_split(path, "train", include_oos=False)
    assert [r.labels for r in without] == [("book_flight",), ("balance",)]


def test_clinc150_bad_row_names_file_key_and_index(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**CLINC, "train": [["ok", "x"], ["text without intent"]]}))
    with pytest.raises(DataError) as err:
        clinc150.load_split(path, "train")
    assert err.value.path == str(path) and "train[1]" in err.value.reason


def test_clinc150_invalid_json_names_line_and_missing_key(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{\n  "train": [\n    ["a", "b"],,\n  ]\n}')
    with pytest.raises(DataError) as err:
        clinc150.load_split(path, "train")
    assert err.value.line == 3
    path.write_text(json.dumps({"train": []}))
    with pytest.raises(DataError, match="'val' is missing"):
        clinc150.load_split(path, "valid")
    with pytest.raises(ValueError, match="no split 'dev'"):
        clinc150.load_split(path, "dev")


# -------------------------------------------------------------- SNIPS / ATIS
def test_slot_folder_spans_on_space_joined_text(tmp_path):
    write_slot_folder(tmp_path, "train", [
        ("play the new song by taylor swift", "O O O O O B-artist I-artist", "PlayMusic"),
        ("rate this book five", "O B-object_select B-object_type B-rating_value", "RateBook"),
    ])
    first, second = slot_folder.load_split(tmp_path, "train")
    assert first.text == "play the new song by taylor swift"  # trailing blank gone
    assert first.labels == ("PlayMusic",) and first.id == "train:1"
    assert first.spans == (Span(21, 33, "artist"),)
    assert first.text[21:33] == "taylor swift"
    # Adjacent B- tags are separate spans.
    assert [(second.text[s.start:s.end], s.label) for s in second.spans] == [
        ("this", "object_select"), ("book", "object_type"), ("five", "rating_value")]


def test_atis_multi_intent_becomes_several_labels(tmp_path):
    write_slot_folder(tmp_path, "test", [
        ("flights and fares to boston", "O O O O B-toloc.city_name", "atis_flight#atis_airfare")])
    (row,) = slot_folder.load_split(tmp_path, "test")
    assert row.labels == ("atis_flight", "atis_airfare")
    assert row.spans == (Span(21, 27, "toloc.city_name"),)


def test_bio_stray_inside_tag_starts_a_new_span():
    spans = slot_folder.bio_to_spans(["a", "b", "c", "d"], ["I-x", "I-x", "I-y", "O"])
    assert spans == (Span(0, 3, "x"), Span(4, 5, "y"))
    with pytest.raises(ValueError, match="token 2"):
        slot_folder.bio_to_spans(["a", "b"], ["O", "X-city"])


def test_token_tag_mismatch_names_file_and_line(tmp_path):
    folder = write_slot_folder(tmp_path, "train", [
        ("play music", "O O", "PlayMusic"),
        ("play some jazz", "O O", "PlayMusic"),
    ])
    with pytest.raises(DataError) as err:
        slot_folder.load_split(tmp_path, "train")
    assert (err.value.path, err.value.line) == (str(folder / "seq.out"), 2)
    assert "2 tags for 3 tokens" in err.value.reason


def test_line_count_mismatch_names_longest_file_and_first_unmatched_line(tmp_path):
    folder = write_slot_folder(tmp_path, "valid", [("a b", "O O", "X"), ("c", "O", "X")])
    (folder / "label").write_text("X\n")
    with pytest.raises(DataError) as err:
        slot_folder.load_split(tmp_path, "valid")
    assert err.value.line == 2 and err.value.path != str(folder / "label")
    assert "'label': 1" in err.value.reason


def test_bad_tag_and_empty_intent_name_file_and_line(tmp_path):
    folder = write_slot_folder(tmp_path, "train", [("a b", "O B-", "X")])
    with pytest.raises(DataError) as err:
        slot_folder.load_split(tmp_path, "train")
    assert (err.value.path, err.value.line) == (str(folder / "seq.out"), 1)
    folder = write_slot_folder(tmp_path, "test", [("a", "O", "X"), ("b", "O", "atis_flight#")])
    with pytest.raises(DataError) as err:
        slot_folder.load_split(tmp_path, "test")
    assert (err.value.path, err.value.line) == (str(folder / "label"), 2)


# ------------------------------------------------------------------ MultiWOZ
MULTIWOZ = {
    "PMUL1": {"log": [
        mw_turn("I need a hotel and a taxi .", {"Taxi-Inform": [["Dest", "x"]], "Hotel-Inform": [["Area", "east"]]}),
        mw_turn("Sure .", {"Hotel-Inform": [["Choice", "3"]]}),  # system turn: ignored
        mw_turn("Thanks , bye .", {"general-thank": [["none", "none"]]}),
        mw_turn("Ok .", {"Booking-Book": [["Ref", "X"]]}),
        mw_turn("Where is the police station ?", {"Police-Request": [["Addr", "?"]]}),
        mw_turn("Bye .", {}),
        mw_turn("Hi , a train and thanks .", {"general-thank": [["none", "none"]], "Train-Inform": [["Day", "monday"]]}),
    ]},
    "SNG2": {"log": [mw_turn("Any museums ?", {"Attraction-Request": [["Type", "?"]]})]},
}


def test_multiwoz_user_turns_domains_and_composites(tmp_path):
    path = write_convlab_zip(tmp_path / "val.json.zip", MULTIWOZ)
    rows = multiwoz.load_file(path)
    assert [(r.id, r.labels) for r in rows] == [
        ("PMUL1:0", ("hotel&taxi",)),  # sorted parts
        ("PMUL1:6", ("train",)),  # general-* dropped, turn kept for its domain
        ("SNG2:0", ("attraction",)),
    ]  # turns 2 (general only), 4 (police) are skipped; 1 and 3 are system turns
    assert rows[0].meta == {"dialogue": "PMUL1", "turn": 0}
    assert [r.labels for r in multiwoz.load_split(tmp_path, "valid")] == [r.labels for r in rows]


def test_multiwoz_malformed_turn_names_dialogue_and_turn(tmp_path):
    bad = {"D7": {"log": [mw_turn("ok", {"HotelInform": []})]}}
    with pytest.raises(DataError) as err:
        multiwoz.load_file(write_convlab_zip(tmp_path / "a.zip", bad))
    assert "dialogue D7 turn 0" in err.value.reason and err.value.path.endswith("a.zip")
    bad = {"D8": {"log": [mw_turn("hi"), mw_turn("sys"), {"dialog_act": {}}]}}
    with pytest.raises(DataError, match="dialogue D8 turn 2: 'text'"):
        multiwoz.load_file(write_convlab_zip(tmp_path / "b.zip", bad))
    with pytest.raises(DataError, match="dialogue D9: 'log'"):
        multiwoz.load_file(write_convlab_zip(tmp_path / "c.zip", {"D9": {"goal": {}}}))


def test_convlab_zip_errors_name_the_file(tmp_path):
    not_zip = tmp_path / "val.json.zip"
    not_zip.write_text("plain text")
    with pytest.raises(DataError, match="not a zip"):
        multiwoz.load_file(not_zip)
    broken = tmp_path / "broken.zip"
    with zipfile.ZipFile(broken, "w") as archive:
        archive.writestr("val.json", '{\n"D1": {"log": []},\n"D2": oops\n}')
    with pytest.raises(DataError) as err:
        crosswoz.load_file(broken)
    assert err.value.line == 3 and "val.json" in err.value.path
    with pytest.raises(DataError, match="file not found"):
        multiwoz.load_split(tmp_path / "nowhere", "test")


def spans_of(example) -> list[tuple[str, str]]:
    return [(example.text[s.start:s.end], s.label) for s in example.spans]


def test_multiwoz_values_become_spans_at_word_boundaries(tmp_path):
    dialogues = {"D1": {"log": [
        mw_turn("I want an eastern dish in the East , for 2 people on Friday .", {
            "Restaurant-Inform": [["Area", "east"], ["People", "2"], ["Day", "friday"], ["Food", "?"]],
            "Train-Inform": [["Day", "friday"], ["Leave", "dontcare"], ["Internet", "yes"]],
            "general-thank": [["none", "none"]],
        }),
    ]}}
    rows, stats = multiwoz.load_file_with_stats(write_convlab_zip(tmp_path / "v.zip", dialogues))
    # "east" skips "eastern"; the case differs; Friday said once under two domains is one value;
    # ?, dontcare, yes and none carry no surface form and are not counted.
    assert spans_of(rows[0]) == [("East", "area"), ("2", "people"), ("Friday", "day")]
    assert (stats.values, stats.aligned) == (3, 3)


def test_multiwoz_longest_first_no_overlap_and_next_free_occurrence(tmp_path):
    dialogues = {"D1": {"log": [
        mw_turn("book the cambridge belfry in cambridge for 4 nights and 4 people", {
            "Hotel-Inform": [["Area", "cambridge"], ["Name", "the cambridge belfry"],
                             ["Stay", "4"], ["People", "4"], ["Type", "belfry"]],
        }),
    ]}}
    rows, stats = multiwoz.load_file_with_stats(write_convlab_zip(tmp_path / "v.zip", dialogues))
    # The name is placed first; "cambridge" then takes its next free occurrence; the second "4"
    # takes the second occurrence; "belfry" only occurs inside the name, so it is not aligned.
    assert spans_of(rows[0]) == [("the cambridge belfry", "name"), ("cambridge", "area"),
                                 ("4", "stay"), ("4", "people")]
    assert (stats.values, stats.aligned, round(stats.share, 2)) == (5, 4, 0.8)


def test_align_refuses_no_surface_values_and_non_strings():
    stats = AlignmentStats()
    spans = align("no more yes", [("a", "no"), ("b", None), ("c", "  "), ("d", "more")],
                  skip=frozenset({"no"}), word_boundaries=True, stats=stats)
    assert spans == (Span(3, 7, "d"),) and stats.to_dict() == {"values": 1, "aligned": 1, "share": 1.0}


def test_multiwoz_malformed_slot_value_pair_names_turn(tmp_path):
    bad = {"D5": {"log": [mw_turn("a hotel", {"Hotel-Inform": [["Area"]]})]}}
    with pytest.raises(DataError, match="dialogue D5 turn 0: dialogue act 'Hotel-Inform'"):
        multiwoz.load_file(write_convlab_zip(tmp_path / "v.zip", bad))


# ------------------------------------------------------------------ CrossWOZ
CROSSWOZ = {
    "11": {"messages": [
        cw_msg("usr", "你好，推荐一家餐馆。", [["General", "greet", "none", "none"], ["Request", "餐馆", "名称", ""],
                                      ["Inform", "餐馆", "人均消费", "100元"], ["Request", "餐馆", "地址", ""]]),
        cw_msg("sys", "好的。", [["Inform", "餐馆", "名称", "x"]]),
        cw_msg("usr", "谢谢。", [["General", "thank", "none", "none"]]),
        cw_msg("usr", "嗯。", []),
    ]},
}


def test_crosswoz_user_messages_act_types(tmp_path):
    rows = crosswoz.load_file(write_convlab_zip(tmp_path / "test.json.zip", CROSSWOZ, "test.json"))
    assert [(r.id, r.text, r.labels) for r in rows] == [
        ("11:0", "你好，推荐一家餐馆。", ("General&Inform&Request",)),
        ("11:2", "谢谢。", ("General",)),
    ]  # the system message and the act-less message are skipped
    assert rows[0].meta == {"dialogue": "11", "turn": 0}


def test_crosswoz_malformed_act_names_dialogue_and_message(tmp_path):
    bad = {"42": {"messages": [cw_msg("sys", "x"), cw_msg("usr", "hi", [["Inform", "餐馆"]])]}}
    with pytest.raises(DataError, match="dialogue 42 message 1: dialogue act"):
        crosswoz.load_file(write_convlab_zip(tmp_path / "v.zip", bad))


def test_crosswoz_values_become_substring_spans(tmp_path):
    dialogues = {"7": {"messages": [cw_msg("usr", "找一家评分4.5分以上的酒店，是否有早餐服务？要高档型酒店。", [
        ["Inform", "酒店", "评分", "4.5分以上"], ["Inform", "酒店", "酒店设施-早餐服务", "是"],
        ["Inform", "酒店", "酒店类型", "高档型"], ["Inform", "酒店", "名称", "高档型酒店"],
        ["Request", "酒店", "地址", ""], ["General", "greet", "none", "none"], ["Inform", "酒店", "价格", 300],
    ])]}}
    rows, stats = crosswoz.load_file_with_stats(write_convlab_zip(tmp_path / "v.zip", dialogues))
    # No word boundaries in Chinese; the longer name wins over the type inside it; "是" (yes),
    # "", "none" and the non-string 300 are skipped and not counted.
    assert spans_of(rows[0]) == [("4.5分以上", "评分"), ("高档型酒店", "名称")]
    assert (stats.values, stats.aligned) == (3, 2)


# ---------------------------------------------------------- dispatch and CLI
def test_load_dispatch_rejects_unknown_format_and_split(tmp_path):
    with pytest.raises(ValueError, match="unknown format"):
        loaders.load("sgd", tmp_path, "train")
    with pytest.raises(ValueError, match="no split 'train'"):
        loaders.load("multiwoz", tmp_path, "train")


def test_convert_cli_writes_canonical_jsonl(tmp_path, capsys):
    write_slot_folder(tmp_path / "atis", "valid", [
        ("fares to boston", "O O B-toloc.city_name", "atis_airfare"),
        ("flights and fares", "O O O", "atis_flight#atis_airfare"),
    ])
    out = tmp_path / "out.jsonl"
    assert main(["convert", "--format", "atis", "--input", str(tmp_path / "atis"),
                 "--split", "valid", "--out", str(out)]) == 0
    rows = read_jsonl(out)
    assert [r.labels for r in rows] == [("atis_airfare",), ("atis_flight", "atis_airfare")]
    assert rows[0].spans == (Span(9, 15, "toloc.city_name"),)
    summary = json.loads(capsys.readouterr().out)
    assert (summary["rows"], summary["labels"]) == (2, 2)


def test_convert_cli_exits_nonzero_on_bad_data(tmp_path, capsys):
    write_slot_folder(tmp_path / "snips", "train", [("a b", "O", "X")])
    out = tmp_path / "out.jsonl"
    assert main(["convert", "--format", "snips", "--input", str(tmp_path / "snips"),
                 "--split", "train", "--out", str(out)]) == 2
    assert "seq.out:1" in capsys.readouterr().err and not out.exists()
    assert main(["convert", "--format", "snips", "--input", str(tmp_path / "snips"),
                 "--split", "train", "--no-oos", "--out", str(out)]) == 2


# ------------------------------------------------- smoke reads of shared data
@needs_data
@pytest.mark.parametrize("fmt,path,split,rows,labels", [
    ("snips", "snips", "valid", 700, 7),
    ("atis", "atis", "valid", 500, 14),
    ("clinc150", "clinc150/data_small.json", "valid", 3100, 150),
    ("multiwoz", "multiwoz", "valid", 5568, 16),
    ("crosswoz", "crosswoz", "valid", 4213, 11),
])
def test_shared_data_loads(fmt, path, split, rows, labels):
    examples = loaders.load(fmt, DATA / path, split)
    assert len(examples) == rows
    assert len({lab for ex in examples for lab in ex.labels}) == labels
    assert all(ex.text == ex.text.strip() and ex.text for ex in examples)
    # Round trip through the canonical validator: spans inside the text, no duplicate labels.
    from intentvcs.core.dataio import parse_row
    assert all(parse_row(ex.to_dict()) == ex for ex in examples)


# Measured on the shared files; docs/RESEARCH.md section 8.1 reports these figures.
ALIGNMENT = {
    "multiwoz": {"valid": (7318, 6601), "test": (7236, 6574)},
    "crosswoz": {"valid": (3996, 3680), "test": (4027, 3729)},
}


@needs_data
@pytest.mark.parametrize("dataset", ["multiwoz", "crosswoz"])
def test_shared_dialogue_values_align_to_their_text(dataset):
    module = multiwoz if dataset == "multiwoz" else crosswoz
    rows, stats = module.load_file_with_stats(convlab_zip.split_path(DATA / dataset, "valid"))
    assert (stats.values, stats.aligned) == ALIGNMENT[dataset]["valid"]
    assert sum(len(ex.spans) for ex in rows) == stats.aligned
    sources = convlab_zip.read_dialogues(convlab_zip.split_path(DATA / dataset, "valid"))
    for ex in rows[::20]:  # a sample: every span reads back as its own slot's value
        pairs = act_pairs(dataset, sources[ex.meta["dialogue"]], ex.meta["turn"])
        assert all((s.label, ex.text[s.start:s.end].lower()) in pairs for s in ex.spans)


def act_pairs(dataset: str, dialogue: dict, turn: int) -> set[tuple[str, str]]:
    """``(span label, lowercased value)`` of every act of one raw turn."""
    if dataset == "multiwoz":
        acts = dialogue["log"][turn]["dialog_act"]
        return {(slot.lower(), value.lower()) for pairs in acts.values() for slot, value in pairs}
    return {(slot, str(value).lower()) for _, _, slot, value in dialogue["messages"][turn]["dialog_act"]}
