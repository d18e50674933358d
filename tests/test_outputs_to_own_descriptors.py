"""An output named by one of the process's own descriptors (/dev/stdout, /dev/fd/N) is written through it.

Opened by its path, /dev/stdout redirected to a file was that file opened anew for writing: ``intentvcs
predict --out /dev/stdout >> answers.jsonl`` truncated ``answers.jsonl``, the user's earlier lines gone
(the writers took a regular file for a file of theirs, and renamed a temporary file onto it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from intentvcs.core import atomic

REPO = Path(__file__).resolve().parents[1]
WRITE_BOTH_WAYS = """
import sys
from intentvcs.core import atomic
with atomic.streamed(sys.argv[1]) as handle:
    handle.write(b"streamed\\n")
atomic.write_text(sys.argv[1], "staged\\n")
"""


def run_with_stdout(path: Path, mode: str, *args: str) -> None:
    with open(path, mode) as out:
        subprocess.run([sys.executable, *args], stdout=out, check=True, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.mark.parametrize("named", ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"])
def test_a_stdout_appended_to_a_file_keeps_the_files_lines(tmp_path, named):
    answers = tmp_path / "answers.txt"
    answers.write_text("earlier\n")
    inode = answers.stat().st_ino
    run_with_stdout(answers, "a", "-c", WRITE_BOTH_WAYS, named)
    assert answers.read_text() == "earlier\nstreamed\nstaged\n"
    assert answers.stat().st_ino == inode  # written through, not replaced
    assert sorted(p.name for p in tmp_path.iterdir()) == ["answers.txt"]  # no temporary file either


def test_a_stdout_written_over_a_file_holds_every_write_in_order(tmp_path):
    """What Python printed before (held in its buffer: stdout is a file) comes first; then the writes, each
    after the one before, not over it from the file's start."""
    answers = tmp_path / "answers.txt"
    answers.write_text("a longer earlier content than what comes\n")
    run_with_stdout(answers, "w", "-c", "print('printed first')" + WRITE_BOTH_WAYS, "/dev/stdout")
    assert answers.read_text() == "printed first\nstreamed\nstaged\n"


def test_a_link_to_stdout_is_stdout_and_a_file_is_no_descriptor(tmp_path):
    link = tmp_path / "out"
    link.symlink_to("/dev/stdout")
    assert atomic._own_descriptor(link) == 1
    assert atomic._own_descriptor(Path("/dev/stderr")) == 2
    (tmp_path / "plain").write_text("")
    assert atomic._own_descriptor(tmp_path / "plain") is None
    assert atomic._own_descriptor(Path(f"/proc/{os.getppid()}/fd/1")) is None  # another process's


def test_predict_to_a_stdout_appended_to_a_file_keeps_the_files_lines(tmp_path):
    from tests.helpers.bundle import make_tiny_bundle

    bundle = make_tiny_bundle(tmp_path / "model")
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": f"r{i}", "text": "play some music"}) + "\n" for i in range(3)))
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"id": "earlier"}\n')
    run_with_stdout(answers, "a", "-m", "intentvcs.cli.main", "predict", "--bundle", str(bundle), "--data",
                    str(rows), "--out", "/dev/stdout")
    ids = [json.loads(line)["id"] for line in answers.read_text().splitlines()]
    assert ids == ["earlier", "r0", "r1", "r2"]
