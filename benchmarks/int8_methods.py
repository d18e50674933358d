"""Which int8 graph: the export's quantisations (and calibrated static int8) side by side, on speed and gate.

    python -m benchmarks.int8_methods --bundle demo=runs/default/bundle \
        --valid demo=training/default_data/assistant/valid.jsonl \
        --texts demo=training/default_data/assistant/test.jsonl --calibration demo=runs/default/checkpoint/references.jsonl

For each bundle, from its fp32 graph (``model.onnx``), in one process:

- ``dynamic`` and ``weight-only``: the graphs ``intentvcs.export.quantize.METHODS``
  describe, made by the exporter's own ``quantize_int8``;
- ``static``: calibrated static int8 as ONNX Runtime's ``quantize_static`` makes
  it (QDQ, per-channel int8 weights, uint8 activations, percentile calibration
  at 99.99 on up to 512 training texts padded to the bundle's max length, the
  encoder's matrix products only, as the other two), the variant the
  performance issue asked to ship "if it wins";

then, for each graph, the accuracy gate the export computes (``accuracy_gate``
on the labelled ``--valid`` rows, through the bundle's spelling normaliser) and
its speed: ``OnnxSession.infer`` (tokenisation and graph run, ``--threads``
threads) on the first 256 ``--texts``, one text per call and 32 per call,
the graphs taken in turn within each of ``--rounds`` rounds (medians), so that
the machine's drift falls on all of them alike.

Writes ``benchmarks/results/int8_methods.json`` and ``.md`` (records of bundles
not measured in this run are kept).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import keep_previous, named_paths, shown_path, write_results

TIMED_TEXTS, CALIBRATION_TEXTS, PERCENTILE = 256, 512, 99.99


def static_int8(fp32_path: Path, out: Path, tokenizer, max_length: int, texts: list[str]) -> None:
    """Calibrated static int8 (QDQ) of the encoder's matrix products; see the module docstring."""
    import numpy as np
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    from intentvcs.export.quantize import encoder_nodes
    from intentvcs.export.quiet import quiet_logger

    class Batches(CalibrationDataReader):
        # Padded to one length: the percentile calibrator stacks every batch's activations.
        def __init__(self) -> None:
            self.feeds = []
            for start in range(0, len(texts), 16):
                encodings = tokenizer.encode(texts[start:start + 16])
                ids = np.full((len(encodings), max_length), tokenizer.pad_id, dtype=np.int64)
                mask = np.zeros_like(ids)
                for row, encoding in enumerate(encodings):
                    ids[row, :len(encoding.ids)], mask[row, :len(encoding.ids)] = encoding.ids, 1
                self.feeds.append({"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
            self.iterator = iter(self.feeds)

        def get_next(self):
            return next(self.iterator, None)

    with quiet_logger(None, logging.ERROR):
        quantize_static(fp32_path, out, Batches(), quant_format=QuantFormat.QDQ, op_types_to_quantize=["MatMul"],
                        nodes_to_quantize=encoder_nodes(fp32_path, ["MatMul"]), per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        calibrate_method=CalibrationMethod.Percentile,
                        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT, "CalibPercentile": PERCENTILE})


def measure(name: str, bundle: Path, valid: Path, texts_path: Path, calibration: Path, rounds: int,
            threads: int) -> list[dict]:
    from intentvcs.core.dataio import read_jsonl
    from intentvcs.core.decision import Decision
    from intentvcs.core.spelling import SPELLING_FILE, Spelling
    from intentvcs.export.parity import held_out_rows
    from intentvcs.export.quantize import METHODS, accuracy_gate, quantize_int8
    from intentvcs.service.engine import read_as_served
    from intentvcs.service.onnx_session import OnnxSession
    from intentvcs.service.tokenization import BundleTokenizer

    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    decision = Decision.from_dict(manifest["decision"])
    tags = (manifest.get("entities") or {}).get("tags") or []
    tokenizer = BundleTokenizer(bundle / "tokenizer.json", manifest["max_length"])
    spelling = Spelling.load(bundle / SPELLING_FILE) if (bundle / SPELLING_FILE).exists() else None
    held = held_out_rows(valid)
    timed = [example.text for example in read_jsonl(texts_path)][:TIMED_TEXTS]
    calibration_texts = [example.text for example in read_jsonl(calibration)]
    random.Random(0).shuffle(calibration_texts)

    def served(session):  # the gate's reading: the service's (normaliser, chained requests part by part)
        outputs, _, decided = read_as_served(session, spelling, decision, held.texts)
        return outputs, decided.result

    with tempfile.TemporaryDirectory() as scratch:
        graphs = {"fp32": bundle / "model.onnx"}
        for settings in METHODS:
            graphs[settings["method"]] = Path(scratch) / f"{settings['method']}.onnx"
            quantize_int8(graphs["fp32"], graphs[settings["method"]], settings)
        graphs["static"] = Path(scratch) / "static.onnx"
        static_int8(graphs["fp32"], graphs["static"], tokenizer, manifest["max_length"],
                    calibration_texts[:CALIBRATION_TEXTS])
        sessions = {method: OnnxSession(path, tokenizer, provider="cpu", threads=threads, tags=tags)
                    for method, path in graphs.items()}
        reference = served(sessions["fp32"])
        gates = {}
        for method, session in sessions.items():
            if method != "fp32":
                candidate = served(session)
                gates[method] = accuracy_gate(reference[0], candidate[0], decision, held.examples, str(valid),
                                              results=(reference[1], candidate[1]))
        rates: dict[str, dict[int, list[float]]] = {method: {1: [], 32: []} for method in sessions}
        for session in sessions.values():
            session.infer(timed[:32])  # warm-up
        for _ in range(rounds):
            for method, session in sessions.items():
                started = time.perf_counter()
                for text in timed:
                    session.infer([text])
                rates[method][1].append(len(timed) / (time.perf_counter() - started))
                started = time.perf_counter()
                for start in range(0, len(timed), 32):
                    session.infer(timed[start:start + 32])
                rates[method][32].append(len(timed) / (time.perf_counter() - started))
    medians = {method: {batch: statistics.median(values) for batch, values in by_batch.items()}
               for method, by_batch in rates.items()}
    records = []
    for method in sessions:
        gate = gates.get(method)
        records.append({
            "bundle": name, "path": str(shown_path(bundle)),
            "method": method, "shipped": method != "static",
            "utt_per_s_batch1": round(medians[method][1], 1), "utt_per_s_batch32": round(medians[method][32], 1),
            "speedup_batch1": round(medians[method][1] / medians["fp32"][1], 3),
            "speedup_batch32": round(medians[method][32] / medians["fp32"][32], 3),
            "gate_rows": None if gate is None else gate["rows"],
            "gate_passed": None if gate is None else gate["passed"],
            "gate_loss_points": None if gate is None else
            {figure: round(100 * f["loss"], 2) for figure, f in gate["figures"].items()},
            "gate_failed": None if gate is None else [f for f, v in gate["figures"].items() if not v["passed"]],
            "rounds": rounds, "threads": threads, "timed_texts": len(timed),
        })
    return records


def markdown(records: list[dict]) -> str:
    lines = ["| bundle | graph | utt/s, 1 per call | utt/s, 32 per call | vs fp32 (1 / 32) | gate | largest loss (points) |",
             "|---|---|---:|---:|---|---|---|"]
    for r in records:
        if r["gate_passed"] is None:
            gate, worst = "–", "–"
        else:
            gate = "passed" if r["gate_passed"] else f"failed ({', '.join(r['gate_failed'])})"
            figure, loss = max(r["gate_loss_points"].items(), key=lambda item: item[1])
            worst = f"{loss:+.2f} ({figure})"
        graph = r["method"] + ("" if r["shipped"] else " (not shipped)")
        lines.append(f"| {r['bundle']} | {graph} | {r['utt_per_s_batch1']:.0f} | {r['utt_per_s_batch32']:.0f} | "
                     f"{r['speedup_batch1']:.2f}x / {r['speedup_batch32']:.2f}x | {gate} | {worst} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", nargs="+", required=True, metavar="NAME=DIR")
    parser.add_argument("--valid", nargs="+", required=True, metavar="NAME=JSONL", help="labelled rows of the gate")
    parser.add_argument("--texts", nargs="+", required=True, metavar="NAME=JSONL", help="the timed texts")
    parser.add_argument("--calibration", nargs="+", required=True, metavar="NAME=JSONL",
                        help="training rows for the static graph's calibration (a checkpoint's references.jsonl)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    try:
        bundles, valid, texts, calibration = (named_paths(values, flag) for values, flag in (
            (args.bundle, "--bundle"), (args.valid, "--valid"), (args.texts, "--texts"),
            (args.calibration, "--calibration")))
    except ValueError as exc:
        parser.error(str(exc))
    missing = [name for name in bundles if name not in valid or name not in texts or name not in calibration]
    if missing:
        parser.error(f"--valid, --texts and --calibration need an entry for every bundle; missing: {missing}")
    records = []
    for name, directory in bundles.items():
        records += measure(name, Path(directory).resolve(), Path(valid[name]), Path(texts[name]),
                           Path(calibration[name]), args.rounds, args.threads)
    print(markdown(records))
    records, command = keep_previous("int8_methods", records, lambda r: r["bundle"] in bundles)
    path = write_results("int8_methods", records, markdown(records), command=command)
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
