"""Training support review: each test failed on the code before its fix.

A label-smoothing beta or a negative-sampling theta outside its range was accepted, recorded and trained with
(a beta of 1 smooths every target to 1/L, above 1 the gold labels' targets fall below the others', below 0 the
others' below zero; a theta of 0 or less still drew one negative per row, one above 1 no more than all of them).
An integer setting given a fraction or a bool was accepted: epochs 1.5 or batch_size 2.5 crashed with a
TypeError only after the backbone had loaded and the rows were encoded, patience 0.5 ran as 0, True as 1.
A seed torch cannot take (2**64 and above) was accepted and failed at set-up with torch's "Overflow when
unpacking long long", and a negative one shuffled the batches exactly as its absolute value does.
Drawing the co-occurrence heatmap switched the whole process's matplotlib backend to Agg, so a caller's own
figures (a notebook's inline ones) stopped showing.
"""

from __future__ import annotations

import pytest

from intentvcs.training.config import TrainConfig


# ------------------------------------------------------------------ 1. ratios of the baseline losses


@pytest.mark.parametrize("kwargs, message", [
    ({"focal_beta": -0.5}, r"focal_beta must lie in \[0, 1\)"),
    ({"focal_beta": 1.0}, r"focal_beta must lie in \[0, 1\)"),
    ({"focal_beta": 1.5}, r"focal_beta must lie in \[0, 1\)"),
    ({"negative_theta": -1.0}, r"negative_theta must lie in \(0, 1\]"),
    ({"negative_theta": 0.0}, r"negative_theta must lie in \(0, 1\]"),
    ({"negative_theta": 1.5}, r"negative_theta must lie in \(0, 1\]"),
])
def test_a_smoothing_beta_or_negative_share_outside_its_range_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**kwargs)
    # The ends that mean something stay accepted.
    assert TrainConfig(focal_beta=0.0, negative_theta=1.0).negative_theta == 1.0


# ------------------------------------------------------------------ 2. integer settings


@pytest.mark.parametrize("name, value", [
    ("epochs", 1.5), ("epochs", True), ("batch_size", 2.5), ("max_length", 10.5), ("patience", 0.5),
    ("threads", 1.5), ("seed", 1.5), ("extend_vocab", 1.5),
])
def test_an_integer_setting_refuses_a_fraction_or_a_bool(name, value):
    extra = {"freeze_embeddings": False} if name == "extend_vocab" else {}
    with pytest.raises(ValueError, match=f"{name} must be an integer"):
        TrainConfig(**{name: value}, **extra)


# ------------------------------------------------------------------ 3. seeds


@pytest.mark.parametrize("seed", [-3, 2**64, 2**70])
def test_a_seed_torch_cannot_take_or_that_shuffles_as_another_is_refused(seed):
    with pytest.raises(ValueError, match=r"seed must lie in \[0, 2\*\*64\)"):
        TrainConfig(seed=seed)
    assert TrainConfig(seed=2**64 - 1).seed == 2**64 - 1  # torch's largest


def test_the_largest_seed_accepted_sets_up_a_run():
    """What the configuration accepts, the trainer's seeding takes."""
    import torch

    from intentvcs.training.trainer import Trainer

    state = torch.get_rng_state()
    try:
        Trainer(TrainConfig(seed=2**64 - 1, device="cpu"))._seed()
    finally:
        torch.set_rng_state(state)


# ------------------------------------------------------------------ 4. the heatmap


def test_the_heatmap_leaves_the_callers_matplotlib_backend_alone():
    import matplotlib
    import matplotlib.pyplot as plt

    from intentvcs.training.plots import cooccurrence_png

    previous = matplotlib.get_backend()
    matplotlib.use("svg")  # a non-interactive stand-in for a notebook's inline backend
    own = plt.figure()
    try:
        png = cooccurrence_png([[3, 1], [1, 2]], ["a", "b"])
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
        assert matplotlib.get_backend().lower() == "svg"
        assert plt.get_fignums() == [own.number]  # the caller's figure kept, none of ours left open
    finally:
        plt.close(own)
        matplotlib.use(previous)
