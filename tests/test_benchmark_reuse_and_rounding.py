"""Benchmark scripts, second review: reuse that must not pick up another model, and figures that must not
round a difference away."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmarks import export_bench, mix_bench, oos_bench, render_results, vcs_bench
from benchmarks.robustness_bench import seed_means


def test_mix_exports_again_a_checkpoint_retrained_after_its_bundle(tmp_path, monkeypatch):
    checkpoint = tmp_path / "snips" / "seed0" / "checkpoint"
    checkpoint.mkdir(parents=True)
    (checkpoint / "checkpoint.json").write_text("{}")
    bundle = checkpoint.parent / "bundle"
    bundle.mkdir()
    (bundle / "manifest.json").write_text("{}")
    os.utime(bundle / "manifest.json", (1_000_000, 1_000_000))  # exported before the checkpoint was retrained
    exported = []
    monkeypatch.setattr("intentvcs.export.exporter.export_bundle", lambda source, out, **_: exported.append(out))
    assert mix_bench.bundle_of(checkpoint) == bundle
    assert exported == [bundle]
    exported.clear()
    os.utime(bundle / "manifest.json")  # now newer than the checkpoint: kept
    os.utime(checkpoint / "checkpoint.json", (1_000_000, 1_000_000))
    mix_bench.bundle_of(checkpoint)
    assert exported == []


def _parity(agreement: float) -> dict:
    return {"component": "parity", "utterances": 2500, "max_abs_logit_diff": 3.8e-06, "atol": 1e-4,
            "label_set_agreement": agreement, "oos_agreement": agreement}


@pytest.mark.parametrize("agreement, shown", [(1.0, "100.0%"), (2499 / 2500, "99.9%"), (0.857, "85.7%")])
def test_a_label_set_mismatch_is_not_rounded_to_identical(monkeypatch, agreement, shown):
    monkeypatch.setattr(render_results, "load", lambda name: {"records": [_parity(agreement)]})
    [(figure, measured, _)] = render_results.export_rows()
    assert "label sets identical" in figure and measured.endswith(f"; {shown}")
    text = export_bench.render([_parity(agreement)])
    assert f"label sets identical {shown}, OOS verdicts identical {shown}." in text


def _clean(seed: int, **recipe) -> dict:
    return {"dataset": "snips", "model": "augmented", "set": "clean", "seed": seed, "family": None, "n": 700,
            "clean_acc": 97.0 + seed, "perturbed_acc": None, "drop": None, "epochs": 3, **recipe}


def test_robustness_does_not_average_a_smoke_run_seed_with_full_runs():
    with pytest.raises(ValueError, match="different recipes"):
        seed_means([_clean(0), _clean(1, limit_train=300, limit_test=100)])
    with pytest.raises(ValueError, match="different recipes"):
        seed_means([_clean(0), _clean(1, backbone="/models/other")])
    # Records written before these were recorded were full runs on the default backbone.
    [mean] = seed_means([_clean(0), _clean(1, backbone=None, limit_train=None, limit_test=None)])
    assert mean["seeds"] == [0, 1]


def _write_rows(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _vcs_data(folder: Path, extra_train: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"text": "play some jazz", "labels": ["PlayMusic"]}, {"text": "will it rain", "labels": ["GetWeather"]}]
    _write_rows(folder / "train.jsonl", rows + ([{"text": "rate this book", "labels": ["RateBook"]}]
                                                if extra_train else []))
    _write_rows(folder / "valid.jsonl", rows)
    _write_rows(folder / "test.jsonl", rows)
    return folder


def _finished_run(out: Path, config, data_fingerprint: str) -> None:
    from tests.helpers.bundle import make_tiny_checkpoint

    make_tiny_checkpoint(out)
    meta = json.loads((out / "checkpoint.json").read_text())
    meta.update(train_config=config.to_dict(), data_fingerprint=data_fingerprint,
                history=[{"seconds": 1.0}], best_epoch=1)
    (out / "checkpoint.json").write_text(json.dumps(meta))


def test_vcs_reuse_only_does_not_score_a_run_trained_on_other_rows(tmp_path, monkeypatch):
    from intentvcs.core.dataio import fingerprint, read_jsonl
    from intentvcs.training.config import TrainConfig

    recipe = {"epochs": 3, "freeze_embeddings": True, "select_by": "loss"}
    old = _vcs_data(tmp_path / "old")
    out = tmp_path / "ckpt" / "pu-s0"
    _finished_run(out, TrainConfig(method="pu", seed=0, **recipe),
                  fingerprint(read_jsonl(old / "train.jsonl"), read_jsonl(old / "valid.jsonl")))
    monkeypatch.setattr("intentvcs.export.exporter.export_bundle", lambda *a, **k: None)
    monkeypatch.setattr(vcs_bench, "score_bundle", lambda *a, **k: {"scored": True})
    # The same rows: reused.
    assert vcs_bench.run_one(old, "pu", 0, recipe, out, reuse_only=True)["scored"]
    # The data folder built again, with other rows: the run is not the one this data would train.
    rebuilt = _vcs_data(tmp_path / "rebuilt", extra_train=True)
    assert vcs_bench.run_one(rebuilt, "pu", 0, recipe, out, reuse_only=True) is None


class _Trained(Exception):
    pass


class _Reused(Exception):
    pass


def test_oos_bench_does_not_reuse_a_model_of_another_recipe(tmp_path, monkeypatch):
    from intentvcs.core.dataio import Example, fingerprint
    from intentvcs.training.config import TrainConfig

    rows = {"train": [Example("play jazz", ("PlayMusic",)), Example("rain?", ("GetWeather",))],
            "valid": [Example("play rock", ("PlayMusic",)), Example("snow?", ("GetWeather",)), Example("hi", ())],
            "test": [Example("play pop", ("PlayMusic",))]}
    monkeypatch.setattr("intentvcs.training.loaders.clinc150.load_split", lambda path, split: rows[split])

    class Trainer:
        def __init__(self, config):
            pass

        def fit(self, *_):
            raise _Trained

    monkeypatch.setattr("intentvcs.training.trainer.Trainer", Trainer)
    monkeypatch.setattr(oos_bench, "load_trained", lambda path: (_ for _ in ()).throw(_Reused()))
    data_id = fingerprint(oos_bench.in_scope(rows["train"]), oos_bench.in_scope(rows["valid"])).split(":")[-1][:12]
    saved = tmp_path / f"{data_id}-e4-s0"
    _finished_run(saved, TrainConfig(method="pu", epochs=4, seed=0, learning_rate=1e-3), "sha256:" + "0" * 64)
    with pytest.raises(_Trained):  # another learning rate: the model of this recipe is trained
        oos_bench.run_variant("full", 4, ["distance"], False, 0, ckpt_dir=str(tmp_path))
    _finished_run(saved, TrainConfig(method="pu", epochs=4, seed=0, threads=7), "sha256:" + "0" * 64)
    with pytest.raises(_Reused):  # the same recipe (threads aside): reused
        oos_bench.run_variant("full", 4, ["distance"], False, 0, ckpt_dir=str(tmp_path))


@pytest.mark.parametrize("job_ends_in_window", [True, False])
def test_audit_scale_says_when_the_job_ended_inside_the_loaded_window(monkeypatch, job_ends_in_window):
    import contextlib
    import itertools

    import httpx

    from benchmarks import audit_scale

    windows = []

    async def load(url, clients, seconds):
        windows.append(seconds)
        return {"p50_ms": 10.0, "p99_ms": 20.0 if len(windows) < 3 else 25.0, "errors": 0}

    class Answer:
        def __init__(self, body):
            self.body = body

        def json(self):
            return self.body

    # The job's status once the loaded window is over: finished already, or still running (then finished).
    statuses = itertools.chain([] if job_ends_in_window else ["running"], itertools.repeat("completed"))
    monkeypatch.setattr(audit_scale, "load", load)
    monkeypatch.setattr(audit_scale, "scaled", lambda rows: [])
    monkeypatch.setattr("intentvcs.cli.commands.serve.running", lambda bundle: contextlib.nullcontext("http://x"))
    monkeypatch.setattr(httpx, "post", lambda *a, **k: Answer({"task_id": "t"}))
    monkeypatch.setattr(httpx, "get", lambda *a, **k: Answer({"status": next(statuses)}))
    record = audit_scale.predict_during_job("bundle", 10, 8, 20.0)
    assert record["job_running_at_window_end"] is not job_ends_in_window
    assert record["met"] is (None if job_ends_in_window else True)
    text = audit_scale.render([record])
    assert ("before the window ended" in text) is job_ends_in_window
    assert ("not judged" in text) is job_ends_in_window
