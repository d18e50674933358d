"""Checkpoint directory -> bundle directory, all or nothing.

Steps, inside ``intentvcs.core.atomic.directory`` so that any failure (a parity
miss included) leaves no bundle and an existing one untouched:

1. ``model.onnx``: one fp32 graph ids -> ``logits``, ``pooled``, ``pooled_mid`` and, for a model
   with an entity head, ``tag_logits``, and with a boundary head, ``boundary_logits``
   (``intentvcs.export.onnx_export``), its encoder
   rewritten with fused ops (``intentvcs.export.fusion``);
2. ``tokenizer.json``: the checkpoint's fast tokenizer with truncation at its
   ``max_length`` (on its own ``truncation_side``) and its pad token recorded; ``spelling.json``, the
   checkpoint's spelling normaliser, when it has one; ``references.jsonl``, the
   audit's sample of the training rows (``intentvcs.core.references``), when the
   checkpoint has one and the export was not told to leave it out;
3. parity: PyTorch vs that graph run by the serving session on the held-out rows and on
   the probe texts, one of them longer than ``max_length`` (``intentvcs.export.parity``);
4. unless told not to, ``model.int8.onnx`` with its agreement/speed report and, when the
   parity rows are labelled, its accuracy gate: the first of the quantisations whose gate
   passes (``intentvcs.export.quantize``);
5. ``manifest.json`` (``intentvcs.core.manifest``), then the finished directory is
   loaded with ``intentvcs.service.engine.Engine`` exactly as the service will load it.
   Exported without references, the manifest's parity and int8 reports name the
   parity data's rows by their line in it, not by text (``_without_utterances``).

Only safe formats are written: ONNX protobuf and JSON.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, Callable

import onnxruntime
from tokenizers import Tokenizer

from intentvcs.core import atomic, manifest
from intentvcs.core.decision import Decision
from intentvcs.core.entities import entity_types
from intentvcs.core.manifest import BUNDLE_OUTPUT, INT8_MODEL_FILE, MANIFEST_FILE, MODEL_FILE, TOKENIZER_FILE
from intentvcs.core.outputs import GraphOutputs
from intentvcs.core.references import REFERENCES_FILE, read_references, write_references
from intentvcs.core.references import summary as references_summary
from intentvcs.core.spelling import SPELLING_FILE, Spelling
from intentvcs.export.fusion import fuse_encoder
from intentvcs.export.onnx_export import export_onnx
from intentvcs.export.preflight import check_export
from intentvcs.export.quiet import quiet_logger
from intentvcs.export.parity import HeldOut, check_parity, compare, held_out_rows, probe_texts
from intentvcs.export.quantize import METHODS, accuracy_gate, quantization_report, quantize_int8
from intentvcs.service.engine import Engine, on_whole_words, read_as_served
from intentvcs.service.onnx_session import OnnxSession
from intentvcs.service.tokenization import BundleTokenizer
from intentvcs.training.checkpoint import (META_FILE, checkpoint_tags, max_length_problem,
                                           read_checkpoint_spelling)
from intentvcs.training.model import ENCODER_DIR, IntentModel, load_tokenizer
from intentvcs.training.predict import infer as torch_infer

log = logging.getLogger(__name__)

# Texts pushed through the finished bundle's Engine as a last load check.
SMOKE_TEXTS = 8


def export_bundle(checkpoint_dir: str | os.PathLike, out_dir: str | os.PathLike, quantize: bool = True,
                  parity_data: str | os.PathLike | None = None, opset: int | None = None,
                  force: bool = False, name: str | None = None, entities: bool = True,
                  references: bool = True, result_file: str | os.PathLike | None = None) -> dict[str, Any]:
    """Export ``checkpoint_dir`` to the bundle ``out_dir``; return the result summary.

    ``parity_data`` is a canonical JSONL file of held-out utterances (default: the built-in
    sample); labelled rows are also the int8 graph's accuracy gate. ``quantize=False`` writes no
    int8 graph; ``opset`` overrides Optimum's default; ``name`` is the model's name in the manifest
    (default ``default_name(checkpoint_dir)``); ``entities=False`` leaves the entity head out (an
    intent-only graph); ``references=False`` leaves the sample of training rows out (a bundle that
    must not carry the team's utterances; the audit then needs training rows), and the manifest's
    reports then name the parity rows they cite by their line in the data (``line``), not by text. ``result_file``: also
    write the returned summary there as JSON, committed with the bundle (both or neither). An existing
    ``out_dir`` is replaced when it is an earlier bundle or empty, any other folder only with
    ``force`` (``FileExistsError``, raised before the export starts). Raises
    ``intentvcs.export.parity.ParityError`` when the graph does not reproduce PyTorch,
    ``ValueError``/``FileNotFoundError`` for bad inputs; ``out_dir`` is then left as it was.
    """
    started = time.perf_counter()
    meta, decision = check_export(checkpoint_dir, out_dir, parity_data=parity_data, result_file=result_file,
                                  opset=opset, force=force)
    checkpoint_dir, out_dir = Path(checkpoint_dir), Path(out_dir)
    # Before any heavy work: a bad file fails fast, and rows the model cannot score are named (or refused,
    # as evaluate refuses them, when none carries a label of the model's).
    trained_tags = checkpoint_tags(meta, checkpoint_dir / META_FILE)
    held_out = held_out_rows(parity_data, decision.labels, entity_types(trained_tags) if entities else (),
                             oos_rule=decision.oos.name)
    max_length = meta["max_length"]
    model, tokenizer = _load_model(checkpoint_dir, meta, decision, trained_tags)
    if not entities:
        model.tagger = None
    tags = trained_tags if model.tagger is not None else []
    spelling = read_checkpoint_spelling(checkpoint_dir)

    also: dict[str | os.PathLike, str] = {}  # filled in below, once the result is known
    with atomic.directory(out_dir, BUNDLE_OUTPUT, force, also=also) as tmp:
        log.info("exporting the ONNX graph with Optimum")
        model_info = export_onnx(model, tmp / MODEL_FILE, opset)
        model_info["fusions"] = fuse_encoder(tmp / MODEL_FILE, model.encoder.config)
        # ONNX Runtime fused the graph and makes the int8 one: its version is the graphs' provenance too.
        model_info["exporter"] += f", onnxruntime {onnxruntime.__version__}"
        _write_tokenizer(tokenizer, max_length, tmp / TOKENIZER_FILE)
        if spelling is not None:
            spelling.save(tmp / SPELLING_FILE)
        reference_entry = _copy_references(checkpoint_dir, tmp) if references else None
        parity, fp32, fp32_outputs = _check_parity(tmp, model, tokenizer, (max_length, tags), decision, held_out)
        quantization = _quantize(tmp, (fp32, fp32_outputs), decision, held_out, spelling) if quantize else None
        # Without references the bundle carries none of the team's utterances: its reports name the parity
        # data's rows by their lines (the built-in sample is no one's).
        recorded = (parity, quantization) if references or parity_data is None else \
            tuple(_without_utterances(report, held_out.texts, held_out.lines) for report in (parity, quantization))
        written = _write_manifest(tmp, checkpoint_dir, meta, decision, model_info, recorded,
                                  (spelling, reference_entry), name or default_name(checkpoint_dir), tags)
        for quantized in ("off", "on") if quantize else ("off",):
            # A load check, not serving: the engine's "serving <the temporary folder>" lines would mislead.
            with quiet_logger("intentvcs.service.engine", logging.WARNING), \
                    quiet_logger("intentvcs.service.onnx_session", logging.WARNING):
                Engine(tmp, provider="cpu", quantized=quantized).predict(held_out.texts[:SMOKE_TEXTS])
        result = {
            "ok": True,
            "bundle": str(out_dir),
            "checkpoint": str(checkpoint_dir),
            "labels": len(decision.labels),
            "entity_types": entity_types(tags),
            "model": model_info,
            "files": written["files"],
            "parity": parity,
            "quantization": quantization,
            "references": written["references"],
            "seconds": round(time.perf_counter() - started, 2),
        }
        if result_file is not None:
            also[result_file] = atomic.json_text(result)

    log.info("bundle written to %s", out_dir)
    return result


def _copy_references(checkpoint_dir: Path, bundle_dir: Path) -> dict[str, int] | None:
    """The checkpoint's sample of its training rows into the bundle, when it has one (read and rewritten:
    a bad row fails the export here, not the audit later); return its manifest entry, or None."""
    rows = read_references(checkpoint_dir)
    if not rows:
        return None
    path = write_references(bundle_dir, rows)
    return references_summary(rows, path.stat().st_size)


# The lists of the parity and int8 reports (``intentvcs.export.parity.compare``) whose entries name a text.
EXAMPLE_LISTS = ("mismatched", "entity_mismatched", "start_mismatched")


def _without_utterances(report: Any, texts: list[str], lines: list[int]) -> Any:
    """``report`` (a parity or int8 report; None stays None) with every example of ``EXAMPLE_LISTS`` that names
    one of the held-out ``texts`` naming its ``line`` in the parity data instead (``lines``, as the data
    readers name rows) and its entities without their ``value``: what the manifest of a bundle exported
    without references records. Examples of the probe texts (the built-in sample's) are kept as they are."""
    rows: dict[str, int] = {}
    for line, text in zip(lines, texts):
        rows.setdefault(text, line)

    def example(entry: Any) -> Any:
        if not isinstance(entry, dict) or entry.get("text") not in rows:
            return entry
        return {"line": rows[entry["text"]],
                **{key: [{k: v for k, v in item.items() if k != "value"} if isinstance(item, dict) else item
                         for item in value] if isinstance(value, list) else value
                   for key, value in entry.items() if key != "text"}}

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: [example(entry) for entry in item] if key in EXAMPLE_LISTS and isinstance(item, list)
                    else walk(item) for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item) for item in value]
        return value

    return walk(report)


