"""``intentvcs audit``: entanglement report of an upgrade batch against a bundle or a checkpoint.

Exit status (``intentvcs.cli.exit_codes``): 0 when the overall severity is below
``--fail-on`` (default ``blocking``, so a CI step fails on duplicates), 1 when
at or above it, 2 on a data or usage error (bad JSONL row, missing bundle or
checkpoint), 3 on an internal error (a bug), so a gate can tell a crash from a
finding.
"""

from __future__ import annotations

import argparse
import sys

from intentvcs.cli import exit_codes
from intentvcs.cli.model_options import add_model_arguments, check_run, load_predictor
from intentvcs.cli.options import STDOUT_HELP, given, json_object_file, output_file
from intentvcs.service.audit.config import SEVERITIES, AuditConfig

# A gate fails at a severity or above it: every severity but the lowest, most severe first, or never.
FAIL_LEVELS = (*reversed(SEVERITIES[1:]), "never")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "audit", help="audit an upgrade batch (new intents) against a bundle or a checkpoint",
        description="For every new intent of the batch (a label the bundle does not know) report whether it "
                    "duplicates, is a subset or superset of, or composes existing intents, with containment "
                    "figures, example utterances, old rows to relabel and a proposed relations fix.")
    add_model_arguments(p)
    p.add_argument("--batch", required=True, type=given,
                   help="upgrade batch: canonical JSONL, a Rasa nlu.yml (.yml/.yaml) "
                        "or a CSV with text and intent columns (.csv)")
    p.add_argument("--train", type=given,
                   help="sample of the old data (same formats as --batch): the preferred source of "
                        "existing intents' utterances; default: the model's own sample of its training "
                        "rows (references.jsonl), else the batch's rows of them")
    p.add_argument("--out", required=True, type=output_file, help=f"report JSON ({STDOUT_HELP})")
    p.add_argument("--html", type=output_file,
                   help="also write a self-contained HTML page with a co-occurrence heatmap")
    p.add_argument("--pairs-csv", type=output_file,
                   help="also write the findings as a flat CSV, one row per intent pair "
                        "(pandas-ready: intent_a, intent_b, relation, a_in_b, b_in_a, counts)")
    p.add_argument("--relations-out", type=output_file,
                   help="write the proposed relations.json (known + proposed relations)")
    p.add_argument("--fail-on", choices=FAIL_LEVELS, default=FAIL_LEVELS[0],
                   help=f"exit 1 when the overall severity reaches this level (default: {FAIL_LEVELS[0]})")
    p.add_argument("--config", action=ConfigFile, metavar="FILE.json",
                   help="a JSON object of AuditConfig overrides (thresholds, caps)")
    p.set_defaults(func=run, config_path=None)


def config_file(path: str) -> AuditConfig:
    """The AuditConfig of a JSON file of overrides (``ArgumentTypeError`` naming the file). ``ConfigFile`` reads
    it as the command line is read, so that a bad setting is an error naming the file and the setting before
    any data is."""
    overrides = json_object_file(path)
    try:
        return AuditConfig.from_dict(overrides)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{path}: {exc}") from None


class ConfigFile(argparse.Action):
    """``--config``: its ``config_file`` as ``config``, and its path as ``config_path``: an input, so that no
    output of the command replaces it."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        try:
            setattr(namespace, self.dest, config_file(values))
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentError(self, str(exc)) from None
        namespace.config_path = values


def shown(name: str) -> str:
    """An intent name as a line of the log may hold it: names are the batch's text, and one holding a line break
    (which the data reader allows inside a label) wrote a finding line of its own making, or a terminal control
    sequence, into a CI log; so a name that is not all printable is shown escaped (``ascii``), as
    ``service.rejections.logged_path`` shows a request's path. The report files keep the names as they are."""
    return name if name.isprintable() else ascii(name)


def run(args: argparse.Namespace) -> int:
    from intentvcs.core import atomic
    from intentvcs.core.team_formats import iter_examples, read_examples
    from intentvcs.service.audit import audit_batch, pairs_csv, render_html

    config = args.config or AuditConfig()
    check_run(args, (args.out, args.html, args.pairs_csv, args.relations_out),
              inputs=[args.batch, args.train, args.config_path])
    batch = iter_examples(args.batch)  # streamed: the audit keeps a capped sample per new intent
    training = read_examples(args.train) if args.train else None
    report = audit_batch(load_predictor(args), batch, training, config)
    document = report.to_dict()
    outputs = {args.out: atomic.json_text(document)}
    if args.html:
        outputs[args.html] = render_html(document)
    if args.pairs_csv:
        outputs[args.pairs_csv] = pairs_csv(document)
    if args.relations_out:
        outputs[args.relations_out] = atomic.json_text(report.fix_relations().to_dict())
    atomic.write_files(outputs)  # the report, its page, the pair table and the relations, or none
    for finding in report.findings:
        v = finding.verdict
        print(f"{v.severity:8s} {shown(v.intent)}: {v.relation} {', '.join(map(shown, v.existing))}".rstrip(),
              file=sys.stderr)
    for pair in report.new_pairs:
        print(f"{pair.severity:8s} {shown(pair.first)} = {shown(pair.second)}: two new intents, one meaning",
              file=sys.stderr)
    if report.missing_references:
        where = f"neither {args.train} nor the model holds" if args.train else "the model holds no"
        print(f"audit: {where} rows of {', '.join(map(shown, report.missing_references))} to estimate how much of "
              "them lies in the new intents (duplicates then show as subsets); pass --train with the old data, or "
              "re-export the bundle from a checkpoint trained with this version (it keeps a sample of them)",
              file=sys.stderr)
    print(f"audit: overall {report.severity}, {len(report.findings)} new intent(s), {len(report.new_pairs)} "
          f"duplicate pair(s) among them; report {args.out}",
          file=sys.stderr)
    return exit_codes.GATE_FAILED if args.fail_on != "never" and report.fails(args.fail_on) else exit_codes.OK
