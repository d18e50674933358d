"""The operator registry and the three ways to use it.

- ``perturb(example, op_name, seed, values=None)``: one operator, deterministic
  per (text, operator, seed, values) whatever else runs before it, in any process.
- ``random_set(examples, seed, operators=None, values=None)``: NATURE's Random
  set, one random applicable operator per utterance (report the mean over seeds 0-9).
- ``augment(examples, ratio, mix, seed, values=None)``: originals plus
  ``ratio * len`` perturbed copies with the same labels, operators drawn by
  weight (``perturbed_copies``: the copies alone, with their sources' indices).

``values`` (``perturb.values.EntityValues``) feeds the operators that replace
entity values (``VALUE_OPERATORS``). Without it, or with no value in the pool an
operator draws from (``unusable``: unseen entities draw from ``values.unseen``,
empty when every value is a training value), those operators are left out of
random sets and mixes altogether, not just found inapplicable: the draws of
every other operator then stay exactly what they were before these operators
existed, so recorded training runs and reports on intent-only data reproduce.

Each output carries ``meta["perturbation"]`` (the operator name, or ``None`` in
a random set where nothing applied).
"""

from __future__ import annotations

import math
import random
from typing import Callable, Iterable, Mapping, Sequence

from intentvcs.core.dataio import Example
from intentvcs.core.perturb import laug, nature, raddle
from intentvcs.core.perturb.values import EntityValues

Operator = Callable[[Example, random.Random], "Example | None"]

FAMILIES: dict[str, tuple[str, ...]] = {
    "nature": (
        "filler_begin", "filler_end", "filler_before_verb", "filler_after_verb",
        "syn_verb", "syn_adj", "syn_adv", "syn_any", "syn_stopword", "speako",
    ),
    "laug": (
        "eda_synonym", "eda_insert", "eda_swap", "eda_delete",
        "disfluency_pause", "disfluency_repeat", "disfluency_restart", "disfluency_repair",
        "asr_soundalike", "asr_numbers", "slot_value_replacement",
    ),
    "raddle": ("typo_keyboard", "verbosity", "simplify", "casing", "punctuation", "unseen_entities"),
}
_MODULES = {"nature": nature, "laug": laug, "raddle": raddle}

# Stable names -> operators; the name is the function's name in its family module.
OPERATORS: dict[str, Operator] = {
    name: getattr(_MODULES[family], name) for family, names in FAMILIES.items() for name in names
}
FAMILY_OF: dict[str, str] = {name: family for family, names in FAMILIES.items() for name in names}
# Operators that take ``values`` as a third argument and replace entity values on purpose.
VALUE_OPERATORS: frozenset[str] = frozenset({"slot_value_replacement", "unseen_entities"})


def _operator(name: str) -> Operator:
    try:
        return OPERATORS[name]
    except KeyError:
        raise ValueError(f"unknown operator {name!r}; known: {sorted(OPERATORS)}") from None


def _tagged(example: Example, name: str | None) -> Example:
    return Example(example.text, example.labels, example.id, example.spans,
                   {**example.meta, "perturbation": name})


# Why a value operator cannot apply to any row (``unusable``): no pool to draw from.
NO_ENTITY_VALUES = "needs entity values"
NO_UNSEEN_VALUE = "has no unseen value to draw: every entity value of the rows is a training value"


def unusable(names: Iterable[str], values: EntityValues | None = None) -> dict[str, str]:
    """The value operators among ``names`` that ``values`` cannot feed, each with why: the pool it draws
    from is empty (``values.data`` for the slot-value replacement, ``values.unseen`` for unseen
    entities, which is empty when every value of the rows is a training value, as in augmentation)."""
    why: dict[str, str] = {}
    for name in names:
        if name not in VALUE_OPERATORS:
            continue
        if not values:
            why[name] = NO_ENTITY_VALUES
        elif name == "unseen_entities" and not values.unseen:
            why[name] = NO_UNSEEN_VALUE
    return why


def usable(names: Iterable[str], values: EntityValues | None = None) -> list[str]:
    """``names`` less the value operators ``values`` cannot feed (``unusable``; see the module docstring)."""
    names = list(names)
    left_out = unusable(names, values)
    return [name for name in names if name not in left_out]


def perturb(example: Example, op_name: str, seed: int | str = 0,
            values: EntityValues | None = None) -> Example | None:
    """Apply operator ``op_name`` to ``example``; ``None`` when it cannot apply.

    The random stream is seeded from (seed, op_name, text) through
    ``random.Random``'s string seeding (SHA-512), so a result never depends on
    the order of calls, on other examples or on ``PYTHONHASHSEED``; a value
    operator's result depends on ``values`` too, and is None without it.
    """
    op = _operator(op_name)
    rng = random.Random(f"{seed}\x1f{op_name}\x1f{example.text}")
    out = op(example, rng, values) if op_name in VALUE_OPERATORS else op(example, rng)
    return _tagged(out, op_name) if out is not None else None


def random_set(examples: Iterable[Example], seed: int | str = 0,
               operators: Sequence[str] | None = None, values: EntityValues | None = None) -> list[Example]:
    """One random applicable operator per example, aligned with the input.

    Operators are tried in a random order (seeded per text) until one applies;
    an example no operator applies to is returned unchanged with
    ``meta["perturbation"] = None``.
    """
    names = list(operators) if operators is not None else list(OPERATORS)
    for name in names:
        _operator(name)
    names = usable(names, values)
    out = []
    for example in examples:
        order = list(names)
        random.Random(f"{seed}\x1frandom_set\x1f{example.text}").shuffle(order)
        for name in order:
            perturbed = perturb(example, name, seed, values)
            if perturbed is not None:
                out.append(perturbed)
                break
        else:
            out.append(_tagged(example, None))
    return out


