"""``intentvcs serve`` says how many workers the service will run: --workers, INTENTVCS_WORKERS or the default."""

from __future__ import annotations

import os

import pytest

from intentvcs.cli.commands import serve
from intentvcs.service import settings
from tests.helpers.bundle import make_tiny_bundle


class Exec(Exception):
    """Where ``intentvcs serve`` would have become ``bentoml serve``."""


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return make_tiny_bundle(tmp_path_factory.mktemp("serve") / "model")


def announced(bundle, monkeypatch, capsys, workers: int | None = None) -> str:
    def execve(path, args, env):
        raise Exec(env.get("INTENTVCS_WORKERS"))

    monkeypatch.setattr(os, "execve", execve)
    monkeypatch.setattr(serve, "check_port", lambda host, port: None)  # nothing is bound
    with pytest.raises(Exec):
        serve.serve_bundle(bundle, port=3100, workers=workers, provider="cpu")
    [line] = capsys.readouterr().err.splitlines()
    return line


def test_the_worker_count_announced_is_the_one_that_runs(bundle, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)))  # the default on CPU: one per core
    monkeypatch.setattr(settings, "CGROUP_ROOT", tmp_path)  # and no container limit, wherever this runs
    monkeypatch.delenv("INTENTVCS_WORKERS", raising=False)
    assert "(4 workers);" in announced(bundle, monkeypatch, capsys)
    monkeypatch.setenv("INTENTVCS_WORKERS", "1")
    line = announced(bundle, monkeypatch, capsys)
    assert "(1 worker);" in line and "one worker per core" not in line
    assert "(3 workers);" in announced(bundle, monkeypatch, capsys, workers=3)  # --workers over the variable
