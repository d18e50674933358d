"""Export benchmark: ONNX export, parity with PyTorch, and evaluating what is served (SNIPS-VCS).

Exports a trained SNIPS-VCS checkpoint (fp32 + int8), then measures on the
SNIPS-VCS test set, in one run:
- parity of the ONNX graph with PyTorch (max |logit| gap, label-set agreement);
- the evaluation figures through the PyTorch path, the ONNX engine (fp32) and
  the int8 engine — "evaluate what you serve": fp32 must equal PyTorch.
The engine's speed against what users would run instead is the performance
benchmark's (``benchmarks.perf_bench``, section "Performance"): one harness.

    python -m benchmarks.export_bench --checkpoint runs/bench/vcs-emb/ckpt/snips/pu-s0 \\
        --data runs/bench/vcs/data/snips-vcs-seed0/test.jsonl

(the data set built by ``intentvcs build-vcs --dataset snips --seed 0 --out runs/bench/vcs/data/snips-vcs-seed0``,
the checkpoint by ``benchmarks.vcs_bench``'s trained-embeddings recipe).
"""

from __future__ import annotations


import argparse
import logging
import sys
from pathlib import Path


from benchmarks.common import ROOT, share_percent, write_results

FIGURES = ("f1", "exact_match", "precision", "recall")


def accuracy_records(checkpoint: str, bundle: Path, data: str) -> list[dict]:
    from intentvcs.core.dataio import read_jsonl
    from intentvcs.core.evaluation import evaluate, headline
    from intentvcs.service.engine import Engine
    from intentvcs.training.predict import TorchPredictor

    examples = read_jsonl(data)
    texts = [ex.text for ex in examples]
    torch_arrays = TorchPredictor(checkpoint).infer(texts)
    fp32 = Engine(bundle, provider="cpu", quantized="off")
    backends = {"torch": (fp32.decision, torch_arrays), "onnx-fp32": (fp32.decision, fp32.infer(texts))}
    int8 = Engine(bundle, provider="cpu", quantized="on")
    backends["onnx-int8"] = (int8.decision, int8.infer(texts))
    figures = {name: headline(evaluate(decision, arrays, examples, include_tables=False))
               for name, (decision, arrays) in backends.items()}
    records = []
    for name, fig in figures.items():
        record = {"component": "accuracy", "backend": name, "dataset": Path(data).parent.name,
                  **{k.replace("exact_match", "EM").replace("f1", "F1"): round(100 * fig[k], 2) for k in FIGURES}}
        if name != "torch":
            record["F1_change_vs_torch"] = round(100 * (fig["f1"] - figures["torch"]["f1"]), 2)
            record["EM_change_vs_torch"] = round(100 * (fig["exact_match"] - figures["torch"]["exact_match"]), 2)
        records.append(record)
    return records


def render(records: list[dict]) -> str:
    parity = next(r for r in records if r["component"] == "parity")
    lines = [f"Parity on {parity['utterances']} test utterances: max |logit diff| "
             f"{parity['max_abs_logit_diff']:.1e} (gate 1e-4), label sets identical "
             f"{share_percent(parity['label_set_agreement'])}%, OOS verdicts identical "
             f"{share_percent(parity['oos_agreement'])}%.",
             "", "| backend | F1 | EM | change vs PyTorch (F1 / EM) |", "|---|---|---|---|"]
    for r in records:
        if r["component"] == "accuracy":
            change = "–" if r["backend"] == "torch" else f"{r['F1_change_vs_torch']:+.2f} / {r['EM_change_vs_torch']:+.2f}"
            lines.append(f"| {r['backend']} | {r['F1']:.2f} | {r['EM']:.2f} | {change} |")
    lines += ["", "The engine's speed against PyTorch and the other paths users would run: section \"Performance\"."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=str(ROOT / "runs/bench/vcs-emb/ckpt/snips/pu-s0"))
    parser.add_argument("--data", default=str(ROOT / "runs/bench/vcs/data/snips-vcs-seed0/test.jsonl"))
    parser.add_argument("--bundle", default=str(ROOT / "runs/bench/export/snips-vcs-pu"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from intentvcs.export.exporter import export_bundle

    result = export_bundle(args.checkpoint, args.bundle, quantize=True, parity_data=args.data)
    parity = {k: v for k, v in result["parity"].items() if not isinstance(v, (list, dict))}
    quant = {f"int8_{k}": v for k, v in (result["quantization"] or {}).items() if not isinstance(v, (list, dict))}
    records = [{"component": "parity", "export_seconds": result["seconds"], **parity, **quant}]
    records += accuracy_records(args.checkpoint, Path(args.bundle), args.data)
    write_results("export", records, render(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
