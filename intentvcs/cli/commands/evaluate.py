"""``intentvcs evaluate``: figures of a checkpoint (PyTorch) or a bundle (ONNX engine)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="evaluate a checkpoint or a bundle on a JSONL test file",
                       description="Micro P/R/F1, exact match, per-label table, prediction co-occurrence and, "
                                   "when the data has out-of-scope rows, OOS figures. A bundle is evaluated "
                                   "through the ONNX engine the service uses.")
    add_model_arguments(p)
    p.add_argument("--data", required=True, help="JSONL with gold label sets ([] = out of scope)")
    p.add_argument("--out", required=True, help="result JSON")
    p.add_argument("--heatmap", help="write the prediction co-occurrence heatmap PNG here")
    p.set_defaults(func=run)


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """``--checkpoint`` | ``--bundle`` [``--quantized``] [``--no-spelling``]: what ``load_predictor`` loads."""
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="checkpoint directory (PyTorch path)")
    source.add_argument("--bundle", help="bundle directory (ONNX engine path, what the service runs)")
    p.add_argument("--quantized", action="store_true", help="bundle: use the int8 graph")
    p.add_argument("--no-spelling", dest="spelling", action="store_false",
                   help="feed the model the raw texts, without the model's spelling normaliser (to measure it)")


def load_predictor(args: argparse.Namespace):
    """Return ``(infer_fn, decision)`` for a checkpoint or a bundle."""
    from intentvcs.core.decision import Decision

    if args.checkpoint:
        from intentvcs.training.checkpoint import read_checkpoint_meta
        from intentvcs.training.predict import TorchPredictor

        meta = read_checkpoint_meta(args.checkpoint)
        predictor = TorchPredictor(args.checkpoint, meta["max_length"], spelling=args.spelling)
        return (lambda texts: predictor.infer(texts, progress=True)), Decision.from_dict(meta["decision"])
    from intentvcs.service.engine import Engine

    engine = Engine(args.bundle, quantized=args.quantized, spelling=args.spelling)
    return engine.infer, engine.bundle.decision


def run(args: argparse.Namespace) -> int:
    from intentvcs.core import atomic
    from intentvcs.core.dataio import read_jsonl
    from intentvcs.core.evaluation import evaluate, headline

    examples = read_jsonl(args.data)
    infer, decision = load_predictor(args)
    figures = evaluate(decision, infer([ex.text for ex in examples]), examples)
    figures["source"] = {"checkpoint": args.checkpoint, "bundle": args.bundle, "data": args.data,
                         "quantized": bool(args.quantized), "spelling": args.spelling}
    atomic.write_json(args.out, figures)
    if args.heatmap:
        from intentvcs.training.plots import cooccurrence_heatmap

        cooccurrence_heatmap(figures["cooccurrence"]["counts"], figures["cooccurrence"]["labels"],
                             Path(args.heatmap))
    json.dump(headline(figures), sys.stdout, indent=2)
    print()
    return 0
