"""Training objectives for multi-label intent models from single-label data.

Every loss takes ``logits`` [B, L] and a target matrix ``targets`` [B, L] of
0/1 floats (the observed label(s) of each row; for the upper bound, the gold
set) and returns a scalar. ``LOSSES`` maps method names to factories so the
trainer and the CLI share one list.

Methods (DialogVCS baselines, docs/RESEARCH.md section 1.5, plus our PU method):
- ``bce``: every unobserved label is a negative. Learns to predict one label.
- ``negative_sampling``: the positive plus ``theta * L`` random negatives per
  row; all other labels stay out of the loss.
- ``ls_focal``: label smoothing ``t = y (1 - beta) + beta / L`` with focal loss
  (gamma 4) and class weights alpha_pos / alpha_neg.
- ``mlce``: multi-label cross-entropy with a threshold score s0 = 0
  (predict label k when s_k > 0).
- ``upper_bound``: ``bce`` on the full gold sets (needs gold training labels).
- ``pu``: softmax cross-entropy on the one observed label, i.e. a model of
  P(k observed | x); the trainer then estimates each label's selection rate
  c_k on held-out data (Elkan & Noto 2008, ``intentvcs.training.pu``) and serves
  P(k applies | x) = P(k observed | x) / c_k.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from intentvcs.training.config import METHOD_TABLE

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def bce_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(logits, targets)


def negative_sampling_loss(
    logits: torch.Tensor, targets: torch.Tensor, theta: float = 0.1, generator: torch.Generator | None = None
) -> torch.Tensor:
    """BCE over positives plus ``max(1, round(theta * L))`` sampled negatives per row."""
    num_labels = logits.shape[1]
    n_neg = max(1, round(theta * num_labels))
    # Random scores on unobserved labels; the top n_neg of them are a uniform sample.
    noise = torch.rand(logits.shape, generator=generator, device=logits.device)
    noise = noise.masked_fill(targets > 0, -1.0)
    sampled = torch.zeros_like(targets, dtype=torch.bool)
    sampled.scatter_(1, noise.topk(min(n_neg, num_labels - 1), dim=1).indices, True)
    sampled &= targets == 0
    mask = (targets > 0) | sampled
    per_entry = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    return (per_entry * mask).sum() / mask.sum().clamp_min(1)


def ls_focal_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    beta: float = 0.2,
    gamma: float = 4.0,
    alpha_pos: float = 0.99999,
    alpha_neg: float = 0.00001,
) -> torch.Tensor:
    """Focal loss on label-smoothed targets; alphas weight the two target parts.

    The tiny ``alpha_neg`` makes unobserved labels nearly free to predict,
    which is what lets this loss keep entangled labels alive.
    """
    smoothed = targets * (1.0 - beta) + beta / logits.shape[1]
    log_p = F.logsigmoid(logits)
    log_not_p = F.logsigmoid(-logits)
    # The focal factors (1 - p)^gamma and p^gamma from the log-probabilities: p rounds to exactly 1 (or 0) at
    # large |logit|, where pow's gradient is infinite for gamma < 1 (-inf at logit 20, NaN at -200).
    pos = alpha_pos * smoothed * (gamma * log_not_p).exp() * log_p
    neg = alpha_neg * (1.0 - smoothed) * (gamma * log_p).exp() * log_not_p
    # Scaled by L so the magnitude matches a per-row loss, not a per-entry one.
    return -(pos + neg).sum(dim=1).mean()


def mlce_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``log(1 + sum_neg e^{s}) + log(1 + sum_pos e^{-s})`` with s0 = 0."""
    pos = targets > 0
    big = torch.finfo(logits.dtype).max / 4
    neg_scores = logits.masked_fill(pos, -big)
    pos_scores = (-logits).masked_fill(~pos, -big)
    zero = torch.zeros_like(logits[:, :1])
    neg_term = torch.logsumexp(torch.cat([zero, neg_scores], dim=1), dim=1)
    pos_term = torch.logsumexp(torch.cat([zero, pos_scores], dim=1), dim=1)
    return (neg_term + pos_term).mean()


def observed_softmax_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the observed label under a softmax over all labels.

    Rows with several observed labels spread the target mass evenly (soft
    targets), so the loss stays a proper model of "which label was written".
    """
    dist = targets / targets.sum(dim=1, keepdim=True).clamp_min(1.0)
    return -(dist * F.log_softmax(logits, dim=1)).sum(dim=1).mean()


def consistency_loss(copy_logits: torch.Tensor, clean_logits: torch.Tensor, activation: str) -> torch.Tensor:
    """KL divergence from each clean row's prediction to its perturbed copy's.

    The clean side is detached: the copy is pulled towards what the model
    says about the clean text, never the other way round (UDA's choice), so
    perturbed inputs cannot drag clean predictions. ``activation`` is the
    method's: a softmax gives one categorical KL per row, a sigmoid one
    Bernoulli KL per label, summed over labels. Mean over rows.
    """
    clean_logits = clean_logits.detach()
    if activation == "softmax":
        return F.kl_div(F.log_softmax(copy_logits, dim=1), F.log_softmax(clean_logits, dim=1),
                        log_target=True, reduction="batchmean")
    p = torch.sigmoid(clean_logits)
    kl = (p * (F.logsigmoid(clean_logits) - F.logsigmoid(copy_logits))
          + (1 - p) * (F.logsigmoid(-clean_logits) - F.logsigmoid(-copy_logits)))
    return kl.sum(dim=1).mean()


@dataclass(frozen=True)
class Method:
    name: str
    loss: LossFn
    activation: str  # "softmax" or "sigmoid": how the decision layer reads the logits


METHODS: dict[str, Method] = {
    name: Method(name, globals()[loss], activation) for name, (loss, activation) in METHOD_TABLE.items()
}


def tag_loss(tag_logits: torch.Tensor, tag_targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the entity head over the tagged tokens (``IGNORE`` elsewhere); 0 when a batch has none."""
    from intentvcs.core.entities import IGNORE

    tagged = tag_targets != IGNORE
    if not tagged.any():
        return tag_logits.new_zeros(())
    return F.cross_entropy(tag_logits[tagged], tag_targets[tagged])


def boundary_loss(boundary_logits: torch.Tensor, boundary_targets: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy of the boundary head over the words' first pieces (``IGNORE`` elsewhere): does the
    word begin a further request (``intentvcs.core.boundaries``); 0 when a batch has no such token."""
    from intentvcs.core.entities import IGNORE

    scored = boundary_targets != IGNORE
    if not scored.any():
        return boundary_logits.new_zeros(())
    return F.binary_cross_entropy_with_logits(boundary_logits[scored],
                                              boundary_targets[scored].to(boundary_logits.dtype))
