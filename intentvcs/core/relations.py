"""Typed relations between intent labels, and the closure they impose.

A relations file (``relations.json``, schema in docs/ARCHITECTURE.md) is written
by the VCS builder (ground truth), by the audit (accepted fixes) and embedded in
checkpoints and bundle manifests. Four relation types exist:

``duplicate``  ``{"a", "b"}``: two names of one intent; symmetric.
``subset``     ``{"child", "parent"}``: every ``child`` utterance is also ``parent``.
``composite``  ``{"composite", "parts"}``: a ``composite`` utterance carries every part.
``cover``      ``{"parent", "children"}``: every child is a subset of ``parent``, and
               every ``parent`` utterance is at least one child (a split
               ``x_with_e`` / ``x_without_e`` covers ``x``).

Each relation is a set of *implications* "accepting x means accepting y"
(duplicate: a->b and b->a; subset: child->parent; composite: composite->part;
cover: child->parent). ``implication_matrix`` is their reflexive-transitive
closure, and ``close`` (or a reusable ``Closure``) applies it to accepted
labels at inference. A cover also completes an answer that accepts its parent
and none of its children with the most confident child (``Completion``).
The file's header and top-level fields are ``RELATIONS_FORMAT``
(``intentvcs.core.formats``).
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Union

import numpy as np

from intentvcs.core import atomic
from intentvcs.core.dataio import DuplicateKey, read_utf8, strict_loads, too_deep
from intentvcs.core.formats import FileFormat, json_list, json_object, message_error, non_empty_string
from intentvcs.core.oos import OOS_LABEL

RELATION_TYPES = ("duplicate", "subset", "composite", "cover")


class RelationsError(ValueError):
    """A relations object is malformed or names an unknown label."""


RELATIONS_FORMAT = FileFormat(
    "intentvcs-relations", 1, "relations file",
    "rebuild it (intentvcs build-vcs, or intentvcs audit --relations-out)",
    fields={"labels": json_list, "relations": json_list, "families": json_object, "details": json_object},
    optional=frozenset({"relations", "families", "details"}),
    error=message_error(RelationsError),
)


@dataclass(frozen=True)
class Duplicate:
    a: str
    b: str
    type = "duplicate"

    def labels(self) -> tuple[str, ...]:
        return (self.a, self.b)

    def implications(self) -> list[tuple[str, str]]:
        return [(self.a, self.b), (self.b, self.a)]

    def pairs(self) -> list[tuple[str, str]]:
        # Symmetric, so one canonical (sorted) order makes pairs comparable.
        return [tuple(sorted((self.a, self.b)))]

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "a": self.a, "b": self.b}


@dataclass(frozen=True)
class Subset:
    child: str
    parent: str
    type = "subset"

    def labels(self) -> tuple[str, ...]:
        return (self.child, self.parent)

    def implications(self) -> list[tuple[str, str]]:
        return [(self.child, self.parent)]

    def pairs(self) -> list[tuple[str, str]]:
        return [(self.child, self.parent)]

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "child": self.child, "parent": self.parent}


@dataclass(frozen=True)
class Composite:
    composite: str
    parts: tuple[str, ...]
    type = "composite"

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", _names(self.parts, "composite parts"))

    def labels(self) -> tuple[str, ...]:
        return (self.composite, *self.parts)

    def implications(self) -> list[tuple[str, str]]:
        return [(self.composite, part) for part in self.parts]

    def pairs(self) -> list[tuple[str, str]]:
        return self.implications()

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "composite": self.composite, "parts": list(self.parts)}


@dataclass(frozen=True)
class Cover:
    parent: str
    children: tuple[str, ...]
    type = "cover"

    def __post_init__(self) -> None:
        object.__setattr__(self, "children", _names(self.children, "cover children"))

    def labels(self) -> tuple[str, ...]:
        return (self.parent, *self.children)

    def implications(self) -> list[tuple[str, str]]:
        return [(child, self.parent) for child in self.children]

    def pairs(self) -> list[tuple[str, str]]:
        return self.implications()

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "parent": self.parent, "children": list(self.children)}


Relation = Union[Duplicate, Subset, Composite, Cover]


def _names(names: Any, where: str) -> tuple:
    """``names`` (a list or tuple of labels) as a tuple: given as a list, a composite's parts or a cover's children
    were saved and loaded back as a tuple, unequal to what was saved (and unhashable); a string is no list of
    names (it was read as its characters)."""
    if isinstance(names, str):
        raise RelationsError(f"{where}: expected a list of labels, got the string {names!r}")
    return tuple(names)


def _string(value: Any, where: str) -> str:
    if (error := non_empty_string(value)) is not None:
        raise RelationsError(f"{where}: {error}")
    return value


def _string_list(value: Any, where: str) -> list[str]:
    if not isinstance(value, list):
        raise RelationsError(f"{where}: expected a list of strings, got {type(value).__name__}")
    return [_string(item, f"{where}[{i}]") for i, item in enumerate(value)]


_FIELDS = {"duplicate": {"a", "b"}, "subset": {"child", "parent"}, "composite": {"composite", "parts"},
           "cover": {"parent", "children"}}


def relation_from_dict(obj: Any, where: str = "relation") -> Relation:
    """Parse one relation object; raise ``RelationsError`` naming ``where``."""
    if not isinstance(obj, Mapping):
        raise RelationsError(f"{where}: expected an object, got {type(obj).__name__}")
    kind = obj.get("type")
    if not isinstance(kind, str) or kind not in _FIELDS:  # a list or an object is no type (and unhashable)
        raise RelationsError(f"{where}: unknown relation type {kind!r}; expected one of {list(RELATION_TYPES)}")
    keys = set(obj) - {"type"}
    if keys != _FIELDS[kind]:
        raise RelationsError(f"{where}: a {kind} relation has keys {sorted(_FIELDS[kind])}, got {sorted(keys)}")
    if kind == "duplicate":
        relation: Relation = Duplicate(_string(obj["a"], f"{where}.a"), _string(obj["b"], f"{where}.b"))
    elif kind == "subset":
        relation = Subset(_string(obj["child"], f"{where}.child"), _string(obj["parent"], f"{where}.parent"))
    elif kind == "composite":
        parts = _string_list(obj["parts"], f"{where}.parts")
        relation = Composite(_string(obj["composite"], f"{where}.composite"), tuple(parts))
    else:
        children = _string_list(obj["children"], f"{where}.children")
        relation = Cover(_string(obj["parent"], f"{where}.parent"), tuple(children))
    _check_relation_shape(relation, where)
    return relation


def _check_relation_shape(relation: Relation, where: str) -> None:
    names = relation.labels()
    if len(set(names)) != len(names):
        raise RelationsError(f"{where}: a {relation.type} relation repeats a label: {list(names)}")
    if isinstance(relation, Composite) and len(relation.parts) < 2:
        raise RelationsError(f"{where}: a composite needs at least 2 parts, got {list(relation.parts)}")
    if isinstance(relation, Cover) and len(relation.children) < 2:
        raise RelationsError(f"{where}: a cover needs at least 2 children, got {list(relation.children)}")


def naming_oos(relations: Iterable["Relation"]) -> "Relation | None":
    """The first of ``relations`` that names ``OOS_LABEL``, the out-of-scope verdict, which relates to no intent
    (``Decision``, training and discovery each refuse one, in their own words)."""
    return next((relation for relation in relations if OOS_LABEL in relation.labels()), None)


@dataclass(frozen=True)
class LabelRelations:
    """Labels, the typed relations between them, and named intent families.

    ``labels``    every label the relations may mention (unique).
    ``relations`` typed relations over ``labels``.
    ``families``  family name -> member labels (the VCS builder groups each base
                  intent with its versions and splits); may be empty.
    ``details``   free-form JSON object (builder, audit or discovery evidence), kept as is; merging
                  relations (``extend_relations``) combines both sides' (``merge_details``).
    Construction validates everything and raises ``RelationsError``.
    """

    labels: tuple[str, ...]
    relations: tuple[Relation, ...] = ()
    families: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", tuple(self.labels))
        object.__setattr__(self, "relations", tuple(self.relations))
        original_families = self.families
        object.__setattr__(self, "families", {k: tuple(v) for k, v in self.families.items()})
        seen: set[str] = set()
        for label in self.labels:
            _string(label, "labels[]")
            if label in seen:
                raise RelationsError(f"labels: {label!r} is listed twice")
            seen.add(label)
        for i, relation in enumerate(self.relations):
            _check_relation_shape(relation, f"relations[{i}]")
            self._check_known(relation.labels(), f"relations[{i}] ({relation.type})")
        for name, members in self.families.items():
            # What a relations file can hold: a family named "" was saved and then refused on load, one named 1
            # loaded as "1"; members given as a string were read as its characters.
            _string(name, "families key")
            if isinstance(original_families[name], str):
                raise RelationsError(f"families[{name!r}]: expected a list of labels, got a string")
            self._check_known(members, f"families[{name!r}]")

    def _check_known(self, names: Iterable[str], where: str) -> None:
        unknown = [n for n in names if n not in self.labels]
        if unknown:
            raise RelationsError(f"{where}: unknown label(s) {unknown}; not in 'labels'")

    # ----------------------------------------------------------------- I/O
    @classmethod
    def from_dict(cls, obj: Any) -> "LabelRelations":
        """Parse and validate a relations file object."""
        RELATIONS_FORMAT.check(obj)
        relations, families, details = obj.get("relations", []), obj.get("families", {}), obj.get("details", {})
        return cls(
            labels=tuple(_string_list(obj["labels"], "labels")),
            relations=tuple(relation_from_dict(r, f"relations[{i}]") for i, r in enumerate(relations)),
            families={_string(k, "families key"): tuple(_string_list(v, f"families[{k!r}]"))
                      for k, v in families.items()},
            details=dict(details),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON-safe relations file object (inverse of ``from_dict``)."""
        return {
            **RELATIONS_FORMAT.stamp(),
            "labels": list(self.labels),
            "relations": [r.to_dict() for r in self.relations],
            "families": {k: list(v) for k, v in self.families.items()},
            "details": dict(self.details),
        }

    @classmethod
    def load(cls, path: str | os.PathLike) -> "LabelRelations":
        """Read and validate a relations file; errors name the path (and the line of a byte that is not UTF-8,
        in the words of the data readers: a ``DataError``). A file that is missing or a folder, or JSON that
        Python's reader refuses beyond its syntax (nested past its recursion limit, an integer past its digit
        limit), is a ``RelationsError`` naming the path too, not a bare ``OSError`` / ``RecursionError``."""
        try:
            text = read_utf8(path)
        except FileNotFoundError:
            raise RelationsError(f"{path}: relations file not found") from None
        except IsADirectoryError:
            raise RelationsError(f"{path}: is a directory, not a relations file") from None
        try:
            obj = strict_loads(text)  # a "relations" key given twice dropped the first list without a word
        except DuplicateKey as exc:
            raise RelationsError(f"{path}: {exc}") from None
        except json.JSONDecodeError as exc:
            raise RelationsError(f"{path}: not JSON: {exc}") from None
        except RecursionError:
            line, reason = too_deep(text)
            raise RelationsError(f"{path}{'' if line is None else f':{line}'}: not JSON this intentvcs reads: "
                                 f"{reason}") from None
        except ValueError as exc:  # an integer past Python's digit limit (int_max_str_digits)
            raise RelationsError(f"{path}: not JSON this intentvcs reads: {exc}") from None
        try:
            return cls.from_dict(obj)
        except RelationsError as exc:
            raise RelationsError(f"{path}: {exc}") from None

    def save(self, path: str | os.PathLike) -> None:
        """Write the relations file atomically."""
        atomic.write_json(path, self.to_dict())

    # ------------------------------------------------------------- queries
    def of_type(self, kind: str) -> list[Relation]:
        """Relations of one type (a name of ``RELATION_TYPES``: duplicate, subset, composite or cover)."""
        if kind not in RELATION_TYPES:
            raise RelationsError(f"unknown relation type {kind!r}; expected one of {list(RELATION_TYPES)}")
        return [r for r in self.relations if r.type == kind]

    def pairs(self, kind: str) -> set[tuple[str, str]]:
        """Label pairs of one type, in a canonical order that makes sets comparable.

        duplicate: ``(min(a, b), max(a, b))``; subset: ``(child, parent)``;
        composite: one ``(composite, part)`` per part.
        """
        return {pair for r in self.of_type(kind) for pair in r.pairs()}

    def typed_pairs(self) -> set[tuple[str, str, str]]:
        """Every relation as ``(type, x, y)`` with ``pairs``' order (for scoring an audit)."""
        return {(kind, x, y) for kind in RELATION_TYPES for x, y in self.pairs(kind)}

    def duplicate_groups(self, labels: Iterable[str]) -> list[list[str]]:
        """The names of one intent among ``labels``: groups of two or more linked by duplicates alone.

        Each group in ``labels``' order, groups ordered by their first label; a
        chain through a label missing from ``labels`` still links its ends.
        """
        index = {label: i for i, label in enumerate(self.labels)}
        linked = np.eye(len(self.labels), dtype=bool)
        for relation in self.of_type("duplicate"):
            linked[index[relation.a], index[relation.b]] = linked[index[relation.b], index[relation.a]] = True
        linked = _transitive_closure(linked)
        groups: dict[int, list[str]] = {}
        for label in labels:
            if label in index:
                groups.setdefault(int(np.argmax(linked[index[label]])), []).append(label)
        return [group for group in groups.values() if len(group) > 1]

    # ------------------------------------------------------------- closure
    def implication_matrix(self, labels: Iterable[str] | None = None) -> np.ndarray:
        """``M[i, j]`` is True when accepting ``labels[i]`` implies accepting ``labels[j]``.

        Reflexive and transitive over all relations (a chain through a label
        missing from ``labels`` still counts). ``labels`` defaults to
        ``self.labels``; a name unknown to the relations (e.g. ``"oos"``)
        implies only itself. Returns bool ``[L, L]``.
        """
        order = self.labels if labels is None else tuple(labels)
        index = {label: i for i, label in enumerate(self.labels)}
        full = np.eye(len(self.labels), dtype=bool)
        for relation in self.relations:
            for src, dst in relation.implications():
                full[index[src], index[dst]] = True
        full = _transitive_closure(full)
        out = np.eye(len(order), dtype=bool)
        known = [i for i, label in enumerate(order) if label in index]
        rows = [index[order[i]] for i in known]
        out[np.ix_(known, known)] = full[np.ix_(rows, rows)]
        return out

    def closure(self, labels: Iterable[str] | None = None) -> "Closure":
        """A reusable ``Closure`` for columns ``labels`` (default ``self.labels``)."""
        return Closure(self.implication_matrix(labels))

    def completion(self, labels: Iterable[str]) -> "Completion | None":
        """The covers over columns ``labels`` as a reusable ``Completion``; None without any.

        A cover whose parent is not a column is skipped; its children that are not columns are left out of
        the children it may add, not of those that meet it: a cover is met by any accepted column that implies
        one of its children (a chain through a label missing from ``labels`` counts, as in the closure), so
        ``s`` (a subset of the child ``a``, no column) meets the cover of ``a``'s parent. A child it may add
        is as confident as its most confident name (itself or a duplicate: a label it implies and is implied
        by), since a twin's column is the same intent's.
        """
        order = tuple(labels)
        index = {label: i for i, label in enumerate(order)}
        if not any(c.parent in index for c in self.of_type("cover")):
            return None
        known = {label: i for i, label in enumerate(self.labels)}
        full = self.implication_matrix()  # over self.labels: chains through labels that are no columns count
        columns = np.array([j for j, label in enumerate(order) if label in known], dtype=np.intp)
        rows = np.array([known[order[j]] for j in columns], dtype=np.intp)
        covers = []
        for cover in self.of_type("cover"):
            children = np.array([index[x] for x in cover.children if x in index], dtype=np.intp)
            if cover.parent not in index or not len(children):
                continue
            implies_child = full[np.ix_(rows, [known[x] for x in cover.children])].any(axis=1)
            covers.append((index[cover.parent], children, columns[implies_child]))
        if not covers:
            return None
        # Each addable child's names: the columns it implies and that imply it (reflexive: itself first).
        names = {}
        for child in sorted({int(j) for _, children, _ in covers for j in children}):
            row = known[order[child]]
            twins = columns[full[row, rows] & full[rows, row]]
            if len(twins) > 1:
                names[child] = twins
        return Completion(covers, names)

    def close(self, accepted: np.ndarray, labels: Iterable[str] | None = None) -> np.ndarray:
        """Accepted labels plus everything they imply: bool ``[N, L]`` -> bool ``[N, L]``.

        Columns follow ``labels`` (default ``self.labels``). Per-request callers
        should build ``closure(labels)`` once and call it instead.
        """
        return self.closure(labels)(accepted)


