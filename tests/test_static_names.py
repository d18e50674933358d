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
    return [f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {w.message}" for w in caught]


@pytest.mark.parametrize("folder", SOURCES)
def test_sources_compile_without_warnings(folder):
    found = [line for path in sorted((ROOT / folder).rglob("*.py")) for line in compile_warnings(path)]
    assert found == []


def test_the_compile_check_finds_an_invalid_escape(tmp_path):
    path = tmp_path / "escape.py"
    path.write_text('def f():\n    """Counts as \\W."""\n', encoding="utf-8")
    assert len(compile_warnings(path)) == 1
