"""``intentvcs refit``: refit a trained checkpoint's decision layer, weights untouched."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from intentvcs.cli.commands.train import add_decision_options, check_read_settings, read_splits
from intentvcs.cli.model_options import check_checkpoint
from intentvcs.cli.options import given
from intentvcs.core.oos import OOS_LABEL, TrainRule
from intentvcs.core.team_formats import FORMATS_HELP
from intentvcs.training.config import DecisionConfig


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("refit", help="refit a checkpoint's calibration and OOS rule without retraining",
                       description="Refit the decision layer of a trained checkpoint (temperature, PU label "
                                   "scales, thresholds, OOS rule and its threshold, entity floor) and rebuild its spelling "
                                   "normaliser on its training rows and a validation set, and rewrite "
                                   "checkpoint.json atomically; the weights are not touched. Use it to change the "
                                   "OOS rule or its operating point, or to calibrate on fresher validation data. "
                                   "Every decision setting not given keeps the checkpoint's: the one its last "
                                   "refit recorded, else the one its training recorded (a checkpoint from before "
                                   "training recorded them: what it can be read to have used; its retentions "
                                   "are not recorded, so their defaults apply, and a warning says so). The OOS "
                                   "rule train is part of the model (an "
                                   "output class) and is neither refitted to nor away from: that needs intentvcs "
                                   "train. Export the checkpoint again to serve the result.")
    p.add_argument("--checkpoint", required=True, type=given, help="checkpoint directory written by intentvcs train")
    p.add_argument("--train", required=True, type=given,
                   help=f"the training rows the checkpoint was trained on (every one of its labels on some row, none "
                        f"other): {FORMATS_HELP}")
    p.add_argument("--valid", required=True, type=given,
                   help="validation rows, same formats (a row without a label is out of scope)")
    p.add_argument("--test", type=given, help="optional test rows, same formats, to evaluate the refitted decision on")
    add_decision_options(p)
    _default_to_the_checkpoint(p)
    p.set_defaults(func=run)


def _default_to_the_checkpoint(p: argparse.ArgumentParser) -> None:
    """Make every decision option's default "not given" (None): a refit keeps the checkpoint's setting then.

    Its help says so, and names the settings default that applies where the checkpoint records none."""
    defaults = {f.name: f.default for f in dataclasses.fields(DecisionConfig)}
    for action in p._actions:
        if action.dest in defaults:
            action.default = None
            action.help = (action.help.replace(" (default: %(default)s)", "")
                           + f" (default: the checkpoint's; {defaults[action.dest]} where it records none)")


def given_settings(args: argparse.Namespace) -> dict:
    """The decision settings given on the command line (the others are None: keep the checkpoint's)."""
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(DecisionConfig)
            if getattr(args, f.name, None) is not None}


def run(args: argparse.Namespace) -> int:
    meta = check_checkpoint(args.checkpoint)  # before torch loads: a wrong path is refused at once
    from intentvcs.training.pipeline import check_refit_rows, refit_checkpoint, refit_settings

    settings_given = given_settings(args)
    decision = refit_settings(Path(args.checkpoint), settings_given)
    # A setting given that the refit's decision does not read (--oos-retention of a checkpoint whose rule is
    # threshold) was recorded as used and changed nothing; one the checkpoint recorded is carried as it is.
    check_read_settings(decision, settings_given)
    if "entity_floor" in settings_given and not meta.get("entities"):
        raise ValueError(f"entity_floor {settings_given['entity_floor']} would change nothing: {args.checkpoint} "
                         "has no entity head (trained on rows without spans); leave entity_floor out")
    # Checked as train checks its data (held out, span types, warnings), before the model loads; the training
    # rows first against the checkpoint (another file was blamed on --valid's span types).
    # A checkpoint trained before rows labelled "oos" were read as out of scope, under a rule other than train,
    # has an intent of that name: its rows are read as it was trained on them.
    oos_is_intent = OOS_LABEL in meta["labels"] and decision.oos_rule != TrainRule.name
    train, valid, test = read_splits(args.train, args.valid, args.test, decision.oos_rule, check_train=lambda rows:
                                     check_refit_rows(args.checkpoint, rows, decision.oos_rule, args.train, meta),
                                     oos_is_intent=oos_is_intent)
    result = refit_checkpoint(Path(args.checkpoint), train, valid, test, decision, train_source=args.train)
    json.dump(result["metrics"], sys.stdout, indent=2)
    print()
    return 0