def extend_relations(known: LabelRelations | None, labels: Iterable[str], relations: Iterable[Relation],
                     details: Mapping[str, Any]) -> LabelRelations:
    """``known`` (or nothing) plus ``labels`` and the ``relations`` it lacks; ``details`` added to its own
    (``merge_details``).

    How proposed relations (the audit's fix, relations read off a model's answers) join the relations a
    model already has: families and earlier details are kept, and merging the same again changes nothing.
    ``labels`` may be a model's columns: the train OOS rule's "oos" column among them is the out-of-scope
    verdict, no intent, and joins no relations' labels.
    """
    names = list(dict.fromkeys([*(known.labels if known is not None else ()),
                                *(label for label in labels if label != OOS_LABEL)]))
    merged: list[Relation] = list(known.relations) if known is not None else []
    # The same relation however written: Duplicate(b, a) is Duplicate(a, b), a composite's parts in any order.
    held = {(r.type, frozenset(r.implications())) for r in merged}
    for relation in relations:
        key = (relation.type, frozenset(relation.implications()))
        if key not in held:
            held.add(key)
            merged.append(relation)
    return LabelRelations(labels=tuple(names), relations=tuple(merged),
                          families=dict(known.families) if known is not None else {},
                          details=merge_details(known.details if known is not None else {}, details))


