"""``intentvcs predict``: a data file of any size in, the engine's answers out, in order, all or nothing.

- JSONL, CSV and Parquet inputs give exactly ``Engine.predict``'s answers on
  the same texts, one per row, in input order, with the row's id;
- a bad row is exit 2 naming the file and line (row number for Parquet) and
  the reason, and leaves no output and no temporary file, as does any failure;
- the Ray spans of a file, read one after another, are its rows;
- ``--engine ray`` on a real local Ray cluster (2 CPUs, started and shut down
  by the command) writes the same bytes as a local run, and reports a bad row
  as the local engine does, in one line (Ray Data's traceback silenced);
- its tasks get the data file's absolute path (on a real cluster they run in
  the directory of `ray start`), and an address where no cluster listens fails
  in seconds with the command's own error. Ray Data must be installed (the
  ``batch`` extra): without it these tests fail, they do not skip.
"""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

import pytest

from intentvcs.cli import exit_codes
from intentvcs.cli.main import main
from intentvcs.core.dataio import MAX_TEXT_CHARS
from tests.helpers.bundle import make_tiny_bundle

TEXTS = [
    "play some music", "book a table for two tonight", "what's the weather in Paris", "rate this book five stars",
    "find the movie Alien", "wake me up at 7", "crème brûlée recipes near me", "play \"Hey Jude\", then stop",
    "is it going to rain tomorrow", "hi", "set a timer for ten minutes", "turn the lights off please",
]
ROWS = [{"id": f"row-{i}", "text": TEXTS[i % len(TEXTS)] + f" #{i}"} for i in range(30)]
# A row without an id, as every format can have one.
ROWS[4] = {"text": ROWS[4]["text"]}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return make_tiny_bundle(tmp_path_factory.mktemp("predict") / "model")


@pytest.fixture(scope="module")
def engine(bundle):
    from intentvcs.service.engine import Engine

    return Engine(bundle, provider="cpu")


def write_input(folder: Path, kind: str, rows: list[dict], name: str = "in") -> Path:
    path = folder / f"{name}.{kind}"
    if kind == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif kind == "csv":
        with path.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["id", "text", "note"])
            writer.writerows([r.get("id", ""), r["text"], "a note,\non two lines"] for r in rows)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"id": [r.get("id") for r in rows], "text": [r["text"] for r in rows]}), path,
                       row_group_size=7)  # row groups that do not match the chunks
    return path


def expected(engine, rows: list[dict], chunk: int, top_k: int | None = None) -> list[dict]:
    """What the engine answers, called on the same chunks of rows, with each row's id put first."""
    answers = []
    for start in range(0, len(rows), chunk):
        part = rows[start:start + chunk]
        answers += [{"id": r["id"], **a} if "id" in r else a
                    for r, a in zip(part, engine.predict([r["text"] for r in part], top_k))]
    return answers


