"""The audit report: findings, the co-occurrence matrix and the proposed fix.

``AuditReport.to_dict()`` is the JSON document described by
``report.schema.json`` (next to this module; JSON Schema draft 2020-12), a
versioned file (``REPORT_FORMAT``, ``intentvcs.core.formats``) that
``read_report`` reads back, e.g. to re-render it. The proposed fix is data:

* duplicate N of E: ``label_map`` ``{N: E}`` (merge N's rows into E before
  training), and the relation ``duplicate(N, E)`` for teams that keep both
  names (closure then accepts them together);
* subset N of E: ``subset(child=N, parent=E)``;
* superset N of E1..Ek: ``subset(child=Ei, parent=N)`` for each part;
* composite N of parts: ``composite(N, parts)``, keeping both as multi-label;
* novel: nothing;
* two new intents that duplicate each other (``new_pairs``): ``label_map``
  ``{second: first}`` and ``duplicate(first, second)``. Pairs that share an
  intent join one family (a duplicate is an equivalence: ``a = c`` and
  ``b = c`` make ``a``, ``b`` and ``c`` one intent), merged into one name:
  the existing intent a member merges into, else the first name of the first
  pair listed; the report's ``label_map`` is then applied once, no name it
  maps to being mapped itself. Each pair's own ``fix.label_map`` is the
  report's for the pair's two names.
``fix.relations`` is a complete relations file (``intentvcs.core.relations``): the
bundle's known relations plus the proposed ones over the bundle's labels and
the new intents. Written next to a bundle and stored in its manifest, it is
what the decision layer closes over at inference.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from intentvcs.core.formats import FileFormat
from intentvcs.core.relations import Composite, Duplicate, LabelRelations, Relation, Subset, extend_relations
from intentvcs.service.audit.config import RELATIONS, SEVERITIES, AuditConfig
from intentvcs.service.audit.containment import Count, TwoSample
from intentvcs.service.audit.rules import Verdict
from intentvcs.service.audit.slots import EntityPivot

# The schema's "format" and "format_version" enums follow this (tests check written reports against it).
REPORT_FORMAT = FileFormat("intentvcs-audit", 1, "audit report", "re-run the audit (intentvcs audit)")
SCHEMA_PATH = Path(__file__).with_name("report.schema.json")

_ACTIONS = {"duplicate": "merge", "subset": "link", "superset": "link", "composite": "multi_label",
            "novel": "none"}


def read_report(path: str | os.PathLike) -> dict[str, Any]:
    """A saved report (``AuditReport.to_dict()`` as JSON); one of another format or version is refused."""
    body = json.loads(Path(path).read_text(encoding="utf-8"))
    REPORT_FORMAT.check(body, str(path))
    return body


def proposed_relations(verdict: Verdict) -> list[Relation]:
    """The relations that record ``verdict`` (see the module docstring)."""
    new, existing = verdict.intent, verdict.existing
    if verdict.relation == "duplicate":
        return [Duplicate(new, existing[0])]
    if verdict.relation == "subset":
        return [Subset(child=new, parent=existing[0])]
    if verdict.relation == "superset":
        return [Subset(child=name, parent=new) for name in existing]
    if verdict.relation == "composite":
        return [Composite(new, tuple(existing))]
    return []


@dataclass(frozen=True)
class PairContainment:
    """Both directions between a new intent and one candidate existing intent."""

    existing: str
    new_in_existing: Count
    existing_in_new: Count | None
    reference: str | None  # where E's rows came from: "training", "model", "batch" or None
    entity_pivot: EntityPivot | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"existing": self.existing, "new_in_existing": self.new_in_existing.to_dict(),
                "existing_in_new": None if self.existing_in_new is None else self.existing_in_new.to_dict(),
                "entity_pivot": None if self.entity_pivot is None else self.entity_pivot.to_dict(),
                "reference": self.reference}


@dataclass(frozen=True)
class Finding:
    """One new intent's verdict with its figures and evidence.

    ``out_of_scope`` counts N's rows that the served decision would answer as
    out of scope (containment itself sets the OOS verdict aside).
    """

    verdict: Verdict
    rows: int         # the new intent's distinct rows in the batch (repeats set aside)
    scored_rows: int  # how many of them the model scored (at most AuditConfig.intent_cap)
    containment: tuple[PairContainment, ...]
    multi_intent: Count
    out_of_scope: Count
    examples: list[dict[str, Any]]
    counter_examples: list[dict[str, Any]]
    relabel: list[dict[str, Any]]

    def fix(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "action": _ACTIONS[v.relation],
            "label_map": {v.intent: v.existing[0]} if v.relation == "duplicate" else {},
            "relations": [r.to_dict() for r in proposed_relations(v)],
        }

    def to_dict(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "intent": v.intent,
            "relation": v.relation,
            "existing": list(v.existing),
            "severity": v.severity,
            "borderline": v.borderline,
            "rationale": v.rationale,
            "rows": self.rows,
            "scored_rows": self.scored_rows,
            "statistic": None if v.statistic is None else v.statistic.to_dict(),
            "multi_intent": self.multi_intent.to_dict(),
            "out_of_scope": self.out_of_scope.to_dict(),
            "containment": [c.to_dict() for c in self.containment],
            "examples": self.examples,
            "counter_examples": self.counter_examples,
            "relabel": self.relabel,
            "fix": self.fix(),
        }


@dataclass(frozen=True)
class NewPair:
    """Two new intents of the batch that duplicate each other: a version
    conflict inside the upgrade itself, which no existing intent reveals.

    ``first_in_second`` / ``second_in_first`` are the kNN containment
    estimates both ways; ``test`` is the two-sample test that could not tell
    their utterances apart.
    """

    first: str
    second: str
    relation: str
    first_in_second: Count
    second_in_first: Count
    test: TwoSample
    severity: str

    def to_dict(self, label_map: dict[str, str] | None = None) -> dict[str, Any]:
        """``label_map``: the report's (``AuditReport.to_dict``), of which the pair's fix takes its two names'
        entries; without it, the pair alone: ``{second: first}``. Alone, the pair's fix contradicted the report's
        where the pair's family merges elsewhere: two new duplicates of E said "merge the second into the first"
        while the report merged both into E, and pairs b = c, a = b said ``{b: a}`` of ``{c: b, a: b}``."""
        merges = {self.second: self.first} if label_map is None else {
            name: label_map[name] for name in (self.first, self.second) if name in label_map}
        return {"first": self.first, "second": self.second, "relation": self.relation,
                "severity": self.severity, "first_in_second": self.first_in_second.to_dict(),
                "second_in_first": self.second_in_first.to_dict(), "same_distribution": self.test.to_dict(),
                "fix": {"action": "merge", "label_map": merges,
                        "relations": [Duplicate(self.first, self.second).to_dict()]}}


@dataclass(frozen=True)
class Cooccurrence:
    """contain(N->E) counts: rows ``new`` intents, columns ``existing`` intents.

    Columns are the existing intents accepted on at least one new intent's
    row, ordered by their highest rate; ``counts[i][j]`` of ``rows[i]``.
    """

    new: list[str]
    existing: list[str]
    counts: list[list[int]]
    rows: list[int]

    def to_dict(self) -> dict[str, Any]:
        rates = [[round(k / n, 4) if n else 0.0 for k in line] for line, n in zip(self.counts, self.rows)]
        return {"new": self.new, "existing": self.existing, "rows": self.rows, "counts": self.counts,
                "rate": rates}


@dataclass(frozen=True)
class AuditReport:
    """The result of ``audit_batch``; ``to_dict()`` is the JSON report.

    ``missing_references`` lists the candidate existing intents with no rows in
    the training sample or the batch, whose contain(E->N) is therefore unknown.
    """

    findings: list[Finding]
    cooccurrence: Cooccurrence
    config: AuditConfig
    known_relations: LabelRelations | None
    labels: Sequence[str]
    batch_rows: int
    audited_rows: int
    scored_rows: int
    duplicate_rows: int = 0  # batch rows set aside as repeats of an earlier row (same text, same labels)
    missing_references: list[str] = field(default_factory=list)
    new_pairs: list[NewPair] = field(default_factory=list)
    engine: dict[str, Any] = field(default_factory=dict)
    timing_s: dict[str, float] = field(default_factory=dict)

    @property
    def severity(self) -> str:
        """The most severe finding's severity (``info`` without findings)."""
        levels = [SEVERITIES.index(f.verdict.severity) for f in self.findings]
        levels += [SEVERITIES.index(p.severity) for p in self.new_pairs]
        return SEVERITIES[max(levels, default=0)]

    def fails(self, level: str) -> bool:
        """True when the overall severity is at least ``level`` (for ``--fail-on``)."""
        return SEVERITIES.index(self.severity) >= SEVERITIES.index(level)

    def family_merges(self, label_map: dict[str, str]) -> dict[str, str]:
        """The label map of the new pairs: each family of new intents joined by duplicate pairs, merged into one
        name (the module docstring). ``label_map`` is the findings' (new intent -> existing intent). Merging
        pair by pair left chains and splits: ``a = c``, ``b = c`` gave ``{c: b}`` (``a`` and ``b`` kept apart),
        and ``b = c`` listed before ``a = b`` gave ``{c: b, b: a}``, in which ``c``'s rows, merged once, stay
        under a name merged away. A family whose members the findings merge into different existing intents
        merges into the first member's (in the order the pairs name them); the findings keep their own."""
        root: dict[str, str] = {}
        order: dict[str, int] = {}

        def find(name: str) -> str:
            while root[name] != name:
                root[name] = root[root[name]]
                name = root[name]
            return name

        for pair in self.new_pairs:
            for name in (pair.first, pair.second):
                if name not in root:
                    root[name], order[name] = name, len(order)
            first, second = sorted((find(pair.first), find(pair.second)), key=order.__getitem__)
            root[second] = first  # the family keeps the name seen first
        families: dict[str, list[str]] = {}
        for name in order:  # in order of first appearance
            families.setdefault(find(name), []).append(name)
        merges = {}
        for name, members in families.items():
            target = next((label_map[m] for m in members if m in label_map), name)
            merges.update({m: target for m in members if m != target})
        return merges

    def fix_relations(self) -> LabelRelations:
        """Known relations plus every proposed one, over bundle labels and new intents."""
        proposed = [r for finding in self.findings for r in proposed_relations(finding.verdict)]
        proposed += [Duplicate(p.first, p.second) for p in self.new_pairs]
        new_intents = [f.verdict.intent for f in self.findings]
        return extend_relations(self.known_relations, [*self.labels, *new_intents], proposed, {
            "audit": {"proposed_by": REPORT_FORMAT.name,
                      "findings": {f.verdict.intent: f.verdict.relation for f in self.findings}}})

    def to_dict(self) -> dict[str, Any]:
        counts = dict.fromkeys(RELATIONS, 0)
        for finding in self.findings:
            counts[finding.verdict.relation] += 1
        label_map = {}
        for finding in self.findings:
            label_map.update(finding.fix()["label_map"])
        label_map.update(self.family_merges(label_map))
        return {
            **REPORT_FORMAT.stamp(),
            "engine": self.engine,
            "config": self.config.to_dict(),
            "summary": {
                "severity": self.severity,
                "batch_rows": self.batch_rows,
                "audited_rows": self.audited_rows,
                "scored_rows": self.scored_rows,
                "duplicate_rows": self.duplicate_rows,
                "missing_references": self.missing_references,
                "existing_intents": len(self.labels),
                "new_intents": [f.verdict.intent for f in self.findings],
                "relations": counts,
                "new_duplicates": len(self.new_pairs),
                "blocking": [f.verdict.intent for f in self.findings if f.verdict.severity == "blocking"]
                + [f"{p.first} = {p.second}" for p in self.new_pairs if p.severity == "blocking"],
                "timing_s": {k: round(v, 3) for k, v in self.timing_s.items()},
            },
            "findings": [f.to_dict() for f in self.findings],
            "new_pairs": [p.to_dict(label_map) for p in self.new_pairs],
            "cooccurrence": self.cooccurrence.to_dict(),
            "fix": {"label_map": label_map, "relations": self.fix_relations().to_dict()},
        }
