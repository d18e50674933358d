"""The benchmark scripts answer ``--help`` (without measuring anything), and the docs show their results.

Every ``python -m benchmarks.<name>`` is run with ``--help`` in one interpreter
(the imports are shared, so the whole check takes seconds); a script that
ignored its arguments would instead measure and rewrite its results file,
which the test would see.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Modules the scripts import, not scripts themselves.
LIBRARIES = ("__init__", "common", "baselines")
SCRIPTS = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if p.stem not in LIBRARIES)

RUN_ALL = """
import contextlib, io, json, runpy, sys
codes = {}
for name in sys.argv[1:]:
    sys.argv = [name, "--help"]
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            runpy.run_module(f"benchmarks.{name}", run_name="__main__")
            codes[name] = ("returned without exiting", "")
        except SystemExit as exc:
            codes[name] = (exc.code, out.getvalue()[:200])
print(json.dumps(codes))
"""


def results_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted((ROOT / "benchmarks" / "results").iterdir()):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def test_every_benchmark_answers_help_and_measures_nothing():
    before = results_digest()
    proc = subprocess.run([sys.executable, "-c", RUN_ALL, *SCRIPTS], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    codes = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(codes) == set(SCRIPTS) and len(SCRIPTS) > 10
    for name, (code, usage) in codes.items():
        assert code in (0, None) and usage.startswith("usage:"), (name, code, usage)
    assert results_digest() == before


def test_docs_show_the_recorded_results():
    """docs/RESULTS.md and the README's headline table are rendered from benchmarks/results as they are now."""
    from benchmarks import render_results

    assert render_results.main(["--check"]) == 0


def test_a_result_whose_files_are_gone_leaves_the_docs(monkeypatch):
    """Its appended section is removed (a deleted scratch result's section stayed, citing a missing file);
    a block of it in the narrative is an error, not stale figures."""
    from benchmarks import render_results

    monkeypatch.setattr(render_results, "result_names", lambda: [])
    appended = "intro\n\n## Result `gone`\n\n<!-- results:gone -->\nold figures\n<!-- /results:gone -->\n\nafter\n"
    assert render_results.render_results_doc(appended) == "intro\n\nafter\n"
    with pytest.raises(SystemExit, match="shows the result 'gone'"):
        render_results.render_results_doc("## Narrative\n\n<!-- results:gone -->\nold\n<!-- /results:gone -->\n")


def test_int8_gate_reads_a_task_from_another_checkpoint(tmp_path):
    from benchmarks import int8_gate

    tasks = int8_gate.with_checkpoints(int8_gate.TASKS, [f"clinc150={tmp_path}"])
    assert tasks["clinc150"].checkpoint == tmp_path and tasks["clinc150"].figures == int8_gate.TASKS["clinc150"].figures
    assert tasks["snips-vcs"] == int8_gate.TASKS["snips-vcs"]  # the others as defined
    for bad in ("clinc150", "nope=dir", "clinc150="):
        with pytest.raises(ValueError, match="TASK=DIR"):
            int8_gate.with_checkpoints(int8_gate.TASKS, [bad])
