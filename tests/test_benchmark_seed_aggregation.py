"""Seed aggregates that say which seeds they are over: mix_bench's medians name the seeds used and the seeds
asked for whose checkpoint was not found; robustness_bench's means name the seeds a figure is over where
some seed did not measure it; the tables and the README's headline show both."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import benchmarks.common
from benchmarks import mix_bench, render_results
from benchmarks.robustness_bench import render, seed_means, target_checks


# --------------------------------------------------------------------------- mix_bench: seeds not found

class _Engine:
    """What ``seed_records`` reads of an engine; the figures come from ``_score`` by the seed of the bundle."""

    info = {"request_boundaries": False}
    quantized = False

    def __init__(self, bundle: Path, provider: str, threads: int | None):
        self.seed = int(bundle.parent.name.removeprefix("seed"))


def _score(engine, rows, segment, learned_starts=True) -> dict:
    return {"intent_acc": 90.0 + engine.seed, "intent_f1": 95.0 + engine.seed}


def _checkpoints(runs: Path, dataset: str, seeds: list[int]) -> None:
    for seed in seeds:
        checkpoint = runs / dataset / f"seed{seed}" / "checkpoint"
        checkpoint.mkdir(parents=True)
        (checkpoint / "checkpoint.json").write_text("{}")


@pytest.fixture
def scored(monkeypatch):
    """product_part with the engine and the data faked: the checkpoint itself is the bundle."""
    monkeypatch.setattr(mix_bench, "bundle_of", lambda checkpoint: checkpoint)
    monkeypatch.setattr(mix_bench, "mix_data", lambda dataset, variant, runs: runs)
    monkeypatch.setattr(mix_bench, "score", _score)
    monkeypatch.setattr("intentvcs.core.dataio.read_jsonl", lambda path: [])
    monkeypatch.setattr("intentvcs.service.engine.Engine", _Engine)


def test_a_mix_median_names_the_seeds_it_is_over_and_the_ones_not_found(tmp_path, monkeypatch, scored):
    """``--seeds 3`` with seed 1's checkpoint missing: a median of seeds 0 and 2, and the record says so."""
    monkeypatch.setattr(mix_bench, "ROOT", tmp_path)  # the bundles' names relative to it, as in the repository
    monkeypatch.setattr(benchmarks.common, "ROOT", tmp_path)  # where shown_path reads it
    _checkpoints(tmp_path, "snips", [0, 2])
    records = mix_bench.product_part(tmp_path, tmp_path, [0, 1, 2], None, ["snips"])
    assert len(records) == 6  # 3 evaluation sets x (part by part, whole)
    for record in records:
        assert record["seeds"] == 2 and record["seeds_used"] == [0, 2] and record["seeds_missing"] == [1]
        assert record["intent_acc"] == 91.0  # the median of seeds 0 and 2
        assert [run["bundle"] for run in record["runs"]] == ["snips/seed0/checkpoint", "snips/seed2/checkpoint"]


def test_a_mix_median_of_every_seed_asked_for_names_none_missing(tmp_path, monkeypatch, scored):
    monkeypatch.setattr(mix_bench, "ROOT", tmp_path)
    monkeypatch.setattr(benchmarks.common, "ROOT", tmp_path)
    _checkpoints(tmp_path, "snips", [0, 1, 2])
    records = mix_bench.product_part(tmp_path, tmp_path, [0, 1, 2], None, ["snips"])
    assert all(r["seeds"] == 3 and r["seeds_used"] == [0, 1, 2] and "seeds_missing" not in r for r in records)


def test_mix_scores_bundles_outside_the_repository(tmp_path, scored):
    """``--runs`` elsewhere than under the repository: its bundles are named by their whole path (was: a
    ValueError from ``Path.relative_to`` after the first bundle was scored)."""
    _checkpoints(tmp_path, "atis", [0])
    [record, *_] = mix_bench.product_part(tmp_path, tmp_path, [0], None, ["atis"])
    assert record["runs"][0]["bundle"] == str(tmp_path / "atis" / "seed0" / "checkpoint")


