"""Review of relations (save/load round trip) and the public-data loaders (rows the product's reader refuses)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from intentvcs.core.dataio import MAX_TEXT_CHARS, DataError, parse_row
from intentvcs.core.relations import Composite, Cover, Duplicate, LabelRelations, RelationsError
from intentvcs.training.loaders import clinc150, crosswoz, multiwoz, slot_folder


# ---------------------------------------------------------------- relations
@pytest.mark.parametrize("families", [{"": ("a",)}, {1: ("a",)}, {"f": "ab"}])
def test_families_a_relations_file_cannot_hold_are_refused_when_built(tmp_path, families):
    # An empty family name was saved and then refused on load; a name 1 loaded as "1"; members "ab" (a string)
    # were read as its characters a and b.
    with pytest.raises(RelationsError, match="families"):
        LabelRelations(labels=("a", "b"), families=families)


def test_composite_and_cover_given_lists_save_and_load_to_the_same_relations(tmp_path):
    relations = LabelRelations(labels=("a", "b", "c", "p"),
                               relations=(Composite("c", ["a", "b"]), Cover("p", ["a", "b"]), Duplicate("a", "b")))
    relations.save(tmp_path / "relations.json")
    assert LabelRelations.load(tmp_path / "relations.json") == relations
    assert hash(relations.relations[0]) == hash(Composite("c", ("a", "b")))  # a list made it unhashable
    with pytest.raises(RelationsError, match="parts"):
        Composite("c", "ab")  # a string is no list of parts: it was read as its characters
    with pytest.raises(RelationsError, match="children"):
        Cover("p", "ab")


# ---------------------------------------------------------------- loaders
def _zip(path: Path, dialogues: dict) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("val.json", json.dumps(dialogues, ensure_ascii=False))
    return path


def _readable(example) -> None:
    parse_row(json.loads(json.dumps(example.to_dict(), ensure_ascii=False)))


def test_crosswoz_padded_slot_name_is_refused_naming_dialogue_and_message(tmp_path):
    # The slot is the span label; "名称 " was written as an entity type the product's reader refuses
    # ("has leading or trailing whitespace"), naming the converted file's line instead of the source.
    dialogues = {"7": {"messages": [
        {"role": "usr", "content": "去故宫", "dialog_act": [["Inform", "景点", "名称 ", "故宫"]]}]}}
    path = _zip(tmp_path / "val.json.zip", dialogues)
    with pytest.raises(DataError, match=r"dialogue 7 message 0.*slot name"):
        crosswoz.load_file(path)
    dialogues["7"]["messages"][0]["dialog_act"][0][2] = "名称"
    for example in crosswoz.load_file(_zip(tmp_path / "ok.json.zip", dialogues)):
        _readable(example)


def test_text_over_the_limit_is_refused_with_its_source_location(tmp_path):
    long = " ".join(["word"] * (MAX_TEXT_CHARS // 5 + 1))
    # SNIPS / ATIS folder
    folder = tmp_path / "train"
    folder.mkdir()
    (folder / "seq.in").write_text(f"hi\n{long}\n", encoding="utf-8")
    (folder / "seq.out").write_text("O\n" + " ".join(["O"] * len(long.split())) + "\n", encoding="utf-8")
    (folder / "label").write_text("a\na\n", encoding="utf-8")
    with pytest.raises(DataError, match="characters") as info:
        slot_folder.load_folder(folder, "train")
    assert "seq.in" in str(info.value) and ":2" in str(info.value)
    # CLINC150
    data = {key: [] for key in ("train", "val", "test", "oos_train", "oos_val", "oos_test")}
    data["val"] = [["hi", "greet"], [long, "greet"]]
    (tmp_path / "data.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataError, match=r"val\[1\].*characters"):
        clinc150.load_split(tmp_path / "data.json", "valid")
    # MultiWOZ
    turn = {"text": long, "metadata": {}, "dialog_act": {"Hotel-Inform": [["Area", "north"]]}, "span_info": []}
    path = _zip(tmp_path / "mw.json.zip", {"d1": {"log": [turn]}})
    with pytest.raises(DataError, match=r"dialogue d1 turn 0.*characters"):
        multiwoz.load_file(path)
    # CrossWOZ
    message = {"role": "usr", "content": long, "dialog_act": [["Inform", "景点", "名称", "故宫"]]}
    path = _zip(tmp_path / "cw.json.zip", {"9": {"messages": [message]}})
    with pytest.raises(DataError, match=r"dialogue 9 message 0.*characters"):
        crosswoz.load_file(path)
