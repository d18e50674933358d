"""Checkpoint -> bundle: the graph, parity gate, manifest, int8 report, CLI, corrupt bundles."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from tokenizers import Tokenizer

from intentvcs.export.parity import PARITY_ATOL, SAMPLE_UTTERANCES, ParityError, check_parity
from intentvcs.core import manifest
from intentvcs.cli.main import main
from intentvcs.core.decision import Decision
from intentvcs.core.manifest import BundleError
from intentvcs.core.outputs import GraphOutputs
from intentvcs.core.spelling import Spelling, vocabulary
from intentvcs.service.engine import Engine
from tests.helpers.bundle import DEFAULT_LABELS, MAX_LENGTH, make_tiny_checkpoint

BUNDLE_FILES = {"model.onnx", "model.int8.onnx", "tokenizer.json", "spelling.json", "manifest.json"}
# The tiny checkpoint's "training texts", for its spelling normaliser.
SPELLING_TEXTS = ("play some jazz music", "book a table for tonight", "what is the weather tomorrow")


def run_cli(*args: str) -> tuple[int, str]:
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(list(args))
    return code, stdout.getvalue()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    checkpoint = make_tiny_checkpoint(root / "checkpoint", spelling_texts=SPELLING_TEXTS)
    bundle = root / "bundle"
    code, stdout = run_cli("export", "--checkpoint", str(checkpoint), "--out", str(bundle), "--quantize",
                           "--result", str(root / "result.json"))
    return SimpleNamespace(code=code, stdout=stdout, root=root, checkpoint=checkpoint, bundle=bundle,
                           manifest=json.loads((bundle / "manifest.json").read_text()))


def test_cli_succeeds_and_writes_the_result(exported):
    assert exported.code == 0
    result = json.loads(exported.stdout)
    assert result["ok"] and result["bundle"] == str(exported.bundle)
    assert json.loads((exported.root / "result.json").read_text()) == result


def test_bundle_holds_only_safe_files_and_no_leftovers(exported):
    assert {p.name for p in exported.bundle.iterdir()} == BUNDLE_FILES
    assert not [p for p in exported.root.iterdir() if p.name.startswith(".")]


def test_one_graph_with_dynamic_batch_and_sequence(exported):
    graph = onnx.load(str(exported.bundle / "model.onnx"))
    onnx.checker.check_model(graph)

    def dims(value):
        return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]

    assert {i.name: dims(i) for i in graph.graph.input} == {
        name: ["batch_size", "sequence_length"] for name in ("input_ids", "attention_mask", "token_type_ids")}
    assert {o.name: dims(o) for o in graph.graph.output} == {
        "logits": ["batch_size", len(DEFAULT_LABELS)], "pooled": ["batch_size", 32], "pooled_mid": ["batch_size", 32]}
    session = ort.InferenceSession(str(exported.bundle / "model.onnx"), providers=["CPUExecutionProvider"])
    for batch, length in ((1, 3), (4, 17)):
        ids = np.full((batch, length), 7, dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        logits, pooled, pooled_mid = session.run(["logits", "pooled", "pooled_mid"], feed)
        assert logits.shape == (batch, len(DEFAULT_LABELS)) and pooled.shape == pooled_mid.shape == (batch, 32)
        # The middle layer is not the final one: distinct features for the OOS rule.
        assert not np.allclose(pooled, pooled_mid)


def test_parity_report_and_independent_check(exported):
    parity = exported.manifest["parity"]
    assert parity["passed"] and parity["atol"] == PARITY_ATOL
    assert parity["utterances"] == len(SAMPLE_UTTERANCES)
    assert parity["max_abs_logit_diff"] <= PARITY_ATOL and parity["max_abs_pooled_mid_diff"] <= PARITY_ATOL
    assert parity["label_set_mismatches"] == parity["oos_mismatches"] == 0
    # Independently: the published bundle, served, reproduces PyTorch.
    from intentvcs.training.predict import TorchPredictor

    texts = list(SAMPLE_UTTERANCES)
    torch_outputs = TorchPredictor(exported.checkpoint).infer(texts)
    onnx_outputs = Engine(exported.bundle, provider="cpu").infer(texts)
    for torch_array, onnx_array in zip(torch_outputs.scores, onnx_outputs.scores):
        assert np.abs(torch_array - onnx_array).max() <= PARITY_ATOL


def test_manifest_round_trip(exported, tmp_path):
    loaded = manifest.read(exported.bundle / "manifest.json")
    manifest.write(tmp_path / "manifest.json", loaded)
    assert manifest.read(tmp_path / "manifest.json") == loaded
    checkpoint = json.loads((exported.checkpoint / "checkpoint.json").read_text())
    assert loaded["format"] == "intentvcs-bundle" and loaded["format_version"] == manifest.FORMAT_VERSION
    assert loaded["labels"] == checkpoint["labels"] and loaded["max_length"] == MAX_LENGTH
    assert Decision.from_dict(loaded["decision"]).to_dict() == checkpoint["decision"]
    assert loaded["data_fingerprint"] == checkpoint["data_fingerprint"]
    assert loaded["evaluation"] == checkpoint["metrics"]
    assert loaded["model"]["outputs"] == ["logits", "pooled", "pooled_mid"] and loaded["model"]["hidden_size"] == 32
    assert loaded["model"]["mid_layer"] == 1  # of the tiny encoder's 2 layers
    assert loaded["spelling"] == {"words": len(vocabulary(SPELLING_TEXTS))}
    assert Spelling.load(exported.bundle / "spelling.json").counts == vocabulary(SPELLING_TEXTS)


def test_the_engine_reads_what_the_spelling_normaliser_makes_of_a_text(exported):
    engine = Engine(exported.bundle, provider="cpu")
    typed, meant = "play some jazz muisc", "play some jazz music"
    assert engine.info["spelling_words"] == len(vocabulary(SPELLING_TEXTS))
    for served, fixed in zip(engine.infer([typed]), engine.infer([meant])):
        np.testing.assert_array_equal(served, fixed)
    answer, clean = engine.predict([typed, meant])
    assert answer["text"] == typed and answer["normalised"] == meant  # what was sent, and what was read
    assert clean["normalised"] is None  # nothing rewritten
    assert answer["intents"] == clean["intents"]
    # Turned off, the graph reads the typo itself (other word pieces, other outputs).
    raw = Engine(exported.bundle, provider="cpu", spelling=False)
    assert raw.info["spelling_words"] is None
    assert raw.predict([typed])[0]["normalised"] is None
    assert not np.array_equal(raw.infer([typed]).logits, raw.infer([meant]).logits)
    # The PyTorch side applies the checkpoint's copy the same way.
    from intentvcs.training.predict import TorchPredictor

    torch_logits = TorchPredictor(exported.checkpoint).infer([typed]).logits
    assert np.abs(torch_logits - engine.infer([meant]).logits).max() <= PARITY_ATOL


def test_a_checkpoint_without_spelling_exports_a_bundle_without(tmp_path):
    bundle = tmp_path / "bundle"
    code, _ = run_cli("export", "--checkpoint", str(make_tiny_checkpoint(tmp_path / "checkpoint")),
                      "--out", str(bundle))
    assert code == 0 and not (bundle / "spelling.json").exists()
    assert json.loads((bundle / "manifest.json").read_text())["spelling"] is None
    assert Engine(bundle, provider="cpu").info["spelling_words"] is None


@pytest.mark.parametrize("mutate, field", [
    (lambda m: m.pop("labels"), "labels"),
    (lambda m: m.update(extra=1), "extra"),
    (lambda m: m.update(max_length=0), "max_length"),
    (lambda m: m["decision"].update(temperature=-1), "decision"),
    (lambda m: m["decision"].update(labels=list(reversed(m["labels"]))), "decision.labels"),
    (lambda m: m["files"].pop("tokenizer.json"), "files"),
    (lambda m: m.update(quantization=None), "quantization"),
    (lambda m: m.update(spelling=None), "spelling"),
    (lambda m: m.update(spelling={"words": 0}), "spelling"),
])
def test_manifest_validation_names_the_field(exported, mutate, field):
    broken = json.loads(json.dumps(exported.manifest))
    mutate(broken)
    with pytest.raises(BundleError, match=rf"manifest\.json: {field}\b") as info:
        manifest.validate(broken, "bundle/manifest.json")
    assert info.value.field == field


def test_tokenizer_json_truncates_and_knows_its_pad_token(exported):
    tokenizer = Tokenizer.from_file(str(exported.bundle / "tokenizer.json"))
    assert tokenizer.truncation["max_length"] == MAX_LENGTH
    assert tokenizer.padding["pad_token"] == "[PAD]"
    assert len(tokenizer.encode(" ".join(["play music"] * 100)).ids) == MAX_LENGTH


def test_quantization_report(exported):
    report = exported.manifest["quantization"]
    assert report["weight_type"] == "int8" and report["per_channel"] and report["op_types"] == ["MatMul", "Attention"]
    agreement = report["agreement"]
    assert agreement["utterances"] == len(SAMPLE_UTTERANCES)
    # The recorded agreement is what the two graphs of the bundle do, recomputed here.
    texts = list(SAMPLE_UTTERANCES)
    fp32, int8 = (Engine(exported.bundle, provider="cpu", quantized=q, spelling=False) for q in ("off", "on"))
    # Exported with the built-in (unlabelled) sample: agreement measured, accuracy not gated.
    assert report["gate"] is None and not Engine(exported.bundle, provider="cpu").quantized
    ref, cand = (engine.decision.apply(*engine.infer(texts).scores) for engine in (fp32, int8))
    assert agreement["label_set_agreement"] == pytest.approx(np.all(ref.accepted == cand.accepted, axis=1).mean(),
                                                             abs=1e-3)
    assert agreement["oos_agreement"] == pytest.approx((ref.out_of_scope == cand.out_of_scope).mean(), abs=1e-3)
    assert agreement["max_confidence_diff"] == pytest.approx(np.abs(ref.confidences - cand.confidences).max(),
                                                             abs=1e-3)
    assert agreement["max_confidence_diff"] < 0.5
    timing = report["timing"]
    assert timing["fp32_ms"] > 0 and timing["int8_ms"] > 0
    assert timing["speedup"] == pytest.approx(timing["fp32_ms"] / timing["int8_ms"], rel=0.01)


def test_parity_failure_exits_nonzero_and_writes_nothing(exported, tmp_path, monkeypatch):
    import intentvcs.export.exporter

    real_infer = intentvcs.export.exporter.torch_infer

    def drifted(*args, **kwargs):  # PyTorch reference 1e-3 away from the graph
        outputs = real_infer(*args, **kwargs)
        return outputs._replace(logits=outputs.logits + 1e-3)

    monkeypatch.setattr(intentvcs.export.exporter, "torch_infer", drifted)
    data = tmp_path / "held_out.jsonl"
    data.write_text("".join(json.dumps({"text": t, "labels": []}) + "\n" for t in ("hi", "play music", "rain")))

    fresh = tmp_path / "fresh"
    code, stdout = run_cli("export", "--checkpoint", str(exported.checkpoint), "--out", str(fresh),
                           "--parity-data", str(data))
    assert code == 1 and not fresh.exists()
    assert {p.name for p in tmp_path.iterdir()} == {"held_out.jsonl"}  # no temporary leftovers
    result = json.loads(stdout)
    assert not result["ok"] and result["bundle"] is None
    assert result["parity"]["source"] == str(data) and result["parity"]["utterances"] == 3
    assert not result["parity"]["passed"] and result["parity"]["max_abs_logit_diff"] > PARITY_ATOL

    existing = tmp_path / "existing"
    shutil.copytree(exported.bundle, existing)
    before = {p.name: p.read_bytes() for p in existing.iterdir()}
    code, _ = run_cli("export", "--checkpoint", str(exported.checkpoint), "--out", str(existing))
    assert code == 1 and {p.name: p.read_bytes() for p in existing.iterdir()} == before


def test_parity_also_requires_identical_decisions():
    """A gap far below the tolerance still fails when it flips an accepted label."""
    # Temperature 0.01 turns a logit gap of 2e-6 into a confidence gap of 5e-5.
    decision = Decision(("a", "b"), activation="sigmoid", temperature=0.01, thresholds=[0.5, 0.5])
    # "b" is clearly accepted, so the row never falls back to its top intent.
    logits = np.array([[1e-6, 3.0]], dtype=np.float32)  # confidence of "a" 0.5 + 2.5e-5: accepted
    pooled = np.zeros((1, 4), dtype=np.float32)
    check_parity(GraphOutputs(logits, pooled, pooled), GraphOutputs(logits.copy(), pooled, pooled), decision, ["x"],
                 "test")
    shifted = logits - np.array([[2e-6, 0.0]], dtype=np.float32)
    with pytest.raises(ParityError, match="label sets differ on 1") as info:
        check_parity(GraphOutputs(logits, pooled, pooled), GraphOutputs(shifted, pooled, pooled), decision,
                     ["x"], "test")
    assert info.value.report["max_abs_logit_diff"] < PARITY_ATOL
    assert info.value.report["mismatched"][0]["reference"]["accepted"] == ["a", "b"]


def test_parity_tolerates_a_tie_at_a_threshold():
    """A confidence exactly on the cut may fall either side: reported as a tie, not a failure."""
    decision = Decision(("a", "b"), activation="sigmoid", thresholds=[0.5, 0.5])
    logits = np.array([[0.0, 3.0]], dtype=np.float32)  # confidence of "a" exactly 0.5: accepted, beside "b"
    pooled = np.zeros((1, 4), dtype=np.float32)
    shifted = logits - np.array([[1e-6, 0.0]], dtype=np.float32)
    report = check_parity(GraphOutputs(logits, pooled, pooled), GraphOutputs(shifted, pooled, pooled), decision,
                          ["x"], "test")
    assert report["passed"] and report["ties_at_threshold"] == 1 and report["label_set_mismatches"] == 0


def test_parity_tolerates_a_tie_for_the_top_intent_fallback():
    """Nothing passes its cut, so the row falls back to its top intent; two tied top intents may swap."""
    decision = Decision(("a", "b"), activation="sigmoid", thresholds=[0.9, 0.9])
    logits = np.array([[0.5, 0.5]], dtype=np.float32)
    pooled = np.zeros((1, 4), dtype=np.float32)
    shifted = logits + np.array([[0.0, 1e-6]], dtype=np.float32)
    report = check_parity(GraphOutputs(logits, pooled, pooled), GraphOutputs(shifted, pooled, pooled), decision,
                          ["x"], "test")
    assert report["passed"] and report["ties_at_threshold"] == 1 and report["label_set_mismatches"] == 0
    # A swap of top intents that were not tied is a real mismatch, however small the logit gap
    # (temperature 0.01: a gap of 2e-6 in the logits is 5e-5 in the confidences).
    sharp = Decision(("a", "b"), activation="sigmoid", temperature=0.01, thresholds=[0.9, 0.9])
    reference, swapped = (np.array([[0.0, gap]], dtype=np.float32) for gap in (-2e-6, 2e-6))
    with pytest.raises(ParityError, match="label sets differ on 1"):
        check_parity(GraphOutputs(reference, pooled, pooled), GraphOutputs(swapped, pooled, pooled), sharp, ["x"],
                     "test")


def test_parity_tolerates_a_tie_between_a_covers_children():
    """A covered parent accepted without children takes its most confident child; two tied children
    may swap between float32 runs: a tie, not a mismatch."""
    from intentvcs.core.relations import LabelRelations

    labels = ("x", "x_with", "x_without")
    relations = LabelRelations.from_dict({"format": "intentvcs-relations", "format_version": 1,
                                          "labels": list(labels),
                                          "relations": [{"type": "cover", "parent": "x",
                                                         "children": ["x_with", "x_without"]}]})
    decision = Decision(labels, activation="sigmoid", thresholds=[0.5, 0.5, 0.5], relations=relations)
    logits = np.array([[3.0, -1.0, -1.0]], dtype=np.float32)
    pooled = np.zeros((1, 4), dtype=np.float32)
    shifted = logits + np.array([[0.0, 0.0, 1e-6]], dtype=np.float32)
    report = check_parity(GraphOutputs(logits, pooled, pooled), GraphOutputs(shifted, pooled, pooled), decision,
                          ["x"], "test")
    assert report["passed"] and report["ties_at_threshold"] == 1 and report["label_set_mismatches"] == 0


def test_not_a_checkpoint_is_a_usage_error(tmp_path, capsys):
    code, _ = run_cli("export", "--checkpoint", str(tmp_path), "--out", str(tmp_path / "bundle"))
    assert code == 2 and "checkpoint.json" in capsys.readouterr().err
    assert not (tmp_path / "bundle").exists()


# ------------------------------------------------------------ corrupt bundles

def _rewrite_manifest(bundle: Path, edit, reseal: bool = True) -> None:
    """Edit manifest.json, bypassing validation. ``reseal`` recomputes its digest, as a tool that knows
    the format would (the only way to reach the checks behind the digest); a person's edit does not."""
    path = bundle / "manifest.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(manifest.seal(data) if reseal else data))


