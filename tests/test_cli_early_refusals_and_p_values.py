"""Second review of the command line: refusals come before the heavy imports and the long work, outputs are
what their names say, and the audit's p-values read on the side of the threshold its verdicts took.

1. ``evaluate --heatmap x.jpg`` wrote PNG bytes into a .jpg file: refused (exit 2), naming the option and .png.
2. A missing ``--checkpoint`` (evaluate, robustness, audit, export, refit) and an output folder the command
   must not replace (export, train) were refused only after torch had loaded (7 to 20 seconds on a busy
   machine): each is refused now with torch unimportable, so before it could load.
3. ``build-mix --test-rows 10000000`` ran silently for tens of minutes and tens of GB: refused, with why.
4. ``format_p`` rounded 0.0095 to "p = 0.01" in a verdict that called it significant at 0.01 (p < 0.01),
   and the page listed a pivot with p = 0.06 as the "entity that tells them apart" of a duplicate.
5. ``demo --epochs 0`` was refused after step 1 had begun (torch loaded, data read, "1/4 training" logged).
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from intentvcs.cli import exit_codes
from intentvcs.cli.main import main
from tests.test_torch_free import BLOCKER, ROOT

ROW = '{"text": "play some music", "labels": ["PlayMusic"]}\n'
# What a refusal must come before: torch and the libraries that load with it, ONNX's exporter.
HEAVY = ("torch", "transformers", "optimum", "onnx")
HEAVY_BLOCKER = BLOCKER.replace("('torch', 'transformers', 'optimum')", repr(HEAVY))
assert HEAVY_BLOCKER != BLOCKER


def run_without_torch(*argv: str) -> subprocess.CompletedProcess:
    """``intentvcs ARGV`` in a fresh interpreter where torch, transformers, optimum and onnx cannot be
    imported: a refusal that comes before them exits 2 with its own message; one that comes after exits 2
    naming the blocked package instead."""
    body = "from intentvcs.cli.main import main\nsys.exit(main(sys.argv[1:]))\n"
    return subprocess.run([sys.executable, "-c", HEAVY_BLOCKER + body, *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def refused(proc: subprocess.CompletedProcess, message: str) -> None:
    assert proc.returncode == exit_codes.BAD_INPUT, proc.stderr[-2000:]
    assert "blocked" not in proc.stderr, proc.stderr[-2000:]  # not an import of torch & co. that failed
    assert message in proc.stderr, proc.stderr[-2000:]


@pytest.fixture
def data(tmp_path) -> Path:
    path = tmp_path / "data.jsonl"
    path.write_text(ROW * 3, encoding="utf-8")
    return path


@pytest.fixture
def foreign(tmp_path) -> Path:
    """A folder no command of ours wrote."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep", encoding="utf-8")
    return folder


# ------------------------------------------------------------------ 1: the heatmap is a PNG
@pytest.mark.parametrize("name", ["heat.jpg", "heat.svg", "heat", "heat.png.bak"])
def test_evaluate_refuses_a_heatmap_name_that_is_no_png_before_the_model_loads(tmp_path, data, capsys,
                                                                                monkeypatch, name):
    from intentvcs.cli.commands import evaluate

    monkeypatch.setattr(evaluate, "load_predictor", lambda args: pytest.fail("the model was loaded"))
    out, heatmap = tmp_path / "e.json", tmp_path / name
    code = main(["evaluate", "--bundle", "unused", "--data", str(data), "--out", str(out), "--heatmap", str(heatmap)])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT
    assert f"intentvcs evaluate: error: --heatmap {heatmap}: the heatmap is a PNG image" in err, err
    assert "ending in .png" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.jsonl"]


def test_evaluate_takes_a_png_heatmap_name_in_any_case(tmp_path, data, monkeypatch):
    from intentvcs.cli.commands import evaluate

    class Loaded(BaseException):  # not an Exception: main() would answer it as an internal error
        pass

    def load(args):
        raise Loaded

    monkeypatch.setattr(evaluate, "load_predictor", load)
    with pytest.raises(Loaded):  # past every check, to the model
        main(["evaluate", "--bundle", "unused", "--data", str(data), "--out", str(tmp_path / "e.json"),
              "--heatmap", str(tmp_path / "heat.PNG")])


