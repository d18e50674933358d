"""Packaging review: declared floors that admit releases the tests cannot run on.

- ``check-jsonschema`` is in the test extra for one file it ships, the compose-spec schema
  (``check_jsonschema/builtin_schemas/vendor/compose-spec.json``) that tests/test_deploy.py validates
  deploy/compose.yaml against. That file first shipped in check-jsonschema 0.31.1: the wheels of 0.29.0
  to 0.31.0 have no ``vendor/compose-spec.json``, so a test extra resolved at the old floor (``>=0.29``,
  e.g. under a constraints file or a lock made when 0.29 was current) fails that test with
  FileNotFoundError.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def requirement(extra: str, name: str) -> str:
    (found,) = [r for r in PYPROJECT["optional-dependencies"][extra]
                if re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0].lower().replace("_", "-") == name]
    return found


def floor(spec: str) -> tuple[int, ...]:
    found = re.search(r">=\s*([0-9][0-9.]*)", spec)
    assert found, spec
    return tuple(int(part) for part in found.group(1).split("."))


def test_check_jsonschema_floor_ships_the_compose_spec_schema_the_deploy_test_reads():
    deploy_test = (ROOT / "tests" / "test_deploy.py").read_text(encoding="utf-8")
    assert '"vendor" / "compose-spec.json"' in deploy_test  # what the floor below is for
    spec = requirement("test", "check-jsonschema")
    assert floor(spec) >= (0, 31, 1), f"{spec}: compose-spec.json first shipped in check-jsonschema 0.31.1"
