"""``intentvcs refit`` keeps the checkpoint's decision settings and refuses training rows that are not its own."""

import json

import pytest

from intentvcs.cli.main import main
from intentvcs.training import DEFAULT_DATA
from intentvcs.training.config import DecisionConfig
from tests.helpers.bundle import make_tiny_checkpoint
from tests.helpers.tiny import make_tiny_backbone

TEXTS = {"A": ["play music", "play a song", "play my playlist", "add song to playlist"],
         "B": ["book a table", "book table for two", "book restaurant tonight", "table for two people"],
         "C": ["will it rain", "weather tomorrow", "snow in the forecast", "rain tomorrow"]}
OOS_TEXTS = ["call mom", "order pizza", "pay bill"]


def write_rows(path, labels, oos=True, tail=""):
    """The rows of ``labels`` (``tail`` after each text: validation rows must not be the training rows)."""
    rows = [{"text": text + tail, "labels": [label]} for label in labels for text in TEXTS[label]]
    rows += [{"text": text + tail, "labels": []} for text in OOS_TEXTS] if oos else []
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def edit_meta(ckpt, **changes):
    meta = json.loads((ckpt / "checkpoint.json").read_text())
    meta.update(changes)
    (ckpt / "checkpoint.json").write_text(json.dumps(meta))
    return meta


def refit(ckpt, train, valid, *options):
    return main(["refit", "--checkpoint", str(ckpt), "--train", train, "--valid", valid, *options])


def recorded(ckpt) -> DecisionConfig:
    meta = json.loads((ckpt / "checkpoint.json").read_text())
    return DecisionConfig.from_dict({k: v for k, v in meta["refit"].items() if k not in ("at", "valid_fingerprint")})


@pytest.fixture
def data(tmp_path):
    return {"train": write_rows(tmp_path / "train.jsonl", "ABC"),
            "valid": write_rows(tmp_path / "valid.jsonl", "ABC", tail=" please")}


def test_refit_keeps_every_setting_of_a_trained_checkpoint_not_given(tmp_path, capsys):
    ckpt = tmp_path / "ckpt"
    train, valid = str(DEFAULT_DATA / "train.jsonl"), str(DEFAULT_DATA / "valid.jsonl")
    assert main(["train", "--train", train, "--valid", valid, "--out", str(ckpt),
                 "--backbone", str(make_tiny_backbone(tmp_path / "backbone")), "--epochs", "1", "--batch-size", "64",
                 "--no-spelling", "--oos-rule", "threshold", "--threshold-rule", "observed_quantile"]) == 0
    trained = json.loads((ckpt / "checkpoint.json").read_text())["decision_config"]  # what refit starts from
    assert DecisionConfig.from_dict(trained) == DecisionConfig(spelling=False, oos_rule="threshold",
                                                               threshold_rule="observed_quantile")
    assert refit(ckpt, train, valid, "--oos-part-retention", "0.8") == 0
    meta = json.loads((ckpt / "checkpoint.json").read_text())
    assert recorded(ckpt) == DecisionConfig(spelling=False, oos_rule="threshold", threshold_rule="observed_quantile",
                                            oos_part_retention=0.8)
    assert meta["decision"]["oos"]["rule"] == "threshold" and meta["decision_report"]["thresholds"]["rule"] == \
        "observed_quantile"
    assert meta["spelling"] is None and not (ckpt / "spelling.json").exists()
    # A second refit keeps what the first recorded, the part retention given then included.
    assert refit(ckpt, train, valid, "--oos-rule", "distance") == 0
    assert recorded(ckpt) == DecisionConfig(spelling=False, oos_rule="distance", threshold_rule="observed_quantile",
                                            oos_part_retention=0.8)
    assert not (ckpt / "spelling.json").exists()


