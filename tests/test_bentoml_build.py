"""``bentoml build`` accepts bentofile.yaml, ships the project's wheel and the bundle, and stays torch-free.

The build runs in a temporary context holding bentofile.yaml, the wheel built
from this checkout (as the bentofile's comment says) and a tiny bundle at the
default path, into a temporary BENTOML_HOME, so it touches neither the user's
bento store nor the real runs/ directory.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml

from tests.helpers.bundle import make_tiny_bundle

ROOT = Path(__file__).resolve().parents[1]
SERVING_PACKAGES = {"numpy", "tokenizers", "symspellpy", "bentoml", "prometheus-client", "uvloop", "httptools"}
RUNTIME = {"bentofile.yaml": "onnxruntime", "bentofile.gpu.yaml": "onnxruntime-gpu"}
TRAINING_PACKAGES = {"torch", "transformers", "optimum", "optimum-onnx", "safetensors", "sentence-transformers"}


class Built(NamedTuple):
    path: Path  # the bento's folder in the temporary store
    bentofile: str  # which variant it was built from


@pytest.fixture(scope="module", params=sorted(RUNTIME))
def bento(request, tmp_path_factory) -> Built:
    """The bento built from one of the two bentofiles (CPU, GPU)."""
    tmp = tmp_path_factory.mktemp("bento")
    context = tmp / "context"
    context.mkdir()
    shutil.copy(ROOT / request.param, context)
    # Built from a copy: setuptools builds in the source folder, and its build/ there could hold stale modules.
    source = tmp / "source"
    for name in ("intentvcs", "training", "export", "service"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source)
    # The build backend comes from this environment: no index is needed to build the wheel.
    wheel = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(context / "dist"), str(source)], check=False, capture_output=True, text=True,
                           timeout=300)
    assert wheel.returncode == 0, wheel.stdout[-3000:] + wheel.stderr[-3000:]
    bundle = make_tiny_bundle(tmp / "tiny", spelling_texts=["play some music"])
    shutil.copytree(bundle, context / "runs" / "default" / "bundle")
    env = {**os.environ, "BENTOML_HOME": str(tmp / "home"), "BENTOML_DO_NOT_TRACK": "True"}
    # bentoml build refuses a build context outside the working directory.
    result = subprocess.run([sys.executable, "-m", "bentoml", "build", "-f", request.param, "."], cwd=context,
                            env=env, check=False, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    tag = re.search(r'Bento\(tag="([^"]+)"\)', result.stdout).group(1)
    name, version = tag.split(":")
    return Built(tmp / "home" / "bentos" / name / version, request.param)


def requirement_names(path: Path) -> set[str]:
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            names.add(re.split(r"[<>=!~\[ ;]", line, maxsplit=1)[0].lower().replace("_", "-"))
    return names


def test_bento_ships_service_and_bundle(bento):
    bento, bentofile = bento
    meta = yaml.safe_load((bento / "bento.yaml").read_text())
    assert meta["service"] == "intentvcs.service.app:IntentService"
    # /audit/job is the audit-job task (BentoML routes its submit, status, get under it).
    routes = {route["route"] for route in meta["schema"]["routes"]}
    assert routes == {"/predict", "/model/parse", "/audit", "/audit/job"}
    for name in ("manifest.json", "model.onnx", "tokenizer.json", "spelling.json"):
        assert (bento / "src" / "runs" / "default" / "bundle" / name).is_file()
    # The code is the wheel, whose name the bentofile spells out with pyproject's version.
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    wheel = bento / "env" / "python" / "wheels" / f"intentvcs-{version}-py3-none-any.whl"
    assert wheel.is_file()
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {"intentvcs/service/app.py", "intentvcs/service/audit/report.schema.json",
            "intentvcs/core/decision.py"} <= names
    assert not {name for name in names if name.split("/")[0] in ("service", "training", "export")}
    assert not list((bento / "src").rglob("*.py"))


@pytest.mark.parametrize("bentofile", sorted(RUNTIME))
def test_the_bentofile_ships_every_file_a_bundle_holds(bentofile):
    """A file left out fails where it is read: without references.jsonl, every /audit without training rows."""
    from intentvcs.core.manifest import BUNDLE_FILES

    included = yaml.safe_load((ROOT / bentofile).read_text())["include"]
    assert {Path(path).name for path in included if path.startswith("runs/default/bundle/")} == set(BUNDLE_FILES)


def test_bento_dependencies_are_torch_free_with_one_onnx_runtime(bento):
    bento, bentofile = bento
    names = requirement_names(bento / "env" / "python" / "requirements.txt")
    assert SERVING_PACKAGES | {RUNTIME[bentofile]} <= names
    assert not names & TRAINING_PACKAGES
    assert not names & (set(RUNTIME.values()) - {RUNTIME[bentofile]})  # never both wheels


def test_the_gpu_bento_runs_on_cuda_or_not_at_all(bento):
    bento, bentofile = bento
    meta = yaml.safe_load((bento / "bento.yaml").read_text())
    envs = {e["name"]: e["value"] for e in meta.get("envs", [])}
    dockerfile = (bento / "env" / "docker" / "Dockerfile").read_text()
    if bentofile == "bentofile.gpu.yaml":
        assert envs["INTENTVCS_PROVIDER"] == "cuda" and envs["INTENTVCS_GPUS"] == "1" and "nvidia/cuda" in dockerfile
    else:
        assert "INTENTVCS_PROVIDER" not in envs and "nvidia/cuda" not in dockerfile


def test_bentofile_serves_the_default_bundle_with_the_thread_policy():
    """The bento's environment repeats two defaults whose home is in the package; they must agree."""
    from intentvcs import BLAS_THREADS
    from intentvcs.service.settings import Settings

    envs = {e["name"]: e["value"] for e in yaml.safe_load((ROOT / "bentofile.yaml").read_text())["envs"]}
    assert envs == {"INTENTVCS_BUNDLE": Settings.bundle, **BLAS_THREADS}


def test_the_two_bentofiles_differ_only_where_the_gpu_needs_it():
    cpu, gpu = (yaml.safe_load((ROOT / name).read_text()) for name in ("bentofile.yaml", "bentofile.gpu.yaml"))
    assert (gpu["name"], gpu["docker"].pop("cuda_version")) == ("intentvcs-gpu", "12.6.3")
    gpu["name"] = cpu["name"]
    # CUDA 12 builds of ONNX Runtime for the CUDA 12 base image (PyPI's 1.27 and later are CUDA 13).
    runtime = {"onnxruntime-gpu>=1.24,<1.27": "onnxruntime>=1.24"}
    assert set(runtime) <= set(gpu["python"]["packages"])
    gpu["python"]["packages"] = [runtime.get(p, p) for p in gpu["python"]["packages"]]
    gpu["envs"] = [e for e in gpu["envs"] if e not in ({"name": "INTENTVCS_PROVIDER", "value": "cuda"},
                                                        {"name": "INTENTVCS_GPUS", "value": "1"})]
    assert gpu == cpu