def default_name(checkpoint_dir: str | os.PathLike) -> str:
    """A model's name when the export names none: the folder that holds its checkpoint
    (``runs/default/checkpoint`` -> ``default``), else the checkpoint folder's own."""
    path = Path(checkpoint_dir).resolve()
    return path.parent.name if path.name == "checkpoint" and path.parent.name else path.name


def _write_manifest(directory: Path, checkpoint_dir: Path, meta: dict[str, Any], decision: Decision,
                    model_info: dict, reports: tuple[dict, dict | None], extras: tuple[Any, dict | None],
                    name: str, tags: list[str]) -> dict[str, Any]:
    """Write (and return) the sealed manifest of the bundle files in ``directory``.

    ``reports``: the parity and int8 reports; ``extras``: the spelling normaliser and the references
    entry (each None when the bundle has none)."""
    (parity, quantization), (spelling, references) = reports, extras
    files = {name: manifest.file_entry(directory / name)
             for name in (MODEL_FILE, INT8_MODEL_FILE, TOKENIZER_FILE, SPELLING_FILE, REFERENCES_FILE)
             if (directory / name).exists()}
    body = manifest.create(
        name=name,
        labels=list(decision.labels),
        backbone=meta["backbone"],
        max_length=meta["max_length"],
        decision=decision.to_dict(),
        relations=meta.get("relations"),
        data_fingerprint=meta.get("data_fingerprint"),
        source={"checkpoint": str(checkpoint_dir.resolve()), "method": meta["method"],
                "train_config": meta.get("train_config", {})},
        evaluation=meta.get("metrics", {}),
        model=model_info,
        files=files,
        parity=parity,
        quantization=quantization,
        spelling=None if spelling is None else {"words": len(spelling)},
        entities={"tags": tags, "types": entity_types(tags)} if tags else None,
        references=references,
    )
    manifest.write(directory / MANIFEST_FILE, body)
    return body


