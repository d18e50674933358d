"""Directional containment between a new intent N and existing intents E.

Two estimators, one per direction, both with counts and Wilson intervals:

contain(N->E)  "how much of N does the current model put in E":
    k = number of N's utterances on which the decision layer accepts E,
    n = number of N's utterances. Rows of these counts over all E form the
    label co-occurrence matrix (new intents x existing intents) of the
    DialogVCS paper, computed from the model's accepted label sets.

contain(E->N)  "how much of E falls in N's region", without any model of N.
    It is a positive-unlabeled mixture-proportion problem (Elkan & Noto,
    2008) solved with a k-nearest-neighbour classifier in the engine's pooled
    embedding space (cosine similarity):
      P = N's utterances on which E is accepted (labelled positives: the part
          of N the model places in E), U = a sample of E's utterances
          (unlabelled: a mixture of utterances in N and not in N).
      g(x) = share of P among the ``k`` nearest neighbours of x in P u U,
             leaving x out, smoothed by one pseudo-neighbour at the base rate
             |P| / (|P| + |U|) so that 0 < g < 1.
      c    = mean of g over P (how "labelled-looking" N's own rows are).
      For u in U: odds(u) = (1 - c) / c * g(u) / (1 - g(u)), and
             P(u in N) = min(1, odds(u)) (Elkan & Noto's weight for an
             unlabelled example, clipped to a probability).
    contain(E->N) = k / n with k = #{u in U : P(u in N) >= 1/2}, n = |U|
    (the Wilson interval is on these counts). A hard count rather than the
    mean probability: the kNN blur at the edge of N's region gives many of E's
    rows small positive odds, which summed would inflate a subset's share.
    Why this and not a fixed distance threshold: it is relative. If N is a
    second version of E, P and U are drawn from one distribution, g is about
    the base rate everywhere and every u gets odds ~1. If N is a specific
    sub-intent of E, only the part of E near P does; the rest of E's cluster,
    however tight the fine-tuned space made it, has few P neighbours. Using
    only the N rows accepted as E (not all of N) keeps a superset N, half of
    which lies elsewhere, from diluting its own share near E.
    Cost: E's side is capped at ``reference_cap`` rows and P at as many rows
    as E's side has (balanced classes keep g informative when N has far more
    rows than E), so one estimate is O(cap^2 * H) whatever the batch size;
    no N^2 matrix over the batch.

Same distribution (duplicate or not): a new intent N that merely re-names E
has utterances drawn like E's; a subset's are a biased draw (only part of E's
region). The k-nearest-neighbour two-sample test of Schilling (1986) tells
them apart: balance the two samples, take each point's ``k`` nearest
neighbours in the pooled space, and count the share that come from the
point's own sample. Under one distribution that share is about one half
whatever the geometry; a subset raises it (E's rows outside N's region see
only E). The p-value comes from permuting the sample labels over the fixed
neighbour graph (exact under the null, no distributional assumption). The
same test decides whether two new intents are duplicates of each other.

Independent acceptance (for composites): an utterance's accepted set is first
reduced modulo the bundle's known relations (duplicates collapse to one
representative, a label implied by another accepted label is dropped), so that
closure (child -> parent) is not mistaken for two intents carried at once.
Co-ranking (for composites under single-label models): the two most confident
intents of each utterance (``top_two``; the ``"oos"`` class is none).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from statistics import NormalDist

import numpy as np

INSIDE_ODDS = 0.5  # an E utterance is counted in N when P(u in N) = min(1, odds) >= 1/2


@dataclass(frozen=True)
class Count:
    """``k`` of ``n`` with its Wilson score interval ``[low, high]`` at ``level``."""

    k: int
    n: int
    low: float
    high: float

    @property
    def rate(self) -> float:
        return self.k / self.n if self.n else 0.0

    def straddles(self, threshold: float) -> bool:
        """True when the interval holds ``threshold``: the verdict is borderline."""
        return self.low < threshold <= self.high

    def to_dict(self) -> dict[str, float | int]:
        return {"k": self.k, "n": self.n, "rate": round(self.rate, 4),
                "ci_low": round(self.low, 4), "ci_high": round(self.high, 4)}


def percent(share: float) -> str:
    """``share`` (a fraction in [0, 1]) as the audit's text writes every share: a whole percent, except that a
    share that is not exactly 1 never reads "100%" nor one that is not exactly 0 "0%": rounded, 299 of 300
    rows read "100% of E lies in N" and 1 of 300 "only 0% of E resembles N". Those read ">99%" and "<1%":
    they say on which side of all (or none) the share lies, keep the whole percents every other figure uses
    (and thresholds are written in), and need no second rule, where one decimal would only move the problem
    (99.96% reads "100.0%"). The exact count is in the report beside every rationale."""
    shown = f"{share:.0%}"
    if shown == "100%" and share < 1.0:
        return ">99%"
    if shown == "0%" and share > 0.0:
        return "<1%"
    return shown


def percent_under(rate: float, threshold: float) -> str:
    """``rate`` as the rationale's percent (``percent``), but one under ``threshold`` never read at or above it:
    rounded, 39.6% of B "lay in N (under 40%)" as "40%", and coverage of 29.7% read "cover only 30% (a superset
    needs 30%)". Such a rate is cut to the whole percent under the threshold's ("<1%" under a threshold of at
    most 1%); every other rate is written by ``percent``."""
    if rate < threshold and round(rate * 100) >= threshold * 100 - 1e-9:  # the whole percent ``percent`` rounds to
        below = math.ceil(threshold * 100 - 1e-9) - 1
        if below >= 1:
            return f"{below}%"
        if rate > 0:
            return "<1%"
    return percent(rate)


def wilson(k: int, n: int, level: float = 0.95) -> Count:
    """Wilson score interval of a binomial proportion ``k / n`` (``n = 0``: [0, 1])."""
    if n <= 0:
        return Count(0, 0, 0.0, 1.0)
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n))
    # The bounds are exactly 0 and 1 at the extremes; rounding would leave 1e-17.
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return Count(k, n, low, high)


def acceptance_counts(accepted: np.ndarray) -> np.ndarray:
    """contain(N->E) numerators: bool ``[n, L]`` accepted rows of N -> int ``[L]``."""
    return np.asarray(accepted, dtype=bool).sum(axis=0)


def top_two(confidences: np.ndarray, intents: np.ndarray | None = None) -> np.ndarray:
    """bool ``[n, L]``: the two most confident labels of each row (ties broken by label order), among the
    columns ``intents`` (bool ``[L]``, ``intentvcs.core.decision.intent_columns``; default every column) only: ranked first or
    second, the train rule's ``"oos"`` class became a new intent's candidate ("closest existing intent oos")
    and pushed an intent out of a row's top two."""
    confidences = np.asarray(confidences, dtype=np.float64)
    intents = np.ones(confidences.shape[1], dtype=bool) if intents is None else np.asarray(intents, dtype=bool)
    out = np.zeros(confidences.shape, dtype=bool)
    if intents.sum() < 2:
        out[:, intents] = True
        return out
    order = np.argsort(-np.where(intents, confidences, -np.inf), axis=1, kind="stable")[:, :2]
    np.put_along_axis(out, order, True, axis=1)
    return out


