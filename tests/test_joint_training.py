"""Joint intent + entity training on the tiny random BERT, through the CLI, then export and serve:
the checkpoint records the entity head, the bundle's graph outputs its tags, parity covers entities."""

import json
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file

from intentvcs.cli.main import main
from intentvcs.core.dataio import read_jsonl, write_jsonl
from intentvcs.core.entities import tag_vocabulary
from intentvcs.training.config import TrainConfig
from intentvcs.training.trainer import Trainer, _Best
from tests.helpers.tiny import default_splits, make_tiny_backbone, train_cli

TRAIN, VALID, TEST = default_splits()


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    return make_tiny_backbone(tmp_path_factory.mktemp("backbone"))


def _train(backbone, out, *extra, train=TRAIN, valid=VALID):
    return train_cli(backbone, out, "--oos-rule", "none", *extra, train=train, valid=valid)


@pytest.fixture(scope="module")
def joint(backbone, tmp_path_factory):
    out = tmp_path_factory.mktemp("joint") / "ckpt"
    assert _train(backbone, out) == 0
    return out


def test_the_checkpoint_records_the_entity_head(joint):
    meta = json.loads((joint / "checkpoint.json").read_text())
    rows = [ex for ex in read_jsonl(TRAIN) if ex.labels]
    types = sorted({s.label for ex in rows for s in ex.spans})
    entities = meta["entities"]
    assert entities["tags"] == tag_vocabulary(types) and entities["types"] == types
    assert entities["weight"] == meta["train_config"]["entity_weight"] == 1.0
    assert entities["rows_with_spans"] == sum(bool(ex.spans) for ex in rows)
    assert entities["spans"] == sum(len(ex.spans) for ex in rows)
    assert 0.95 * entities["spans"] <= entities["spans_aligned"] <= entities["spans"]
    assert load_file(str(joint / "tagger.safetensors"))["weight"].shape[0] == len(entities["tags"])
    assert "slot_f1" in meta["metrics"]["valid"] and "overall_accuracy" in meta["metrics"]["valid"]
    assert all(0.0 <= epoch["valid_slot_f1"] <= 1.0 for epoch in meta["history"])


def test_the_joint_figure_picks_the_kept_epoch(backbone, tmp_path):
    out = tmp_path / "ckpt"
    assert _train(backbone, out, "--epochs", "3", "--patience", "3") == 0
    meta = json.loads((out / "checkpoint.json").read_text())
    overall = [epoch["valid_overall"] for epoch in meta["history"]]
    assert meta["train_config"]["select_by"] == "joint" and len(overall) == 3
    assert overall[meta["best_epoch"] - 1] == max(overall)


# The validation loss rises from epoch 1 while the overall accuracy peaks at epoch 2; a run without an
# entity head records no overall accuracy, and the joint rule then reads the loss.
@pytest.mark.parametrize("rule, figures, kept", [
    ("loss", [(0.2, 0.80), (0.3, 0.85), (0.4, 0.83)], 1),
    ("joint", [(0.2, 0.80), (0.3, 0.85), (0.4, 0.83)], 2),
    ("joint", [(0.3, None), (0.2, None), (0.4, None)], 2),
])
def test_select_by_names_the_figure_that_keeps_an_epoch(rule, figures, kept):
    trainer = Trainer(TrainConfig(select_by=rule, patience=5))
    run, best = SimpleNamespace(valid=[0], model=torch.nn.Linear(1, 1)), _Best()
    for epoch, (loss, overall) in enumerate(figures, start=1):
        record = {"epoch": epoch, "train_loss": 0.5, "valid_loss": loss,
                  **({"valid_overall": overall} if overall else {})}
        assert trainer._keep_best(run, best, record)
    assert best.epoch == kept


