"""Batch prediction: a data file of any size in, one JSONL answer per row out, through the serving engine.

``predict_local`` (one process) and ``predict_ray`` (Ray Data) stream the rows
of a JSONL, CSV or Parquet file in chunks of ``chunk_rows``, predict each chunk
with ``intentvcs.service.engine.Engine`` and write the answers, in input order,
to a temporary sibling of the output that is renamed into place at the end: a
failed run leaves no output and no temporary file. Memory stays flat: a chunk
of rows and its answers at a time, never the whole file.

Rows (``Source``):
  JSONL    one object per line, checked with the canonical format's rules
           (``intentvcs.core.dataio``: UTF-8, JSON, known keys only, the text
           limits, spans inside the text) except that ``labels`` may be left
           out: ``{"text": ...}`` with an optional ``id`` is a row, and a
           labelled data set predicts as it is. Blank lines are skipped.
  CSV      UTF-8 (a byte-order mark is allowed), comma-separated (a header of
           one column holding ';' or tabs is refused as such), with a header that
           names the text column and, optionally, the id column, each once; a
           quoted field may span lines. Blank lines are skipped; an empty id cell
           is no id.
  Parquet  a string text column and, optionally, a string or integer id
           column, read one record batch at a time.
A text must be a non-empty string of at most ``MAX_TEXT_CHARS`` characters. A
bad row raises ``DataError`` naming the file and the line where the row begins
(JSONL, CSV: ``in.csv:7: ...``) or its row number (Parquet:
``in.parquet: row 7: ...``), and the reason. A file without rows is an error too.

Answers: one JSON object per input row, in input order: ``Engine.predict``'s
answer, preceded by the row's ``"id"`` when it has one (``answer_lines``, the
one place where a chunk of rows becomes answers, for both engines), on one line
to every reader (U+0085, U+2028 and U+2029 escaped).

Chunks hold rows ``k * chunk_rows`` to ``(k + 1) * chunk_rows - 1`` of the file
under both engines, and a chunk is one ``Engine.predict`` call (the engine
sorts it by length into graph runs of ``max_batch`` texts), so the two engines
write the same answers, byte for byte.

Ray (``predict_ray``): a quick scan in the driver cuts the file into spans of
whole chunks (byte ranges of lines or records; row ranges of Parquet); one
read task at a time, pinned to the driver's node (only that node needs the
input file), streams a span's rows through the same reader; a fixed pool of
actors (no more than there are chunks), each holding one ``Engine`` (``map_batches`` with a callable class),
predicts the chunks; the driver writes the answers in order, and publishes
them only when they are as many as the scan counted rows. Each actor's process
starts with one OpenBLAS thread and a tokenizer pool of its CPUs
(``actor_env``). ``address=None`` starts a local cluster of ``workers *
cpus_per_worker`` CPUs (``workers`` unset: this machine's cores, rounded down to
whole actors), and with ``provider="cuda"`` the GPUs Ray finds, that is shut
down at the end, whatever ``$RAY_ADDRESS`` or a ``ray start`` on this machine
would have ``ray.init`` join; an address (``"auto"``, ``"HOST:PORT"``) joins a
running cluster, whose every node needs intentvcs installed and the bundle at
the same path. An actor runs on one node: a cluster none of whose live nodes
has ``cpus_per_worker`` CPUs (and, with ``"cuda"``, a GPU) is refused before
any work (Ray Data would wait for that actor forever), and the pool has no
more actors than the nodes can host at once.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Sequence

from intentvcs.core import atomic
from intentvcs.core.csv_records import records
from intentvcs.core.dataio import DataError, decode_line, decode_utf8, parse_row, text_problem, without_bom
from intentvcs.core.team_formats import delimiter_hint  # the team CSV reader's words for a ';' or tab file
from intentvcs.service.settings import (DEFAULT_MAX_BATCH, DEFAULT_QUANTIZED, DEFAULT_SEGMENT, PROVIDERS,
                                        usable_cores)

FORMATS = {"jsonl": (".jsonl", ".ndjson", ".json"), "csv": (".csv",), "parquet": (".parquet", ".pq")}
DEFAULT_CHUNK_ROWS = 1024  # rows per Engine.predict call: read, predicted and written together
DEFAULT_CPUS_PER_WORKER = 1  # a Ray actor's CPUs, its ONNX Runtime threads
# Chunks per Ray read task. A task's output becomes one block and an actor
# takes a block whole, so one-chunk blocks share the work out evenly to the end.
SPAN_CHUNKS = 1
PARQUET_BATCH_ROWS = 4096  # rows per Parquet record batch read
RAY_EXTRA = "pip install 'intentvcs[batch]'"


@dataclass(frozen=True)
class Span:
    """A run of whole rows of the file: where it starts, where it stops, the number of its first line."""

    start: int  # byte offset of its first line or record (JSONL, CSV), index of its first row (Parquet)
    stop: int | None  # byte offset or row index where it ends; None: the end of the file
    line: int  # number of the line where it starts (JSONL, CSV); unused for Parquet


@dataclass(frozen=True)
class Source:
    """An input file, its format and columns; ``Source.open`` checks the file, header or schema.

    Small and picklable: Ray read tasks get it as it is.
    """

    path: str
    format: str
    text_column: str = "text"
    id_column: str | None = "id"  # None: the file has no id column
    id_type: str = "string"  # "string", "int64" (Parquet integer ids) or "uint64" (unsigned 64-bit ones)
    header: tuple[str, ...] = ()  # CSV: the columns
    body: Span = Span(0, None, 1)  # the rows: after a CSV header, the whole file otherwise
    rows: int | None = None  # known before reading: Parquet

    @classmethod
    def open(cls, path: str | os.PathLike, format: str | None = None, text_column: str = "text",
             id_column: str = "id") -> "Source":
        path = str(path)
        if Path(path).is_dir():
            raise DataError(path, None, "is a directory, not a data file")
        if not Path(path).is_file():
            # A pipe (`--data <(zcat in.jsonl.gz)`) exists but cannot be read from a byte offset, as rows are.
            raise DataError(path, None, "not a regular file (a pipe or a device): predict reads its rows from a "
                                        "file on disk; write them to one first" if Path(path).exists()
                            else "file not found")
        format = format or format_of(path)
        if format not in FORMATS:
            raise ValueError(f"format must be one of {list(FORMATS)}, got {format!r}")
        if format == "jsonl":
            if (text_column, id_column) != ("text", "id"):
                raise ValueError("JSONL rows are canonical rows: their text is 'text' and their id 'id' "
                                 "(--text-column and --id-column are for CSV and Parquet)")
            return cls(path, format)
        if format == "csv":
            return _open_csv(cls(path, format, text_column, id_column))
        return _open_parquet(cls(path, format, text_column, id_column))


def format_of(path: str | os.PathLike) -> str:
    """The format a file's suffix names; ``ValueError`` for another suffix."""
    suffix = Path(path).suffix.lower()
    for name, suffixes in FORMATS.items():
        if suffix in suffixes:
            return name
    # Name what --format accepts: "give --format" alone reads as if any format (YAML, say) could be given.
    formats = [f"{name} ({', '.join(suffixes)})" for name, suffixes in FORMATS.items()]
    known = f"{', '.join(formats[:-1])} or {formats[-1]}"
    raise ValueError(f"{path}: cannot tell the format from the suffix {suffix!r}: predict reads {known}; "
                     "convert the file to one of them, or, if it is one under another suffix, give --format")


