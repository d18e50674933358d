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

Labels that are names of one intent (duplicates: ``x``, ``x_v1``, ``x_v2``
after a version conflict) are not drawn like distinct intents: a writer picks
one of the intents that apply, then one of its names. With ``intents`` (each
label's intent id) the support is decided over intents, under that two-step
draw: a set ``S`` of ``k`` intents, intent ``g`` with ``n_g`` names and mass
``m_g`` (its names' q summed), scores

    score(S) = sum over g in S of m_g * log(1 / (k * n_g)) + (1 - M_S) * log(noise),

so an intent joins or leaves with all its names, and three names of one
intent weigh as one intent, not three. Without it, a turn that carries a
composite act and two acts with three names each is read as seven labels of
equal weight, and the composite's mass (a third) does not fit: on
CrossWOZ-VCS exact match rose from 74.4 to 85.5 (medians of 3 seeds) with the
duplicates read off held-out rows (``intentvcs.core.relation_discovery``;
docs/RESULTS.md, "Names of one intent decided together"). When every label is
its own intent this is the flat score above.
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


def support_sets(probs: np.ndarray, noise: float = DEFAULT_NOISE, intents: np.ndarray | None = None) -> np.ndarray:
    """Bool ``[N, L]``: per row, the most likely support of ``probs`` (rows summing to 1), never empty.

    ``intents`` (ints ``[L]``, optional): labels with equal values are names of
    one intent, accepted or left together (the module docstring's two-step
    draw); None reads every label as an intent of its own. Ties in ``score``
    keep the smaller set; equal scores of labels or intents keep label order.
    """
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim != 2 or probs.shape[1] == 0:
        raise ValueError(f"probs must be [N, L] with L >= 1, got shape {list(probs.shape)}")
    noise = check_noise(noise)
    if intents is None:
        return _flat_support(probs, noise)
    intents = np.asarray(intents)
    if intents.shape != (probs.shape[1],) or intents.dtype.kind not in "iu":
        raise ValueError(f"intents must be {probs.shape[1]} integers (one per label), got {intents!r}")
    ids, first, column_intent = np.unique(intents, return_index=True, return_inverse=True)
    # Intents numbered by their first label, not by the value of their id: equal gains keep intent order, and
    # that must be label order whatever ids a caller picks (a Decision's group takes the column of the group's
    # first-written name, so [["b", "a"]] and [["a", "b"]] answered differently on a tie).
    rank = np.empty(len(ids), dtype=np.intp)
    rank[np.argsort(first, kind="stable")] = np.arange(len(ids))
    column_intent = rank[column_intent.reshape(-1)]
    if len(ids) == probs.shape[1]:
        return _flat_support(probs, noise)
    mass = np.zeros((probs.shape[0], len(ids)))
    np.add.at(mass.T, column_intent, probs.T)  # an intent's mass: its names' probabilities summed
    return _grouped_support(mass, np.bincount(column_intent), noise)[:, column_intent]


def _flat_support(probs: np.ndarray, noise: float) -> np.ndarray:
    # One sort serves every set size: with one name per intent the best k-set is the top k.
    order = np.argsort(-probs, axis=1, kind="stable")
    mass = np.minimum(np.cumsum(np.take_along_axis(probs, order, axis=1), axis=1), 1.0)
    sizes = np.arange(1, probs.shape[1] + 1, dtype=np.float64)
    score = mass * np.log(1.0 / sizes) + (1.0 - mass) * np.log(noise)
    keep = score.argmax(axis=1) + 1  # argmax takes the first of equal scores: the smaller set
    accepted = np.zeros(probs.shape, dtype=bool)
    ranks = np.arange(probs.shape[1])[None, :] < keep[:, None]
    np.put_along_axis(accepted, order, ranks, axis=1)
    return accepted


def _grouped_support(mass: np.ndarray, names: np.ndarray, noise: float) -> np.ndarray:
    """Bool ``[N, G]``: the best set of intents per row, intent ``g`` holding ``names[g]`` labels and
    ``mass[:, g]`` of the probability.

    For a fixed size ``k`` the score is ``log(noise)`` plus a sum of per-intent
    terms ``m_g * (log(1 / noise) - log(k) - log(n_g))``, so the best k-set is
    the top ``k`` by that term; its order depends on ``k`` through ``n_g``, hence
    one sort per size.
    """
    rows, count = mass.shape
    best = np.full(rows, -np.inf)
    chosen = np.zeros((rows, count), dtype=bool)
    for k in range(1, count + 1):
        gain = mass * (np.log(1.0 / noise) - np.log(k) - np.log(names))
        top = np.argsort(-gain, axis=1, kind="stable")[:, :k]
        score = np.take_along_axis(gain, top, axis=1).sum(axis=1)
        better = score > best  # strictly: a tie keeps the smaller set found before
        if better.any():
            best[better] = score[better]
            picked = np.zeros((int(better.sum()), count), dtype=bool)
            np.put_along_axis(picked, top[better], True, axis=1)
            chosen[better] = picked
    return chosen