def test_a_diverged_run_stops_with_a_clear_error():
    """NaN never improves on anything, so no epoch would be kept (a traceback, or NaN weights, before)."""
    trainer = Trainer(TrainConfig(select_by="joint"))
    run = SimpleNamespace(valid=[0], model=torch.nn.Linear(1, 1))
    with pytest.raises(ValueError, match=r"training diverged at epoch 2 .*lower the learning rate \(--lr\)"):
        for epoch, loss in ((1, 0.4), (2, float("nan"))):
            trainer._keep_best(run, _Best(), {"epoch": epoch, "train_loss": loss, "valid_loss": loss,
                                              "valid_overall": 0.5})


def test_validation_rows_that_cannot_validate_are_refused_before_training(backbone, tmp_path, capsys):
    oos = tmp_path / "oos.jsonl"
    oos.write_text('{"text": "what is the meaning of life", "labels": []}\n')
    assert _train(backbone, tmp_path / "a", valid=str(oos)) == 2
    assert f"{oos}: no row carries a label of the training rows" in capsys.readouterr().err
    assert _train(backbone, tmp_path / "b", valid=TRAIN) == 2
    assert "is the --train file; give held-out rows" in capsys.readouterr().err
    assert _train(backbone, tmp_path / "c", "--max-length", "100000") == 2
    assert "--max-length: expected at most" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["oos.jsonl"]  # no checkpoint, no temporary folder


def test_data_without_spans_trains_exactly_as_an_intent_only_model(backbone, tmp_path):
    plain = tmp_path / "plain.jsonl"
    write_jsonl(plain, [ex.__class__(ex.text, ex.labels, ex.id) for ex in read_jsonl(TRAIN)])
    assert _train(backbone, tmp_path / "no_spans", train=str(plain)) == 0
    assert _train(backbone, tmp_path / "weight0", "--entity-weight", "0") == 0
    heads = []
    for name in ("no_spans", "weight0"):
        meta = json.loads((tmp_path / name / "checkpoint.json").read_text())
        assert meta["entities"] is None and not (tmp_path / name / "tagger.safetensors").exists()
        heads.append(load_file(str(tmp_path / name / "head.safetensors")))
    # Spans change nothing when no entity head is trained: the same weights, bit for bit.
    assert all((heads[0][k] == heads[1][k]).all() for k in heads[0])


def test_chained_rows_join_the_training_data_with_all_their_intents(backbone, tmp_path):
    assert _train(backbone, tmp_path / "chains", "--chains", "0.5", "--epochs", "1") == 0
    meta = json.loads((tmp_path / "chains" / "checkpoint.json").read_text())
    rows = [ex for ex in read_jsonl(TRAIN) if ex.labels]
    assert meta["train_config"]["chain_ratio"] == 0.5
    # Every chain joins rows of the training data, so it carries spans when they do; chains bring more.
    assert meta["entities"]["spans"] > sum(len(ex.spans) for ex in rows)


def test_a_validation_span_type_unknown_to_training_is_refused(backbone, tmp_path, capsys):
    valid = tmp_path / "valid.jsonl"
    valid.write_text('{"text": "fly to paris", "labels": ["book_taxi"], '
                     '"spans": [{"start": 7, "end": 12, "label": "airport"}]}\n')
    assert _train(backbone, tmp_path / "ckpt", valid=str(valid)) == 2
    error = capsys.readouterr().err
    assert f"{valid}:1" in error and "airport" in error
    assert not (tmp_path / "ckpt").exists()


