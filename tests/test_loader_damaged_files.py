"""Damaged source data files given to the loaders (intentvcs.training.loaders) and ``intentvcs convert``.

A bad file is a ``DataError`` naming the file, the line where there is one, and the reason (exit 2): never a
traceback (exit 3) and never a silent wrong conversion.

1. SNIPS / ATIS slot folders whose lines end in a carriage return alone (old Mac) read as one row of
   garbage, and an intent with a control character or whitespace inside was kept as a label;
2. CLINC150 and ConvLab-2 (MultiWOZ, CrossWOZ) JSON nested past Python's recursion limit was a traceback, and an
   integer past Python's digit limit an error naming no file;
3. a lone surrogate in a dialogue id, an act type or a slot name was refused only when written, naming neither
   the file nor the dialogue.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

from intentvcs.cli.main import main
from intentvcs.core.dataio import MAX_NESTING, DataError, Span
from intentvcs.training import loaders
from intentvcs.training.loaders import clinc150, crosswoz, multiwoz, slot_folder

ROWS = [
    ("play some jazz", "O O B-genre", "PlayMusic"),
    ("rate this book five stars", "O B-object_select B-object_type B-rating_value O", "RateBook"),
    ("add song to my playlist", "O O O O B-playlist", "AddToPlaylist"),
]


def write_slot_folder(root: Path, rows=ROWS, end: str = "\n", split: str = "train") -> Path:
    """``root/split/{seq.in,seq.out,label}`` with lines ending in ``end`` (and the trailing blank the real
    files have), written as bytes: no newline translation."""
    folder = root / split
    folder.mkdir(parents=True, exist_ok=True)
    for index, name in enumerate(slot_folder.FILES):
        (folder / name).write_bytes("".join(f"{row[index]} {end}" for row in rows).encode("utf-8"))
    return folder


def convert(args: list[str], capsys) -> tuple[int, str]:
    """``intentvcs convert ARGS``: exit code and standard error."""
    try:
        code = main(["convert", *args])
    except SystemExit as exc:  # argparse
        code = exc.code
    return code, capsys.readouterr().err


# ------------------------------------------------- 1. slot folders: line endings, intents
def test_a_slot_folder_of_carriage_return_line_endings_is_refused_not_read_as_one_row(tmp_path):
    folder = write_slot_folder(tmp_path, end="\r")
    with pytest.raises(DataError) as caught:
        slot_folder.load_split(tmp_path, "train")
    error = caught.value
    assert (error.path, error.line) == (str(folder / "seq.in"), 1)
    # The JSONL reader's words for the same files.
    assert "its lines end in a carriage return alone (old Mac line endings)" in error.reason
    assert "convert them to \\n" in error.reason


def test_carriage_return_endings_with_a_final_line_feed_are_still_old_mac_endings(tmp_path):
    folder = write_slot_folder(tmp_path)
    (folder / "seq.out").write_bytes("".join(f"{row[1]} \r" for row in ROWS).encode() + b"\n")
    with pytest.raises(DataError, match="old Mac line endings") as caught:
        slot_folder.load_split(tmp_path, "train")
    assert (caught.value.path, caught.value.line) == (str(folder / "seq.out"), 1)


def test_only_the_label_file_with_carriage_return_endings_is_named(tmp_path):
    folder = write_slot_folder(tmp_path)
    (folder / "label").write_bytes(b"PlayMusic\rRateBook\rAddToPlaylist\r")
    with pytest.raises(DataError, match="carriage return alone") as caught:
        slot_folder.load_split(tmp_path, "train")
    assert (caught.value.path, caught.value.line) == (str(folder / "label"), 1)


def test_a_stray_carriage_return_inside_a_line_is_refused_with_line_and_column(tmp_path):
    """Not a line end of an LF file: ``str.split`` made it a token separator, so "play\\rsome" read as two
    words without a word said."""
    folder = write_slot_folder(tmp_path)
    (folder / "seq.in").write_bytes(b"play some jazz\nrate this\rbook five stars\nadd song to my playlist\n")
    with pytest.raises(DataError) as caught:
        slot_folder.load_split(tmp_path, "train")
    error = caught.value
    assert (error.path, error.line) == (str(folder / "seq.in"), 2)
    assert "carriage return not followed by a line feed (column 10)" in error.reason
    assert "old Mac" not in error.reason


def test_crlf_and_lf_slot_folders_read_the_same(tmp_path):
    lf = slot_folder.load_split(write_slot_folder(tmp_path / "lf").parent, "train")
    crlf = slot_folder.load_split(write_slot_folder(tmp_path / "crlf", end="\r\n").parent, "train")
    assert crlf == lf and [row.labels for row in crlf] == [("PlayMusic",), ("RateBook",), ("AddToPlaylist",)]
    assert crlf[0].text == "play some jazz" and crlf[0].spans == (Span(10, 14, "genre"),)


def test_crlf_converted_twice_reads_as_lf(tmp_path):
    """A CRLF file converted to CRLF again (an editor, a Windows checkout) still ends its lines in \\n: read as
    it was before lone carriage returns were refused, not refused as old Mac line endings."""
    lf = slot_folder.load_split(write_slot_folder(tmp_path / "lf").parent, "train")
    assert slot_folder.load_split(write_slot_folder(tmp_path / "twice", end="\r\r\n").parent, "train") == lf


@pytest.mark.parametrize("intent, named", [
    ("Play Music", "a space"),
    ("Play\tMusic", "a tab"),
    ("Play\u2028Music", "U+2028"),  # a line separator: the files are split on \n only
    ("Play\x00Music", "U+0000"),
    ("Play\u200bMusic", "U+200B"),  # zero width space: a look-alike of PlayMusic
    ("atis_flight#atis\x0bairfare", "U+000B"),
])
def test_an_intent_with_whitespace_or_a_control_character_inside_is_refused(tmp_path, intent, named):
    rows = [ROWS[0], (ROWS[1][0], ROWS[1][1], intent), ROWS[2]]
    folder = write_slot_folder(tmp_path, rows)
    with pytest.raises(DataError) as caught:
        slot_folder.load_split(tmp_path, "train")
    error = caught.value
    assert (error.path, error.line) == (str(folder / "label"), 2)
    assert named in error.reason and "inside" in error.reason


def test_the_reviewers_carriage_return_folder_exits_2_naming_the_file(tmp_path, capsys):
    write_slot_folder(tmp_path / "cr", end="\r")
    out = tmp_path / "out.jsonl"
    code, err = convert(["--format", "snips", "--input", str(tmp_path / "cr"), "--split", "train",
                         "--out", str(out)], capsys)
    assert code == 2 and f"{tmp_path / 'cr' / 'train' / 'seq.in'}:1: " in err and "carriage return" in err
    assert "Traceback" not in err and not out.exists()


def test_multi_intent_labels_and_trailing_blanks_still_read(tmp_path):
    rows = [("flights and fares to boston", "O O O O B-toloc.city_name", "atis_flight#atis_airfare")]
    write_slot_folder(tmp_path, rows, end="\t \r\n")
    (row,) = slot_folder.load_split(tmp_path, "train")
    assert row.labels == ("atis_flight", "atis_airfare") and row.spans == (Span(21, 27, "toloc.city_name"),)


# ------------------------------------------- 2. JSON nested too deep, integers too long
CLINC = {"train": [["hi", "greet"]], "val": [["hello", "greet"]], "test": [], "oos_train": [], "oos_val": [],
         "oos_test": []}
DEEP = "[" * 100_000 + "]" * 100_000
BIG = "9" * 5000


def clinc_file(tmp_path: Path, extra: str) -> Path:
    """CLINC150's object with ``"x": extra`` on its third line."""
    path = tmp_path / "data_bad.json"
    body = json.dumps(CLINC)[1:-1]
    path.write_text("{\n" + body + ',\n"x": ' + extra + "\n}\n", encoding="utf-8")
    return path


