"""Fit and loss review: each test failed on the code before its fix.

The label-smoothing focal loss raised its focal factors ``(1 - p)^gamma`` and ``p^gamma`` from probabilities
that round to exactly 1 or 0 at large |logit|, so any gamma below 1 (which the function accepts) gave a
gradient of -inf (logit 20) or NaN (logit -200) that would wreck the weights in one step.
"""

from __future__ import annotations

import math

import pytest
import torch

from intentvcs.training.losses import ls_focal_loss


def _focal_by_hand(z: float, y: float, n_labels: int, beta: float, gamma: float, a_pos: float, a_neg: float):
    """One entry of ``ls_focal_loss``'s sum, in float64 with math's exact sigmoid."""
    t = y * (1.0 - beta) + beta / n_labels
    log_p = -math.log1p(math.exp(-z)) if z >= 0 else z - math.log1p(math.exp(z))
    log_q = -math.log1p(math.exp(z)) if z <= 0 else -z - math.log1p(math.exp(-z))
    return -(a_pos * t * math.exp(gamma * log_q) * log_p + a_neg * (1 - t) * math.exp(gamma * log_p) * log_q)


@pytest.mark.parametrize("gamma", [0.0, 0.5, 1.0, 2.0, 4.0])
def test_ls_focal_has_finite_gradients_and_the_stated_value_at_large_logits_for_any_gamma(gamma):
    logits = torch.tensor([[20.0, -200.0, 0.3], [100.0, 3.0, -100.0]], requires_grad=True)
    targets = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    kw = dict(beta=0.2, gamma=gamma, alpha_pos=0.9, alpha_neg=0.1)
    loss = ls_focal_loss(logits, targets, **kw)
    loss.backward()
    assert torch.isfinite(logits.grad).all(), logits.grad
    expected = sum(_focal_by_hand(float(logits.detach()[i, k]), float(targets[i, k]), 3, 0.2, gamma, 0.9, 0.1)
                   for i in range(2) for k in range(3)) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-5)
