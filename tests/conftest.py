"""Settings every test shares."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def bentoml_home(tmp_path_factory):
    """Servers the tests start keep BentoML's files in a temporary folder, not in the user's ``~/bentoml``.

    ``intentvcs serve`` gives each port a BentoML home of its own under ``$BENTOML_HOME``
    (``intentvcs.cli.commands.serve.server_home``); the tests that start it on random ports left a
    ``~/bentoml/intentvcs-serve/port-*`` folder per run (five over two runs of the suite).
    """
    before = os.environ.get("BENTOML_HOME")
    os.environ["BENTOML_HOME"] = str(tmp_path_factory.mktemp("bentoml-home"))
    yield
    if before is None:
        os.environ.pop("BENTOML_HOME", None)
    else:
        os.environ["BENTOML_HOME"] = before
