"""Versioned file formats (``intentvcs.core.formats``): every reader refuses a file
of another format or version in the same words, naming the file and the remedy,
and every writer's output reads back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from intentvcs.core import manifest
from intentvcs.core.decision import DECISION_FORMAT, Decision, DecisionError
from intentvcs.core.formats import FileFormat, FormatError, message_error, nullable, positive_int
from intentvcs.core.manifest import BUNDLE_FORMAT, BundleError
from intentvcs.core.outputs import GRAPH_OUTPUTS
from intentvcs.core.relations import RELATIONS_FORMAT, LabelRelations, RelationsError, Subset
from intentvcs.core.spelling import SPELLING_FORMAT, Spelling, SpellingError
from intentvcs.service.audit.config import AuditConfig
from intentvcs.service.audit.report import REPORT_FORMAT, AuditReport, Cooccurrence, read_report
from intentvcs.training.checkpoint import CHECKPOINT_FORMAT, read_checkpoint_meta, write_checkpoint_meta

LABELS = ("a", "b")
Edit = Callable[[dict], Any]


def _manifest_fields() -> dict[str, Any]:
    """The content fields of a small valid manifest (checking one needs no graph)."""
    entry = {"sha256": "sha256:" + "0" * 64, "bytes": 1}
    return {
        "name": "tiny", "labels": list(LABELS), "backbone": "tiny", "max_length": 16,
        "decision": Decision(LABELS).to_dict(),
        "relations": None, "data_fingerprint": None, "source": {}, "evaluation": {},
        "model": {"inputs": ["input_ids"], "outputs": list(GRAPH_OUTPUTS), "opset": 17, "hidden_size": 4,
                  "mid_layer": 0},
        "files": {manifest.MODEL_FILE: entry, manifest.TOKENIZER_FILE: entry},
        "parity": {}, "quantization": None, "spelling": None, "entities": None,
    }


def _checkpoint_meta() -> dict[str, Any]:
    return {"labels": list(LABELS), "backbone": "tiny", "max_length": 16, "method": "pu",
            "decision": Decision(LABELS).to_dict(), "metrics": {"valid": {}}}


def _report() -> AuditReport:
    return AuditReport(findings=[], cooccurrence=Cooccurrence([], [], [], []), config=AuditConfig(),
                       known_relations=LabelRelations(LABELS, (Subset("a", "b"),)), labels=list(LABELS),
                       batch_rows=1, audited_rows=0, scored_rows=0)


def _written(path: Path, body: dict, edit: Edit) -> Path:
    """``body`` after ``edit`` as a JSON file at ``path`` (a hand edit or another writer's file)."""
    edit(body)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body))
    return path


# Each reader gets a tmp directory and an edit of the written body; it writes
# the file, reads it and returns its path. The decision has no file of its own:
# it is read inside a bundle manifest, whose error names the manifest.
def _read_bundle(tmp: Path, edit: Edit) -> Path:
    path = _written(tmp / "bundle" / "manifest.json", manifest.create(**_manifest_fields()), edit)
    manifest.read(path)
    return path


def _read_checkpoint(tmp: Path, edit: Edit) -> Path:
    write_checkpoint_meta(tmp, _checkpoint_meta())
    path = _written(tmp / "checkpoint.json", json.loads((tmp / "checkpoint.json").read_text()), edit)
    read_checkpoint_meta(tmp)
    return path


def _read_relations(tmp: Path, edit: Edit) -> Path:
    path = _written(tmp / "relations.json", LabelRelations(LABELS).to_dict(), edit)
    LabelRelations.load(path)
    return path


def _read_decision(tmp: Path, edit: Edit) -> Path:
    body = manifest.create(**_manifest_fields())
    path = _written(tmp / "bundle" / "manifest.json", body, lambda m: edit(m["decision"]))
    manifest.read(path)
    return path


def _read_spelling(tmp: Path, edit: Edit) -> Path:
    path = _written(tmp / "spelling.json", Spelling({"word": 1}).to_dict(), edit)
    Spelling.load(path)
    return path


def _read_report(tmp: Path, edit: Edit) -> Path:
    path = _written(tmp / "report.json", _report().to_dict(), edit)
    read_report(path)
    return path


