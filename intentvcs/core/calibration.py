"""Temperature scaling and calibration figures (pure numpy).

What is calibrated
------------------
One scalar temperature ``T`` divides the logits (``logits / T``) and is fitted
by minimising the negative log-likelihood (NLL) of held-out *observed* labels.

``softmax`` heads (PU method): a training row shows one observed label, so the
    softmax models ``P(observed label = k | x)``. ``T`` calibrates exactly that
    distribution, against the observed label(s) of each validation row (several
    spread evenly, as the training loss reads them). It does
    not calibrate "label k applies": the PU rescaling that follows
    (``confidence_k = min(1, p_k / c_k)`` with Elkan–Noto's ``c_k``, estimated
    on the temperature-scaled probabilities, see ``intentvcs.core.decision``) turns
    ``p_k`` into an estimate of ``P(k applies | x)`` that is only as calibrated
    as the "selected completely at random" assumption behind ``c_k`` is true.
``sigmoid`` heads (BCE-family baselines): each label is an independent binary
    probability; ``T`` calibrates all of them at once against the label matrix
    given to ``fit_temperature``. Fed observed PU labels (one positive per row),
    unobserved labels count as negatives, so the result is calibrated for
    "k is the observed label", an under-estimate of "k applies"; feed full gold
    label sets when they exist.

NLL as a function of ``1 / T`` is convex for both heads, hence unimodal in
``log T``, which makes a golden-section search on ``log T`` exact and robust
without derivatives or scipy.

Figures: ``nll`` in nats per row (softmax) or per (row, label) entry
(sigmoid); ``brier`` likewise; ``expected_calibration_error`` is top-label ECE
with equal-width bins, a fraction in [0, 1].
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from intentvcs.core.outputs import non_finite_problem

ACTIVATIONS = ("softmax", "sigmoid")
ECE_BINS = 15
# Temperatures outside this range mean a broken model or data, not calibration.
TEMPERATURE_BOUNDS = (0.05, 20.0)
# An NLL that moves by no more than this over all of ``bounds`` (nats, relative to the NLL where it is above 1)
# is flat: the validation set says nothing about the temperature (one class, equal logits, sigmoid logits of 0,
# rows all right by margins of hundreds of logits), and ``fit_temperature`` returns 1 (no scaling), not the
# bound that a search breaking ties one way reaches (0.05 sharpened later logits twentyfold). Well above the
# rounding of an NLL (~1e-16 relative per row), far below any change a temperature makes to real logits (tenths
# of a nat across the bounds).
FLAT_NLL = 1e-9


def check_activation(activation: str) -> str:
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {list(ACTIVATIONS)}, got {activation!r}")
    return activation


def probabilities(logits: np.ndarray, activation: str, temperature: float = 1.0) -> np.ndarray:
    """``softmax(logits / T)`` over labels or ``sigmoid(logits / T)`` per entry; float64 ``[N, L]``."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    if check_activation(activation) == "softmax":
        z = np.exp(z - z.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)
    # exp of -|z| only (overflow-free for any logit), and e / (1 + e) for a negative logit: the tanh form
    # (1 + tanh(z / 2)) / 2 cancelled to exactly 0 below z = -37 (and kept few digits below -20), so those labels
    # tied at 0 and a ranked answer listed them in the order of the labels, not of their logits.
    e = np.exp(-np.abs(z))
    return np.where(z >= 0.0, 1.0, e) / (1.0 + e)


def _check_targets(logits: np.ndarray, targets: np.ndarray, activation: str) -> np.ndarray:
    """Softmax: int ``[N]`` label indices, or 0/1 ``[N, L]`` with one or more labels per row (returned as
    each row's labels spread evenly, float ``[N, L]``); sigmoid: 0/1 ``[N, L]``. Returns them validated."""
    if logits.ndim != 2:
        raise ValueError(f"logits must be [N, L], got shape {list(logits.shape)}")
    n, n_labels = logits.shape
    targets = np.asarray(targets)
    if check_activation(activation) == "softmax" and targets.ndim == 2:
        # A row written with several labels (a chained request) is read as the training loss reads it
        # (training.losses.observed_softmax_loss): each of its labels as likely as the others. One index per
        # row would pick one of them by the order of the model's labels.
        _check_zero_one(targets, logits.shape, "softmax label sets")
        counts = targets.sum(axis=1)
        if n and counts.min() < 1:
            raise ValueError("softmax label sets need one label or more per row; drop rows with no observed label")
        return targets / counts[:, None]
    if activation == "softmax":
        if targets.shape != (n,) or not np.issubdtype(targets.dtype, np.integer):
            raise ValueError(f"softmax targets must be {n} integer label indices, "
                             f"got {targets.dtype} {list(targets.shape)}")
        if n and (targets.min() < 0 or targets.max() >= n_labels):
            raise ValueError(f"softmax targets must lie in [0, {n_labels}); drop rows with no observed label")
        return targets
    # 0/1 as softmax label sets are: a NaN target made every NLL NaN, which the temperature search read as
    # "larger is better" (T = 20, in silence), and a 2 gave a negative NLL.
    _check_zero_one(targets, logits.shape, "sigmoid targets")
    return targets.astype(np.float64)


