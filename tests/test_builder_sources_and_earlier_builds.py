"""Second review of the data-set converters and benchmark builders: defects reproduced, one test each.

1. A key given twice in a source JSON object (a ConvLab-2 dialogue id, an act of a turn, a CLINC150 split
   key) kept only the last value: a whole dialogue's turns, an act's values or a split's rows were dropped
   without a word. Refused, naming the key.
2. ``build-vcs`` / ``build-mix`` replaced, without ``--force``, any folder holding an ``info.json`` beside
   ``*.jsonl`` files: a MixATIS build (for build-vcs) or a user's own data folder. Refused unless its
   ``info.json`` names one of the command's benchmarks.
3. ``convert`` of a split without a row wrote an empty JSONL file with exit status 0, which every reader
   of the product refuses ("no rows"). Refused, naming the source and what was left out.
"""

from __future__ import annotations

import json
import zipfile

import pytest

from intentvcs.cli.main import main
from intentvcs.core.dataio import DataError, read_jsonl
from intentvcs.training import loaders
from intentvcs.training import mix_builder as mix
from intentvcs.training import vcs_builder as vcs
from intentvcs.training.loaders import clinc150, crosswoz, multiwoz
from tests.test_loaders import write_convlab_zip, write_slot_folder

ROWS = [
    ("play adele", "O B-artist", "PlayMusic"),
    ("play jazz", "O B-genre", "PlayMusic"),
    ("rate it", "O O", "RateBook"),
]


def write_set(root, dataset):
    for split in ("train", "valid", "test"):
        write_slot_folder(root / dataset, split, ROWS)


