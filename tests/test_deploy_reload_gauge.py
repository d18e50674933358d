"""``intentvcs_model_reload_failing`` on a real server's /metrics: what the alert IntentvcsModelReloadFailed holds on.

A broken bundle at the served path is not tried again until one of its files
changes, so the counter ``intentvcs_model_reloads_total{result="failed"}`` moves
once; the gauge stays 1 for as long as the broken bundle stays, and goes back to
0 when a bundle loads (deploy/prometheus/alerts.test.yml has the alert's side).
"""

from __future__ import annotations

import shutil
import time

import httpx

from intentvcs.cli.commands.serve import running
from tests.helpers.bundle import make_tiny_bundle
from tests.helpers.http import metric_samples, reload_counts, wait_for


def failing(url: str) -> float:
    [value] = metric_samples(url, "intentvcs_model_reload_failing").values()  # one series, whatever the workers
    return value


def test_the_failing_gauge_is_1_while_a_broken_bundle_stays_and_0_once_one_loads(tmp_path):
    served = make_tiny_bundle(tmp_path / "model")
    shutil.copy(served / "model.onnx", tmp_path / "model.onnx.good")
    with running(served, extra_env={"INTENTVCS_RELOAD_INTERVAL_S": "1"}) as url:
        assert failing(url) == 0.0  # there from the start, for rules and panels to select
        assert reload_counts(url) == {"ok": 0.0, "failed": 0.0}

        (served / "model.onnx").write_bytes(b"not a graph")  # a copy in progress, or a corrupt export
        wait_for(lambda: reload_counts(url)["failed"] == 1.0)
        assert failing(url) == 1.0
        time.sleep(3.5)  # three more rounds of the watcher: not tried again, still failing
        assert reload_counts(url)["failed"] == 1.0 and failing(url) == 1.0
        assert httpx.post(f"{url}/predict", json={"text": "play some music"}, timeout=30).status_code == 200

        shutil.copy(tmp_path / "model.onnx.good", served / "model.onnx")  # the copy completes
        wait_for(lambda: reload_counts(url)["ok"] == 1.0)
        assert failing(url) == 0.0 and reload_counts(url)["failed"] == 1.0
