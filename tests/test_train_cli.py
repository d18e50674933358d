"""End to end through the CLI: train a tiny random BERT, evaluate, plot."""

import json

import pytest

from intentvcs.cli.main import main
from intentvcs.core.dataio import read_jsonl
from intentvcs.core.spelling import vocabulary
from intentvcs.service.engine import Engine
from intentvcs.training.config import DecisionConfig
from tests.helpers.tiny import make_tiny_backbone

from intentvcs.training import DEFAULT_DATA


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    return make_tiny_backbone(tmp_path_factory.mktemp("backbone"))


@pytest.mark.parametrize("method,oos_rule,spelling", [
    ("pu", "threshold", True), ("ls_focal", "none", False), ("pu", "distance", True)])
def test_train_then_evaluate_through_cli(tmp_path, backbone, method, oos_rule, spelling, capsys):
    ckpt = tmp_path / "ckpt"
    code = main([
        "train", "--train", str(DEFAULT_DATA / "train.jsonl"), "--valid", str(DEFAULT_DATA / "valid.jsonl"),
        "--test", str(DEFAULT_DATA / "test.jsonl"), "--out", str(ckpt), "--backbone", str(backbone),
        "--method", method, "--epochs", "1", "--batch-size", "64", "--oos-rule", oos_rule,
        "--result", str(tmp_path / "result.json"), "--spelling" if spelling else "--no-spelling",
    ])
    assert code == 0
    assert {p.name for p in ckpt.iterdir()} == {"encoder", "head.safetensors", "tagger.safetensors", "checkpoint.json",
                                                "references.jsonl", *(["spelling.json"] if spelling else [])}
    # The audit's sample of the training rows: every in-scope row of the small default set (under the cap).
    train = read_jsonl(DEFAULT_DATA / "train.jsonl")
    assert read_jsonl(ckpt / "references.jsonl") == [ex for ex in train if ex.labels]
    meta = json.loads((ckpt / "checkpoint.json").read_text())
    assert meta["method"] == method and len(meta["labels"]) == 19
    assert meta["backbone"] == str(backbone)  # as given
    words = vocabulary(ex.text for ex in read_jsonl(DEFAULT_DATA / "train.jsonl"))
    assert meta["spelling"] == ({"words": len(words)} if spelling else None)
    assert meta["decision"]["oos"]["rule"] == oos_rule
    result = json.loads((tmp_path / "result.json").read_text())
    assert 0.0 <= result["metrics"]["test"]["f1"] <= 1.0

    out = tmp_path / "eval.json"
    assert main(["evaluate", "--checkpoint", str(ckpt), "--data", str(DEFAULT_DATA / "test.jsonl"),
                 "--out", str(out), "--heatmap", str(tmp_path / "cooc.png")]) == 0
    figures = json.loads(out.read_text())
    # The checkpoint's own evaluation and the evaluate command agree.
    assert figures["f1"] == pytest.approx(result["metrics"]["test"]["f1"])
    assert len(figures["cooccurrence"]["counts"]) == 19
    assert figures["n_oos"] == 40 and "auroc" in figures
    assert (tmp_path / "cooc.png").read_bytes()[:4] == b"\x89PNG"


def test_bad_training_row_names_file_and_line(tmp_path, backbone, capsys):
    bad = tmp_path / "train.jsonl"
    bad.write_text('{"text": "hello", "labels": ["greet"]}\n{"text": "", "labels": ["greet"]}\n')
    valid = tmp_path / "valid.jsonl"
    valid.write_text('{"text": "hi there", "labels": ["greet"]}\n')
    code = main(["train", "--train", str(bad), "--valid", str(valid), "--out", str(tmp_path / "ckpt"),
                 "--backbone", str(backbone)])
    assert code == 2
    assert f"{bad}:2: 'text' is empty" in capsys.readouterr().err
    assert not (tmp_path / "ckpt").exists()


