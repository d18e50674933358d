"""Review of the benchmark builders (mix_builder, vcs_builder): defects reproduced on built sets."""

from __future__ import annotations

import pytest

from intentvcs.cli.main import main
from intentvcs.core.dataio import DataError
from intentvcs.training import mix_builder as mix
from intentvcs.training import vcs_builder as vcs
from tests.test_loaders import write_convlab_zip, write_slot_folder

ROWS = [
    ("play adele", "O B-artist", "PlayMusic"),
    ("play jazz", "O B-genre", "PlayMusic"),
    ("rate it", "O O", "RateBook"),
]


def write_set(root, dataset, empty=None, rows=ROWS):
    for split in ("train", "valid", "test"):
        write_slot_folder(root / dataset, split, [] if split == empty else rows)


@pytest.mark.parametrize("empty", ["train", "valid", "test"])
def test_build_vcs_refuses_an_empty_source_split_naming_its_folder(tmp_path, capsys, empty):
    # An empty split (three empty files) used to build a benchmark with 0 rows there and exit 0.
    write_set(tmp_path, "snips", empty)
    out = tmp_path / "bench"
    assert main(["build-vcs", "--dataset", "snips", "--data-root", str(tmp_path), "--out", str(out)]) == 2
    assert str(tmp_path / "snips" / empty) in capsys.readouterr().err
    assert not out.exists()


def test_build_vcs_refuses_a_convlab_file_without_a_kept_turn(tmp_path):
    # val.json.zip whose user turns have no DialogVCS domain: train and valid would be empty.
    dialogue = {"log": [{"text": "thanks, bye", "dialog_act": {"general-bye": [["none", "none"]]}},
                        {"text": "bye", "dialog_act": {}}]}
    write_convlab_zip(tmp_path / "multiwoz" / "val.json.zip", {"D1": dialogue})
    kept = {"log": [{"text": "a cheap hotel", "dialog_act": {"Hotel-Inform": [["Price", "cheap"]]}},
                    {"text": "ok", "dialog_act": {}}]}
    write_convlab_zip(tmp_path / "multiwoz" / "test.json.zip", {"T1": kept}, member="test.json")
    with pytest.raises(DataError) as err:
        vcs.build("multiwoz", tmp_path, tmp_path / "out")
    assert err.value.path.endswith("val.json.zip")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("empty", ["train", "valid", "test"])
def test_build_mix_names_the_folder_of_an_empty_split(tmp_path, capsys, empty):
    write_set(tmp_path, "atis", empty)
    out = tmp_path / "mix"
    assert main(["build-mix", "--dataset", "atis", "--data-root", str(tmp_path), "--out", str(out),
                 "--train-rows", "5", "--valid-rows", "5", "--test-rows", "5"]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "atis" / empty) in err and "no single-intent row" in err
    assert not out.exists()


def test_build_mix_names_the_folder_of_a_split_of_multi_intent_rows_only(tmp_path):
    write_set(tmp_path, "atis")
    write_slot_folder(tmp_path / "atis", "test", [("fares and flights", "O O O", "airfare#flight")])
    with pytest.raises(DataError) as err:
        mix.build("atis", tmp_path, tmp_path / "out", sizes={"train": 5, "valid": 5, "test": 5})
    assert err.value.path.startswith(str(tmp_path / "atis" / "test"))


def test_the_hard_data_card_describes_the_hard_construction(tmp_path):
    # info.json's "construction" of a hard build described the standard rows only ("the segments stand in
    # alphabetical order of their intents", three connectors), which its rows break on purpose.
    write_set(tmp_path, "atis", rows=[("book a flight to boston", "O O O O B-city", "flight"),
                                      ("what is the fare", "O O O O", "airfare"),
                                      ("which airline", "O O", "airline")])
    sizes = {"train": 5, "valid": 5, "test": 5}
    standard = mix.build("atis", tmp_path, tmp_path / "standard", sizes=sizes)
    hard = mix.build("atis", tmp_path, tmp_path / "hard", variant="hard", sizes=sizes)
    assert "alphabetical order" in standard["construction"] and "random order" not in standard["construction"]
    assert "random order" in hard["construction"] and "after that" in hard["construction"]


def test_a_data_root_without_the_data_set_says_how_to_give_one(tmp_path, capsys):
    """From outside the checkout the default root (relative to the working folder) was read as given: the
    error named a missing seq.in and said nothing of --data-root or INTENTVCS_DATA."""
    from intentvcs.cli import exit_codes
    from intentvcs.cli.main import main

    for command in ("build-vcs", "build-mix"):
        code = main([command, "--dataset", "atis", "--data-root", str(tmp_path), "--out", str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert code == exit_codes.BAD_INPUT, err
        assert f"no atis folder in the data root {tmp_path} (--data-root)" in err and "INTENTVCS_DATA" in err, err
    assert not (tmp_path / "out").exists()
