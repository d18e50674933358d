"""The serving path runs with torch, transformers and optimum unimportable.

Each check runs in a fresh interpreter whose first meta-path finder refuses
those packages, so an import anywhere (module level or lazy, ours or a
dependency's) fails the test instead of silently loading 1 GB of torch.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.bundle import make_tiny_bundle

ROOT = Path(__file__).resolve().parents[1]
BLOCKED = ("torch", "transformers", "optimum")

BLOCKER = f"""
import importlib.abc, sys

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {BLOCKED!r}:
            raise ModuleNotFoundError(f"{{name}} is blocked in the torch-free serving path", name=name)
        return None

sys.meta_path.insert(0, Blocker())
try:
    import torch
except ImportError:
    pass
else:
    raise SystemExit("the import blocker does not work")
"""


def run_blocked(body: str, *args: str) -> dict:
    """Run ``BLOCKER + body`` in a subprocess; ``body`` prints one JSON object last."""
    proc = subprocess.run([sys.executable, "-c", BLOCKER + body, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return make_tiny_bundle(tmp_path_factory.mktemp("torch-free"), quantize=True, spelling_texts=["play some music"])


def test_engine_imports_and_predicts_without_torch(bundle):
    out = run_blocked("""
import json, sys
from intentvcs.service.engine import Engine
engine = Engine(sys.argv[1], provider="cpu")
int8 = Engine(sys.argv[1], provider="cpu", quantized="on")
answers = engine.predict(["play some music by the artist", "hi", ""], top_k=2)
logits = int8.infer(["will it rain tomorrow"]).logits
loaded = sorted(m for m in sys.modules if m.partition(".")[0] in ("torch", "transformers", "optimum"))
print(json.dumps({"answers": answers, "int8_shape": list(logits.shape), "loaded": loaded, "info": engine.info}))
""", str(bundle))
    assert out["loaded"] == []
    assert len(out["answers"]) == 3 and all(len(a["intents"]) == 2 for a in out["answers"])
    assert out["int8_shape"] == [1, 5]
    assert out["info"]["provider"] == "CPUExecutionProvider"


def test_core_service_and_cli_modules_import_without_torch():
    """Every module of the core, the serving side and the command line imports torch-free
    (commands import torch lazily, inside the commands that train)."""
    out = run_blocked("""
import importlib, json, pkgutil, sys
import intentvcs.cli, intentvcs.core, intentvcs.service
failed = {}
packages = (intentvcs.cli, intentvcs.core, intentvcs.service)
for info in (i for p in packages for i in pkgutil.walk_packages(p.__path__, p.__name__ + ".")):
    try:
        importlib.import_module(info.name)
    except ImportError as exc:
        failed[info.name] = str(exc)
print(json.dumps({"failed": failed, "imported": len([m for m in sys.modules if m.startswith("intentvcs.")])}))
""")
    assert out["failed"] == {}
    assert out["imported"] > 40