def _check_zero_one(targets: np.ndarray, shape: tuple[int, ...], what: str) -> None:
    """``ValueError`` naming ``what`` unless ``targets`` is a numeric 0/1 matrix of ``shape``."""
    if targets.shape != shape or targets.dtype.kind not in "biuf" or np.any((targets != 0) & (targets != 1)):
        raise ValueError(f"{what} must be 0/1 [N, L] = {list(shape)}, got {targets.dtype} {list(targets.shape)}")


def nll(logits: np.ndarray, targets: np.ndarray, activation: str, temperature: float = 1.0) -> float:
    """Mean negative log-likelihood in nats of ``targets`` under ``logits / T``.

    softmax: ``targets`` int ``[N]``; mean over rows of ``-log p[target]`` (0/1 ``[N, L]`` label sets: of the
    mean ``-log p`` over each row's labels).
    sigmoid: ``targets`` 0/1 ``[N, L]``; mean binary cross-entropy over all entries.
    """
    z = np.asarray(logits, dtype=np.float64)
    targets = _check_targets(z, targets, activation)
    z = z / temperature
    if activation == "softmax":
        top = z.max(axis=1)
        log_norm = top + np.log(np.exp(z - top[:, None]).sum(axis=1))
        if targets.ndim == 2:  # label sets: mean -log p over each row's labels
            return float(np.mean(log_norm - np.sum(targets * z, axis=1)))
        return float(np.mean(log_norm - z[np.arange(len(z)), targets]))
    # log(1 + e^z) - y z, written so that no exponent is positive.
    return float(np.mean(np.maximum(z, 0.0) - z * targets + np.log1p(np.exp(-np.abs(z)))))


def brier(probs: np.ndarray, targets: np.ndarray, activation: str) -> float:
    """Brier score of ``probs`` ``[N, L]``.

    softmax: mean over rows of ``sum_k (p_k - onehot_k)^2`` (in [0, 2]; label sets: spread evenly);
    sigmoid: mean ``(p - y)^2`` over all entries (in [0, 1]).
    """
    probs = np.asarray(probs, dtype=np.float64)
    targets = _check_targets(probs, targets, activation)
    if activation == "softmax":
        onehot = targets if targets.ndim == 2 else np.zeros_like(probs)  # label sets: spread evenly
        if targets.ndim == 1:
            onehot[np.arange(len(probs)), targets] = 1.0
        return float(np.mean(np.sum((probs - onehot) ** 2, axis=1)))
    return float(np.mean((probs - targets) ** 2))


def top_label(probs: np.ndarray, targets: np.ndarray, activation: str) -> tuple[np.ndarray, np.ndarray]:
    """``(confidence [N], correct bool [N])`` of each row's most probable label.

    Correct means the top label is the target (softmax) or is set in the
    target row (sigmoid, and softmax label sets).
    """
    probs = np.asarray(probs, dtype=np.float64)
    targets = _check_targets(probs, targets, activation)
    top = probs.argmax(axis=1)
    rows = np.arange(len(probs))
    correct = top == targets if targets.ndim == 1 else targets[rows, top] > 0
    return probs[rows, top], correct


def expected_calibration_error(confidence: np.ndarray, correct: np.ndarray, n_bins: int = ECE_BINS) -> float:
    """Top-label ECE: ``sum_b (n_b / N) * |accuracy_b - mean confidence_b|``.

    ``confidence`` in [0, 1], ``correct`` bool, both ``[N]``. Bins are equal
    width, right-closed: bin b holds ``(b / n_bins, (b + 1) / n_bins]`` and a
    confidence of exactly 0 joins bin 0. Empty input gives 0.0.
    """
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    if confidence.shape != correct.shape or confidence.ndim != 1:
        raise ValueError(f"confidence and correct must be equal-length 1-D arrays, "
                         f"got {confidence.shape}, {correct.shape}")
    if not len(confidence):
        return 0.0
    bins = np.clip(np.ceil(confidence * n_bins).astype(np.int64) - 1, 0, n_bins - 1)
    # (n_b / N) |acc_b - conf_b| = |sum over bin b of (correct_i - conf_i)| / N.
    gap = np.bincount(bins, weights=correct - confidence, minlength=n_bins)
    return float(np.abs(gap).sum() / len(confidence))


