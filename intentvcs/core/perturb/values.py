"""Entity values by type: what the value-replacing operators draw from.

LAUG's slot-value replacement (``laug.slot_value_replacement``) and RADDLE's
unseen entities (``raddle.unseen_entities``) swap an entity's value for another
of the same type. Every other operator reads one utterance; these two need to
know which values exist, so the caller hands them an :class:`EntityValues`
(``perturb(example, name, seed, values)``) built from data it already has,
offline:

- ``data``: every value of the rows being perturbed (the test set in the
  robustness suite, the training rows in augmentation);
- ``unseen``: those of ``data`` that are no entity value of the training rows,
  of any type, when training rows are given; without them nothing can be
  checked and ``unseen`` is ``data`` (``checked`` says which).

Without an ``EntityValues`` both operators return None, so the other uses of
the registry (augmentation, Random sets of intent-only data) are unchanged.
Values are compared case- and space-insensitively: ``New York`` and
``new  york`` are one value.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from intentvcs.core.dataio import Example
from intentvcs.core.perturb.text import replace_spans


def value_key(value: str) -> str:
    """What makes two surface forms one value: case and runs of spaces do not count."""
    return " ".join(value.casefold().split())


@dataclass(frozen=True)
class ValuePool:
    """Distinct values per entity type, each a tuple sorted by key (deterministic whatever the row order)."""

    by_type: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, examples: Iterable[Example]) -> "ValuePool":
        """The span values of ``examples``; of surface forms of one value, the smallest stands for it."""
        forms: dict[str, dict[str, str]] = {}
        for example in examples:
            for span in example.spans:
                value = example.text[span.start:span.end]
                key = value_key(value)
                if key:
                    known = forms.setdefault(span.label, {})
                    known[key] = min(known.get(key, value), value)
        return cls({label: tuple(by_key[k] for k in sorted(by_key)) for label, by_key in sorted(forms.items())})

    def keys(self) -> set[str]:
        """Every value's key, whatever its type."""
        return {value_key(v) for values in self.by_type.values() for v in values}

    def without(self, keys: set[str]) -> "ValuePool":
        """The pool less the values whose key is in ``keys``; types left empty are dropped."""
        kept = {label: tuple(v for v in values if value_key(v) not in keys) for label, values in self.by_type.items()}
        return ValuePool({label: values for label, values in kept.items() if values})

    def others(self, label: str, value: str) -> tuple[str, ...]:
        """The values of type ``label`` other than ``value``."""
        key = value_key(value)
        return tuple(v for v in self.by_type.get(label, ()) if value_key(v) != key)

    def size(self) -> int:
        return sum(len(values) for values in self.by_type.values())

    def __bool__(self) -> bool:
        return bool(self.by_type)


@dataclass(frozen=True)
class EntityValues:
    """The pools the value-replacing operators draw from (see the module docstring)."""

    data: ValuePool
    unseen: ValuePool
    checked: bool  # unseen was checked against training rows

    @classmethod
    def build(cls, examples: Iterable[Example], train: Iterable[Example] | None = None) -> "EntityValues":
        """Pools from the rows to perturb, ``unseen`` less every span value of ``train`` when given."""
        data = ValuePool.of(examples)
        if train is None:
            return cls(data, data, checked=False)
        return cls(data, data.without(ValuePool.of(train).keys()), checked=True)

    def summary(self) -> dict:
        """JSON-ready counts, for reports."""
        return {"types": len(self.data.by_type), "values": self.data.size(), "unseen_values": self.unseen.size(),
                "unseen_checked_against_training": self.checked}

    def __bool__(self) -> bool:
        return bool(self.data)


def in_style(text: str, value: str) -> str:
    """``value`` written as the utterance ``text`` writes: all lower-case text (CLINC150,
    ATIS) gets it lower-case and ALL UPPER text upper-case, since a casing change would
    be a second perturbation; cased text takes it as the data spelled it."""
    if text == text.lower():
        return value.lower()
    if text == text.upper():
        return value.upper()
    return value


def replace_values(example: Example, rng: random.Random, pool: ValuePool, limit: int | None) -> Example | None:
    """Replace up to ``limit`` (None: all) of ``example``'s entities, chosen by ``rng``,
    each by another value of its type from ``pool``; None when no entity has one.

    A value already in the row is drawn only when nothing else is left, so
    ``from boston to denver`` does not become ``from denver to denver``.
    """
    text = example.text
    options: Sequence[tuple[int, tuple[str, ...]]] = [
        (i, found) for i, span in enumerate(example.spans)
        if (found := pool.others(span.label, text[span.start:span.end]))]
    if not options:
        return None
    if limit is not None and limit < len(options):
        options = sorted(rng.sample(options, limit))
    replaced = {i for i, _ in options}
    taken = {value_key(text[s.start:s.end]) for i, s in enumerate(example.spans) if i not in replaced}
    new = {}
    for i, found in options:
        choice = rng.choice([v for v in found if value_key(v) not in taken] or found)
        taken.add(value_key(choice))
        new[i] = in_style(text, choice)
    return replace_spans(example, new)
