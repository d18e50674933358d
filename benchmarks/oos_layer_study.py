"""Which features separate CLINC150 out-of-scope queries best? The study behind the distance rule.

The ``distance`` rule first scored only the fine-tuned model's final mean-pooled
embedding (Mahalanobis to the nearest class mean). Fine-tuning pulls every
utterance, out-of-scope ones included, toward some intent's cluster, so
lower layers, which fine-tuning changes less, may keep what tells an unseen
request apart. This script takes the in-scope CLINC150 Full model saved by
``benchmarks/oos_bench.py`` (``--ckpt``), mean-pools every layer's hidden
states on train/valid/test, and scores OOS detection on test for:

* ``final maha``: that score alone;
* ``layer k knn``: 1 - cosine similarity to the nearest training utterance in
  layer k (no OOS data used);
* ``final maha + layer k knn``: the sum of the two scores, each standardised
  by its mean and deviation on in-scope validation rows (``k = 3``: the served
  rule);
* variants of the served rule: Mahalanobis instead of nearest neighbour in
  layer 3, the mean distance to the 5 nearest neighbours, layer 2's neighbour
  term added, and 1 - max softmax confidence added as a third term.

For each: AUROC, FPR at 95 % in-scope recall, and in-scope accuracy / OOS
recall with the threshold kept at 98 % of in-scope validation rows. This study
chose the served ``distance`` rule (``intentvcs.core.oos``): final Mahalanobis plus
the layer-3 neighbour term, the graph's ``pooled_mid`` output.

    python -m benchmarks.oos_layer_study --ckpt runs/bench/oos/ckpt/<id>-e4-s0

Writes ``benchmarks/results/oos_layers.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


from benchmarks.common import SHARED_DATA, write_results
from intentvcs.core.scoring import auroc, fpr_at_retention
from intentvcs.core.oos import DistanceRule

RETENTION = 0.98


def layer_features(checkpoint: Path, texts: list[str], batch: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """``(logits [N, L], mean-pooled hidden states [N, layers + 1, H])`` of the saved model."""
    import torch

    from benchmarks.oos_bench import load_trained

    trained = load_trained(checkpoint)
    model, tokenizer = trained.model.eval(), trained.tokenizer
    logits, layers = [], []
    with torch.no_grad():
        for start in range(0, len(texts), batch):
            enc = tokenizer(texts[start:start + batch], padding=True, truncation=True, max_length=64,
                            return_tensors="pt")
            out = model.encoder(**enc, output_hidden_states=True)
            mask = enc["attention_mask"].unsqueeze(-1).float()
            pooled = [((h * mask).sum(1) / mask.sum(1)) for h in out.hidden_states]
            logits.append(model.head(pooled[-1]).numpy())
            layers.append(torch.stack(pooled, 1).numpy())
    return np.concatenate(logits), np.concatenate(layers)


def nearest_distance(bank: np.ndarray, queries: np.ndarray, k: int = 1) -> np.ndarray:
    """1 - mean cosine similarity of each query to its ``k`` nearest bank rows."""
    bank = bank / np.linalg.norm(bank, axis=1, keepdims=True)
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    chunks = [np.sort(queries[i:i + 2048] @ bank.T, axis=1)[:, -k:].mean(axis=1) for i in range(0, len(queries), 2048)]
    return 1.0 - np.concatenate(chunks)


def main(argv: list[str] | None = None) -> int:
    from intentvcs.training.loaders.clinc150 import load_split

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ckpt", required=True, help="in-scope CLINC150 Full model saved by oos_bench.py")
    args = parser.parse_args(argv)
    path = SHARED_DATA / "clinc150" / "data_full.json"
    splits = {name: load_split(path, name) for name in ("train", "valid", "test")}
    splits["train"] = [ex for ex in splits["train"] if ex.labels]
    feats = {name: layer_features(Path(args.ckpt), [ex.text for ex in rows]) for name, rows in splits.items()}
    labels = sorted({ex.labels[0] for ex in splits["train"]})
    index = {name: i for i, name in enumerate(labels)}
    gold = {name: np.array([index[ex.labels[0]] if ex.labels else -1 for ex in rows]) for name, rows in splits.items()}
    layers = feats["train"][1].shape[1]

    maha = DistanceRule.fit_statistics(feats["train"][1][:, -1], gold["train"])
    scores = {"final maha": {s: maha.distances(feats[s][1][:, -1]) for s in ("valid", "test")}}
    for k in range(layers):
        scores[f"layer {k} knn"] = {s: nearest_distance(feats["train"][1][:, k], feats[s][1][:, k])
                                    for s in ("valid", "test")}

    def standardised(score: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        inside = score["valid"][gold["valid"] >= 0]
        return {s: (v - inside.mean()) / inside.std() for s, v in score.items()}

    final = standardised(scores["final maha"])
    for k in range(layers):
        other = standardised(scores[f"layer {k} knn"])
        scores[f"final maha + layer {k} knn"] = {s: final[s] + other[s] for s in ("valid", "test")}

    def summed(*parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {s: sum(standardised(p)[s] for p in parts) for s in ("valid", "test")}

    mid = 3
    mid_maha = DistanceRule.fit_statistics(feats["train"][1][:, mid], gold["train"])
    scores[f"final maha + layer {mid} maha"] = summed(
        scores["final maha"], {s: mid_maha.distances(feats[s][1][:, mid]) for s in ("valid", "test")})
    scores[f"final maha + layer {mid} knn (mean of 5)"] = summed(
        scores["final maha"], {s: nearest_distance(feats["train"][1][:, mid], feats[s][1][:, mid], k=5)
                               for s in ("valid", "test")})
    scores[f"final maha + layer 2 knn + layer {mid} knn"] = summed(
        scores["final maha"], scores["layer 2 knn"], scores[f"layer {mid} knn"])

    def unconfidence(logits: np.ndarray) -> np.ndarray:
        z = np.exp(logits - logits.max(axis=1, keepdims=True))
        return 1.0 - (z / z.sum(axis=1, keepdims=True)).max(axis=1)

    scores[f"final maha + layer {mid} knn + (1 - max confidence)"] = summed(
        scores["final maha"], scores[f"layer {mid} knn"], {s: unconfidence(feats[s][0]) for s in ("valid", "test")})

    records = []
    is_oos = gold["test"] < 0
    correct = feats["test"][0].argmax(axis=1) == gold["test"]
    for name, score in scores.items():
        cut = np.quantile(score["valid"][gold["valid"] >= 0], RETENTION)
        rejected = score["test"] > cut
        records.append({"score": name, "auroc": round(auroc(score["test"], is_oos), 4),
                        "fpr95": round(100 * fpr_at_retention(score["test"], is_oos), 2),
                        "in_scope_acc": round(100 * float(np.mean((correct & ~rejected)[~is_oos])), 2),
                        "oos_recall": round(100 * float(rejected[is_oos].mean()), 2),
                        "retention": RETENTION})
    lines = ["| score | AUROC | FPR@95 | in-scope acc | OOS recall |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {r['score']} | {r['auroc']:.4f} | {r['fpr95']:.2f} | {r['in_scope_acc']:.2f} | "
              f"{r['oos_recall']:.2f} |" for r in records]
    markdown = (f"CLINC150 Full test; threshold keeps {RETENTION:.0%} of in-scope validation rows; "
                "model: the in-scope model of `oos_bench.py`. In-scope accuracy here is top-1 and not rejected "
                "(`oos_bench.py` reports exact match after acceptance thresholds, which is stricter).\n\n"
                + "\n".join(lines) + "\n")
    print(markdown)
    print(f"wrote {write_results('oos_layers', records, markdown)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
