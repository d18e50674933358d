"""Shared plumbing for benchmark scripts: machine facts and result files.

Every script writes ``benchmarks/results/<name>.json`` as
``{"command", "machine", "date", "records": [...]}``: what reproduces it, where
it ran (cores, CPU, GPU), when, and one flat record per measured configuration
naming what was measured and its figures. A Markdown table goes next to it,
which ``python -m benchmarks.render_results`` renders into docs/RESULTS.md and
the README.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import math
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from intentvcs.core import atomic
from intentvcs.training.loaders import DATA_ENV

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SHARED_DATA = Path(os.environ.get(DATA_ENV, ROOT.parent / "shared" / "data"))  # repo-relative, not cwd-relative


@functools.cache  # a subprocess (nvidia-smi): asked once a run, by keep_previous and write_results
def machine() -> dict:
    """Cores, CPU model and GPU (if ``nvidia-smi`` answers) of this machine."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = None
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        pass
    return {"cores": os.cpu_count(), "cpu": cpu, "gpu": gpu, "python": platform.python_version()}


def command_line() -> str:
    """How this run was invoked: ``python -m benchmarks.<name> <arguments>``, run from the repository root."""
    module = "benchmarks." + Path(sys.argv[0]).stem
    return "python -m " + " ".join(shlex.quote(a) for a in [module, *sys.argv[1:]])


def keep_previous(name: str, records: list[dict], redone, directory: Path = RESULTS,
                  host: dict | None = None) -> tuple[list[dict], str]:
    """Merge this run's ``records`` with an earlier run's that this run does not redo.

    ``redone(record)`` says whether an earlier record is covered by this run
    (e.g. same dataset). Lets one benchmark be run in parts (one data set per
    process); the command of a merged file lists every part, joined by ``&&``.
    An earlier record measured on another machine than ``host`` (the header the
    merged file gets: this machine by default, as ``write_results``) keeps its
    own: it carries the earlier header's ``machine`` and ``date`` (the header names
    the last run's only, and the results' blocks name a record's own machine).
    """
    path = directory / f"{name}.json"
    if not path.exists():
        return records, command_line()
    previous = json.loads(path.read_text(encoding="utf-8"))
    elsewhere = previous.get("machine") != (host or machine())
    kept = [({"machine": previous["machine"], "date": previous["date"], **r} if elsewhere else r)
            for r in previous["records"] if not redone(r)]
    commands = [c for c in previous["command"].split(" && ") if c != command_line()] if kept else []
    return kept + records, " && ".join(dict.fromkeys(commands + [command_line()]))


def write_results(name: str, records: list[dict], markdown: str, extra: dict | None = None,
                  command: str | None = None, directory: Path = RESULTS, host: dict | None = None) -> Path:
    """Write ``<directory>/<name>.json`` and ``<name>.md`` (default ``benchmarks/results``) atomically.

    ``host`` is the machine the file's header names (default this one's): a
    file merged with a part measured elsewhere keeps its own machine.
    """
    body = {"command": command or command_line(), "machine": host or machine(),
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d"), **(extra or {}), "records": records}
    path = atomic.write_json(directory / f"{name}.json", body)
    atomic.write_text(directory / f"{name}.md", markdown)
    return path


def pct(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{100 * value:.{digits}f}"


def share_percent(share: float, digits: int = 1) -> str:
    """``share`` (a fraction) in percent with ``digits`` decimals, rounded down: a share short of 1 (one
    answer of 2,000 differing) must not read "100.0" where the text says "identical"."""
    scale = 10 ** digits
    return f"{math.floor(round(100 * share * scale, 6)) / scale:.{digits}f}"


def shown_path(path: Path) -> Path:
    """A path as results name it: relative to the repository when inside it, else whole (``--runs`` elsewhere)."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def seeds_named(seeds: Sequence[int]) -> str:
    """``seed 1`` or ``seeds 0, 2``: seeds named in a table."""
    return f"seed{'s' if len(seeds) != 1 else ''} {', '.join(map(str, seeds))}"


def seeds_not_found(record: dict) -> str:
    """What a median's ``seeds_missing`` (the seeds asked for whose run was not found) says in a table:
    ``seed 1 not found``; "" when it lacks none."""
    missing = record.get("seeds_missing") or []
    return f"{seeds_named(missing)} not found" if missing else ""


def named_paths(values: list[str], flag: str) -> dict[str, Path]:
    """``NAME=PATH`` command-line values as ``{name: path}``; ``ValueError`` naming ``flag`` for another form."""
    out = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"{flag} wants NAME=PATH, got {value!r}")
        out[name] = Path(path)
    return out
