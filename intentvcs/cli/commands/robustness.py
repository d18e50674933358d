"""``intentvcs robustness``: per-operator, Random and Hard robustness report of a bundle or a checkpoint."""

from __future__ import annotations

import argparse

from intentvcs.cli.model_options import (add_model_arguments, add_segment_argument, check_run, check_scored_data,
                                         load_predictor, model_source)
from intentvcs.cli.options import STDOUT_HELP, given, output_file, summary_stream
# Not from intentvcs.core.robustness: that imports the perturbation extra, which serving does not install.
from intentvcs.core.evaluation import PRIMARY_METRICS, check_known_labels
from intentvcs.core.team_formats import FORMATS_HELP


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "robustness", help="per-perturbation, Random and Hard robustness report of a bundle or a checkpoint",
        description="Perturb every test utterance with each operator of intentvcs.core.perturb (protected spans "
                    "kept), build NATURE's Random set (one random applicable operator per utterance, several "
                    "draws) and Hard set (each utterance's worst operator for this model), run every distinct "
                    "text once through the model and report the score on each set against the same rows "
                    "clean (and slot F1 too, for a model with an entity head on data with spans). "
                    "Definitions: intentvcs/core/robustness.py.")
    add_model_arguments(p)
    add_segment_argument(p)
    p.add_argument("--data", required=True, type=given,
                   help=f"test rows with gold label sets ({FORMATS_HELP}; no label: out "
                         "of scope)")
    p.add_argument("--train", type=given,
                   help="the model's training rows, same formats: unseen_entities then draws only "
                        "entity values no training row has; without it, from the test rows' own values, "
                        "unchecked")
    p.add_argument("--out", required=True, type=output_file, help=f"report JSON ({STDOUT_HELP})")
    p.add_argument("--md", type=output_file, help="also write the report as a Markdown table here")
    p.add_argument("--operators", nargs="+", metavar="NAME",
                   help="operators or families (nature, laug, raddle) to run; default: all")
    # NATURE averages 10 draws; 5 keeps a CPU run short and the std shows whether that is enough.
    p.add_argument("--draws", type=int, default=5, help="Random-set draws, seeds SEED..SEED+DRAWS-1 (default 5)")
    p.add_argument("--seed", type=int, default=0, help="perturbation seed (default 0)")
    p.add_argument("--metric", default=PRIMARY_METRICS[0], choices=PRIMARY_METRICS,
                   help="primary score; auto: f1 if any gold row has several labels, else accuracy "
                        "(default: %(default)s)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from intentvcs.core import atomic
    from intentvcs.core.robustness import check_draws, expand_operators, render_markdown, run_suite
    from intentvcs.core.team_formats import out_of_scope_as_such, read_examples, read_numbered

    operators = expand_operators(args.operators)  # a typo fails before the model loads
    check_draws(args.draws)  # as run_suite refuses it, but before the model loads
    check_run(args, (args.out, args.md), inputs=[args.data, args.train])
    rows = out_of_scope_as_such(args.data, read_numbered(args.data))  # refused, where bad, before the model loads
    examples = [example for _, example in rows]
    train = read_examples(args.train) if args.train else None
    model = load_predictor(args)
    check_known_labels(args.data, examples, model.labels)
    check_scored_data(args.data, rows, model)
    report = run_suite(examples, model, operators, args.draws, args.seed, args.metric, train=train,
                       segment=args.segment)
    report["source"] = {**model_source(args, model), "data": args.data, **({"train": args.train} if args.train else {})}
    markdown = render_markdown(report)
    atomic.write_files({args.out: atomic.json_text(report), **({args.md: markdown} if args.md else {})})
    # Not after the report on standard output when --out or --md is it (`--out /dev/stdout | jq`).
    print(markdown, end="", file=summary_stream(args.out, args.md))
    return 0