# kind: (format, reader, error type, what stands between the file and the wording, remedy)
READERS = {
    "bundle": (BUNDLE_FORMAT, _read_bundle, BundleError, "",
               "re-export the bundle from its checkpoint (intentvcs export)"),
    "checkpoint": (CHECKPOINT_FORMAT, _read_checkpoint, FormatError, "", "retrain it (intentvcs train)"),
    "relations": (RELATIONS_FORMAT, _read_relations, RelationsError, "",
                  "rebuild it (intentvcs build-vcs, or intentvcs audit --relations-out)"),
    "decision": (DECISION_FORMAT, _read_decision, BundleError, "decision: not a valid decision: ",
                 "refit the checkpoint (intentvcs refit), then re-export it (intentvcs export)"),
    "spelling": (SPELLING_FORMAT, _read_spelling, SpellingError, "",
                 "refit the checkpoint (intentvcs refit), then re-export it (intentvcs export)"),
    "report": (REPORT_FORMAT, _read_report, FormatError, "", "re-run the audit (intentvcs audit)"),
}


def _refusal(tmp_path: Path, kind: str, edit: Edit) -> str:
    """The wording of ``kind``'s refusal of the edited file, after the file name it must start with."""
    _, read, error, prefix, _ = READERS[kind]
    with pytest.raises(error) as info:
        read(tmp_path, edit)
    (path,) = tmp_path.rglob("*.json")  # each reader writes one file
    message = str(info.value)
    assert message.startswith(f"{path}: {prefix}"), message
    return message[len(f"{path}: {prefix}"):]


def _a(fmt: FileFormat) -> str:
    return f"{'an' if fmt.what[0] in 'aeiou' else 'a'} {fmt.what}"


@pytest.mark.parametrize("kind", READERS)
def test_an_older_version_is_refused_with_the_remedy(tmp_path, kind):
    fmt, *_, remedy = READERS[kind]
    message = _refusal(tmp_path, kind, lambda body: body.update(format_version=fmt.version - 1))
    assert message == (f"this is {_a(fmt)} of format_version {fmt.version - 1}; "
                       f"this intentvcs reads format_version {fmt.version}: {remedy}")


@pytest.mark.parametrize("kind", READERS)
def test_a_newer_version_is_refused_with_upgrade_or_the_remedy(tmp_path, kind):
    fmt, *_, remedy = READERS[kind]
    message = _refusal(tmp_path, kind, lambda body: body.update(format_version=fmt.version + 1))
    assert message == (f"this is {_a(fmt)} of format_version {fmt.version + 1}; this intentvcs reads "
                       f"format_version {fmt.version} (the file is newer): upgrade intentvcs, or {remedy}")


@pytest.mark.parametrize("kind", READERS)
def test_a_missing_version_is_refused_with_the_remedy(tmp_path, kind):
    fmt, *_, remedy = READERS[kind]
    message = _refusal(tmp_path, kind, lambda body: body.pop("format_version"))
    assert message == (f"this is {_a(fmt)} without a format_version; "
                       f"this intentvcs reads format_version {fmt.version}: {remedy}")


@pytest.mark.parametrize("kind", READERS)
@pytest.mark.parametrize("version", ["1", True, 1.0, None])
def test_a_version_that_is_not_an_integer_is_refused(tmp_path, kind, version):
    fmt, *_, remedy = READERS[kind]
    message = _refusal(tmp_path, kind, lambda body: body.update(format_version=version))
    assert message.endswith(f"of format_version {version!r}; this intentvcs reads format_version {fmt.version}: "
                            f"{remedy}")


@pytest.mark.parametrize("kind", READERS)
@pytest.mark.parametrize("other", ["intentvcs-something-else", None])
def test_another_format_is_refused(tmp_path, kind, other):
    fmt, *_ = READERS[kind]
    message = _refusal(tmp_path, kind, lambda body: body.update(format=other))
    assert message == f"this is not {_a(fmt)}: its format is {other!r}, not {fmt.name!r}"


def test_objects_without_a_file_are_refused_in_the_same_words():
    body = {**Decision(LABELS).to_dict(), "format_version": 0}
    with pytest.raises(DecisionError, match=r"^this is a decision of format_version 0; this intentvcs reads "
                                            r"format_version 1: refit the checkpoint \(intentvcs refit\)"):
        Decision.from_dict(body)
    with pytest.raises(RelationsError, match=r"^this is not a relations file: its format is 'x'"):
        LabelRelations.from_dict({**LabelRelations(LABELS).to_dict(), "format": "x"})
    with pytest.raises(ValueError, match=r"^expected a spelling normaliser \(a JSON object\), got list"):
        Spelling.from_dict([])


