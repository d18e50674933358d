"""The bundle manifest (``manifest.json``): schema, validation, file digests.

A bundle directory (docs/ARCHITECTURE.md) holds ``model.onnx``, optionally
``model.int8.onnx``, ``tokenizer.json``, optionally ``spelling.json``
(``intentvcs.core.spelling``) and this manifest. The manifest is the
bundle's single source of truth for everything that is not a tensor:

``format``, ``format_version``  ``"intentvcs-bundle"``, ``FORMAT_VERSION``
``created_at``, ``intentvcs_version``  provenance of the export run
``labels``            output columns of the graph's ``logits``, in order
``backbone``          backbone the checkpoint was trained from (name or path)
``max_length``        token truncation length (also configured in tokenizer.json)
``decision``          ``intentvcs.core.decision.Decision.to_dict()``
``relations``         relations file object (``intentvcs.core.relations``) or null
``data_fingerprint``  training data fingerprint from the checkpoint, or null
``source``            checkpoint method and training configuration
``evaluation``        the checkpoint's evaluation figures (``metrics``)
``model``             graph facts: inputs, outputs, opset, hidden size, middle layer, exporter
``files``             name -> ``{"sha256", "bytes"}`` for every payload file
``parity``            PyTorch vs ONNX parity report (an export that fails it writes nothing)
``quantization``      int8 report, or null when no int8 graph was exported
``spelling``          ``{"words": n}`` for the spelling normaliser in ``spelling.json``, or null

Validation is strict (unknown keys are errors, as in ``intentvcs.core.dataio``):
within one ``format_version`` the schema is fixed, so an unexpected key means
a writer bug or hand edit. Every error is a ``BundleError`` naming the file
and the field. Pure stdlib + the torch-free core: the serving engine uses it.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

from intentvcs import __version__

from intentvcs.core import atomic
from intentvcs.core.decision import Decision
from intentvcs.core.outputs import GRAPH_OUTPUTS
from intentvcs.core.relations import LabelRelations, RelationsError
from intentvcs.core.spelling import SPELLING_FILE

FORMAT = "intentvcs-bundle"
# 2: the graph gained the ``pooled_mid`` output and ``model`` its ``mid_layer``.
# 3: the spelling normaliser (``spelling`` and ``spelling.json``).
FORMAT_VERSION = 3
MANIFEST_FILE = "manifest.json"
MODEL_FILE = "model.onnx"
INT8_MODEL_FILE = "model.int8.onnx"
TOKENIZER_FILE = "tokenizer.json"


class BundleError(ValueError):
    """A bundle is missing, corrupt or incompatible; names the file and the problem."""

    def __init__(self, path: str | os.PathLike, reason: str, field: str | None = None):
        self.path = str(path)
        self.field = field
        self.reason = reason
        where = f"{self.path}: {field}" if field else self.path
        super().__init__(f"{where}: {reason}")


# --------------------------------------------------------------- field checks
# Each check returns an error message, or None when the value is acceptable.

def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _str(value: Any) -> str | None:
    return None if isinstance(value, str) and value else f"expected a non-empty string, got {value!r}"


def _optional(check: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
    return lambda value: None if value is None else check(value)


def _object(value: Any) -> str | None:
    return None if isinstance(value, dict) else f"expected an object, got {type(value).__name__}"


def _positive_int(value: Any) -> str | None:
    return None if _is_int(value) and value > 0 else f"expected a positive integer, got {value!r}"


def _labels(value: Any) -> str | None:
    if not isinstance(value, list) or not value:
        return f"expected a non-empty list of label names, got {value!r}"
    if not all(isinstance(v, str) and v for v in value):
        return "every label must be a non-empty string"
    if len(set(value)) != len(value):
        return "labels must be unique"
    return None


def _format_version(value: Any) -> str | None:
    if value == FORMAT_VERSION and _is_int(value):
        return None
    return f"this intentvcs reads bundle format_version {FORMAT_VERSION}, got {value!r} (re-export the checkpoint)"


def _decision(value: Any) -> str | None:
    if (error := _object(value)) is not None:
        return error
    try:
        Decision.from_dict(value)
    except (ValueError, TypeError) as exc:
        return f"not a valid decision: {exc}"
    return None


def _relations(value: Any) -> str | None:
    try:
        LabelRelations.from_dict(value)
    except RelationsError as exc:
        return f"not a valid relations object: {exc}"
    return None


def _model(value: Any) -> str | None:
    if (error := _object(value)) is not None:
        return error
    inputs = value.get("inputs")
    if not isinstance(inputs, list) or not inputs or not all(isinstance(v, str) for v in inputs):
        return f"inputs: expected a non-empty list of input names, got {inputs!r}"
    if value.get("outputs") != list(GRAPH_OUTPUTS):
        return f"outputs: expected {list(GRAPH_OUTPUTS)}, got {value.get('outputs')!r}"
    for key in ("opset", "hidden_size"):
        if (error := _positive_int(value.get(key))) is not None:
            return f"{key}: {error}"
    mid_layer = value.get("mid_layer")
    if not _is_int(mid_layer) or mid_layer < 0:
        return f"mid_layer: expected a non-negative integer, got {mid_layer!r}"
    return None


def _files(value: Any) -> str | None:
    if (error := _object(value)) is not None:
        return error
    for name in (MODEL_FILE, TOKENIZER_FILE):
        if name not in value:
            return f"{name} is not listed"
    for name, entry in value.items():
        if name not in (MODEL_FILE, INT8_MODEL_FILE, TOKENIZER_FILE, SPELLING_FILE):
            return f"unexpected file {name!r}"
        if (not isinstance(entry, dict) or set(entry) != {"sha256", "bytes"}
                or not isinstance(entry["sha256"], str) or not _is_int(entry["bytes"])):
            return f"{name}: expected {{'sha256': str, 'bytes': int}}, got {entry!r}"
    return None


def _spelling(value: Any) -> str | None:
    if (error := _object(value)) is not None:
        return error
    if set(value) != {"words"} or (error := _positive_int(value["words"])) is not None:
        return f"expected {{'words': positive int}}, got {value!r}"
    return None


FIELDS: dict[str, Callable[[Any], str | None]] = {
    "format": lambda v: None if v == FORMAT else f"expected {FORMAT!r}, got {v!r}",
    "format_version": _format_version,
    "created_at": _str,
    "intentvcs_version": _str,
    "labels": _labels,
    "backbone": _str,
    "max_length": _positive_int,
    "decision": _decision,
    "relations": _optional(_relations),
    "data_fingerprint": _optional(_str),
    "source": _object,
    "evaluation": _object,
    "model": _model,
    "files": _files,
    "parity": _object,
    "quantization": _optional(_object),
    "spelling": _optional(_spelling),
}


def validate(manifest: Any, path: str | os.PathLike = MANIFEST_FILE) -> dict[str, Any]:
    """Check ``manifest`` against the schema; return it, or raise ``BundleError``.

    ``format`` and ``format_version`` are checked first so that a bundle from a
    newer (or unrelated) writer reports the version problem, not a symptom of it.
    """
    if not isinstance(manifest, dict):
        raise BundleError(path, f"expected a JSON object, got {type(manifest).__name__}")
    for name, check in FIELDS.items():
        if name not in manifest:
            raise BundleError(path, "missing", field=name)
        if (error := check(manifest[name])) is not None:
            raise BundleError(path, error, field=name)
    unknown = sorted(set(manifest) - set(FIELDS))
    if unknown:
        raise BundleError(path, f"unknown field(s) for format_version {FORMAT_VERSION}", field=", ".join(unknown))
    if manifest["decision"]["labels"] != manifest["labels"]:
        raise BundleError(path, "decision labels differ from the manifest's labels", field="decision.labels")
    if (INT8_MODEL_FILE in manifest["files"]) != (manifest["quantization"] is not None):
        raise BundleError(path, f"a quantization report goes with {INT8_MODEL_FILE} and only with it",
                          field="quantization")
    if (SPELLING_FILE in manifest["files"]) != (manifest["spelling"] is not None):
        raise BundleError(path, f"a spelling entry goes with {SPELLING_FILE} and only with it", field="spelling")
    return manifest


def create(**fields: Any) -> dict[str, Any]:
    """A validated manifest from the content ``fields``; format, version and provenance are filled in."""
    return validate({
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "intentvcs_version": __version__,
        **fields,
    }, path="manifest (new)")


def read(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate a manifest file; every failure is a ``BundleError`` naming ``path``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BundleError(path, "missing (not a bundle directory?)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BundleError(path, f"unreadable: {exc}") from None
    try:
        manifest = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BundleError(path, f"not valid JSON: {exc}") from None
    return validate(manifest, path)


def write(path: str | os.PathLike, manifest: Mapping[str, Any]) -> Path:
    """Validate and write ``manifest`` atomically (a writer bug never reaches disk)."""
    return atomic.write_json(path, validate(dict(manifest), path))


# --------------------------------------------------------------- file digests

def file_entry(path: str | os.PathLike) -> dict[str, Any]:
    """``{"sha256": "sha256:<hex>", "bytes": n}`` for one payload file."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {"sha256": f"sha256:{digest.hexdigest()}", "bytes": os.path.getsize(path)}


def check_file(bundle_dir: str | os.PathLike, manifest: Mapping[str, Any], name: str) -> Path:
    """Return the path of payload file ``name`` after checking it against ``manifest["files"]``.

    The size is compared before hashing so a truncated file fails fast, and
    the digest catches any other corruption before ONNX Runtime sees the file.
    """
    path = Path(bundle_dir) / name
    expected = manifest["files"].get(name)
    if expected is None:
        raise BundleError(Path(bundle_dir) / MANIFEST_FILE, f"{name} is not listed", field="files")
    if not path.is_file():
        raise BundleError(path, "missing from the bundle")
    size = path.stat().st_size
    if size != expected["bytes"]:
        raise BundleError(path, f"is {size} bytes, the manifest says {expected['bytes']} (truncated or replaced)")
    if file_entry(path)["sha256"] != expected["sha256"]:
        raise BundleError(path, "sha256 does not match the manifest (corrupt or modified)")
    return path
