"""Batch prediction (``intentvcs predict``, local and Ray, ``intentvcs.service.batch_predict``): the input
files it reads, the Ray run's plan, cluster and signals, and the answer lines it writes. Defects reproduced,
then fixed:

- a CSV written with a byte-order mark and a quoted header (R's write.csv, pandas with
  ``quoting=QUOTE_ALL`` and ``encoding="utf-8-sig"``, spreadsheet exports) keeps its columns:
  the mark used to sit before the quote, so the first column was read as ``'"id"'`` (its ids
  silently dropped) or, for the text column, refused as missing;
- SIGTERM during ``--engine ray`` ends the command as it does locally (exit 143, "terminated"),
  not with the exit status Ray's own SIGTERM handler, installed by ``ray.init``, chose;
- a JSONL file whose first line is a byte-order mark alone: the reader skips it as blank, the Ray
  planner counted it as a row, so the spans were cut one row off the local chunks and a file of
  nothing else ran on Ray to an empty output with exit 0 (locally: "no rows", exit 2); the writer
  now also refuses to publish fewer answers than the plan counted rows;
- ``RAY_ADDRESS`` in the environment (set on many Ray nodes) made ``ray.init`` join that cluster
  where the command documents a local one without ``--ray-address``, and fail on the CPU count
  it passes for a local cluster ("cannot start a local Ray cluster: When connecting to an
  existing cluster, num_cpus ... must not be provided");
- the Ray actors ran outside the package's thread policy: on a cluster not started by the
  command, numpy is imported before ``intentvcs`` in a Ray worker, so OpenBLAS took
  ``OMP_NUM_THREADS`` (= the actor's CPUs) threads, and the tokenizer's Rayon pool took every
  core of the node in every actor; the actor pool now starts with ``OPENBLAS_NUM_THREADS=1`` and
  ``RAYON_NUM_THREADS`` = its CPUs;
- a CSV header (or a Parquet schema) naming the text or id column twice predicted the first and dropped the
  other without a word (the team CSV reader refuses it); a ';'- or tab-separated CSV was refused with
  advice to give --text-column (which would predict whole lines) instead of the reason;
- an answer line held a text's U+2028, U+2029 or U+0085 raw: valid JSON, but a line break to
  ``str.splitlines`` and to readers built on it, so one row read back as two broken lines.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from intentvcs.cli import exit_codes
from intentvcs.cli.main import main
from tests.helpers.bundle import make_tiny_bundle

BOM = b"\xef\xbb\xbf"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return make_tiny_bundle(tmp_path_factory.mktemp("batch") / "model")


def predict(bundle: Path, data: Path, out: Path, *options: str) -> int:
    return main(["predict", "--bundle", str(bundle), "--data", str(data), "--out", str(out), *options])


def read_answers(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or p.name.startswith("out"))


# --------------------------------------------------------------------------- CSV byte-order mark, signals, pipes, ids
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


# --------------------------------------------------------------------------- the Ray plan counts the reader's rows
def test_a_bom_alone_on_the_first_line_is_a_blank_line_to_the_ray_planner_too(tmp_path):
    from intentvcs.service.batch_predict import Source, iter_rows, plan_spans

    data = tmp_path / "in.jsonl"
    data.write_bytes(BOM + b"\n" + b"".join(json.dumps({"text": f"play song {i}"}).encode() + b"\n"
                                            for i in range(10)))
    source = Source.open(data)
    spans, total = plan_spans(source, 4)
    assert total == 10
    # Each span is a whole chunk of the local run: rows 0-3, 4-7, 8-9.
    assert [len(list(iter_rows(source, span))) for span in spans] == [4, 4, 2]


def test_a_file_of_a_bom_alone_is_no_rows_on_ray_as_locally(bundle, tmp_path, capsys):
    import ray

    data = tmp_path / "in.jsonl"
    data.write_bytes(BOM + b"\n\n")
    assert predict(bundle, data, tmp_path / "out.jsonl") == exit_codes.BAD_INPUT
    assert f"{data}: no rows" in capsys.readouterr().err
    code = predict(bundle, data, tmp_path / "out.jsonl", "--engine", "ray", "--workers", "1")
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT and f"{data}: no rows" in err, err[-2000:]
    assert not ray.is_initialized() and leftovers(tmp_path) == []


class _Answers:
    """A stand-in for the Ray pipeline's answers: blocks of answer lines."""

    def __init__(self, *blocks: list[str]):
        self.blocks = blocks

    def iter_batches(self, **_):
        import pyarrow as pa

        for block in self.blocks:
            yield pa.table({"answer": pa.array(block, pa.large_string())})


def test_ray_answers_fewer_than_the_planned_rows_are_not_published(tmp_path):
    from intentvcs.service.batch_predict import _write_answers

    out = tmp_path / "out.jsonl"
    out.write_text("the earlier answers\n")
    with pytest.raises(RuntimeError, match="2 answers for 3 rows"):
        _write_answers(_Answers(['{"a": 1}'], ['{"a": 2}']), out, 3, progress=False)
    assert out.read_text() == "the earlier answers\n" and leftovers(tmp_path) == ["out.jsonl"]
    assert _write_answers(_Answers(['{"a": 1}'], ['{"a": 2}']), out, 2, progress=False) == 2
    assert out.read_text() == '{"a": 1}\n{"a": 2}\n'


