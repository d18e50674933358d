"""The one-command stack (deploy/) and the alert rules hold together, checked with the real tools where they run.

- Prometheus: ``promtool check rules`` on deploy/prometheus/alerts.yml, ``promtool
  check config`` on both Prometheus configs (which must load that one rule
  file), and ``promtool test rules``: each alert fires on a synthetic anomaly
  (a day of history where it compares with the past) and stays quiet on
  steady traffic. tests/test_prometheus_dashboard.py evaluates the same rules
  in a real Prometheus scraping a real service.
- Compose: ``docker compose config`` (Docker Compose v2) and ``podman-compose
  config`` when installed, and the compose-spec JSON schema when a package
  ships it (check-jsonschema vendors it); always a structural check of what
  the stack relies on (loopback ports, the token passed through, the bundle
  mounted read-only, the names Prometheus and Grafana reach each other by).
- Grafana: no Grafana runs here (Debian has no package), so its provisioning
  files are checked for the keys Grafana requires and against the compose
  mounts; the dashboard's own checks are in tests/test_prometheus_dashboard.py.
- Images: no image can be built here (no registry to pull a base image from,
  see deploy/README.md), so deploy/Dockerfile is checked as text, and so is
  the Dockerfile ``bentoml build`` generates.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from intentvcs.service.prometheus_metrics import SERVER_ERROR_REASONS
from tests.test_bentoml_build import TRAINING_PACKAGES, bento, requirement_names  # noqa: F401 (bento: fixture)
from tests.test_prometheus_dashboard import DASHBOARD, alert_rules, prometheus_binary

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
PROMETHEUS_CONFIGS = (DEPLOY / "prometheus" / "prometheus.yml", ROOT / "monitoring" / "prometheus.yml")
DOCKERFILE = DEPLOY / "Dockerfile"
GRAFANA_PROVISIONING = DEPLOY / "grafana" / "provisioning"
LOOPBACK_BY_DEFAULT = "${PUBLISH_ADDRESS:-127.0.0.1}:"
# Server-side reasons no alert needs: the client went away.
UNALERTED_SERVER_REASONS = {"audit_cancelled"}


def load(path: Path):
    return yaml.safe_load(path.read_text())


def compose() -> dict:
    return load(COMPOSE)


# ------------------------------------------------------------------ Prometheus
def promtool() -> str:
    """promtool, from the Debian package prometheus (installed as for the dashboard test; skips, or fails in CI)."""
    prometheus_binary()
    return shutil.which("promtool") or "/usr/bin/promtool"


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=120, **kwargs)


def test_promtool_checks_the_rules():
    result = run([promtool(), "check", "rules", str(ALERTS)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout


@pytest.mark.parametrize("config", PROMETHEUS_CONFIGS, ids=lambda path: str(path.relative_to(ROOT)))
def test_promtool_checks_the_config_and_its_rules(config):
    """Both configs pass and load the rules' one home (a rule_files glob matching nothing would pass silently)."""
    result = run([promtool(), "check", "config", str(config)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 1 rule files found" in result.stdout
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout
    parsed = load(config)
    assert [(config.parent / path).resolve() for path in parsed["rule_files"]] == [ALERTS]
    assert [job["job_name"] for job in parsed["scrape_configs"]] == ["intentvcs"]  # what the rules select


def test_alert_rules_are_complete():
    rules = alert_rules()
    names = [rule["alert"] for rule in rules]
    assert len(names) == len(set(names))
    for rule in rules:
        assert re.fullmatch(r"\d+[smh]", rule["for"]), rule["alert"]
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
    # What the deployment issue asked for: errors, p99 latency, out-of-scope spike, confidence, intent mix.
    assert {"IntentvcsHigh5xxRate", "IntentvcsServerFailures", "IntentvcsHighLatencyP99",
            "IntentvcsOutOfScopeSpike", "IntentvcsConfidenceShift", "IntentvcsLowConfidenceRise",
            "IntentvcsIntentMixDrift"} <= set(names)
    drift = [rule for rule in rules if rule["alert"] in
             ("IntentvcsOutOfScopeSpike", "IntentvcsConfidenceShift", "IntentvcsLowConfidenceRise",
              "IntentvcsIntentMixDrift", "IntentvcsIntentMixShift")]
    assert all(" offset " in rule["expr"] for rule in drift), "a drift alert compares with the service's own past"


def test_error_reasons_in_the_rules_are_the_services():
    """Each reason an alert selects exists; each server-side reason is alerted on (or listed as not needing it)."""
    selected = set()
    for rule in alert_rules():
        for alternatives in re.findall(r'reason=~"([^"]+)"', rule["expr"]):
            selected.update(alternatives.split("|"))
    assert selected <= set(SERVER_ERROR_REASONS), selected - set(SERVER_ERROR_REASONS)
    missing = set(SERVER_ERROR_REASONS) - selected - UNALERTED_SERVER_REASONS
    assert not missing, (f"server-side reasons no alert covers: {sorted(missing)}; add them to an alert's reason "
                         "regex in deploy/prometheus/alerts.yml, or to UNALERTED_SERVER_REASONS here")


# promtool's unit tests of the rules: one-minute samples (`a+bxn` is n+1 values from a in steps of b), rules
# evaluated every 5 minutes (every minute over 26 hours of history took half a minute of CPU). Traffic where
# nothing is wrong first, then the anomaly each alert is for.
RULE_TESTS = """
evaluation_interval: 5m
tests:
  - name: target down
    interval: 1m
    input_series:
      - series: 'up{job="intentvcs", instance="intentvcs:3000"}'
        values: '1x5 0x20'
    alert_rule_test:
      - {eval_time: 5m, alertname: IntentvcsTargetDown, exp_alerts: []}
      - eval_time: 15m
        alertname: IntentvcsTargetDown
        exp_alerts: [{exp_labels: {severity: critical, job: intentvcs, instance: "intentvcs:3000"}}]

  - name: server errors, from minute 31 on 1 request in 11
    interval: 1m
    input_series:
      - series: 'bentoml_service_request_total{service_name="intentvcs", endpoint="/predict", http_response_code="200"}'
        values: '0+60x60'
      - series: 'bentoml_service_request_total{service_name="intentvcs", endpoint="/predict", http_response_code="500"}'
        values: '0x30 6+6x29'
      - series: 'intentvcs_request_errors_total{reason="internal_error"}'
        values: '0x30 6+6x29'
      - series: 'intentvcs_request_errors_total{reason="empty_text"}'  # a client's mistake: no server failure
        values: '0+30x60'
    alert_rule_test:
      - {eval_time: 25m, alertname: IntentvcsHigh5xxRate, exp_alerts: []}
      - {eval_time: 25m, alertname: IntentvcsServerFailures, exp_alerts: []}
      - eval_time: 50m
        alertname: IntentvcsHigh5xxRate
        exp_alerts: [{exp_labels: {severity: critical}}]
      - eval_time: 50m
        alertname: IntentvcsServerFailures
        exp_alerts: [{exp_labels: {severity: critical, reason: internal_error}}]

  - name: from minute 31, a third of the requests refused, some overloaded, 1 in 11 slower than 1 s
    interval: 1m
    input_series:
      - series: 'bentoml_service_request_total{service_name="intentvcs", endpoint="/predict", http_response_code="200"}'
        values: '0+60x90'
      - series: 'bentoml_service_request_total{service_name="intentvcs", endpoint="/predict", http_response_code="400"}'
        values: '0x30 30+30x59'
      - series: 'intentvcs_request_errors_total{reason="overloaded"}'
        values: '0x30 3+3x59'
      - series: 'bentoml_service_request_duration_seconds_bucket{service_name="intentvcs", endpoint="/predict", le="0.1"}'
        values: '0+60x90'
      - series: 'bentoml_service_request_duration_seconds_bucket{service_name="intentvcs", endpoint="/predict", le="1"}'
        values: '0+60x90'
      - series: 'bentoml_service_request_duration_seconds_bucket{service_name="intentvcs", endpoint="/predict", le="+Inf"}'
        values: '0+60x30 1866+66x59'
    alert_rule_test:
      - {eval_time: 30m, alertname: IntentvcsRefusedRequests, exp_alerts: []}
      - {eval_time: 30m, alertname: IntentvcsOverloaded, exp_alerts: []}
      - {eval_time: 30m, alertname: IntentvcsHighLatencyP99, exp_alerts: []}
      - eval_time: 85m
        alertname: IntentvcsRefusedRequests
        exp_alerts: [{exp_labels: {severity: warning}}]
      - eval_time: 85m
        alertname: IntentvcsOverloaded
        exp_alerts: [{exp_labels: {severity: warning, reason: overloaded}}]
      - eval_time: 85m
        alertname: IntentvcsHighLatencyP99
        exp_alerts: [{exp_labels: {severity: warning}}]
      - {eval_time: 85m, alertname: IntentvcsServerFailures, exp_alerts: []}

  - name: audit jobs only, from minute 31 each stopped at its deadline (its get answers 504)
    interval: 1m
    input_series:
      - series: 'bentoml_service_request_total{service_name="intentvcs", endpoint="/audit/job/submit", http_response_code="200"}'
        values: '0+6x60'
      - series: 'bentoml_service_request_total{service_name="intentvcs", endpoint="/audit/job/get", http_response_code="200"}'
        values: '0+6x30 180x29'
      - series: 'bentoml_service_request_total{service_name="intentvcs", endpoint="/audit/job/get", http_response_code="504"}'
        values: '0x30 6+6x29'
      - series: 'intentvcs_request_errors_total{reason="audit_timeout"}'
        values: '0x30 6+6x29'
    alert_rule_test:
      - {eval_time: 25m, alertname: IntentvcsServerFailures, exp_alerts: []}
      - eval_time: 50m
        alertname: IntentvcsServerFailures
        exp_alerts: [{exp_labels: {severity: critical, reason: audit_timeout}}]
      - eval_time: 50m
        alertname: IntentvcsHigh5xxRate
        exp_alerts: [{exp_labels: {severity: critical}}]

  - name: a bundle swapped in at minute 10, a broken one refused at minute 40
    interval: 1m
    input_series:
      - series: 'intentvcs_model_reloads_total{result="ok"}'
        values: '0x10 1x60'
      - series: 'intentvcs_model_reloads_total{result="failed"}'
        values: '0x40 1x30'
    alert_rule_test:
      - {eval_time: 30m, alertname: IntentvcsModelReloadFailed, exp_alerts: []}
      - eval_time: 50m
        alertname: IntentvcsModelReloadFailed
        exp_alerts: [{exp_labels: {severity: warning}}]
      - {eval_time: 60m, alertname: IntentvcsModelReloadFailed, exp_alerts: []}  # no new failure for 10 minutes

  - name: out-of-scope share from 5% to 20% after 25 hours
    interval: 1m
    input_series:
      - series: 'intentvcs_input_length_characters_count'
        values: '0+60x1560'
      - series: 'intentvcs_out_of_scope_total'
        values: '0+3x1500 4512+12x59'
    alert_rule_test:
      - {eval_time: 60m, alertname: IntentvcsOutOfScopeSpike, exp_alerts: []}
      - {eval_time: 1490m, alertname: IntentvcsOutOfScopeSpike, exp_alerts: []}
      - eval_time: 1550m
        alertname: IntentvcsOutOfScopeSpike
        exp_alerts: [{exp_labels: {severity: warning}}]

  - name: mean top confidence from 0.8 to 0.5 after 25 hours, share at most 0.5 from 10% to 60%
    interval: 1m
    input_series:
      - series: 'intentvcs_confidence_count'
        values: '0+60x1600'
      - series: 'intentvcs_confidence_sum'
        values: '0+48x1500 72030+30x99'
      - series: 'intentvcs_confidence_bucket{le="0.5"}'
        values: '0+6x1500 9036+36x99'
    alert_rule_test:
      - {eval_time: 1490m, alertname: IntentvcsConfidenceShift, exp_alerts: []}
      - {eval_time: 1490m, alertname: IntentvcsLowConfidenceRise, exp_alerts: []}
      - eval_time: 1595m
        alertname: IntentvcsConfidenceShift
        exp_alerts: [{exp_labels: {severity: warning}}]
      - eval_time: 1595m
        alertname: IntentvcsLowConfidenceRise
        exp_alerts: [{exp_labels: {severity: warning}}]

  - name: intent mix from 50/50 to 90/10 after 25 hours, for 3 hours
    interval: 1m
    input_series:
      - series: 'intentvcs_predictions_total{intent="PlayMusic"}'
        values: '0+30x1500 45054+54x199'
      - series: 'intentvcs_predictions_total{intent="BookRestaurant"}'
        values: '0+30x1500 45006+6x199'
      - series: 'intentvcs_predictions_total{intent="out_of_scope"}'
        values: '0x1700'
    alert_rule_test:
      - {eval_time: 1490m, alertname: IntentvcsIntentMixDrift, exp_alerts: []}
      - {eval_time: 1490m, alertname: IntentvcsIntentMixShift, exp_alerts: []}
      # Within the hour the fast variant fires; against yesterday the shift is still pending.
      - eval_time: 1535m
        alertname: IntentvcsIntentMixShift
        exp_alerts:
          - {exp_labels: {severity: warning, intent: PlayMusic}}
          - {exp_labels: {severity: warning, intent: BookRestaurant}}
      - {eval_time: 1535m, alertname: IntentvcsIntentMixDrift, exp_alerts: []}
      # Three hours on, the new mix is the recent normal, but not yesterday's.
      - {eval_time: 1680m, alertname: IntentvcsIntentMixShift, exp_alerts: []}
      - eval_time: 1680m
        alertname: IntentvcsIntentMixDrift
        exp_alerts:
          - {exp_labels: {severity: warning, intent: PlayMusic}}
          - {exp_labels: {severity: warning, intent: BookRestaurant}}
"""


def test_each_alert_fires_on_its_anomaly_and_not_before(tmp_path):
    """``promtool test rules`` on the rules without their annotations (their wording is not under test here;
    promtool compares annotations verbatim, and ``check rules`` has parsed their templates)."""
    rules = load(ALERTS)
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations")
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(rules))
    spec = yaml.safe_load(RULE_TESTS)
    spec["rule_files"] = ["alerts.yml"]
    tested = {case["alertname"] for test in spec["tests"] for case in test["alert_rule_test"]
              if case["exp_alerts"]}
    assert tested == {rule["alert"] for rule in alert_rules()}, "every alert has a case where it fires"
    (tmp_path / "alerts.test.yml").write_text(yaml.safe_dump(spec))
    result = run([promtool(), "test", "rules", "alerts.test.yml"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


# --------------------------------------------------------------------- Grafana
def mounts(service: dict) -> dict[str, dict]:
    """The long-syntax bind mounts of a compose service, by target."""
    return {volume["target"]: volume for volume in service["volumes"] if isinstance(volume, dict)}


def test_grafana_datasource_is_the_stacks_prometheus():
    provisioning = load(GRAFANA_PROVISIONING / "datasources" / "prometheus.yaml")
    assert provisioning["apiVersion"] == 1
    [datasource] = provisioning["datasources"]
    assert {"name", "type", "url", "access"} <= set(datasource)
    # The dashboard's variable lists data sources of this type and starts on the default one.
    variable = json.loads(DASHBOARD.read_text())["templating"]["list"][0]
    assert datasource["type"] == variable["query"] == "prometheus" and datasource["isDefault"] is True
    assert datasource["access"] == "proxy"
    # Reached by its compose service name, on Prometheus' default port (the command does not change it).
    services = compose()["services"]
    assert datasource["url"] == "http://prometheus:9090"
    assert not [arg for arg in services["prometheus"]["command"] if arg.startswith("--web.listen-address")]


def test_grafana_dashboard_provider_reads_the_mounted_dashboard():
    provisioning = load(GRAFANA_PROVISIONING / "dashboards" / "intentvcs.yaml")
    assert provisioning["apiVersion"] == 1
    [provider] = provisioning["providers"]
    assert {"name", "type", "options"} <= set(provider) and provider["type"] == "file"
    grafana = mounts(compose()["services"]["grafana"])
    # The one copy of the dashboard, mounted into the folder the provider reads.
    [dashboard] = [m for m in grafana.values() if m["source"].endswith(".json")]
    assert (DEPLOY / dashboard["source"]).resolve() == DASHBOARD
    assert Path(dashboard["target"]).parent == Path(provider["options"]["path"])
    assert (DEPLOY / grafana["/etc/grafana/provisioning"]["source"]).resolve() == GRAFANA_PROVISIONING
    assert not list(ROOT.glob("deploy/**/*.json")), "the dashboard lives in monitoring/ only"


# --------------------------------------------------------------------- compose
def test_compose_wires_the_stack():
    spec = compose()
    services = spec["services"]
    assert set(services) == {"intentvcs", "prometheus", "grafana"}
    for name, service in services.items():
        for port in service["ports"]:
            assert port.startswith(LOOPBACK_BY_DEFAULT), f"{name}: {port} is not on loopback by default"
        for mount in mounts(service).values():
            if mount["type"] == "bind":
                assert mount["read_only"] is True, f"{name}: {mount['target']}"
                if mount["target"] != "/models":  # the bundle is the user's; the rest ships with the repository
                    assert (DEPLOY / mount["source"]).exists(), f"{name}: {mount['source']}"
    service = services["intentvcs"]
    assert (DEPLOY / service["build"]["context"]).resolve() == ROOT
    assert (ROOT / service["build"]["dockerfile"]).resolve() == DOCKERFILE
    assert "INTENTVCS_API_TOKEN" in service["environment"] and service["environment"]["INTENTVCS_API_TOKEN"] is None
    # The bundle's folder is mounted, not the bundle: an export renames a new bundle over the old one, and a
    # bind mount of the old folder would go on showing it (no hot swap in the container).
    models = mounts(service)["/models"]
    assert models["type"] == "bind" and models["source"] == "${INTENTVCS_MODELS_DIR:-../runs/default}"
    assert service["environment"]["INTENTVCS_BUNDLE"] == "/models/${INTENTVCS_BUNDLE_NAME:-bundle}"
    assert any(port.endswith(":3000") for port in service["ports"])
    # Prometheus: its config is the mounted deploy/prometheus/prometheus.yml, scraping the service by name.
    prometheus = services["prometheus"]
    config_mount = mounts(prometheus)["/etc/prometheus"]
    assert (DEPLOY / config_mount["source"]).resolve() == PROMETHEUS_CONFIGS[0].parent
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    targets = load(PROMETHEUS_CONFIGS[0])["scrape_configs"][0]["static_configs"][0]["targets"]
    assert targets == ["intentvcs:3000"]


def test_compose_file_matches_the_compose_spec_schema():
    """Against the compose-spec schema that check-jsonschema ships (found without importing the package)."""
    import jsonschema

    spec = importlib.util.find_spec("check_jsonschema")  # in the test extra
    assert spec is not None, "check-jsonschema is not installed: pip install -e '.[test]'"
    [package] = spec.submodule_search_locations
    schema = json.loads((Path(package) / "builtin_schemas" / "vendor" / "compose-spec.json").read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = [f"{list(error.absolute_path)}: {error.message}" for error in validator.iter_errors(compose())]
    assert not errors, errors


# ---------------------------------------------------------------------- images
def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    return [(m.group(1).upper(), m.group(2).strip()) for m in re.finditer(r"^\s*(\w+)\s+(.*)$", joined, re.M)]


def test_service_dockerfile_installs_the_wheel_and_serves_the_mounted_bundle():
    text = DOCKERFILE.read_text()
    steps = dockerfile_instructions(text)
    run_steps = " ".join(args for op, args in steps if op == "RUN")
    assert "pip wheel --no-cache-dir --no-deps -w /dist ." in run_steps
    assert '"${wheel}[cpu,serve]"' in run_steps  # the wheel with the torch-free serving extras, one runtime
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    installed = {re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0].lower() for name in ("cpu", "serve")
                 for req in extras[name]}
    assert not installed & TRAINING_PACKAGES
    assert not re.search(r"\b(torch|transformers|optimum|train|export)\b", run_steps)
    assert ("EXPOSE", "3000") in steps
    assert ("USER", "intentvcs") in steps
    [cmd] = [json.loads(args) for op, args in steps if op == "CMD"]
    assert cmd == ["intentvcs", "serve", "--host", "0.0.0.0", "--port", "3000"]  # the bundle: $INTENTVCS_BUNDLE
    assert "INTENTVCS_BUNDLE=/bundle" in text
    # Every folder the wheel is built from is copied in and let through the build context's ignore file.
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {"intentvcs", *setuptools["package-dir"].values()}
    copied = {args.split()[0] for op, args in steps if op == "COPY" and not args.startswith("--from")}
    assert folders <= copied
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    assert "*" in ignore and {f"!{name}/" for name in folders} <= set(ignore)
    assert {"!pyproject.toml", "!README.md", "!LICENSE"} <= set(ignore)


@pytest.mark.parametrize("bento", ["bentofile.yaml"], indirect=True)
def test_bento_dockerfile_installs_the_wheel_without_torch(bento):
    """What ``bentoml containerize`` would build (the alternative to deploy/Dockerfile): ``bentoml build``'s
    generated Dockerfile installs the bento's requirements and the project's wheel, exposes 3000, no torch."""
    env = bento.path / "env"
    dockerfile = (env / "docker" / "Dockerfile").read_text()
    steps = dockerfile_instructions(dockerfile)
    assert ("EXPOSE", "3000") in steps
    assert any(op == "RUN" and "env/python/install.sh" in args for op, args in steps)
    install = (env / "python" / "install.sh").read_text()
    assert "wheels/*.whl" in install or "WHEELS_DIR" in install
    assert [wheel.name for wheel in (env / "python" / "wheels").glob("*.whl")] == ["intentvcs-0.1.0-py3-none-any.whl"]
    assert not requirement_names(env / "python" / "requirements.txt") & TRAINING_PACKAGES
    assert not re.search(r"\b(torch|transformers|optimum)\b", dockerfile + install)
    # Same base image as deploy/Dockerfile's default.
    [base] = [args.split()[0] for op, args in steps if op == "FROM"]
    assert f"ARG PYTHON_IMAGE={base}" in DOCKERFILE.read_text()
