"""Versioned file formats: one header check, one wording, one home for field checks.

Every JSON document intentvcs writes for a later run to read starts with two
header fields, ``format`` (what it is) and ``format_version`` (which schema of
it). Six formats exist, each declared once as a ``FileFormat`` next to its
reader and writer: the bundle manifest (``intentvcs.core.manifest``), the
checkpoint's ``checkpoint.json`` (``intentvcs.training.checkpoint``), relations
files (``intentvcs.core.relations``), decision objects (``intentvcs.core.decision``),
``spelling.json`` (``intentvcs.core.spelling``) and the audit report
(``intentvcs.service.audit.report``). Writers take the header from
``FileFormat.stamp()``; readers call ``FileFormat.check(body, source)``, so a
file of another format or version is refused in the same words everywhere,
naming the file and what to do about it::

    bundle/manifest.json: this is a bundle manifest of format_version 2; this intentvcs reads
    format_version 3: re-export the bundle from its checkpoint (intentvcs export)

``check`` then checks the format's declared fields (required or optional
keys, each with a ``Check``; with ``strict``, unknown keys are errors, as the
schema is fixed within one ``format_version``). Each format keeps its own
exception type through an ``ErrorFactory``: ``FormatError`` (the default) and
its subclasses take ``(source, reason, field)`` themselves; ``message_error``
adapts an exception class that takes one message. Pure stdlib.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field as dataclass_field
from typing import Any, Callable, Mapping, Optional

HEADER = ("format", "format_version")

# A field check: an error message for the value, or None when it is acceptable.
Check = Callable[[Any], Optional[str]]
# Builds the exception a format raises from (source, reason, field).
ErrorFactory = Callable[[str, str, Optional[str]], Exception]


def _message(source: str, reason: str, field: str | None) -> str:
    where = ": ".join(part for part in (source, field) if part)
    return f"{where}: {reason}" if where else reason


class FormatError(ValueError):
    """A versioned file is of another format or version, or has a bad field; names the file and the field."""

    def __init__(self, path: str | os.PathLike, reason: str, field: str | None = None):
        self.path = str(path)
        self.field = field
        self.reason = reason
        super().__init__(_message(self.path, reason, field))


def message_error(error: Callable[[str], Exception]) -> ErrorFactory:
    """An ``ErrorFactory`` for an exception class that takes one message (``RelationsError``...)."""
    def make(source: str, reason: str, field: str | None = None) -> Exception:
        return error(_message(source, reason, field))
    return make


# ------------------------------------------------------------------ field checks

def is_int(value: Any) -> bool:
    """An integer that is not a bool (JSON ``true`` is not a version or a count)."""
    return isinstance(value, int) and not isinstance(value, bool)


def anything(value: Any) -> str | None:
    """Any value (the field need only be present)."""
    return None


def json_object(value: Any) -> str | None:
    return None if isinstance(value, Mapping) else f"expected an object, got {type(value).__name__}"


def json_list(value: Any) -> str | None:
    return None if isinstance(value, list) else f"expected a list, got {type(value).__name__}"


def non_empty_string(value: Any) -> str | None:
    return None if isinstance(value, str) and value else f"expected a non-empty string, got {value!r}"


def positive_int(value: Any) -> str | None:
    return None if is_int(value) and value > 0 else f"expected a positive integer, got {value!r}"


def nullable(check: Check) -> Check:
    """``check``, with null also accepted."""
    return lambda value: None if value is None else check(value)


# ------------------------------------------------------------------ formats

@dataclass(frozen=True)
class FileFormat:
    """One versioned format: its header, its fields and what to do with a file of another version.

    ``name`` the ``format`` value; ``version`` the one ``format_version`` this
    code reads and writes; ``what`` the format in words ("bundle manifest");
    ``remedy`` how a user gets a file of this version ("re-export ... (intentvcs
    export)"). ``fields`` maps each body field (header excluded) to its check,
    in checking order; those in ``optional`` may be absent; with ``strict``,
    any other field is an error. ``error`` builds the exception to raise.
    """

    name: str
    version: int
    what: str
    remedy: str
    fields: Mapping[str, Check] = dataclass_field(default_factory=dict)
    optional: frozenset[str] = frozenset()
    strict: bool = False
    error: ErrorFactory = FormatError

    def stamp(self) -> dict[str, Any]:
        """The header a writer puts first: ``{"format": name, "format_version": version}``."""
        return {"format": self.name, "format_version": self.version}

    def check(self, body: Any, source: str = "") -> None:
        """Raise ``error`` naming ``source`` unless ``body`` is a valid object of this format.

        The header is checked first, so a file from another writer or version
        reports that, not a symptom of it; then the fields, in ``fields`` order.
        """
        if not isinstance(body, Mapping):
            raise self.error(source, f"expected {self._a_what()} (a JSON object), got {type(body).__name__}", None)
        if (reason := self._header_problem(body)) is not None:
            raise self.error(source, reason, None)
        for name, check in self.fields.items():
            if name not in body:
                if name in self.optional:
                    continue
                raise self.error(source, "missing", name)
            if (reason := check(body[name])) is not None:
                raise self.error(source, reason, name)
        unknown = sorted(set(body) - set(self.fields) - set(HEADER)) if self.strict else []
        if unknown:
            raise self.error(source, f"unknown field(s) for format_version {self.version}", ", ".join(unknown))

    def _header_problem(self, body: Mapping[str, Any]) -> str | None:
        """What is wrong with ``body``'s ``format`` / ``format_version``, in the uniform wording, or None."""
        found = body.get("format")
        if found != self.name:
            return f"this is not {self._a_what()}: its format is {found!r}, not {self.name!r}"
        version = body.get("format_version")
        if is_int(version) and version == self.version:
            return None
        this = (f"this is {self._a_what()} of format_version {version!r}" if "format_version" in body
                else f"this is {self._a_what()} without a format_version")
        if is_int(version) and version > self.version:
            return f"{this}; this intentvcs reads format_version {self.version} (the file is newer): " + (
                f"upgrade intentvcs, or {self.remedy}")
        return f"{this}; this intentvcs reads format_version {self.version}: {self.remedy}"

    def _a_what(self) -> str:
        return f"{'an' if self.what[:1] in tuple('aeiou') else 'a'} {self.what}"
