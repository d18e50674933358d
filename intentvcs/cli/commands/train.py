"""``intentvcs train``: fit a model, fit its decision layer, write a checkpoint."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# The torch-free core only: parsing arguments must not import torch.
from intentvcs.core.oos import DISTANCE_RETENTION


def _share(text: str) -> float:
    value = float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must lie strictly between 0 and 1, got {text}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a PU multi-label intent model and write a checkpoint",
                       description="Fine-tune an encoder on JSONL data, calibrate it on validation data and "
                                   "write a checkpoint directory (atomically).")
    p.add_argument("--train", required=True, help="training JSONL (one observed label per row)")
    p.add_argument("--valid", required=True, help="validation JSONL (rows with labels [] are out-of-scope)")
    p.add_argument("--test", help="optional test JSONL (gold label sets) to evaluate after training")
    p.add_argument("--out", required=True, help="checkpoint directory to write")
    p.add_argument("--method", default="pu", help="pu (default), bce, negative_sampling, ls_focal, mlce, upper_bound")
    p.add_argument("--backbone", help="local Hugging Face model dir (default: packaged all-MiniLM-L6-v2)")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--patience", type=int, default=1)
    p.add_argument("--threads", type=int, help="torch threads (default: all cores)")
    add_oos_arguments(p)
    p.add_argument("--augment", type=float, default=0.0, metavar="RATIO",
                   help="robust training: add RATIO x N perturbed copies of the training rows")
    p.add_argument("--augment-mix", metavar="JSON",
                   help='operator or family weights, e.g. \'{"nature": 2, "raddle": 1}\' (default: uniform)')
    p.add_argument("--augment-resample", action=argparse.BooleanOptionalAction, default=True,
                   help="draw fresh perturbed copies every epoch (default); --no-augment-resample reuses "
                        "the first epoch's")
    p.add_argument("--consistency", type=float, default=0.0, metavar="WEIGHT",
                   help="weight of a KL term pulling each perturbed copy's prediction towards its clean "
                        "source's (needs --augment; default 0: off)")
    p.add_argument("--validate-perturbed", action="store_true",
                   help="with --augment: validate on the validation rows plus one perturbed copy of each, so that "
                        "early stopping and the kept epoch reward robustness, not clean loss alone")
    p.add_argument("--train-embeddings", action="store_true",
                   help="fine-tune the word-embedding matrix too (frozen by default: a third faster on CPU)")
    p.add_argument("--relations", help="relations.json of known label relations, applied at inference")
    p.add_argument("--result", help="also write the training result JSON here")
    p.set_defaults(func=run)


def add_oos_arguments(p: argparse.ArgumentParser) -> None:
    """``--oos-rule``, ``--oos-retention`` and ``--spelling`` (shared with ``intentvcs refit``)."""
    p.add_argument("--spelling", action=argparse.BooleanOptionalAction, default=True,
                   help="build the spelling normaliser from the training texts: at inference a word in neither "
                        "the training vocabulary nor an English word list is replaced by the closest training "
                        "word, so keyboard typos read as what was meant (default on; stored in the checkpoint "
                        "and the bundle)")
    p.add_argument("--oos-rule", default="distance", choices=["none", "threshold", "distance", "train"],
                   help="how out-of-scope is decided, stored in the checkpoint and served as is (default "
                        "distance: needs no OOS rows, its threshold keeps --oos-retention of the in-scope "
                        "validation rows; threshold: its cut maximises validation accuracy with OOS as a class "
                        "when the validation data has OOS rows, else keeps 95%% of in-scope rows; 'none' for "
                        "data sets without out-of-scope traffic)")
    p.add_argument("--oos-retention", type=_share, default=DISTANCE_RETENTION, metavar="SHARE",
                   help="distance rule's operating point: the share of in-scope validation rows kept in scope "
                        "(default %(default)s; lower rejects more out-of-scope queries and more in-scope ones)")


def run(args: argparse.Namespace) -> int:
    from intentvcs.core import atomic
    from intentvcs.core.dataio import read_jsonl
    from intentvcs.training.pipeline import train_pipeline
    from intentvcs.training.trainer import TrainConfig

    config = TrainConfig(
        backbone=args.backbone, method=args.method, epochs=args.epochs, batch_size=args.batch_size,
        learning_rate=args.lr, max_length=args.max_length, seed=args.seed, patience=args.patience,
        threads=args.threads, augment_ratio=args.augment,
        augment_mix=json.loads(args.augment_mix) if args.augment_mix else None,
        augment_resample=args.augment_resample, consistency_weight=args.consistency,
        freeze_embeddings=not args.train_embeddings, validate_perturbed=args.validate_perturbed,
    )
    result = train_pipeline(
        config,
        train=read_jsonl(args.train),
        valid=read_jsonl(args.valid),
        test=read_jsonl(args.test) if args.test else None,
        out=Path(args.out),
        oos_rule=args.oos_rule,
        oos_retention=args.oos_retention,
        relations_path=args.relations,
        spelling=args.spelling,
    )
    if args.result:
        atomic.write_json(args.result, result)
    summary = {k: result[k] for k in ("checkpoint", "method", "best_epoch", "train_seconds")}
    summary.update({f"{split}_{k}": v for split in ("valid", "test") for k, v in
                    (result["metrics"].get(split) or {}).items() if not isinstance(v, (dict, list))})
    json.dump(summary, sys.stdout, indent=2)
    print()
    return 0