# --------------------------------------------------------------------------- reading rows


def iter_rows(source: Source, span: Span | None = None) -> Iterator[tuple[str, Any]]:
    """``(text, id)`` of every row of ``span`` (default: the whole file), checked, in file order."""
    span = span or source.body
    if source.format == "jsonl":
        return _jsonl_rows(source.path, span)
    if source.format == "csv":
        return _csv_rows(source, span)
    return _parquet_rows(source, span)


def iter_chunks(rows: Iterable[tuple[str, Any]], size: int) -> Iterator[tuple[list[str], list[Any]]]:
    """``(texts, ids)`` of ``size`` rows at a time (the last may be shorter)."""
    texts: list[str] = []
    ids: list[Any] = []
    for text, ident in rows:
        texts.append(text)
        ids.append(ident)
        if len(texts) == size:
            yield texts, ids
            texts, ids = [], []
    if texts:
        yield texts, ids


def _jsonl_rows(path: str, span: Span) -> Iterator[tuple[str, Any]]:
    with open(path, "rb") as handle:
        handle.seek(span.start)
        position, number = span.start, span.line - 1
        for raw in handle:
            if span.stop is not None and position >= span.stop:
                return
            position += len(raw)
            number += 1
            row = _jsonl_row(path, number, raw)
            if row is not None:
                yield row


def _jsonl_row(path: str, number: int, raw: bytes) -> tuple[str, Any] | None:
    """The row on one line, None for a blank line; ``DataError`` as ``dataio.iter_jsonl`` words it."""
    try:
        obj = decode_line(path, number, raw)
        if obj is None:
            return None
        example = parse_row(obj, require_labels=False)  # a prediction needs only the text
    except ValueError as exc:
        reason = exc.reason if isinstance(exc, DataError) else str(exc)
        if without_bom(number, raw.decode("utf-8", "replace")).lstrip().startswith("["):
            # A .json file (a suffix read as JSON Lines) most often holds one JSON array: "invalid JSON" on its
            # "[" line, or "expected a JSON object", read as if the file were broken.
            reason += ("; predict reads JSON Lines, one object per line, not a JSON array: write each row on a line "
                       "of its own")
        raise DataError(path, number, reason) from None
    return example.text, example.id