def test_a_checkpoint_recording_no_settings_refits_with_the_defaults_and_says_which(tmp_path, data, caplog):
    ckpt = make_tiny_checkpoint(tmp_path / "ckpt", labels=("A", "B", "C"))  # no decision_report, no spelling entry
    with caplog.at_level("WARNING", logger="intentvcs.training.pipeline"):
        assert refit(ckpt, data["train"], data["valid"]) == 0
    # The OOS rule is read off its decision; the rest are the defaults.
    assert recorded(ckpt) == DecisionConfig(oos_rule="threshold")
    assert (ckpt / "spelling.json").is_file()
    assert f"{ckpt / 'checkpoint.json'} does not record oos_part_retention: refitting with the default 0.9 " \
           "(give --oos-part-retention to choose)" in caplog.messages


def test_a_discovery_rate_not_recorded_must_be_given(tmp_path, data, capsys):
    ckpt = make_tiny_checkpoint(tmp_path / "ckpt", labels=("A", "B", "C"))
    edit_meta(ckpt, decision_report={"discovered_relations": []})
    before = (ckpt / "checkpoint.json").read_bytes()
    assert refit(ckpt, data["train"], data["valid"]) == 2
    assert capsys.readouterr().err == (
        f"intentvcs refit: error: {ckpt / 'checkpoint.json'}: its decision discovered label relations at a rate it "
        "does not record: give the rate (--discover-relations RATE; 0: off)\n")
    assert (ckpt / "checkpoint.json").read_bytes() == before
    assert refit(ckpt, data["train"], data["valid"], "--discover-relations", "0.9") == 0
    assert recorded(ckpt).discover_relations == 0.9


def test_training_rows_missing_a_label_of_the_checkpoint_are_refused(tmp_path, data, capsys):
    ckpt = make_tiny_checkpoint(tmp_path / "ckpt", labels=("A", "B", "C"))
    one_label = write_rows(tmp_path / "one_label.jsonl", "A")
    before = (ckpt / "checkpoint.json").read_bytes()
    assert refit(ckpt, one_label, data["valid"]) == 2
    assert capsys.readouterr().err == (
        f"intentvcs refit: error: {one_label}: no row carries 2 of the checkpoint's 3 labels ['B', 'C']: give the "
        "rows the checkpoint was trained on (a label without one has no class mean for the distance rule)\n")
    assert (ckpt / "checkpoint.json").read_bytes() == before


def test_the_oos_rule_train_is_neither_refitted_to_nor_away_from(tmp_path, data, capsys):
    ckpt = make_tiny_checkpoint(tmp_path / "ckpt", labels=("A", "B", "C", "oos"))
    meta = edit_meta(ckpt)
    edit_meta(ckpt, decision={**meta["decision"], "oos": {"rule": "train", "index": 3}})
    before = (ckpt / "checkpoint.json").read_bytes()
    assert refit(ckpt, data["train"], data["valid"], "--oos-rule", "distance") == 2
    assert capsys.readouterr().err == (
        f"intentvcs refit: error: {ckpt} was trained with the OOS rule train (out-of-scope rows are a class of their "
        "own, the model's output 'oos'); refitted to distance that output would be read as an ordinary intent. The "
        "rule train changes the model's outputs: switching it needs intentvcs train\n")
    assert (ckpt / "checkpoint.json").read_bytes() == before
    # Not given, the rule stays train: out-of-scope rows are its class again.
    assert refit(ckpt, data["train"], data["valid"]) == 0
    assert recorded(ckpt).oos_rule == "train"
    assert json.loads((ckpt / "checkpoint.json").read_text())["decision"]["oos"] == {"rule": "train", "index": 3}

    plain = make_tiny_checkpoint(tmp_path / "plain", labels=("A", "B", "C"))
    before = (plain / "checkpoint.json").read_bytes()
    assert refit(plain, data["train"], data["valid"], "--oos-rule", "train") == 2
    assert capsys.readouterr().err == (
        f"intentvcs refit: error: {plain} was trained with the OOS rule threshold: its outputs have no out-of-scope "
        "class. The rule train changes the model's outputs (out-of-scope rows become a class of their own): "
        "switching to it needs intentvcs train\n")
    assert (plain / "checkpoint.json").read_bytes() == before
