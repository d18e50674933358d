"""Where exact match is lost on the DialogVCS sets: error classes, families, wrong co-predictions.

Trains nothing: reads the served bundles that ``benchmarks.vcs_bench`` left
under ``--work`` (``ckpt/<set>/<method>-s<seed>-bundle``) and the benchmark's
files (``data/<set>-vcs-seed0``). Every test row whose predicted label set is
not its gold set is put in one class, the first that applies:

- ``extra_in_family``: a label of one of the row's own gold families was
  predicted that is not gold (the other split ``X_with_e`` / ``X_without_e``,
  another composite of the same intents);
- ``extra_other_family``: a label of an intent family the row does not carry;
- ``missing_implied``: only gold labels are missing, and the relations imply
  them from what was predicted (label closure, ``--relations``, adds them);
- ``missing``: only gold labels are missing, and nothing predicted implies them.

The per-family table gives exact match by the family of the row's gold labels,
and the co-prediction table the most frequent (wrong label, gold family) pairs:
the co-occurrence signal of the paper's matrices, as counts.

    python -m benchmarks.vcs_diagnosis --work runs/bench/vcs-emb --datasets snips atis --methods pu \
        --discover-relations 0.8
"""

from __future__ import annotations

import argparse
import collections
import logging
import sys
from pathlib import Path

import numpy as np

from benchmarks.common import ROOT, keep_previous, shown_path, write_results

CLASSES = ("extra_in_family", "extra_other_family", "missing_implied", "missing")
TOP_PAIRS = 8


def label_families(relations_file: Path) -> dict[str, str]:
    """Each label's family (the builder's ``families`` of relations.json)."""
    import json

    families = json.loads(relations_file.read_text(encoding="utf-8"))["families"]
    return {label: family for family, labels in families.items() for label in labels}


def error_class(pred: set[str], gold: set[str], implied: set[str], family: dict[str, str]) -> str | None:
    """The class of one row's error (see the module docstring); None when the sets agree."""
    if pred == gold:
        return None
    extra = pred - gold
    gold_families = {family.get(label, label) for label in gold}
    if any(family.get(label, label) in gold_families for label in extra):
        return "extra_in_family"
    if extra:
        return "extra_other_family"
    return "missing_implied" if (gold - pred) <= implied else "missing"


def diagnose(bundle: Path, data: Path, discover: float = 0.0, support_noise: float = 0.0) -> dict:
    """The diagnosis of one served bundle on the benchmark's test split; with ``discover``, of its
    decision closed under the relations read off the validation rows at that rate (as
    ``benchmarks.vcs_bench --discover-relations`` scores it); with ``support_noise``, decided by support
    decoding (as ``benchmarks.vcs_bench --support-noise`` scores a reused checkpoint)."""
    from intentvcs.core.dataio import read_jsonl
    from intentvcs.core.relation_discovery import decide_with_discovered, decoding_at
    from intentvcs.core.relations import LabelRelations
    from intentvcs.service.engine import Engine
    from intentvcs.training.decision_fit import observed_matrix

    test = read_jsonl(data / "test.jsonl")
    engine = Engine(bundle, provider="cpu", quantized="off")
    decision, labels = decoding_at(engine.decision, support_noise), engine.decision.labels
    if discover:
        valid = read_jsonl(data / "valid.jsonl")
        decision = decide_with_discovered(decision, engine.infer([ex.text for ex in valid]).logits,
                                          observed_matrix(valid, labels), discover)[0]
    accepted = decision.apply(*engine.infer([ex.text for ex in test]).scores).accepted
    closed = LabelRelations.load(data / "relations.json").closure(labels)(accepted)
    family = label_families(data / "relations.json")
    classes: collections.Counter = collections.Counter()
    by_family: dict[str, list[bool]] = collections.defaultdict(list)
    pairs: collections.Counter = collections.Counter()
    for row, example in enumerate(test):
        pred = {labels[j] for j in np.flatnonzero(accepted[row])}
        implied = {labels[j] for j in np.flatnonzero(closed[row])}
        gold = set(example.labels)
        kind = error_class(pred, gold, implied, family)
        classes[kind or "exact"] += 1
        gold_families = sorted({family.get(label, label) for label in gold})
        by_family[" + ".join(gold_families)].append(kind is None)
        pairs.update((label, " + ".join(gold_families)) for label in pred - gold)
    return {
        "rows": len(test), "exact": classes["exact"],
        "classes": {name: classes[name] for name in CLASSES},
        "per_family": {name: {"rows": len(hits), "EM": round(100 * float(np.mean(hits)), 2)}
                       for name, hits in sorted(by_family.items())},
        "wrong_co_predictions": [{"predicted": label, "gold_family": fam, "rows": n}
                                 for (label, fam), n in pairs.most_common(TOP_PAIRS)],
    }


