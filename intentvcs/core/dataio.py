"""The canonical data format: JSON Lines, one utterance per line.

Each line is an object with
  ``text``   non-empty string (required),
  ``labels`` list of intent names (required; ``[]`` means out of scope),
  ``id``     string (optional),
  ``spans``  list of ``{"start", "end", "label"}`` character spans of entities
             or slots, end exclusive (optional),
  ``meta``   free-form object (optional).
Any other key is an error, so a typo such as ``"label"`` is caught instead of
silently training on nothing. Errors name the file, the line and the reason.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from intentvcs.core import atomic

ALLOWED_KEYS = frozenset({"text", "labels", "id", "spans", "meta"})


class DataError(ValueError):
    """A data file is malformed; the message names file, line and reason."""

    def __init__(self, path: str | os.PathLike, line: int | None, reason: str):
        self.path = str(path)
        self.line = line
        self.reason = reason
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {reason}")


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    label: str

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "label": self.label}


@dataclass(frozen=True)
class Example:
    text: str
    labels: tuple[str, ...]
    id: str | None = None
    spans: tuple[Span, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_out_of_scope(self) -> bool:
        return not self.labels

    def with_labels(self, labels: Iterable[str]) -> "Example":
        return Example(self.text, tuple(labels), self.id, self.spans, dict(self.meta))

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {"text": self.text, "labels": list(self.labels)}
        if self.id is not None:
            row["id"] = self.id
        if self.spans:
            row["spans"] = [s.to_dict() for s in self.spans]
        if self.meta:
            row["meta"] = self.meta
        return row


def parse_row(obj: Any) -> Example:
    """Validate one decoded JSON value; raise ``ValueError`` with the reason."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - ALLOWED_KEYS)
    if unknown:
        raise ValueError(f"unknown key(s) {unknown}; allowed: {sorted(ALLOWED_KEYS)}")
    text = obj.get("text")
    if not isinstance(text, str):
        raise ValueError("'text' must be a string")
    if not text.strip():
        raise ValueError("'text' is empty")
    if "labels" not in obj:
        raise ValueError("'labels' is missing (use [] for out-of-scope)")
    labels = obj["labels"]
    if not isinstance(labels, list) or not all(isinstance(x, str) and x.strip() for x in labels):
        raise ValueError("'labels' must be a list of non-empty strings")
    if len(set(labels)) != len(labels):
        raise ValueError(f"'labels' has duplicates: {labels}")
    ident = obj.get("id")
    if ident is not None and not isinstance(ident, str):
        raise ValueError("'id' must be a string")
    spans = tuple(_parse_span(s, len(text)) for s in obj.get("spans") or [])
    meta = obj.get("meta") or {}
    if not isinstance(meta, dict):
        raise ValueError("'meta' must be an object")
    return Example(text=text, labels=tuple(labels), id=ident, spans=spans, meta=meta)


def _parse_span(obj: Any, text_len: int) -> Span:
    if not isinstance(obj, dict) or not {"start", "end", "label"} <= set(obj):
        raise ValueError("each span needs 'start', 'end' and 'label'")
    start, end, label = obj["start"], obj["end"], obj["label"]
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= text_len):
        raise ValueError(f"span [{start}, {end}) is outside the text (length {text_len})")
    if not isinstance(label, str) or not label:
        raise ValueError("span 'label' must be a non-empty string")
    return Span(start, end, label)


def iter_jsonl(path: str | os.PathLike) -> Iterator[Example]:
    """Yield examples from a JSONL file; blank lines are skipped."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, None, "file not found")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(path, number, f"invalid JSON: {exc.msg}") from None
            try:
                yield parse_row(obj)
            except ValueError as exc:
                raise DataError(path, number, str(exc)) from None


def read_jsonl(path: str | os.PathLike) -> list[Example]:
    examples = list(iter_jsonl(path))
    if not examples:
        raise DataError(path, None, "no rows")
    return examples


def write_jsonl(path: str | os.PathLike, examples: Iterable[Example]) -> Path:
    """Write examples atomically (temp file, then rename)."""
    lines = [json.dumps(e.to_dict(), ensure_ascii=False) for e in examples]
    return atomic.write_text(path, "\n".join(lines) + ("\n" if lines else ""))


def label_inventory(*datasets: Iterable[Example]) -> list[str]:
    """Sorted union of all labels seen in the given datasets."""
    return sorted({label for ds in datasets for ex in ds for label in ex.labels})


def fingerprint(*datasets: Iterable[Example]) -> str:
    """A content hash of datasets (order-sensitive), recorded with every model."""
    import hashlib

    digest = hashlib.sha256()
    for ds in datasets:
        for ex in ds:
            digest.update(json.dumps(ex.to_dict(), ensure_ascii=False, sort_keys=True).encode("utf-8"))
            digest.update(b"\n")
        digest.update(b"\x00")
    return f"sha256:{digest.hexdigest()}"
