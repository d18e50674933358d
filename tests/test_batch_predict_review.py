"""Batch prediction (``intentvcs predict``, ``intentvcs.service.batch_predict``): defects of a review,
each reproduced by a test that failed on the code before its fix.

- a Parquet text (or id) whose bytes are not UTF-8 was reported at the first row of the record batch holding
  it ("row 1: cannot read it as Parquet"), not at its own row;
- a Parquet row span converted every row of its row group before it to Python values: the Ray read of a late
  span in a large row group did work growing with its offset, and a bad value before the span failed it;
- ``--id-column`` naming the text column read a valid Parquet file as broken ("row 1: cannot read it as
  Parquet: index out of bounds"), where a CSV takes each row's text as its id;
- an empty ``--ray-address`` (``--ray-address "$HEAD"`` with the variable unset) ran on a local cluster
  started for the run, as if the option were left out, instead of being refused;
- with ``--out /dev/stdout`` on a terminal, the progress bar (stderr, the same terminal) was drawn into the
  answers: lines read "predict: 256 rows [00:01, 214 rows/s]{"id": ...";
- a ``.json`` file holding a JSON array (read as JSON Lines, as the suffix is) was refused as "invalid JSON"
  or "expected a JSON object", as if it were broken;
- ``predict_ray(top_k=0)`` started the cluster and loaded every actor's model before each actor refused it,
  in a Ray traceback, where every other bad setting is refused at once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from intentvcs.cli import exit_codes
from intentvcs.cli.main import main
from tests.helpers.bundle import make_tiny_bundle


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return make_tiny_bundle(tmp_path_factory.mktemp("review") / "model")


def predict(bundle: Path, data: Path, out: Path, *options: str) -> int:
    return main(["predict", "--bundle", str(bundle), "--data", str(data), "--out", str(out), *options])


def read_answers(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def raw_strings(values: list[bytes]):
    """A pyarrow string array holding ``values`` as they are: pyarrow checks no UTF-8 when built from buffers,
    as files other tools wrote may hold it."""
    import struct

    import pyarrow as pa

    offsets = [0]
    for value in values:
        offsets.append(offsets[-1] + len(value))
    buffers = [None, pa.py_buffer(struct.pack(f"<{len(offsets)}i", *offsets)), pa.py_buffer(b"".join(values))]
    return pa.Array.from_buffers(pa.string(), len(values), buffers)


def test_a_parquet_text_that_is_not_utf8_is_named_by_its_row(bundle, tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [f"play song {i}".encode() for i in range(10)]
    texts[6] = b"caf\xe9 music"
    data = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": raw_strings(texts)}), data)
    assert predict(bundle, data, tmp_path / "out.jsonl") == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert err == (f"intentvcs predict: error: {data}: row 7: 'text' is not UTF-8: byte 0xe9 at position 4 "
                   "of the value\n"), err
    assert not (tmp_path / "out.jsonl").exists()


def test_a_parquet_span_converts_no_value_outside_it(tmp_path):
    """Ray reads a span from the start of its row group: the rows before the span are skipped, not converted."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from intentvcs.service.batch_predict import Source, Span, iter_rows

    texts = [f"play song {i}".encode() for i in range(10)]
    texts[2] = b"caf\xe9"  # a bad value before the span, in its row group: the span before reports it
    data = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": [f"r{i}" for i in range(10)], "text": raw_strings(texts)}), data)
    source = Source.open(data)
    assert list(iter_rows(source, Span(5, 8, 1))) == [(f"play song {i}", f"r{i}") for i in range(5, 8)]


def test_a_parquet_id_column_that_is_the_text_column_reads_as_in_a_csv(bundle, tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = ["play some music", "book a table"]
    pq.write_table(pa.table({"text": texts}), tmp_path / "in.parquet")
    (tmp_path / "in.csv").write_text("text\n" + "".join(f"{text}\n" for text in texts), encoding="utf-8")
    for data in (tmp_path / "in.parquet", tmp_path / "in.csv"):
        out = tmp_path / f"out-{data.suffix[1:]}.jsonl"
        assert predict(bundle, data, out, "--id-column", "text") == exit_codes.OK, capsys.readouterr().err
        assert [(answer["id"], answer["text"]) for answer in read_answers(out)] == [(text, text) for text in texts]


@pytest.mark.parametrize("address", ["", "  "])
def test_an_empty_ray_address_is_refused_not_run_on_a_local_cluster(address, bundle, tmp_path, capsys, monkeypatch):
    from intentvcs.service import batch_predict

    monkeypatch.setattr(batch_predict, "predict_ray", lambda *args, **kwargs: pytest.fail("the run started"))
    data = tmp_path / "in.jsonl"
    data.write_text('{"text": "play some music"}\n', encoding="utf-8")
    code = predict(bundle, data, tmp_path / "out.jsonl", "--engine", "ray", "--ray-address", address)
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT and err.startswith("intentvcs predict: error: --ray-address is empty"), err


class _Echo:
    """An engine answering each text with itself: what is written, not what is predicted, is checked."""

    def predict(self, texts, top_k=None):
        return [{"text": text} for text in texts]


def test_the_progress_bar_is_drawn_on_a_terminal_but_not_into_the_answers_written_to_it(tmp_path, monkeypatch):
    """``--out /dev/stdout`` on a terminal: the bar's redraws on stderr, the same terminal, began answer lines."""
    import fcntl
    import struct
    import sys
    import termios

    from intentvcs.service.batch_predict import Source, predict_local

    data = tmp_path / "in.jsonl"
    data.write_text('{"text": "play some music"}\n{"text": "hi"}\n', encoding="utf-8")
    master, terminal = os.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a bar needs a width
    os.set_blocking(master, False)
    try:
        with open(terminal, "w", closefd=False) as stderr:
            monkeypatch.setattr(sys, "stderr", stderr)
            predict_local(Source.open(data), tmp_path / "out.jsonl", _Echo(), chunk_rows=1)
            stderr.flush()
            shown = os.read(master, 1 << 16).decode()
            predict_local(Source.open(data), os.ttyname(terminal), _Echo(), chunk_rows=1)
            stderr.flush()
            written = os.read(master, 1 << 16).decode()
    finally:
        os.close(master)
        os.close(terminal)
    assert "predict:" in shown, shown
    assert "predict" not in written and written.replace("\r\n", "\n") == '{"text": "play some music"}\n{"text": "hi"}\n'


@pytest.mark.parametrize("content", ['[\n  {"text": "play some music"},\n  {"text": "hi"}\n]\n',
                                     '[{"text": "play some music"}, {"text": "hi"}]\n'])
def test_a_json_array_in_a_json_file_is_named_as_such(content, bundle, tmp_path, capsys):
    """``.json`` is read as JSON Lines; a JSON array, what a .json file most often holds, was "invalid JSON"."""
    data = tmp_path / "in.json"
    data.write_text(content, encoding="utf-8")
    assert predict(bundle, data, tmp_path / "out.jsonl") == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith(f"intentvcs predict: error: {data}:1: ") and "not a JSON array" in err, err


def test_predict_ray_refuses_a_top_k_below_one_before_any_work(tmp_path):
    """As it refuses a bad chunk_rows: it checked top_k only in each actor's first batch, after the cluster
    started and every actor loaded the model, and the actors' ValueError came back as a Ray traceback."""
    from intentvcs.service.batch_predict import Source, predict_ray

    data = tmp_path / "in.jsonl"
    data.write_text('{"text": "play some music"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="^top_k must be >= 1, got 0$"):
        predict_ray(Source.open(data), tmp_path / "out.jsonl", tmp_path / "no-bundle", top_k=0)