def _mix_record(seeds: int, missing: list[int] | None = None, evaluated_on: str = "mix-standard") -> dict:
    return {"part": "product", "dataset": "atis", "evaluated_on": evaluated_on, "segment": True, "seeds": seeds,
            **({"seeds_missing": missing} if missing else {}), "intent_acc": 74.1, "intent_f1": 89.53,
            "top_acc": 97.0, "runs": []}


def test_the_mix_table_does_not_show_a_partial_median_as_a_full_one():
    table = mix_bench.render([_mix_record(2, [1]), _mix_record(1, [1, 2], "mix-hard")])
    assert "| product | atis | mix-standard | part by part | 2 (seed 1 not found) | 74.10 |" in table
    assert "| product | atis | mix-hard | part by part | 1 (seeds 1, 2 not found) | 74.10 |" in table
    # Every seed found: the cell as before.
    assert "| product | atis | mix-standard | part by part | 3 | 74.10 |" in mix_bench.render([_mix_record(3)])


def _mix_meta(records: list[dict]) -> dict:
    return {"records": records, "anchors": mix_bench.ANCHORS, "targets": mix_bench.TARGETS}


def test_the_mix_headline_does_not_show_a_partial_median_as_a_full_one(monkeypatch):
    meta = _mix_meta([_mix_record(2, [1]), _mix_record(2, [1], "mix-hard")])
    monkeypatch.setattr(render_results, "load", lambda name: meta if name == "mix" else None)
    [(figure, measured, _)] = render_results.mix_rows()
    assert figure == ("MixATIS intent accuracy (exact set), trained on single-intent rows, served "
                      "(2 seeds, median; seed 1 not found); hard variant")
    meta["records"] = [_mix_record(3)]
    assert render_results.mix_rows()[0][0] == ("MixATIS intent accuracy (exact set), trained on single-intent rows, "
                                               "served (3 seeds, median)")


# --------------------------------------------------------------------------- robustness_bench: figures a seed lacks

def _robustness(model: str, seed: int, name: str, figures: tuple | None, family: str | None = "raddle") -> dict:
    """A raw record; ``figures`` (clean, perturbed, drop), None where the operator changed no row of the seed's."""
    clean, perturbed, drop = figures or (None, None, None)
    record = {"dataset": "atis", "model": model, "set": name, "family": family, "n": 0 if figures is None else 50,
              "clean_acc": clean, "perturbed_acc": perturbed, "drop": drop, "seed": seed}
    return {**record, "epochs": 3} if name == "clean" else record


def _seeds_run(model: str, lacking: dict[str, list[int]] | None = None, left_out: dict[str, list[int]] | None = None):
    """Seeds 0-2 of ``model``: clean, random and three operators' records (drop: the set's base drop + the seed); ``lacking``: the seeds of a set whose figures
    are None; ``left_out``: the seeds without a record of that set (measured before the operator existed)."""
    lacking, left_out = lacking or {}, left_out or {}
    records = []
    for seed in (0, 1, 2):
        records.append(_robustness(model, seed, "clean", (90.0 + seed, None, None), None))
        for name, drop in (("random", 1.0), ("typo_keyboard", 2.0), ("casing", 0.2), ("punctuation", 0.3)):
            if seed in left_out.get(name, []):
                continue
            figures = None if seed in lacking.get(name, []) else (90.0, 90.0 - drop - seed, drop + seed)
            records.append(_robustness(model, seed, name, figures, None if name == "random" else "raddle"))
    return records


