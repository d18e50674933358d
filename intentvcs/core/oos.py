"""Out-of-scope (OOS) rules (pure numpy).

Every rule maps a batch to an OOS score, float ``[N]``, higher meaning "more out
of scope", and judges a row OOS when ``score > threshold`` (strictly). Rules
serialise to ``{"rule": name, ...}`` objects (JSON-safe; arrays as nested lists).

``none``       never OOS (score 0, threshold 0).
``threshold``  score = 1 - max calibrated confidence, so a row is OOS when no
               label's confidence reaches ``tau = 1 - threshold`` (the
               CLINC150 "oos-threshold" baseline on the decision layer's
               confidences). Default threshold 0.5, i.e. tau = 0.5.
``distance``   score = Mahalanobis distance of the pooled embedding to the
               nearest in-scope class mean under one shared (tied) covariance,
               fitted on training embeddings with Ledoit–Wolf shrinkage toward
               a scaled identity. By default embeddings are L2-normalised
               first: mean-pooled sentence embeddings carry length/frequency
               information in their norm, and the backbones are trained for
               cosine geometry, so direction is the signal. With a neighbour
               bank (the middle layer's training embeddings, ``pooled_mid``),
               the score is the sum of two standardised terms: that distance,
               and 1 - cosine similarity of ``pooled_mid`` to its nearest bank
               row. Fine-tuning pulls out-of-scope queries toward some intent
               in the final layer; the middle layer keeps more of what sets
               them apart (``benchmarks/oos_layer_study.py``: AUROC 0.974 ->
               0.978 and FPR@95 13.1 -> 9.6 % on CLINC150). Each term is
               standardised by its mean and deviation on in-scope validation
               rows. Needs no OOS data at all: statistics and bank come from
               training rows, scales and threshold from in-scope validation
               rows (``DISTANCE_RETENTION`` of them are kept in scope). A
               training row written with several labels (a chained request
               "X and Y", a composite) counts toward the mean of each of them
               and is centred, for the covariance, on the nearest of those
               means (``DistanceRule.fit_statistics``).
``train``      OOS is an extra class named ``"oos"``; score = confidence of
               ``oos`` minus the best other confidence, threshold 0: OOS when
               ``oos`` is strictly the top label (the "oos-train" baseline).

Threshold choice (``choose_threshold``): with OOS validation rows, the
threshold maximising validation accuracy with OOS as its own class (CLINC150's
oos-threshold protocol, used by ``threshold``; keeping every row, a rounding margin above
the highest); without, the cut keeping at
least ``retention`` of in-scope validation rows in scope (``threshold`` without
OOS rows: 95 %; ``distance`` always: 98 %), placed halfway between the last
row it keeps and the next higher score, a rounding margin above it when none is
higher (``retention_cut``): at one row's own score
(``scoring.retention_threshold``), a served score of that row a rounding error
higher (ONNX against PyTorch, another batch) would put it out of scope. The cut
with OOS rows is a midpoint for the same reason.

Fewer than ``MIN_CUT_ROWS`` in-scope validation rows place no cut that keeps a
share of them (``fit_cuts``): the cut read off them is the highest of them, one
row's score, which keeps about n / (n + 1) of in-scope requests (n rows), and
with OOS rows the accuracy optimum follows the OOS rows (one in-scope row among
them: a cut under it, nearly every request refused). The rules then keep every
in-scope validation row in scope, with a cut above the highest of them (halfway
to the next higher validation score, an OOS row's, else a rounding margin above
it), judge parts against that cut too, and log a warning; no in-scope validation
row at all is refused.

Parts of a chained request (``intentvcs.core.segmentation``) of a text the
rule rejects as a whole are judged against a stricter cut, ``part_threshold``:
the one keeping ``PART_RETENTION`` of the in-scope validation rows (never above
``threshold``), fitted with it by ``threshold`` and ``distance``. A fragment of
an out-of-scope request often lands just inside some intent; a real request
beside an out-of-scope one lands well inside. Rules fitted before it existed
have none and judge parts as whole texts.
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from intentvcs.core.outputs import non_finite_problem
from intentvcs.core.scoring import retention_threshold

log = logging.getLogger(__name__)

OOS_LABEL = "oos"
RETENTION = 0.95
# The distance rule never sees OOS rows, so its cut is a retention. On CLINC150
# Full 98 % costs 1.4 points of in-scope accuracy (96.2 top-1 -> 94.8 kept and
# right) for 77 % OOS recall; benchmarks/oos_bench.py tabulates other points.
DISTANCE_RETENTION = 0.98
# The neighbour bank is a stratified sample of at most this many training rows
# (CLINC150 Full has 15,000), which bounds memory (float32 in RAM, float16
# stored) and time: one matrix product of the batch with the whole bank.
MAX_BANK_ROWS = 20_000
# The part cut keeps this share of in-scope validation rows in scope. Chosen on validation data
# (benchmarks/mix_bench.py, part oos-chains; docs/RESULTS.md, multi-intent): the share of three kinds of two-part
# texts answered right (a request and an out-of-scope part, two out-of-scope parts, two requests), averaged over
# CLINC150 Full's and the demo's models, was best at 0.90 (79.3 %; 0.85 78.8, 0.95 78.6, no part cut 76.6).
PART_RETENTION = 0.90
# Queries per matrix product with the bank (bounds the [chunk, bank] buffer).
BANK_CHUNK = 1024
# Keeps the shrunk covariance invertible when Ledoit–Wolf estimates ~0.
MIN_SHRINKAGE = 1e-4
# The fewest in-scope validation rows a cut that keeps a share of them is read off (``fit_cuts``). Below it the
# cut would be the highest score (RETENTION's 95 % is then every row: ceil(0.95 n) = n for n < 20), and the
# highest of n rows keeps n / (n + 1) of in-scope requests in expectation, under 95 % for n < 19: no cut read off
# fewer rows keeps the share the rules promise. From 20 rows on the cuts are as documented above.
MIN_CUT_ROWS = 20
# With fewer rows and no higher (OOS) validation score, the cut lies this far above the highest in-scope score,
# relative to it (at least 1): a hundred times the ~1e-6 by which served scores differ from fitted ones.
ROUNDING_MARGIN = 1e-4


class NonFiniteInput(ValueError):
    """An embedding a rule reads holds NaN or infinite values (``Decision.apply`` raises it as a ``DecisionError``)."""


def _check_finite(matrix: np.ndarray, name: str) -> np.ndarray:
    """``matrix`` ``[N, H]``, or ``NonFiniteInput`` naming ``name`` and how many rows hold NaN or inf."""
    problem = non_finite_problem(matrix, name)
    if problem:
        raise NonFiniteInput(problem)
    return matrix


def choose_threshold(
    scores: np.ndarray,
    is_oos: np.ndarray | None = None,
    correct: np.ndarray | None = None,
    retention: float = RETENTION,
) -> float:
    """The score threshold of an OOS rule ("OOS when score > threshold").

    ``scores`` float ``[N]`` on validation rows; ``is_oos`` bool ``[N]`` gold
    OOS rows (None or all False: none available); ``correct`` bool ``[N]``,
    whether the intent prediction of each in-scope row is right (None: all
    right, so only the in/out split counts).

    With OOS rows: maximise ``(#in-scope correct and kept + #OOS rejected) / N``
    over cuts between consecutive distinct scores (the midpoint, so that the
    cut sits inside the optimal plateau) or a rounding margin above the highest
    score (every row kept; ``_above``); ties go to the lowest cut. Without: ``retention_cut`` of in-scope
    scores. The rules' fits call it through ``fit_cuts``, which places
    the cut otherwise below ``MIN_CUT_ROWS`` in-scope rows.
    """
    scores, is_oos, correct = _validation_arrays(scores, is_oos, correct)
    if not np.any(is_oos):
        return retention_cut(scores, retention)
    distinct = np.unique(scores)
    cuts = np.r_[(distinct[:-1] + distinct[1:]) / 2.0, _above(distinct[-1])]
    kept_correct = np.searchsorted(np.sort(scores[~is_oos & correct]), cuts, side="right")
    oos_scores = np.sort(scores[is_oos])
    rejected_oos = len(oos_scores) - np.searchsorted(oos_scores, cuts, side="right")
    return float(cuts[np.argmax(kept_correct + rejected_oos)])


def _validation_arrays(scores: Any, is_oos: Any, correct: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``scores`` float ``[N]``, ``is_oos`` and ``correct`` bool ``[N]`` (None: all False / all True)."""
    scores = np.asarray(scores, dtype=np.float64)
    is_oos = np.zeros(len(scores), bool) if is_oos is None else np.asarray(is_oos, dtype=bool)
    correct = np.ones(len(scores), bool) if correct is None else np.asarray(correct, dtype=bool)
    if not scores.ndim == 1 or not scores.shape == is_oos.shape == correct.shape:
        raise ValueError("scores, is_oos and correct must be equal-length 1-D arrays")
    return scores, is_oos, correct


def fit_cuts(rule: str, scores: np.ndarray, is_oos: np.ndarray | None = None, correct: np.ndarray | None = None,
             retention: float = RETENTION, part_retention: float = PART_RETENTION) -> tuple[float, float]:
    """``(threshold, part_threshold)`` of the OOS rule named ``rule`` from its validation ``scores`` (arguments as
    ``choose_threshold``).

    With at least ``MIN_CUT_ROWS`` in-scope rows: ``choose_threshold``, and ``part_threshold`` on the in-scope
    scores. With fewer, no share of them can be kept as promised (see ``MIN_CUT_ROWS``), and a cut read off them
    is one row's score: the cut keeps every in-scope row instead (``_few_rows_cut``), the part cut is the same
    cut (no stricter share is read off them either), and a warning says so. With none, a ``ValueError``.
    """
    scores, is_oos, correct = _validation_arrays(scores, is_oos, correct)
    in_scope = scores[~is_oos]
    if not len(in_scope):
        raise ValueError(_no_in_scope_rows(rule))
    if len(in_scope) >= MIN_CUT_ROWS:
        threshold = choose_threshold(scores, is_oos, correct, retention)
        return threshold, part_threshold(in_scope, threshold, part_retention)
    threshold = _few_rows_cut(in_scope, scores)
    n = len(in_scope)
    log.warning("the %s OOS rule: %d in-scope validation row(s) are too few to read its cut off; it needs at least %d "
                "(a cut read off fewer is one row's score, and one above all %d keeps about %.0f%% of in-scope "
                "requests). Its cut (%.6g) keeps every in-scope validation row in scope%s, and parts of a chained "
                "request are judged against it too; refit with more validation rows (intentvcs refit --valid)",
                rule, n, MIN_CUT_ROWS, n, 100 * n / (n + 1), threshold,
                ", whatever the OOS validation rows say" if is_oos.any() else "")
    return threshold, threshold


def _no_in_scope_rows(rule: str) -> str:
    return (f"the {rule} OOS rule places its cut on in-scope validation rows and got no in-scope validation row: "
            f"give labelled validation rows, at least {MIN_CUT_ROWS} for the cut to keep a share of them in scope")


def _few_rows_cut(in_scope: np.ndarray, scores: np.ndarray) -> float:
    """The lowest cut keeping every ``in_scope`` score, above the highest of them, never on it: halfway to the next
    higher of ``scores`` (an OOS row's), as a retention cut lies halfway to the next row; without one,
    ``ROUNDING_MARGIN`` above it (no wider margin is read off so few rows)."""
    top = float(in_scope.max())
    higher = scores[scores > top]
    if higher.size:
        return float((top + higher.min()) / 2.0)
    return _above(top)


def _above(top: float) -> float:
    """The cut keeping the highest validation score ``top`` when no higher one bounds it: ``ROUNDING_MARGIN`` above
    it (relative to it, at least 1), never on it, so that its row served a rounding error higher (another batch,
    ONNX against PyTorch) stays in scope as fitted."""
    return float(top) + ROUNDING_MARGIN * max(1.0, abs(float(top)))


def _as_matrix(array: Any, name: str, columns: int | None = None) -> np.ndarray:
    matrix = np.asarray(array, dtype=np.float64)
    if matrix.ndim != 2 or (columns is not None and matrix.shape[1] != columns):
        want = f"[N, {columns}]" if columns is not None else "[N, H]"
        raise ValueError(f"{name} must be {want}, got shape {list(matrix.shape)}")
    return matrix


def _require(d: Mapping[str, Any], keys: Sequence[str], rule: str) -> None:
    missing = [k for k in keys if k not in d]
    if missing:
        raise ValueError(f"oos rule {rule!r}: missing key(s) {missing}")


def _finite(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


class OOSRule:
    """Common interface: ``score``, ``judge``, ``to_dict`` (``from_dict`` per rule)."""

    name: ClassVar[str]
    # Whether a refusal says the text is unlike what the model knows (far from its training utterances, or
    # the trained out-of-scope class), not merely that the classifier is unsure: the upgrade audit then reads
    # acceptance on refused rows as the classifier's forced choice (``intentvcs.service.audit.rules``).
    refusal_is_novelty: ClassVar[bool] = False
    threshold: float
    part_threshold: float | None = None  # the cut for parts of a text judged out of scope (None: ``threshold``)

    def score(self, confidences: np.ndarray, pooled: np.ndarray | None = None,
              pooled_mid: np.ndarray | None = None) -> np.ndarray:
        """OOS score, float ``[N]``, from confidences ``[N, L]`` and the pooled embeddings ``[N, H]``."""
        raise NotImplementedError

    def judge(self, confidences: np.ndarray, pooled: np.ndarray | None = None,
              pooled_mid: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(out_of_scope bool [N], score float [N])``."""
        scores = self.score(confidences, pooled, pooled_mid)
        return scores > self.threshold, scores

    def part_out_of_scope(self, scores: np.ndarray) -> np.ndarray:
        """Whether parts of a text judged out of scope as a whole are out of scope, from their ``scores``."""
        return scores > (self.threshold if self.part_threshold is None else self.part_threshold)

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def _part_field(self) -> dict[str, float]:
        return {} if self.part_threshold is None else {"part_threshold": self.part_threshold}


def part_threshold(in_scope_scores: np.ndarray, threshold: float, retention: float = PART_RETENTION) -> float:
    """The part cut: keeps ``retention`` of the in-scope validation ``scores`` in scope, never above ``threshold``."""
    return min(threshold, retention_cut(in_scope_scores, retention))


def retention_cut(in_scope_scores: np.ndarray, retention: float) -> float:
    """The cut keeping at least ``retention`` of ``in_scope_scores`` in scope ("out of scope when score >
    cut"), halfway between the last score it keeps (``scoring.retention_threshold``) and the next higher one,
    so that a rounding-sized difference between fitted and served scores moves no row across it; when none is
    higher (a retention above 1 - 1 / n, e.g. 98 % of under 50 rows, or tied top scores), a rounding margin above
    that last score (``_above``), never on it."""
    kept = retention_threshold(in_scope_scores, retention)
    higher = np.asarray(in_scope_scores, dtype=np.float64)
    higher = higher[higher > kept]
    return float((kept + higher.min()) / 2.0) if higher.size else _above(kept)


def _optional_part_threshold(d: Mapping[str, Any]) -> float | None:
    return None if d.get("part_threshold") is None else _finite(d["part_threshold"], "oos.part_threshold")


@dataclass
class NoRule(OOSRule):
    """Never out of scope."""

    name: ClassVar[str] = "none"
    threshold: float = field(default=0.0, init=False)

    def score(self, confidences: np.ndarray, pooled: np.ndarray | None = None,
              pooled_mid: np.ndarray | None = None) -> np.ndarray:
        return np.zeros(len(confidences))

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.name}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "NoRule":
        return cls()


@dataclass
class ThresholdRule(OOSRule):
    """OOS when the top calibrated confidence is below ``1 - threshold``."""

    name: ClassVar[str] = "threshold"
    threshold: float = 0.5
    part_threshold: float | None = None

    def score(self, confidences: np.ndarray, pooled: np.ndarray | None = None,
              pooled_mid: np.ndarray | None = None) -> np.ndarray:
        return 1.0 - _as_matrix(confidences, "confidences").max(axis=1)

    @classmethod
    def fit(cls, confidences: np.ndarray, is_oos: np.ndarray | None = None,
            correct: np.ndarray | None = None, retention: float = RETENTION,
            part_retention: float = PART_RETENTION) -> "ThresholdRule":
        """Choose the threshold on validation confidences ``[N, L]`` (see ``choose_threshold``) and the part
        cut on their in-scope rows (``part_threshold``); with fewer than ``MIN_CUT_ROWS`` in-scope rows, see
        ``fit_cuts``."""
        scores = cls().score(confidences)
        return cls(*fit_cuts(cls.name, scores, is_oos, correct, retention, part_retention))

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.name, "threshold": self.threshold, **self._part_field()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ThresholdRule":
        _require(d, ["threshold"], cls.name)
        return cls(_finite(d["threshold"], "oos.threshold"), _optional_part_threshold(d))


def shrunk_covariance(residuals: np.ndarray, shrinkage: float | None = None) -> tuple[np.ndarray, float]:
    """``((1 - s) S + s mu I, s)`` for centred samples ``residuals`` ``[n, p]``.

    ``S = R^T R / n`` and ``mu = trace(S) / p`` (shrinking toward the scaled
    identity keeps the overall variance). ``shrinkage`` None picks s by
    Ledoit–Wolf (2004); s is floored at ``MIN_SHRINKAGE`` so the result is
    invertible even with fewer rows than dimensions.
    """
    n, p = residuals.shape
    cov = residuals.T @ residuals / n
    mu = np.trace(cov) / p
    if mu <= 0:
        raise ValueError("training embeddings have no within-class variance")
    if shrinkage is None:
        cov_sq = np.sum(cov**2)
        # delta: how far S is from the target; beta: how noisy S is as an estimate.
        delta = (cov_sq - p * mu**2) / p
        squares = residuals**2
        beta = (np.sum(squares.T @ squares) / n - cov_sq) / (p * n)
        shrinkage = 0.0 if delta <= 0 else float(min(beta, delta) / delta)
    if not 0.0 <= shrinkage <= 1.0:
        raise ValueError(f"shrinkage must lie in [0, 1], got {shrinkage}")
    weight = max(float(shrinkage), MIN_SHRINKAGE)
    return (1.0 - weight) * cov + weight * mu * np.eye(p), weight


def _l2_normalise(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _encode_bank(bank: np.ndarray) -> dict[str, Any]:
    """float16 bytes in base64: JSON-safe at ~2.7 characters per value, against ~20 as JSON numbers.

    float16 moves nearest-neighbour cosines by ~1e-3, which changed no CLINC150 figure.
    """
    data = np.ascontiguousarray(bank, dtype="<f2")
    return {"dtype": "float16", "shape": list(data.shape), "base64": base64.b64encode(data.tobytes()).decode("ascii")}


def _decode_bank(d: Any) -> np.ndarray:
    if not isinstance(d, Mapping) or d.get("dtype") != "float16" or not isinstance(d.get("base64"), str):
        raise ValueError("oos.bank must be {'dtype': 'float16', 'shape': [M, H], 'base64': ...}")
    shape = d.get("shape")
    if (not isinstance(shape, list) or len(shape) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in shape)):
        raise ValueError(f"oos.bank.shape must be two positive integers, got {shape!r}")
    try:
        raw = base64.b64decode(d["base64"], validate=True)
    except ValueError as exc:
        raise ValueError(f"oos.bank.base64 is not base64: {exc}") from None
    if len(raw) != 2 * shape[0] * shape[1]:
        raise ValueError(f"oos.bank holds {len(raw)} bytes, shape {shape} needs {2 * shape[0] * shape[1]}")
    return np.frombuffer(raw, dtype="<f2").reshape(shape).astype(np.float32)


def bank_sample(targets: np.ndarray, max_rows: int = MAX_BANK_ROWS, seed: int = 0) -> np.ndarray:
    """Sorted row indices of a stratified sample of at most ``max_rows`` rows (all rows if that many or fewer).

    With more rows, exactly ``max_rows``: every class keeps one row, so a rare
    intent still has a neighbour in the bank, and the other ``max_rows - C``
    places go to the C classes in proportion to their remaining rows, by largest
    remainder (ties to the earlier class). With more classes than ``max_rows``,
    the ``max_rows`` largest classes (ties to the earlier class) keep one row each.
    """
    targets = np.asarray(targets)
    if len(targets) <= max_rows:
        return np.arange(len(targets))
    if max_rows < 1:
        raise ValueError(f"max_rows must be at least 1, got {max_rows}")
    classes, inverse, counts = np.unique(targets, return_inverse=True, return_counts=True)
    take = np.zeros(len(classes), dtype=np.int64)
    if len(classes) > max_rows:
        take[np.argsort(-counts, kind="stable")[:max_rows]] = 1
    else:
        # Quotas of the places left after one row each; each lies under its class's remaining rows,
        # since len(targets) > max_rows, so no class is asked for more rows than it has.
        spare = counts - 1
        quota = spare * (max_rows - len(classes)) / spare.sum()
        take = 1 + np.floor(quota).astype(np.int64)
        short = max_rows - int(take.sum())
        take[np.argsort(-(quota - np.floor(quota)), kind="stable")[:short]] += 1
    rng = np.random.default_rng(seed)
    keep = [rng.choice(np.flatnonzero(inverse == c), take[c], replace=False) for c in range(len(classes)) if take[c]]
    return np.sort(np.concatenate(keep))


@dataclass(eq=False)
class DistanceRule(OOSRule):
    """Mahalanobis distance to the nearest class mean, plus an optional nearest-neighbour term.

    ``means`` ``[C, H]`` (labels with training rows only), ``precision``
    ``[H, H]`` (inverse shrunk covariance), ``normalize`` whether embeddings are
    L2-normalised first, ``shrinkage`` the weight used (recorded for reports).
    ``bank`` ``[M, H]`` L2-normalised middle-layer training embeddings and
    ``scales`` ``[[mean, std] of the distance, [mean, std] of the neighbour
    term]`` go together: with them the score is the sum of the two
    standardised terms; without, the distance alone.
    """

    name: ClassVar[str] = "distance"
    refusal_is_novelty: ClassVar[bool] = True
    means: np.ndarray
    precision: np.ndarray
    threshold: float = 0.0
    normalize: bool = True
    shrinkage: float = 0.0
    bank: np.ndarray | None = None
    scales: np.ndarray | None = None
    part_threshold: float | None = None
    _precision_means: np.ndarray = field(init=False, repr=False)
    _mean_terms: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.means = _as_matrix(self.means, "oos.means")
        hidden = self.means.shape[1]
        self.precision = _as_matrix(self.precision, "oos.precision", hidden)
        if self.precision.shape[0] != hidden or not len(self.means):
            raise ValueError(f"oos.precision must be [H, H] with H = {hidden} and means non-empty, "
                             f"got means {list(self.means.shape)}, precision {list(self.precision.shape)}")
        if (self.bank is None) != (self.scales is None):
            raise ValueError("oos.bank and oos.scales go together: give both or neither")
        if self.bank is not None:
            # Rounded to float16 here, as stored: the rule fitted is the rule served.
            self.bank = _as_matrix(self.bank, "oos.bank", hidden).astype(np.float16).astype(np.float32)
            if not np.allclose(np.linalg.norm(self.bank, axis=1), 1.0, atol=1e-2):
                raise ValueError("oos.bank rows must be L2-normalised")
            self.scales = np.asarray(self.scales, dtype=np.float64)
            if self.scales.shape != (2, 2) or not np.all(np.isfinite(self.scales)) or np.any(self.scales[:, 1] <= 0):
                raise ValueError(f"oos.scales must be [[mean, std > 0], [mean, std > 0]], got {self.scales.tolist()}")
        # d2(x, c) = x'Px - 2 x'P m_c + m_c'P m_c: the class terms are fixed, so
        # a request costs two matrix products and no loop over classes.
        self._precision_means = self.precision @ self.means.T
        self._mean_terms = np.einsum("ch,hc->c", self.means, self._precision_means)

    def score(self, confidences: np.ndarray, pooled: np.ndarray | None = None,
              pooled_mid: np.ndarray | None = None) -> np.ndarray:
        if pooled is None:
            raise ValueError("the distance OOS rule needs pooled embeddings")
        if self.bank is None:
            return self.distances(pooled)
        if pooled_mid is None:
            raise ValueError("this distance OOS rule has a neighbour bank and needs the middle layer's embeddings")
        return self.combine(self.distances(pooled), self.neighbour_distances(pooled_mid))

    def combine(self, distances: np.ndarray, neighbour: np.ndarray) -> np.ndarray:
        """The sum of both terms, each standardised by ``scales``."""
        (d_mean, d_std), (n_mean, n_std) = self.scales
        return (distances - d_mean) / d_std + (neighbour - n_mean) / n_std

    def distances(self, pooled: np.ndarray) -> np.ndarray:
        """Distance of each pooled embedding ``[N, H]`` to its nearest class mean, float ``[N]``."""
        # A NaN row would score NaN, and NaN > threshold is False: in scope.
        x = _check_finite(_as_matrix(pooled, "pooled", self.means.shape[1]), "pooled")
        if self.normalize:
            x = _l2_normalise(x)
        own = np.einsum("nh,nh->n", x @ self.precision, x)
        d2 = own[:, None] - 2.0 * (x @ self._precision_means) + self._mean_terms[None, :]
        # Rounding can push a tiny squared distance below zero.
        return np.sqrt(np.maximum(d2.min(axis=1), 0.0))

    def neighbour_distances(self, pooled_mid: np.ndarray) -> np.ndarray:
        """1 - cosine similarity of each middle-layer embedding ``[N, H]`` to its nearest bank row."""
        if self.bank is None:
            raise ValueError("this distance OOS rule has no neighbour bank")
        x = _check_finite(_as_matrix(pooled_mid, "pooled_mid", self.bank.shape[1]), "pooled_mid")
        x = _l2_normalise(x).astype(np.float32)
        nearest = [(x[i:i + BANK_CHUNK] @ self.bank.T).max(axis=1) for i in range(0, len(x), BANK_CHUNK)]
        return 1.0 - np.concatenate(nearest).astype(np.float64) if nearest else np.zeros(0)

    @classmethod
    def fit_statistics(cls, train_pooled: np.ndarray, train_targets: np.ndarray,
                       normalize: bool = True, shrinkage: float | None = None) -> "DistanceRule":
        """Class means and tied precision from in-scope training rows; threshold left at 0, no bank.

        ``train_pooled`` ``[N, H]``; ``train_targets`` the observed labels of
        each row: bool (or 0/1 integer) ``[N, L]``, every label written on it
        (``decision_fit.observed_matrix``), or int ``[N]``, one label index per
        row; ``shrinkage`` None for Ledoit–Wolf, else a fixed weight in [0, 1]
        on ``mu * I``. A row with several labels counts toward the mean of
        each; one label per row gives the same numbers in either form.
        """
        # A NaN or inf row makes every statistic NaN, and the fit then fails on its shrinkage ("got nan"), which
        # names a setting, not the model's outputs: refused here, as served embeddings are (``distances``).
        x = _check_finite(_as_matrix(train_pooled, "train_pooled"), "train_pooled")
        rows, labels = _label_pairs(train_targets, len(x))
        if normalize:
            x = _l2_normalise(x)
        # A row written "X and Y" is an utterance of X and one of Y: it counts toward both means.
        classes, inverse = np.unique(labels, return_inverse=True)
        counts = np.bincount(inverse)
        means = np.zeros((len(classes), x.shape[1]))
        np.add.at(means, inverse, x[rows])
        means /= counts[:, None]
        # Tied covariance: every row centred on its own class mean, pooled; a row of several labels on the nearest
        # of theirs. The covariance is the spread of in-scope rows around the mean that scores them, and the score
        # is the distance to the nearest mean; one residual per row also keeps each row counted once (n in
        # Ledoit–Wolf). Centred on each of its means, a row "X and Y" would add the offset between X and Y, a
        # between-intent direction, to the within-intent covariance and blunt the distance exactly there. Nearest
        # by Euclidean distance: the precision is what is being fitted.
        cov, weight = shrunk_covariance(x - means[_nearest_own_mean(x, rows, inverse, means)], shrinkage)
        precision = np.linalg.inv(cov)
        return cls(means, (precision + precision.T) / 2.0, 0.0, normalize, weight)

    @classmethod
    def fit(cls, train_pooled: np.ndarray, train_targets: np.ndarray, valid_pooled: np.ndarray,
            train_mid: np.ndarray | None = None, valid_mid: np.ndarray | None = None,
            retention: float = DISTANCE_RETENTION, normalize: bool = True, shrinkage: float | None = None,
            max_bank_rows: int = MAX_BANK_ROWS, part_retention: float = PART_RETENTION) -> "DistanceRule":
        """Fit on training rows, scale and cut on in-scope validation rows; no OOS row is used.

        ``*_pooled`` / ``*_mid`` ``[N, H]`` final / middle-layer embeddings
        (``valid_*`` in-scope rows only); ``train_targets`` as
        ``fit_statistics``. With ``train_mid`` and ``valid_mid`` the rule gets
        the neighbour term (bank: ``bank_sample`` of the training rows,
        stratified by label set); without, it is the distance alone. The
        threshold keeps ``retention`` of the validation rows in scope, the part
        cut ``part_retention`` (``fit_cuts``: fewer than ``MIN_CUT_ROWS`` rows
        are kept whole, with a warning; none is refused).
        """
        rule = cls.fit_statistics(train_pooled, train_targets, normalize, shrinkage)
        if (train_mid is None) != (valid_mid is None):
            raise ValueError("give both train_mid and valid_mid, or neither")
        distances = rule.distances(valid_pooled)
        if not len(distances):
            raise ValueError(_no_in_scope_rows(cls.name))
        if valid_mid is not None and len(valid_mid) != len(distances):
            raise ValueError(f"valid_mid has {len(valid_mid)} rows, valid_pooled {len(distances)}")
        if train_mid is not None:
            mid = _check_finite(_as_matrix(train_mid, "train_mid", rule.means.shape[1]), "train_mid")
            if len(mid) != len(train_pooled):
                raise ValueError(f"train_mid has {len(mid)} rows, train_pooled {len(train_pooled)}")
            bank = _l2_normalise(mid[bank_sample(_strata(train_targets, len(mid)), max_bank_rows)])
            # Scales need the bank's distances and the bank needs scales: fit with
            # placeholder scales, then set the measured ones.
            rule = replace(rule, bank=bank, scales=np.array([[0.0, 1.0], [0.0, 1.0]]))
            neighbour = rule.neighbour_distances(valid_mid)
            rule.scales = np.array([_location_scale(distances, "distance"), _location_scale(neighbour, "neighbour")])
            distances = rule.combine(distances, neighbour)
        rule.threshold, rule.part_threshold = fit_cuts(cls.name, distances, retention=retention,
                                                       part_retention=part_retention)
        return rule

    def to_dict(self) -> dict[str, Any]:
        d = {"rule": self.name, "threshold": self.threshold, "normalize": self.normalize,
             "shrinkage": self.shrinkage, "means": self.means.tolist(), "precision": self.precision.tolist()}
        if self.bank is not None:
            d.update(scales=self.scales.tolist(), bank=_encode_bank(self.bank))
        return {**d, **self._part_field()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "DistanceRule":
        _require(d, ["threshold", "normalize", "shrinkage", "means", "precision"], cls.name)
        if not isinstance(d["normalize"], bool):
            raise ValueError(f"oos.normalize must be a boolean, got {d['normalize']!r}")
        bank = _decode_bank(d["bank"]) if "bank" in d else None
        return cls(d["means"], d["precision"], _finite(d["threshold"], "oos.threshold"), d["normalize"],
                   _finite(d["shrinkage"], "oos.shrinkage"), bank, d.get("scales"), _optional_part_threshold(d))


def _label_pairs(train_targets: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, labels)``, int ``[P]``: one pair per label written on each of the ``n`` rows, by row (then label).

    ``train_targets``: int ``[n]`` one label index per row, or bool / 0-1 integer ``[n, L]`` label sets, each row
    with at least one label. One label per row gives ``rows = arange(n)`` and its label indices in either form.
    """
    targets = np.asarray(train_targets)
    if targets.ndim == 1 and targets.shape == (n,) and np.issubdtype(targets.dtype, np.integer):
        return np.arange(n), targets
    if targets.ndim != 2 or len(targets) != n:
        raise ValueError(f"train_targets must be {n} integer label indices or an [{n}, L] multi-hot label matrix, "
                         f"got shape {list(targets.shape)} ({targets.dtype})")
    if targets.dtype != bool:
        if not np.issubdtype(targets.dtype, np.integer):
            raise ValueError(f"a train_targets label matrix must be bool or integer 0/1, got {targets.dtype}")
        if not np.isin(targets, (0, 1)).all():
            raise ValueError("a train_targets label matrix must hold 0 or 1 only")
        targets = targets.astype(bool)
    bare = np.flatnonzero(~targets.any(axis=1))
    if bare.size:
        raise ValueError(f"train_targets: {bare.size} row(s) carry no label (the first: row {bare[0]}); the "
                         "distance rule's statistics come from in-scope training rows only")
    rows, labels = np.nonzero(targets)
    return rows, labels


def _nearest_own_mean(x: np.ndarray, rows: np.ndarray, inverse: np.ndarray, means: np.ndarray) -> np.ndarray:
    """For each row of ``x``, the index into ``means`` of the nearest (Euclidean; ties to the first label) of its
    labels' means; ``rows`` / ``inverse`` the ``(row, mean)`` pairs, by row."""
    if len(rows) == len(x):  # one label per row: its own mean, as always
        return inverse
    offsets = x[rows] - means[inverse]
    d2 = np.einsum("ph,ph->p", offsets, offsets)
    order = np.lexsort((d2, rows))
    first = np.r_[True, rows[order][1:] != rows[order][:-1]]
    return inverse[order[first]]


def _strata(train_targets: Any, n: int) -> np.ndarray:
    """One stratum per row for ``bank_sample``: its label where it carries one (the same as ``train_targets`` as
    label indices), its label set where it carries several, so that a label written only beside others keeps a
    row in a sampled bank."""
    rows, labels = _label_pairs(train_targets, n)
    if len(rows) == n:
        return labels
    written = np.asarray(train_targets).astype(bool)
    strata = labels[np.r_[True, rows[1:] != rows[:-1]]].astype(np.int64)  # the first label of each row
    several = written.sum(axis=1) > 1
    _, sets = np.unique(written[several], axis=0, return_inverse=True)
    strata[several] = written.shape[1] + np.ravel(sets)
    return strata


def _location_scale(values: np.ndarray, name: str) -> tuple[float, float]:
    """Mean and standard deviation of a score on validation rows (the standardisation of one term)."""
    if len(values) < 2 or not np.std(values) > 0:
        raise ValueError(f"the {name} term needs at least two validation rows with differing scores")
    return float(np.mean(values)), float(np.std(values))


@dataclass
class TrainRule(OOSRule):
    """OOS when the ``oos`` class (column ``index``) is strictly the top confidence."""

    name: ClassVar[str] = "train"
    refusal_is_novelty: ClassVar[bool] = True
    index: int = 0
    threshold: float = field(default=0.0, init=False)

    def score(self, confidences: np.ndarray, pooled: np.ndarray | None = None,
              pooled_mid: np.ndarray | None = None) -> np.ndarray:
        conf = _as_matrix(confidences, "confidences")
        if not 0 <= self.index < conf.shape[1] or conf.shape[1] < 2:
            raise ValueError(f"the train OOS rule needs column {self.index} and another, got {conf.shape[1]} columns")
        others = np.delete(conf, self.index, axis=1).max(axis=1)
        return conf[:, self.index] - others

    @classmethod
    def fit(cls, labels: Sequence[str]) -> "TrainRule":
        """Locate the ``"oos"`` class among the model's labels."""
        if OOS_LABEL not in labels:
            raise ValueError(f"the train OOS rule needs a label named {OOS_LABEL!r}")
        return cls(list(labels).index(OOS_LABEL))

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.name, "index": self.index}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TrainRule":
        _require(d, ["index"], cls.name)
        if isinstance(d["index"], bool) or not isinstance(d["index"], int) or d["index"] < 0:
            raise ValueError(f"oos.index must be a non-negative integer, got {d['index']!r}")
        return cls(d["index"])


RULES: dict[str, type] = {rule.name: rule for rule in (NoRule, ThresholdRule, DistanceRule, TrainRule)}


def rule_from_dict(d: Any) -> OOSRule:
    """Rebuild any rule from its ``to_dict`` object; errors name the problem."""
    if not isinstance(d, Mapping) or not isinstance(d.get("rule"), str) or d["rule"] not in RULES:
        got = d.get("rule") if isinstance(d, Mapping) else type(d).__name__
        raise ValueError(f"oos: expected an object with 'rule' in {list(RULES)}, got {got!r}")
    return RULES[d["rule"]].from_dict(d)