@pytest.fixture(scope="module")
def bundle(joint, tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle") / "bundle"
    assert main(["export", "--checkpoint", str(joint), "--out", str(out), "--quantize"]) == 0
    return out


def test_the_bundle_graph_outputs_tags_and_parity_covers_entities(bundle, joint):
    import onnx

    manifest = json.loads((bundle / "manifest.json").read_text())
    meta = json.loads((joint / "checkpoint.json").read_text())
    assert manifest["entities"] == {"tags": meta["entities"]["tags"], "types": meta["entities"]["types"]}
    graph = onnx.load(str(bundle / "model.onnx"), load_external_data=False).graph
    tag_output = next(o for o in graph.output if o.name == "tag_logits")
    dims = [d.dim_param or d.dim_value for d in tag_output.type.tensor_type.shape.dim]
    assert dims == ["batch_size", "sequence_length", len(meta["entities"]["tags"])]
    parity = manifest["parity"]
    assert parity["passed"] and parity["entity_set_agreement"] == 1.0 and parity["entity_mismatches"] == 0
    agreement = manifest["quantization"]["agreement"]
    assert 0.0 <= agreement["entity_set_agreement"] <= 1.0


def test_served_entities_point_into_the_text_as_sent(bundle):
    from intentvcs.service.engine import Engine

    engine = Engine(bundle)
    texts = [ex.text for ex in read_jsonl(TEST)][:40] + ["wake me up tomorow at 7 in the kitchne"]
    answers = engine.predict(texts)
    found = [e for answer in answers for e in answer["entities"]]
    assert found, "an entity head trained on the default data finds some entities"
    for text, answer in zip(texts, answers):
        for entity in answer["entities"]:
            assert text[entity["start"]:entity["end"]] == entity["value"]
            assert entity["entity"] in engine.entity_types and 0.0 < entity["confidence"] <= 1.0
    # The same entities as PyTorch on the checkpoint, spelling normaliser included.
    assert engine.info["entity_types"] == len(engine.entity_types)


def test_evaluate_reports_slot_figures_through_the_bundle(bundle, tmp_path):
    out = tmp_path / "eval.json"
    assert main(["evaluate", "--bundle", str(bundle), "--data", TEST, "--out", str(out)]) == 0
    figures = json.loads(out.read_text())
    for key in ("slot_precision", "slot_recall", "slot_f1", "entities_exact", "overall_accuracy"):
        assert 0.0 <= figures[key] <= 1.0
    assert figures["overall_accuracy"] <= min(figures["accuracy"], figures["entities_exact"])


def test_a_tagger_that_reads_intents_trains_exports_and_serves_with_parity(backbone, tmp_path):
    from intentvcs.training.model import IntentModel

    out, bundle_dir = tmp_path / "ckpt", tmp_path / "bundle"
    assert _train(backbone, out, "--tags-read-intents") == 0
    meta = json.loads((out / "checkpoint.json").read_text())
    assert meta["train_config"]["tags_read_intents"] is True
    stored = load_file(str(out / "tagger.safetensors"))
    assert stored["intent_weight"].shape == (len(meta["entities"]["tags"]), len(meta["labels"]))
    assert stored["intent_weight"].abs().sum() > 0, "the per-intent prior was trained"
    model = IntentModel.from_checkpoint(out)
    assert model.tagger.reads_intents
    # The prior is the only path from the intent logits to the tags: two intent distributions, two tag scores.
    states = torch.randn(1, 3, model.tagger.in_features)
    first, second = (model.tagger(states, torch.eye(len(meta["labels"]))[[k]] * 20) for k in (0, 1))
    assert not torch.allclose(first, second)
    assert main(["export", "--checkpoint", str(out), "--out", str(bundle_dir), "--quantize"]) == 0
    parity = json.loads((bundle_dir / "manifest.json").read_text())["parity"]
    assert parity["passed"] and parity["entity_set_agreement"] == 1.0


def test_checkpoints_of_plain_taggers_load_as_plain_taggers(joint):
    from intentvcs.training.model import IntentModel

    assert not IntentModel.from_checkpoint(joint).tagger.reads_intents
    assert json.loads((joint / "checkpoint.json").read_text())["train_config"]["tags_read_intents"] is False


def test_mention_replacement_trains_the_tagger_on_swapped_values(backbone, tmp_path, caplog):
    # Before mix_values the mix was refused mid-training: the value operator had no values to draw from.
    caplog.set_level("INFO", logger="intentvcs.training.trainer")
    assert _train(backbone, tmp_path / "mentions", "--epochs", "1", "--augment", "0.5",
                  "--augment-mix", '{"slot_value_replacement": 1}') == 0
    rows = len([ex for ex in read_jsonl(TRAIN) if ex.labels])
    assert f"augmented training data for epoch 1: {rows} -> {rows + round(0.5 * rows)} rows" in caplog.text


def test_the_entity_head_can_learn_at_its_own_rate(backbone, tmp_path):
    """``tagger_learning_rate`` puts the entity head's parameters in a group of their own at that peak rate;
    unset, one group at the learning rate, as before the setting existed. The CLI records it."""
    from intentvcs.training.model import IntentModel

    model = IntentModel.from_backbone(backbone, 3, num_tags=5)
    params = [p for p in model.parameters() if p.requires_grad]
    plain, _ = Trainer(TrainConfig(learning_rate=1e-4))._optimiser(model, params, rows=64)
    assert [group["initial_lr"] for group in plain.param_groups] == [1e-4]
    own, _ = Trainer(TrainConfig(learning_rate=1e-4, tagger_learning_rate=1e-2))._optimiser(model, params, rows=64)
    assert [group["initial_lr"] for group in own.param_groups] == [1e-4, 1e-2]
    assert {id(p) for p in own.param_groups[1]["params"]} == {id(p) for p in model.tagger.parameters()}
    assert sum(len(group["params"]) for group in own.param_groups) == len(params)

    out = tmp_path / "ckpt"
    assert _train(backbone, out, "--epochs", "1", "--tagger-lr", "0.01") == 0
    assert json.loads((out / "checkpoint.json").read_text())["train_config"]["tagger_learning_rate"] == 0.01


def test_spans_the_word_tags_cannot_mark_are_reported(backbone, tmp_path, caplog):
    """A span edge inside a word ('5' of '5min') cannot be learnt; the run says how many were lost."""
    train = tmp_path / "train.jsonl"
    train.write_text(open(TRAIN, encoding="utf-8").read() + json.dumps(
        {"text": "set a timer for 5min", "labels": ["set_timer"],
         "spans": [{"start": 16, "end": 17, "label": "duration"}]}) + "\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="intentvcs.training.pipeline"):
        assert _train(backbone, tmp_path / "ckpt", "--epochs", "1", train=str(train)) == 0
    meta = json.loads((tmp_path / "ckpt" / "checkpoint.json").read_text())
    lost = meta["entities"]["spans"] - meta["entities"]["spans_aligned"]
    assert lost >= 1 and f"{lost} of the {meta['entities']['spans']} training spans start or end inside a word" \
        in caplog.text


def test_the_entity_floor_is_fitted_refitted_exported_and_served(joint, tmp_path):
    """Training fits the floor on the validation spans; a refit can set it; the bundle serves no entity under it
    and says which floor it applies."""
    import shutil

    from intentvcs.service.engine import Engine

    report = json.loads((joint / "checkpoint.json").read_text())["decision_report"]["entity_floor"]
    assert report["fitted"] and f"{report['floor']:.1f}" in report["valid"]
    texts = [ex.text for ex in read_jsonl(TEST)][:60]
    served = {}
    for floor in ("0", "0.6"):
        checkpoint = tmp_path / f"ckpt-{floor}"
        shutil.copytree(joint, checkpoint)
        assert main(["refit", "--checkpoint", str(checkpoint), "--train", TRAIN, "--valid", VALID,
                     "--entity-floor", floor]) == 0
        assert main(["export", "--checkpoint", str(checkpoint), "--out", str(tmp_path / f"bundle-{floor}")]) == 0
        engine = Engine(tmp_path / f"bundle-{floor}")
        assert engine.info["entity_floor"] == float(floor)
        served[floor] = [e for answer in engine.predict(texts) for e in answer["entities"]]
    assert all(e["confidence"] >= 0.6 for e in served["0.6"])
    assert any(e["confidence"] < 0.6 for e in served["0"]), "the tiny model decodes some unsure entities"
    assert len(served["0.6"]) == sum(e["confidence"] >= 0.6 for e in served["0"])
