"""Checkpoint directories: the contract between training and export.

Layout (docs/ARCHITECTURE.md): ``encoder/`` (HF weights + tokenizer),
``head.safetensors``, ``tagger.safetensors`` (an entity head, when the training rows carry spans),
``boundary.safetensors`` (a boundary head, when trained with chains), ``checkpoint.json``,
``spelling.json`` (``intentvcs.core.spelling``; absent when training turned it off), and ``references.jsonl``, the
audit's sample of the training rows (``intentvcs.core.references``). Written into a temporary sibling
and renamed, so a crashed run never leaves a loadable half-checkpoint.
``checkpoint.json`` is a versioned file, ``CHECKPOINT_FORMAT``
(``intentvcs.core.formats``): its header and the fields export needs are
checked when it is written and when it is read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from intentvcs.core import atomic
from intentvcs.core.dataio import Example, read_utf8
from intentvcs.core.formats import HEADER, FileFormat, anything, is_int, json_object, non_empty_string, nullable
from intentvcs.core.references import REFERENCES_FILE, write_references
from intentvcs.core.spelling import SPELLING_FILE, Spelling
from intentvcs.training.config import METHOD_NAMES, MIN_LENGTH


def _max_length(value: Any) -> str | None:
    """As training allows it (``TrainConfig``); the backbone's position limit is checked where it loads
    (``max_length_problem``)."""
    return None if is_int(value) and value >= MIN_LENGTH else (
        f"expected an integer >= {MIN_LENGTH} (the two special tokens and one word), got {value!r}")


def _method(value: Any) -> str | None:
    """Why ``value`` is no training method of this version (a checkpoint of a newer one), or None."""
    return None if value in METHOD_NAMES else f"expected one of {list(METHOD_NAMES)}, got {value!r}"


def _entities(value: Any) -> str | None:
    """``entities`` as training writes it (``training.pipeline._entities_summary``): an object whose ``tags`` is
    the entity head's tag vocabulary, a list of strings (its other fields are a report); the export checks the
    tags against the head's outputs and the bundle's form of them."""
    if (error := json_object(value)) is not None:
        return error
    tags = value.get("tags")
    if not isinstance(tags, list) or not all(isinstance(tag, str) and tag for tag in tags):
        return f"tags: expected a list of tag names (strings), got {tags!r}"
    return None


# A checkpoint's metadata cannot be refitted when its own header is stale
# (``intentvcs refit`` reads it first), so the remedy is a new training run.
# ``backbone``, ``metrics`` and ``entities`` become the bundle's ``backbone``, ``evaluation`` and ``entities``:
# checked here, a hand-edited value is refused naming checkpoint.json when it is read, not the bundle's field
# after the whole export. ``metrics`` and ``entities`` may be absent (checkpoints of earlier versions).
CHECKPOINT_FORMAT = FileFormat(
    "intentvcs-checkpoint", 1, "checkpoint", "retrain it (intentvcs train)",
    fields={"labels": anything, "backbone": non_empty_string, "max_length": _max_length,
            "method": _method, "decision": anything, "metrics": json_object, "entities": nullable(_entities)},
    optional=frozenset({"metrics", "entities"}),
)
META_FILE = "checkpoint.json"
# What a checkpoint folder holds (training.model writes the encoder folder and the heads' safetensors):
# an existing folder of nothing else may be replaced by a new checkpoint (atomic.check_replaceable).
CHECKPOINT_HOLDS = (META_FILE, "encoder", "*.safetensors", SPELLING_FILE, REFERENCES_FILE)
CHECKPOINT_OUTPUT = atomic.OutputKind(META_FILE, CHECKPOINT_HOLDS, CHECKPOINT_FORMAT.name)


def write_checkpoint(path: str | os.PathLike, model, tokenizer, meta: dict[str, Any],
                     spelling: Spelling | None = None, force: bool = False,
                     references: Sequence[Example] = (), also: Mapping[str | os.PathLike, str] | None = None) -> Path:
    """Save model, tokenizer, ``meta`` (labels, decision, config, metrics...), the spelling normaliser
    and the audit's reference rows (``intentvcs.core.references``; none written when empty).

    An existing ``path`` is replaced when it is an earlier checkpoint or empty,
    any other folder only with ``force`` (``atomic.check_replaceable``).
    ``also``: more files of the same command (path -> text, e.g. ``train --result``), written with the
    checkpoint, all or none (``atomic.directory``'s ``also``).
    """
    body = _stamped(meta)  # checked before anything is written
    with atomic.directory(path, CHECKPOINT_OUTPUT, force, also=also) as tmp:
        model.save(tmp, tokenizer)
        write_checkpoint_spelling(tmp, spelling)
        if references:
            write_references(tmp, references)
        write_checkpoint_meta(tmp, body)
    return Path(path)


def write_checkpoint_spelling(path: str | os.PathLike, spelling: Spelling | None) -> None:
    """Write ``spelling.json`` atomically, or remove it when ``spelling`` is None."""
    target = Path(path) / SPELLING_FILE
    if spelling is not None:
        spelling.save(target)
    else:
        target.unlink(missing_ok=True)


def write_refitted(path: str | os.PathLike, meta: dict[str, Any], spelling: Spelling | None) -> None:
    """Rewrite ``checkpoint.json`` and ``spelling.json`` of checkpoint ``path`` (``intentvcs refit``), both or
    neither (``atomic.staged``: a failed write changes neither; only a process killed between the two
    renames could leave one): ``spelling.json`` removed when ``spelling`` is None (the decision was
    fitted without one)."""
    atomic.write_files({
        Path(path) / SPELLING_FILE: None if spelling is None else spelling.to_text(),
        Path(path) / META_FILE: _meta_text(meta)})


def read_checkpoint_spelling(path: str | os.PathLike) -> Spelling | None:
    """The checkpoint's spelling normaliser; None when it has none (trained without, or before it existed)."""
    target = Path(path) / SPELLING_FILE
    return Spelling.load(target) if target.is_file() else None


def write_checkpoint_meta(path: str | os.PathLike, meta: dict[str, Any]) -> None:
    """(Re)write ``checkpoint.json`` alone, atomically (``intentvcs refit`` changes no weights)."""
    atomic.write_text(Path(path) / META_FILE, _meta_text(meta))


def _meta_text(meta: dict[str, Any]) -> str:
    return json.dumps(_stamped(meta), indent=2, ensure_ascii=False) + "\n"


def _stamped(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` under this version's header (a header it carries is replaced), checked."""
    body = {**CHECKPOINT_FORMAT.stamp(), **{k: v for k, v in meta.items() if k not in HEADER}}
    CHECKPOINT_FORMAT.check(body, "checkpoint metadata")
    return body


def read_checkpoint_meta(path: str | os.PathLike) -> dict[str, Any]:
    """Load and check ``checkpoint.json``; errors name the file and the problem."""
    meta_path = Path(path) / META_FILE
    if not meta_path.is_file():
        raise FileNotFoundError(f"{meta_path}: not a checkpoint (missing {META_FILE})")
    try:
        meta = json.loads(read_utf8(meta_path))  # a byte that is not UTF-8: a DataError naming the file
    except json.JSONDecodeError as exc:
        raise ValueError(f"{meta_path}: invalid JSON: {exc.msg}") from None
    CHECKPOINT_FORMAT.check(meta, str(meta_path))
    return meta


def training_seconds(meta: dict[str, Any]) -> float:
    """How long the checkpoint's training took; older checkpoints lack the total, so their epochs' sum."""
    if "train_seconds" in meta:
        return meta["train_seconds"]
    return round(sum(h["seconds"] for h in meta["history"]), 1)


# Encoders whose position ids start after the padding index (transformers' create_position_ids_from_input_ids:
# padding_idx + 1, + 2, ...): pad_token_id + 1 rows of their position table are never a token's, so
# RoBERTa's max_position_embeddings 514 (padding index 1) holds 512 tokens.
OFFSET_POSITIONS = frozenset({"roberta", "roberta-prelayernorm", "xlm-roberta", "xlm-roberta-xl", "camembert",
                              "data2vec-text", "ibert", "longformer", "luke", "mpnet", "xmod"})


def position_limit(encoder_config) -> int | None:
    """How many tokens (special tokens included) the encoder of ``encoder_config`` reads: its
    ``max_position_embeddings`` less the positions a RoBERTa-style encoder skips (``OFFSET_POSITIONS``);
    None when the configuration names no limit."""
    limit = getattr(encoder_config, "max_position_embeddings", None)
    if limit is None or getattr(encoder_config, "model_type", None) not in OFFSET_POSITIONS:
        return limit
    pad = getattr(encoder_config, "pad_token_id", None)
    return limit - ((1 if pad is None else pad) + 1)


def max_length_problem(max_length: int, encoder_config) -> str | None:
    """Why ``max_length`` does not fit the encoder of ``encoder_config``, or None: longer inputs would be cut
    by nothing and overflow its position table at inference (``position_limit``). Training checks it before it
    starts, the export before it loads anything more (``read_checkpoint_meta`` checked the rest)."""
    limit = position_limit(encoder_config)
    if limit is not None and max_length > limit:
        return f"expected at most {limit}, the encoder's position limit, got {max_length}"
    return None


def checkpoint_tags(meta: dict[str, Any], source: str | os.PathLike = META_FILE) -> list[str]:
    """The entity head's tag vocabulary (``intentvcs.core.entities``); [] for a model without one.

    ``meta`` as ``read_checkpoint_meta`` returns it has been checked; one built otherwise with a bad
    ``entities`` is refused here too (``ValueError`` naming ``source``, the file it came from)."""
    entities = meta.get("entities")
    if entities is None:
        return []
    if (reason := _entities(entities)) is not None:
        raise CHECKPOINT_FORMAT.error(str(source), reason, "entities")
    return list(entities["tags"])
