"""The bundle manifest (``manifest.json``): schema, validation, file digests.

A bundle directory (docs/ARCHITECTURE.md) holds ``model.onnx``, optionally
``model.int8.onnx``, ``tokenizer.json``, optionally ``spelling.json``
(``intentvcs.core.spelling``), optionally ``references.jsonl`` (``intentvcs.core.references``)
and this manifest. The manifest is the
bundle's single source of truth for everything that is not a tensor:

``format``, ``format_version``  ``"intentvcs-bundle"``, ``FORMAT_VERSION``, as declared by ``BUNDLE_FORMAT``
``created_at``, ``intentvcs_version``  provenance of the export run
``name``              what people call the model (``intentvcs export --name``); the
                      ``digest`` below is what tells two bundles apart
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
``quantization``      int8 report, or null when no int8 graph was exported; its ``gate`` (the
                      accuracy gate, or null) decides whether the service's ``auto`` mode serves int8
``spelling``          ``{"words": n}`` for the spelling normaliser in ``spelling.json``, or null
``entities``          ``{"tags": [...], "types": [...]}`` of the entity head (``intentvcs.core.entities``),
                      whose ``tag_logits`` the graph then also outputs; null without one
``references``        ``{"rows", "intents", "rows_per_intent", "bytes"}`` of ``references.jsonl``, the
                      audit's sample of the training rows (``intentvcs.core.references``), or null;
                      optional (bundles exported before it existed have none)
``digest``            ``"sha256:<hex>"`` of every other field (``content_digest``); as the
                      payload files' digests are among them, it names the whole bundle

Validation is strict (unknown keys are errors, as in ``intentvcs.core.dataio``):
within one ``format_version`` the schema is fixed, so an unexpected key means
a writer bug or hand edit. The digest catches the edits the schema cannot:
two labels swapped consistently in ``labels`` and ``decision`` make a valid
manifest that answers every question with the wrong intent. The checks run through ``intentvcs.core.formats``
(``BUNDLE_FORMAT``), so a manifest of another version is refused in the words
every versioned file uses; every error is a ``BundleError`` naming the file
and the field. Pure stdlib + the torch-free core: the serving engine uses it.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from intentvcs import __version__

from intentvcs.core import atomic
from intentvcs.core.decision import Decision
from intentvcs.core.formats import (FileFormat, FormatError, is_int, json_object, non_empty_string, nullable,
                                    positive_int)
from intentvcs.core.entities import OUTSIDE, entity_types, tag_vocabulary
from intentvcs.core.outputs import BOUNDARY_OUTPUT, GRAPH_OUTPUTS, TAG_OUTPUT
from intentvcs.core.references import REFERENCES_FILE
from intentvcs.core.relations import LabelRelations, RelationsError
from intentvcs.core.spelling import SPELLING_FILE

MANIFEST_FILE = "manifest.json"
# A checkpoint's own file (``intentvcs.training.checkpoint.META_FILE``; named here, as this module imports no
# training code): a folder holding it where a bundle is expected was passed as --bundle by mistake.
CHECKPOINT_META = "checkpoint.json"
MODEL_FILE = "model.onnx"
INT8_MODEL_FILE = "model.int8.onnx"
TOKENIZER_FILE = "tokenizer.json"
# Every file a bundle folder holds, and nothing else (the manifest lists the others).
BUNDLE_FILES = (MANIFEST_FILE, MODEL_FILE, INT8_MODEL_FILE, TOKENIZER_FILE, SPELLING_FILE, REFERENCES_FILE)


class BundleError(FormatError):
    """A bundle is missing, corrupt or incompatible; names the file (``path``), the ``field`` and the problem."""


# --------------------------------------------------------------- field checks
# Each check returns an error message, or None when the value is acceptable
# (``intentvcs.core.formats.Check``); the generic ones are imported from there.

def _labels(value: Any) -> str | None:
    if not isinstance(value, list) or not value:
        return f"expected a non-empty list of label names, got {value!r}"
    if not all(isinstance(v, str) and v for v in value):
        return "every label must be a non-empty string"
    if len(set(value)) != len(value):
        return "labels must be unique"
    return None


def _decision(value: Any) -> str | None:
    if (error := json_object(value)) is not None:
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
    if (error := json_object(value)) is not None:
        return error
    inputs = value.get("inputs")
    if not isinstance(inputs, list) or not inputs or not all(isinstance(v, str) for v in inputs):
        return f"inputs: expected a non-empty list of input names, got {inputs!r}"
    if value.get("outputs") not in [[*GRAPH_OUTPUTS, *tags, *boundaries] for tags in ([], [TAG_OUTPUT])
                                    for boundaries in ([], [BOUNDARY_OUTPUT])]:
        return f"outputs: expected {list(GRAPH_OUTPUTS)}, optionally followed by {TAG_OUTPUT!r}, then optionally " \
               f"by {BOUNDARY_OUTPUT!r}, got {value.get('outputs')!r}"
    for key in ("opset", "hidden_size"):
        if (error := positive_int(value.get(key))) is not None:
            return f"{key}: {error}"
    mid_layer = value.get("mid_layer")
    if not is_int(mid_layer) or mid_layer < 0:
        return f"mid_layer: expected a non-negative integer, got {mid_layer!r}"
    return None


def _files(value: Any) -> str | None:
    if (error := json_object(value)) is not None:
        return error
    for name in (MODEL_FILE, TOKENIZER_FILE):
        if name not in value:
            return f"{name} is not listed"
    for name, entry in value.items():
        if name not in BUNDLE_FILES or name == MANIFEST_FILE:
            return f"unexpected file {name!r}"
        if (not isinstance(entry, dict) or set(entry) != {"sha256", "bytes"}
                or not isinstance(entry["sha256"], str) or not is_int(entry["bytes"])):
            return f"{name}: expected {{'sha256': str, 'bytes': int}}, got {entry!r}"
    return None


def _quantization(value: Any) -> str | None:
    # Free-form report, except the accuracy gate the service's "auto" mode acts on
    # (intentvcs.service.bundle.serving_graph): null (not gated) or an object of
    # figures, each with its verdict.
    if (error := json_object(value)) is not None:
        return error
    gate = value.get("gate")
    if gate is None:
        return None
    figures = gate.get("figures") if isinstance(gate, dict) else None
    if not isinstance(figures, dict) or not isinstance(gate.get("passed"), bool) \
            or positive_int(gate.get("rows")) is not None \
            or not all(isinstance(f, dict) and isinstance(f.get("passed"), bool) for f in figures.values()):
        return f"gate: expected null or {{'rows': n, 'figures': {{name: {{..., 'passed': bool}}}}, 'passed': bool}}, " \
               f"got {gate!r}"
    if gate["passed"] != (bool(figures) and all(f["passed"] for f in figures.values())):
        return "gate: 'passed' disagrees with its figures"
    return None


def _spelling(value: Any) -> str | None:
    if (error := json_object(value)) is not None:
        return error
    if set(value) != {"words"} or (error := positive_int(value["words"])) is not None:
        return f"expected {{'words': positive int}}, got {value!r}"
    return None


def _entities(value: Any) -> str | None:
    if (error := json_object(value)) is not None:
        return error
    tags, types = value.get("tags"), value.get("types")
    if set(value) != {"tags", "types"} or not isinstance(types, list) or not types \
            or not all(isinstance(t, str) and t for t in types):
        return f"expected {{'tags': [...], 'types': [non-empty names]}}, got {value!r}"
    if tags != tag_vocabulary(types) or entity_types(tags) != types:
        return f"tags must be {OUTSIDE!r} then B- and I- of each type, types sorted; got {tags!r}"
    return None


def _references(value: Any) -> str | None:
    if not isinstance(value, dict) or set(value) != {"rows", "intents", "rows_per_intent", "bytes"}:
        return "expected {rows, intents, rows_per_intent, bytes}"
    if not all(is_int(v) and v >= 0 for v in value.values()):
        return "expected non-negative integers"
    return None


def _digest(value: Any) -> str | None:
    if not isinstance(value, str) or not value.startswith("sha256:") or len(value) != len("sha256:") + 64:
        return f"expected 'sha256:' and 64 hex digits, got {value!r}"
    return None


BUNDLE_FORMAT = FileFormat(
    # 2: the graph gained the ``pooled_mid`` output and ``model`` its ``mid_layer``.
    # 3: the spelling normaliser (``spelling`` and ``spelling.json``).
    # 4: ``digest``, the manifest's own content hash, checked at load, and ``name``.
    # 5: ``entities`` and the graph's optional ``tag_logits`` output.
    "intentvcs-bundle", 5, "bundle manifest", "re-export the bundle from its checkpoint (intentvcs export)",
    fields={
        "created_at": non_empty_string,
        "intentvcs_version": non_empty_string,
        "name": non_empty_string,
        "labels": _labels,
        "backbone": non_empty_string,
        "max_length": positive_int,
        "decision": _decision,
        "relations": nullable(_relations),
        "data_fingerprint": nullable(non_empty_string),
        "source": json_object,
        "evaluation": json_object,
        "model": _model,
        "files": _files,
        "parity": json_object,
        "quantization": nullable(_quantization),
        "spelling": nullable(_spelling),
        "entities": nullable(_entities),
        "references": nullable(_references),
        "digest": _digest,
    },
    # Added within version 5, absent from the bundles written before it.
    optional=frozenset({"references"}),
    strict=True,
    error=BundleError,
)

# A folder of these alone, its manifest of the bundle format, is an earlier bundle a new export may replace.
BUNDLE_OUTPUT = atomic.OutputKind(MANIFEST_FILE, BUNDLE_FILES, BUNDLE_FORMAT.name)
FORMAT_VERSION = BUNDLE_FORMAT.version  # the version this code reads and writes, for callers


def validate(manifest: Any, path: str | os.PathLike = MANIFEST_FILE) -> dict[str, Any]:
    """Check ``manifest`` against the schema; return it, or raise ``BundleError``.

    ``format`` and ``format_version`` are checked first (``BUNDLE_FORMAT.check``)
    so that a bundle from a newer (or unrelated) writer reports the version
    problem, not a symptom of it; then every field, then their agreement.
    """
    BUNDLE_FORMAT.check(manifest, str(path))
    if manifest["decision"]["labels"] != manifest["labels"]:
        raise BundleError(path, "decision labels differ from the manifest's labels", field="decision.labels")
    if (INT8_MODEL_FILE in manifest["files"]) != (manifest["quantization"] is not None):
        raise BundleError(path, f"a quantization report goes with {INT8_MODEL_FILE} and only with it",
                          field="quantization")
    if (SPELLING_FILE in manifest["files"]) != (manifest["spelling"] is not None):
        raise BundleError(path, f"a spelling entry goes with {SPELLING_FILE} and only with it", field="spelling")
    if (TAG_OUTPUT in manifest["model"]["outputs"]) != (manifest["entities"] is not None):
        raise BundleError(path, f"an entities entry goes with the graph output {TAG_OUTPUT!r} and only with it",
                          field="entities")
    if (REFERENCES_FILE in manifest["files"]) != (manifest.get("references") is not None):
        raise BundleError(path, f"a references entry goes with {REFERENCES_FILE} and only with it",
                          field="references")
    # Last: a manifest with a bad field reports the field, a valid-looking edit the digest.
    if manifest["digest"] != content_digest(manifest, path):
        raise BundleError(path, "does not match the manifest's content: the manifest was edited after export "
                                "(re-export the bundle from its checkpoint: intentvcs export)", field="digest")
    return manifest


def _finite_json(value: Any) -> bool:
    """Whether ``value`` has a JSON form (``content_digest``'s): no NaN or Infinity anywhere in it."""
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        return False
    return True


def content_digest(manifest: Mapping[str, Any], path: str | os.PathLike = MANIFEST_FILE) -> str:
    """``"sha256:<hex>"`` of the manifest's fields but ``digest``, as canonical JSON (sorted keys, no spaces).

    A field holding NaN or Infinity has no canonical JSON: ``BundleError`` naming ``path`` and the field.
    """
    body = {key: value for key, value in manifest.items() if key != "digest"}
    try:
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:
        # A figure written as NaN, or a number such as 1e400, which json.loads reads as Infinity past ``read``'s
        # literal check: json's own words ("Out of range float values...") name neither the file nor the field.
        field = next(key for key, value in body.items() if not _finite_json(value))
        raise BundleError(path, "holds a number JSON cannot carry (NaN, or Infinity: one too large for a float); "
                                "re-export the bundle from its checkpoint (intentvcs export)", field=field) from None
    return f"sha256:{hashlib.sha256(canonical.encode('utf-8')).hexdigest()}"


def seal(manifest: Mapping[str, Any], path: str | os.PathLike = MANIFEST_FILE) -> dict[str, Any]:
    """``manifest`` with its ``digest`` (re)computed: what the exporter writes."""
    return {**manifest, "digest": content_digest(manifest, path)}


def create(**fields: Any) -> dict[str, Any]:
    """A validated, sealed manifest from the content ``fields``; format, version and provenance are filled in."""
    return validate(seal({
        **BUNDLE_FORMAT.stamp(),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "intentvcs_version": __version__,
        **fields,
    }, "manifest (new)"), path="manifest (new)")


def read(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate a manifest file; every failure is a ``BundleError`` naming ``path``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        folder = Path(path).parent
        if (folder / CHECKPOINT_META).is_file():
            raise BundleError(path, f"missing: {folder} is a checkpoint (it holds {CHECKPOINT_META}), not a "
                                    f"bundle; pass --checkpoint {folder}, or export it first (intentvcs export "
                                    f"--checkpoint {folder} --out BUNDLE)") from None
        raise BundleError(path, "missing (not a bundle directory?)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BundleError(path, f"unreadable: {exc}") from None
    try:
        # NaN and Infinity are no JSON (and the digest's canonical form refuses them).
        manifest = json.loads(text, parse_constant=_not_json)
    except ValueError as exc:  # JSONDecodeError included
        raise BundleError(path, f"not valid JSON: {exc}") from None
    return validate(manifest, path)


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not a JSON value")


def write(path: str | os.PathLike, manifest: Mapping[str, Any]) -> Path:
    """Validate and write ``manifest`` atomically (a writer bug never reaches disk)."""
    return atomic.write_json(path, validate(dict(manifest), path))


# --------------------------------------------------------------- file digests

def file_digest(path: str | os.PathLike) -> str:
    """``"sha256:<hex>"`` of a file's bytes, read in blocks (what bundles and data cards record)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return f"sha256:{digest.hexdigest()}"


def file_entry(path: str | os.PathLike) -> dict[str, Any]:
    """``{"sha256": "sha256:<hex>", "bytes": n}`` for one payload file."""
    return {"sha256": file_digest(path), "bytes": os.path.getsize(path)}


def check_listed(bundle_dir: str | os.PathLike, manifest: Mapping[str, Any]) -> None:
    """Every payload file the manifest lists is present with its size (not hashed: ``check_file`` hashes
    what is read). A bundle missing the graph it does not serve now would fail only when someone
    switches graphs, or on another machine."""
    for name, expected in manifest["files"].items():
        path = Path(bundle_dir) / name
        if not path.is_file():
            raise BundleError(path, "missing from the bundle (the manifest lists it)")
        if path.stat().st_size != expected["bytes"]:
            raise BundleError(path, f"is {path.stat().st_size} bytes, the manifest says {expected['bytes']} "
                                    "(truncated or replaced)")


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