def test_refit_changes_the_decision_and_nothing_else(tmp_path, backbone, capsys):
    ckpt = tmp_path / "ckpt"
    data = {split: str(DEFAULT_DATA / f"{split}.jsonl") for split in ("train", "valid", "test")}
    assert main(["train", "--train", data["train"], "--valid", data["valid"], "--out", str(ckpt),
                 "--backbone", str(backbone), "--epochs", "1", "--batch-size", "64"]) == 0
    before = json.loads((ckpt / "checkpoint.json").read_text())
    weights = {p: p.read_bytes() for p in [ckpt / "head.safetensors", *(ckpt / "encoder").iterdir()]}
    assert before["decision"]["oos"]["rule"] == "distance" and "bank" in before["decision"]["oos"]
    capsys.readouterr()

    # The part cut, stricter than the whole text's, is fitted with it and reported.
    assert before["decision"]["oos"]["part_threshold"] < before["decision"]["oos"]["threshold"]
    assert before["decision_report"]["oos"]["part_threshold"] == before["decision"]["oos"]["part_threshold"]
    assert main(["refit", "--checkpoint", str(ckpt), "--train", data["train"], "--valid", data["valid"],
                 "--test", data["test"], "--oos-retention", "0.8", "--oos-part-retention", "0.7"]) == 0
    printed = json.loads(capsys.readouterr().out)
    after = json.loads((ckpt / "checkpoint.json").read_text())
    # A lower retention rejects more: a lower cut on the same score.
    assert after["decision"]["oos"]["threshold"] < before["decision"]["oos"]["threshold"]
    assert after["decision"]["oos"]["part_threshold"] < before["decision"]["oos"]["part_threshold"]
    assert after["metrics"] == printed and "test" in printed
    # The refit records every setting it ran with.
    recorded = {k: v for k, v in after["refit"].items() if k not in ("at", "valid_fingerprint")}
    assert DecisionConfig.from_dict(recorded) == DecisionConfig(oos_retention=0.8, oos_part_retention=0.7)
    assert {k: v for k, v in after.items() if k not in ("decision", "decision_report", "metrics", "refit")} == \
        {k: v for k, v in before.items() if k not in ("decision", "decision_report", "metrics")}
    assert {p: p.read_bytes() for p in weights} == weights

    assert main(["refit", "--checkpoint", str(ckpt), "--train", data["train"], "--valid", data["valid"],
                 "--oos-rule", "threshold"]) == 0
    assert json.loads((ckpt / "checkpoint.json").read_text())["decision"]["oos"]["rule"] == "threshold"
    assert (ckpt / "spelling.json").is_file()

    assert main(["refit", "--checkpoint", str(ckpt), "--train", data["train"], "--valid", data["valid"],
                 "--no-spelling"]) == 0
    assert not (ckpt / "spelling.json").exists()
    assert json.loads((ckpt / "checkpoint.json").read_text())["spelling"] is None

    # Support decoding: stored in the decision and named by the engine serving its bundle.
    assert main(["refit", "--checkpoint", str(ckpt), "--train", data["train"], "--valid", data["valid"],
                 "--no-spelling", "--support-noise", "0.003"]) == 0
    assert json.loads((ckpt / "checkpoint.json").read_text())["decision"]["support_noise"] == 0.003
    assert main(["export", "--checkpoint", str(ckpt), "--out", str(tmp_path / "bundle"), "--no-quantize"]) == 0
    engine = Engine(tmp_path / "bundle", provider="cpu")
    assert engine.info["support_noise"] == 0.003 and engine.decision.support_noise == 0.003
    assert engine.info["support_intents"] is None  # the tiny data's labels are no one intent's names


def test_refit_reads_unknown_validation_labels_as_train_does_and_refuses_them_in_training_rows(
        tmp_path, backbone, capsys, caplog):
    ckpt = tmp_path / "ckpt"
    assert main(["train", "--train", str(DEFAULT_DATA / "train.jsonl"), "--valid", str(DEFAULT_DATA / "valid.jsonl"),
                 "--out", str(ckpt), "--backbone", str(backbone), "--epochs", "1", "--batch-size", "64"]) == 0
    unknown = json.dumps({"text": "book a taxi", "labels": ["taxi_book"]}) + "\n"
    valid = tmp_path / "valid.jsonl"
    valid.write_text((DEFAULT_DATA / "valid.jsonl").read_text() + unknown)
    train = tmp_path / "train.jsonl"
    train.write_text((DEFAULT_DATA / "train.jsonl").read_text() + unknown)
    before = (ckpt / "checkpoint.json").read_bytes()
    capsys.readouterr()
    # Training rows with a label the checkpoint never learnt are another data set: refused, nothing written.
    assert main(["refit", "--checkpoint", str(ckpt), "--train", str(train), "--valid", str(valid)]) == 2
    assert "taxi_book" in capsys.readouterr().err
    assert (ckpt / "checkpoint.json").read_bytes() == before
    # A validation label it cannot answer is read as `train` reads it, and said aloud.
    with caplog.at_level("WARNING", logger="intentvcs.training.pipeline"):
        assert main(["refit", "--checkpoint", str(ckpt), "--train", str(DEFAULT_DATA / "train.jsonl"),
                     "--valid", str(valid)]) == 0
    assert any("valid: 1 label(s) the model was not trained on" in r.message and "taxi_book (1)" in r.message
               for r in caplog.records)
    assert (ckpt / "checkpoint.json").read_bytes() != before


