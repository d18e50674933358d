"""Benchmark scripts report what they saw: labels that match the figures shown, the command that made each
record, and no seed or data set dropped without a word (a review of ``benchmarks/*.py``)."""

from __future__ import annotations

import argparse
import json
import logging

import pytest


# --------------------------------------------------------------------------- audit_variants.render

def _variant_record(scenario: str, variant: str, precision, recall) -> dict:
    return {"scenario": scenario, "variant": variant, "config": {}, "new_intents": 9, "relation_acc": 0.0,
            "pair_precision": precision, "pair_recall": recall}


def test_audit_variants_shows_an_undefined_pair_precision_as_a_dash():
    """No pair predicted: precision is undefined (None in the JSON), not 0 as the table used to say."""
    from benchmarks.audit_variants import render

    table = render([_variant_record("atis-absorbs_one", "final", None, 0.0),
                    _variant_record("atis-absorbs_one", "middle", 0.0, 0.0)], ["final", "middle"])
    row = next(line for line in table.splitlines() if line.startswith("| atis-absorbs_one"))
    assert row == "| atis-absorbs_one | 9 | 0.0 (– / 0) | 0.0 (0 / 0) |"


# --------------------------------------------------------------------------- render_results.perf_rows

def _target(name: str, goal: str, measured: float) -> dict:
    return {"component": "target", "target": name, "goal": goal, "measured": measured, "met": True}


def test_perf_headline_names_only_the_figures_it_shows(monkeypatch):
    """A bundle without an int8 graph has no int8 targets: its one speed-up is the fp32 one, and the row says so."""
    from benchmarks import render_results

    records = [_target("engine fp32 vs transformers, batch 32", "≥ 1.3×", 2.4)]
    monkeypatch.setattr(render_results, "load", lambda name: {"threads": 2, "records": records}
                        if name == "perf" else None)
    (row,) = render_results.perf_rows()
    assert row == ("CPU (2 threads): engine vs a plain transformers forward: fp32 at batch 32", "2.4×",
                   "goals ≥ 1.3×")


def test_perf_headline_with_every_figure_is_unchanged(monkeypatch):
    from benchmarks import render_results

    records = [_target("engine int8 vs transformers, batch 32", "≥ 3.0×", 5.591),
               _target("engine int8 vs transformers, batch 1", "≥ 5×", 7.848),
               _target("engine fp32 vs transformers, batch 32", "≥ 1.3×", 2.377),
               _target("service at 32 clients vs its engine's answers at batch 32 (in turns)", "≥ 0.85", 0.701),
               _target("service at 32 clients, p99 / p50", "≤ 10", 1.87),
               _target("service idle single-request p50", "≤ 5 ms", 1.64)]
    monkeypatch.setattr(render_results, "load", lambda name: {"threads": 2, "records": records}
                        if name == "perf" else None)
    assert render_results.perf_rows() == [
        ("CPU (2 threads): engine vs a plain transformers forward: int8 at batch 32, int8 at batch 1, fp32 at batch 32",
         "5.591×; 7.848×; 2.377×", "goals ≥ 3.0×; ≥ 5×; ≥ 1.3×"),
        ("HTTP service at 32 clients, share of its engine's batch-32 throughput (the same answers, the two measured "
         "in turns); p99 / p50; idle single-request p50 (ms)", "0.701; 1.87; 1.64", "goals ≥ 0.85; ≤ 10; ≤ 5 ms")]
    # The service's idle p50 alone: the row names it alone.
    records[:] = [records[-1]]
    assert [figure for figure, _, _ in render_results.perf_rows()] == [
        "CPU (2 threads): HTTP service at 32 clients, idle single-request p50 (ms)"]


# --------------------------------------------------------------------------- perf_bench: GPU figures kept

GPU_RECORDS = [
    {"component": "gpu", "check": "setup", "machine": {"cores": 16, "cpu": "Xeon", "gpu": "H100", "python": "3"},
     "provider": "CUDAExecutionProvider", "onnxruntime": "1", "torch_imported_at_engine_start": False,
     "bundle": "G", "checkpoint": None},
    {"component": "gpu", "check": "parity", "utterances": 3, "max_abs_logit_diff": 0.0, "max_confidence_diff": 0.0,
     "decision_mismatches": 0, "ties_at_threshold": 0},
    {"component": "gpu", "backend": "onnx-cuda", "batch_size": 256, "device": "cuda", "max_batch": 64,
     "utt_per_s": 9.0, "p50_ms": 1.0, "spread_pct": 0.0, "runs": 1},
]


