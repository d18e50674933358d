"""What the spelling normaliser costs and does on a served bundle (robustness to typos).

Loads a bundle that carries a spelling normaliser and, on a data set's test
split, measures: how many clean utterances it changes (and how many words),
how many keyboard-typo copies (``typo_keyboard``, seed 0) it restores exactly,
the normaliser alone in microseconds per utterance (cold: a fresh normaliser,
every word looked up; warm: its word cache filled), and the served engine's
``predict`` on batches of 1 and 32 typo copies with the normaliser on and
off (median of ``--repeats`` runs after a warm-up, the two engines
interleaved so that drift in machine load hits them alike). A misspelt word
is several word pieces, so a restored batch is also shorter for the graph;
the word-piece counts of the batch of 32 are reported with it.

    python -m benchmarks.spelling_cost --bundle runs/bench/spelling/clinc150/seed0/augmented/bundle \\
        --dataset clinc150

Writes ``benchmarks/results/spelling_cost.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time



from benchmarks.common import write_results
from benchmarks.robustness_bench import DATASETS, load_splits


def seconds(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def interleaved_median_ms(runs: dict, repeats: int) -> dict[str, float]:
    """Median milliseconds per variant, the variants alternating run by run."""
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            times[name].append(seconds(run))
    return {name: 1000.0 * statistics.median(values) for name, values in times.items()}


def changed_words(before: str, after: str) -> int:
    return sum(a != b for a, b in zip(re.findall(r"\S+", before), re.findall(r"\S+", after)))


def main() -> int:
    from intentvcs.core.perturb import perturb
    from intentvcs.core.spelling import Spelling
    from intentvcs.service.engine import Engine

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", required=True, help="a bundle exported with a spelling normaliser")
    parser.add_argument("--dataset", choices=sorted(DATASETS), required=True, help="whose test split to use")
    parser.add_argument("--threads", type=int, default=1, help="ONNX Runtime intra-op threads (one service worker)")
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()

    served = Engine(args.bundle, provider="cpu", threads=args.threads)
    raw = Engine(args.bundle, provider="cpu", threads=args.threads, spelling=False)
    if served.spelling is None:
        parser.error(f"{args.bundle} has no spelling normaliser (export a checkpoint trained with --spelling)")
    vocabulary = served.spelling.counts
    _, _, test = load_splits(args.dataset, None, None, 0)
    clean = [ex.text for ex in test]
    typos = [(perturb(ex, "typo_keyboard", 0) or ex).text for ex in test]

    normalised = served.spelling.normalise_all(clean)
    restored = served.spelling.normalise_all(typos)
    typo_rows = [i for i, (a, b) in enumerate(zip(clean, typos)) if a != b]
    record = {
        "bundle": args.bundle, "dataset": args.dataset, "utterances": len(clean), "vocabulary": len(vocabulary),
        "clean_changed": sum(a != b for a, b in zip(clean, normalised)),
        "clean_words_changed": sum(changed_words(a, b) for a, b in zip(clean, normalised)),
        "typo_copies": len(typo_rows),
        "typo_restored": sum(restored[i] == clean[i] for i in typo_rows),
        "threads": args.threads, "repeats": args.repeats,
    }
    for name, texts in (("clean", clean), ("typos", typos)):
        fresh = Spelling(vocabulary)
        record[f"normalise_cold_us_{name}"] = round(1e6 * seconds(lambda: fresh.normalise_all(texts)) / len(texts), 2)
        record[f"normalise_warm_us_{name}"] = round(1e6 * seconds(lambda: fresh.normalise_all(texts)) / len(texts), 2)
    record["batch32_word_pieces_off"] = sum(len(e.ids) for e in served.bundle.tokenizer.encode(typos[:32]))
    record["batch32_word_pieces_on"] = sum(len(e.ids) for e in served.bundle.tokenizer.encode(restored[:32]))
    for batch in (1, 32):
        texts = typos[:batch]
        medians = interleaved_median_ms({"on": lambda: served.predict(texts), "off": lambda: raw.predict(texts)},
                                        args.repeats)
        record[f"predict_ms_b{batch}_on"] = round(medians["on"], 3)
        record[f"predict_ms_b{batch}_off"] = round(medians["off"], 3)

    markdown = "\n".join([
        f"Spelling normaliser on `{args.dataset}` test ({len(clean)} utterances, {len(vocabulary)} training words), "
        f"CPU, {args.threads} ONNX Runtime thread(s).",
        "",
        "| measure | value |",
        "|---|---|",
        f"| clean utterances changed | {record['clean_changed']} ({100 * record['clean_changed'] / len(clean):.1f} %),"
        f" {record['clean_words_changed']} words |",
        f"| typo_keyboard copies restored exactly | {record['typo_restored']} of {record['typo_copies']} "
        f"({100 * record['typo_restored'] / max(1, record['typo_copies']):.1f} %) |",
        f"| normaliser, µs per utterance (cold / warm cache), clean | {record['normalise_cold_us_clean']} / "
        f"{record['normalise_warm_us_clean']} |",
        f"| normaliser, µs per utterance (cold / warm cache), typos | {record['normalise_cold_us_typos']} / "
        f"{record['normalise_warm_us_typos']} |",
        f"| predict, batch 1, ms (normaliser on / off) | {record['predict_ms_b1_on']:.3f} / "
        f"{record['predict_ms_b1_off']:.3f} |",
        f"| predict, batch 32, ms (normaliser on / off) | {record['predict_ms_b32_on']:.3f} / "
        f"{record['predict_ms_b32_off']:.3f} |",
        f"| batch 32, word pieces the graph reads (on / off) | {record['batch32_word_pieces_on']} / "
        f"{record['batch32_word_pieces_off']} |",
        "",
    ])
    print(markdown)
    print(f"wrote {write_results('spelling_cost', [record], markdown)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