def render(records: list[dict]) -> str:
    """Error classes per run, then the worst families and the top wrong co-predictions of each set."""
    head = ["set", "method", "decision", "seed", "EM misses", *CLASSES]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in records:
        misses = r["rows"] - r["exact"]
        lines.append("| " + " | ".join([r["dataset"], r["method"], r["decision"], str(r["seed"]),
                                        f"{misses} / {r['rows']}", *(str(r["classes"][c]) for c in CLASSES)]) + " |")
    shown = set()
    for r in records:  # each set's first run: its lowest seed, before closure
        if (r["dataset"], r["method"]) in shown:
            continue
        shown.add((r["dataset"], r["method"]))
        worst = sorted(r["per_family"].items(), key=lambda item: item[1]["EM"])[:5]
        lines += ["", f"**{r['dataset']} / {r['method']} / seed {r['seed']}**: lowest exact match by gold family: "
                  + "; ".join(f"{name} {fig['EM']:.1f} ({fig['rows']} rows)" for name, fig in worst) + ".",
                  "Most frequent wrong labels: "
                  + "; ".join(f"`{p['predicted']}` with {p['gold_family']} ({p['rows']})"
                              for p in r["wrong_co_predictions"]) + "."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", default=str(ROOT / "runs" / "bench" / "vcs"),
                        help="the --work folder of a finished benchmarks.vcs_bench run")
    parser.add_argument("--datasets", nargs="+", default=["snips", "atis"])
    parser.add_argument("--methods", nargs="+", default=["pu", "upper_bound"])
    parser.add_argument("--results-name", default="vcs_diagnosis", help="writes benchmarks/results/NAME.{json,md}")
    parser.add_argument("--discover-relations", type=float, default=0.0, metavar="RATE",
                        help="also diagnose each bundle closed under the relations read off its validation rows")
    parser.add_argument("--support-noise", type=float, default=0.0, metavar="NOISE",
                        help="decide by support decoding at this noise (benchmarks.vcs_bench --support-noise)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    work = Path(args.work)
    records = []
    for dataset in args.datasets:
        data = work / "data" / f"{dataset}-vcs-seed0"
        for method in args.methods:
            for bundle in sorted((work / "ckpt" / dataset).glob(f"{method}-s*-bundle")):
                seed = int(bundle.name.removeprefix(f"{method}-s").removesuffix("-bundle"))
                logging.info("diagnosing %s", bundle)
                where = str(shown_path(work))
                support = f"support decoding (noise {args.support_noise:g})" if args.support_noise else ""
                for rate in (0.0, args.discover_relations) if args.discover_relations else (0.0,):
                    decided = f"discovered relations, rate {rate:g}" if rate else "as trained"
                    records.append({"dataset": f"{dataset}-vcs", "method": method, "seed": seed, "work": where,
                                    "decision": f"{support}, {decided}" if support else decided,
                                    **diagnose(bundle, data, rate, args.support_noise)})
    if not records:
        print(f"no bundles of {args.methods} under {work}/ckpt: run benchmarks.vcs_bench first", file=sys.stderr)
        return 2
    # One set per run is enough: the other sets' earlier records are kept (the command lists every run).
    done = {(r["dataset"], r["method"]) for r in records}
    records, command = keep_previous(args.results_name, records, lambda r: (r["dataset"], r["method"]) in done)
    write_results(args.results_name, records, render(records), command=command)
    print(render(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