def _weights(mix: Mapping[str, float] | None, values: EntityValues | None = None) -> dict[str, float]:
    """Operator weights; a family name spreads its weight over its usable operators."""
    if mix is None:
        return {name: 1.0 for name in usable(OPERATORS, values)}
    for key, weight in mix.items():  # every weight a number before any name is read (a JSON mix may hold anything)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
            raise ValueError(f"the weight of {key!r} must be a finite number, got {weight!r}")
    weights: dict[str, float] = {}
    for key, weight in mix.items():
        if weight < 0:
            raise ValueError(f"negative weight for {key!r}")
        if key in FAMILIES:
            names = usable(FAMILIES[key], values)
        else:
            _operator(key)  # raises on an unknown name
            names = usable((key,), values)
        for name in names:
            weights[name] = weights.get(name, 0.0) + weight / len(names)
    weights = {k: w for k, w in weights.items() if w > 0}
    if not weights:
        needy = unusable(sorted(VALUE_OPERATORS & set(mix)), values)
        starved = [name for name, why in needy.items() if why == NO_ENTITY_VALUES]
        reasons = ([f"{', '.join(starved)} need entity values"] if starved else []) + [
            f"{name} {why}" for name, why in needy.items() if why != NO_ENTITY_VALUES]
        raise ValueError("mix has no positive weight" + (f" ({'; '.join(reasons)})" if reasons else ""))
    return weights


def augment(examples: Sequence[Example], ratio: float, mix: Mapping[str, float] | None = None,
            seed: int | str = 0, values: EntityValues | None = None) -> list[Example]:
    """Originals followed by ``round(ratio * len(examples))`` perturbed copies
    (:func:`perturbed_copies` without the source indices)."""
    return list(examples) + [copy for _, copy in perturbed_copies(examples, ratio, mix, seed, values)]


def mix_values(examples: Sequence[Example], mix: Mapping[str, float] | None) -> EntityValues | None:
    """The ``EntityValues`` an augmentation ``mix`` asks for: the rows' own span values when the mix
    names a value operator (``VALUE_OPERATORS``) itself, else None.

    Only by name: a uniform mix or a family keeps the draws it had before the
    value operators existed, so recorded training runs reproduce. Mention
    replacement (``{"slot_value_replacement": 1}``) teaches the entity head to read
    an entity's context rather than learn its training values by heart. No value
    of the rows is unseen, so unseen entities take no part (``unusable``): a mix of
    it alone is refused, and its weight in a mix is left out.
    """
    if not mix or not VALUE_OPERATORS & set(mix):
        return None
    return EntityValues.build(examples, train=examples)


def check_mix(mix: Mapping[str, float], values: EntityValues | None) -> None:
    """Refuse, before anything is drawn, a training ``augment_mix`` that ``perturbed_copies`` would refuse with
    these ``values`` (``ValueError`` prefixed with the setting's name)."""
    try:
        _weights(mix, values)
    except ValueError as exc:
        raise ValueError(f"augment_mix: {exc}") from None


def perturbed_copies(examples: Sequence[Example], ratio: float, mix: Mapping[str, float] | None = None,
                     seed: int | str = 0, values: EntityValues | None = None) -> list[tuple[int, Example]]:
    """``round(ratio * len(examples))`` perturbed copies, each with the index of its source.

    Sources are visited in a seeded shuffled order, cycling, so every example is
    used once before any is used twice. For each, an operator is drawn from
    ``mix`` (operator or family names -> weights; default uniform over all);
    if it does not apply, the others are tried in weighted random order. Labels
    are kept; a copy's id is ``"<id>~<op>~<n>"`` (None stays None) and its meta
    gains ``perturbation`` and ``augmented_from``. Stops early if a full pass
    over the data yields nothing. ``values`` lets the slot-value replacement
    take part: ``EntityValues.build(examples, train=examples)`` draws from the
    training rows' own values, and unseen entities are then left out (no value
    is unseen; a mix of nothing else is refused).
    """
    if ratio < 0:
        raise ValueError("ratio must be >= 0")
    examples = list(examples)
    target = round(ratio * len(examples))
    weights = _weights(mix, values)
    rng = random.Random(f"{seed}\x1faugment")
    order = list(range(len(examples)))
    rng.shuffle(order)
    out: list[tuple[int, Example]] = []
    visits, idle = 0, 0
    while len(out) < target and examples and idle < len(examples):
        index = order[visits % len(examples)]
        source = examples[index]
        visits += 1
        produced = _augment_one(source, weights, rng, f"{seed}:{visits}", values)
        if produced is None:
            idle += 1
            continue
        idle = 0
        op_name = produced.meta["perturbation"]
        ident = f"{source.id}~{op_name}~{len(out) + 1}" if source.id is not None else None
        meta = {**produced.meta, "augmented_from": source.id}
        out.append((index, Example(produced.text, produced.labels, ident, produced.spans, meta)))
    return out


def _augment_one(example: Example, weights: dict[str, float], rng: random.Random,
                 seed: str, values: EntityValues | None) -> Example | None:
    left = dict(weights)
    while left:
        names = list(left)
        name = rng.choices(names, [left[n] for n in names])[0]
        out = perturb(example, name, seed, values)
        if out is not None:
            return out
        del left[name]
    return None