def _blank_line(number: int, raw: bytes) -> bool:
    """Whether line ``number`` of a JSONL file (``raw`` bytes) is blank to ``decode_line``, which skips it: the
    Ray planner's test, which must count the rows the reader yields (a first line holding only a byte-order
    mark is blank), without the reader's checks (a line that is not UTF-8 fails in the reader, as it should)."""
    return not raw.strip() or not without_bom(number, raw.decode("utf-8", "replace")).strip()


def _text_problem(text: Any, column: str) -> str | None:
    """Why a CSV or Parquet text cannot be predicted (the canonical format's words), or None."""
    return f"{column!r} is null" if text is None else text_problem(text, repr(column))


class _Lines:
    """The decoded lines of a binary file from a byte offset up to a stop, counting lines and bytes.

    ``csv.reader`` pulls one line at a time and never reads ahead, so after
    each record ``position`` is the byte offset where the next one begins;
    ``record`` keeps the lines of the record being read, for the error of a
    broken one (``intentvcs.core.csv_fault``).
    """

    def __init__(self, handle: IO[bytes], path: str, span: Span):
        handle.seek(span.start)
        self.handle, self.path, self.stop = handle, path, span.stop
        self.position, self.line, self.record = span.start, span.line - 1, []

    def __iter__(self) -> "_Lines":
        return self

    def __next__(self) -> str:
        if self.stop is not None and self.position >= self.stop:
            raise StopIteration
        raw = self.handle.readline()
        if not raw:
            raise StopIteration
        at_start = self.position == 0
        self.position += len(raw)
        self.line += 1
        text = decode_utf8(self.path, self.line, raw)
        if at_start:
            # A byte-order mark, dropped before the CSV reader sees it: left in, it comes before the
            # quote of a quoted first column ('\ufeff"id"'), which then keeps its quotes.
            text = text.removeprefix("\ufeff")
        self.record.append(text)
        return text


def _open_csv(source: Source) -> Source:
    with open(source.path, "rb") as handle:
        lines = _Lines(handle, source.path, Span(0, None, 1))
        header = next((record for _, record in records(source.path, lines)), None)
        if header is None:
            raise DataError(source.path, None, "no rows (not even a header)")
        # "text, id" names " id" as written: read stripped, as the team CSV reader reads its header.
        header = [name.strip() for name in header]
        if source.text_column not in header:
            # A file separated by ';' or tabs is one column to this reader: say so, rather than advise a
            # --text-column that would predict whole lines.
            raise DataError(source.path, lines.line, f"the header has no column {source.text_column!r} "
                                                     f"(it has {header})"
                                                     f"{delimiter_hint(header) or '; give --text-column'}")
        id_column = _id_column(source, header, lines.line)
        repeated = [name for name in dict.fromkeys((source.text_column, id_column)) if header.count(name) > 1]
        if repeated:
            # Which of the two cells is a row's text (or id) would be a guess; the team CSV reader refuses it too.
            raise DataError(source.path, lines.line, f"the header names the {' and '.join(map(repr, repeated))} "
                                                     "column more than once: which one holds the rows' values is "
                                                     "unclear")
        return replace(source, header=tuple(header), body=Span(lines.position, None, lines.line + 1),
                       id_column=id_column)


def _id_column(source: Source, columns: Sequence[str], line: int | None) -> str | None:
    """The id column, None where the file has none; a column named other than the default must be there
    (a mistyped --id-column dropped every id without a word)."""
    if source.id_column in columns:
        return source.id_column
    if source.id_column != Source.id_column:
        raise DataError(source.path, line, f"no column {source.id_column!r} (it has {list(columns)}); give the id "
                                           "column's name as --id-column, or leave it out")
    return None


def _csv_rows(source: Source, span: Span) -> Iterator[tuple[str, Any]]:
    width, text_at = len(source.header), source.header.index(source.text_column)
    id_at = source.header.index(source.id_column) if source.id_column else None
    with open(source.path, "rb") as handle:
        for line, record in records(source.path, _Lines(handle, source.path, span)):
            if len(record) != width:
                raise DataError(source.path, line, f"the row has {len(record)} fields; the header has {width}")
            text = record[text_at]
            problem = _text_problem(text, source.text_column)
            if problem:
                raise DataError(source.path, line, problem)
            yield text, (record[id_at] or None) if id_at is not None else None


def _parquet_file(path: str):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError(f"reading Parquet needs pyarrow: {RAY_EXTRA}") from None
    try:
        return pq.ParquetFile(path)
    except Exception as exc:  # pyarrow's ArrowInvalid / OSError for a file that is not Parquet
        raise DataError(path, None, f"cannot read it as Parquet: {exc}") from None