@pytest.mark.parametrize("earlier_command, expected", [
    # The GPU figures came from a whole run on a GPU machine: that run first, then this one's CPU figures.
    ("python -m benchmarks.perf_bench --bundle G",
     "python -m benchmarks.perf_bench --bundle G && python -m benchmarks.perf_bench --bundle CPU"),
    # ... from --gpu-only, which merges into what this run writes: after it (as before).
    ("python -m benchmarks.perf_bench --bundle OLD && python -m benchmarks.perf_bench --gpu-only --bundle G",
     "python -m benchmarks.perf_bench --bundle CPU && python -m benchmarks.perf_bench --gpu-only --bundle G"),
])
def test_a_cpu_run_keeps_the_command_that_measured_the_gpu_figures(tmp_path, monkeypatch, earlier_command,
                                                                    expected):
    from benchmarks import perf_bench

    (tmp_path / "perf.json").write_text(json.dumps({"command": earlier_command, "machine": {"cores": 16},
                                                    "date": "2026-01-01", "records": GPU_RECORDS}), encoding="utf-8")
    settings = {"utterances": 3, "data": "D", "threads": 2, "max_batch": 32, "repeats": 1}
    monkeypatch.setattr(perf_bench, "measure", lambda args: (settings, [{"component": "gpu", "skipped": "no GPU"}]))
    monkeypatch.setattr(perf_bench, "command_line", lambda: "python -m benchmarks.perf_bench --bundle CPU")
    perf_bench.write_all(argparse.Namespace(results_dir=tmp_path))
    written = json.loads((tmp_path / "perf.json").read_text(encoding="utf-8"))
    assert [r for r in written["records"] if r["component"] == "gpu"] == GPU_RECORDS
    assert written["command"] == expected


# --------------------------------------------------------------------------- mix_bench: seeds not found

def test_mix_product_part_says_which_seed_it_did_not_find(tmp_path, monkeypatch, caplog):
    from benchmarks import mix_bench

    (tmp_path / "snips" / "seed0" / "checkpoint").mkdir(parents=True)
    (tmp_path / "snips" / "seed0" / "checkpoint" / "checkpoint.json").write_text("{}")
    scored = []
    monkeypatch.setattr(mix_bench, "bundle_of", lambda checkpoint: checkpoint)
    monkeypatch.setattr(mix_bench, "mix_data", lambda dataset, variant, runs: tmp_path)
    monkeypatch.setattr("intentvcs.core.dataio.read_jsonl", lambda path: [])
    monkeypatch.setattr(mix_bench, "seed_records", lambda part, dataset, bundles, sets, threads: scored.append(
        (dataset, bundles)) or [])
    with caplog.at_level(logging.WARNING):
        mix_bench.product_part(tmp_path, tmp_path / "mix", [0, 1], None, ["snips", "atis"])
    assert scored == [("snips", [tmp_path / "snips" / "seed0" / "checkpoint"])]  # atis: no seed at all, not scored
    warned = caplog.text
    assert str(tmp_path / "snips" / "seed1" / "checkpoint") in warned
    assert "atis" in warned and str(tmp_path / "atis" / "seed0" / "checkpoint") in warned


def _mix_record(part: str, dataset: str, accuracy: float) -> dict:
    return {"part": part, "dataset": dataset, "evaluated_on": "mix-standard", "segment": True, "seeds": 1,
            "intent_acc": accuracy, "intent_f1": accuracy, "runs": []}


def test_mix_keeps_the_records_of_a_data_set_it_measured_nothing_of(tmp_path, monkeypatch):
    """A data set whose checkpoints are all missing keeps its recorded figures (its command stays listed)."""
    from benchmarks import common, mix_bench

    earlier = [_mix_record("product", "snips", 90.0), _mix_record("product", "atis", 70.0)]
    (tmp_path / "mix.json").write_text(json.dumps({"command": "python -m benchmarks.mix_bench --parts product",
                                                   "machine": {}, "date": "2026-01-01", "records": earlier}))
    monkeypatch.setattr(mix_bench, "product_part", lambda *args: [_mix_record("product", "atis", 75.0)])
    monkeypatch.setattr(mix_bench, "keep_previous", lambda name, records, redone: common.keep_previous(
        name, records, redone, directory=tmp_path))
    monkeypatch.setattr(mix_bench, "write_results", lambda name, records, markdown, **kw: common.write_results(
        name, records, markdown, directory=tmp_path, **kw))
    assert mix_bench.main(["--parts", "product"]) == 0
    written = json.loads((tmp_path / "mix.json").read_text())
    assert sorted((r["dataset"], r["intent_acc"]) for r in written["records"]) == [("atis", 75.0), ("snips", 90.0)]
    assert written["command"].startswith("python -m benchmarks.mix_bench --parts product && ")


# --------------------------------------------------------------------------- vcs_bench: --reuse-only