# ------------------------------------------------------------------ 2: refusals before torch loads
@pytest.mark.parametrize("command, extra", [
    ("evaluate", ["--data", "DATA", "--out", "OUT/e.json"]),
    ("robustness", ["--data", "DATA", "--out", "OUT/r.json"]),
    ("audit", ["--batch", "DATA", "--out", "OUT/a.json"]),
    ("export", ["--out", "OUT/bundle"]),
    ("refit", ["--train", "DATA", "--valid", "DATA2"]),
])
def test_a_missing_checkpoint_is_refused_before_torch_loads(tmp_path, data, command, extra):
    other = tmp_path / "valid.jsonl"
    other.write_text(ROW, encoding="utf-8")
    missing = tmp_path / "nowhere"
    argv = [a.replace("DATA2", str(other)).replace("DATA", str(data)).replace("OUT", str(tmp_path)) for a in extra]
    proc = run_without_torch(command, "--checkpoint", str(missing), *argv)
    refused(proc, f"intentvcs {command}: error: {missing / 'checkpoint.json'}: not a checkpoint")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.jsonl", "valid.jsonl"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A folder that reads as a checkpoint (its checkpoint.json) without loading torch."""
    from tests.helpers.bundle import make_tiny_checkpoint

    return make_tiny_checkpoint(tmp_path_factory.mktemp("review2") / "checkpoint")


def test_export_refuses_a_folder_it_did_not_write_before_torch_loads(checkpoint, foreign):
    proc = run_without_torch("export", "--checkpoint", str(checkpoint), "--out", str(foreign))
    refused(proc, f"{foreign} exists and holds no manifest.json")
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]


def test_export_refuses_to_write_over_its_checkpoint_before_torch_loads(checkpoint):
    proc = run_without_torch("export", "--checkpoint", str(checkpoint), "--out", str(checkpoint), "--force")
    refused(proc, f"the output folder {checkpoint} is the input {checkpoint}")


def test_export_refuses_a_result_inside_the_checkpoint_before_torch_loads(checkpoint, tmp_path):
    proc = run_without_torch("export", "--checkpoint", str(checkpoint), "--out", str(tmp_path / "bundle"),
                             "--result", str(checkpoint / "result.json"))
    refused(proc, "intentvcs export: error:")
    assert not (checkpoint / "result.json").exists() and not (tmp_path / "bundle").exists()


def test_train_refuses_a_folder_it_did_not_write_before_torch_loads(tmp_path, data, foreign):
    valid = tmp_path / "valid.jsonl"
    valid.write_text(ROW, encoding="utf-8")
    proc = run_without_torch("train", "--train", str(data), "--valid", str(valid), "--out", str(foreign))
    refused(proc, f"{foreign} exists and holds no checkpoint.json")
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]


# ------------------------------------------------------------------ 3: build-mix sizes
@pytest.fixture
def mix_root(tmp_path) -> Path:
    from tests.test_loaders import write_slot_folder
    from tests.test_mix import SOURCE

    for split in ("train", "valid", "test"):
        write_slot_folder(tmp_path / "root" / "atis", split, SOURCE)
    return tmp_path / "root"


@pytest.fixture
def no_build(monkeypatch):
    from intentvcs.training import mix_builder

    monkeypatch.setattr(mix_builder, "build_split", lambda *a, **k: pytest.fail("rows were built"))
    return mix_builder


@pytest.mark.parametrize("split", ["train", "valid", "test"])
def test_build_mix_refuses_more_rows_than_it_can_build_before_building_any(mix_root, tmp_path, capsys, no_build,
                                                                         split):
    too_many = no_build.MAX_ROWS + 1
    code = main(["build-mix", "--dataset", "atis", "--data-root", str(mix_root), "--out", str(tmp_path / "out"),
                 f"--{split}-rows", str(too_many)])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT
    assert f"intentvcs build-mix: error: --{split}-rows must be at most {no_build.MAX_ROWS:,}" in err, err
    assert f"got {too_many:,}" in err and "in memory" in err
    assert not (tmp_path / "out").exists()


def test_build_mix_still_names_the_option_of_a_size_below_one(mix_root, tmp_path, capsys, no_build):
    code = main(["build-mix", "--dataset", "atis", "--data-root", str(mix_root), "--out", str(tmp_path / "out"),
                 "--valid-rows", "0"])
    assert code == exit_codes.BAD_INPUT
    assert "intentvcs build-mix: error: --valid-rows must be at least 1, got 0" in capsys.readouterr().err


def test_the_builder_refuses_a_size_it_cannot_build_before_reading_the_sources(tmp_path, no_build):
    with pytest.raises(ValueError, match=r"^test_rows must be at most"):
        no_build.build("atis", tmp_path / "no data here", tmp_path / "out", sizes={"test": 10_000_000})
    with pytest.raises(ValueError, match=r"^train_rows must be at least 1, got -3"):
        no_build.build("atis", tmp_path / "no data here", tmp_path / "out", sizes={"train": -3})


