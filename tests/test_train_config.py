import pytest

from intentvcs.training.trainer import TrainConfig


def test_resampling_is_the_default_when_augmenting_and_off_without_copies():
    assert TrainConfig(augment_ratio=1.0).augment_resample
    assert not TrainConfig().augment_resample  # nothing to draw
    assert not TrainConfig(augment_ratio=1.0, augment_resample=False).augment_resample


def test_a_stored_config_keeps_what_its_run_did():
    # Written before resampling existed: its copies were drawn once.
    old = {"epochs": 3, "augment_ratio": 2.0, "augment_mix": None, "a_field_from_the_future": 1}
    assert TrainConfig.from_stored(old) == TrainConfig(epochs=3, augment_ratio=2.0, augment_resample=False)
    today = TrainConfig(augment_ratio=2.0, consistency_weight=0.5)
    assert TrainConfig.from_stored(today.to_dict()) == today


def test_bad_consistency_settings_are_clear_errors():
    with pytest.raises(ValueError, match="consistency_weight must be >= 0"):
        TrainConfig(augment_ratio=1.0, consistency_weight=-1)
    with pytest.raises(ValueError, match="needs augment_ratio > 0"):
        TrainConfig(consistency_weight=1.0)


def test_validating_on_perturbed_copies_needs_augmentation():
    assert TrainConfig(augment_ratio=1.0, validate_perturbed=True).validate_perturbed
    assert not TrainConfig.from_stored({"augment_ratio": 1.0}).validate_perturbed  # what older runs did
    with pytest.raises(ValueError, match="validate_perturbed needs augment_ratio > 0"):
        TrainConfig(validate_perturbed=True)


def test_the_default_backbone_is_named_not_located():
    # The package path differs per machine; checkpoints, bundles and /metrics carry the model's name.
    assert TrainConfig().backbone_name() == "sentence-transformers/all-MiniLM-L6-v2"
    assert TrainConfig().resolved_backbone().endswith("model")  # the weights still load from the package
    assert TrainConfig(backbone="/models/mine").backbone_name() == "/models/mine"