def labels_swapped_by_hand(bundle):
    def swap(m):
        for labels in (m["labels"], m["decision"]["labels"]):
            labels[0], labels[1] = labels[1], labels[0]

    _rewrite_manifest(bundle, swap, reseal=False)


def truncate_model(bundle):
    data = (bundle / "model.onnx").read_bytes()
    (bundle / "model.onnx").write_bytes(data[: len(data) // 2])


def unreadable_model_with_matching_digest(bundle):
    (bundle / "model.onnx").write_bytes(b"this is not an onnx graph")
    _rewrite_manifest(bundle, lambda m: m["files"].update({"model.onnx": manifest.file_entry(bundle / "model.onnx")}))


def broken_manifest_json(bundle):
    path = bundle / "manifest.json"
    path.write_text(path.read_text()[:-20])


def newer_format_version(bundle):
    _rewrite_manifest(bundle, lambda m: m.update(format_version=manifest.FORMAT_VERSION + 1))


def missing_tokenizer(bundle):
    (bundle / "tokenizer.json").unlink()


def spelling_file_not_json_with_matching_digest(bundle):
    (bundle / "spelling.json").write_text("{oops")
    _rewrite_manifest(bundle, lambda m: m["files"].update({"spelling.json": manifest.file_entry(bundle / "spelling.json")}))


def spelling_file_edited(bundle):
    (bundle / "spelling.json").write_text((bundle / "spelling.json").read_text().replace("jazz", "jaxx"))


def fewer_labels_than_the_graph(bundle):
    def edit(m):
        m["labels"] = m["labels"][:-1]
        m["decision"] = Decision(tuple(m["labels"])).to_dict()

    _rewrite_manifest(bundle, edit)


def tokenizer_truncation_disagrees(bundle):
    tokenizer = Tokenizer.from_file(str(bundle / "tokenizer.json"))
    tokenizer.enable_truncation(MAX_LENGTH * 2)
    tokenizer.save(str(bundle / "tokenizer.json"))
    _rewrite_manifest(bundle, lambda m: m["files"].update(
        {"tokenizer.json": manifest.file_entry(bundle / "tokenizer.json")}))


@pytest.mark.parametrize("corrupt, file, message", [
    (truncate_model, "model.onnx", "truncated"),
    (unreadable_model_with_matching_digest, "model.onnx", "ONNX Runtime cannot load"),
    (broken_manifest_json, "manifest.json", "not valid JSON"),
    (newer_format_version, "manifest.json", "format_version"),
    (missing_tokenizer, "tokenizer.json", "missing"),
    (spelling_file_not_json_with_matching_digest, "spelling.json", "Expecting property name"),
    (spelling_file_edited, "spelling.json", "sha256"),
    (fewer_labels_than_the_graph, "model.onnx", "labels"),
    (tokenizer_truncation_disagrees, "tokenizer.json", "max_length"),
    (labels_swapped_by_hand, "manifest.json", "edited after export"),
])
def test_corrupt_bundle_fails_at_load_naming_the_file(exported, tmp_path, corrupt, file, message):
    bundle = tmp_path / "bundle"
    shutil.copytree(exported.bundle, bundle)
    corrupt(bundle)
    with pytest.raises(BundleError, match=message) as info:
        Engine(bundle, provider="cpu")
    assert info.value.path == str(bundle / file)


def test_missing_int8_graph_and_missing_directory(exported, tmp_path):
    bundle = tmp_path / "bundle"
    shutil.copytree(exported.bundle, bundle)
    (bundle / "model.int8.onnx").unlink()
    for quantized in ("on", "off", "auto"):  # whichever graph serves: a listed file is missing
        with pytest.raises(BundleError, match="model.int8.onnx: missing from the bundle"):
            Engine(bundle, provider="cpu", quantized=quantized)
    with pytest.raises(BundleError, match="not a directory"):
        Engine(tmp_path / "nowhere", provider="cpu")
