"""The model options the analysing commands share, and the ``Predictor`` they load.

``evaluate``, ``robustness`` and ``audit`` run on a checkpoint (PyTorch, before
export) or a bundle (the ONNX engine the service runs) through one interface,
``intentvcs.core.predictor.Predictor``, so each takes the same options.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence

from intentvcs.core.dataio import Example
from intentvcs.core.predictor import Predictor
from intentvcs.core.segmentation import DEFAULT_SEGMENT
from intentvcs.service.settings import DEFAULT_QUANTIZED, PROVIDERS, QUANTIZED_MODES, Settings


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """``--checkpoint`` | ``--bundle`` [``--quantized``] [``--provider``] [``--no-spelling``]."""
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="checkpoint directory (PyTorch path, no export needed)")
    source.add_argument("--bundle", help="bundle directory (ONNX engine path, what the service runs)")
    add_quantized_argument(p)
    p.add_argument("--provider", choices=PROVIDERS, default=Settings.provider,
                   help=f"bundle: ONNX Runtime execution provider (default {Settings.provider})")
    p.add_argument("--no-spelling", dest="spelling", action="store_false",
                   help="feed the model the raw texts, without the model's spelling normaliser (to measure it)")


def add_quantized_argument(p: argparse.ArgumentParser) -> None:
    """``--quantized auto|on|off``: which graph of a bundle runs, chosen as the service's ``INTENTVCS_QUANTIZED``."""
    p.add_argument("--quantized", choices=QUANTIZED_MODES, default=DEFAULT_QUANTIZED,
                   help="bundle: the graph that runs: auto (the int8 graph when its export passed the accuracy "
                        "gate, as the service serves it), on (int8) or off (fp32) (default %(default)s)")


def add_segment_argument(p: argparse.ArgumentParser, note: str = "") -> None:
    """``--no-segment``: decide each text whole, as the service does with ``INTENTVCS_SEGMENT=0``."""
    p.add_argument("--no-segment", dest="segment", action="store_false", default=DEFAULT_SEGMENT,
                   help="decide each utterance whole instead of answering the requests of a chained one "
                        f"(\"X and Y\") part by part, as served by default{note}")


def load_predictor(args: argparse.Namespace) -> Predictor:
    """The checkpoint (``TorchPredictor``) or the bundle (``Engine``) the options name."""
    if args.checkpoint:
        from intentvcs.training.predict import TorchPredictor

        # A progress bar on a terminal only: logs and CI output stay quiet.
        return TorchPredictor(args.checkpoint, spelling=args.spelling, progress=sys.stderr.isatty())
    from intentvcs.service.engine import Engine

    return Engine(args.bundle, provider=args.provider, quantized=args.quantized, spelling=args.spelling)


def model_source(args: argparse.Namespace, model: Predictor) -> dict:
    """What a result was computed on (``model``, loaded from ``args``), for its ``source`` field."""
    graph = model.info.get("model_file") if args.bundle else None
    return {"checkpoint": args.checkpoint, "bundle": args.bundle, "graph": graph, "spelling": args.spelling}


def check_scored_data(path: str, rows: Sequence[tuple[int, Example]], model: Predictor) -> None:
    """What ``evaluate`` and ``robustness`` check of labelled rows (``read_numbered``'s) before scoring them: a
    gold label the model has no output for is named (a misspelt label would otherwise only lower the
    figures), and a span type it cannot tag is refused (``DataError``, file and line), as train and refit do."""
    from intentvcs.core.dataio import counts_text, unknown_labels
    from intentvcs.core.team_formats import check_span_types

    unknown = unknown_labels([example for _, example in rows], model.labels)
    if unknown:
        logging.getLogger(__name__).warning(
            "%s: %d label(s) the model was not trained on, counted as missed: %s", path, sum(unknown.values()),
            counts_text(unknown))
    if model.entity_types:
        check_span_types(path, model.entity_types, rows)
