"""Entity-profile evidence: does a new intent keep only the utterances of E that
carry (or lack) one entity type?

Teams often create a too-specific intent by entity: ``book_restaurant`` with a
restaurant name, ``get_weather`` for a state rather than a city. The model's
pooled embedding is trained to ignore exactly this (all of E's utterances
should land on E), so neither the kNN containment nor the two-sample test in
the embedding can see it. Where the data carries entity annotations
(``Example.spans``) on both sides, the audit compares, per entity type t, the
share of N's rows that carry t with the share of E's rows that do, by
Fisher's exact test (two-sided) with a Bonferroni correction over the types
tested (those on at least ``min_rows`` rows of the two sides together). The
test is exact because the sides are small: from 3 rows up, where the normal
approximation of a z-test gives p-values 2-4 times too small (3 of 3 against 1
of 10: z-test 0.003, exact 0.014) and its stated level would not hold. A
type whose share differs significantly and by at least ``min_gap`` tells N
apart from E (no duplicate) and names the pivot: "all of N carries t, 25 % of
E does" (N is E restricted to utterances with t) or the reverse (without t).
Annotations are trusted only when each side has some: a batch without spans
against annotated training data would differ everywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal
from fractions import Fraction
from typing import Any, Sequence

from intentvcs.core.dataio import Example


# How the report names the test and its multiple-testing correction.
TEST_NAME = "fisher_exact_two_sided"
CORRECTION = "bonferroni"
# Tables whose probability is within this factor of the observed one count as
# "as extreme" (R's fisher.test uses the same guard against rounding).
RELATIVE_TIE = 1.0 + 1e-7


def gap_under(k1: int, n1: int, k2: int, n2: int, min_gap: float) -> bool:
    """Whether the shares ``k1 / n1`` and ``k2 / n2`` differ by less than ``min_gap``, exactly: in floats a gap
    of exactly ``min_gap`` read under it (9 of 10 against 8 of 10: 0.9 - 0.8 = 0.0999...), and a difference at
    the threshold, which the settings call enough, told nothing apart. ``min_gap`` as written (its repr)."""
    return abs(Fraction(k1, n1) - Fraction(k2, n2)) < Fraction(repr(float(min_gap)))


def cut_p(p_value: float) -> float:
    """A p-value to 6 significant digits for the report, cut rather than rounded (``format_p``'s reason): rounded
    to 6 places, 0.0099999996 was written 0.01, and the page, which compares the written value with
    ``same_alpha``, said the pivot did not tell the intents apart when the verdict said it did."""
    if not math.isfinite(p_value) or p_value <= 0.0:
        return p_value
    return float(_cut(p_value, 6))


def format_p(p_value: float) -> str:
    """A p-value for people: two significant digits (``p = 0.0095``, ``p = 0.25``), or ``p < 1e-06``.

    Cut, not rounded: a threshold of at most two significant digits (0.01, 0.05, 0.005, ...) then divides the
    shown values as it divides the p-values, so the number a verdict states reads on its side of the
    threshold. Rounded (as to one digit before), 0.0095 read "p = 0.01" in a verdict that called it
    significant at 0.01, i.e. below it."""
    if not math.isfinite(p_value):  # no test gives one; said as it is rather than raised from log10
        return f"p = {p_value}"
    if p_value < 1e-6:
        return "p < 1e-06"
    return f"p = {float(_cut(p_value, 2)):.2g}"


def _cut(p_value: float, digits: int) -> Decimal:
    """``p_value`` (> 0) cut, not rounded, to ``digits`` significant digits, from the float's shortest decimal
    (repr), not its binary value: 0.0095 is stored as 0.00949999..."""
    exponent = math.floor(math.log10(p_value)) - (digits - 1)  # of the last significant digit kept
    return Decimal(repr(float(p_value))).quantize(Decimal(1).scaleb(exponent), rounding=ROUND_FLOOR)


@dataclass(frozen=True)
class EntityPivot:
    """The entity type whose presence differs most between N's rows and E's."""

    entity: str
    new_share: float
    existing_share: float
    new_rows: int
    existing_rows: int
    p_value: float  # Fisher's exact test, Bonferroni-corrected over the ``tested`` entity types
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
                "existing_rows": self.existing_rows, "p_value": cut_p(self.p_value), "tested": self.tested,
                "test": TEST_NAME, "correction": CORRECTION}


def _presence(rows: Sequence[Example]) -> dict[str, int]:
    """Entity type -> number of rows with at least one span of that type."""
    counts: dict[str, int] = {}
    for ex in rows:
        for kind in {s.label for s in ex.spans}:
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def fisher_exact_p(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of Fisher's exact test: ``k1`` of ``n1`` rows against ``k2`` of ``n2``.

    Conditioned on the margins, the count of the first side follows a
    hypergeometric law; the p-value sums the probability of every table no
    more likely than the observed one (the usual two-sided definition, as in
    R's ``fisher.test`` and scipy's ``fisher_exact``).
    """
    carrying, total = k1 + k2, n1 + n2

    def log_probability(x: int) -> float:
        return _log_choose(n1, x) + _log_choose(n2, carrying - x) - _log_choose(total, carrying)

    observed = log_probability(k1)
    cut = observed + math.log(RELATIVE_TIE)
    low, high = max(0, carrying - n2), min(carrying, n1)
    tail = sum(math.exp(lp) for lp in map(log_probability, range(low, high + 1)) if lp <= cut)
    return min(1.0, tail)


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


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
        if gap_under(k1, n1, k2, n2, min_gap):
            continue
        p = min(1.0, fisher_exact_p(k1, n1, k2, n2) * len(kinds))
        if best is None or p < best.p_value:
            best = EntityPivot(kind, k1 / n1, k2 / n2, n1, n2, p, len(kinds))
    return best
