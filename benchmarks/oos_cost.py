"""What the out-of-scope distance rule's neighbour term costs a request (docs/RESEARCH.md section 2).

Loads a bundle served with the two-term ``distance`` rule (e.g. CLINC150 Full,
a 15,000-row bank) and times, on the served engine, ``predict`` on batches of
1 and 32 test utterances with the rule as served and with the same rule
stripped of its neighbour term (Mahalanobis alone, as before the term was
added). Also times the two OOS terms alone on the batch's graph outputs. Each
figure is the median of ``--repeats`` runs after a warm-up, the variants
interleaved so that drift in machine load hits them alike.

    python -m benchmarks.oos_cost --bundle runs/bench/audit/clinc150/bundle

Writes ``benchmarks/results/oos_cost.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time



from benchmarks.common import SHARED_DATA, write_results


def median_ms(run, repeats: int) -> float:
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return 1000.0 * statistics.median(times)


def main() -> int:
    from intentvcs.service.engine import Engine
    from intentvcs.training.loaders.clinc150 import load_split

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", required=True, help="a bundle whose decision uses the two-term distance rule")
    parser.add_argument("--threads", type=int, default=1, help="ONNX Runtime intra-op threads (one service worker)")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()

    engine = Engine(args.bundle, provider="cpu", threads=args.threads)
    served = engine.decision
    if served.oos.name != "distance" or served.oos.bank is None:
        raise SystemExit(f"{args.bundle}: the decision has no neighbour bank (rule {served.oos.name!r})")
    alone = dataclasses.replace(served, oos=dataclasses.replace(served.oos, bank=None, scales=None))
    texts = [ex.text for ex in load_split(SHARED_DATA / "clinc150" / "data_full.json", "test")]
    records = []
    for batch in (1, 32):
        chunk = texts[:batch]
        outputs = engine.infer(chunk)
        timings = {"graph": [], "predict_served": [], "predict_without_neighbour": []}
        for _ in range(3):  # interleaved rounds
            timings["graph"].append(median_ms(lambda: engine.infer(chunk), args.repeats))
            for name, decision in (("predict_served", served), ("predict_without_neighbour", alone)):
                engine.bundle = dataclasses.replace(engine.bundle, decision=decision)
                timings[name].append(median_ms(lambda: engine.predict(chunk), args.repeats))
        engine.bundle = dataclasses.replace(engine.bundle, decision=served)
        mahalanobis = median_ms(lambda: served.oos.distances(outputs.pooled), args.repeats)
        neighbour = median_ms(lambda: served.oos.neighbour_distances(outputs.pooled_mid), args.repeats)
        row = {"batch": batch, "bank_rows": int(served.oos.bank.shape[0]), "threads": args.threads,
               **{f"{k}_ms": round(statistics.median(v), 3) for k, v in timings.items()},
               "mahalanobis_ms": round(mahalanobis, 3), "neighbour_ms": round(neighbour, 3)}
        row["neighbour_share_of_predict"] = round(row["neighbour_ms"] / row["predict_served_ms"], 3)
        records.append(row)
        print(row)
    lines = ["| batch | bank rows | graph (ms) | predict, served (ms) | predict, Mahalanobis only (ms) "
             "| Mahalanobis term (ms) | neighbour term (ms) | neighbour share |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['batch']} | {r['bank_rows']} | {r['graph_ms']:.2f} | {r['predict_served_ms']:.2f} | "
              f"{r['predict_without_neighbour_ms']:.2f} | {r['mahalanobis_ms']:.2f} | {r['neighbour_ms']:.2f} | "
              f"{100 * r['neighbour_share_of_predict']:.1f}% |" for r in records]
    markdown = (f"Bundle `{args.bundle}`, CPU ONNX Runtime, {args.threads} intra-op thread(s), "
                f"median of {args.repeats} runs x 3 interleaved rounds.\n\n" + "\n".join(lines) + "\n")
    print(markdown)
    print(f"wrote {write_results('oos_cost', records, markdown)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
