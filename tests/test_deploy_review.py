"""Review of the deployment stack (deploy/): alert rules that paged on the wrong thing or could not fire, and
a setting deploy/README.md told of wrongly.

Each case is a group of the rules' committed unit tests (deploy/prometheus/alerts.test.yml, run by the real
``promtool test rules``), run here against the committed rules, and where a fix is one clause of a rule,
against the rule without it too: the case must fail there, or it would pin nothing.

- A client's body in a transfer coding the service does not take is answered 501 (service/media_type.py,
  reason ``unsupported_media_type``): a 5xx code, but the client's mistake. It paged the 5xx alert (critical)
  and was missing from the refused-requests alert.
- The drift alerts against "the day before" compared with whatever history Prometheus held: a Prometheus
  started hours ago paged on its first busy hour against its first quiet ones (deploy/README.md says they
  stay quiet until Prometheus holds the history they compare with).
- IntentvcsIntentMixShift compared the last 15 minutes with the hour ending 15 minutes ago: that hour takes
  in the shift while the alert waits out its 15-minute ``for``, so a shift of 20 to 25 points, over its
  20-point threshold, never fired.
- Grafana takes GRAFANA_ADMIN_PASSWORD on its first start only (see the last test).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from tests.test_alert_unit_tests_can_fail import alone
from tests.test_deploy import ALERTS, RULE_TESTS, promtool

# The clause of a drift rule that wants a sample where the day it compares with begins.
HISTORY_GATE = re.compile(r"\n\s*and on\(\) count\([a-z_]+ offset 1d\w+\)")


def passes(group_name: str, rules: dict, tmp_path: Path) -> bool:
    """Whether the committed unit-test group ``group_name`` passes against ``rules`` (promtool's verdict)."""
    spec = yaml.safe_load(RULE_TESTS.read_text())
    [group] = [test for test in spec["tests"] if test["name"] == group_name]
    [rule_file] = spec["rule_files"]
    (tmp_path / rule_file).write_text(yaml.safe_dump(rules, sort_keys=False))
    (tmp_path / "tests.yml").write_text(yaml.safe_dump({**spec, "tests": [group]}, sort_keys=False))
    result = subprocess.run([promtool(), "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, check=False)
    output = result.stdout + result.stderr
    assert ("SUCCESS" in output) == (result.returncode == 0), output  # promtool's verdict, not a crash
    return result.returncode == 0


def committed_rules() -> dict:
    return yaml.safe_load(ALERTS.read_text())


def test_a_501_for_an_unsupported_transfer_coding_is_a_refusal_not_a_server_error(tmp_path):
    assert passes("30% of requests in a transfer coding the service refuses (501), 200 requests a minute",
                  committed_rules(), tmp_path)


DAY_ONE = "a fresh Prometheus, out of scope 2% to 20% and confidence down after 2 hours, pages no drift"
DAY_BEFORE_ALERTS = ("IntentvcsOutOfScopeSpike", "IntentvcsConfidenceShift", "IntentvcsLowConfidenceRise")


def test_drift_alerts_stay_quiet_until_prometheus_holds_a_day_of_history(tmp_path):
    assert passes(DAY_ONE, committed_rules(), tmp_path)
    for name in DAY_BEFORE_ALERTS:
        def drop_history_gate(rule):
            rule["expr"], dropped = HISTORY_GATE.subn("", rule["expr"])
            assert dropped == 1, rule["expr"]

        assert not passes(DAY_ONE, alone(name, drop_history_gate), tmp_path), \
            f"{name}: the first-day case passes without the history gate"


def test_intent_mix_shift_fires_on_a_shift_just_over_its_threshold(tmp_path):
    assert passes("intent mix from 50/50 to 72/28 at minute 100 (22 points)", committed_rules(), tmp_path)


def test_readme_says_grafana_takes_its_admin_password_on_its_first_start_only():
    """GF_SECURITY_ADMIN_PASSWORD initialises the admin user when Grafana first starts (its database, kept in the
    grafana-data volume); later changes to it do nothing. deploy/README.md said to set GRAFANA_ADMIN_PASSWORD
    before publishing on 0.0.0.0, which after an earlier start left Grafana on every interface as admin/admin."""
    readme = " ".join((Path(__file__).resolve().parents[1] / "deploy" / "README.md").read_text().split())
    [publish] = [line for line in readme.split("- `") if line.startswith("PUBLISH_ADDRESS`")]
    assert "GRAFANA_ADMIN_PASSWORD" in publish
    assert "first start only" in publish and "grafana cli admin reset-admin-password" in publish, publish
