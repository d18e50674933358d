"""The model options the analysing commands share, and the ``Predictor`` they load.

``evaluate``, ``robustness`` and ``audit`` run on a checkpoint (PyTorch, before
export) or a bundle (the ONNX engine the service runs) through one interface,
``intentvcs.core.predictor.Predictor``, so each takes the same options.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from intentvcs.cli.options import given
from intentvcs.core.dataio import Example
from intentvcs.core.predictor import Predictor
from intentvcs.core.segmentation import DEFAULT_SEGMENT
from intentvcs.service.settings import DEFAULT_QUANTIZED, PROVIDERS, QUANTIZED_MODES, Settings


# The options of the ONNX engine: a checkpoint runs in PyTorch, so with --checkpoint they are refused, not ignored.
BUNDLE_OPTIONS = ("quantized", "provider")


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """``--checkpoint`` | ``--bundle`` [``--quantized``] [``--provider``] [``--no-spelling``].

    The bundle's options default to None ("not given", so that ``check_run`` can tell one given with
    ``--checkpoint``); ``load_predictor`` gives the engine its defaults then, the ones their help names."""
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", type=given, help="checkpoint directory (PyTorch path, no export needed)")
    source.add_argument("--bundle", type=given, help="bundle directory (ONNX engine path, what the service runs)")
    add_quantized_argument(p, default=None)
    p.add_argument("--provider", choices=PROVIDERS,
                   help=f"bundle: ONNX Runtime execution provider (default {Settings.provider})")
    p.add_argument("--no-spelling", dest="spelling", action="store_false",
                   help="feed the model the raw texts, without the model's spelling normaliser (to measure it)")


def add_quantized_argument(p: argparse.ArgumentParser, default: str | None = DEFAULT_QUANTIZED) -> None:
    """``--quantized auto|on|off``: which graph of a bundle runs, chosen as the service's ``INTENTVCS_QUANTIZED``;
    ``default`` None: not given (``add_model_arguments``)."""
    p.add_argument("--quantized", choices=QUANTIZED_MODES, default=default,
                   help="bundle: the graph that runs: auto (the int8 graph when its export passed the accuracy "
                        f"gate, as the service serves it), on (int8) or off (fp32) (default {DEFAULT_QUANTIZED})")


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

    return Engine(args.bundle, provider=args.provider or Settings.provider,
                  quantized=args.quantized or DEFAULT_QUANTIZED, spelling=args.spelling)


def check_run(args: argparse.Namespace, outputs: Sequence[str | None], inputs: Sequence[str | None]) -> None:
    """What ``evaluate``, ``robustness`` and ``audit`` check before reading anything: no bundle option with
    ``--checkpoint`` (it would be ignored), ``outputs`` that replace none of the ``inputs`` and lie
    outside the model's folder (a report written into a bundle would break its manifest), and a
    ``--checkpoint`` that is one (``check_checkpoint``: refused before torch loads, not seconds after)."""
    from intentvcs.core import atomic

    given = [f"--{name}" for name in BUNDLE_OPTIONS if getattr(args, name) is not None]
    if args.checkpoint and given:
        raise ValueError(f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} for --bundle only: a "
                         "--checkpoint runs in PyTorch, not in ONNX Runtime")
    atomic.check_targets(outputs, inputs=inputs)
    atomic.check_outside(args.checkpoint or args.bundle, outputs)
    if args.checkpoint:
        check_checkpoint(args.checkpoint)


def check_checkpoint(path: str) -> dict:
    """The checkpoint's ``checkpoint.json`` (``read_checkpoint_meta``: its home, torch-free), read by a command
    before it imports torch, the seconds of which a missing or broken checkpoint would otherwise wait for;
    the loader reads it again (a library call must check what it is given)."""
    from intentvcs.training.checkpoint import read_checkpoint_meta

    return read_checkpoint_meta(path)


def model_source(args: argparse.Namespace, model: Predictor) -> dict:
    """What a result was computed on (``model``, loaded from ``args``), for its ``source`` field."""
    graph = model.info.get("model_file") if args.bundle else None
    return {"checkpoint": args.checkpoint, "bundle": args.bundle, "graph": graph, "spelling": args.spelling}


def check_scored_data(path: str, rows: Sequence[tuple[int, Example]], model: Predictor) -> None:
    """What ``evaluate`` and ``robustness`` check of labelled rows before scoring them (``check_scored_rows``)."""
    from intentvcs.core.team_formats import check_scored_rows

    check_scored_rows(path, rows, model.labels, model.entity_types)
