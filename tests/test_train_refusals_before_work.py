"""``intentvcs train`` refuses what it cannot do before its work, in the words the user typed.

An intent literally named "oos" (CLINC150's out-of-scope rows) is read as out-of-scope rows, the backbone is an
input that ``--out`` may not replace, a bad ``--augment-mix`` is refused before anything loads, and a setting's
refusal names the option given (``--augment``, ``--train-embeddings``, ``--max-length``), not the field.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from intentvcs.cli import exit_codes
from intentvcs.cli.main import build_parser, main
from intentvcs.training import DEFAULT_DATA
from intentvcs.training.config import TrainConfig

TRAIN, VALID = str(DEFAULT_DATA / "train.jsonl"), str(DEFAULT_DATA / "valid.jsonl")


def jsonl(path: Path, *rows: tuple[str, list[str]]) -> str:
    path.write_text("".join(json.dumps({"text": text, "labels": labels}) + "\n" for text, labels in rows),
                    encoding="utf-8")
    return str(path)


def no_data_read(monkeypatch) -> None:
    """Fail the test if ``train`` reads its data: each refusal here comes before it."""
    from intentvcs.cli.commands import train

    monkeypatch.setattr(train, "read_splits", lambda *args, **kwargs: pytest.fail("the data was read"))


def rows_reaching_the_model(monkeypatch) -> dict:
    """The rows ``Trainer.fit`` is given, recorded; it then stops the command (exit 2) instead of training."""
    from intentvcs.training import trainer

    seen: dict = {}

    def fit(self, train, valid):
        seen["train"], seen["valid"] = list(train), list(valid)
        raise ValueError("the model would train now")

    monkeypatch.setattr(trainer.Trainer, "fit", fit)
    return seen


def train(tmp_path: Path, *extra: str, data: tuple[str, str] = (TRAIN, VALID), backbone: str | None = None) -> int:
    return main(["train", "--train", data[0], "--valid", data[1], "--out", str(tmp_path / "ckpt"), "--no-spelling",
                 "--backbone", backbone or str(tmp_path / "no-backbone"), *extra])


# ------------------------------------------------------------------ 1: an intent named "oos"
def clinc_style(tmp_path: Path, *extra_train: tuple[str, list[str]]) -> tuple[str, str]:
    """Rows as CLINC150 writes them: out-of-scope rows carry the label "oos"."""
    train = jsonl(tmp_path / "train.jsonl", ("play some music", ["play"]), ("book a table", ["book"]),
                  ("what is the meaning of life", ["oos"]), *extra_train)
    valid = jsonl(tmp_path / "valid.jsonl", ("play a song", ["play"]), ("book a taxi", ["book"]),
                  ("how tall is the moon", ["oos"]))
    return train, valid


def test_rows_labelled_oos_are_out_of_scope_rows_under_the_distance_rule(tmp_path, monkeypatch, capsys, caplog):
    """Trained as an intent, "oos" was a column the decision layer never answers (it is the out-of-scope
    verdict's name under every rule): the model could not say it, and train said nothing."""
    seen = rows_reaching_the_model(monkeypatch)
    data = clinc_style(tmp_path)
    with caplog.at_level(logging.WARNING, logger="intentvcs.core.team_formats"):
        assert train(tmp_path, data=data) == exit_codes.BAD_INPUT
    assert "the model would train now" in capsys.readouterr().err
    assert [list(ex.labels) for ex in seen["train"]] == [["play"], ["book"], []]
    assert [list(ex.labels) for ex in seen["valid"]] == [["play"], ["book"], []]
    assert f"{data[0]}: 1 row(s) labelled 'oos' are read as out-of-scope rows (labels [])" in caplog.text


def test_rows_labelled_oos_are_the_train_rules_class(tmp_path, monkeypatch, capsys):
    """The train rule learns out-of-scope rows as the class "oos": rows that name it are those rows (they
    were refused as "the training rows have none")."""
    seen = rows_reaching_the_model(monkeypatch)
    assert train(tmp_path, "--oos-rule", "train", data=clinc_style(tmp_path)) == exit_codes.BAD_INPUT
    assert "the model would train now" in capsys.readouterr().err
    assert [list(ex.labels) for ex in seen["train"]] == [["play"], ["book"], ["oos"]]


def test_a_row_labelled_oos_beside_an_intent_is_refused(tmp_path, monkeypatch, capsys):
    no_model = rows_reaching_the_model(monkeypatch)
    data = clinc_style(tmp_path, ("play the news", ["play", "oos"]))
    assert train(tmp_path, data=data) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert f"{data[0]}:4: labels ['play', 'oos'] name 'oos', the out-of-scope verdict, beside an intent" in err, err
    assert "labels []" in err and not no_model


def test_evaluate_scores_rows_labelled_oos_as_out_of_scope_rows(tmp_path):
    """As train reads them: scored as an intent, every such row was a miss (or, alone, refused as unknown)."""
    from tests.helpers.bundle import make_tiny_bundle

    bundle = make_tiny_bundle(tmp_path / "model")
    data = jsonl(tmp_path / "test.jsonl", ("hello there", ["oos"]), ("how tall is the moon", []))
    out = tmp_path / "out.json"
    assert main(["evaluate", "--bundle", str(bundle), "--data", data, "--out", str(out)]) == exit_codes.OK
    assert json.loads(out.read_text())["n_oos"] == 2


# ------------------------------------------------------------------ 2: the backbone is an input
def test_an_out_folder_that_holds_the_backbone_is_refused_even_with_force(tmp_path, monkeypatch, capsys):
    no_data_read(monkeypatch)
    models = tmp_path / "models"
    (models / "tiny").mkdir(parents=True)
    (models / "tiny" / "config.json").write_text("{}", encoding="utf-8")
    code = main(["train", "--train", TRAIN, "--valid", VALID, "--backbone", str(models / "tiny"),
                 "--out", str(models), "--force"])
    assert code == exit_codes.BAD_INPUT
    assert f"the output folder {models} holds the input {models / 'tiny'}" in capsys.readouterr().err
    assert (models / "tiny" / "config.json").is_file()


def test_a_checkpoint_is_not_retrained_into_itself_from_its_own_encoder(tmp_path, monkeypatch, capsys):
    """An earlier checkpoint is replaced without --force; its encoder, given as the backbone, was replaced too
    and then recorded as the backbone the new one started from."""
    from intentvcs.core import atomic
    from intentvcs.training.checkpoint import CHECKPOINT_FORMAT, CHECKPOINT_OUTPUT

    no_data_read(monkeypatch)
    encoder = tmp_path / "ckpt" / "encoder"
    encoder.mkdir(parents=True)
    (encoder / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "ckpt" / CHECKPOINT_OUTPUT.marker).write_text(json.dumps({"format": CHECKPOINT_FORMAT.name}))
    atomic.check_replaceable(tmp_path / "ckpt", CHECKPOINT_OUTPUT)  # an earlier checkpoint: no --force needed
    code = main(["train", "--train", TRAIN, "--valid", VALID, "--backbone", str(encoder),
                 "--out", str(tmp_path / "ckpt")])
    assert code == exit_codes.BAD_INPUT
    assert f"the output folder {tmp_path / 'ckpt'} holds the input {encoder}" in capsys.readouterr().err
    assert (encoder / "model.safetensors").read_bytes() == b"weights"


# ------------------------------------------------------------------ 3: --augment-mix
@pytest.mark.parametrize("mix, said", [
    ('{"nature": "x"}', "--augment-mix: the weight of 'nature' must be a finite number, got 'x'"),
    ('{"nature": true}', "--augment-mix: the weight of 'nature' must be a finite number, got True"),
    ('{"nature": NaN}', "--augment-mix: the weight of 'nature' must be a finite number, got nan"),
    ('{"bogus": 1}', "--augment-mix: unknown operator 'bogus'"),
    ('{"nature": -1}', "--augment-mix: negative weight for 'nature'"),
    ('{"nature": 0}', "--augment-mix: mix has no positive weight"),
    ("{}", "--augment-mix: mix has no positive weight"),
])
def test_a_bad_augment_mix_is_refused_before_the_data_is_read(tmp_path, monkeypatch, capsys, mix, said):
    no_data_read(monkeypatch)
    assert train(tmp_path, "--augment", "0.5", "--augment-mix", mix) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert f"intentvcs train: error: {said}" in err, err
    assert "Traceback" not in err


def test_an_augment_mix_is_checked_by_the_registry_with_every_operator_usable():
    with pytest.raises(ValueError, match="augment_mix: unknown operator 'bogus'"):
        TrainConfig(augment_ratio=1.0, augment_mix={"bogus": 1})
    for mix in ({"slot_value_replacement": 1}, {"laug": 1, "typo_keyboard": 0.5}, {"nature": 1, "raddle": 0}):
        assert TrainConfig(augment_ratio=1.0, augment_mix=mix).augment_mix == mix


def test_a_mix_the_rows_cannot_feed_is_refused_before_the_model_loads(tmp_path, monkeypatch, capsys):
    """Only value operators, and training rows without an entity span: no copy could be drawn."""
    from intentvcs.training import pipeline

    monkeypatch.setattr(pipeline, "train_pipeline", lambda **kwargs: pytest.fail("the model was loaded"))
    data = (jsonl(tmp_path / "t.jsonl", ("play some music", ["play"]), ("book a table", ["book"])),
            jsonl(tmp_path / "v.jsonl", ("play a song", ["play"]), ("book a taxi", ["book"])))
    code = train(tmp_path, "--augment", "0.5", "--augment-mix", '{"slot_value_replacement": 1}', data=data)
    assert code == exit_codes.BAD_INPUT
    assert "--augment-mix: mix has no positive weight (slot_value_replacement need entity values)" in \
        capsys.readouterr().err


# ------------------------------------------------------------------ 4, 5: the option named, ranges first
@pytest.mark.parametrize("extra, said", [
    (["--validate-perturbed"], "--validate-perturbed needs --augment > 0"),
    (["--augment-mix", '{"nature": 1}'], "--augment-mix needs --augment > 0"),
    (["--consistency", "1"], "--consistency needs --augment > 0"),
    (["--extend-vocab", "2"], "--extend-vocab needs trained embeddings (--train-embeddings)"),
    (["--boundary-weight", "-1"], "--boundary-weight must be >= 0"),
    (["--chains", "-1"], "--chains must be >= 0"),
    (["--lr", "-1"], "--lr must be > 0"),
])
def test_a_settings_refusal_names_the_options_typed(tmp_path, monkeypatch, capsys, extra, said):
    no_data_read(monkeypatch)
    assert train(tmp_path, *extra) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert f"intentvcs train: error: {said}" in err, err


def test_support_noise_for_a_sigmoid_method_names_the_option(tmp_path, monkeypatch, capsys):
    no_model = rows_reaching_the_model(monkeypatch)
    assert train(tmp_path, "--method", "bce", "--support-noise", "0.003") == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert "intentvcs train: error: --support-noise: support decoding reads a softmax's probabilities" in err, err
    assert not no_model


def test_a_max_length_past_the_backbone_names_the_option(tmp_path, capsys):
    from tests.helpers.tiny import make_tiny_backbone

    backbone = make_tiny_backbone(tmp_path / "backbone")
    assert train(tmp_path, "--max-length", "500", backbone=str(backbone)) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert "intentvcs train: error: --max-length: expected at most 128" in err, err
    assert not (tmp_path / "ckpt").exists()


def test_only_a_setting_is_translated_not_a_path_or_a_quoted_key():
    from intentvcs.cli.main import _named_as_option

    parser = build_parser()
    message = "max_length: expected at most 128 (/tmp/max_length/x, 'max_length', test_max_length0)"
    assert _named_as_option(message, parser, "train") == \
        "--max-length: expected at most 128 (/tmp/max_length/x, 'max_length', test_max_length0)"
    assert _named_as_option("validate_perturbed needs augment_ratio > 0.", parser, "train") == \
        "--validate-perturbed needs --augment > 0."
    assert _named_as_option("spelling off here", parser, "train") == "--no-spelling here"
    assert _named_as_option("the OOS rule train learns", parser, "train") == "the OOS rule train learns"
    assert _named_as_option("epochs must be >= 1", parser, "refit") == "epochs must be >= 1"  # no refit option


def test_a_negative_boundary_weight_is_refused_without_chains_too():
    with pytest.raises(ValueError, match="boundary_weight must be >= 0"):
        TrainConfig(boundary_weight=-1.0)
    with pytest.raises(ValueError, match="chain_ratio must be >= 0"):
        TrainConfig(chain_ratio=-1.0)
    assert TrainConfig().boundary_weight == 0.0  # off without chains, recorded as off


def test_one_in_scope_validation_row_is_refused_before_training_under_the_distance_rule(tmp_path, monkeypatch,
                                                                                        capsys):
    """The distance rule standardises its two terms on the in-scope validation rows: with one, its fit failed
    ("needs at least two validation rows with differing scores") after the whole training."""
    seen = rows_reaching_the_model(monkeypatch)
    data = clinc_style(tmp_path)
    valid = jsonl(tmp_path / "one.jsonl", ("play a song", ["play"]), ("how tall is the moon", ["oos"]))
    assert train(tmp_path, data=(data[0], valid)) == exit_codes.BAD_INPUT
    assert (f"{valid}: one row carries a label of the training rows; the OOS rule distance standardises its two "
            "terms on the validation rows, so it needs at least two") in capsys.readouterr().err
    assert not seen
    assert train(tmp_path, "--oos-rule", "threshold", data=(data[0], valid)) == exit_codes.BAD_INPUT
    assert "the model would train now" in capsys.readouterr().err  # one row is enough for the threshold rule
