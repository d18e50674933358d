"""Entity-profile evidence: does a new intent keep only the utterances of E that
carry (or lack) one entity type?

Teams often create a too-specific intent by entity: ``book_restaurant`` with a
restaurant name, ``get_weather`` for a state rather than a city. The model's
pooled embedding is trained to ignore exactly this (all of E's utterances
should land on E), so neither the kNN containment nor the two-sample test in
the embedding can see it. Where the data carries entity annotations
(``Example.spans``) on both sides, the audit compares, per entity type t, the
share of N's rows that carry t with the share of E's rows that do, by a
two-proportion z-test with a Bonferroni correction over the types tested
(those on at least ``min_rows`` rows of the two sides together). A
type whose share differs significantly and by at least ``min_gap`` tells N
apart from E (no duplicate) and names the pivot: "all of N carries t, 25 % of
E does" (N is E restricted to utterances with t) or the reverse (without t).
Annotations are trusted only when each side has some: a batch without spans
against annotated training data would differ everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Sequence

from intentvcs.core.dataio import Example


def format_p(p_value: float) -> str:
    """A p-value for people: ``p = 0.003``, or ``p < 1e-06`` below what the normal tail resolves."""
    return f"p = {p_value:.1g}" if p_value >= 1e-6 else "p < 1e-06"


@dataclass(frozen=True)
class EntityPivot:
    """The entity type whose presence differs most between N's rows and E's."""

    entity: str
    new_share: float
    existing_share: float
    new_rows: int
    existing_rows: int
    p_value: float  # Bonferroni-corrected over the ``tested`` entity types
    tested: int

    @property
    def direction(self) -> str:
        """``with``: N keeps E's utterances that carry the entity; ``without``: those that lack it."""
        return "with" if self.new_share > self.existing_share else "without"

    @property
    def p_text(self) -> str:
        return format_p(self.p_value)

    def to_dict(self) -> dict[str, Any]:
        return {"entity": self.entity, "direction": self.direction, "new_share": round(self.new_share, 4),
                "existing_share": round(self.existing_share, 4), "new_rows": self.new_rows,
                "existing_rows": self.existing_rows, "p_value": round(self.p_value, 6), "tested": self.tested}


def _presence(rows: Sequence[Example]) -> dict[str, int]:
    """Entity type -> number of rows with at least one span of that type."""
    counts: dict[str, int] = {}
    for ex in rows:
        for kind in {s.label for s in ex.spans}:
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def _two_proportion_p(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of the pooled two-proportion z-test."""
    pooled = (k1 + k2) / (n1 + n2)
    variance = pooled * (1.0 - pooled) * (1.0 / n1 + 1.0 / n2)
    if variance <= 0.0:
        return 1.0
    z = abs(k1 / n1 - k2 / n2) / variance ** 0.5
    return 2.0 * (1.0 - NormalDist().cdf(z))


def entity_pivot(new_rows: Sequence[Example], existing_rows: Sequence[Example], *, min_rows: int,
                 min_gap: float) -> EntityPivot | None:
    """The most significant entity-share difference between N's and E's rows.

    ``None`` when either side has fewer than ``min_rows`` rows or no entity
    annotation at all, or when no entity type's shares differ by ``min_gap``.
    """
    if len(new_rows) < min_rows or len(existing_rows) < min_rows:
        return None
    new_counts, old_counts = _presence(new_rows), _presence(existing_rows)
    if not new_counts or not old_counts:
        return None
    n1, n2 = len(new_rows), len(existing_rows)
    # Types seen on too few rows overall cannot differ significantly; leaving
    # them out of the multiplicity (a choice that does not look at the gap)
    # keeps the correction from drowning the types that can.
    kinds = sorted(kind for kind in set(new_counts) | set(old_counts)
                   if new_counts.get(kind, 0) + old_counts.get(kind, 0) >= min_rows)
    best = None
    for kind in kinds:
        k1, k2 = new_counts.get(kind, 0), old_counts.get(kind, 0)
        if abs(k1 / n1 - k2 / n2) < min_gap:
            continue
        p = min(1.0, _two_proportion_p(k1, n1, k2, n2) * len(kinds))
        if best is None or p < best.p_value:
            best = EntityPivot(kind, k1 / n1, k2 / n2, n1, n2, p, len(kinds))
    return best