# ------------------------------------------------------------------ writers

def test_writers_stamp_the_header_first_and_read_back(tmp_path):
    relations = LabelRelations(LABELS, (Subset("a", "b"),), families={"f": LABELS}, details={"k": 1})
    decision = Decision(LABELS, temperature=1.5, relations=relations)
    spelling = Spelling({"word": 3, "other": 1})
    meta = _checkpoint_meta()
    bundle = manifest.create(**_manifest_fields())
    report = _report().to_dict()
    for fmt, body in ((RELATIONS_FORMAT, relations.to_dict()), (DECISION_FORMAT, decision.to_dict()),
                      (SPELLING_FORMAT, spelling.to_dict()), (BUNDLE_FORMAT, bundle), (REPORT_FORMAT, report)):
        assert list(body)[:2] == ["format", "format_version"] and fmt.stamp() == {
            "format": body["format"], "format_version": body["format_version"]}

    relations.save(tmp_path / "relations.json")
    assert LabelRelations.load(tmp_path / "relations.json").to_dict() == relations.to_dict()
    assert Decision.from_dict(json.loads(json.dumps(decision.to_dict()))).to_dict() == decision.to_dict()
    assert Spelling.load(spelling.save(tmp_path / "spelling.json")).counts == spelling.counts
    manifest.write(tmp_path / "manifest.json", bundle)
    assert manifest.read(tmp_path / "manifest.json") == bundle
    (tmp_path / "report.json").write_text(json.dumps(report))
    assert read_report(tmp_path / "report.json") == report
    # A header the metadata carries (a refit re-writes what it read) is replaced by this version's.
    write_checkpoint_meta(tmp_path, {**meta, "format": "old", "format_version": 0})
    assert read_checkpoint_meta(tmp_path) == {**CHECKPOINT_FORMAT.stamp(), **meta}
    assert list(json.loads((tmp_path / "checkpoint.json").read_text()))[:2] == ["format", "format_version"]


def test_the_checkpoint_writer_checks_its_fields_before_writing(tmp_path):
    meta = {k: v for k, v in _checkpoint_meta().items() if k != "method"}
    with pytest.raises(FormatError, match=r"^checkpoint metadata: method: missing$"):
        write_checkpoint_meta(tmp_path, meta)
    assert not (tmp_path / "checkpoint.json").exists()


# ------------------------------------------------------------------ the helper itself

class _Error(ValueError):
    pass


TOY = FileFormat("toy", 2, "toy file", "make a new one (toy make)",
                 fields={"size": positive_int, "note": nullable(positive_int)},
                 optional=frozenset({"note"}), strict=True, error=message_error(_Error))


@pytest.mark.parametrize("body, message", [
    ({"format": "toy", "size": 1}, "without a format_version"),
    ({**TOY.stamp(), "note": 1}, r"^f\.json: size: missing$"),
    ({**TOY.stamp(), "size": 0}, r"^f\.json: size: expected a positive integer, got 0$"),
    ({**TOY.stamp(), "size": 1, "note": "x"}, "note: expected a positive integer"),
    ({**TOY.stamp(), "size": 1, "extra": 1, "more": 2},
     r"^f\.json: extra, more: unknown field\(s\) for format_version 2$"),
    ({**TOY.stamp(), "format_version": 2.0, "size": 1}, "of format_version 2.0; "),
    ("text", r"^f\.json: expected a toy file \(a JSON object\), got str$"),
])
def test_field_checks(body, message):
    with pytest.raises(_Error, match=message):
        TOY.check(body, "f.json")


def test_optional_nullable_and_lenient_fields_pass():
    TOY.check({**TOY.stamp(), "size": 1}, "f.json")
    TOY.check({**TOY.stamp(), "size": 1, "note": None}, "f.json")
    lenient = FileFormat("toy", 2, "toy file", "-", fields={"size": positive_int})
    lenient.check({**lenient.stamp(), "size": 1, "anything": "else"})


def test_format_error_names_the_file_and_the_field():
    error = FormatError("dir/f.json", "missing", "size")
    assert (str(error), error.path, error.field, error.reason) == ("dir/f.json: size: missing", "dir/f.json",
                                                                   "size", "missing")
    assert str(FormatError("dir/f.json", "bad")) == "dir/f.json: bad"
    assert issubclass(BundleError, FormatError) and issubclass(SpellingError, FormatError)