def merge_details(held: Mapping[str, Any], added: Mapping[str, Any]) -> dict[str, Any]:
    """``held`` details plus what ``added`` says that they lack, as ``extend_relations`` merges relations.

    Details are the evidence of where relations came from (the builder's plan, an audit's findings, the
    relations discovery read), and a merge keeps every relation it is given, so it keeps every merge's evidence
    too. Replacing a top-level key by the later merge's (what ``{**held, **added}`` did) dropped, say, an earlier
    discovery's ``"discovered"`` list or an earlier audit's findings while their relations stayed: relations
    nothing explained any more. So: objects merge key by key (recursively); lists keep ``held``'s items, then
    ``added``'s that ``held`` lacks (so merging the same again adds nothing: a merge applied twice is a merge
    applied once); where both give one key two other values (two scalars, or an object and a list), ``held``
    wins, as its relations win in ``extend_relations``: a relation already held is never replaced by a later
    proposal of it, and neither is what was recorded of it. Neither argument is changed; the result shares no
    list or object with them.
    """
    merged = copy.deepcopy(dict(held))
    for key, value in added.items():
        merged[key] = _merge_detail(merged[key], value) if key in merged else copy.deepcopy(value)
    return merged


def _merge_detail(held: Any, added: Any) -> Any:
    if isinstance(held, Mapping) and isinstance(added, Mapping):
        return merge_details(held, added)
    if isinstance(held, (list, tuple)) and isinstance(added, (list, tuple)):  # a tuple is written as a list
        seen = {_detail_key(item) for item in held}
        merged = list(held)
        for item in added:
            if (key := _detail_key(item)) not in seen:
                seen.add(key)
                merged.append(copy.deepcopy(item))
        return merged
    return held


