"""Review of batch prediction and the deployable stack: defects reproduced, then fixed.

- a CSV written with a byte-order mark and a quoted header (R's write.csv, pandas with
  ``quoting=QUOTE_ALL`` and ``encoding="utf-8-sig"``, spreadsheet exports) keeps its columns:
  the mark used to sit before the quote, so the first column was read as ``'"id"'`` (its ids
  silently dropped) or, for the text column, refused as missing;
- SIGTERM during ``--engine ray`` ends the command as it does locally (exit 143, "terminated"),
  not with the exit status Ray's own SIGTERM handler, installed by ``ray.init``, chose.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest

from intentvcs.cli import exit_codes
from intentvcs.cli.main import main
from tests.helpers.bundle import make_tiny_bundle

BOM = b"\xef\xbb\xbf"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return make_tiny_bundle(tmp_path_factory.mktemp("review") / "model")


def predict(bundle: Path, data: Path, out: Path, *options: str) -> int:
    return main(["predict", "--bundle", str(bundle), "--data", str(data), "--out", str(out), *options])


def read_answers(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("header", [b'"id","text"', b'"text","id"'])
def test_a_csv_with_a_byte_order_mark_and_a_quoted_header_keeps_its_columns(header, bundle, tmp_path, capsys):
    from intentvcs.service.batch_predict import Source, iter_rows

    rows = [("a", "play some music"), ("b", "book a table")]
    first_is_id = header.startswith(b'"id"')
    body = b"".join((f"{i},{t}\n" if first_is_id else f"{t},{i}\n").encode() for i, t in rows)
    data = tmp_path / "in.csv"
    data.write_bytes(BOM + header + b"\n" + body)
    source = Source.open(data)
    assert set(source.header) == {"id", "text"} and source.id_column == "id", source.header
    assert list(iter_rows(source)) == [(t, i) for i, t in rows]
    assert predict(bundle, data, tmp_path / "out.jsonl") == exit_codes.OK, capsys.readouterr().err
    assert [a.get("id") for a in read_answers(tmp_path / "out.jsonl")] == ["a", "b"]


def test_sigterm_during_a_ray_run_exits_143_and_leaves_nothing(bundle, tmp_path, capsys, monkeypatch):
    """ray.init installs its own SIGTERM handler (sys.exit(15)); the command's must be the one that runs."""
    import ray

    from intentvcs.service import batch_predict

    assert threading.current_thread() is threading.main_thread()
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"text": f"play song {i}"}) + "\n" for i in range(20)), encoding="utf-8")
    real = batch_predict._write_answers
    seen = {}

    def write_then_terminated(answers, out, *args, **kwargs):
        def on_first_block(handle, lines, write=batch_predict._write):
            write(handle, lines)
            handler = signal.getsignal(signal.SIGTERM)
            seen["handler"] = getattr(handler, "__qualname__", repr(handler))
            if handler in (signal.SIG_DFL, signal.SIG_IGN, None):
                pytest.fail(f"no Python SIGTERM handler ({handler}): the signal would end pytest")
            os.kill(os.getpid(), signal.SIGTERM)  # a scheduler stopping the job mid-run

        monkeypatch.setattr(batch_predict, "_write", on_first_block)
        return real(answers, out, *args, **kwargs)

    monkeypatch.setattr(batch_predict, "_write_answers", write_then_terminated)
    try:
        code = predict(bundle, data, tmp_path / "out.jsonl", "--engine", "ray", "--workers", "1",
                       "--chunk-rows", "4")
    except SystemExit as exc:  # Ray's handler
        code = ("SystemExit", exc.code)
    err = capsys.readouterr().err
    assert not ray.is_initialized()
    assert code == exit_codes.TERMINATED, (code, seen, err[-2000:])
    assert err.rstrip().endswith("intentvcs predict: terminated (SIGTERM)"), err[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_a_pipe_as_data_is_named_as_such_not_as_a_missing_file(bundle, tmp_path, capsys):
    """`--data <(zcat in.jsonl.gz)` gives /dev/fd/63, a pipe: it exists; rows are read by byte offset."""
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    assert predict(bundle, fifo, tmp_path / "out.jsonl") == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert f"{fifo}: not a regular file" in err and "not found" not in err, err
    assert predict(bundle, tmp_path / "none.jsonl", tmp_path / "out.jsonl") == exit_codes.BAD_INPUT
    assert f"{tmp_path / 'none.jsonl'}: file not found" in capsys.readouterr().err


def test_ray_writes_unsigned_64_bit_parquet_ids_as_local_does(bundle, tmp_path, capsys):
    """uint64 ids past int64's range (hashes, warehouse keys): the Ray read tasks made them int64 and crashed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": pa.array([2**63 + 5, 7, 2**64 - 1], pa.uint64()),
                             "text": ["play some music", "hi", "book a table"]}), data)
    assert predict(bundle, data, tmp_path / "local.jsonl") == exit_codes.OK
    assert [a["id"] for a in read_answers(tmp_path / "local.jsonl")] == [2**63 + 5, 7, 2**64 - 1]
    capsys.readouterr()
    code = predict(bundle, data, tmp_path / "ray.jsonl", "--engine", "ray", "--workers", "1")
    err = capsys.readouterr().err
    assert code == exit_codes.OK, err[-3000:]
    assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()


def test_an_id_column_given_by_name_must_be_there(bundle, tmp_path, capsys):
    """`--id-column ident` on a file without it answered every row without its id, without a word; the
    default, id, stays optional."""
    data = tmp_path / "noid.csv"
    data.write_text("text\nhello there\n", encoding="utf-8")
    assert predict(bundle, data, tmp_path / "out.jsonl", "--id-column", "ident") == exit_codes.BAD_INPUT
    assert "no column 'ident' (it has ['text'])" in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()
    assert predict(bundle, data, tmp_path / "out.jsonl") == exit_codes.OK