def _open_parquet(source: Source) -> Source:
    import pyarrow as pa

    schema = _parquet_file(source.path).schema_arrow
    if source.text_column not in schema.names:
        raise DataError(source.path, None, f"no column {source.text_column!r} (it has {schema.names}); "
                                           "give --text-column")
    read = dict.fromkeys((source.text_column, _id_column(source, schema.names, None)))
    repeated = [name for name in read if schema.names.count(name) > 1]
    if repeated:
        # As in a CSV header: which of the two is the text (or id) would be a guess (pyarrow cannot pick either).
        raise DataError(source.path, None, f"the schema names the {' and '.join(map(repr, repeated))} column "
                                           "more than once: which one holds the rows' values is unclear")

    def stored(name: str):
        kind = schema.field(name).type
        return kind.value_type if pa.types.is_dictionary(kind) else kind

    def is_text(kind) -> bool:
        return pa.types.is_string(kind) or pa.types.is_large_string(kind) or str(kind) == "string_view"

    if not is_text(stored(source.text_column)):
        raise DataError(source.path, None, f"column {source.text_column!r} holds {stored(source.text_column)}, "
                                           "not strings")
    id_column, id_type = _id_column(source, schema.names, None), "string"
    if id_column is not None:
        kind = stored(id_column)
        if pa.types.is_integer(kind):
            id_type = "uint64" if pa.types.is_uint64(kind) else "int64"  # uint64 ids may exceed int64's range
        elif not is_text(kind):
            raise DataError(source.path, None, f"id column {id_column!r} holds {kind}; ids are strings or integers")
    rows = _parquet_file(source.path).metadata.num_rows
    return replace(source, id_column=id_column, id_type=id_type, rows=rows, body=Span(0, None, 1))


def _parquet_rows(source: Source, span: Span) -> Iterator[tuple[str, Any]]:
    parquet = _parquet_file(source.path)
    start, stop = span.start, parquet.metadata.num_rows if span.stop is None else span.stop
    groups, first, offset = [], None, 0
    for group in range(parquet.num_row_groups):
        size = parquet.metadata.row_group(group).num_rows
        if size and offset < stop and offset + size > start:
            groups.append(group)
            first = offset if first is None else first
        offset += size
    if not groups:
        return
    # Once, and read by name: an id column that is the text column (as a CSV allows) came back as one
    # column, and the id's index was out of bounds.
    columns = list(dict.fromkeys((source.text_column, source.id_column or source.text_column)))
    index = first  # the file's row where the batch begins
    try:
        batches = parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, row_groups=groups, columns=columns,
                                       use_threads=False)
        for batch in batches:
            # Only the span's rows become Python values: a Ray span late in a large row group (read from the
            # group's start) converted every row before it, work growing with its offset.
            low, high = min(max(start - index, 0), batch.num_rows), min(stop - index, batch.num_rows)
            rows = batch.slice(low, high - low)
            texts = _parquet_values(source.path, rows, source.text_column, index + low)
            ids = (_parquet_values(source.path, rows, source.id_column, index + low) if source.id_column
                   else [None] * len(texts))
            for row, (text, ident) in enumerate(zip(texts, ids), start=index + low + 1):
                problem = _text_problem(text, source.text_column)
                if problem:
                    raise DataError(source.path, None, f"row {row}: {problem}")
                yield text, None if ident == "" else ident  # an empty id is none, as a CSV's empty cell
            index += batch.num_rows
            if index >= stop:
                return
    except DataError:
        raise
    except Exception as exc:  # a corrupt page: pyarrow's own exception types
        raise DataError(source.path, None, f"row {index + 1}: cannot read it as Parquet: {exc}") from None


def _parquet_values(path: str, rows, column: str, first: int) -> list[Any]:
    """The Python values of ``column`` in the record batch ``rows``, whose first row is the file's row
    ``first`` (from 0); a string that is not UTF-8 (pyarrow does not check what other tools wrote) is a
    ``DataError`` naming its own row, where pyarrow's error names only a byte of the value."""
    values = rows.column(column)
    try:
        return values.to_pylist()
    except UnicodeDecodeError:
        for row in range(len(values)):
            try:
                values[row].as_py()
            except UnicodeDecodeError as exc:
                raise DataError(path, None, f"row {first + row + 1}: {column!r} is not UTF-8: byte "
                                            f"0x{exc.object[exc.start]:02x} at position {exc.start + 1} "
                                            "of the value") from None
        raise


def plan_spans(source: Source, rows_per_span: int) -> tuple[list[Span], int]:
    """Cut the rows into spans of ``rows_per_span`` (the last may be shorter); also the row count.

    JSONL: a pass over the lines that parses nothing; CSV: a pass of the CSV
    parser (a quoted field may span lines, so only it knows where records
    begin), which also finds encoding and quoting errors; Parquet: the footer.
    """
    if source.format == "parquet":
        total = source.rows or 0
        return [Span(start, min(start + rows_per_span, total), 1)
                for start in range(0, total, rows_per_span)] or [Span(0, 0, 1)], total
    spans, start, line, rows = [], source.body.start, source.body.line, 0
    with open(source.path, "rb") as handle:
        if source.format == "jsonl":
            position, number = 0, 0
            for raw in handle:
                number += 1
                if not _blank_line(number, raw):
                    if rows and rows % rows_per_span == 0:
                        spans.append(Span(start, position, line))
                        start, line = position, number
                    rows += 1
                position += len(raw)
        else:
            lines = _Lines(handle, source.path, source.body)
            position, position_line = lines.position, lines.line + 1  # where the next record may begin
            for _, _ in records(source.path, lines):
                if rows and rows % rows_per_span == 0:
                    spans.append(Span(start, position, line))
                    start, line = position, position_line
                rows += 1
                position, position_line = lines.position, lines.line + 1
    spans.append(Span(start, None, line))
    return spans, rows