def _detail_key(item: Any) -> str:
    """One list item as a comparable key: JSON with sorted keys (items may be objects: unhashable)."""
    return json.dumps(item, sort_keys=True, default=repr)


class Closure:
    """Applies a fixed implication matrix to batches of accepted labels.

    ``out[n, j] = any_i accepted[n, i] & M[i, j]``. Only the off-diagonal
    implications are stored (few: each label implies its family), so a call
    costs O(N * implications) gathers and no matrix product; BLAS would add
    thread start-up to every small serving request.
    """

    def __init__(self, implication: np.ndarray):
        implication = np.asarray(implication, dtype=bool)
        self.n_labels = implication.shape[0]
        # Edges src -> dst sorted by dst, so each dst's sources are one slice.
        dst, src = np.nonzero(implication.T & ~np.eye(self.n_labels, dtype=bool))
        self._src = src
        self._dst, self._starts = np.unique(dst, return_index=True)

    def __call__(self, accepted: np.ndarray) -> np.ndarray:
        accepted = np.asarray(accepted, dtype=bool)
        if accepted.ndim != 2 or accepted.shape[1] != self.n_labels:
            raise ValueError(f"accepted must be [N, {self.n_labels}], got {list(accepted.shape)}")
        closed = accepted.copy()
        if len(self._src):
            closed[:, self._dst] |= np.logical_or.reduceat(accepted[:, self._src], self._starts, axis=1)
        return closed


