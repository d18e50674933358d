"""Per-label selection rates for positive-unlabeled multi-label learning.

With one written label per utterance, a model of the *observed* label learns
g_k(x) = P(k written | x) = c_k * P(k applies | x) under the SCAR assumption
(the chance c_k that label k is the one written, given it applies, does not
depend on x). Elkan & Noto (2008): c_k = E[g_k(x) | k written], estimated on
data the model did not train on. Then P(k applies | x) = g_k(x) / c_k.

c_k well below 1 means label k usually shares its utterances with other
labels: it is itself a sign of entanglement (versions, splits, composites).
"""

from __future__ import annotations

import numpy as np


def estimate_label_scale(
    heldout_probs: np.ndarray,
    heldout_observed: np.ndarray,
    prior_probs: np.ndarray | None = None,
    prior_observed: np.ndarray | None = None,
    prior_strength: float = 5.0,
    floor: float = 0.05,
) -> np.ndarray:
    """Estimate c_k for every label.

    Args:
        heldout_probs: [N, L] calibrated P(k written | x) on held-out rows.
        heldout_observed: [N, L] 0/1 matrix of the written label(s) of those rows.
        prior_probs, prior_observed: the same on other rows (e.g. the training
            set). They only set the prior that held-out evidence is shrunk
            towards, because a model is over-confident on its own training
            rows; labels with no held-out rows fall back to it entirely.
        prior_strength: pseudo-count of the prior (in rows).
        floor: lower bound, so a label seen once with a low score cannot blow
            up every score it divides.

    Returns:
        [L] float array in [floor, 1].
    """
    heldout_observed = np.asarray(heldout_observed, dtype=bool)
    sums = (np.asarray(heldout_probs) * heldout_observed).sum(axis=0)
    counts = heldout_observed.sum(axis=0).astype(float)
    if prior_probs is not None and prior_observed is not None:
        prior_observed = np.asarray(prior_observed, dtype=bool)
        prior_counts = prior_observed.sum(axis=0)
        prior_mean = (np.asarray(prior_probs) * prior_observed).sum(axis=0) / np.maximum(prior_counts, 1)
        prior_mean = np.where(prior_counts > 0, prior_mean, 1.0)
    else:
        # Without other evidence, shrink towards the pooled held-out mean.
        pooled = sums.sum() / max(counts.sum(), 1.0)
        prior_mean = np.full(sums.shape, pooled if counts.sum() else 1.0)
    scale = (sums + prior_strength * prior_mean) / (counts + prior_strength)
    return np.clip(scale, floor, 1.0)
