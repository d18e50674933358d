"""Command-line options derived from TrainConfig and DecisionConfig: one home per default and vocabulary."""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import fields

import pytest

from intentvcs.cli.commands import demo, refit
from intentvcs.cli.main import build_parser
from intentvcs.cli.options import config_from_args
from intentvcs.core import oos, thresholds
from intentvcs.training.config import DecisionConfig, TrainConfig
from tests.test_torch_free import BLOCKER, ROOT

COMMANDS = ("train", "refit", "demo")
REQUIRED = {"train": ["--train", "t.jsonl", "--valid", "v.jsonl", "--out", "ckpt"],
            "refit": ["--checkpoint", "ckpt", "--train", "t.jsonl", "--valid", "v.jsonl"], "demo": []}


def subcommand(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def option(command: str, dest: str) -> argparse.Action:
    return next(a for a in subcommand(command)._actions if a.dest == dest)


def setting_options():
    for command in COMMANDS:
        for action in subcommand(command)._actions:
            for config in (TrainConfig, DecisionConfig):
                if action.dest in {f.name for f in fields(config)}:
                    yield pytest.param(command, config, action, id=f"{command}:{action.option_strings[0]}")


@pytest.mark.parametrize("command, config, action", list(setting_options()))
def test_an_options_default_is_its_settings_default(command, config, action):
    spec = next(f for f in fields(config) if f.name == action.dest)
    if command == "refit":  # not given: the checkpoint's setting, the settings default where it records none
        assert action.default is None
        assert action.help.endswith(f" (default: the checkpoint's; {spec.default} where it records none)")
    else:
        assert action.default == (demo.DEFAULTS.get(action.dest, spec.default) if command == "demo" else spec.default)
    if action.dest != "freeze_embeddings":  # --train-embeddings says what it does itself
        assert spec.metadata["help"].replace("%", "%%") in action.help


@pytest.mark.parametrize("command", COMMANDS)
def test_parsing_no_options_gives_the_default_settings(command):
    args = build_parser().parse_args([command, *REQUIRED[command]])
    trained = TrainConfig(**demo.DEFAULTS) if command == "demo" else TrainConfig()
    assert config_from_args(TrainConfig, args) == trained
    if command == "refit":  # nothing given: every decision setting is the checkpoint's (refit_settings)
        assert refit.given_settings(args) == {}
        given = build_parser().parse_args([command, *REQUIRED[command], "--no-spelling", "--oos-retention", "0.9"])
        assert refit.given_settings(given) == {"spelling": False, "oos_retention": 0.9}
    else:
        assert config_from_args(DecisionConfig, args) == DecisionConfig()


def test_every_decision_setting_is_an_option_of_train_and_refit():
    for command in ("train", "refit"):
        assert {f.name for f in fields(DecisionConfig)} <= {a.dest for a in subcommand(command)._actions}


def test_vocabularies_come_from_their_homes():
    from intentvcs.training.losses import METHODS

    assert list(option("train", "method").choices) == list(METHODS)
    assert list(option("train", "oos_rule").choices) == list(option("refit", "oos_rule").choices) == list(oos.RULES)
    assert list(option("demo", "oos_rule").choices) == [rule for rule in oos.RULES if rule != "train"]
    assert list(option("train", "threshold_rule").choices) == list(thresholds.RULES)


def test_a_bad_method_is_refused_while_parsing_before_torch_loads():
    # torch unimportable: any import of it would end in a traceback (exit 1), not argparse's exit 2.
    body = "from intentvcs.cli.main import main\nsys.exit(main(sys.argv[1:]))\n"
    proc = subprocess.run([sys.executable, "-c", BLOCKER + body, "train", *REQUIRED["train"], "--method", "nope"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "argument --method: invalid choice: 'nope'" in proc.stderr
