"""Which labels apply, read as the support of the written-label distribution (pure numpy).

A PU softmax model learns ``q_k(x) = P(k is the label written for x)``. If the
one label written for an utterance is drawn from the labels that apply to it,
each about as likely as the others, then ``q(x)`` is spread evenly over the
applicable set ``Y`` and is zero elsewhere: ``Y`` is its support. A trained
model leaves some mass outside ``Y`` too, so the support is decided as a
likelihood: among the prefixes ``Y_k`` of the labels sorted by ``q`` (the
``k`` most likely), take the one under which the written label is most likely
to have been written,

    score(k) = m_k * log(1 / k) + (1 - m_k) * log(noise),   m_k = sum of the top k q's,

i.e. the expected log-probability of the written label when it is drawn
uniformly from ``Y_k`` and, with the remaining mass, from outside it at
probability ``noise`` per label. A larger set explains more of the mass but
gives each of its labels less; ``noise`` (in (0, 1)) prices the mass left
outside, so a smaller ``noise`` keeps more labels.

Unlike a threshold on the PU-rescaled confidence (``p_k / c_k``, with one
selection rate ``c_k`` per label), this reads no selection rate: where a label
is written less often because other labels apply too (a turn that carries two
dialogue acts, CrossWOZ-VCS), the rescaled confidence falls under the cut on
exactly those turns, while the support still holds the label
(docs/RESULTS.md, DialogVCS).
"""

from __future__ import annotations

import numpy as np

# The best median exact match over 3 seeds on CrossWOZ-VCS's validation gold sets among 0.001-0.02 (0.005 next;
# docs/RESULTS.md, "Support decoding"): a choice made with gold sets, for the data it was made for.
DEFAULT_NOISE = 0.003


def check_activation(activation: str) -> None:
    """Support decoding reads a distribution over the labels: a softmax's, not independent sigmoids."""
    if activation != "softmax":
        raise ValueError(f"support decoding reads a softmax's probabilities, not {activation!r} ones")


def check_noise(noise: float) -> float:
    noise = float(noise)
    if not 0.0 < noise < 1.0:
        raise ValueError(f"support noise must lie in (0, 1), got {noise}")
    return noise


def support_sets(probs: np.ndarray, noise: float = DEFAULT_NOISE) -> np.ndarray:
    """Bool ``[N, L]``: per row, the most likely support of ``probs`` (rows summing to 1), never empty.

    Ties in ``score`` keep the smaller set; equal probabilities keep label order.
    """
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim != 2 or probs.shape[1] == 0:
        raise ValueError(f"probs must be [N, L] with L >= 1, got shape {list(probs.shape)}")
    noise = check_noise(noise)
    order = np.argsort(-probs, axis=1, kind="stable")
    mass = np.minimum(np.cumsum(np.take_along_axis(probs, order, axis=1), axis=1), 1.0)
    sizes = np.arange(1, probs.shape[1] + 1, dtype=np.float64)
    score = mass * np.log(1.0 / sizes) + (1.0 - mass) * np.log(noise)
    keep = score.argmax(axis=1) + 1  # argmax takes the first of equal scores: the smaller set
    accepted = np.zeros(probs.shape, dtype=bool)
    ranks = np.arange(probs.shape[1])[None, :] < keep[:, None]
    np.put_along_axis(accepted, order, ranks, axis=1)
    return accepted