# --------------------------------------------------------------------------- Ray: the cluster the docs promise
def test_without_ray_address_a_local_cluster_runs_even_when_RAY_ADDRESS_is_set(bundle, tmp_path, capsys,
                                                                               monkeypatch):
    """Documented: without --ray-address a local cluster is started for the run (and shut down after)."""
    import ray

    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "text": f"play song number {i}"}) + "\n" for i in range(6)))
    assert predict(bundle, data, tmp_path / "out-local.jsonl") == exit_codes.OK
    capsys.readouterr()
    with socket.socket() as closed:  # bound, never listening: no cluster there
        closed.bind(("127.0.0.1", 0))
        monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{closed.getsockname()[1]}")
        code = predict(bundle, data, tmp_path / "out-ray.jsonl", "--engine", "ray", "--workers", "1")
    captured = capsys.readouterr()
    assert code == exit_codes.OK, captured.err[-2000:]
    assert json.loads(captured.out)["ray_address"] is None and not ray.is_initialized()
    assert (tmp_path / "out-ray.jsonl").read_bytes() == (tmp_path / "out-local.jsonl").read_bytes()


def test_the_actor_pool_starts_under_the_thread_policy(tmp_path):
    """OpenBLAS one thread, the tokenizer's Rayon pool the actor's CPUs: set in the actors' environment when
    their process starts (numpy is loaded in a Ray worker before intentvcs is imported)."""
    from intentvcs.service import batch_predict

    calls = []

    class Dataset:
        def map_batches(self, fn, **kwargs):
            calls.append((fn, kwargs))
            return self

    fake_ray = SimpleNamespace(
        get_runtime_context=lambda: SimpleNamespace(get_node_id=lambda: "node-1"),
        data=SimpleNamespace(from_items=lambda items, **_: Dataset(), TaskPoolStrategy=lambda size: ("tasks", size),
                             ActorPoolStrategy=lambda size: ("actors", size)))
    source = batch_predict.Source("/data/in.jsonl", "jsonl")
    for cpus in (1, 3):
        calls.clear()
        batch_predict._answers_dataset(fake_ray, source, [batch_predict.Span(0, None, 1)], 8, {}, 2, cpus, False)
        ((_, read), (predictor, actors)) = calls
        assert predictor is batch_predict.RayPredictor and actors["num_cpus"] == cpus
        env = actors["runtime_env"]["env_vars"]
        assert env["OPENBLAS_NUM_THREADS"] == "1" and env["RAYON_NUM_THREADS"] == str(cpus), env


# --------------------------------------------------------------------------- CSV headers and Parquet schemas
def write_table(path: Path, names: list[str], row: list[str]) -> Path:
    """One row under the columns ``names``: a CSV file or a Parquet file, by the path's suffix."""
    if path.suffix == ".csv":
        path.write_text(",".join(names) + "\n" + ",".join(row) + "\n", encoding="utf-8")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_arrays([pa.array([cell]) for cell in row], names=names), path)
    return path


@pytest.mark.parametrize("suffix, names, column", [
    pytest.param("csv", ["id", "text", "text"], "text", id="csv-text"),
    pytest.param("csv", ["id", "text", "id"], "id", id="csv-id"),
    pytest.param("parquet", ["text", "text"], "text", id="parquet-text"),
    pytest.param("parquet", ["id", "text", "id"], "id", id="parquet-id"),
])
def test_a_file_naming_a_column_it_reads_twice_is_refused(suffix, names, column, bundle, tmp_path, capsys):
    """A CSV header or a Parquet schema naming the text or id column twice. The Parquet case was an internal
    error (exit 3, a traceback ending in "Column text does not exist in schema")."""
    data = write_table(tmp_path / f"in.{suffix}", names, [f"play song {i}" for i in range(len(names))])
    assert predict(bundle, data, tmp_path / "out.jsonl") == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    where = {"csv": ":1: the header", "parquet": ": the schema"}[suffix]
    assert err.startswith(f"intentvcs predict: error: {data}{where} names the {column!r} column more "
                          "than once"), err
    assert leftovers(tmp_path) == []
    # Another column twice is no ambiguity: only the text and id columns are read.
    write_table(data, ["id", "text", "note", "note"], ["1", "play some music", "a", "b"])
    assert predict(bundle, data, tmp_path / "out.jsonl") == exit_codes.OK


@pytest.mark.parametrize("separator, named", [(";", "';'"), ("\t", "tabs")])
def test_a_csv_separated_by_another_character_is_refused_as_such(separator, named, bundle, tmp_path, capsys):
    data = tmp_path / "in.csv"
    data.write_text(f"id{separator}text\n1{separator}play some music\n", encoding="utf-8")
    assert predict(bundle, data, tmp_path / "out.jsonl") == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith(f"intentvcs predict: error: {data}:1: the header has no column 'text'"), err
    assert f"seems to separate its columns with {named}" in err and "give --text-column" not in err, err


# --------------------------------------------------------------------------- one answer, one line
def test_an_answer_line_holds_no_character_that_splitlines_breaks_on(bundle, tmp_path, capsys):
    texts = ["play\u2028some music", "book a table\u2029for two", "what's the weather\x85in Paris", "hi"]
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "text": t}) + "\n" for i, t in enumerate(texts)),
                    encoding="utf-8")
    assert predict(bundle, data, tmp_path / "out.jsonl") == exit_codes.OK, capsys.readouterr().err
    lines = (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(texts)
    assert [json.loads(line)["text"] for line in lines] == texts


def test_a_csv_header_with_spaces_after_its_commas_names_its_columns(bundle, tmp_path):
    # "text, id" named a column " id": the optional id column was not found and every id dropped without a
    # word. Header names are read stripped, as the team CSV reader reads its own.
    data = tmp_path / "in.csv"
    data.write_text("text, id\nplay some music,a7\nturn off the lights,b8\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert predict(bundle, data, out) == exit_codes.OK
    assert [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()] == ["a7", "b8"]