def convlab_folder(tmp_path: Path, raw: str, name: str = "set") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    with zipfile.ZipFile(folder / "val.json.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("val.json", raw)
    return folder


MW_GOOD = {"d1": {"log": [{"text": "i need a hotel", "dialog_act": {"Hotel-Inform": [["Area", "east"]]}}]}}
CW_GOOD = {"d1": {"messages": [{"role": "usr", "content": "你好", "dialog_act": [["General", "greet", "none",
                                                                                 "none"]]}]}}


def test_clinc150_nested_past_the_recursion_limit_names_file_and_line(tmp_path):
    path = clinc_file(tmp_path, DEEP)
    with pytest.raises(DataError) as caught:
        clinc150.load_split(path, "train")
    error = caught.value
    assert (error.path, error.line) == (str(path), 3)
    assert "nested deeper than Python's recursion limit" in error.reason and f"{MAX_NESTING} levels" in error.reason


def test_clinc150_integer_past_the_digit_limit_names_file_and_line(tmp_path):
    path = clinc_file(tmp_path, BIG)
    with pytest.raises(DataError) as caught:
        clinc150.load_split(path, "train")
    error = caught.value
    assert (error.path, error.line) == (str(path), 3)
    assert error.reason == (f"invalid JSON: Exceeds the limit ({sys.get_int_max_str_digits()} digits) for "
                            "integer string conversion: value has 5000 digits")


def test_the_integer_past_the_limit_is_located_past_long_digit_strings_and_floats(tmp_path):
    """Only an integer has Python's digit limit: a long string of digits and a long fraction or exponent before
    it are not what the line names (and alone they read)."""
    before = json.dumps(["1" * 5000]) + ', "y": 0.' + "3" * 5000 + ', "z": 1e-' + "0" * 4999 + "1"
    path = clinc_file(tmp_path, before)
    assert [row.text for row in clinc150.load_split(path, "train")] == ["hi"]
    path = clinc_file(tmp_path, before + ',\n"w": [1, 2,\n-' + BIG + "]")
    with pytest.raises(DataError, match="Exceeds the limit") as caught:
        clinc150.load_split(path, "train")
    assert caught.value.line == 5


@pytest.mark.parametrize("fmt, good", [("multiwoz", MW_GOOD), ("crosswoz", CW_GOOD)])
@pytest.mark.parametrize("value, says", [
    (DEEP, "nested deeper than Python's recursion limit"),
    ("-" + BIG, "Exceeds the limit"),
], ids=["nested past the recursion limit", "integer past the digit limit"])
def test_convlab_json_past_a_parser_limit_names_member_and_line(tmp_path, fmt, good, value, says):
    raw = json.dumps(good)[:-1] + ',\n"x": ' + value + "}"
    folder = convlab_folder(tmp_path, raw)
    with pytest.raises(DataError) as caught:
        loaders.load(fmt, folder, "valid")
    error = caught.value
    assert (error.path, error.line) == (f"{folder / 'val.json.zip'}!val.json", 2)
    assert says in error.reason and "set_int_max_str_digits" not in error.reason


def test_convlab_member_not_utf8_names_line_and_column(tmp_path):
    folder = tmp_path / "set"
    folder.mkdir()
    with zipfile.ZipFile(folder / "val.json.zip", "w") as archive:
        archive.writestr("val.json", b'{"d1": {"log": [\n{"text": "caf\xe9"}]}}')
    with pytest.raises(DataError) as caught:
        loaders.load("multiwoz", folder, "valid")
    assert (caught.value.line, caught.value.reason) == (2, "not UTF-8: byte 0xe9 at column 14")


@pytest.mark.parametrize("case", ["clinc_deep", "clinc_big", "multiwoz_deep", "crosswoz_big"])
def test_the_reviewers_json_cases_exit_2_without_a_traceback(tmp_path, capsys, case):
    if case.startswith("clinc"):
        fmt, split, where = "clinc150", "train", clinc_file(tmp_path, DEEP if case.endswith("deep") else BIG)
    else:
        fmt, split = case.split("_")[0], "valid"
        good = MW_GOOD if fmt == "multiwoz" else CW_GOOD
        where = convlab_folder(tmp_path, json.dumps(good)[:-1] + ', "x": ' + (DEEP if "deep" in case else BIG) + "}")
    out = tmp_path / "out.jsonl"
    code, err = convert(["--format", fmt, "--input", str(where), "--split", split, "--out", str(out)], capsys)
    assert code == 2, err
    assert "Traceback" not in err and "internal error" not in err and not out.exists()
    named = str(where) if fmt == "clinc150" else f"{where / 'val.json.zip'}!val.json"
    assert f"error: {named}:" in err


def test_real_nesting_still_reads(tmp_path):
    """ConvLab-2's files nest 7 (CrossWOZ) to 9 (MultiWOZ) levels deep."""
    deep_meta = {"a": {"b": [{"c": [[{"d": []}]]}]}}
    dialogues = {"d1": {"log": [{"text": "i need a hotel", "metadata": deep_meta,
                                 "dialog_act": {"Hotel-Inform": [["Area", "east"]]}}]}}
    (row,) = loaders.load("multiwoz", convlab_folder(tmp_path, json.dumps(dialogues)), "valid")
    assert row.labels == ("hotel",) and row.text == "i need a hotel"


# ------------------------------------------------- 3. lone surrogates outside the text
def cw_dialogues(act_type="Inform", slot="名称", dialogue_id="d1") -> str:
    """CrossWOZ JSON whose fields may carry the escape ``\\ud800`` (``json.dumps`` would write it as is)."""
    return ('{"%s": {"messages": [{"role": "sys", "content": "hi", "dialog_act": []}, {"role": "usr", '
            '"content": "\\u4f60\\u597d", "dialog_act": [["%s", "餐馆", "%s", "x"]]}]}}'
            % (dialogue_id, act_type, slot))


def mw_dialogues(act="Hotel-Inform", slot="Area", dialogue_id="d1") -> str:
    return ('{"%s": {"log": [{"text": "a hotel in the east", "dialog_act": {"%s": [["%s", "east"]]}}]}}'
            % (dialogue_id, act, slot))


@pytest.mark.parametrize("raw, where, what", [
    (cw_dialogues(act_type="Inf\\ud800orm"), "dialogue d1 message 1: ", "the act type"),
    (cw_dialogues(slot="名\\ud800称"), "dialogue d1 message 1: ", "the slot name"),
])
def test_crosswoz_lone_surrogate_in_an_act_names_file_dialogue_and_message(tmp_path, raw, where, what):
    folder = convlab_folder(tmp_path, raw)
    with pytest.raises(DataError) as caught:
        crosswoz.load_split(folder, "valid")
    error = caught.value
    assert (error.path, error.line) == (str(folder / "val.json.zip"), None)
    assert error.reason.startswith(where + what) and "lone surrogate (\\ud800" in error.reason


@pytest.mark.parametrize("raw, what", [
    (mw_dialogues(act="Hotel-Inf\\ud800orm"), "the dialogue act name"),
    (mw_dialogues(act="Ho\\udc00tel-Inform"), "the dialogue act name"),
    (mw_dialogues(slot="Ar\\ud800ea"), "the slot name"),
])
def test_multiwoz_lone_surrogate_in_an_act_names_file_dialogue_and_turn(tmp_path, raw, what):
    folder = convlab_folder(tmp_path, raw)
    with pytest.raises(DataError) as caught:
        multiwoz.load_split(folder, "valid")
    error = caught.value
    assert (error.path, error.line) == (str(folder / "val.json.zip"), None)
    assert error.reason.startswith("dialogue d1 turn 0: " + what) and "lone surrogate" in error.reason


@pytest.mark.parametrize("fmt, raw", [("multiwoz", mw_dialogues(dialogue_id="d\\ud8001")),
                                      ("crosswoz", cw_dialogues(dialogue_id="d\\ud8001"))])
def test_a_lone_surrogate_in_a_dialogue_id_is_refused_naming_it_escaped(tmp_path, fmt, raw):
    folder = convlab_folder(tmp_path, raw)
    with pytest.raises(DataError) as caught:
        loaders.load(fmt, folder, "valid")
    error = caught.value
    assert error.path == str(folder / "val.json.zip")
    assert error.reason.startswith("dialogue 'd\\ud8001': the dialogue id holds a lone surrogate")
    str(error).encode("utf-8")  # the message itself is text any terminal or log can take


def test_the_reviewers_surrogate_act_type_exits_2_naming_file_and_dialogue(tmp_path, capsys):
    folder = convlab_folder(tmp_path, cw_dialogues(act_type="Inf\\ud800orm"))
    out = tmp_path / "o.jsonl"
    code, err = convert(["--format", "crosswoz", "--input", str(folder), "--split", "valid", "--out", str(out)],
                        capsys)
    assert code == 2 and f"{folder / 'val.json.zip'}: dialogue d1 message 1: the act type" in err, err
    assert not out.exists()


def test_a_surrogate_in_a_value_never_written_is_no_error(tmp_path):
    """Act values are only looked for in the (checked) text, never written: a broken one aligns to nothing."""
    raw = mw_dialogues().replace('"east"]', '"ea\\ud800st"]')
    (row,) = multiwoz.load_split(convlab_folder(tmp_path, raw), "valid")
    assert row.labels == ("hotel",) and row.spans == ()
