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
               a scaled identity. Needs no OOS data. By default embeddings are
               L2-normalised first: mean-pooled sentence embeddings carry
               length/frequency information in their norm, and the backbones
               are trained for cosine geometry, so direction is the signal.
``train``      OOS is an extra class named ``"oos"``; score = confidence of
               ``oos`` minus the best other confidence, threshold 0: OOS when
               ``oos`` is strictly the top label (the "oos-train" baseline).

Threshold choice (``choose_threshold``, used by ``threshold`` and ``distance``):
with OOS validation rows, the threshold maximising validation accuracy with
OOS as its own class (CLINC150); without, the cut keeping ``retention``
(default 95%) of in-scope validation rows in scope.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from intentvcs.metrics import retention_threshold

OOS_LABEL = "oos"
RETENTION = 0.95
# Keeps the shrunk covariance invertible when Ledoit–Wolf estimates ~0.
MIN_SHRINKAGE = 1e-4


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
    cut sits inside the optimal plateau) or above all of them; ties go to the
    lowest cut. Without: ``metrics.retention_threshold`` of in-scope scores.
    """
    scores = np.asarray(scores, dtype=np.float64)
    is_oos = np.zeros(len(scores), bool) if is_oos is None else np.asarray(is_oos, dtype=bool)
    correct = np.ones(len(scores), bool) if correct is None else np.asarray(correct, dtype=bool)
    if not scores.ndim == 1 or not scores.shape == is_oos.shape == correct.shape:
        raise ValueError("scores, is_oos and correct must be equal-length 1-D arrays")
    if not np.any(is_oos):
        return retention_threshold(scores, retention)
    distinct = np.unique(scores)
    cuts = np.r_[(distinct[:-1] + distinct[1:]) / 2.0, distinct[-1]]
    kept_correct = np.searchsorted(np.sort(scores[~is_oos & correct]), cuts, side="right")
    oos_scores = np.sort(scores[is_oos])
    rejected_oos = len(oos_scores) - np.searchsorted(oos_scores, cuts, side="right")
    return float(cuts[np.argmax(kept_correct + rejected_oos)])


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
    threshold: float

    def score(self, confidences: np.ndarray, pooled: np.ndarray | None = None) -> np.ndarray:
        """OOS score, float ``[N]``, from confidences ``[N, L]`` and pooled embeddings ``[N, H]``."""
        raise NotImplementedError

    def judge(self, confidences: np.ndarray, pooled: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(out_of_scope bool [N], score float [N])``."""
        scores = self.score(confidences, pooled)
        return scores > self.threshold, scores

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError


@dataclass
class NoRule(OOSRule):
    """Never out of scope."""

    name: ClassVar[str] = "none"
    threshold: float = field(default=0.0, init=False)

    def score(self, confidences: np.ndarray, pooled: np.ndarray | None = None) -> np.ndarray:
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

    def score(self, confidences: np.ndarray, pooled: np.ndarray | None = None) -> np.ndarray:
        return 1.0 - _as_matrix(confidences, "confidences").max(axis=1)

    @classmethod
    def fit(cls, confidences: np.ndarray, is_oos: np.ndarray | None = None,
            correct: np.ndarray | None = None, retention: float = RETENTION) -> "ThresholdRule":
        """Choose the threshold on validation confidences ``[N, L]`` (see ``choose_threshold``)."""
        return cls(choose_threshold(cls().score(confidences), is_oos, correct, retention))

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.name, "threshold": self.threshold}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ThresholdRule":
        _require(d, ["threshold"], cls.name)
        return cls(_finite(d["threshold"], "oos.threshold"))


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