def independent_accepted(accepted: np.ndarray, implication: np.ndarray) -> np.ndarray:
    """Reduce accepted label sets modulo known relations.

    Args:
        accepted: bool ``[n, L]`` accepted labels (after the decision layer's closure).
        implication: bool ``[L, L]``, reflexive-transitive; ``M[i, j]`` means
            accepting label i implies label j (``LabelRelations.implication_matrix``).
    Returns:
        bool ``[n, L]``: per row, one representative (lowest index) per set of
        mutually implying labels, without labels strictly implied by another
        accepted one. ``sum(axis=1)`` is the number of independent intents.
    """
    implication = np.asarray(implication, dtype=bool)
    equivalent = implication & implication.T
    representative = equivalent.argmax(axis=0)  # lowest index of each class
    to_rep = np.zeros(implication.shape, dtype=np.float32)
    to_rep[np.arange(len(representative)), representative] = 1.0
    reps = (np.asarray(accepted, dtype=np.float32) @ to_rep) > 0
    strict = (implication & ~implication.T).astype(np.float32)
    implied = (reps.astype(np.float32) @ strict) > 0
    return reps & ~implied


@dataclass(frozen=True)
class TwoSample:
    """The kNN two-sample test's outcome: ``statistic`` (share of same-sample
    neighbours), its mean over the label permutations, the p-value and the
    rows used from each side."""

    statistic: float
    null_mean: float
    p_value: float
    rows: tuple[int, int]

    def to_dict(self) -> dict[str, Any]:
        return {"statistic": round(self.statistic, 4), "null_mean": round(self.null_mean, 4),
                "p_value": round(self.p_value, 4), "rows": list(self.rows)}


