"""Second review of the deployment and monitoring stack (deploy/, monitoring/, the bentofiles).

The alert rules' unit tests (``promtool test rules deploy/prometheus/alerts.test.yml``) must be able to fail:
each alert's ``for``, its traffic minimum (the ``and on() ... > N`` gates) and its threshold are pinned by a
case that a rule without them fails. Checked by mutation: each rule is weakened in a copy of alerts.yml, and
promtool must then report a failure of the committed unit tests (that rule alone, with the cases of the unit
tests that name it, to keep it short).
"""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.test_deploy import ALERTS, RULE_TESTS, promtool

RULES = yaml.safe_load(ALERTS.read_text())
NAMES = [rule["alert"] for group in RULES["groups"] for rule in group["rules"]]
GATE = re.compile(r"\n\s*and on\(\) ")  # where each rule's traffic minimums begin


def alone(name: str, change=None) -> dict:
    """The rule ``name`` alone in its group (fewer rules to evaluate over a day of history), changed by
    ``change(rule)`` when given."""
    [(group, rule)] = [(group, rule) for group in RULES["groups"] for rule in group["rules"] if rule["alert"] == name]
    rule = copy.deepcopy(rule)
    if change is not None:
        change(rule)
    return {"groups": [{"name": group["name"], "rules": [rule]}]}


def unit_tests_pass(rules: dict, name: str, tmp_path: Path) -> bool:
    """Whether the committed unit tests of the alert ``name`` pass against ``rules``."""
    spec = yaml.safe_load(RULE_TESTS.read_text())
    spec["tests"] = [{**test, "alert_rule_test": cases} for test in spec["tests"]
                     for cases in [[case for case in test["alert_rule_test"] if case["alertname"] == name]] if cases]
    assert spec["tests"], name
    [rule_file] = spec["rule_files"]
    (tmp_path / rule_file).write_text(yaml.safe_dump(rules, sort_keys=False))
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(spec, sort_keys=False))
    result = subprocess.run([promtool(), "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, check=False)
    output = result.stdout + result.stderr  # promtool prints its failures on stderr
    assert ("SUCCESS" in output) == (result.returncode == 0) and ("FAILED" in output) != (result.returncode == 0), \
        output  # a test that passes or fails as promtool's own verdict, not a crash or a file it cannot read
    return result.returncode == 0


def test_the_copied_unit_tests_pass_on_the_committed_rules(tmp_path):
    """The harness itself: unchanged rules pass (so a failure below is the mutation's)."""
    for name in NAMES:
        assert unit_tests_pass(alone(name), name, tmp_path), name


@pytest.mark.parametrize("name", NAMES)
def test_an_alert_without_its_for_fails_the_unit_tests(name, tmp_path):
    """Each alert has a case while its expression already holds and its ``for`` is not over (pending): a
    rule with ``for`` removed (or shortened by 5 minutes, the tests' evaluation step) fires there."""
    def drop_for(rule):
        rule["for"] = "0s"

    assert not unit_tests_pass(alone(name, drop_for), name, tmp_path), \
        f"{name}: the unit tests pass with its `for` removed"


GATED = [name for group in RULES["groups"] for rule in group["rules"] if GATE.search(rule["expr"])
         for name in [rule["alert"]]]


@pytest.mark.parametrize("name", GATED)
def test_an_alert_without_its_traffic_minimum_fails_the_unit_tests(name, tmp_path):
    """alerts.yml: 'Each alert needs a minimum of traffic so that a quiet hour does not page anyone'. A case
    with a few requests (or utterances), every one of them anomalous, stays quiet; without the gates it fires."""
    def drop_gates(rule):
        rule["expr"] = GATE.split(rule["expr"])[0]

    assert not unit_tests_pass(alone(name, drop_gates), name, tmp_path), \
        f"{name}: the unit tests pass with its traffic minimum removed"


THRESHOLDED = [name for group in RULES["groups"] for rule in group["rules"]
               if re.search(r">\s*[0-9.]", GATE.split(rule["expr"])[0]) for name in [rule["alert"]]]


@pytest.mark.parametrize("name", THRESHOLDED)
def test_an_alert_with_its_threshold_at_zero_fails_the_unit_tests(name, tmp_path):
    """A case just under each threshold stays quiet: with the threshold at 0 (any 5xx, any drift) it fires."""
    def zero_thresholds(rule):
        condition, *gates = GATE.split(rule["expr"])
        condition = re.sub(r">\s*[0-9.]+", "> 0", condition)
        rule["expr"] = "\nand on() ".join([condition, *gates])

    assert set(THRESHOLDED) == set(NAMES) - {"IntentvcsTargetDown", "IntentvcsModelReloadFailed"}
    assert not unit_tests_pass(alone(name, zero_thresholds), name, tmp_path), \
        f"{name}: the unit tests pass with its threshold at 0"
