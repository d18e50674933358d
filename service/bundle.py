"""Open a bundle directory and check it is whole and consistent before serving.

Every failure raises ``BundleError`` naming the offending file (and field),
at load time: a service must refuse to start on a bad bundle rather than fail
on its first request. Checks, in order: manifest (JSON, schema, version),
payload files (every listed one present with its size; sha256 of those read), tokenizer.json (truncation agrees
with the manifest), references.jsonl (when listed: read now, for the audit), spelling.json (when listed), the decision, and, once ONNX
Runtime has parsed the graph, its output sizes against the manifest, and that no file read was replaced or
rewritten since it was checked (``check_graph``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from intentvcs.core.dataio import DataError, Example, read_jsonl
from intentvcs.core.decision import Decision
from intentvcs.core.manifest import (
    INT8_MODEL_FILE,
    MANIFEST_FILE,
    MODEL_FILE,
    TOKENIZER_FILE,
    BundleError,
    check_file,
    check_listed,
    read,
)
from intentvcs.core.references import REFERENCES_FILE
from intentvcs.core.spelling import SPELLING_FILE, Spelling, SpellingError
from intentvcs.service.settings import DEFAULT_QUANTIZED, QUANTIZED_MODES
from intentvcs.service.tokenization import BundleTokenizer

# Why ``auto`` serves fp32 on CUDA (figures: docs/RESULTS.md "Performance", GPU).
GPU_INT8_REASON = "fp32 on CUDA (the int8 graph is dynamically quantised for CPUs)"
# What tells a file apart from its replacement or rewrite: device, inode, size, modification time (ns).
Stamp = tuple[int, int, int, int]


@dataclass(frozen=True)
class Bundle:
    """A validated bundle: manifest, the graph file to load (and ``graph_reason``, why that one), tokenizer,
    decision, spelling normaliser, and the sample of training rows (``references``, None when it carries none)."""

    directory: Path
    manifest: dict[str, Any]
    model_path: Path
    tokenizer: BundleTokenizer
    decision: Decision
    spelling: Spelling | None
    graph_reason: str
    references: tuple[Example, ...] | None
    # Each file read, as it was when checked (stamped before it was read): ``check_graph`` compares them once
    # the graph is loaded, by path, after the checks.
    stamps: tuple[tuple[Path, Stamp | None], ...] = field(default=(), compare=False)

    @property
    def labels(self) -> list[str]:
        return self.manifest["labels"]

    @property
    def tags(self) -> list[str]:
        """The entity head's tag vocabulary (``intentvcs.core.entities``); [] for an intent-only bundle."""
        return list((self.manifest["entities"] or {}).get("tags", []))

    def reference_rows(self) -> list[Example] | None:
        """The audit's sample of the training rows (``intentvcs.core.references``), as read when the bundle
        was opened; None when the bundle carries none."""
        return None if self.references is None else list(self.references)


def open_bundle(directory: str | os.PathLike, quantized: str = DEFAULT_QUANTIZED, gpu: bool = False) -> Bundle:
    """Validate ``directory`` and return a ``Bundle`` for the graph ``quantized`` picks
    (one of ``QUANTIZED_MODES``) for a CPU or, with ``gpu``, a CUDA session (``serving_graph``)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise BundleError(directory, "not a directory")
    stamps: list[tuple[Path, Stamp | None]] = [(directory / MANIFEST_FILE, _stamp(directory / MANIFEST_FILE))]
    manifest = read(directory / MANIFEST_FILE)
    check_listed(directory, manifest)
    checked = _checker(directory, manifest, stamps)
    model_path, why = _served_path(directory, manifest, quantized, gpu, checked)
    tokenizer = BundleTokenizer(checked(TOKENIZER_FILE), manifest["max_length"])
    references = None
    if REFERENCES_FILE in manifest["files"]:  # checked now, so a bundle without it never serves
        # Read now too, not when an audit asks: by then the folder may hold the next export's file (before the
        # swap, for the hour an audit job may run, or for good where that export cannot load), which failed
        # the audit with a 500 ("references.jsonl: ... the manifest says ...").
        try:
            references = tuple(read_jsonl(checked(REFERENCES_FILE), stored=True))
        except DataError as exc:
            raise BundleError(exc.path, exc.reason) from None
    spelling = None
    if manifest["spelling"] is not None:
        try:
            spelling = Spelling.load(checked(SPELLING_FILE))
        except SpellingError as exc:
            raise BundleError(exc.path, exc.reason) from None
    # validate() has already proven the decision parses.
    return Bundle(directory, manifest, model_path, tokenizer, Decision.from_dict(manifest["decision"]), spelling,
                  why, references, tuple(stamps))


def on_cpu(bundle: Bundle, quantized: str) -> Bundle:
    """``bundle``, opened for a CUDA session, with the graph (and its reason) a CPU session serves under
    ``quantized``: for a CUDA build whose CUDA did not start (``OnnxSession.cuda_fallback``)."""
    stamps = list(bundle.stamps)
    checked = _checker(bundle.directory, bundle.manifest, stamps)
    model_path, why = _served_path(bundle.directory, bundle.manifest, quantized, False, checked)
    return replace(bundle, model_path=model_path, graph_reason=why, stamps=tuple(stamps))


def _served_path(directory: Path, manifest: dict, quantized: str, gpu: bool,
                 checked: Callable[[str], Path]) -> tuple[Path, str]:
    """``serving_graph``'s choice, checked against the manifest (``checked``: ``check_file``), and why."""
    model_file, why = serving_graph(manifest, quantized, directory / MANIFEST_FILE, gpu)
    return checked(model_file), why


