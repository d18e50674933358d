"""The one-command stack (deploy/) and the alert rules hold together, checked with the real tools where they run.

- Prometheus: ``promtool check rules`` on deploy/prometheus/alerts.yml, ``promtool
  check config`` on both Prometheus configs (which must load that one rule
  file), and ``promtool test rules deploy/prometheus/alerts.test.yml`` (committed
  next to the rules): each alert fires on a synthetic anomaly (a day of history
  where it compares with the past) and stays quiet on steady traffic.
  tests/test_prometheus_dashboard.py evaluates the same rules in a real
  Prometheus scraping a real service.
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
RULE_TESTS = DEPLOY / "prometheus" / "alerts.test.yml"  # promtool's unit tests of ALERTS
PROMETHEUS_CONFIGS = (DEPLOY / "prometheus" / "prometheus.yml", ROOT / "monitoring" / "prometheus.yml")
DOCKERFILE = DEPLOY / "Dockerfile"
GRAFANA_PROVISIONING = DEPLOY / "grafana" / "provisioning"
LOOPBACK_BY_DEFAULT = ("${PUBLISH_ADDRESS:-127.0.0.1}:", "${PROMETHEUS_PUBLISH_ADDRESS:-127.0.0.1}:")
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


def test_each_alert_fires_on_its_anomaly_and_not_before():
    """``promtool test rules deploy/prometheus/alerts.test.yml``, as alerts.yml documents it: the committed
    unit tests of the committed rules (annotations included), with a case where each alert fires."""
    spec = load(RULE_TESTS)
    assert [(RULE_TESTS.parent / path).resolve() for path in spec["rule_files"]] == [ALERTS]
    tested = {case["alertname"] for test in spec["tests"] for case in test["alert_rule_test"]
              if case["exp_alerts"]}
    assert tested == {rule["alert"] for rule in alert_rules()}, "every alert has a case where it fires"
    documented = f"promtool test rules {RULE_TESTS.relative_to(ROOT)}"
    assert documented in ALERTS.read_text() and documented in RULE_TESTS.read_text()
    result = run([promtool(), "test", "rules", str(RULE_TESTS.relative_to(ROOT))], cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_reload_alert_lasts_as_long_as_the_broken_bundle():
    """A failed reload is not retried until a file changes: the alert must hold on the gauge, not on the
    counter's recent increase, which would clear while the broken bundle is still in place."""
    [rule] = [rule for rule in alert_rules() if rule["alert"] == "IntentvcsModelReloadFailed"]
    assert "intentvcs_model_reload_failing" in rule["expr"] and "increase(" not in rule["expr"]
    [case] = [test for test in load(RULE_TESTS)["tests"]
              if any(c["alertname"] == "IntentvcsModelReloadFailed" for c in test["alert_rule_test"])]
    failing = next(s["values"] for s in case["input_series"] if s["series"] == "intentvcs_model_reload_failing")
    assert failing == "0x39 1x39 0x20"  # broken from minute 40 to 79
    firing = {int(c["eval_time"].rstrip("m")) for c in case["alert_rule_test"] if c["exp_alerts"]}
    quiet = {int(c["eval_time"].rstrip("m")) for c in case["alert_rule_test"] if not c["exp_alerts"]}
    assert max(firing) >= 40 + 30 and max(quiet) >= 80  # fires 30 minutes after the failure, stops after


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


def test_exposing_the_stack_does_not_expose_prometheus():
    """Prometheus has no login and runs with its lifecycle API (POST /-/quit stops it): PUBLISH_ADDRESS=0.0.0.0,
    which exposes the service and Grafana behind their token and password, published it too."""
    services = compose()["services"]
    assert all(port.startswith("${PUBLISH_ADDRESS:-127.0.0.1}:")
               for name in ("intentvcs", "grafana") for port in services[name]["ports"])
    assert services["prometheus"]["ports"] == ["${PROMETHEUS_PUBLISH_ADDRESS:-127.0.0.1}:${PROMETHEUS_PORT:-9090}:9090"]
    assert "PROMETHEUS_PUBLISH_ADDRESS" in (DEPLOY / "README.md").read_text()