class Completion:
    """Completes answers under covers: a row that accepts a cover's parent and nothing that implies
    one of its children also accepts its most confident child (``confidences`` [N, L], a child read
    at its most confident name: itself or a duplicate); ``closure`` then brings that child's own
    implications (its duplicates, its parents).

    One child at a time per row, closed before the next: of the covers a row leaves unsatisfied,
    the most confident child of any of them (the first column on a tie) joins, which is that
    cover's most confident child, and the closure may satisfy further covers (a duplicate of the
    child, a covered parent it implies) before they would take a child of their own. The answer
    thus depends on the covers and the confidences, never on the order the relations are written
    in; nested covers complete whatever their order (``x -> {x_a, x_b}`` and
    ``x_a -> {x_a_1, x_a_2}``: a row accepting ``x`` alone ends with ``x_a`` and a child of
    ``x_a`` either way). Each step satisfies a cover of every row it changes, for good, so this
    ends within ``len(covers)`` steps.
    """

    def __init__(self, covers: list[tuple[int, np.ndarray, np.ndarray]],
                 names: Mapping[int, np.ndarray] | None = None):
        """``covers``: per cover ``(parent, children, met_by)`` columns: the children it may add, and every
        column that implies one of its children (the children among them); ``names``: child column -> the
        columns of its duplicates, itself included (only children with any)."""
        self._covers = covers
        self._names = dict(names or {})

    def __call__(self, accepted: np.ndarray, confidences: np.ndarray,
                 closure: "Closure | None" = None) -> np.ndarray:
        """``accepted`` (already closed under ``closure``, as ``Decision.apply`` passes it) completed."""
        completed = np.array(accepted, dtype=bool)
        confidences = np.asarray(confidences, dtype=np.float64)
        if self._names:  # a child is as confident as its most confident name
            confidences = confidences.copy()
            for child, twins in self._names.items():
                confidences[:, child] = confidences[:, twins].max(axis=1)
        for _ in range(len(self._covers)):
            candidates = np.zeros(completed.shape, dtype=bool)
            for parent, children, met_by in self._covers:
                rows = np.flatnonzero(completed[:, parent] & ~completed[:, met_by].any(axis=1))
                if rows.size:
                    candidates[np.ix_(rows, children)] = True
            rows = np.flatnonzero(candidates.any(axis=1))
            if not rows.size:
                break
            # argmax takes the first of equal confidences: the first column.
            picked = np.where(candidates[rows], confidences[rows], -np.inf).argmax(axis=1)
            completed[rows, picked] = True
            if closure is not None:
                completed = closure(completed)
        return completed


def _transitive_closure(adjacency: np.ndarray) -> np.ndarray:
    """Warshall's algorithm, one vectorised [L, L] update per intermediate label."""
    reach = adjacency.copy()
    for k in range(reach.shape[0]):
        reach |= reach[:, k : k + 1] & reach[k : k + 1, :]
    return reach
