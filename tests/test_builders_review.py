"""Data builders review: each test failed on the code before its fix.

A Mix build whose joined utterances outgrow the reader's text limit (``MAX_TEXT_CHARS``) wrote them and
exited 0, and every reader of the product then refused ``train.jsonl`` at that row; it is now refused at
build time (exit 2), naming the source file and line.
"""

from __future__ import annotations

import pytest

from intentvcs.cli.main import main
from intentvcs.core.dataio import MAX_TEXT_CHARS
from tests.test_loaders import write_slot_folder


@pytest.mark.parametrize("variant", ["standard", "hard"])
def test_build_mix_refuses_rows_longer_than_the_readers_limit_naming_the_source_line(tmp_path, capsys, variant):
    # Each source utterance is within the limit (the loader accepts it), three joined are not.
    words = MAX_TEXT_CHARS // 3 // 5 + 1  # "word " per token: just over a third of the limit each
    rows = [(" ".join(["flight"] * 2), "O O", "flight"),
            (" ".join(["word"] * words), " ".join(["O"] * words), "airfare"),
            (" ".join(["fare"] * words), " ".join(["O"] * words), "ground"),
            (" ".join(["city"] * words), " ".join(["O"] * words), "city")]
    for split in ("train", "valid", "test"):
        write_slot_folder(tmp_path / "atis", split, rows)
    out = tmp_path / "mix"
    code = main(["build-mix", "--dataset", "atis", "--data-root", str(tmp_path), "--out", str(out),
                 "--variant", variant, "--train-rows", "40", "--valid-rows", "5", "--test-rows", "5"])
    err = capsys.readouterr().err
    assert code == 2, "built rows over the limit, which read_jsonl refuses: " + err
    assert str(tmp_path / "atis" / "train" / "seq.in") in err and f"{MAX_TEXT_CHARS:,}" in err
    assert not out.exists()