def test_vcs_reuse_only_names_the_seeds_it_did_not_find(tmp_path, caplog):
    from benchmarks import vcs_bench

    (tmp_path / "test.jsonl").write_text(json.dumps({"text": "play jazz", "labels": ["PlayMusic"]}) + "\n")
    ckpt = tmp_path / "ckpt"
    with caplog.at_level(logging.WARNING):
        runs, missing = vcs_bench.seed_runs(tmp_path, ckpt, "pu", 2, {"epochs": 1}, reuse_only=True)
    assert (runs, missing) == ([], [0, 1])
    assert str(ckpt / "pu-s0") in caplog.text and str(ckpt / "pu-s1") in caplog.text


def test_vcs_table_says_which_seeds_a_median_lacks():
    from benchmarks.vcs_bench import render

    record = {"dataset": "snips-vcs", "method": "pu", "seeds": 2, "seeds_missing": [1], "epochs": 3,
              "recipe": {"epochs": 3, "freeze_embeddings": True}, "F1": 90.0, "EM": 80.0, "F1_closure": 91.0,
              "EM_closure": 81.0, "paper_F1": None, "paper_EM": None, "epoch_seconds_median": 10.0}
    assert "90.00 / 80.00 (2 seeds, median; seed 1 not found) |" in render([record])
    del record["seeds_missing"]
    assert "90.00 / 80.00 (2 seeds, median) |" in render([record])


# --------------------------------------------------------------------------- robustness_bench.render

def _robustness_means(dataset: str, draws: int, seeds: dict[str, list[int]]) -> list[dict]:
    out = []
    for model in ("baseline", "augmented"):
        out.append({"dataset": dataset, "model": model, "set": "clean", "family": None, "n": 10, "clean_acc": 90.0,
                    "perturbed_acc": None, "drop": None, "epochs": 3, "seeds": seeds[model]})
        out.append({"dataset": dataset, "model": model, "set": "random", "family": None, "n": 10, "clean_acc": 90.0,
                    "perturbed_acc": 89.0, "drop": 1.0, "draws": draws, "seeds": seeds[model]})
    return out


def test_robustness_table_reads_the_draws_and_seeds_off_the_records():
    """Records kept from an earlier run with other draws, and models measured on other seeds, are labelled
    as measured, not with this run's --draws or the first model's seeds."""
    from benchmarks.robustness_bench import render

    means = (_robustness_means("atis", 10, {"baseline": [0, 1, 2], "augmented": [0]})
             + _robustness_means("snips", 5, {"baseline": [0], "augmented": [0]}))
    table = render(means, [], {"draws": 5})
    assert "Random: mean over 10 draws (atis), 5 draws (snips)." in table
    assert "**atis** (seeds: baseline 0, 1, 2; augmented 0;" in table
    assert "**snips** (seeds 0;" in table
    # One draw count for every set: the sentence as before.
    assert "Random: mean over 5 draws." in render(_robustness_means("snips", 5, {"baseline": [0], "augmented": [0]}),
                                                 [], {"draws": 5})


# --------------------------------------------------------------------------- spelling_effect: data sets left out

def _clean(dataset: str, model: str, seed: int, epochs: int) -> list[dict]:
    """A model's clean record (its recipe) and the two sets the comparison reads."""
    return [{"dataset": dataset, "model": model, "set": "clean", "seed": seed, "epochs": epochs, "best_epoch": 2,
             "clean_acc": 90.0, "perturbed_acc": None, "drop": None}] + [
        {"dataset": dataset, "model": model, "set": name, "seed": seed, "clean_acc": 90.0, "perturbed_acc": 89.0,
         "drop": 1.0} for name in ("random", "typo_keyboard")]


def test_spelling_effect_names_a_data_set_it_could_not_compare(monkeypatch, capsys):
    """CLINC150's augmented model was retrained with another recipe in one of the runs: no seed compares,
    and the table says so instead of dropping the data set without a word."""
    from benchmarks import spelling_effect

    runs = {"robustness_no_spelling": [*_clean("atis", "baseline", 0, 3), *_clean("atis", "augmented", 0, 3),
                                       *_clean("clinc150", "baseline", 0, 4), *_clean("clinc150", "augmented", 0, 4)],
            "robustness": [*_clean("atis", "baseline", 0, 3), *_clean("atis", "augmented", 0, 3),
                           *_clean("clinc150", "baseline", 0, 4), *_clean("clinc150", "augmented", 0, 6)]}
    monkeypatch.setattr(spelling_effect, "load", runs.__getitem__)
    written = {}
    monkeypatch.setattr(spelling_effect, "write_results", lambda name, records, markdown: written.update(md=markdown))
    assert spelling_effect.main([]) == 0
    assert "| atis | augmented | 0 | 90.00 → 90.00 |" in written["md"]
    assert ("Not compared (no seed on which both results measured both models, trained alike): clinc150."
            in written["md"])
    assert spelling_effect.common_seeds(*runs.values()) == {"atis": {0}, "clinc150": set()}
