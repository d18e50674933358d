"""The operator registry and the three ways to use it.

- ``perturb(example, op_name, seed)``: one operator, deterministic per
  (text, operator, seed) whatever else runs before it, in any process.
- ``random_set(examples, seed, operators=None)``: NATURE's Random set, one
  random applicable operator per utterance (report the mean over seeds 0-9).
- ``augment(examples, ratio, mix, seed)``: originals plus ``ratio * len``
  perturbed copies with the same labels, operators drawn by weight
  (``perturbed_copies``: the copies alone, with their sources' indices).

Each output carries ``meta["perturbation"]`` (the operator name, or ``None`` in
a random set where nothing applied).
"""

from __future__ import annotations

import random
from typing import Callable, Iterable, Mapping, Sequence

from intentvcs.core.dataio import Example
from intentvcs.core.perturb import laug, nature, raddle

Operator = Callable[[Example, random.Random], "Example | None"]

FAMILIES: dict[str, tuple[str, ...]] = {
    "nature": (
        "filler_begin", "filler_end", "filler_before_verb", "filler_after_verb",
        "syn_verb", "syn_adj", "syn_adv", "syn_any", "syn_stopword", "speako",
    ),
    "laug": (
        "eda_synonym", "eda_insert", "eda_swap", "eda_delete",
        "disfluency_pause", "disfluency_repeat", "disfluency_restart", "disfluency_repair",
        "asr_soundalike", "asr_numbers",
    ),
    "raddle": ("typo_keyboard", "verbosity", "simplify", "casing", "punctuation"),
}
_MODULES = {"nature": nature, "laug": laug, "raddle": raddle}

# Stable names -> operators; the name is the function's name in its family module.
OPERATORS: dict[str, Operator] = {
    name: getattr(_MODULES[family], name) for family, names in FAMILIES.items() for name in names
}
FAMILY_OF: dict[str, str] = {name: family for family, names in FAMILIES.items() for name in names}


def _operator(name: str) -> Operator:
    try:
        return OPERATORS[name]
    except KeyError:
        raise ValueError(f"unknown operator {name!r}; known: {sorted(OPERATORS)}") from None


def _tagged(example: Example, name: str | None) -> Example:
    return Example(example.text, example.labels, example.id, example.spans,
                   {**example.meta, "perturbation": name})


def perturb(example: Example, op_name: str, seed: int | str = 0) -> Example | None:
    """Apply operator ``op_name`` to ``example``; ``None`` when it cannot apply.

    The random stream is seeded from (seed, op_name, text) through
    ``random.Random``'s string seeding (SHA-512), so a result never depends on
    the order of calls, on other examples or on ``PYTHONHASHSEED``.
    """
    op = _operator(op_name)
    out = op(example, random.Random(f"{seed}\x1f{op_name}\x1f{example.text}"))
    return _tagged(out, op_name) if out is not None else None


def random_set(examples: Iterable[Example], seed: int | str = 0,
               operators: Sequence[str] | None = None) -> list[Example]:
    """One random applicable operator per example, aligned with the input.

    Operators are tried in a random order (seeded per text) until one applies;
    an example no operator applies to is returned unchanged with
    ``meta["perturbation"] = None``.
    """
    names = list(operators) if operators is not None else list(OPERATORS)
    for name in names:
        _operator(name)
    out = []
    for example in examples:
        order = list(names)
        random.Random(f"{seed}\x1frandom_set\x1f{example.text}").shuffle(order)
        for name in order:
            perturbed = perturb(example, name, seed)
            if perturbed is not None:
                out.append(perturbed)
                break
        else:
            out.append(_tagged(example, None))
    return out


def _weights(mix: Mapping[str, float] | None) -> dict[str, float]:
    """Operator weights; a family name spreads its weight over its operators."""
    if mix is None:
        return {name: 1.0 for name in OPERATORS}
    weights: dict[str, float] = {}
    for key, weight in mix.items():
        if weight < 0:
            raise ValueError(f"negative weight for {key!r}")
        if key in FAMILIES:
            names = FAMILIES[key]
        else:
            _operator(key)  # raises on an unknown name
            names = (key,)
        for name in names:
            weights[name] = weights.get(name, 0.0) + weight / len(names)
    weights = {k: w for k, w in weights.items() if w > 0}
    if not weights:
        raise ValueError("mix has no positive weight")
    return weights


def augment(examples: Sequence[Example], ratio: float,
            mix: Mapping[str, float] | None = None, seed: int | str = 0) -> list[Example]:
    """Originals followed by ``round(ratio * len(examples))`` perturbed copies
    (:func:`perturbed_copies` without the source indices)."""
    return list(examples) + [copy for _, copy in perturbed_copies(examples, ratio, mix, seed)]


def perturbed_copies(examples: Sequence[Example], ratio: float,
                     mix: Mapping[str, float] | None = None, seed: int | str = 0) -> list[tuple[int, Example]]:
    """``round(ratio * len(examples))`` perturbed copies, each with the index of its source.

    Sources are visited in a seeded shuffled order, cycling, so every example is
    used once before any is used twice. For each, an operator is drawn from
    ``mix`` (operator or family names -> weights; default uniform over all);
    if it does not apply, the others are tried in weighted random order. Labels
    are kept; a copy's id is ``"<id>~<op>~<n>"`` (None stays None) and its meta
    gains ``perturbation`` and ``augmented_from``. Stops early if a full pass
    over the data yields nothing.
    """
    if ratio < 0:
        raise ValueError("ratio must be >= 0")
    examples = list(examples)
    target = round(ratio * len(examples))
    weights = _weights(mix)
    rng = random.Random(f"{seed}\x1faugment")
    order = list(range(len(examples)))
    rng.shuffle(order)
    out: list[tuple[int, Example]] = []
    visits, idle = 0, 0
    while len(out) < target and examples and idle < len(examples):
        index = order[visits % len(examples)]
        source = examples[index]
        visits += 1
        produced = _augment_one(source, weights, rng, f"{seed}:{visits}")
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
                 seed: str) -> Example | None:
    left = dict(weights)
    while left:
        names = list(left)
        name = rng.choices(names, [left[n] for n in names])[0]
        out = perturb(example, name, seed)
        if out is not None:
            return out
        del left[name]
    return None