# ------------------------------------------------------------------ 4: p-values and the threshold
def test_format_p_never_rounds_a_p_value_across_a_threshold():
    from intentvcs.service.audit.slots import format_p

    assert format_p(0.0095303225580193) == "p = 0.0095"  # was "p = 0.01", judged below 0.01
    assert format_p(0.009999) == "p = 0.0099"
    assert format_p(0.0104746) == "p = 0.01"  # not below 0.01, and does not read so
    assert (format_p(0.046), format_p(0.054), format_p(0.25), format_p(1.0)) == (
        "p = 0.046", "p = 0.054", "p = 0.25", "p = 1")
    assert (format_p(3.27e-5), format_p(1e-6), format_p(9.9e-7)) == ("p = 3.2e-05", "p = 1e-06", "p < 1e-06")
    rng = random.Random(0)
    for _ in range(20_000):
        p = 10 ** rng.uniform(-6, 0)
        shown = float(format_p(p).removeprefix("p = "))
        for alpha in (0.001, 0.005, 0.01, 0.025, 0.05, 0.1):
            assert (shown < alpha) == (p < alpha), (p, alpha, format_p(p))


def _pivot_audit(old_with_city: int):
    """An audit where 9 of the new intent's 12 rows carry a city and ``old_with_city`` of A's 17 do."""
    from intentvcs.service.audit import audit_batch
    from intentvcs.service.audit.config import AuditConfig
    from tests.test_audit import A_MIX, FakeEngine, World

    def city(rows, count):
        return [{**row, "spans": [{"start": 0, "end": 3, "label": "city"}]} if i < count else row
                for i, row in enumerate(rows)]

    world = World()
    training = world.training(per_label=17)
    training = [r for r in training if r["labels"] != ["A"]] + city([r for r in training if r["labels"] == ["A"]],
                                                                      old_with_city)
    batch = city(world.rows("cityA", 12, A_MIX, ("A",), 1.0), 9)
    return audit_batch(FakeEngine(world.table), batch, training, AuditConfig(progress=False))


def test_a_significant_pivot_reads_below_the_threshold_in_the_rationale_and_on_the_page():
    from intentvcs.service.audit import render_html
    from intentvcs.service.audit.config import AuditConfig

    report = _pivot_audit(4)
    finding = report.findings[0]
    pivot = finding.containment[0].entity_pivot
    assert 0.0095 < pivot.p_value < AuditConfig().same_alpha == 0.01  # significant: a subset by entity
    assert (finding.verdict.relation, finding.verdict.existing) == ("subset", ("A",))
    assert "'city' entity against 24% of A's (p = 0.0095): cityA is A with city" in finding.verdict.rationale
    page = render_html(report.to_dict())
    assert "city: on 75% of the new rows, 24% of the old (p = 0.0095)" in page
    assert "p = 0.01" not in page


def test_the_page_does_not_offer_a_pivot_above_the_threshold_as_what_tells_the_intents_apart():
    from intentvcs.service.audit import render_html

    report = _pivot_audit(6)
    finding = report.findings[0]
    assert finding.verdict.relation == "duplicate" and finding.containment[0].entity_pivot.p_value > 0.05
    page = render_html(report.to_dict())
    cell = re.search(r"<td>(<span [^>]*>)?city: on 75% of the new rows, 35% of the old.*?</td>", page).group(0)
    assert "p = 0.06, not below 0.01: does not tell them apart" in cell, cell


def test_a_stored_reports_own_threshold_is_the_one_the_page_states():
    from intentvcs.service.audit import render_html

    document = _pivot_audit(6).to_dict()
    document["config"]["same_alpha"] = 0.1  # a report audited at 0.1: p = 0.06 told them apart there
    page = render_html(document)
    assert "city: on 75% of the new rows, 35% of the old (p = 0.06)</td>" in page
    assert "does not tell them apart" not in page


def test_every_p_value_of_the_page_has_one_format():
    from intentvcs.service.audit.render import _same
    from intentvcs.service.audit.slots import format_p

    test = {"p_value": 0.25, "statistic": 0.5, "null_mean": 0.48}
    assert _same(test).startswith(f"{format_p(0.25)} (same-sample neighbours 50%, 48% expected)")


# ------------------------------------------------------------------ 5: demo checks its options first
@pytest.mark.parametrize("option, value, message", [
    ("--epochs", "0", "--epochs must be >= 1"),
    ("--tagger-lr", "-1", "--tagger-lr must be > 0"),
])
def test_demo_refuses_a_bad_training_option_before_step_one(tmp_path, option, value, message):
    proc = run_without_torch("demo", "--no-serve", "--out", str(tmp_path / "demo"), option, value)
    refused(proc, f"intentvcs demo: error: {message}")
    assert "1/4" not in proc.stderr
    assert not (tmp_path / "demo").exists()
