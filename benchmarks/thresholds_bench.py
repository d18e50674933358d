"""Per-label acceptance thresholds vs the global 0.5 on the DialogVCS sets.

Thresholds chosen on validation must not destroy PU multi-label exact match.
For each trained VCS checkpoint, the ``per_label_f1`` rule
(``intentvcs.core.thresholds``) is fitted on the validation rows with their
full gold sets (``valid_gold.jsonl``; only a benchmark has them) and the test
figures are compared with the global threshold.

    python -m benchmarks.thresholds_bench
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path


from benchmarks.common import ROOT, write_results

WORK = ROOT / "runs" / "bench" / "vcs"


def compare(checkpoint: Path, data: Path) -> dict:
    from intentvcs.core.dataio import read_jsonl
    from intentvcs.core.evaluation import evaluate, gold_matrix, headline
    from intentvcs.core.thresholds import fit_thresholds
    from intentvcs.training.predict import TorchPredictor

    predictor = TorchPredictor(checkpoint)
    decision = predictor.decision
    valid, test = read_jsonl(data / "valid_gold.jsonl"), read_jsonl(data / "test.jsonl")
    valid_logits = predictor.infer([ex.text for ex in valid]).logits
    gold, _ = gold_matrix(valid, decision.labels)
    per_label = fit_thresholds(decision.confidences(valid_logits), gold[:, : len(decision.labels)],
                               rule="per_label_f1")
    test_outputs = predictor.infer([ex.text for ex in test])
    rows = {}
    for rule, candidate in (("global", decision), ("per_label_f1", replace(decision, thresholds=per_label))):
        rows[rule] = headline(evaluate(candidate, test_outputs, test, include_tables=False))
    return {"dataset": data.name.split("-seed")[0], "method": predictor.meta["method"],
            "checkpoint": checkpoint.name,
            **{f"{k}_{rule}": round(100 * rows[rule][m], 2) for rule in rows
               for k, m in (("F1", "f1"), ("EM", "exact_match"))},
            "labels_with_own_threshold": int((per_label != decision.thresholds).sum())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["snips", "atis"])
    parser.add_argument("--checkpoint-name", default="pu-s0")
    args = parser.parse_args()
    records = [compare(WORK / "ckpt" / d / args.checkpoint_name, WORK / "data" / f"{d}-vcs-seed0")
               for d in args.datasets]
    lines = ["| dataset | method | F1 / EM, global 0.5 | F1 / EM, per-label (fitted on valid gold) | labels with own threshold |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['dataset']} | {r['method']} | {r['F1_global']:.2f} / {r['EM_global']:.2f} | "
              f"{r['F1_per_label_f1']:.2f} / {r['EM_per_label_f1']:.2f} | {r['labels_with_own_threshold']} |"
              for r in records]
    write_results("thresholds", records, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