# --------------------------------------------------------------------------- answers and output


def answer_lines(engine, texts: Sequence[str], ids: Sequence[Any], top_k: int | None) -> list[str]:
    """One JSON line per text: ``engine.predict``'s answer, preceded by the row's id when it has one."""
    answers = engine.predict(texts, top_k)
    return [json.dumps(answer if ident is None else {"id": ident, **answer}, ensure_ascii=False)
            .translate(_LINE_BREAKS) for answer, ident in zip(answers, ids)]


# Characters json.dumps leaves raw (it escapes only those below U+0020) that str.splitlines and the
# readers built on it take for a line break: escaped, one answer stays one line to every reader.
_LINE_BREAKS = {ord(char): f"\\u{ord(char):04x}" for char in "\x85\u2028\u2029"}


def _progress(total: int | None, show: bool | None, out: str | os.PathLike):
    """The row counter; ``show`` None: drawn on a terminal only (nothing in logs and CI output), and not on
    the one ``out`` is (``--out /dev/stdout`` on a terminal: the bar's redraws began the answer lines)."""
    from tqdm import tqdm

    # disable=None: tqdm's own terminal check of standard error.
    disable = (True if atomic.writes_to(out, sys.stderr) else None) if show is None else not show
    return tqdm(total=total, unit=" rows", unit_scale=True, desc="predict", disable=disable)


def _write(handle: IO[bytes], lines: Sequence[str]) -> None:
    handle.write(("\n".join(lines) + "\n").encode("utf-8"))


def predict_local(source: Source, out: str | os.PathLike, engine, top_k: int | None = None,
                  chunk_rows: int = DEFAULT_CHUNK_ROWS, progress: bool | None = None) -> dict[str, Any]:
    """Predict every row of ``source`` with ``engine`` in this process; write ``out``; return a summary."""
    _check_positive(chunk_rows=chunk_rows)
    began, rows = time.perf_counter(), 0
    with atomic.streamed(out) as handle, _progress(source.rows, progress, out) as bar:
        for texts, ids in iter_chunks(iter_rows(source), chunk_rows):
            _write(handle, answer_lines(engine, texts, ids, top_k))
            rows += len(texts)
            bar.update(len(texts))
        if not rows:
            raise DataError(source.path, None, "no rows")
    return _summary("local", source, out, rows, began)


def _summary(engine: str, source: Source, out, rows: int, began: float, **extra) -> dict[str, Any]:
    seconds = time.perf_counter() - began
    return {"engine": engine, "data": source.path, "format": source.format, "out": str(out), "rows": rows,
            "seconds": round(seconds, 3), "rows_per_s": round(rows / seconds, 1) if seconds > 0 else None, **extra}


def _check_positive(**values: int | None) -> None:
    for name, value in values.items():
        if value is not None and value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")


# --------------------------------------------------------------------------- Ray Data


class _RayDataError(DataError):
    """A ``DataError`` that survives the trip from a Ray task to the driver.

    Ray pickles exceptions through their ``args``, which ``DataError``'s
    constructor does not take as they are, and Ray Data appends its own notes
    to the message; this one pickles its fields.
    """

    def __reduce__(self):
        return type(self), (self.path, self.line, self.reason)


def _read_spans(batch: dict, source: Source, chunk_rows: int) -> Iterator[Any]:
    """Ray read task: the rows of its spans, in chunks, as Arrow tables (text, id)."""
    import pyarrow as pa

    id_type = {"int64": pa.int64(), "uint64": pa.uint64()}.get(source.id_type, pa.string())
    for start, stop, line in zip(batch["start"], batch["stop"], batch["line"]):
        span = Span(int(start), None if stop < 0 else int(stop), int(line))
        try:
            for texts, ids in iter_chunks(iter_rows(source, span), chunk_rows):
                yield pa.table({"text": pa.array(texts, pa.string()), "id": pa.array(ids, id_type)})
        except DataError as exc:
            raise _RayDataError(exc.path, exc.line, exc.reason) from None


class RayPredictor:
    """Ray Data actor: one ``Engine`` per actor, loaded once; a chunk of rows in, its answer lines out."""

    def __init__(self, bundle: str, provider: str, threads: int, quantized: str, max_batch: int,
                 spelling: bool, segment: bool, top_k: int | None):
        from intentvcs.service.engine import Engine

        self.engine = Engine(bundle, provider=provider, threads=threads, quantized=quantized, max_batch=max_batch,
                             spelling=spelling, segment=segment)
        self.top_k = top_k

    def __call__(self, batch):
        import pyarrow as pa

        lines = answer_lines(self.engine, batch["text"].to_pylist(), batch["id"].to_pylist(), self.top_k)
        return pa.table({"answer": pa.array(lines, pa.large_string())})


