"""Every name the code uses is defined (pyflakes over the source tree), and every file compiles
without a warning.

A benchmark once ran all of its servers and then lost every figure at its
last line, on an ``os`` whose import a refactor had removed; code that only
runs at the end of a long job is where such a name hides. Unused imports are
not checked here (a few are kept for their side effects).
"""

from __future__ import annotations

from pathlib import Path

import warnings

import pytest
from pyflakes import api, messages, reporter

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("intentvcs", "training", "export", "service", "benchmarks", "tests")
# The messages that mean a name is used but never bound (or bound only later).
UNDEFINED = (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)


class _Collected(reporter.Reporter):
    def __init__(self) -> None:
        super().__init__(None, None)
        self.found: list[str] = []

    def flake(self, message) -> None:
        if isinstance(message, UNDEFINED):
            self.found.append(str(message))

    def syntaxError(self, filename, msg, lineno, offset, text) -> None:  # noqa: N802 (pyflakes' name)
        self.found.append(f"{filename}:{lineno}: {msg}")

    def unexpectedError(self, filename, msg) -> None:  # noqa: N802
        self.found.append(f"{filename}: {msg}")


@pytest.mark.parametrize("folder", SOURCES)
def test_no_undefined_names(folder):
    collected = _Collected()
    files = sorted((ROOT / folder).rglob("*.py"))
    assert files
    for path in files:
        api.checkPath(str(path), collected)
    assert collected.found == []


def test_the_check_finds_an_undefined_name(tmp_path):
    path = tmp_path / "late.py"
    path.write_text("def last_step():\n    return os.cpu_count()\n", encoding="utf-8")
    collected = _Collected()
    api.checkPath(str(path), collected)
    assert len(collected.found) == 1 and "undefined name 'os'" in collected.found[0]


def compile_warnings(path: Path) -> list[str]:
    """What compiling ``path`` warns of (an invalid escape such as "\\W" in a docstring: an error in a
    future Python, and a warning in every fresh checkout's test log now)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compile(path.read_text(encoding="utf-8"), str(path), "exec")
    return [f"{_shown(path)}: {w.message}" for w in caught]


@pytest.mark.parametrize("folder", SOURCES)
def test_sources_compile_without_warnings(folder):
    found = [line for path in sorted((ROOT / folder).rglob("*.py")) for line in compile_warnings(path)]
    assert found == []


def test_the_compile_check_finds_an_invalid_escape(tmp_path):
    path = tmp_path / "escape.py"
    path.write_text('def f():\n    """Counts as \\W."""\n', encoding="utf-8")
    assert len(compile_warnings(path)) == 1


def project_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """``(line, module, name)`` of every import of this project's modules in ``path``, those inside functions
    included (``name`` None for ``import module``)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names]
    return [(line, module, name) for line, module, name in found
            if module.split(".")[0] in ("intentvcs", "benchmarks", "tests")]


def missing_imports(path: Path) -> list[str]:
    """The project imports of ``path`` that name no module, or no name in their module."""
    import importlib
    import importlib.util

    missing = []
    for line, module, name in project_imports(path):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            missing.append(f"{_shown(path)}:{line}: no module {module}")
        elif name is not None and name != "*" and not hasattr(importlib.import_module(module), name) \
                and not _is_submodule(module, name):
            missing.append(f"{_shown(path)}:{line}: {module} has no {name}")
    return missing


@pytest.mark.parametrize("folder", SOURCES)
def test_every_project_import_resolves(folder):
    """An import inside a function runs only when the function does: a benchmark's harness import broke
    when the harness moved, and nothing noticed until the benchmark was run again."""
    assert [line for path in sorted((ROOT / folder).rglob("*.py")) for line in missing_imports(path)] == []


def test_the_import_check_finds_a_moved_module_and_a_missing_name(tmp_path):
    script = tmp_path / "bench.py"
    script.write_text("def main():\n    from intentvcs.cli.commands.bench import engine_records\n"
                      "    from intentvcs.core.atomic import no_such_function\n", encoding="utf-8")
    assert missing_imports(script) == [f"{script}:2: no module intentvcs.cli.commands.bench",
                                       f"{script}:3: intentvcs.core.atomic has no no_such_function"]


def _is_submodule(package: str, name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(f"{package}.{name}") is not None
    except ModuleNotFoundError:  # ``package`` is a module, not a package
        return False


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
