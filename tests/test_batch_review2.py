"""Second review of batch prediction (``intentvcs predict``, local and Ray): defects reproduced, then fixed.

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
- a CSV header naming the text or id column twice predicted the first and dropped the other
  without a word (the team CSV reader refuses it); a ';'- or tab-separated CSV was refused with
  advice to give --text-column (which would predict whole lines) instead of the reason;
- an answer line held a text's U+2028, U+2029 or U+0085 raw: valid JSON, but a line break to
  ``str.splitlines`` and to readers built on it, so one row read back as two broken lines.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from types import SimpleNamespace

import pytest

from intentvcs.cli import exit_codes
from tests.helpers.bundle import make_tiny_bundle
from tests.test_batch_deploy_review import BOM, predict


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return make_tiny_bundle(tmp_path_factory.mktemp("review2") / "model")


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or p.name.startswith("out"))


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


# --------------------------------------------------------------------------- CSV headers
@pytest.mark.parametrize("header, column", [("id,text,text", "text"), ("id,text,id", "id")])
def test_a_csv_header_naming_a_column_it_reads_twice_is_refused(header, column, bundle, tmp_path, capsys):
    data = tmp_path / "in.csv"
    data.write_text(f"{header}\n1,play some music,2\n", encoding="utf-8")
    assert predict(bundle, data, tmp_path / "out.jsonl") == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith(f"intentvcs predict: error: {data}:1: the header names the {column!r} column more "
                          "than once"), err
    assert leftovers(tmp_path) == []
    # Another column twice is no ambiguity: only the text and id columns are read.
    data.write_text("id,text,note,note\n1,play some music,a,b\n", encoding="utf-8")
    assert predict(bundle, data, tmp_path / "out.jsonl") == exit_codes.OK


@pytest.mark.parametrize("names, column", [(["text", "text"], "text"), (["id", "text", "id"], "id")])
def test_a_parquet_schema_naming_a_column_it_reads_twice_is_refused(names, column, bundle, tmp_path, capsys):
    """Was an internal error (exit 3, a traceback ending in "Column text does not exist in schema")."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array([f"play song {i}"]) for i in range(len(names))], names=names),
                   data)
    assert predict(bundle, data, tmp_path / "out.jsonl") == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith(f"intentvcs predict: error: {data}: the schema names the {column!r} column more "
                          "than once"), err
    assert leftovers(tmp_path) == []


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
