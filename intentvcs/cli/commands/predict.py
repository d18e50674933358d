"""``intentvcs predict``: answers for every row of a data file of any size, locally or on Ray Data.

The work is ``intentvcs.service.batch_predict``'s (formats, row rules, the
answer lines, the output written all or nothing); this module is its options.
"""

from __future__ import annotations

import argparse
import json

from intentvcs.cli.model_options import add_quantized_argument, add_segment_argument
from intentvcs.cli.options import STDOUT_HELP, given, output_file, summary_stream
from intentvcs.service.settings import DEFAULT_MAX_BATCH, PROVIDERS, Settings

DESCRIPTION = """\
Stream the rows of a JSONL, CSV or Parquet file in chunks, predict them with a bundle's ONNX engine (the
service's), and write one JSON answer per row, in input order, with the row's id when it has one. The answers
go to a temporary file renamed to --out at the end: a failed run leaves no output. Memory stays flat.
An --out that is a stream (/dev/stdout, /dev/null, a FIFO) is written to as the answers come instead (a failed
run leaves what was written; /dev/stdout redirected to a file is written through, so >> appends); with --out
/dev/stdout the run's summary goes to standard error.

Rows: JSONL lines are canonical rows (docs: the data format) whose "labels" may be left out, so
{"text": "...", "id": "..."} is a row and a labelled test set predicts as it is; CSV is comma-separated
with a header naming the text column (and the id column) once; Parquet a string text column. A bad row (not
JSON, an unknown key, an empty text, a text over 10,000 characters, ...) stops the run with exit 2 naming
file:line (JSONL, CSV) or the row number (Parquet).

--engine ray runs the same engine on Ray Data: one read task on this node streams the rows, a fixed pool of
--workers actors (each --cpus-per-worker CPUs, and one GPU with --provider cuda) loads the engine once each
and predicts, this process writes the answers in order; the answers equal a local run's, byte for byte. An
actor runs on one node: a cluster where no node has --cpus-per-worker CPUs (and, with cuda, a GPU) is refused
at once, and the pool is no larger than the nodes can host at a time.
Without --ray-address a local cluster is started for the run and shut down after it (RAY_ADDRESS is not
used); with one (e.g. auto, or HOST:PORT of a cluster this machine is a node of) every node needs intentvcs
installed and the bundle at the same path; the data file is read on this node only. Needs the batch extra
(ray[data], pyarrow)."""


def register(sub: argparse._SubParsersAction) -> None:
    from intentvcs.service.batch_predict import DEFAULT_CHUNK_ROWS, DEFAULT_CPUS_PER_WORKER, FORMATS

    p = sub.add_parser("predict", help="predict every row of a JSONL/CSV/Parquet file to a JSONL of answers",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bundle", required=True, type=given, help="bundle directory (from intentvcs export)")
    p.add_argument("--data", required=True, type=given, help="input rows: .jsonl, .csv or .parquet (see --format)")
    p.add_argument("--out", required=True, type=output_file,
                   help=f"output JSONL, one answer per input row ({STDOUT_HELP})")
    p.add_argument("--format", choices=list(FORMATS), help="input format (default: from the --data suffix)")
    p.add_argument("--text-column", default="text", help="CSV/Parquet: the column holding the text (default: text)")
    p.add_argument("--id-column", default="id",
                   help="CSV/Parquet: the column holding the row id (default: id, used when present; another name "
                        "must be there)")
    p.add_argument("--top-k", type=int, help="ranked intents per answer (default: every label)")
    p.add_argument("--batch-size", type=int, default=DEFAULT_MAX_BATCH,
                   help="texts per graph run (the engine's max batch; default: %(default)s)")
    p.add_argument("--chunk-rows", type=int, default=DEFAULT_CHUNK_ROWS,
                   help="rows read, predicted and written at a time; a chunk is sorted by length into graph "
                        "runs, and is one Ray batch (default: %(default)s)")
    add_quantized_argument(p)
    p.add_argument("--provider", choices=PROVIDERS, default=Settings.provider,
                   help=f"ONNX Runtime execution provider (default {Settings.provider}; with --engine ray, "
                        "cuda gives each actor one GPU and anything else runs on CPUs)")
    p.add_argument("--threads", type=int,
                   help="local: ONNX Runtime intra-op threads (default: every core)")
    p.add_argument("--no-spelling", dest="spelling", action="store_false",
                   help="feed the model the raw texts, without the bundle's spelling normaliser")
    add_segment_argument(p)
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local: this process; ray: Ray Data actors (default: local)")
    p.add_argument("--ray-address", help="ray: a running cluster to join, as ray.init takes it (auto, HOST:PORT); "
                                         "default: start a local cluster for this run, RAY_ADDRESS or not")
    p.add_argument("--workers", type=int,
                   help="ray: actors, each with its own engine (default: the cluster's CPUs / --cpus-per-worker, "
                        "or its GPUs with --provider cuda; a local cluster gets this machine's cores; never more "
                        "than the cluster's nodes can host at a time)")
    # None: not given, so that --engine local refuses it rather than ignore it.
    p.add_argument("--cpus-per-worker", type=int,
                   help=f"ray: CPUs reserved per actor, its ONNX Runtime threads (default: {DEFAULT_CPUS_PER_WORKER})")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from intentvcs.core import atomic
    from intentvcs.service import batch_predict

    for name in ("top_k", "batch_size", "chunk_rows", "threads", "workers", "cpus_per_worker"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    if args.engine != "ray":
        ray_only = [f"--{n.replace('_', '-')}" for n in ("ray_address", "workers", "cpus_per_worker")
                    if getattr(args, n) is not None]
        if ray_only:
            raise ValueError(f"{' and '.join(ray_only)} apply to --engine ray only")
    elif args.threads is not None:
        raise ValueError("--threads is for --engine local; Ray actors run --cpus-per-worker threads each")
    elif args.ray_address is not None and not args.ray_address.strip():
        # `--ray-address "$HEAD"` with the variable unset: read as no address, the job meant for a cluster ran
        # on a local one of this machine's cores, said only by the summary's empty ray_address.
        raise ValueError("--ray-address is empty (an unset shell variable?): give the cluster's address (auto, "
                         "HOST:PORT), or leave the option out to run on a local cluster")
    (out,) = atomic.check_targets([args.out], inputs=[args.data])
    atomic.check_outside(args.bundle, [args.out])
    # The input is opened (file, format, header or schema) before any model loads.
    source = batch_predict.Source.open(args.data, args.format, args.text_column, args.id_column)
    # `--out /dev/stdout | jq`: the summary line would end the answers, read as one more (malformed) answer.
    report = summary_stream(out)
    if args.engine == "ray":
        summary = batch_predict.predict_ray(
            source, out, args.bundle, provider=args.provider, quantized=args.quantized, spelling=args.spelling,
            segment=args.segment, top_k=args.top_k, max_batch=args.batch_size, chunk_rows=args.chunk_rows,
            workers=args.workers, address=args.ray_address,
            cpus_per_worker=args.cpus_per_worker or batch_predict.DEFAULT_CPUS_PER_WORKER)
    else:
        from intentvcs.service.engine import Engine

        engine = Engine(args.bundle, provider=args.provider, threads=args.threads, quantized=args.quantized,
                        max_batch=args.batch_size, spelling=args.spelling, segment=args.segment)
        summary = batch_predict.predict_local(source, out, engine, top_k=args.top_k, chunk_rows=args.chunk_rows)
    json.dump(summary, report)
    print(file=report)
    return 0