def write_raw_zip(path, member, text):
    """A ConvLab-2 archive from JSON text as written (``json.dumps`` cannot repeat a key)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(member, text)
    return path


def turn(text, acts):
    return json.dumps({"text": text, "metadata": {}, "dialog_act": acts})


# -------------------------------------------------- 1: keys given twice
def test_a_dialogue_id_given_twice_is_refused_not_half_dropped(tmp_path):
    # Two files merged by hand: D1 twice. json kept the second D1 only, so its first turn was lost.
    first = '{"log": [%s]}' % turn("a cheap hotel", {"Hotel-Inform": [["Price", "cheap"]]})
    second = '{"log": [%s]}' % turn("a taxi to the station", {"Taxi-Inform": [["Dest", "the station"]]})
    path = write_raw_zip(tmp_path / "mw" / "val.json.zip", "val.json", '{"D1": %s, "D1": %s}' % (first, second))
    with pytest.raises(DataError) as err:
        multiwoz.load_file(path)
    assert err.value.reason.startswith("duplicate key 'D1'")
    assert err.value.path == f"{path}!val.json"
    code = main(["convert", "--format", "multiwoz", "--input", str(tmp_path / "mw"), "--split", "valid",
                 "--out", str(tmp_path / "out.jsonl")])
    assert code == 2 and not (tmp_path / "out.jsonl").exists()


def test_an_act_given_twice_in_a_turn_is_refused(tmp_path):
    # The turn's second "Hotel-Inform" replaced the first, whose value ("cheap") was no span any more.
    text = ('{"D1": {"log": [{"text": "a cheap hotel in the east", "dialog_act": '
            '{"Hotel-Inform": [["Price", "cheap"]], "Hotel-Inform": [["Area", "east"]]}}]}}')
    with pytest.raises(DataError, match="duplicate key 'Hotel-Inform'"):
        multiwoz.load_file(write_raw_zip(tmp_path / "val.json.zip", "val.json", text))
    message = '{"role": "usr", "content": "你好", "dialog_act": [], "dialog_act": [["General", "greet", "none", "none"]]}'
    with pytest.raises(DataError, match="duplicate key 'dialog_act'"):
        crosswoz.load_file(write_raw_zip(tmp_path / "c.zip", "test.json", '{"1": {"messages": [%s]}}' % message))


def test_a_clinc150_key_given_twice_is_refused(tmp_path):
    # A second "train" replaced the first one's rows.
    rest = ', '.join(f'"{key}": []' for key in ("val", "test", "oos_train", "oos_val", "oos_test"))
    path = tmp_path / "data_tiny.json"
    path.write_text('{"train": [["book a flight", "book_flight"]], "train": [["my balance", "balance"]], %s}' % rest)
    with pytest.raises(DataError) as err:
        clinc150.load_split(path, "train")
    assert err.value.path == str(path) and "duplicate key 'train'" in err.value.reason


# ------------------------------------ 2: an info.json that is not the command's
def user_folder(path):
    path.mkdir()
    (path / "info.json").write_text('{"name": "our own data", "version": 3}')
    (path / "train.jsonl").write_text('{"text": "hi", "labels": ["greet"]}\n')
    return {p.name: p.read_text() for p in path.iterdir()}


@pytest.mark.parametrize("command", ["build-vcs", "build-mix"])
def test_a_users_folder_with_an_info_json_is_not_replaced_without_force(tmp_path, capsys, command):
    write_set(tmp_path, "snips")
    out = tmp_path / "mine"
    before = user_folder(out)
    sizes = ["--train-rows", "3", "--valid-rows", "3", "--test-rows", "3"] if command == "build-mix" else []
    args = [command, "--dataset", "snips", "--data-root", str(tmp_path), "--out", str(out), *sizes]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "refusing to replace" in err and "--force" in err
    assert {p.name: p.read_text() for p in out.iterdir()} == before
    assert main([*args, "--force"]) == 0  # asked for, it is replaced
    assert (out / "test.jsonl").is_file()


def test_build_vcs_does_not_replace_a_mix_build_and_each_replaces_its_own(tmp_path, capsys):
    write_set(tmp_path, "snips")
    root = ["--dataset", "snips", "--data-root", str(tmp_path)]
    sizes = ["--train-rows", "3", "--valid-rows", "3", "--test-rows", "3"]
    mix_out, vcs_out = tmp_path / "mix", tmp_path / "vcs"
    assert main(["build-mix", *root, "--out", str(mix_out), *sizes]) == 0
    assert main(["build-vcs", *root, "--out", str(vcs_out)]) == 0
    capsys.readouterr()
    assert main(["build-vcs", *root, "--out", str(mix_out)]) == 2
    assert "'MixSNIPS'" in capsys.readouterr().err
    assert json.loads((mix_out / "info.json").read_text())["benchmark"] == "MixSNIPS"
    # An earlier build of the same command is still replaced, the hard variant's too.
    assert main(["build-mix", *root, "--variant", "hard", "--out", str(mix_out), *sizes]) == 0
    assert main(["build-mix", *root, "--out", str(mix_out), *sizes, "--seed", "1"]) == 0
    assert main(["build-vcs", *root, "--out", str(vcs_out), "--seed", "1"]) == 0
    assert json.loads((vcs_out / "info.json").read_text())["seed"] == 1
    # The refusal comes before the sources are read: no data is needed to be told.
    with pytest.raises(FileExistsError):
        vcs.build("snips", tmp_path / "nowhere", mix_out)
    with pytest.raises(FileExistsError):
        mix.build("snips", tmp_path / "nowhere", vcs_out, sizes={"train": 3, "valid": 3, "test": 3})


# ---------------------------------------------------- 3: convert of no rows
def test_convert_refuses_a_split_without_rows_instead_of_writing_an_empty_file(tmp_path, capsys):
    data = {"train": [], "val": [["fly me to paris", "book_flight"]], "test": [],
            "oos_train": [["who won the game", "oos"]], "oos_val": [], "oos_test": []}
    path = tmp_path / "data_tiny.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "train.jsonl"
    args = ["convert", "--format", "clinc150", "--input", str(path), "--split", "train", "--out", str(out)]
    assert main([*args, "--no-oos"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: no rows for the train split" in err and "--no-oos" in err
    assert not out.exists()
    assert main(args) == 0 and len(read_jsonl(out)) == 1  # the out-of-scope row is a row
    # A ConvLab-2 split whose user turns all lack a DialogVCS domain names the file and what was left out.
    dialogue = {"log": [{"text": "thanks, bye", "dialog_act": {"general-bye": [["none", "none"]]}},
                        {"text": "bye", "dialog_act": {}}]}
    write_convlab_zip(tmp_path / "mw" / "val.json.zip", {"D1": dialogue})
    skipped: dict[str, int] = {}
    with pytest.raises(DataError) as err:
        loaders.load("multiwoz", tmp_path / "mw", "valid", skipped=skipped)
    assert err.value.path.endswith("val.json.zip") and "no_kept_domain" in err.value.reason
    assert skipped == {"no_kept_domain": 1}  # still counted for the caller
