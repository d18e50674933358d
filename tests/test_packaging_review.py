"""Packaging review: the declared floors are ones the code runs on, and gpu_check.sh takes the paths it is given.

- ``requires-python`` admits no Python the code fails on: the service's body limit uses
  ``asyncio.timeout`` (3.11) and the tests read pyproject.toml with ``tomllib`` (3.11).
- The ``cpu`` and ``gpu`` extras admit no ONNX Runtime whose weight-only quantiser lacks what
  export/quantize.py calls: ``onnxruntime.quantization.matmul_nbits_quantizer`` first shipped in
  1.22, and its ``MatMulNBitsQuantizer(bits=...)`` argument in 1.24 (1.22 and 1.23 raise TypeError).
- scripts/gpu_check.sh moves to the repository root before it runs: relative paths given to it
  are the caller's, not the root's.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def floor(requirement: str) -> tuple[int, ...]:
    """The version of a requirement's ``>=`` clause, as a tuple of ints."""
    found = re.search(r">=\s*([0-9][0-9.]*)", requirement)
    assert found, requirement
    return tuple(int(part) for part in found.group(1).split("."))


def test_requires_python_admits_no_version_the_code_fails_on():
    # This very file imports tomllib (3.11), as do the other packaging tests.
    assert floor(PROJECT["requires-python"]) >= (3, 11)


def test_onnx_runtime_floors_have_the_weight_only_quantiser_the_export_calls():
    source = (ROOT / "export" / "quantize.py").read_text(encoding="utf-8")
    assert "matmul_nbits_quantizer import MatMulNBitsQuantizer" in source
    assert re.search(r"MatMulNBitsQuantizer\([^)]*\bbits=", source)
    for extra in ("cpu", "gpu"):
        (requirement,) = PROJECT["optional-dependencies"][extra]
        assert floor(requirement) >= (1, 24), (extra, requirement)


def run_gpu_check(tmp_path: Path, cwd: Path, *arguments: str) -> list[tuple[str, str]]:
    """gpu_check.sh with a stand-in ``python`` that records where it ran and its arguments: (cwd, args) per call."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "calls.log"
    log.unlink(missing_ok=True)
    fake = bin_dir / "python"
    fake.write_text(f'#!/bin/sh\nprintf "%s|%s\\n" "$PWD" "$*" >> "{log}"\ncat > /dev/null\nexit 0\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), *arguments], cwd=cwd,
                   env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, check=True,
                   stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    return [tuple(line.split("|", 1)) for line in log.read_text().splitlines()]


def test_gpu_check_resolves_relative_paths_from_where_it_is_run(tmp_path):
    caller = tmp_path / "my dir"  # a space too
    caller.mkdir()
    calls = run_gpu_check(tmp_path, caller, "bundle", "ckpt", "snips", "out")
    assert [Path(where).resolve() for where, _ in calls] == [ROOT] * 3  # it runs from the repository root
    assert calls[0][1] == f"- {caller}/bundle"
    assert calls[-1][1].startswith("-m benchmarks.perf_bench --gpu-only ")
    assert f"--bundle {caller}/bundle --checkpoint {caller}/ckpt --snips {caller}/snips" in calls[-1][1]
    assert calls[-1][1].endswith(f"--results-dir {caller}/out")
    # Without RESULTS_DIR: the repository's benchmarks/results, as before.
    calls = run_gpu_check(tmp_path, caller, "/b", "/c", "/s")
    assert calls[-1][1].endswith("--bundle /b --checkpoint /c --snips /s --repeats 3 "
                                 "--results-dir benchmarks/results")