def _checker(directory: Path, manifest: dict, stamps: list[tuple[Path, Stamp | None]]) -> Callable[[str], Path]:
    """``check_file`` of ``directory``, each file stamped into ``stamps`` before it is hashed (and read)."""
    def checked(name: str) -> Path:
        stamps.append((directory / name, _stamp(directory / name)))
        return check_file(directory, manifest, name)

    return checked


def _stamp(path: Path) -> Stamp | None:
    """``path``'s stamp; None where it cannot be had (the check that follows says why, or it appeared since)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def check_unchanged(bundle: Bundle) -> None:
    """Raise ``BundleError`` when a file ``bundle`` read was replaced or rewritten since it was checked.

    The files are checked (sha256 against the manifest) and then read again by path, the graph by ONNX
    Runtime only after ``open_bundle`` returned: a bundle renamed over this one meanwhile (``intentvcs
    export --out``), or a file copied over in place, was served with the manifest, and so the decision,
    the name and the digest, of the bundle checked. Loading it again reads one whole bundle.
    """
    for path, stamp in bundle.stamps:
        if stamp is None or _stamp(path) != stamp:
            raise BundleError(path, "changed while the bundle was loaded (replaced or rewritten after it was "
                                    "checked); load it again once the folder holds still")


def serving_graph(manifest: dict, quantized: str, path: str | os.PathLike = MANIFEST_FILE,
                  gpu: bool = False) -> tuple[str, str]:
    """The graph file that serves under ``quantized`` (``"auto"``, ``"on"``, ``"off"``) and why, in words.

    ``auto`` serves ``model.int8.onnx`` only on CPU (``gpu`` False) and only when the
    export recorded that it passed its accuracy gate (``intentvcs.export.quantize``),
    else ``model.onnx``; ``on`` serves the int8 graph ungated and raises
    ``BundleError`` for a bundle without one. The int8 graph is dynamically
    quantised, a CPU optimisation: on CUDA its quantise and integer-matmul ops
    run slower than the fp32 graph (GPU_INT8_REASON).
    """
    if quantized not in QUANTIZED_MODES:
        raise ValueError(f"quantized must be one of {list(QUANTIZED_MODES)}, got {quantized!r}")
    has_int8 = INT8_MODEL_FILE in manifest["files"]
    if quantized == "off":
        return MODEL_FILE, "fp32 asked for (quantized=off)"
    if quantized == "on":
        if not has_int8:
            raise BundleError(path, f"no {INT8_MODEL_FILE} in this bundle (it was exported with --no-quantize)",
                              field="files")
        return INT8_MODEL_FILE, "int8 asked for (quantized=on)"
    gate = (manifest["quantization"] or {}).get("gate")
    if not has_int8:
        return MODEL_FILE, "the bundle has no int8 graph"
    if gpu:
        return MODEL_FILE, GPU_INT8_REASON
    if gate is None:
        return MODEL_FILE, "the int8 graph was not gated (its export had no parity row labelled with one of the model's intents)"
    failed = [name for name, figure in gate["figures"].items() if not figure["passed"]]
    if failed:
        return MODEL_FILE, f"the int8 graph failed its accuracy gate on {', '.join(failed)}"
    method = manifest["quantization"].get("method", "dynamic")  # bundles before the weight-only method: dynamic
    return INT8_MODEL_FILE, f"the int8 graph ({method}) passed its accuracy gate ({gate['rows']} rows)"


def check_graph(bundle: Bundle, output_widths: dict[str, int]) -> None:
    """Check the graph's static output sizes against the manifest.

    A graph whose ``logits`` width differs from ``labels`` would misalign every
    answer with its label name, and one whose ``pooled`` or ``pooled_mid``
    width differs from ``hidden_size`` would break distance-based OOS statistics. Called once ONNX Runtime
    has read the graph, it also checks that no file read changed since it was checked (``check_unchanged``).
    """
    check_unchanged(bundle)
    labels = len(bundle.labels)
    hidden = bundle.manifest["model"]["hidden_size"]
    if output_widths["logits"] != labels:
        raise BundleError(bundle.model_path, f"output 'logits' has {output_widths['logits']} columns "
                                             f"but the manifest lists {labels} labels")
    for name in ("pooled", "pooled_mid"):
        if output_widths[name] != hidden:
            raise BundleError(bundle.model_path, f"output {name!r} has {output_widths[name]} columns "
                                                 f"but the manifest's hidden_size is {hidden}")