def two_sample_test(first: np.ndarray, second: np.ndarray, *, k: int, min_rows: int, cap: int,
                    permutations: int, rng: np.random.Generator) -> TwoSample | None:
    """Are ``first`` and ``second`` (unit-norm ``[n, H]``) drawn from one distribution?

    Both sides are subsampled to the same size (at most ``cap``), so the null
    share of same-sample neighbours is near one half and does not depend on
    which side is larger. ``None`` when a side has fewer than ``min_rows``.
    Cost: O((2 cap)^2 H) for the similarities, O(permutations cap k) for the test.
    """
    n = min(len(first), len(second), cap)
    if n < min_rows:
        return None
    points = np.concatenate([first[sample_rows(len(first), n, rng)], second[sample_rows(len(second), n, rng)]])
    similarity = points @ points.T
    np.fill_diagonal(similarity, -np.inf)
    k_eff = min(k, len(points) - 1)
    neighbours = np.argpartition(-similarity, k_eff - 1, axis=1)[:, :k_eff]
    side = np.repeat([0, 1], n)

    def same_share(labels: np.ndarray) -> float:
        return float((labels[neighbours] == labels[:, None]).mean())

    observed = same_share(side)
    null = np.array([same_share(rng.permutation(side)) for _ in range(permutations)])
    p_value = (1.0 + float((null >= observed).sum())) / (1.0 + permutations)
    return TwoSample(observed, float(null.mean()), p_value, (n, n))


@dataclass(frozen=True)
class Membership:
    """contain(E->N) and the per-utterance evidence behind it.

    ``rows`` index the E utterances that were scored (a seeded sample of at
    most ``reference_cap``); ``odds`` is Elkan & Noto's unclipped weight for
    each, ``probability = min(1, odds)``; ``closeness`` is each one's mean
    cosine similarity to its nearest rows of N (``odds`` then ``closeness``
    rank the relabel list).
    """

    count: Count
    rows: np.ndarray
    odds: np.ndarray
    closeness: np.ndarray

    @property
    def probability(self) -> np.ndarray:
        return np.minimum(self.odds, 1.0)


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (cosine similarity becomes a dot product)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def sample_rows(n: int, cap: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of at most ``cap`` of ``n`` rows, uniformly without replacement."""
    if n <= cap:
        return np.arange(n)
    return np.sort(rng.choice(n, size=cap, replace=False))


def existing_in_new(
    positives: np.ndarray,
    existing: np.ndarray,
    *,
    k: int,
    min_rows: int,
    reference_cap: int,
    level: float,
    rng: np.random.Generator,
) -> Membership | None:
    """Estimate contain(E->N) by the PU kNN rule in this module's docstring.

    Args:
        positives: ``[p, H]`` unit-norm pooled vectors of N's utterances on
            which E is accepted.
        existing: ``[u, H]`` unit-norm pooled vectors of E's utterances.
        k, min_rows, reference_cap, level: see ``AuditConfig``.
        rng: generator for the subsampling of either side.
    Returns:
        A ``Membership``, or ``None`` when either side has fewer than
        ``min_rows`` rows (no estimate).
    """
    if len(positives) < min_rows or len(existing) < min_rows:
        return None
    rows = sample_rows(len(existing), reference_cap, rng)
    # Balanced sides: with many more positives, every neighbourhood is mostly
    # positive and g saturates, which no longer tells regions apart.
    positives = positives[sample_rows(len(positives), max(len(rows), min_rows), rng)]
    points = np.concatenate([positives, existing[rows]])
    n_pos = len(positives)
    similarity = points @ points.T
    np.fill_diagonal(similarity, -np.inf)  # leave each point out of its own neighbourhood
    k_eff = min(k, len(points) - 1)
    neighbours = np.argpartition(-similarity, k_eff - 1, axis=1)[:, :k_eff]
    positive_neighbours = (neighbours < n_pos).sum(axis=1)
    base_rate = n_pos / len(points)
    g = (positive_neighbours + base_rate) / (k_eff + 1.0)
    c = float(g[:n_pos].mean())
    g_u = g[n_pos:]
    odds = (1.0 - c) / c * g_u / (1.0 - g_u)
    inside = int((odds >= INSIDE_ODDS).sum())
    # g takes only k + 1 values; closeness to N's nearest rows orders the ties.
    nearest = np.sort(similarity[n_pos:, :n_pos], axis=1)[:, -min(k_eff, n_pos):]
    return Membership(count=wilson(inside, len(rows), level), rows=rows, odds=odds,
                      closeness=nearest.mean(axis=1))
