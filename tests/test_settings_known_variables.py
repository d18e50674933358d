"""A misspelt ``INTENTVCS_*`` variable: the service and ``intentvcs serve`` name it, with the closest variable
the project reads, and start all the same; every variable the project reads is known in one place
(``intentvcs.service.settings.KNOWN_VARIABLES``), so none of them is warned about."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from intentvcs.cli.commands import serve
from intentvcs.service import settings
from tests.helpers.bundle import make_tiny_bundle

ROOT = Path(__file__).resolve().parents[1]
# The project's own files: not the tests (they set variables on purpose), nor what is built or installed.
SKIPPED = {"tests", "build", "runs", "dist"}
SUFFIXES = {".py", ".yaml", ".yml", ".sh", ".toml", ".md", ".cfg", ".txt"}
# A variable by its full name, or a name after ENV_PREFIX in Python (f"{ENV_PREFIX}X", ENV_PREFIX + "X").
NAMED = re.compile(r"\bINTENTVCS_([A-Z0-9_]*[A-Z0-9])\b|\{ENV_PREFIX\}([A-Z0-9_]*[A-Z0-9])\b"
                   r"|ENV_PREFIX \+ \"([A-Z0-9_]+)\"")


def project_files():
    for path in ROOT.iterdir():
        if path.name.startswith(".") or path.name in SKIPPED or path.name.endswith(".egg-info"):
            continue
        for file in [path] if path.is_file() else path.rglob("*"):
            if file.is_file() and "__pycache__" not in file.parts \
                    and (file.suffix in SUFFIXES or file.name.startswith("Dockerfile")):
                yield file


def names_in_the_project() -> dict[str, set[str]]:
    """Every ``INTENTVCS_*`` name the project's files read, document or pass on, with the files naming it."""
    found: dict[str, set[str]] = {}
    for file in project_files():
        for match in NAMED.finditer(file.read_text(encoding="utf-8", errors="replace")):
            name = settings.ENV_PREFIX + next(group for group in match.groups() if group)
            found.setdefault(name, set()).add(str(file.relative_to(ROOT)))
    return found


def test_a_misspelt_variable_is_named_with_the_closest_one():
    environ = {"INTENTVCS_MAX_TEXT": "100", "INTENTVCS_WORKER": "2", "INTENTVCS_MAX_TEXTS": "7",
               "intentvcs_provider": "cpu", "INTENTVCS_ZZZ": "1", "OTHER_TOOL_WORKER": "2", "PATH": "/bin"}
    warnings = settings.unknown_variables(environ)
    assert len(warnings) == 4, warnings
    by_name = {warning.split(" ", 1)[0]: warning for warning in warnings}
    assert "did you mean INTENTVCS_MAX_TEXTS?" in by_name["INTENTVCS_MAX_TEXT"]
    assert "did you mean INTENTVCS_WORKERS?" in by_name["INTENTVCS_WORKER"]
    assert "did you mean INTENTVCS_PROVIDER?" in by_name["intentvcs_provider"]  # names are case-sensitive
    assert "did you mean" not in by_name["INTENTVCS_ZZZ"] and "ignored" in by_name["INTENTVCS_ZZZ"]
    assert all("ignored" in warning for warning in warnings)
    # The values are never repeated: a misspelt INTENTVCS_API_TOKE would otherwise print the token.
    assert not any("100" in warning for warning in warnings)
    # Reading the settings is unchanged: an unknown variable is a warning, never an error.
    assert settings.Limits.from_env(environ).max_text_chars == settings.Limits.max_text_chars


def test_every_variable_the_project_reads_is_known_and_none_is_warned_about():
    found = names_in_the_project()
    # The scan still sees the variables read outside the service's settings.
    for name in ("INTENTVCS_DATA", "INTENTVCS_WORDNET_DIR", "INTENTVCS_CMUDICT", "INTENTVCS_API_TOKEN",
                 "INTENTVCS_BUNDLE_NAME", "INTENTVCS_MAX_TEXT_CHARS"):
        assert name in found, name
    unknown = {name: sorted(files) for name, files in found.items() if name not in settings.KNOWN_VARIABLES}
    assert unknown == {}
    assert settings.unknown_variables({name: "1" for name in [*found, *settings.KNOWN_VARIABLES]}) == []


def test_the_settings_read_are_the_fields_the_known_names_come_from():
    """``KNOWN_VARIABLES`` takes the service's names from the fields of Settings and Limits: each name
    ``from_env`` reads must be one of them, or a new setting would be warned about as a misspelling."""
    source = Path(settings.__file__).read_text(encoding="utf-8")
    read = set(re.findall(r'_env_\w+\("([A-Z_]+)"', source)) | set(re.findall(r'ENV_PREFIX \+ "([A-Z_]+)"', source))
    fields = {field.name.upper() for cls in (settings.Settings, settings.Limits) for field in dataclasses.fields(cls)}
    assert len(read) > 15 and read <= fields, read - fields
    assert {settings.ENV_PREFIX + name for name in fields} <= settings.KNOWN_VARIABLES


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return make_tiny_bundle(tmp_path_factory.mktemp("misspelt") / "model")


def test_intentvcs_serve_names_a_misspelt_variable_once(bundle, tmp_path):
    """The command printed it and then the server it starts logged it again."""
    log = tmp_path / "serve.log"
    port = serve.free_port()
    env = {**os.environ, "HOME": str(tmp_path), "INTENTVCS_WORKER": "1", "INTENTVCS_WORKERS": "1"}
    with log.open("w") as out:
        process = subprocess.Popen([sys.executable, "-m", "intentvcs.cli.main", "serve", "--bundle", str(bundle),
                                    "--port", str(port)], stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 120
        while "engine: serving" not in log.read_text() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        process.terminate()
        process.wait(timeout=60)
    text = log.read_text()
    assert "engine: serving" in text, text[-3000:]
    lines = [line for line in text.splitlines() if "INTENTVCS_WORKER " in line]
    assert len(lines) == 1, lines
    assert "did you mean INTENTVCS_WORKERS?" in lines[0]


def test_the_server_names_a_misspelt_variable_once_and_serves(bundle, tmp_path):
    """Once per server start (by the process that starts it), not once per worker."""
    import httpx

    log = tmp_path / "server.log"
    with serve.running(bundle, workers=2, extra_env={"INTENTVCS_MAX_TEXT": "5"}, log_path=log) as url:
        # The setting meant was not applied: the default limit answers.
        assert httpx.post(f"{url}/predict", json={"texts": ["play some music please"]}, timeout=30).status_code == 200
    lines = [line for line in log.read_text().splitlines() if "INTENTVCS_MAX_TEXT " in line]
    assert len(lines) == 1, lines
    assert "WARNING" in lines[0] and "did you mean INTENTVCS_MAX_TEXTS?" in lines[0]
