"""``intentvcs evaluate``: figures of a checkpoint (PyTorch) or a bundle (ONNX engine)."""

from __future__ import annotations

import argparse
from pathlib import Path

from intentvcs.cli.model_options import (add_model_arguments, add_segment_argument, check_run, check_scored_data,
                                         load_predictor, model_source)
from intentvcs.cli.options import STDOUT_HELP, given, output_file, print_summary
from intentvcs.core.team_formats import FORMATS_HELP


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="evaluate a checkpoint or a bundle on a JSONL test file",
                       description="Micro P/R/F1, exact match, per-label table, prediction co-occurrence, "
                                   "OOS figures when the data has out-of-scope rows and, for a model with an "
                                   "entity head, span-level slot P/R/F1 (CoNLL: type and boundaries exact) and "
                                   "the sentence-level overall accuracy (top intent and every entity right; "
                                   "overall exact match: every intent and entity). Chained requests are "
                                   "answered part by part, as served. A "
                                   "bundle is evaluated through the ONNX engine the service uses.")
    add_model_arguments(p)
    p.add_argument("--data", required=True, type=given,
                   help=f"rows with gold label sets ({FORMATS_HELP}; no label: out of "
                         "scope) and, for slot figures, gold spans (JSONL or Rasa YAML; a "
                         "row without spans has no entities)")
    p.add_argument("--out", required=True, type=output_file, help=f"result JSON ({STDOUT_HELP})")
    p.add_argument("--heatmap", metavar="FILE.png", type=given,
                   help="write the prediction co-occurrence heatmap here, as a PNG image (a name ending in .png)")
    add_segment_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from intentvcs.core import atomic
    from intentvcs.core.evaluation import check_known_labels, evaluate, headline
    from intentvcs.core.predictor import in_chunks
    from intentvcs.core.segmentation import decide_segmented
    from intentvcs.core.team_formats import out_of_scope_as_such, read_numbered

    check_run(args, (args.out, args.heatmap), inputs=[args.data])
    check_heatmap(args.heatmap)
    rows = out_of_scope_as_such(args.data, read_numbered(args.data))  # a bad file is refused before the model loads
    examples = [example for _, example in rows]
    model = load_predictor(args)
    check_known_labels(args.data, examples, model.labels)
    check_scored_data(args.data, rows, model)
    texts = [ex.text for ex in examples]
    # A bar on a terminal for the engine, which draws none of its own; a checkpoint's predictor draws one over
    # the whole call (called in chunks, it drew one per chunk).
    whole = model.infer(texts) if args.checkpoint else in_chunks(model.infer, texts, "evaluate")
    graph, segmented = decide_segmented(model.decision, model.infer, texts, args.segment, outputs=whole)
    figures = evaluate(model.decision, graph, examples, result=segmented.result)
    figures["segment"] = args.segment
    figures["source"] = {**model_source(args, model), "data": args.data}
    outputs: dict[str, str | bytes] = {args.out: atomic.json_text(figures)}
    if args.heatmap:
        from intentvcs.training.plots import cooccurrence_png

        outputs[args.heatmap] = cooccurrence_png(figures["cooccurrence"]["counts"],
                                                 figures["cooccurrence"]["labels"])
    atomic.write_files(outputs)  # the JSON and the picture, or neither
    print_summary(headline(figures), args.out, args.heatmap)
    return 0


def check_heatmap(path: str | None) -> None:
    """Refuse a ``--heatmap`` name that does not end in .png: the picture is drawn as PNG, and a heat.jpg
    holding PNG bytes is a file that says one format and holds another."""
    if path is not None and Path(path).suffix.lower() != ".png":
        raise ValueError(f"--heatmap {path}: the heatmap is a PNG image; give a file name ending in .png")
