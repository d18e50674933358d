"""``intentvcs demo``: the README's main job on the embedded default data set.

Train the default model (PU method, packaged MiniLM-L6) on
``training/default_data/assistant``, export it to a bundle (ONNX + parity
check + int8), evaluate the bundle through the serving engine, then serve it.
Each step is the same code as its own subcommand.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
from pathlib import Path

from intentvcs.cli.commands.serve import (DEFAULT_HOST, add_port_argument, check_installed, check_port,
                                          check_settings)
from intentvcs.cli.options import add_option, config_from_args, output_folder
from intentvcs.core import oos
from intentvcs.service.settings import DEMO_DIR
from intentvcs.training.config import DecisionConfig, TrainConfig

log = logging.getLogger(__name__)

# The default data set is small (a few hundred training rows): it takes more epochs than TrainConfig's default.
# Not more: longer training buys entities with the out-of-scope verdict (docs/RESULTS.md "The embedded
# default's entities", measured with the encoder's learning rate for the entity head, test rows): 8 epochs
# slot F1 46.7 / OOS recall 85.0, 12: 55.8 / 75.0, 16: 67.7 / 75.0, 20: 73.6 / 67.5 (validation OOS recall
# 86.7, 83.3, 76.7, 66.7). A heavier entity loss (--entity-weight 3 at 8 epochs) costs the intents 10 points
# of exact match for 0.7 of slot F1. The head's own rate, below, buys the entities instead.
EPOCHS = 8
# The entity head's peak learning rate, 100 x the encoder's: 8 epochs of 608 rows are 152 steps, too few for a
# head that starts from random weights at the encoder's rate (validation slot F1 47.7 at --tagger-lr unset,
# 60.8 at 1e-3, 67.9 at 3e-3, 74.0 at 1e-2, 67.8 at 3e-2; intents and out-of-scope recall within a
# validation row or two; 2026-11-27, docs/RESULTS.md "The embedded default's entities").
TAGGER_LEARNING_RATE = 1e-2
# Where the demo's training departs from TrainConfig's defaults.
DEFAULTS = {"epochs": EPOCHS, "tagger_learning_rate": TAGGER_LEARNING_RATE}
# What the demo writes in its --out.
CHECKPOINT, BUNDLE, EVALUATION = "checkpoint", "bundle", "evaluation.json"
# Not "train": the default data has no out-of-scope training rows to make a class of.
OOS_RULES = tuple(rule for rule in oos.RULES if rule != oos.TrainRule.name)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="train, export, evaluate and serve the default model",
                       description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=DEMO_DIR, type=output_folder,
                   help="working directory (checkpoint/, bundle/, *.json; default: %(default)s)")
    p.add_argument("--force", action="store_true",
                   help="replace --out's checkpoint/ and bundle/ even if they are not earlier outputs of the demo")
    add_option(p, TrainConfig, "epochs", default=DEFAULTS["epochs"])
    add_option(p, TrainConfig, "tagger_learning_rate", "--tagger-lr", default=DEFAULTS["tagger_learning_rate"],
               metavar="LR")
    rule_help = next(f for f in dataclasses.fields(DecisionConfig) if f.name == "oos_rule").metadata["help"]
    add_option(p, DecisionConfig, "oos_rule", choices=OOS_RULES,
               help=f"{rule_help.replace('%', '%%')}; not train here (the default data has no out-of-scope "
                    "training rows)")
    add_option(p, TrainConfig, "backbone")
    p.add_argument("--no-serve", action="store_true", help="stop after export and evaluation")
    add_port_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    # What the steps would refuse at their start, refused before the minutes of the first ones (and before
    # torch loads): the settings first, as train reads them.
    config, decision = config_from_args(TrainConfig, args), config_from_args(DecisionConfig, args)
    check_outputs(out, args.force)
    if not args.no_serve:
        # What the last step serves with, BentoML and the INTENTVCS_* settings: refused now, not after the training.
        try:
            check_installed()
        except ImportError as exc:
            raise ImportError(f"{exc}, or run the demo with --no-serve") from None
        check_port(DEFAULT_HOST, args.port)
        check_settings(os.environ)

    from intentvcs.export.exporter import export_bundle
    from intentvcs.core import atomic
    from intentvcs.core.dataio import read_jsonl
    from intentvcs.core.evaluation import evaluate, headline
    from intentvcs.core.segmentation import decide_segmented
    from intentvcs.service.engine import Engine
    from intentvcs.training import DEFAULT_DATA
    from intentvcs.training.pipeline import train_pipeline

    data = {split: read_jsonl(DEFAULT_DATA / f"{split}.jsonl") for split in ("train", "valid", "test")}
    log.info("1/4 training on %s (%d rows)", DEFAULT_DATA, len(data["train"]))
    train_pipeline(data["train"], data["valid"], data["test"], config, decision, out / CHECKPOINT, force=args.force)

    log.info("2/4 exporting to %s", out / BUNDLE)
    export_bundle(out / CHECKPOINT, out / BUNDLE, quantize=True, parity_data=DEFAULT_DATA / "valid.jsonl",
                  force=args.force)

    log.info("3/4 evaluating the bundle through the serving engine")
    engine = Engine(out / BUNDLE, provider="cpu")
    # Answered as served: a chained request part by part.
    outputs, segmented = decide_segmented(engine.decision, engine.infer, [ex.text for ex in data["test"]])
    figures = headline(evaluate(engine.decision, outputs, data["test"], include_tables=False,
                                result=segmented.result))
    atomic.write_json(out / EVALUATION, figures)
    print(json.dumps(figures, indent=2))
    if args.no_serve:
        return 0

    log.info("4/4 serving on http://%s:%d (Ctrl-C to stop)", DEFAULT_HOST, args.port)
    from intentvcs.cli.commands import serve

    return serve.serve_bundle(out / BUNDLE, args.port)


def check_outputs(out: Path, force: bool) -> None:
    """Refuse the outputs that training, export and the evaluation would refuse (each checks again when
    it writes): an unwritable or foreign folder, one not an earlier checkpoint or bundle without ``force``."""
    from intentvcs.core import atomic
    from intentvcs.core.manifest import BUNDLE_OUTPUT
    from intentvcs.training.checkpoint import CHECKPOINT_OUTPUT

    atomic.check_targets([out / EVALUATION])
    for folder in (CHECKPOINT, BUNDLE):
        atomic.check_folder_target(out / folder)
    atomic.check_replaceable(out / CHECKPOINT, CHECKPOINT_OUTPUT, force)
    atomic.check_replaceable(out / BUNDLE, BUNDLE_OUTPUT, force)
