import json

import pytest

from intentvcs.training.config import DecisionConfig, TrainConfig


def test_resampling_is_the_default_when_augmenting_and_off_without_copies():
    assert TrainConfig(augment_ratio=1.0).augment_resample
    assert not TrainConfig().augment_resample  # nothing to draw
    assert not TrainConfig(augment_ratio=1.0, augment_resample=False).augment_resample


def test_a_stored_config_keeps_what_its_run_did():
    # Written before resampling, entities, epoch selection and boundaries existed: its copies were drawn once,
    # no entity or boundary head trained, the loss picked the epoch.
    old = {"epochs": 3, "augment_ratio": 2.0, "augment_mix": None, "a_field_from_the_future": 1}
    assert TrainConfig.from_stored(old) == TrainConfig(epochs=3, augment_ratio=2.0, augment_resample=False,
                                                       entity_weight=0.0, select_by="loss", boundary_weight=0.0)
    today = TrainConfig(augment_ratio=2.0, consistency_weight=0.5)
    assert TrainConfig.from_stored(today.to_dict()) == today


def test_an_unknown_method_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown method 'magic'; choose from"):
        TrainConfig(method="magic")


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


def test_decision_config_round_trips():
    for config in (DecisionConfig(), DecisionConfig(oos_rule="threshold", oos_retention=0.9,
                                                    threshold_rule="per_label_f1", spelling=False,
                                                    discover_relations=0.8, support_noise=0.003)):
        assert DecisionConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert set(DecisionConfig().to_dict()) == {"oos_rule", "oos_retention", "oos_part_retention", "threshold_rule",
                                               "spelling", "discover_relations", "support_noise", "entity_floor"}
    with pytest.raises(ValueError, match="oos_part_retention"):
        DecisionConfig(oos_part_retention=1.0)
    with pytest.raises(ValueError, match="discover_relations"):
        DecisionConfig(discover_relations=1.5)
    with pytest.raises(ValueError, match="support_noise"):
        DecisionConfig(support_noise=1.0)
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['oos_threshold'\]"):
        DecisionConfig.from_dict({"oos_rule": "none", "oos_threshold": 0.5})


@pytest.mark.parametrize("kwargs, message", [
    ({"oos_rule": "magic"}, "unknown oos rule 'magic'"),
    ({"threshold_rule": "observed_f1"}, "unknown threshold rule 'observed_f1'"),
    ({"oos_retention": 1.0}, "strictly between 0 and 1"),
])
def test_decision_config_refuses_what_no_fit_can_do(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DecisionConfig(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"learning_rate": float("nan")}, "learning_rate must be a finite number, got nan"),
    ({"entity_weight": float("nan")}, "entity_weight must be a finite number"),
    ({"consistency_weight": float("inf"), "augment_ratio": 1.0}, "consistency_weight must be a finite number"),
    ({"tagger_learning_rate": float("nan")}, "tagger_learning_rate must be a finite number"),
    ({"chain_ratio": float("nan")}, "chain_ratio must be a finite number"),
    ({"learning_rate": 0.0}, "learning_rate must be > 0"),
    ({"max_length": 1}, "max_length must be >= 3"),
    ({"threads": -1}, "threads must be >= 1"),
    ({"augment_ratio": -1.0}, "augment_ratio must be >= 0"),
    ({"patience": -1}, "patience must be >= 0"),
    ({"dropout": 1.0}, "dropout in \\[0, 1\\)"),
])
def test_train_config_refuses_settings_no_run_can_apply(kwargs, message):
    """Each was recorded as given and then crashed, applied in part or not at all."""
    with pytest.raises(ValueError, match=message):
        TrainConfig(**kwargs)


def test_train_config_records_the_same_keys():
    # checkpoint.json's train_config, which benchmarks compare recipes by.
    assert list(TrainConfig().to_dict()) == [
        "backbone", "method", "epochs", "batch_size", "learning_rate", "weight_decay", "warmup_ratio", "max_length",
        "dropout", "seed", "patience", "select_by", "freeze_embeddings", "negative_theta", "focal_beta", "threads",
        "device", "augment_ratio", "augment_mix", "augment_resample", "consistency_weight", "validate_perturbed",
        "labels", "entity_weight", "chain_ratio", "tags_read_intents", "focal_alpha", "extend_vocab",
        "ema_decay", "boundary_weight", "tagger_learning_rate"]


def test_without_chains_no_boundary_head_is_recorded():
    assert TrainConfig().boundary_weight == 0.0  # nothing shows where a request begins
    assert TrainConfig(chain_ratio=0.5).boundary_weight == 1.0
    # A run recorded before boundaries existed compares equal to today's default recipe.
    stored = TrainConfig().to_dict()
    del stored["boundary_weight"]
    assert TrainConfig.from_stored(stored) == TrainConfig()


def test_a_run_recorded_before_devices_compares_equal_to_the_default_recipe():
    stored = TrainConfig().to_dict()
    del stored["device"]
    assert TrainConfig.from_stored(stored) == TrainConfig()


def test_the_entity_heads_own_rate_is_positive_and_absent_from_older_runs():
    with pytest.raises(ValueError, match="tagger_learning_rate must be > 0"):
        TrainConfig(tagger_learning_rate=0.0)
    stored = TrainConfig().to_dict()
    del stored["tagger_learning_rate"]
    assert TrainConfig.from_stored(stored) == TrainConfig()  # recorded before it existed: the learning rate