def _load_model(checkpoint_dir: Path, meta: dict[str, Any], decision: Decision,
                tags: list[str]) -> tuple[IntentModel, Any]:
    """The checkpoint's PyTorch model and tokenizer, checked against its ``meta`` before any export work: the
    head must have one output per label of ``decision``, the entity head one per tag of ``tags`` (``meta``'s,
    none without an entity head), and ``max_length`` must fit the encoder (a mismatch would otherwise surface
    late, as the graph's)."""
    log.info("loading checkpoint %s (%d labels)", checkpoint_dir, len(decision.labels))
    model = IntentModel.from_checkpoint(checkpoint_dir)
    meta_path = checkpoint_dir / META_FILE
    if model.head.out_features != len(decision.labels):
        raise ValueError(f"{checkpoint_dir}: the head has {model.head.out_features} outputs "
                         f"but {META_FILE} lists {len(decision.labels)} labels")
    outputs = 0 if model.tagger is None else model.tagger.out_features
    if outputs != len(tags):
        raise ValueError(f"{checkpoint_dir}: the entity head has {outputs} outputs but {meta_path} lists "
                         f"{len(tags)} entity tags (entities.tags); the checkpoint was altered: retrain it")
    problem = max_length_problem(meta["max_length"], model.encoder.config)
    if problem is not None:
        raise ValueError(f"{meta_path}: max_length: {problem}")
    return model, load_tokenizer(checkpoint_dir / ENCODER_DIR)