def fit_temperature(
    logits: np.ndarray,
    targets: np.ndarray,
    activation: str,
    bounds: tuple[float, float] = TEMPERATURE_BOUNDS,
    tol: float = 1e-5,
) -> float:
    """The temperature ``T`` in ``bounds`` minimising ``nll(logits, targets, activation, T)``.

    Golden-section search on ``log T`` until the bracket is narrower than
    ``tol`` (relative in T). A minimum outside ``bounds`` returns the nearer bound.
    An NLL flat over all of ``bounds`` (within ``FLAT_NLL``) returns 1.0, no scaling
    (the point of ``bounds`` nearest to 1 where they leave 1 out).
    Non-finite logits raise ``ValueError``: their NLL is NaN at every T, and the
    search would return the upper bound.
    """
    z = np.asarray(logits, dtype=np.float64)
    _check_targets(z, targets, activation)  # validated here; nll reads them as given (label sets: spread)
    if not len(z):
        raise ValueError("fit_temperature needs at least one validation row")
    problem = non_finite_problem(z, "fit_temperature: logits")
    if problem:
        raise ValueError(problem)

    def objective(u: float) -> float:
        return nll(z, targets, activation, math.exp(u))

    lo, hi = math.log(bounds[0]), math.log(bounds[1])
    log_t = _golden_section(objective, lo, hi, tol)
    # NLL is unimodal in log T: its largest value over the bounds is at one of them, its smallest (to ``tol``)
    # where the search ended. A NaN (logits overflowing at a small T) compares False: not flat, T as found.
    best = objective(log_t)
    rise = np.array([objective(lo), objective(hi)]) - best
    if np.all(rise <= FLAT_NLL * max(1.0, abs(best))):
        return float(min(max(1.0, bounds[0]), bounds[1]))
    return float(math.exp(log_t))


def _golden_section(f: Callable[[float], float], lo: float, hi: float, tol: float) -> float:
    """Minimiser of a unimodal ``f`` on ``[lo, hi]``; one evaluation per step.

    A tie (``f(c) == f(d)``) drops the upper side. Away from the bottom of a minimum (where, within rounding,
    either side is as good) the NLLs fitted here tie only where they are flat throughout (``fit_temperature``
    answers 1 there) or where a set the model separates perfectly saturates at a small T (its terms underflow
    to exactly 0): there the minimum is at the lower end, which this finds.
    Ties toward T = 1 would stop at the temperature where the underflow begins instead ([[2, 0, 0]] read as
    label 0: 0.059, not 0.05), an artefact of float precision.
    """
    inv_phi = (math.sqrt(5.0) - 1.0) / 2.0
    c, d = hi - inv_phi * (hi - lo), lo + inv_phi * (hi - lo)
    fc, fd = f(c), f(d)
    while hi - lo > tol:
        if fc <= fd:
            hi, d, fd = d, c, fc
            c = hi - inv_phi * (hi - lo)
            fc = f(c)
        else:
            lo, c, fc = c, d, fd
            d = lo + inv_phi * (hi - lo)
            fd = f(d)
    return (lo + hi) / 2.0


def calibration_figures(logits: np.ndarray, targets: np.ndarray, activation: str,
                        temperature: float = 1.0, n_bins: int = ECE_BINS) -> dict[str, float]:
    """``{"ece", "nll", "brier"}`` of ``logits / T`` against ``targets`` (fractions and nats)."""
    probs = probabilities(logits, activation, temperature)
    return {
        "ece": expected_calibration_error(*top_label(probs, targets, activation), n_bins=n_bins),
        "nll": nll(logits, targets, activation, temperature),
        "brier": brier(probs, targets, activation),
    }


def calibration_report(logits: np.ndarray, targets: np.ndarray, activation: str,
                       temperature: float, n_bins: int = ECE_BINS) -> dict[str, object]:
    """Figures before (T = 1) and after temperature scaling, JSON-safe.

    ``{"activation", "temperature", "n", "before": {...}, "after": {...}}``
    where each side is ``calibration_figures``.
    """
    return {
        "activation": activation,
        "temperature": float(temperature),
        "n": int(len(targets)),
        "before": calibration_figures(logits, targets, activation, 1.0, n_bins),
        "after": calibration_figures(logits, targets, activation, temperature, n_bins),
    }
