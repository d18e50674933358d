import math

import numpy as np
import pytest
import torch

from intentvcs.training.losses import (
    METHODS,
    bce_loss,
    ls_focal_loss,
    mlce_loss,
    negative_sampling_loss,
    observed_softmax_loss,
)
from intentvcs.training.pu import estimate_label_scale


def _manual_bce(z, y):
    p = 1 / (1 + math.exp(-z))
    return -(y * math.log(p) + (1 - y) * math.log(1 - p))


def test_bce_matches_hand_computation():
    logits = torch.tensor([[2.0, -1.0, 0.5]])
    targets = torch.tensor([[1.0, 0.0, 0.0]])
    expected = np.mean([_manual_bce(2.0, 1), _manual_bce(-1.0, 0), _manual_bce(0.5, 0)])
    assert bce_loss(logits, targets).item() == pytest.approx(expected, rel=1e-6)


def test_mlce_matches_formula_and_threshold_zero():
    logits = torch.tensor([[3.0, 1.0, -2.0, 0.5]])
    targets = torch.tensor([[1.0, 1.0, 0.0, 0.0]])
    neg = math.log(1 + math.exp(-2.0) + math.exp(0.5))
    pos = math.log(1 + math.exp(-3.0) + math.exp(-1.0))
    assert mlce_loss(logits, targets).item() == pytest.approx(neg + pos, rel=1e-6)
    # Gradient pushes positives up and negatives down.
    logits.requires_grad_(True)
    mlce_loss(logits, targets).backward()
    assert (logits.grad[0, :2] < 0).all() and (logits.grad[0, 2:] > 0).all()


def test_negative_sampling_leaves_unsampled_labels_out_of_the_loss():
    torch.manual_seed(0)
    logits = torch.zeros((4, 20), requires_grad=True)
    targets = torch.zeros((4, 20))
    targets[torch.arange(4), torch.tensor([0, 5, 10, 15])] = 1.0
    loss = negative_sampling_loss(logits, targets, theta=0.1, generator=torch.Generator().manual_seed(1))
    loss.backward()
    touched = (logits.grad != 0).sum(dim=1)
    # One positive plus theta * L = 2 negatives per row.
    assert touched.tolist() == [3, 3, 3, 3]
    assert (logits.grad[targets > 0] < 0).all()


def test_ls_focal_barely_penalises_unobserved_labels():
    logits = torch.tensor([[4.0, 4.0, -4.0]], requires_grad=True)
    targets = torch.tensor([[1.0, 0.0, 0.0]])
    ls_focal_loss(logits, targets).backward()
    grad = logits.grad[0]
    # The unobserved but predicted label 1 gets a far weaker push than label 0
    # would get if it were wrong (alpha_neg = 1e-5).
    assert abs(grad[1].item()) < 1e-4
    low = torch.tensor([[-4.0, 4.0, -4.0]], requires_grad=True)
    ls_focal_loss(low, targets).backward()
    assert low.grad[0, 0].item() < -0.1


def test_observed_softmax_is_cross_entropy_of_written_label():
    logits = torch.tensor([[1.0, 2.0, 0.0]])
    targets = torch.tensor([[0.0, 1.0, 0.0]])
    expected = torch.nn.functional.cross_entropy(logits, torch.tensor([1])).item()
    assert observed_softmax_loss(logits, targets).item() == pytest.approx(expected)


def test_every_method_has_finite_loss_and_gradient():
    torch.manual_seed(0)
    targets = torch.eye(5)[torch.tensor([0, 1, 2, 3])]
    for method in METHODS.values():
        logits = torch.randn(4, 5, requires_grad=True)
        loss = method.loss(logits, targets)
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(logits.grad).all(), method.name
        assert method.activation in {"softmax", "sigmoid"}


def test_label_scale_recovers_selection_rate_of_versions():
    # Two versions of one intent share its utterances: each is written half the time.
    rng = np.random.default_rng(0)
    n = 400
    written = rng.integers(0, 2, size=n)  # 0 -> v1, 1 -> v2; label 2 is a clean intent
    probs = np.zeros((n + 100, 3))
    probs[:n, 0] = probs[:n, 1] = 0.5
    probs[n:, 2] = 0.97
    observed = np.zeros((n + 100, 3))
    observed[np.arange(n), written] = 1
    observed[n:, 2] = 1
    scale = estimate_label_scale(probs, observed)
    assert scale[:2] == pytest.approx([0.5, 0.5], abs=0.01)
    assert scale[2] == pytest.approx(0.97, abs=0.02)


def test_label_scale_falls_back_to_prior_for_unseen_labels_and_respects_floor():
    heldout = np.array([[0.9, 0.1]])
    observed = np.array([[1, 0]])
    prior = np.array([[0.0, 0.4], [0.0, 0.6]])
    prior_obs = np.array([[0, 1], [0, 1]])
    scale = estimate_label_scale(heldout, observed, prior, prior_obs, prior_strength=1.0)
    assert scale[1] == pytest.approx(0.5)
    assert estimate_label_scale(np.array([[0.001]]), np.array([[1]]), prior_strength=0.0)[0] == 0.05


def test_consistency_is_zero_for_equal_predictions_and_pulls_only_the_copy():
    from intentvcs.training.losses import consistency_loss

    clean = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 0.0]], requires_grad=True)
    for activation in ("softmax", "sigmoid"):
        same = clean.detach().clone().requires_grad_(True)
        assert consistency_loss(same, clean, activation).item() == pytest.approx(0.0, abs=1e-7)
        copy = torch.tensor([[0.0, 2.0, -1.0], [0.5, 0.5, 3.0]], requires_grad=True)
        loss = consistency_loss(copy, clean, activation)
        assert loss.item() > 0.1
        loss.backward()
        assert copy.grad is not None and copy.grad.abs().sum() > 0
        assert clean.grad is None  # the clean side is a fixed target


def test_consistency_softmax_is_the_categorical_kl():
    from intentvcs.training.losses import consistency_loss

    clean, copy = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    p, q = torch.softmax(clean, 1)[0], torch.softmax(copy, 1)[0]
    expected = float((p * (p.log() - q.log())).sum())
    assert consistency_loss(copy, clean, "softmax").item() == pytest.approx(expected, rel=1e-6)