def read_answers(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def leftovers(folder: Path) -> list[str]:
    """Outputs and temporary files a failed run must not leave."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or p.name.startswith("out"))


def predict(bundle: Path, data: Path, out: Path, *options: str) -> int:
    return main(["predict", "--bundle", str(bundle), "--data", str(data), "--out", str(out), *options])


@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet"])
def test_every_format_gives_the_engines_answers_in_order_with_ids(kind, bundle, engine, tmp_path, capsys):
    data = write_input(tmp_path, kind, ROWS)
    # One chunk holds every row: the answers of a single Engine.predict call.
    assert predict(bundle, data, tmp_path / "out.jsonl") == exit_codes.OK
    assert read_answers(tmp_path / "out.jsonl") == expected(engine, ROWS, len(ROWS))
    summary = json.loads(capsys.readouterr().out)
    assert (summary["rows"], summary["engine"], summary["format"]) == (len(ROWS), "local", kind)
    # Chunks of 7 rows (across Parquet row groups of 7 that start elsewhere), top 2 intents.
    assert predict(bundle, data, tmp_path / "out7.jsonl", "--chunk-rows", "7", "--top-k", "2") == exit_codes.OK
    answers = read_answers(tmp_path / "out7.jsonl")
    assert answers == expected(engine, ROWS, 7, top_k=2)
    assert [a.get("id") for a in answers] == [r.get("id") for r in ROWS] and "id" not in answers[4]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_jsonl_row_needs_only_a_text_and_a_canonical_row_predicts_as_it_is(bundle, engine, tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text('{"text": "play some music"}\n'
                    "\n"  # blank lines are skipped
                    '{"text": "hail me a cab", "labels": ["book_taxi"], "id": "t-2", "meta": {"src": "x"}, '
                    '"spans": [{"start": 8, "end": 13, "label": "vehicle"}]}\n', encoding="utf-8")
    assert predict(bundle, data, tmp_path / "out.jsonl") == exit_codes.OK
    assert read_answers(tmp_path / "out.jsonl") == expected(
        engine, [{"text": "play some music"}, {"id": "t-2", "text": "hail me a cab"}], 2)


GOOD = b'{"text": "play some music"}\n'
TOO_LONG = "a" * (MAX_TEXT_CHARS + 1)
BAD_JSONL = {
    "empty text": (GOOD + b"\n" + b'{"text": "   "}\n', 3, "'text' is empty"),
    "text too long": (GOOD + json.dumps({"text": TOO_LONG}).encode() + b"\n", 2,
                      f"'text' has {MAX_TEXT_CHARS + 1} characters; the limit is {MAX_TEXT_CHARS}"),
    "no text": (b'{"id": "x"}\n', 1, "'text' must be a string"),
    "unknown key": (b'{"txt": "play"}\n', 1, "unknown key(s) ['txt']"),
    "labels not a list": (b'{"text": "play", "labels": "PlayMusic"}\n', 1, "'labels' must be a list"),
    "id not a string": (b'{"text": "play", "id": 7}\n', 1, "'id' must be a string"),
    "invalid JSON": (GOOD * 3 + b'{"text": \n', 4, "invalid JSON"),
    "not an object": (b'["play"]\n', 1, "expected a JSON object"),
    "not UTF-8": (GOOD + b'{"text": "caf\xe9"}\n', 2, "not UTF-8: byte 0xe9 at column 14"),
    "deep nesting": (b'{"text": "hi", "meta": ' + b"[" * 40 + b"]" * 40 + b"}\n", 1, "nested deeper than 32"),
}


@pytest.mark.parametrize("case", sorted(BAD_JSONL))
def test_a_bad_jsonl_row_is_exit_2_with_file_line_and_reason(case, bundle, tmp_path, capsys):
    content, line, reason = BAD_JSONL[case]
    data = tmp_path / "in.jsonl"
    data.write_bytes(content)
    code = predict(bundle, data, tmp_path / "out.jsonl")
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT
    assert err.startswith(f"intentvcs predict: error: {data}:{line}: ") and reason in err, err
    assert "Traceback" not in err and leftovers(tmp_path) == []


def csv_bytes(*records: list[str]) -> bytes:
    import io

    buffer = io.StringIO(newline="")
    csv.writer(buffer).writerows(records)
    return buffer.getvalue().encode("utf-8")


# A header, then two rows whose quoted note spans two lines each: the bad row begins on line 6.
CSV_HEAD = csv_bytes(["id", "text", "note"], ["a", "play music", "x\ny"], ["b", "hi", "x\ny"])
BAD_CSV = {
    "empty text": (CSV_HEAD + csv_bytes(["c", "", "z"]), 6, "'text' is empty"),
    "text too long": (CSV_HEAD + csv_bytes(["c", TOO_LONG, "z"]), 6,
                      f"'text' has {MAX_TEXT_CHARS + 1} characters; the limit is {MAX_TEXT_CHARS}"),
    "missing field": (CSV_HEAD + b"c,play\n", 6, "the row has 2 fields; the header has 3"),
    "not UTF-8": (CSV_HEAD + b"c,caf\xe9,z\n", 6, "not UTF-8: byte 0xe9 at column 6"),
    "no text column": (csv_bytes(["id", "utterance"], ["a", "hi"]), 1, "the header has no column 'text'"),
    "bad quoting": (CSV_HEAD + b'c,"play" music,z\n', 6, "not CSV"),
    # csv gives up at the end of the file; the quote that is never closed is on line 6.
    "unclosed quote": (CSV_HEAD + b'c,"play music,z\nd,hi,z\ne,ho,z\n', 6,
                       "a quoted field begins on this line and is never closed"),
}


@pytest.mark.parametrize("case", sorted(BAD_CSV))
def test_a_bad_csv_row_is_exit_2_with_file_line_and_reason(case, bundle, tmp_path, capsys):
    content, line, reason = BAD_CSV[case]
    data = tmp_path / "in.csv"
    data.write_bytes(content)
    code = predict(bundle, data, tmp_path / "out.jsonl")
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT
    assert err.startswith(f"intentvcs predict: error: {data}:{line}: ") and reason in err, err
    assert leftovers(tmp_path) == []


def test_a_bad_parquet_row_is_exit_2_with_its_row_number(bundle, tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    cases = {
        "null text": (pa.table({"text": ["hi", None]}), "row 2: 'text' is null"),
        "empty text": (pa.table({"text": ["hi"] * 9 + [""]}), "row 10: 'text' is empty"),
        "too long": (pa.table({"text": ["hi", TOO_LONG]}), f"row 2: 'text' has {MAX_TEXT_CHARS + 1} characters"),
        "not strings": (pa.table({"text": [1, 2]}), "column 'text' holds int64, not strings"),
        "no text column": (pa.table({"utterance": ["hi"]}), "no column 'text'"),
    }
    for name, (table, reason) in cases.items():
        data = tmp_path / "in.parquet"
        pq.write_table(table, data, row_group_size=4)
        code = predict(bundle, data, tmp_path / "out.jsonl")
        err = capsys.readouterr().err
        assert code == exit_codes.BAD_INPUT, name
        assert err.startswith(f"intentvcs predict: error: {data}: {reason}"), (name, err)
        assert leftovers(tmp_path) == [], name
    (tmp_path / "in.parquet").write_bytes(b"not parquet at all")
    assert predict(bundle, tmp_path / "in.parquet", tmp_path / "out.jsonl") == exit_codes.BAD_INPUT
    assert "cannot read it as Parquet" in capsys.readouterr().err


def test_other_columns_and_integer_ids(bundle, engine, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path / "in.parquet"
    pq.write_table(pa.table({"n": [10, 11], "utterance": ["play some music", "hi"]}), data)
    assert predict(bundle, data, tmp_path / "out.jsonl", "--text-column", "utterance", "--id-column", "n") == 0
    assert read_answers(tmp_path / "out.jsonl") == expected(engine, [{"id": 10, "text": "play some music"},
                                                                     {"id": 11, "text": "hi"}], 2)


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_an_empty_id_is_no_id_in_every_format(kind, bundle, engine, tmp_path):
    rows = [{"id": "a", "text": "play some music"}, {"id": "", "text": "hi"}]
    data = write_input(tmp_path, kind, rows)
    assert predict(bundle, data, tmp_path / "out.jsonl") == 0
    assert read_answers(tmp_path / "out.jsonl") == expected(engine, [rows[0], {"text": "hi"}], 2)


def test_a_failure_leaves_no_output_and_keeps_the_earlier_one(bundle, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out.jsonl"
    out.write_text("the earlier answers\n")
    # A bad row after two chunks were already written to the temporary file.
    data = write_input(tmp_path, "jsonl", ROWS[:9] + [{"text": ""}])
    assert predict(bundle, data, out, "--chunk-rows", "4") == exit_codes.BAD_INPUT
    assert f"{data}:10: 'text' is empty" in capsys.readouterr().err
    assert out.read_text() == "the earlier answers\n" and leftovers(tmp_path) == ["out.jsonl"]
    # A crash of the engine mid-run: exit 3, and the same.
    from intentvcs.service.engine import Engine

    calls = []
    real = Engine.predict

    def failing(self, texts, top_k=None):
        calls.append(len(texts))
        if len(calls) == 2:
            raise ZeroDivisionError("a bug")
        return real(self, texts, top_k)

    monkeypatch.setattr(Engine, "predict", failing)
    data = write_input(tmp_path, "jsonl", ROWS)
    assert predict(bundle, data, out, "--chunk-rows", "4") == exit_codes.INTERNAL_ERROR
    assert "ZeroDivisionError: a bug" in capsys.readouterr().err
    assert out.read_text() == "the earlier answers\n" and leftovers(tmp_path) == ["out.jsonl"]


def test_bad_invocations_fail_before_the_model_loads(bundle, tmp_path, capsys, monkeypatch):
    from intentvcs.service import engine as engine_module

    monkeypatch.setattr(engine_module.Engine, "__init__", lambda *a, **k: pytest.fail("the model was loaded"))
    data = write_input(tmp_path, "jsonl", ROWS[:3])
    cases = [
        ([str(data), "--out", str(tmp_path)], f"{tmp_path} is a directory"),
        ([str(data), "--out", str(data)], f"the output {data} is the input {data}"),
        ([str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "o.jsonl")], "none.jsonl: file not found"),
        ([str(tmp_path / "in.txt"), "--out", str(tmp_path / "o.jsonl")], "cannot tell the format"),
        ([str(data), "--out", str(tmp_path / "o.jsonl"), "--top-k", "0"], "--top-k must be >= 1"),
        ([str(data), "--out", str(tmp_path / "o.jsonl"), "--workers", "2"], "apply to --engine ray only"),
        ([str(data), "--out", str(tmp_path / "o.jsonl"), "--text-column", "t"], "JSONL rows are canonical"),
    ]
    (tmp_path / "in.txt").write_text("play\n")
    for args, message in cases:
        code = main(["predict", "--bundle", str(bundle), "--data", *args])
        err = capsys.readouterr().err
        assert code == exit_codes.BAD_INPUT and message in err, (args, err)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    monkeypatch.undo()
    assert predict(bundle, empty, tmp_path / "o.jsonl") == exit_codes.BAD_INPUT
    assert f"{empty}: no rows" in capsys.readouterr().err and not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet"])
def test_the_ray_spans_of_a_file_are_its_rows(kind, tmp_path):
    from intentvcs.service.batch_predict import Source, iter_rows, plan_spans

    rows = [{"id": f"r{i}", "text": f"utterance number {i}"} for i in range(23)]
    source = Source.open(write_input(tmp_path, kind, rows))
    if kind == "jsonl":  # blank lines count as lines, not rows
        Path(source.path).write_text("\n" + Path(source.path).read_text().replace("\n", "\n\n", 5))
    spans, total = plan_spans(source, 5)
    assert total == 23 and len(spans) == 5
    assert [row for span in spans for row in iter_rows(source, span)] == list(iter_rows(source)) \
        == [(r["text"], r["id"]) for r in rows]
    assert [len(list(iter_rows(source, span))) for span in spans] == [5, 5, 5, 5, 3]


# --------------------------------------------------------------------------- Ray Data, on a real local cluster
def test_ray_writes_the_same_bytes_as_local_and_shuts_its_cluster_down(bundle, tmp_path, capsys):
    import ray  # the batch extra: a missing Ray fails here, it does not skip

    rows = [{"id": f"r{i}", "text": TEXTS[i % len(TEXTS)] + f" {i}"} for i in range(100)]
    data = write_input(tmp_path, "jsonl", rows)
    options = ("--chunk-rows", "8", "--top-k", "3")  # 13 chunks: both actors work, spans end in order
    assert predict(bundle, data, tmp_path / "out-local.jsonl", *options) == exit_codes.OK
    capsys.readouterr()
    code = predict(bundle, data, tmp_path / "out-ray.jsonl", *options, "--engine", "ray", "--workers", "2")
    captured = capsys.readouterr()
    assert code == exit_codes.OK, captured.err[-3000:]
    assert not ray.is_initialized()  # the command's own cluster is gone
    summary = json.loads(captured.out)
    assert (summary["engine"], summary["rows"], summary["workers"]) == ("ray", 100, 2)
    assert (tmp_path / "out-ray.jsonl").read_bytes() == (tmp_path / "out-local.jsonl").read_bytes()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_ray_starts_no_more_actors_than_chunks_of_rows(bundle, tmp_path, capfd, recwarn):
    """Ten rows are one chunk: a second actor loaded the model and never answered (and Ray Data warned of
    it)."""
    rows = [{"id": f"r{i}", "text": TEXTS[i % len(TEXTS)]} for i in range(10)]
    data = write_input(tmp_path, "jsonl", rows)
    code = predict(bundle, data, tmp_path / "out.jsonl", "--engine", "ray", "--workers", "2")
    captured = capfd.readouterr()
    assert code == exit_codes.OK, captured.err[-3000:]
    assert json.loads(captured.out)["workers"] == 1
    assert not [w for w in recwarn if "concurrent actors" in str(w.message)]


def test_ray_reports_a_bad_row_as_local_does_and_leaves_nothing(bundle, tmp_path, capfd, monkeypatch):
    """In one line, under the path as given (here relative), without Ray Data's traceback of the failed task."""
    import ray

    rows = [[f"r{i}", f"utterance {i}", "a note\non two lines"] for i in range(40)]
    rows[33][1] = ""  # a row of a later span, on line 2 + 33 * 2 = 68
    (tmp_path / "in.csv").write_bytes(csv_bytes(["id", "text", "note"], *rows))
    monkeypatch.chdir(tmp_path)
    code = predict(bundle, Path("in.csv"), tmp_path / "out.jsonl", "--chunk-rows", "4", "--engine", "ray",
                   "--workers", "2")
    err = capfd.readouterr().err  # what reaches the terminal: Ray's own log lines included
    assert not ray.is_initialized()
    assert code == exit_codes.BAD_INPUT, err[-3000:]
    assert err.endswith("intentvcs predict: error: in.csv:68: 'text' is empty\n"), err[-3000:]
    assert "Traceback" not in err and len(err.splitlines()) <= 3, err[-3000:]
    assert leftovers(tmp_path) == []


def test_ray_tasks_read_the_data_file_by_its_absolute_path(bundle, tmp_path, monkeypatch):
    """On a cluster a task runs where `ray start` ran, not here: a relative --data must reach it absolute."""
    import ray

    from intentvcs.service import batch_predict

    class Planned(Exception):
        pass

    seen = {}

    def answers_dataset(ray, source, spans, chunk_rows, engine, *args):
        seen.update(source=source, bundle=engine["bundle"])
        raise Planned

    write_input(tmp_path, "csv", ROWS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(batch_predict, "_ray_init", lambda *args: None)  # no cluster: the plan is what is checked
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    monkeypatch.setattr(batch_predict, "_answers_dataset", answers_dataset)
    source = batch_predict.Source.open("in.csv")
    with pytest.raises(Planned):
        batch_predict.predict_ray(source, "out.jsonl", bundle, workers=1)
    assert source.path == "in.csv" and seen["source"] == replace(source, path=str((tmp_path / "in.csv").resolve()))
    assert Path(seen["bundle"]).is_absolute()


def test_a_ray_address_where_nothing_listens_fails_in_seconds(bundle, tmp_path, capsys):
    """Not minutes of Ray's GCS warnings: the address is tried first, and named in a one-line error."""
    import socket
    import time

    import ray

    data = write_input(tmp_path, "jsonl", ROWS[:3])
    with socket.socket() as closed:  # bound, never listening: connections to it are refused
        closed.bind(("0.0.0.0", 0))
        address = f"127.0.0.1:{closed.getsockname()[1]}"
        began = time.monotonic()
        code = predict(bundle, data, tmp_path / "out.jsonl", "--engine", "ray", "--ray-address", address)
        took = time.monotonic() - began
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT and took < 15, (took, err[-3000:])
    assert err.startswith(f"intentvcs predict: error: cannot connect to the Ray cluster at {address}: "), err
    assert len(err.splitlines()) == 1 and not ray.is_initialized() and leftovers(tmp_path) == []