def _check_parity(directory: Path, model: IntentModel, tokenizer, reading: tuple[int, list[str]],
                  decision: Decision, held_out: HeldOut) -> tuple[dict, OnnxSession, GraphOutputs]:
    """Parity of ``directory``'s fp32 graph against PyTorch on the held-out texts.

    ``reading``: the checkpoint's ``max_length`` and entity tags ([] without an entity head).
    The graph runs through the serving session (``OnnxSession``), so what is
    checked is the code path the service runs, on the held-out texts and on the
    probe texts (``intentvcs.export.parity.probe_texts``: the built-in sample's,
    one text longer than ``max_length``), whose report goes under ``probes``
    with its longest text's token count. Entities are compared as both sides
    answer them, over whole words (``on_whole_words``). Returns the parity
    report, that session and its raw outputs on the held-out texts (entities
    not yet widened); raises ``ParityError`` when the graph does not reproduce
    PyTorch on either.
    """
    max_length, tags = reading
    count_tokens = _token_counter(tokenizer)
    probes = probe_texts(held_out.texts, count_tokens, max_length)
    log.info("parity check on %d utterances (%s) and %d probe texts", len(held_out.texts), held_out.source,
             len(probes))
    fp32 = OnnxSession(directory / MODEL_FILE, BundleTokenizer(directory / TOKENIZER_FILE, max_length), provider="cpu",
                       tags=tags)
    reference = torch_infer(model, tokenizer, held_out.texts, max_length, tags=tags)
    outputs = fp32.infer(held_out.texts)
    # PyTorch's entities lie over whole words as sent (a word max_length cut included), as the service answers
    # them; the session's raw ones end at the cut. So the graph's are widened as served (``on_whole_words``).
    probed = None
    if probes:  # none only when the held-out rows hold every probe text already
        probed = compare(torch_infer(model, tokenizer, probes, max_length, tags=tags),
                         on_whole_words(fp32, fp32.infer(probes), probes), decision, probes)
        probed["longest_tokens"], probed["max_length"] = max(count_tokens(text) for text in probes), max_length
    parity = check_parity(reference, on_whole_words(fp32, outputs, held_out.texts), decision, held_out.texts,
                          held_out.source, probes=probed)
    log.info("parity passed: max |logit diff| %.2e", parity["max_abs_logit_diff"])
    return parity, fp32, outputs


def _token_counter(tokenizer) -> Callable[[str], int]:
    """The tokens of a text (special ones included) as the checkpoint's tokenizer reads it before truncation."""
    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())  # a copy: the original may truncate
    backend.no_truncation()
    backend.no_padding()
    return lambda text: len(backend.encode(text).ids)