@dataclass(eq=False)
class DistanceRule(OOSRule):
    """Mahalanobis distance to the nearest class mean under a tied, shrunk covariance.

    ``means`` ``[C, H]`` (classes with training rows only), ``precision``
    ``[H, H]`` (inverse shrunk covariance), ``normalize`` whether embeddings are
    L2-normalised first, ``shrinkage`` the weight used (recorded for reports).
    """

    name: ClassVar[str] = "distance"
    means: np.ndarray
    precision: np.ndarray
    threshold: float = 0.0
    normalize: bool = True
    shrinkage: float = 0.0
    _precision_means: np.ndarray = field(init=False, repr=False)
    _mean_terms: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.means = _as_matrix(self.means, "oos.means")
        self.precision = _as_matrix(self.precision, "oos.precision", self.means.shape[1])
        if self.precision.shape[0] != self.means.shape[1] or not len(self.means):
            raise ValueError(f"oos.precision must be [H, H] with H = {self.means.shape[1]} and means non-empty, "
                             f"got means {list(self.means.shape)}, precision {list(self.precision.shape)}")
        # d2(x, c) = x'Px - 2 x'P m_c + m_c'P m_c: the class terms are fixed, so
        # a request costs two matrix products and no loop over classes.
        self._precision_means = self.precision @ self.means.T
        self._mean_terms = np.einsum("ch,hc->c", self.means, self._precision_means)

    def score(self, confidences: np.ndarray, pooled: np.ndarray | None = None) -> np.ndarray:
        if pooled is None:
            raise ValueError("the distance OOS rule needs pooled embeddings")
        return self.distances(pooled)

    def distances(self, pooled: np.ndarray) -> np.ndarray:
        """Distance of each pooled embedding ``[N, H]`` to its nearest class mean, float ``[N]``."""
        x = _as_matrix(pooled, "pooled", self.means.shape[1])
        if self.normalize:
            x = _l2_normalise(x)
        own = np.einsum("nh,nh->n", x @ self.precision, x)
        d2 = own[:, None] - 2.0 * (x @ self._precision_means) + self._mean_terms[None, :]
        # Rounding can push a tiny squared distance below zero.
        return np.sqrt(np.maximum(d2.min(axis=1), 0.0))

    @classmethod
    def fit_statistics(cls, train_pooled: np.ndarray, train_targets: np.ndarray,
                       normalize: bool = True, shrinkage: float | None = None) -> "DistanceRule":
        """Class means and tied precision from in-scope training rows; threshold left at 0.

        ``train_pooled`` ``[N, H]``; ``train_targets`` int ``[N]`` the observed
        label index of each row; ``shrinkage`` None for Ledoit–Wolf, else a
        fixed weight in [0, 1] on ``mu * I``.
        """
        x = _as_matrix(train_pooled, "train_pooled")
        targets = np.asarray(train_targets)
        if targets.shape != (len(x),) or not np.issubdtype(targets.dtype, np.integer):
            raise ValueError(f"train_targets must be {len(x)} integer label indices")
        if normalize:
            x = _l2_normalise(x)
        classes, inverse = np.unique(targets, return_inverse=True)
        counts = np.bincount(inverse)
        means = np.zeros((len(classes), x.shape[1]))
        np.add.at(means, inverse, x)
        means /= counts[:, None]
        # Tied covariance: every row centred on its own class mean, pooled.
        cov, weight = shrunk_covariance(x - means[inverse], shrinkage)
        precision = np.linalg.inv(cov)
        return cls(means, (precision + precision.T) / 2.0, 0.0, normalize, weight)

    @classmethod
    def fit(cls, train_pooled: np.ndarray, train_targets: np.ndarray, valid_pooled: np.ndarray,
            is_oos: np.ndarray | None = None, correct: np.ndarray | None = None,
            retention: float = RETENTION, normalize: bool = True,
            shrinkage: float | None = None) -> "DistanceRule":
        """``fit_statistics`` on training rows, then ``choose_threshold`` on validation ``[N, H]``."""
        rule = cls.fit_statistics(train_pooled, train_targets, normalize, shrinkage)
        rule.threshold = choose_threshold(rule.distances(valid_pooled), is_oos, correct, retention)
        return rule

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.name, "threshold": self.threshold, "normalize": self.normalize,
                "shrinkage": self.shrinkage, "means": self.means.tolist(), "precision": self.precision.tolist()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "DistanceRule":
        _require(d, ["threshold", "normalize", "shrinkage", "means", "precision"], cls.name)
        if not isinstance(d["normalize"], bool):
            raise ValueError(f"oos.normalize must be a boolean, got {d['normalize']!r}")
        return cls(d["means"], d["precision"], _finite(d["threshold"], "oos.threshold"), d["normalize"],
                   _finite(d["shrinkage"], "oos.shrinkage"))


@dataclass
class TrainRule(OOSRule):
    """OOS when the ``oos`` class (column ``index``) is strictly the top confidence."""

    name: ClassVar[str] = "train"
    index: int = 0
    threshold: float = field(default=0.0, init=False)

    def score(self, confidences: np.ndarray, pooled: np.ndarray | None = None) -> np.ndarray:
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