def test_robust_training_with_fresh_copies_and_consistency(tmp_path, backbone, caplog):
    import logging

    caplog.set_level(logging.INFO, logger="intentvcs.training.trainer")
    code = main([
        "train", "--train", str(DEFAULT_DATA / "train.jsonl"), "--valid", str(DEFAULT_DATA / "valid.jsonl"),
        "--out", str(tmp_path / "ckpt"), "--backbone", str(backbone), "--epochs", "2", "--patience", "5",
        "--batch-size", "64", "--oos-rule", "none", "--augment", "1", "--augment-resample", "--consistency", "1",
        "--train-embeddings", "--validate-perturbed",
    ])
    assert code == 0
    meta = json.loads((tmp_path / "ckpt" / "checkpoint.json").read_text())
    assert meta["train_config"]["consistency_weight"] == 1.0 and meta["train_config"]["augment_resample"]
    assert meta["train_config"]["freeze_embeddings"] is False and meta["train_config"]["validate_perturbed"]
    assert len(meta["history"]) == 2
    drawn = [r.getMessage() for r in caplog.records if r.getMessage().startswith("augmented ")]
    # The validation copies are drawn once, before training; the training copies every epoch.
    valid_rows = sum(1 for ex in read_jsonl(DEFAULT_DATA / "valid.jsonl") if ex.labels)
    assert [m.split(":")[0] for m in drawn] == ["augmented training data for epoch 1", "augmented validation",
                                               "augmented training data for epoch 2"]
    assert drawn[1].endswith(f"{valid_rows} -> {2 * valid_rows} rows")


def test_consistency_without_augmentation_is_a_clear_error(tmp_path, backbone, capsys):
    code = main(["train", "--train", str(DEFAULT_DATA / "train.jsonl"), "--valid", str(DEFAULT_DATA / "valid.jsonl"),
                 "--out", str(tmp_path / "ckpt"), "--backbone", str(backbone), "--consistency", "1"])
    assert code == 2
    assert "--consistency needs --augment > 0" in capsys.readouterr().err


def test_a_max_length_past_the_backbones_positions_is_refused_before_training(tmp_path, backbone, capsys):
    out = tmp_path / "ckpt"
    code = main(["train", "--train", str(DEFAULT_DATA / "train.jsonl"), "--valid", str(DEFAULT_DATA / "valid.jsonl"),
                 "--out", str(out), "--backbone", str(backbone), "--max-length", "200"])
    assert code == 2
    assert "--max-length: expected at most 128, the encoder's position limit, got 200" in capsys.readouterr().err
    assert not out.exists()


def test_support_decoding_for_a_sigmoid_method_is_refused_before_training(tmp_path, backbone, capsys):
    out = tmp_path / "ckpt"
    code = main(["train", "--train", str(DEFAULT_DATA / "train.jsonl"), "--valid", str(DEFAULT_DATA / "valid.jsonl"),
                 "--out", str(out), "--backbone", str(backbone), "--method", "bce", "--support-noise", "0.003"])
    assert code == 2
    assert "support decoding reads a softmax's probabilities" in capsys.readouterr().err
    assert not out.exists()


def test_relations_that_miss_a_training_label_are_refused_before_training(tmp_path, backbone, capsys, monkeypatch):
    from intentvcs.core.relations import LabelRelations
    from intentvcs.training import trainer

    monkeypatch.setattr(trainer.Trainer, "fit", lambda *args: pytest.fail("the model was trained"))
    train = DEFAULT_DATA / "train.jsonl"
    labels = sorted({label for ex in read_jsonl(train) for label in ex.labels})
    relations = tmp_path / "relations.json"
    LabelRelations(labels=labels[1:]).save(relations)
    code = main(["train", "--train", str(train), "--valid", str(DEFAULT_DATA / "valid.jsonl"),
                 "--out", str(tmp_path / "ckpt"), "--backbone", str(backbone), "--relations", str(relations)])
    assert code == 2
    assert f"{relations}: label(s) ['{labels[0]}'] of the training rows are unknown to the relations" in \
        capsys.readouterr().err
    assert not (tmp_path / "ckpt").exists()