def predict_ray(source: Source, out: str | os.PathLike, bundle: str | os.PathLike, *, provider: str = "auto",
                quantized: str = DEFAULT_QUANTIZED, spelling: bool = True, segment: bool = DEFAULT_SEGMENT,
                top_k: int | None = None, max_batch: int = DEFAULT_MAX_BATCH, chunk_rows: int = DEFAULT_CHUNK_ROWS,
                workers: int | None = None, cpus_per_worker: int = DEFAULT_CPUS_PER_WORKER, address: str | None = None,
                progress: bool | None = None) -> dict[str, Any]:
    """Predict every row of ``source`` on Ray Data (see the module docstring); write ``out``; return a summary.

    ``workers`` actors (default: one per ``cpus_per_worker`` CPUs of the
    cluster, or one per GPU with ``provider="cuda"``; any other provider runs on CPUs; never more than
    the file has chunks of ``chunk_rows``, nor than the cluster's nodes can host at once), each with
    ``cpus_per_worker`` CPUs (its ONNX Runtime threads) and, with ``"cuda"``,
    one GPU. ``address`` None starts a local cluster (shut down at the end);
    a Ray session already open in this process is used as it is.
    """
    try:
        import ray
        import ray.data
    except ImportError:
        raise ImportError(f"--engine ray needs Ray Data: {RAY_EXTRA}") from None
    from intentvcs.service.bundle import open_bundle
    from intentvcs.service.onnx_session import EngineError

    _check_positive(chunk_rows=chunk_rows, max_batch=max_batch, workers=workers, cpus_per_worker=cpus_per_worker,
                    top_k=top_k)
    if provider not in PROVIDERS:
        raise ValueError(f"provider must be one of {list(PROVIDERS)}, got {provider!r}")
    began = time.perf_counter()
    open_bundle(bundle, quantized=quantized)  # a bad bundle fails here, in a second, not in every actor
    # Tasks and actors open these paths where they run: on a cluster started with `ray start`, in the
    # working directory of that command, not ours. So both go as absolute paths (a bad row is still
    # reported under the path as it was given: ``_write_answers``).
    bundle = str(Path(bundle).resolve())
    read_source = replace(source, path=str(Path(source.path).resolve()))
    spans, total = plan_spans(source, chunk_rows * SPAN_CHUNKS)
    if not total:
        raise DataError(source.path, None, "no rows")
    started = not ray.is_initialized()
    if started:
        # ray.init puts its own SIGTERM handler (sys.exit(15)) in place of the caller's: the command's
        # (exit 143, "terminated") is put back, so SIGTERM ends the run as it ends a local one; the
        # temporary output is removed and the local cluster shut down (below) either way.
        sigterm = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
        # As many CPUs as the actors take, with "cuda" too (Ray finds the GPUs itself): None gave that
        # cluster every CPU of the machine.
        _ray_init(ray, address, None if address else
                  (workers or max(1, usable_cores() // cpus_per_worker)) * cpus_per_worker)
        if callable(sigterm):
            signal.signal(signal.SIGTERM, sigterm)
    context = ray.data.DataContext.get_current()
    saved = (context.execution_options.preserve_order, context.enable_progress_bars)
    ray_data_log = logging.getLogger("ray.data")
    saved_level = ray_data_log.level
    if not logging.getLogger("intentvcs").isEnabledFor(logging.DEBUG):  # --verbose sets the package's level
        # Without --verbose, Ray Data says nothing: not its per-run INFO lines, nor the ERROR
        # traceback (a hundred lines) it logs when a task fails, e.g. on a bad row, which this
        # command then reports in one line (``_write_answers``).
        ray_data_log.setLevel(logging.CRITICAL)
    try:
        resources = ray.cluster_resources()
        gpu = provider == "cuda"
        if gpu and resources.get("GPU", 0) < 1:
            raise EngineError(f"provider 'cuda' requested but the Ray cluster has no GPU ({resources})")
        try:
            room = _actor_room(ray, resources, cpus_per_worker, gpu)
        except ValueError as exc:
            if not address:  # the local cluster this command starts gains no node: refused, not waited for
                raise
            # A cluster given by --ray-address may add nodes on demand (an autoscaler; its head often has no
            # CPU for actors): said, and waited for, as Ray Data waits.
            logging.getLogger(__name__).warning("%s; waiting for the cluster to add one (an autoscaler) "
                                                "without a limit: Ctrl-C stops the run", exc)
        if workers is None:
            workers = max(1, int(resources.get("GPU", 0) if gpu else resources.get("CPU", 1) // cpus_per_worker))
        # An actor per chunk of rows at most: one more loads the model and never answers. And on the local
        # cluster no more than its node can host: one more never starts (Ray Data runs without it), and the
        # summary counted it; a cluster given by address may add nodes for the workers asked for.
        workers = min(workers, -(-total // chunk_rows), *(() if address else (room,)))
        context.execution_options.preserve_order = True  # answers in input order
        context.enable_progress_bars = False  # ours counts rows
        engine = {"bundle": bundle, "provider": "cuda" if gpu else "cpu", "threads": cpus_per_worker,
                  "quantized": quantized, "max_batch": max_batch, "spelling": spelling,
                  "segment": segment, "top_k": top_k}
        answers = _answers_dataset(ray, read_source, spans, chunk_rows, engine, workers, cpus_per_worker, gpu)
        rows = _write_answers(answers, out, total, progress, given=(read_source.path, source.path))
        return _summary("ray", source, out, rows, began, workers=workers, cpus_per_worker=cpus_per_worker,
                        provider="cuda" if gpu else "cpu", ray_address=address)
    finally:
        context.execution_options.preserve_order, context.enable_progress_bars = saved
        ray_data_log.setLevel(saved_level)
        if started:
            ray.shutdown()


def _actor_room(ray, resources: dict[str, float], cpus_per_worker: int, gpu: bool) -> int:
    """How many actors of ``cpus_per_worker`` CPUs (and one GPU each with ``gpu``) the cluster's live nodes
    can host at once; ``ValueError`` when it is none.

    An actor runs on one node, and Ray Data waits for its actors without a limit (``DataContext
    .wait_for_min_actors_s`` is -1), so an actor no node can host was a run that waited forever, saying
    nothing (its log is silenced without --verbose). No finite wait is set as a backstop: Ray Data's waits
    for every actor of the pool, its engine loaded, so any fixed limit also fails runs that are only slow
    to start or wait for a busy cluster's CPUs (``RAY_DATA_DEFAULT_WAIT_FOR_MIN_ACTORS_S`` sets one; its
    timeout is a ``TimeoutError``, exit 2). The nodes counted are those alive now: an autoscaler's nodes
    yet to come are not (as the cluster's resources, which the default ``workers`` and the GPU check read):
    the caller refuses only the local cluster it starts, and waits, saying so, for one given by address.
    """
    if ray.is_initialized():
        nodes = [node.get("Resources") or {} for node in ray.nodes() if node.get("Alive")]
    else:  # only where a caller stands in for the cluster (a test): its resources as one node
        nodes = [resources]

    def room(node: dict[str, float]) -> int:
        actors = int(node.get("CPU", 0) // cpus_per_worker)
        return min(actors, int(node.get("GPU", 0))) if gpu else actors

    hosts = sum(room(node) for node in nodes)
    if hosts:
        return hosts
    candidates = [node for node in nodes if node.get("GPU", 0) >= 1] if gpu else nodes
    largest = max((node.get("CPU", 0) for node in candidates), default=0)
    need = f"{cpus_per_worker} CPU{'s' * (cpus_per_worker > 1)}" + (" and one GPU" if gpu else "")
    where = "node with a GPU" if gpu else "node"
    advice = f"give --cpus-per-worker {int(largest)} or less, or " if largest >= 1 else ""
    raise ValueError(f"no node of the Ray cluster can host one actor: --cpus-per-worker {cpus_per_worker}"
                     f"{' with --provider cuda' if gpu else ''} needs {need} on one node, and its largest {where} "
                     f"has {largest:g} CPU{'s' * (largest != 1)}; {advice}use a cluster with a larger node")


def _write_answers(answers, out: str | os.PathLike, total: int, progress: bool | None,
                   given: tuple[str, str] | None = None) -> int:
    """Stream the pipeline's answer lines, in order, to ``out`` (all or nothing); return how many.

    An error a task raised on our behalf (a bad row) comes back as what it
    was here, not as Ray's wrapper, so the command reports it as it would locally,
    under the path the user gave (``given``: the path the tasks read, and that one).
    """
    rows = 0
    with atomic.streamed(out) as handle, _progress(total, progress, out) as bar:
        try:
            for block in answers.iter_batches(batch_size=None, batch_format="pyarrow"):
                lines = block["answer"].to_pylist()
                _write(handle, lines)
                rows += len(lines)
                bar.update(len(lines))
        except Exception as exc:
            error = _our_error(exc)
            if error is None:
                raise
            if isinstance(error, DataError) and given is not None and error.path == given[0]:
                error = DataError(given[1], error.line, error.reason)
            raise error from None
        if rows != total:
            # Every row is answered once, or the output is not published: a count that differs from the
            # plan's is a bug (the planner and the reader disagreeing on a row), never a result.
            raise RuntimeError(f"the Ray pipeline gave {rows} answers for {total} rows; nothing was written")
    return rows


def _answers_dataset(ray, source: Source, spans: list[Span], chunk_rows: int, engine: dict[str, Any],
                     workers: int, cpus_per_worker: int, gpu: bool):
    """The Ray Data pipeline: spans of ``source`` -> rows (read on this node) -> answers (the actor pool)."""
    here = ray.get_runtime_context().get_node_id()
    spans_ds = ray.data.from_items([{"start": s.start, "stop": -1 if s.stop is None else s.stop, "line": s.line}
                                    for s in spans], override_num_blocks=len(spans))
    # Reading takes little CPU next to the model: no CPU reserved (the actors
    # hold them all), one task at a time, on this node, which has the file.
    rows_ds = spans_ds.map_batches(_read_spans, batch_size=1, fn_kwargs={"source": source, "chunk_rows": chunk_rows},
                                   compute=ray.data.TaskPoolStrategy(size=1), num_cpus=0,
                                   label_selector={"ray.io/node-id": here})
    return rows_ds.map_batches(RayPredictor, batch_size=chunk_rows, batch_format="pyarrow",
                               fn_constructor_kwargs=engine, compute=ray.data.ActorPoolStrategy(size=workers),
                               num_cpus=cpus_per_worker, num_gpus=1 if gpu else None,
                               runtime_env={"env_vars": actor_env(cpus_per_worker)})


def actor_env(cpus_per_worker: int) -> dict[str, str]:
    """The environment a predicting actor's process starts with: the package's thread policy
    (``intentvcs.BLAS_THREADS``) and a tokenizer pool of the actor's CPUs.

    Set when the process starts, as it must be: a Ray worker has numpy loaded before it imports
    intentvcs, so OpenBLAS would take ``OMP_NUM_THREADS`` (Ray sets it to the actor's CPUs) threads, and
    the tokenizer's Rayon pool (``encode_batch``) one thread per core of the node, in every actor.
    """
    from intentvcs import BLAS_THREADS

    return {**BLAS_THREADS, "RAYON_NUM_THREADS": str(cpus_per_worker)}


def _ray_init(ray, address: str | None, num_cpus: int | None) -> None:
    # A local cluster of our own: no usage report, no dashboard, Ray's own logs quiet.
    if address is None:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    else:
        _check_reachable(address)
    try:
        # "local", not None: ray.init(address=None) joins the cluster that $RAY_ADDRESS names, or the last
        # one `ray start` began on this machine, where the command promises a cluster of its own.
        ray.init(address=address or "local", num_cpus=num_cpus, include_dashboard=False,
                 logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        what = f"connect to the Ray cluster at {address}" if address else "start a local Ray cluster"
        raise ConnectionError(f"cannot {what}: {exc}") from None


# How long a cluster's GCS port may take to accept a TCP connection. ray.init itself waits for
# minutes, printing only Ray's own GCS warnings, when nothing listens at the address.
GCS_CONNECT_TIMEOUT_S = 5.0


def _gcs_address(address: str) -> tuple[str, int] | None:
    """The host and port ray.init will connect to for ``address``; None where it starts a cluster
    (``"local"``), or where Ray cannot resolve or parse the address (ray.init then fails at once)."""
    if address == "local":
        return None
    if address.startswith("ray://"):  # Ray Client: its server's host:port
        target = address.removeprefix("ray://")
    else:
        try:  # "auto": $RAY_ADDRESS or the last cluster started here; localhost: this node's IP, as Ray does
            from ray._private.services import canonicalize_bootstrap_address

            target = canonicalize_bootstrap_address(address)
        except Exception:
            target = None if address == "auto" else address
    host, _, port = (target or "").rpartition(":")
    return (host.strip("[]"), int(port)) if host and port.isdigit() else None


def _check_reachable(address: str, timeout_s: float = GCS_CONNECT_TIMEOUT_S) -> None:
    """``ConnectionError`` ("cannot connect to the Ray cluster at ...") unless the cluster's GCS port
    accepts a TCP connection within ``timeout_s``."""
    import socket

    target = _gcs_address(address)
    if target is None:
        return
    host, port = target
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        reason = f"no answer within {timeout_s:g} s" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise ConnectionError(
            f"cannot connect to the Ray cluster at {address}: {host}:{port} does not accept connections ({reason}); "
            "is its head node up (`ray start --head`), and is this its GCS address (`ray status` there prints "
            "it)?") from None


def _our_error(exc: BaseException) -> Exception | None:
    """The typed error of ours that a Ray exception carries (a bad row, bundle or provider), freed of Ray's notes."""
    from intentvcs.core.manifest import BundleError
    from intentvcs.service.onnx_session import EngineError

    seen, stack = set(), [exc]
    while stack:
        error = stack.pop()
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        if getattr(error, "cause", None) is not None:  # a RayTaskError: what the task raised is its cause
            stack.append(error.cause)
            continue
        if isinstance(error, DataError):
            return DataError(error.path, error.line, error.reason)
        if isinstance(error, (BundleError, EngineError)):
            return ValueError(str(error).split("\n")[0])
        stack += [error.__cause__, error.__context__, getattr(error, "cause", None)]
    return None