def _quantize(directory: Path, fp32_run: tuple[OnnxSession, GraphOutputs], decision: Decision,
              held_out: HeldOut, spelling: Spelling | None) -> dict:
    """Write ``model.int8.onnx`` beside the fp32 graph; return its report.

    ``fp32_run``: the fp32 session and its outputs on the held-out texts (from
    parity). The ``METHODS`` of ``intentvcs.export.quantize`` are tried in
    order, and the first whose accuracy gate passes is kept (the first when
    none does, or when there are no labels to gate on: unlabelled rows, or no in-scope row of a
    label of the model's); the report lists the
    others tried (``not_kept``: each one's method, timing and gate).
    Agreement and speed are read on the held-out texts as the graphs see them;
    the accuracy gate, on labelled held-out rows only, on the answers the
    service would give (``read_as_served``: the spelling normaliser, chained
    requests part by part).
    """
    fp32, fp32_outputs = fp32_run
    # The fp32 graph's answers as served: the gate's reference, the same for every method tried.
    fp32_served = None if held_out.examples is None else \
        read_as_served(fp32, spelling, decision, held_out.texts, outputs=fp32_outputs)
    candidates: list[tuple[Path, dict]] = []
    unavailable = []
    for settings in METHODS:
        path = directory / f"model.int8.{settings['method']}.onnx"
        log.info("quantising to int8 (%s)", settings["method"])
        try:
            quantize_int8(directory / MODEL_FILE, path, settings)
            report = _int8_report(path, settings, fp32_run, fp32_served, decision, held_out, spelling)
        except Exception as exc:
            if not candidates:  # the first method is the int8 graph of every bundle: its failure is the export's
                raise
            # A later one only improves on a failed gate; an ONNX Runtime without its ops leaves the first.
            path.unlink(missing_ok=True)  # nothing but the bundle's own files may be published
            error = str(exc).replace(f"{directory}{os.sep}", "")  # the temporary folder is gone by then
            log.warning("int8 (%s) not available here: %s", settings["method"], error)
            unavailable.append({"method": settings["method"], "error": error[:300]})
            continue
        candidates.append((path, report))
        if report["gate"] is None or report["gate"]["passed"]:
            break
    # The loop stops at the first graph that passes (or is not gated): the last one, if any does.
    last_gate = candidates[-1][1]["gate"]
    kept_path, kept = candidates[-1] if last_gate is None or last_gate["passed"] else candidates[0]
    kept["not_kept"] = [{"method": report["method"], "timing": report["timing"], "gate": report["gate"]}
                        for path, report in candidates if path != kept_path] + unavailable
    kept_path.rename(directory / INT8_MODEL_FILE)
    for path, _ in candidates:
        path.unlink(missing_ok=True)
    if kept["gate"] is None:
        log.warning("int8 graph written but not gated: the parity rows (%s) %s; the service serves it only when "
                    "asked (INTENTVCS_QUANTIZED=on)", held_out.source,
                    "carry no labels" if held_out.examples is None else
                    "hold no in-scope row with a label of the model's")
    return kept


def _int8_report(path: Path, settings: dict, fp32_run: tuple[OnnxSession, GraphOutputs], fp32_served: tuple | None,
                 decision: Decision, held_out: HeldOut, spelling: Spelling | None) -> dict:
    """The report of the int8 graph at ``path``: settings, agreement, speed and gate (None without labels, or
    without an in-scope row of a label of the model's; ``fp32_served``: the fp32 graph's ``read_as_served``, the
    gate's reference)."""
    fp32, fp32_outputs = fp32_run
    int8 = OnnxSession(path, fp32.tokenizer, provider="cpu", tags=fp32.tags)
    texts = held_out.texts
    int8_outputs = int8.infer(texts)
    report = quantization_report(settings, fp32_outputs, int8_outputs, fp32.infer, int8.infer, decision, texts)
    report["gate"] = None
    if held_out.examples is None:
        return report
    # Scored as the service answers: through the normaliser, chained requests part by part.
    fp32_read, _, fp32_decided = fp32_served
    int8_read, _, int8_decided = read_as_served(int8, spelling, decision, texts, outputs=int8_outputs)
    report["gate"] = accuracy_gate(fp32_read, int8_read, decision, held_out.examples, held_out.source,
                                   results=(fp32_decided.result, int8_decided.result))
    if report["gate"] is None:  # no in-scope row of a label the model knows: nothing to judge int8 on
        return report
    log.info("int8 (%s) accuracy gate %s: %s", settings["method"], "passed" if report["gate"]["passed"] else "FAILED",
             ", ".join(f"{name} {f['fp32']:.4f} -> {f['int8']:.4f}" for name, f in report["gate"]["figures"].items()))
    return report


def _write_tokenizer(tokenizer, max_length: int, path: Path) -> None:
    """Save the fast tokenizer with truncation at ``max_length`` and its pad token.

    Matches ``intentvcs.training.batching.encode`` (truncation to ``max_length``
    on the tokenizer's own ``truncation_side``, special tokens added), so served
    ids equal training ids; parity proves it (its probes hold a text longer than
    ``max_length``, whatever the parity data).
    """
    if tokenizer.pad_token_id is None:
        raise ValueError("the checkpoint's tokenizer has no pad token; the engine pads batches")
    # A copy: configuring the HF tokenizer's own backend would leak into later calls.
    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    # The side transformers truncates on when training and PyTorch inference call the tokenizer (a backbone
    # may ship "left"); the backend's own default is the right.
    backend.enable_truncation(max_length, direction=getattr(tokenizer, "truncation_side", "right"))
    backend.enable_padding(pad_id=tokenizer.pad_token_id, pad_token=tokenizer.pad_token)
    backend.save(str(path))