def test_a_robustness_mean_names_the_seeds_of_a_figure_some_seed_lacks():
    """typo_keyboard changed no row of seed 1's (n 0: figures None): its mean is over seeds 0 and 2, and says so."""
    means = {r["set"]: r for r in seed_means(_seeds_run("augmented", lacking={"typo_keyboard": [1]}))}
    typo = means["typo_keyboard"]
    assert typo["seeds"] == [0, 1, 2]
    assert typo["drop"] == 3.0  # (2 + 4) / 2
    assert typo["drop_seeds"] == typo["perturbed_acc_seeds"] == typo["clean_acc_seeds"] == [0, 2]
    # Figures every seed has, and figures no seed has (clean's perturbed accuracy), name no seeds: the
    # records' format is as before.
    assert not any(key.endswith("_seeds") for key in means["random"])
    assert not any(key.endswith("_seeds") for key in means["clean"])


def _row(table: str, name: str) -> str:
    return next(line for line in table.splitlines() if line.startswith(f"| {name} |"))


def test_the_robustness_table_names_the_seeds_of_a_mean_over_fewer():
    records = (_seeds_run("baseline") + _seeds_run("augmented", lacking={"typo_keyboard": [1]},
                                                   left_out={"random": [2]}))
    means = seed_means(records)
    table = render(means, target_checks(means), {"draws": 5})
    assert "**atis** (seeds 0, 1, 2;" in table
    assert _row(table, "typo_keyboard") == ("| typo_keyboard | raddle | 50 | 90.00 | 87.00 | 3.00 "
                                            "| 90.00 (seeds 0, 2) | 87.00 (seeds 0, 2) | 3.00 (seeds 0, 2) |")
    # A set with no record for seed 2 (measured before it existed): its mean is over seeds 0 and 1.
    assert _row(table, "random") == ("| random | – | 50 | 90.00 | 88.00 | 2.00 "
                                     "| 90.00 (seeds 0, 1) | 88.50 (seeds 0, 1) | 1.50 (seeds 0, 1) |")
    assert "A figure averaged over other seeds than its model's names them." in table
    # The target read off that mean says so too.
    assert "| atis | random mean drop | 1.50 (seeds 0, 1) | 1.5 | yes |" in table
    [check] = [c for c in target_checks(means) if c["target"] == "random mean drop"]
    assert check["value_seeds"] == [0, 1]


def test_the_robustness_table_of_means_over_every_seed_is_unchanged():
    means = seed_means(_seeds_run("baseline") + _seeds_run("augmented"))
    table = render(means, target_checks(means), {"draws": 5})
    assert re.search(r"\d \(seeds? [\d, ]+\)", table) is None and "other seeds" not in table
    assert not any("value_seeds" in c for c in target_checks(means))


def _robustness_meta(records: list[dict]) -> dict:
    return {"records": records, "targets": [{"dataset": "atis", "target": "random mean drop", "limit": 1.5}]}


@pytest.mark.parametrize("baseline, augmented, shown", [
    ({}, {}, "ATIS 2.00 (2.00)"),  # every seed: as before
    ({}, {"lacking": {"random": [1]}}, "ATIS 2.00 (2.00) [seeds 0, 2; baseline seeds 0, 1, 2]"),
    ({"lacking": {"random": [1]}}, {"lacking": {"random": [1]}}, "ATIS 2.00 (2.00) [seeds 0, 2]"),
    ({}, {"lacking": {"random": [0]}}, "ATIS 2.50 (2.00) [seeds 1, 2; baseline seeds 0, 1, 2]"),
    ({"left_out": {"random": [0, 1]}}, {}, "ATIS 2.00 (3.00) [seeds 0, 1, 2; baseline seed 2]"),
])
def test_the_robustness_headline_names_the_seeds_of_a_drop_over_fewer(monkeypatch, baseline, augmented, shown):
    meta = _robustness_meta(_seeds_run("baseline", **baseline) + _seeds_run("augmented", **augmented))
    monkeypatch.setattr(render_results, "load", lambda name: meta if name == "robustness" else None)
    [(_, measured, reference)] = render_results.robustness_rows()
    assert measured == shown and reference == "target ≤ 1.5 for the augmented model"
