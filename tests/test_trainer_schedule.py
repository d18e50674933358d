"""The trainer's learning-rate schedule covers exactly the steps it runs (grouped batches of a consistency
term included), and ``validate_perturbed`` judges the joint figure on the perturbed copies too."""

import math

import numpy as np
import pytest

import intentvcs.core.perturb as perturb
import intentvcs.training.predict as predict
from intentvcs.core.dataio import read_jsonl
from intentvcs.core.outputs import GraphOutputs, tuple_array
from intentvcs.training import DEFAULT_DATA
from intentvcs.training.config import TrainConfig
from intentvcs.training.trainer import Trainer
from tests.helpers.tiny import make_tiny_backbone

TRAIN = [ex for ex in read_jsonl(DEFAULT_DATA / "train.jsonl") if ex.labels]
VALID = [ex for ex in read_jsonl(DEFAULT_DATA / "valid.jsonl") if ex.labels]


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    return make_tiny_backbone(tmp_path_factory.mktemp("backbone"))


def _config(backbone, **settings) -> TrainConfig:
    return TrainConfig(**{"backbone": str(backbone), "epochs": 2, "batch_size": 32, "device": "cpu",
                          "threads": 1, "patience": 5, **settings})


def _learning_rates(monkeypatch) -> dict:
    """Record the learning rate of every optimiser step, and the scheduler, of the next ``fit``."""
    seen: dict = {"lrs": []}
    optimiser = Trainer._optimiser

    def recording(self, *args, **kwargs):
        opt, scheduler = optimiser(self, *args, **kwargs)
        opt.register_step_pre_hook(lambda o, a, k: seen["lrs"].append(o.param_groups[0]["lr"]))
        seen["scheduler"] = scheduler
        return opt, scheduler

    monkeypatch.setattr(Trainer, "_optimiser", recording)
    return seen


# 200 rows with two copies each, in batches of 32: grouped batches (a row with its copies, whole) hold
# 30 rows, so an epoch runs 20 batches where ceil(600 / 32) = 19 were planned, and the last steps ran at 0.
@pytest.mark.parametrize("settings", [
    {"augment_ratio": 2.0, "consistency_weight": 0.5},
    {"augment_ratio": 2.0, "consistency_weight": 0.5, "augment_resample": False},
    {"augment_ratio": 2.0},
    {},
], ids=["consistency", "consistency-no-resample", "augmented", "plain"])
def test_the_schedule_ends_exactly_at_the_last_step(backbone, monkeypatch, settings):
    seen = _learning_rates(monkeypatch)
    config = _config(backbone, select_by="loss", warmup_ratio=0.0, **settings)
    result = Trainer(config).fit(TRAIN[:200], VALID[:40])
    assert len(result.history) == config.epochs  # no early stop: every planned step ran
    rows = 200 * (1 + config.augment_ratio)
    if config.consistency_weight:
        assert len(seen["lrs"]) > math.ceil(rows / config.batch_size) * config.epochs  # what was planned before
    else:
        assert len(seen["lrs"]) == math.ceil(rows / config.batch_size) * config.epochs
    # Every step learnt, and the linear decay reached 0 right after the last: the schedule is as long as the run.
    assert min(seen["lrs"]) > 0.0
    assert seen["lrs"][0] == pytest.approx(config.learning_rate)
    assert seen["scheduler"].get_last_lr()[0] == 0.0


def test_warm_up_then_decay_over_the_grouped_steps(backbone, monkeypatch):
    seen = _learning_rates(monkeypatch)
    Trainer(_config(backbone, select_by="loss", augment_ratio=2.0, consistency_weight=0.5)).fit(TRAIN[:200],
                                                                                              VALID[:40])
    lrs = seen["lrs"]
    peak = lrs.index(max(lrs))
    assert 0 < peak < len(lrs) // 5 and all(a > b > 0.0 for a, b in zip(lrs[peak:], lrs[peak + 1:]))
    assert seen["scheduler"].get_last_lr()[0] == 0.0


def _scripted_validation(monkeypatch) -> dict:
    """Replace the entity head's validation reading by a script: epoch 1 reads every validation row right
    and every perturbed copy wrong, epoch 2 every copy right and all but 5 validation rows. Records the
    validation copies drawn and the texts each epoch was judged on."""
    seen: dict = {"texts": [], "copies": []}
    draw = perturb.perturbed_copies
    labels = sorted({label for ex in TRAIN[:100] for label in ex.labels})

    def capture(rows, ratio, mix=None, seed=0, values=None):
        copies = draw(rows, ratio, mix, seed, values)
        if str(seed).endswith(":valid"):
            seen["copies"] = [copy for _, copy in copies]
        return copies

    def scripted(model, tokenizer, texts, max_length, tags=(), **kwargs):
        seen["texts"].append(list(texts))
        examples = (seen["valid"] + seen["copies"])[:len(texts)]
        epoch = len(seen["texts"])
        logits = np.zeros((len(texts), len(labels)), dtype=np.float32)
        entities = []
        for i, ex in enumerate(examples):
            ok = i >= 5 if epoch == 2 else i < len(seen["valid"])
            gold = labels.index(ex.labels[0])
            logits[i, gold if ok else (gold + 1) % len(labels)] = 1.0
            entities.append(tuple(ex.spans) if ok else ())
        pooled = np.zeros((len(texts), 4), dtype=np.float32)
        return GraphOutputs(logits, pooled, pooled, tuple_array(entities))

    monkeypatch.setattr(perturb, "perturbed_copies", capture)
    monkeypatch.setattr(predict, "infer", scripted)
    return seen


@pytest.mark.parametrize("perturbed", [True, False])
def test_validate_perturbed_judges_the_joint_figure_on_the_copies_too(backbone, monkeypatch, perturbed):
    seen = _scripted_validation(monkeypatch)
    valid = seen["valid"] = VALID[:60]
    config = _config(backbone, augment_ratio=1.0, validate_perturbed=perturbed)
    assert config.select_by == "joint"
    result = Trainer(config).fit(TRAIN[:100], valid)
    history = result.history
    clean = [ex.text for ex in valid]
    assert len(history) == 2
    if not perturbed:
        # As before the fix: the validation rows alone, the clean figure, the clean epoch kept.
        assert not seen["copies"] and seen["texts"] == [clean, clean]
        assert set(history[0]) == {"epoch", "train_loss", "valid_loss", "seconds", "valid_slot_f1", "valid_overall"}
        assert [h["valid_overall"] for h in history] == [1.0, pytest.approx(55 / 60)]
        assert result.best_epoch == 1
        return
    copies = seen["copies"]
    assert len(copies) == len(valid)
    # Judged on the validation rows and their copies, as the loss is.
    assert seen["texts"] == [clean + [c.text for c in copies]] * 2
    # The copies are perturbed and carry their spans, re-mapped onto their own text.
    assert all(c.meta.get("augmented_from") is not None and c.text not in clean for c in copies)
    assert all(0 <= s.start < s.end <= len(c.text) and c.text[s.start:s.end].strip() for c in copies for s in c.spans)
    assert sum(len(c.spans) for c in copies) > 0
    n = len(valid) + len(copies)
    assert [h["valid_overall"] for h in history] == [pytest.approx(60 / n), pytest.approx((n - 5) / n)]
    assert [h["valid_overall_clean"] for h in history] == [1.0, pytest.approx(55 / 60)]
    assert result.best_epoch == 2  # robust beats clean-only, as the option's help says
