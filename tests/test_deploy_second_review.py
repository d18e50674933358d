"""Deploy second review: each test failed on the files before their fix.

- The request alerts selected ``service_name="intentvcs"``, but BentoML labels its request metrics with the
  bento's name when it serves a bento (``server_context.bento_name = service.bento.tag.name``), and the GPU
  bento is ``intentvcs-gpu`` (bentofile.gpu.yaml): on the GPU image the 5xx, failure, overload, refusal and
  latency alerts could never fire.
- The stack's images were pulled by tags that move (python:3.11-slim above all) with nothing saying so, and
  pinning a digest meant editing the tracked compose file or Dockerfile.
- deploy/README.md kept /metrics open because "the service's port is published on the loopback only" and told
  to publish it on 0.0.0.0 with INTENTVCS_API_TOKEN, which leaves /metrics (every intent, the served bundle)
  open to whoever reaches the port.
- The dashboard's request panels selected ``service_name="intentvcs"`` too: empty on the GPU bento.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from tests.test_deploy import ALERTS, ROOT, RULE_TESTS, promtool

BENTOFILES = (ROOT / "bentofile.yaml", ROOT / "bentofile.gpu.yaml")
DASHBOARD = ROOT / "monitoring" / "grafana" / "intentvcs-dashboard.json"


def promtool_test(spec: dict, tmp_path: Path) -> tuple[bool, str]:
    """Run promtool's unit tests ``spec`` (its rule_files: the committed alerts.yml) and return its verdict."""
    spec = {**spec, "rule_files": [str(ALERTS)]}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(spec, sort_keys=False))
    result = subprocess.run([promtool(), "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300, check=False)
    output = result.stdout + result.stderr
    assert ("SUCCESS" in output) == (result.returncode == 0), output  # promtool's verdict, not a crash
    return result.returncode == 0, output


def committed_unit_tests() -> dict:
    return yaml.safe_load(RULE_TESTS.read_text())


# ------------------------------------------------------------- the GPU bento's service_name
def test_request_alerts_fire_for_every_bento_the_project_builds(tmp_path):
    """Every committed unit test of BentoML's request series, its series relabelled with the service_name a
    bento serves under (its bentofile's ``name``), must still pass: the same anomalies fire, and no others."""
    names = [yaml.safe_load(path.read_text())["name"] for path in BENTOFILES]
    assert "intentvcs-gpu" in names
    spec = committed_unit_tests()
    request_tests = [test for test in spec["tests"]
                     if any(s["series"].startswith("bentoml_service_") for s in test["input_series"])]
    assert len(request_tests) >= 5
    firing = {case["alertname"] for test in request_tests for case in test["alert_rule_test"] if case["exp_alerts"]}
    assert {"IntentvcsHigh5xxRate", "IntentvcsServerFailures", "IntentvcsOverloaded", "IntentvcsRefusedRequests",
            "IntentvcsHighLatencyP99"} <= firing
    for name in names:
        tests = yaml.safe_load(yaml.safe_dump(request_tests).replace('service_name="intentvcs"',
                                                                     f'service_name="{name}"'))
        ok, output = promtool_test({**spec, "tests": tests}, tmp_path)
        assert ok, f"service_name={name!r}:\n{output[-3000:]}"


# ------------------------------------------------------------------ images by mutable tags
COMPOSE = ROOT / "deploy" / "compose.yaml"
DEPLOY_README = ROOT / "deploy" / "README.md"


def test_every_image_of_the_stack_can_be_pinned_by_digest_without_editing_a_file():
    """python:3.11-slim (the service's base) is a moving tag, rebuilt with each Python patch release and
    Debian update, and a registry's release tag can be pushed again: the stack pulled whatever they named
    that day, nothing said so, and pinning a digest meant editing the tracked compose file or Dockerfile."""
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    [default_base] = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", (ROOT / "deploy" / "Dockerfile").read_text(), re.M)
    assert services["intentvcs"]["build"].get("args", {}).get("PYTHON_IMAGE") == \
        "${PYTHON_IMAGE:-" + default_base + "}"
    for name, variable in (("prometheus", "PROMETHEUS_IMAGE"), ("grafana", "GRAFANA_IMAGE")):
        assert re.fullmatch(r"\$\{" + variable + r":-docker\.io/[\w/-]+:v?\d+\.\d+\.\d+\}",
                            services[name]["image"]), services[name]["image"]
    readme = " ".join(DEPLOY_README.read_text().split())
    for variable in ("PYTHON_IMAGE", "PROMETHEUS_IMAGE", "GRAFANA_IMAGE"):
        assert variable in readme
    assert "@sha256:" in readme and "moving tag" in readme


# ------------------------------------------------------------- /metrics when the stack is exposed
def test_readme_says_exposing_the_service_exposes_metrics_without_a_token():
    """deploy/README.md kept /metrics open "(the service's port is published on the loopback only)" and told
    to publish on 0.0.0.0 together with INTENTVCS_API_TOKEN; then /metrics, which names every intent and the
    served bundle (what the token hides on /status), is open to whoever reaches the port."""
    readme = " ".join(DEPLOY_README.read_text().split())
    [publish] = [item for item in readme.split("- `") if item.startswith("PUBLISH_ADDRESS`")]
    assert "/metrics" in publish and "INTENTVCS_METRICS_TOKEN_REQUIRED" in publish, publish
    assert "published on the loopback only)" not in readme


def test_the_dashboards_request_panels_select_every_bento_the_project_builds():
    """Each service_name matcher of the dashboard's queries matches every bento's name (its bentofile's)."""
    names = [yaml.safe_load(path.read_text())["name"] for path in BENTOFILES]
    matchers = re.findall(r'service_name\s*(=~|=)\s*\\"([^"\\]*)\\"', DASHBOARD.read_text())
    assert matchers
    for operator, value in matchers:
        for name in names:
            assert (re.fullmatch(value, name) if operator == "=~" else value == name), (operator, value, name)
