"""An exponential moving average of the trained weights (Polyak averaging).

Late in fine-tuning, successive steps move the weights around a minimum
rather than towards it: the average of those weights generalises better
than any one of them (Polyak & Juditsky 1992; the EMA form is how vision and
speech training keep it). The trainer judges and keeps the averaged weights
(``TrainConfig.ema_decay``) and trains on the raw ones.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

import torch


class WeightAverage:
    """The moving average of ``params`` (the trained parameters, updated in place by the optimiser).

    ``update`` after each optimiser step folds the current weights in with
    weight ``1 - decay``; early on the decay is ``(1 + n) / (10 + n)`` after
    ``n`` updates when that is smaller, so the average is not anchored to the
    starting weights for the thousands of steps a decay near 1 would take.
    """

    def __init__(self, params: Sequence[torch.nn.Parameter], decay: float):
        if not 0.0 < decay < 1.0:
            raise ValueError(f"decay must lie strictly between 0 and 1, got {decay}")
        self.params = list(params)
        self.decay = decay
        self.updates = 0
        self.shadow = [param.detach().clone() for param in self.params]

    @torch.no_grad()
    def update(self) -> None:
        self.updates += 1
        decay = min(self.decay, (1 + self.updates) / (10 + self.updates))
        for average, param in zip(self.shadow, self.params):
            average.lerp_(param.detach(), 1.0 - decay)

    @contextmanager
    def applied(self) -> Iterator[None]:
        """The parameters hold the average inside the block and their own weights again after it."""
        own = [param.detach().clone() for param in self.params]
        _copy_into(self.params, self.shadow)
        try:
            yield
        finally:
            _copy_into(self.params, own)


@torch.no_grad()
def _copy_into(params: Sequence[torch.nn.Parameter], values: Sequence[torch.Tensor]) -> None:
    for param, value in zip(params, values):
        param.copy_(value)
