"""Why two of DialogVCS's baselines collapse here: where each loss puts a label's score, in closed form.

In a DialogVCS set the version a row carries is drawn uniformly (``intentvcs.training.vcs_builder``):
the texts of a family ``{i, i_v1, i_v2}`` are observed as each of the three labels a third of the time,
whatever the text says. No model can tell the three apart, so the best any loss can do is to give each
label the score that minimises its *expected* loss at its observation rate ``q`` (the share of a text
type's rows observed with the label): ``q = 1`` for a label always written, ``1/2`` and ``1/3`` for
labels sharing their texts with one or two others, ``0`` for a label never written on such texts. A
baseline predicts, at its threshold, exactly the labels whose optimal score clears it; the gold set of
a family is all of it, so a loss reaches the paper's figures only if its optimum clears the threshold
at ``q = 1/3`` and stays under it at ``q = 0``.

This script computes those optima (a dense grid search of the one-dimensional expected loss; exact to
the grid step, 1e-5 in probability):

``ls_focal``  label-smoothed targets ``t = y (1 - beta) + beta / L`` inside a focal loss (gamma 4) with
              class weights ``alpha`` (positive part) and ``1 - alpha`` (negative part), scored by a
              sigmoid at 0.5 (``training.losses.ls_focal_loss``). Per label the expected target is
              ``q t1 + (1 - q) t0``. Swept over ``alpha``: the paper's 0.99999, and the readings that
              would make the loss work.
``mlce``      multi-label cross-entropy with threshold score s0 = 0 (``training.losses.mlce_loss``): the
              labels of a text type share its rows at rates ``q_j`` (``FAMILIES``: three versions at 1/3
              each; a split pivot's coarse label at 1/2 and its child's two versions at 1/4; a label
              alone), every other label is never written on them (its best score is -inf). A row
              observed as ``j`` costs ``log(1 + sum_{i != j} e^s_i) + log(1 + e^-s_j)``; the expected
              loss is convex in the scores and minimised by gradient descent. A label is predicted when
              its score is above 0.

    python -m benchmarks.baseline_optima

Pure arithmetic: no model, no data set (the label counts are the VCS sets' own).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from benchmarks.common import write_results

GAMMA = 4.0
BETA = 0.2
# The full VCS sets' label counts (training/vcs_builder.py): L enters the smoothed targets.
LABEL_COUNTS = {"snips-vcs": 33, "atis-vcs": 74, "multiwoz-vcs": 28, "crosswoz-vcs": 20}
RATES = {"1": 1.0, "1/2": 0.5, "1/3": 1 / 3, "1/4": 0.25, "0": 0.0}
# How the labels of one text type share its rows in the full VCS sets (vcs_builder's rule).
FAMILIES = {"one label": (1.0,), "versions i, i_v1, i_v2": (1 / 3, 1 / 3, 1 / 3),
            "split pivot: i, c_v1, c_v2": (0.5, 0.25, 0.25)}
ALPHAS = (0.99999, 0.999, 0.99, 0.95, 0.9, 0.75, 0.5)
PAPER_ALPHA = 0.99999
GRID = np.linspace(1e-5, 1 - 1e-5, 99_999)


def focal_optimum(q: float, alpha: float, labels: int, beta: float = BETA, gamma: float = GAMMA) -> float:
    """The sigmoid probability minimising the LS focal loss of a label observed at rate ``q``."""
    t = q * (1 - beta + beta / labels) + (1 - q) * beta / labels
    p = GRID
    loss = -alpha * t * (1 - p) ** gamma * np.log(p) - (1 - alpha) * (1 - t) * p ** gamma * np.log1p(-p)
    return float(p[loss.argmin()])


def mlce_optimum(rates: tuple[float, ...], steps: int = 20_000, step: float = 0.5) -> np.ndarray:
    """The scores minimising the expected multi-label CE (s0 = 0) of labels sharing their rows at ``rates``.

    A label that is every row's (rate 1) has no finite optimum (its score grows without bound); the
    search stops at ``steps`` with it far above 0, which is all the table needs.
    """
    q = np.asarray(rates)
    s = np.zeros(len(q))
    for _ in range(steps):
        e = np.exp(s)
        others = e.sum() - e  # per row kind j: sum of e^s_i over i != j
        # d/ds_i of sum_j q_j log(1 + others_j): e^s_i * sum_{j != i} q_j / (1 + others_j)
        weights = q / (1 + others)
        grad = e * (weights.sum() - weights) - q / (1 + e)
        s -= step * grad
    return s


def records() -> list[dict]:
    found = []
    for name, labels in LABEL_COUNTS.items():
        for alpha in ALPHAS:
            optima = {rate: focal_optimum(q, alpha, labels) for rate, q in RATES.items()}
            found.append({"loss": "ls_focal", "set": name, "labels": labels, "alpha": alpha, "beta": BETA,
                          "gamma": GAMMA, "threshold": 0.5,
                          **{f"p_at_q={rate}": round(p, 4) for rate, p in optima.items()},
                          "family_predicted": optima["1/4"] > 0.5, "unrelated_predicted": optima["0"] > 0.5})
    for family, rates in FAMILIES.items():
        scores = mlce_optimum(rates)
        found.append({"loss": "mlce", "family": family, "rates": [round(q, 4) for q in rates], "threshold": 0.0,
                      "scores": [round(float(x), 3) for x in scores], "predicted": [bool(x > 1e-3) for x in scores]})
    return found


def render(found: list[dict]) -> str:
    lines = ["LS focal loss (γ 4, β 0.2, sigmoid at 0.5): the optimal probability of a label observed at rate q.",
             "", "| set (labels) | α_pos | q = 1 | q = 1/2 | q = 1/3 | q = 1/4 | q = 0 | family predicted | "
             "unrelated predicted |", "|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in (r for r in found if r["loss"] == "ls_focal"):
        alpha = f"**{r['alpha']:g}** (paper)" if r["alpha"] == PAPER_ALPHA else f"{r['alpha']:g}"
        lines.append(f"| {r['set']} ({r['labels']}) | {alpha} | {r['p_at_q=1']:.3f} | {r['p_at_q=1/2']:.3f} | "
                     f"{r['p_at_q=1/3']:.3f} | {r['p_at_q=1/4']:.3f} | {r['p_at_q=0']:.3f} | "
                     f"{'yes' if r['family_predicted'] else 'no'} | {'yes' if r['unrelated_predicted'] else 'no'} |")
    lines += ["", "Multi-label CE (s0 = 0): the optimal score of each label of a text type whose rows its labels "
                  "share at the given rates.", "", "| labels of the text type | rates | optimal scores | predicted "
                  "(score > 0) |", "|---|---|---|---|"]
    for r in (r for r in found if r["loss"] == "mlce"):
        rates = ", ".join(f"{q:.3g}" for q in r["rates"])
        scores = ", ".join("> 5 (unbounded)" if x > 5 else f"{x:+.3f}" for x in r["scores"])
        predicted = ", ".join("yes" if p else "no" for p in r["predicted"])
        lines.append(f"| {r['family']} | {rates} | {scores} | {predicted} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    found = records()
    print(render(found))
    write_results("baseline_optima", found, render(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
