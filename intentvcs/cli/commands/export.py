"""``intentvcs export``: checkpoint -> serving bundle (ONNX graph, tokenizer, manifest).

Progress and a human summary go to stderr, the result object as JSON to
stdout (and to ``--result`` when given, committed with the bundle: both or
neither). Exit status: 0 on success, 1 when
the parity check fails (nothing is written, neither bundle nor ``--result``, and
an earlier one of each is left as it was; the failure's result object, with the
parity report, goes to stdout and its message to stderr), 2 on a data or usage error.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from intentvcs.cli import exit_codes
from intentvcs.cli.options import STDOUT_HELP, given, output_file, output_folder, print_summary
from intentvcs.core.references import ROWS_PER_INTENT
from intentvcs.core.team_formats import FORMATS_HELP
from intentvcs.export.parity import PARITY_ATOL


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export", help="export a checkpoint to an ONNX serving bundle",
        description="Export the checkpoint to one ONNX graph (token ids -> intent logits, the embeddings the "
                    "OOS rule and the audit read, and the entity and request-boundary heads' logits when the "
                    "model has them) with Optimum, write the tokenizer and a versioned manifest, and refuse to "
                    "write the bundle unless ONNX reproduces PyTorch on held-out utterances and built-in probes "
                    f"(logits, embeddings and entity confidences within {PARITY_ATOL:g}, identical label sets, OOS "
                    "verdicts and entities).")
    p.add_argument("--checkpoint", required=True, metavar="DIR", type=given,
                   help="checkpoint directory (intentvcs train)")
    p.add_argument("--out", required=True, metavar="BUNDLE", type=output_folder,
                   help="bundle directory to write (atomically); an earlier bundle there is replaced, any other "
                        "non-empty folder only with --force")
    p.add_argument("--force", action="store_true", help="replace --out even if it is not an earlier bundle")
    p.add_argument("--name", type=given,
                   help="the model's name in the manifest, /status and the metrics (default: the "
                        "checkpoint folder's own name, or the name of the folder holding it when it is "
                        "named 'checkpoint': 'default' for runs/default/checkpoint, 'v2' for runs/v2)")
    p.add_argument("--quantize", action=argparse.BooleanOptionalAction, default=True,
                   help="also write model.int8.onnx (dynamic int8 of the fused graph, or weight-only int8 when the "
                        "dynamic graph fails its accuracy gate and the weight-only one passes; when both fail, the "
                        "dynamic one, not served) with its agreement, speed-up and gate; the service serves it by "
                        "default when the gate passed (default: on)")
    p.add_argument("--parity-data", metavar="FILE", type=given,
                   help=f"held-out rows ({FORMATS_HELP}) for the parity check and, being labelled, the int8 "
                        "accuracy gate; default: a built-in unlabelled sample (int8 then stays ungated, "
                        "and is served only with INTENTVCS_QUANTIZED=on)")
    p.add_argument("--references", action=argparse.BooleanOptionalAction, default=True,
                   help="ship the checkpoint's sample of its training rows (references.jsonl, at most "
                        f"{ROWS_PER_INTENT} per intent), which /audit and `intentvcs audit` read when given no training rows; "
                        "--no-references for a bundle that must not carry the team's utterances (default: on)")
    p.add_argument("--opset", type=int, metavar="N", help="ONNX opset (default: Optimum's for the backbone; one "
                                                            "the exporter cannot write is refused before any work)")
    p.add_argument("--result", metavar="FILE.json", type=output_file,
                   help="also write the result JSON here, with the bundle (both or neither: a failed parity "
                        "check writes neither, and its report goes to stdout only); not inside --checkpoint; "
                        f"{STDOUT_HELP}")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from intentvcs.export.preflight import check_export

    # The export's own checks of its arguments, before its module imports torch and onnx (seconds that a typo
    # in --checkpoint or --out waited for); export_bundle runs them again, as any caller of it needs.
    check_export(args.checkpoint, args.out, parity_data=args.parity_data, result_file=args.result,
                 opset=args.opset, force=args.force)
    from intentvcs.export.exporter import export_bundle
    from intentvcs.export.parity import ParityError

    try:
        # --result is committed with the bundle: a result that cannot be written publishes no bundle. The
        # export checks both outputs (against each other, the checkpoint and the parity data) before the
        # model loads, once it knows the checkpoint is one.
        result = export_bundle(args.checkpoint, args.out, quantize=args.quantize,
                               parity_data=args.parity_data, opset=args.opset, force=args.force,
                               name=args.name, references=args.references, result_file=args.result)
    except ParityError as exc:
        # Nothing written: --result comes with a bundle or not at all (an earlier result file stays beside the
        # earlier bundle it describes); the failure's report goes to stdout.
        print_summary({"ok": False, "bundle": None, "checkpoint": args.checkpoint, "error": str(exc),
                       "parity": exc.report})  # standard output: --result is not written then
        print(f"intentvcs export: {exc}; no bundle written"
              + (f", nor {args.result}" if args.result else ""), file=sys.stderr)
        return exit_codes.GATE_FAILED
    _summarise(result)
    print_summary(result, args.result)
    return 0


def _summarise(result: dict[str, Any]) -> None:
    parity, model = result["parity"], result["model"]
    # The gate ran the probe texts too (none when the rows hold them all): the summary names them, and its
    # figure is the largest gap of either.
    probes = parity.get("probes")
    probed = "" if probes is None else (f" and {probes['utterances']} probe texts (one of {probes['longest_tokens']} "
                                        f"tokens, max_length {probes['max_length']})")
    logit_diff = max(report["max_abs_logit_diff"] for report in (parity, probes or parity))
    lines = [
        f"bundle     {result['bundle']} ({result['labels']} labels, opset {model['opset']}, "
        f"{result['seconds']:.1f} s)",
        *(f"file       {name}: {entry['bytes'] / 1e6:.1f} MB" for name, entry in result["files"].items()),
        f"parity     passed on {parity['utterances']} utterances{probed}: max |logit diff| {logit_diff:.2e} "
        f"(limit {parity['atol']:g})",
    ]
    references = result["references"]
    lines.append("references none (the audit needs training rows)" if references is None else
                 f"references {references['rows']} training rows of {references['intents']} intents for the audit "
                 f"({references['bytes'] / 1e3:.0f} kB)")
    quantization = result["quantization"]
    if quantization is not None:
        agreement, timing = quantization["agreement"], quantization["timing"]
        entities = (f", entity sets agree {agreement['entity_set_agreement']:.1%}"
                    if "entity_set_agreement" in agreement else "")
        lines.append(f"int8       {quantization['method']}: label sets agree {agreement['label_set_agreement']:.1%}, "
                     f"OOS agree {agreement['oos_agreement']:.1%}{entities}, max conf diff "
                     f"{agreement['max_confidence_diff']:.3f}, speed-up {timing['speedup']:.2f}x")
        alone = quantization.get("alone")
        if alone is not None:
            lines.append(f"int8 alone each text read on its own answers as in a batch on "
                         f"{alone['utterances'] - alone['answers_differ']} of {alone['utterances']} (max conf diff "
                         f"{alone['max_confidence_diff']:.3f}; INTENTVCS_QUANTIZED=off never depends on the batch)")
        lines.append(f"int8 gate  {_gate_line(quantization['gate'])}")
        for other in quantization.get("not_kept", []):
            if "error" in other:
                lines.append(f"int8 tried {other['method']}: not available here ({other['error']})")
                continue
            failed = [name for name, figure in other["gate"]["figures"].items() if not figure["passed"]]
            lines.append(f"int8 tried {other['method']} (speed-up {other['timing']['speedup']:.2f}x): its gate "
                         f"failed on {', '.join(failed)}")
    print("\n".join(lines), file=sys.stderr)


def _gate_line(gate: dict[str, Any] | None) -> str:
    """The accuracy gate in one line: verdict, then each figure fp32 -> int8."""
    if gate is None:
        return ("not measured (no in-scope parity row carries a label of the model's; give labelled "
                "--parity-data): served only when asked")
    figures = ", ".join(f"{name} {f['fp32']:.2%} -> {f['int8']:.2%}" + ("" if f["passed"] else " (FAILED)")
                        for name, f in gate["figures"].items())
    verdict = "passed: served by default" if gate["passed"] else "failed: the fp32 graph serves by default"
    return f"{verdict}, on {gate['rows']} rows: {figures}"

