"""The floors of the package import only downwards (docs/ARCHITECTURE.md).

Every ``import`` statement of every module is read from its syntax tree,
module level and lazy ones alike, so an import hidden inside a function
breaks the rule as visibly as one at the top:

    cli                       the command line: may import every floor below
    export                    checkpoint -> bundle: training, service, core
    training  |  service      never each other; core only
    core                      imports no other package of ours

``benchmarks`` stand above all of them and nothing imports them. The core and
the serving side never import torch, transformers or optimum, even lazily
(tests/test_torch_free.py proves the same at run time). The repository's
folders ``training/``, ``export/`` and ``service/`` install as
``intentvcs.training`` etc., so no module may import them by the folder name.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Installed package -> its folder in the repository (pyproject.toml's package-dir).
FOLDERS = {"intentvcs": ROOT / "intentvcs", "intentvcs.training": ROOT / "training",
           "intentvcs.export": ROOT / "export", "intentvcs.service": ROOT / "service"}
FLOORS = {"intentvcs.core": 0, "intentvcs.training": 1, "intentvcs.service": 1, "intentvcs.export": 2,
          "intentvcs.cli": 3}
TORCH_SIDE = ("torch", "transformers", "optimum", "safetensors")
FOLDER_NAMES = ("training", "export", "service")


def modules() -> dict[str, Path]:
    """Every module of the installed package, by dotted name."""
    found = {}
    for package, folder in FOLDERS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if package == "intentvcs" and parts[0] in ("training", "export", "service"):
                continue  # not there, but a stray copy must not count twice
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def imported_names(source: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every absolute import; ``from a.b import c`` counts as ``a.b.c``."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"line {node.lineno}: relative import; the layering reads absolute ones"
            names += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return names


def floor_of(module: str) -> str | None:
    """The floor package ``module`` belongs to, or None (the ``intentvcs`` root, third-party code)."""
    return next((p for p in FLOORS if module == p or module.startswith(p + ".")), None)


def violations(module: str, source: str) -> list[str]:
    """What ``module`` (with this ``source``) imports against the rules above."""
    own = floor_of(module)
    found = []
    for line, name in imported_names(source):
        top = name.partition(".")[0]
        target = floor_of(name)
        if top == "benchmarks":
            found.append(f"{module}:{line} imports {name}: benchmarks stand above the package")
        elif top in FOLDER_NAMES:
            found.append(f"{module}:{line} imports {name} by its folder name")
        elif target and own and target != own and FLOORS[target] >= FLOORS[own]:
            found.append(f"{module}:{line} imports {name}, which is not on a floor below {own}")
        elif top in TORCH_SIDE and own in ("intentvcs.core", "intentvcs.service"):
            found.append(f"{module}:{line} imports {name} on the torch-free side")
    return found


def test_the_checker_catches_each_kind_of_violation():
    lazy = "def f():\n    from intentvcs.training.model import IntentModel\n"
    assert violations("intentvcs.core.decision", lazy) == [
        "intentvcs.core.decision:2 imports intentvcs.training.model.IntentModel, which is not on a floor below "
        "intentvcs.core"]
    assert violations("intentvcs.service.engine", "import intentvcs.training") != []  # same floor
    assert violations("intentvcs.training.trainer", "from intentvcs.cli.main import main") != []  # upwards
    assert violations("intentvcs.cli.commands.train", "from service.engine import Engine") != []  # folder name
    assert violations("intentvcs.export.exporter", "import benchmarks.common") != []
    assert violations("intentvcs.service.bundle", "import torch") != []
    assert violations("intentvcs.core.oos", "from intentvcs import __version__\nimport numpy") == []
    assert violations("intentvcs.export.exporter", "from intentvcs.training.model import IntentModel\n"
                                                   "from intentvcs.service.engine import Engine") == []


@pytest.mark.parametrize("module", sorted(modules()))
def test_imports_point_down(module):
    path = modules()[module]
    assert violations(module, path.read_text(encoding="utf-8")) == []


def test_every_module_is_on_a_floor():
    """Only the root's ``__init__`` sits outside the floors; a new top-level module must pick one."""
    assert [m for m in modules() if floor_of(m) is None] == ["intentvcs"]


def test_pyproject_installs_every_package_folder():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    on_disk = {name for name, path in modules().items() if path.name == "__init__.py"}
    # Every code package is installed; the only others listed are data folders that say which files they ship.
    assert on_disk <= listed
    assert listed - on_disk == {"intentvcs.training.default_data.assistant"}
    assert set(setuptools["package-data"]) >= listed - on_disk
    assert {k: ROOT / v for k, v in setuptools["package-dir"].items()} == {
        k: v for k, v in FOLDERS.items() if k != "intentvcs"}
