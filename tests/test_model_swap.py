"""A model with a name, swapped without a restart: against a real server.

``GET /status`` and the ``X-Intentvcs-Model`` header name the served bundle
(its name and content hash), and so does ``intentvcs_model_info``. Exporting
a new bundle over the served folder (``intentvcs export --out``, which
replaces it atomically) swaps it in while a client keeps sending requests:
no request fails, every answer names the bundle that gave it, and a broken
replacement leaves the previous bundle serving.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time

import httpx
import pytest

from intentvcs.cli.commands.serve import running
from tests.helpers.bundle import make_tiny_bundle
from tests.helpers.http import metric_samples, reload_counts, wait_for


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("swap")
    first = make_tiny_bundle(root / "first", seed=0)
    second = make_tiny_bundle(root / "second", seed=1)
    served = root / "served" / "bundle"
    shutil.copytree(first, served)
    return {"first": first, "second": second, "served": served, "root": root}


def digest(bundle) -> str:
    return json.loads((bundle / "manifest.json").read_text())["digest"]


def model_info(url: str) -> dict[str, float]:
    return {dict(labels)["bundle_digest"]: value
            for labels, value in metric_samples(url, "intentvcs_model_info").items()}


def test_status_names_the_model_and_a_new_export_is_swapped_in_without_a_failed_request(models):
    first, served = digest(models["first"]), models["served"]
    with running(served, extra_env={"INTENTVCS_RELOAD_INTERVAL_S": "1"}) as url:
        status = httpx.get(f"{url}/status", timeout=10).json()
        assert (status["name"], status["bundle_digest"]) == ("first", first)
        assert status["labels"] and str(served) not in json.dumps(status)  # named by content, not by path
        assert model_info(url) == {first: 1.0}

        answers: list[tuple[int, str]] = []
        stop = threading.Event()

        def client() -> None:  # a steady stream of requests during the swap, bounded in time
            deadline = time.monotonic() + 120
            while not stop.is_set() and time.monotonic() < deadline:
                response = httpx.post(f"{url}/predict", json={"text": "play some music"}, timeout=30)
                answers.append((response.status_code, response.headers.get("x-intentvcs-model", "")))

        thread = threading.Thread(target=client)
        thread.start()
        try:
            wait_for(lambda: len(answers) >= 5)
            # The user's way to ship a new model: export over the served folder.
            export = subprocess.run([sys.executable, "-m", "intentvcs.cli.main", "export", "--checkpoint",
                                     str(models["second"].parent / "checkpoint"), "--out", str(served),
                                     "--name", "candidate"], capture_output=True, text=True, timeout=300)
            assert export.returncode == 0, export.stderr[-2000:]
            second = digest(served)
            wait_for(lambda: httpx.get(f"{url}/status", timeout=10).json()["bundle_digest"] == second)
            swapped_at = len(answers)
            wait_for(lambda: len(answers) >= swapped_at + 5)
        finally:
            stop.set()
            thread.join()
        assert {status for status, _ in answers} == {200}
        headers = [header for _, header in answers]
        assert headers[0] == f"first@{first[:19]}" and headers[-1] == f"candidate@{second[:19]}"
        assert set(headers) == {headers[0], headers[-1]}
        assert headers == sorted(headers, key=lambda h: h.startswith("candidate"))  # one switch, never back
        assert model_info(url) == {first: 0.0, second: 1.0}
        assert reload_counts(url) == {"ok": 1.0, "failed": 0.0}

        # A broken replacement: logged and counted, and the previous bundle keeps serving.
        broken = models["root"] / "broken"
        shutil.copytree(served, broken)
        (broken / "model.onnx").write_bytes(b"not a graph")
        os.replace(served, models["root"] / "old")
        os.replace(broken, served)
        wait_for(lambda: reload_counts(url)["failed"] == 1.0)
        assert httpx.get(f"{url}/status", timeout=10).json()["bundle_digest"] == second
        assert httpx.post(f"{url}/predict", json={"text": "play some music"}, timeout=30).status_code == 200
        time.sleep(3.5)  # three more rounds of the watcher: the same broken folder is not tried again
        assert reload_counts(url)["failed"] == 1.0

        # The copy completes later (the graph written in place): tried again, and swapped in.
        shutil.copy(models["root"] / "old" / "model.onnx", served / "model.onnx")
        wait_for(lambda: reload_counts(url)["ok"] == 2.0)
        assert httpx.get(f"{url}/status", timeout=10).json()["bundle_digest"] == second
        assert reload_counts(url)["failed"] == 1.0
