"""Performance benchmark (issue "Performance"): ONNX engine vs PyTorch, the HTTP service, GPU, compute ceiling.

    python benchmarks/perf_bench.py --bundle BUNDLE --checkpoint CHECKPOINT
    python benchmarks/perf_bench.py --bundle BUNDLE --checkpoint CHECKPOINT --skip-service --repeats 3

The measurements are ``intentvcs bench``'s (``intentvcs.commands.bench``;
options alike), on the SNIPS test utterances (``$INTENTVCS_DATA/snips``,
default ``../shared/data/snips``) unless ``--data`` names a JSONL file.
Writes ``benchmarks/results/perf.json`` and ``perf.md`` (for the README).
Run it on a quiet machine: other work on the cores skews every figure.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: see intentvcs/cli.py

import argparse
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import SHARED_DATA, write_results  # noqa: E402
from intentvcs.commands import bench  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_arguments(parser)
    parser.set_defaults(snips=str(SHARED_DATA / "snips"))  # --data, when given, takes precedence
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings, records = bench.measure(args)
    path = write_results("perf", records, bench.markdown(settings, records), extra=settings)
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
