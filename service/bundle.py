"""Open a bundle directory and check it is whole and consistent before serving.

Every failure raises ``BundleError`` naming the offending file (and field),
at load time: a service must refuse to start on a bad bundle rather than fail
on its first request. Checks, in order: manifest (JSON, schema, version),
payload files (presence, size, sha256), tokenizer.json (truncation agrees
with the manifest), spelling.json (when listed), the decision, and, once ONNX
Runtime has parsed the graph, its output sizes against the manifest
(``check_graph``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from intentvcs.core.decision import Decision
from intentvcs.core.manifest import (
    INT8_MODEL_FILE,
    MANIFEST_FILE,
    MODEL_FILE,
    TOKENIZER_FILE,
    BundleError,
    check_file,
    read,
)
from intentvcs.core.spelling import SPELLING_FILE, Spelling, SpellingError
from intentvcs.service.tokenization import BundleTokenizer


@dataclass(frozen=True)
class Bundle:
    """A validated bundle: manifest, the graph file to load, tokenizer, decision, spelling normaliser."""

    directory: Path
    manifest: dict[str, Any]
    model_path: Path
    tokenizer: BundleTokenizer
    decision: Decision
    spelling: Spelling | None

    @property
    def labels(self) -> list[str]:
        return self.manifest["labels"]

    @property
    def tags(self) -> list[str]:
        """The entity head's tag vocabulary (``intentvcs.core.entities``); [] for an intent-only bundle."""
        return list((self.manifest["entities"] or {}).get("tags", []))


def open_bundle(directory: str | os.PathLike, quantized: bool = False) -> Bundle:
    """Validate ``directory`` and return a ``Bundle`` for its fp32 (or int8) graph."""
    directory = Path(directory)
    if not directory.is_dir():
        raise BundleError(directory, "not a directory")
    manifest = read(directory / MANIFEST_FILE)
    model_file = INT8_MODEL_FILE if quantized else MODEL_FILE
    if model_file not in manifest["files"]:
        raise BundleError(directory / MANIFEST_FILE, f"no {model_file} in this bundle (export with --quantize)",
                          field="files")
    model_path = check_file(directory, manifest, model_file)
    tokenizer = BundleTokenizer(check_file(directory, manifest, TOKENIZER_FILE), manifest["max_length"])
    spelling = None
    if manifest["spelling"] is not None:
        try:
            spelling = Spelling.load(check_file(directory, manifest, SPELLING_FILE))
        except SpellingError as exc:
            raise BundleError(exc.path, exc.reason) from None
    # validate() has already proven the decision parses.
    return Bundle(directory, manifest, model_path, tokenizer, Decision.from_dict(manifest["decision"]), spelling)


def check_graph(bundle: Bundle, output_widths: dict[str, int]) -> None:
    """Check the graph's static output sizes against the manifest.

    A graph whose ``logits`` width differs from ``labels`` would misalign every
    answer with its label name, and one whose ``pooled`` or ``pooled_mid``
    width differs from ``hidden_size`` would break distance-based OOS statistics.
    """
    labels = len(bundle.labels)
    hidden = bundle.manifest["model"]["hidden_size"]
    if output_widths["logits"] != labels:
        raise BundleError(bundle.model_path, f"output 'logits' has {output_widths['logits']} columns "
                                             f"but the manifest lists {labels} labels")
    for name in ("pooled", "pooled_mid"):
        if output_widths[name] != hidden:
            raise BundleError(bundle.model_path, f"output {name!r} has {output_widths[name]} columns "
                                                 f"but the manifest's hidden_size is {hidden}")