def test_data_a_team_would_not_expect_to_train_as_it_does_is_warned_about(caplog):
    """An 'out_of_scope' intent (Rasa's convention, here an intent like any other), spans never judged (a
    CSV validation file carries none), intents without validation rows and a small validation set each get
    one warning before training; clean data gets none."""
    import logging

    from intentvcs.cli.commands.train import FEW_VALID_ROWS, warn_about_data
    from intentvcs.core.dataio import Example, Span

    train = [Example("order a latte", ("order",), spans=(Span(8, 13, "drink"),)),
             Example("tell me a joke", ("out_of_scope",)), Example("where is the shop", ("find_store",)),
             Example("sing me a song", ())]
    valid = [Example("a latte please", ("order",))]
    with caplog.at_level(logging.WARNING, logger="intentvcs.cli.commands.train"):
        warn_about_data(train, valid, "train.yml", "valid.csv", "distance")
    text = caplog.text
    assert "train.yml: 1 row(s) carry no label: the OOS rule distance does not learn from them" in text
    assert "'out_of_scope' is trained as an intent of its own" in text
    assert "valid.csv: no row carries an entity span" in text
    assert "2 intent(s) have no validation row (find_store, out_of_scope)" in text
    assert "1 in-scope row(s) fit the out-of-scope cut" in text and str(FEW_VALID_ROWS) in text
    caplog.clear()
    clean_train = [Example(f"order a latte {i}", ("order",)) for i in range(3)]
    clean_valid = [Example(f"a latte please {i}", ("order",)) for i in range(FEW_VALID_ROWS)]
    with caplog.at_level(logging.WARNING, logger="intentvcs.cli.commands.train"):
        warn_about_data(clean_train, clean_valid, "train.jsonl", "valid.jsonl", "distance")
        warn_about_data(clean_train + [Example("sing me a song", ())], clean_valid, "train.jsonl", "valid.jsonl",
                        "train")  # the rule that learns from them
    assert caplog.text == ""


def test_an_entity_head_that_found_nothing_is_warned_about(tmp_path, monkeypatch, caplog):
    """On a few hundred rows the entity head at the encoder's rate learns nothing in a few epochs (slot F1 0
    with no word said); the command now says what to change."""
    import intentvcs.training.pipeline as pipeline

    def trained(**kwargs):
        return {"checkpoint": str(kwargs["out"]), "method": "pu", "best_epoch": 1, "train_seconds": 0.1,
                "metrics": {"valid": {"slot_f1": 0.0}}}

    monkeypatch.setattr(pipeline, "train_pipeline", trained)
    assert main(["train", "--train", str(DEFAULT_DATA / "train.jsonl"), "--valid", str(DEFAULT_DATA / "valid.jsonl"),
                 "--out", str(tmp_path / "ckpt")]) == 0
    assert "the entity head found no entity" in caplog.text


def test_train_evaluate_refit_and_export_read_rasa_yaml_and_csv(tmp_path, backbone):
    """The formats the audit reads are the training commands' too (they took JSONL only: a Rasa file failed as
    'invalid JSON'); a CSV carries no spans, so the YAML's train the entity head."""
    import csv

    rows = read_jsonl(DEFAULT_DATA / "train.jsonl")
    valid_rows = read_jsonl(DEFAULT_DATA / "valid.jsonl")
    by_intent: dict[str, list] = {}
    for ex in rows:
        if ex.labels:
            by_intent.setdefault(ex.labels[0], []).append(ex)

    def marked(ex):  # a Rasa example line, its spans as [text](type)
        text, cursor, out = ex.text, 0, []
        for span in sorted(ex.spans, key=lambda s: s.start):
            out += [text[cursor:span.start], f"[{text[span.start:span.end]}]({span.label})"]
            cursor = span.end
        return "".join(out + [text[cursor:]])

    nlu = tmp_path / "nlu.yml"
    nlu.write_text("nlu:\n" + "".join(
        f"- intent: {intent}\n  examples: |\n" + "".join(f"    - {marked(ex)}\n" for ex in examples)
        for intent, examples in by_intent.items()), encoding="utf-8")
    valid = tmp_path / "valid.csv"
    with valid.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "intent"])
        writer.writerows([ex.text, ex.labels[0] if ex.labels else ""] for ex in valid_rows)
    ckpt = tmp_path / "ckpt"
    assert main(["train", "--train", str(nlu), "--valid", str(valid), "--out", str(ckpt), "--backbone",
                 str(backbone), "--epochs", "1", "--batch-size", "64"]) == 0
    meta = json.loads((ckpt / "checkpoint.json").read_text())
    assert len(meta["labels"]) == 19 and meta["entities"]["tags"]  # the YAML's spans trained the entity head
    assert main(["evaluate", "--checkpoint", str(ckpt), "--data", str(valid), "--out", str(tmp_path / "e.json")]) == 0
    assert json.loads((tmp_path / "e.json").read_text())["n"] == len(valid_rows)
    assert main(["refit", "--checkpoint", str(ckpt), "--train", str(nlu), "--valid", str(valid)]) == 0
    assert main(["export", "--checkpoint", str(ckpt), "--out", str(tmp_path / "bundle"), "--no-quantize",
                 "--parity-data", str(valid)]) == 0
