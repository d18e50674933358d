"""benchmarks/robustness_bench.py's seed means: seeds average only when trained alike."""

from __future__ import annotations

import pytest

from benchmarks.robustness_bench import seed_means


def clean_record(seed: int, **recipe) -> dict:
    return {"dataset": "clinc150", "model": "augmented", "set": "clean", "family": None, "n": 10,
            "clean_acc": 90.0 + seed, "perturbed_acc": None, "drop": None, "seed": seed, **recipe}


def test_seeds_trained_alike_are_averaged():
    [mean] = seed_means([clean_record(0, epochs=6), clean_record(2, epochs=6)])
    assert mean["clean_acc"] == 91.0 and mean["seeds"] == [0, 2] and "seed" not in mean


def test_a_missing_key_counts_as_its_value_before_it_was_recorded():
    [mean] = seed_means([clean_record(0, validate_perturbed=False, epochs=3), clean_record(1)])
    assert mean["seeds"] == [0, 1]


def test_seeds_trained_differently_are_refused():
    with pytest.raises(ValueError, match=r"clinc150/augmented/clean: seeds \[0, 1\] were trained with different"):
        seed_means([clean_record(0, validate_perturbed=True), clean_record(1)])


def test_the_spelling_comparison_pairs_only_the_same_trained_models():
    from benchmarks.spelling_effect import common_seeds

    def run(augmented_epoch: dict[int, int]) -> list[dict]:
        return [{**clean_record(seed), "model": model,
                 "best_epoch": augmented_epoch[seed] if model == "augmented" else 2}
                for seed in (0, 1) for model in ("baseline", "augmented")]

    without, with_spelling = run({0: 4, 1: 2}), run({0: 6, 1: 2})  # seed 0's augmented model was retrained
    assert common_seeds(without, with_spelling) == {"clinc150": {1}}
