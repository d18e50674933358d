"""``intentvcs refit``: refit a trained checkpoint's decision layer, weights untouched."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from intentvcs.cli.commands.train import add_decision_options
from intentvcs.cli.options import config_from_args
from intentvcs.training.config import DecisionConfig


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("refit", help="refit a checkpoint's calibration and OOS rule without retraining",
                       description="Refit the decision layer of a trained checkpoint (temperature, PU label "
                                   "scales, thresholds, OOS rule and its threshold) and rebuild its spelling "
                                   "normaliser on its training rows and a validation set, and rewrite "
                                   "checkpoint.json atomically; the weights are not touched. Use it to change the "
                                   "OOS rule or its operating point, or to calibrate on fresher validation data. "
                                   "Export the checkpoint again to serve the result.")
    p.add_argument("--checkpoint", required=True, help="checkpoint directory written by intentvcs train")
    p.add_argument("--train", required=True, help="the training JSONL the checkpoint was trained on")
    p.add_argument("--valid", required=True, help="validation JSONL (rows with labels [] are out-of-scope)")
    p.add_argument("--test", help="optional test JSONL to evaluate the refitted decision on")
    add_decision_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from intentvcs.core.dataio import read_jsonl
    from intentvcs.training.pipeline import refit_checkpoint

    result = refit_checkpoint(Path(args.checkpoint), read_jsonl(args.train), read_jsonl(args.valid),
                              read_jsonl(args.test) if args.test else None, config_from_args(DecisionConfig, args))
    json.dump(result["metrics"], sys.stdout, indent=2)
    print()
    return 0
