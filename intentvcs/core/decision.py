"""The decision layer: raw model outputs -> what users see (pure numpy).

The same object runs after PyTorch (evaluation) and after ONNX Runtime
(serving), so reported figures are the service's figures. Per request:

1. ``p = softmax(logits / T)`` or ``sigmoid(logits / T)`` (``intentvcs.core.calibration``);
2. ``confidence_k = min(1, p_k / c_k)`` with PU label scale ``c_k`` in (0, 1]
   (Elkan–Noto: how often k is the observed label when it applies; all ones
   means no rescaling, e.g. for sigmoid baselines);
3. out-of-scope verdict from the ``oos`` rule (``intentvcs.core.oos``);
4. ``accepted = confidence >= thresholds`` (``intentvcs.core.thresholds``), or,
   with ``support_noise``, the most likely support of ``p``
   (``intentvcs.core.support``; the labels of one ``support_intents`` group
   count as the names of one intent), never the ``"oos"`` class itself; an in-scope
   row with nothing accepted accepts its most confident intent (an answer "in
   scope, no intent" would contradict itself); then closed under ``relations``
   (``intentvcs.core.relations``; a cover's parent accepted without anything
   that implies one of its children also takes the most confident child (read
   at its most confident name, its duplicates'), one child at a time, the
   most confident first and closed before the next, until every cover is met:
   the answer never depends on the order the relations are written in); rows
   judged OOS accept nothing, whatever the relations imply;
5. entities decoded with a confidence under ``entity_floor`` are not answered
   (``kept_entities``; ``intentvcs.core.entity_floor``).

Serialised (``to_dict``) as a versioned object, ``DECISION_FORMAT``
(``intentvcs.core.formats``), inside ``checkpoint.json`` and the bundle manifest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from intentvcs.core.calibration import check_activation, probabilities
from intentvcs.core.formats import FileFormat, anything, json_list, message_error
from intentvcs.core.oos import OOS_LABEL, NonFiniteInput, NoRule, OOSRule, TrainRule, rule_from_dict
from intentvcs.core.outputs import non_finite_problem, tuple_array
from intentvcs.core.relations import Closure, Completion, LabelRelations, naming_oos
from intentvcs.core import support
from intentvcs.core.thresholds import global_thresholds


class DecisionError(ValueError):
    """A decision object or its input has the wrong shape, type or value."""


DECISION_FORMAT = FileFormat(
    "intentvcs-decision", 1, "decision", "refit the checkpoint (intentvcs refit), then re-export it (intentvcs export)",
    fields={"labels": json_list, **dict.fromkeys(
        ("activation", "temperature", "label_scale", "thresholds", "oos", "relations", "support_noise",
         "support_intents", "entity_floor"), anything)},
    # Absent from decisions written before they existed: thresholds decide, support decoding reads
    # every label as an intent of its own, every decoded entity is answered.
    optional=frozenset({"support_noise", "support_intents", "entity_floor"}),
    error=message_error(DecisionError),
)


def intent_columns(labels: Sequence[str]) -> np.ndarray:
    """bool ``[L]``: the labels that are intents: every label but the ``"oos"`` class, the train rule's
    out-of-scope verdict, which a decision never accepts."""
    return np.array([label != OOS_LABEL for label in labels], dtype=bool)


@dataclass(frozen=True)
class DecisionResult:
    """Output of ``Decision.apply`` for N rows and L labels.

    ``confidences`` float64 ``[N, L]`` in [0, 1]; ``accepted`` bool ``[N, L]``
    after relation closure; ``out_of_scope`` bool ``[N]``; ``oos_score``
    float64 ``[N]`` (higher = more out of scope; OOS when above the rule's
    threshold); ``oos_rule`` the rule's name; ``ranking`` float64 ``[N, L]`` orders the labels as
    ``confidences`` do and breaks their ties at the cap of 1 (``p / c`` before the cap, see ``apply``):
    what the top intent and a ranked answer read, so that neither depends on the order of the labels.
    """

    confidences: np.ndarray
    accepted: np.ndarray
    out_of_scope: np.ndarray
    oos_score: np.ndarray
    oos_rule: str
    ranking: np.ndarray


def _vector(values: Any, n: int, name: str, low: float, high: float, low_open: bool = False) -> np.ndarray:
    """A float64 ``[n]`` copy of ``values`` within ``[low, high]`` (``(low, high]`` if ``low_open``)."""
    vector = np.array(values)
    if vector.dtype.kind not in "iuf":  # rejects strings, booleans and ragged lists
        raise DecisionError(f"{name}: expected numbers, got {str(values)[:80]}")
    vector = vector.astype(np.float64)
    if vector.shape != (n,):
        raise DecisionError(f"{name}: expected {n} values (one per label), got shape {list(vector.shape)}")
    below = vector <= low if low_open else vector < low
    if not np.all(np.isfinite(vector)) or np.any(below) or np.any(vector > high):
        bracket = "(" if low_open else "["
        raise DecisionError(f"{name}: every value must lie in {bracket}{low}, {high}]")
    return vector


@dataclass(frozen=True, eq=False)
class Decision:
    """Calibration, PU rescaling, thresholds, OOS rule and relation closure for one model.

    ``labels`` the model's output columns (unique); ``activation``
    ``"softmax"`` or ``"sigmoid"``; ``temperature`` T > 0; ``label_scale`` c_k
    per label in (0, 1] (default ones); ``thresholds`` per label in [0, 1]
    (default 0.5); ``oos`` an ``intentvcs.core.oos`` rule (default never OOS);
    ``relations`` optional, must know every label except ``"oos"``;
    ``support_noise`` optional (softmax only): accept the most likely support
    of the probabilities instead of thresholding confidences;
    ``support_intents`` optional (with ``support_noise`` only): disjoint groups
    of two or more labels that support decoding reads as the names of one
    intent (``training.decision_fit`` takes them from the duplicates among
    ``relations``); ``entity_floor`` in [0, 1): an entity decoded with a
    confidence under it is not answered (``kept_entities``; 0 keeps every one).
    Construction validates and raises ``DecisionError``.
    """

    labels: tuple[str, ...]
    activation: str = "softmax"
    temperature: float = 1.0
    label_scale: np.ndarray | None = None
    thresholds: np.ndarray | None = None
    oos: OOSRule = field(default_factory=NoRule)
    relations: LabelRelations | None = None
    support_noise: float | None = None
    support_intents: tuple[tuple[str, ...], ...] | None = None
    entity_floor: float = 0.0
    _inv_scale: np.ndarray = field(init=False, repr=False, compare=False)
    _intent_columns: np.ndarray = field(init=False, repr=False, compare=False)
    _intent_ids: np.ndarray | None = field(init=False, repr=False, compare=False)
    _closure: Closure | None = field(init=False, repr=False, compare=False)
    _completion: Completion | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        labels = tuple(self.labels)
        if not labels or not all(isinstance(x, str) and x for x in labels) or len(set(labels)) != len(labels):
            raise DecisionError("labels: expected a non-empty list of unique, non-empty strings")
        n = len(labels)
        try:
            check_activation(self.activation)
        except ValueError as exc:
            raise DecisionError(f"activation: {exc}") from None
        temperature = float(_vector([self.temperature], 1, "temperature", 0.0, np.inf, low_open=True)[0])
        scale = (np.ones(n) if self.label_scale is None
                 else _vector(self.label_scale, n, "label_scale", 0.0, 1.0, low_open=True))
        thresholds = (global_thresholds(n) if self.thresholds is None
                      else _vector(self.thresholds, n, "thresholds", 0.0, 1.0))
        self._check_oos(labels)
        noise = None
        if self.support_noise is not None:
            try:
                support.check_activation(self.activation)
                noise = support.check_noise(self.support_noise)
            except (TypeError, ValueError) as exc:
                raise DecisionError(f"support_noise: {exc}") from None
        intents, intent_ids = self._check_support_intents(labels)
        floor = self.entity_floor
        # Not 1: every confidence is at most 1, so that floor would answer no entity at all.
        if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0.0 <= floor < 1.0:
            raise DecisionError(f"entity_floor: expected a number in [0, 1), got {str(floor)[:80]}")
        floor = float(floor)
        closure = completion = None
        if self.relations is not None:
            unknown = [x for x in labels if x != OOS_LABEL and x not in self.relations.labels]
            if unknown:
                raise DecisionError(f"relations: label(s) {unknown[:5]} of the model are unknown to the relations")
            # "oos" is the train rule's verdict, no intent: related to one, it would be accepted beside it.
            verdict = naming_oos(self.relations.relations)
            if verdict is not None:
                raise DecisionError(f"relations: {verdict.type} {list(verdict.labels())} names {OOS_LABEL!r}, "
                                    "the out-of-scope verdict, which relates to no intent")
            # Built once; per request it is a few vectorised gathers.
            closure = self.relations.closure(labels)
            completion = self.relations.completion(labels)
        for name, value in (("labels", labels), ("temperature", temperature), ("label_scale", scale),
                            ("thresholds", thresholds), ("support_noise", noise), ("support_intents", intents),
                            ("entity_floor", floor),
                            ("_intent_ids", intent_ids), ("_inv_scale", 1.0 / scale),
                            ("_intent_columns", intent_columns(labels)),
                            ("_closure", closure), ("_completion", completion)):
            object.__setattr__(self, name, value)

    def _check_support_intents(self, labels: tuple[str, ...]
                               ) -> tuple[tuple[tuple[str, ...], ...] | None, np.ndarray | None]:
        """The groups as tuples and each label's intent id (its group's, else its own), or (None, None)."""
        if self.support_intents is None:
            return None, None
        if self.support_noise is None:
            raise DecisionError("support_intents: only support decoding reads them; set support_noise too")
        if isinstance(self.support_intents, (str, dict)) or not hasattr(self.support_intents, "__iter__"):
            raise DecisionError(f"support_intents: expected a list of label lists, got {str(self.support_intents)[:80]}")
        ids = np.arange(len(labels))
        index = {label: i for i, label in enumerate(labels)}
        grouped: set[str] = set()
        groups = []
        for group in self.support_intents:
            if isinstance(group, str) or not all(isinstance(x, str) for x in group) or len(group) < 2:
                raise DecisionError(f"support_intents: expected lists of two or more labels, got {str(group)[:80]}")
            unknown = [x for x in group if x not in index or x == OOS_LABEL]
            if unknown:
                raise DecisionError(f"support_intents: {unknown[:5]} are not intent labels of the model")
            if len(set(group)) != len(group) or grouped & set(group):
                raise DecisionError(f"support_intents: a label may belong to one group once; {list(group)[:5]}")
            grouped.update(group)
            ids[[index[x] for x in group]] = index[group[0]]
            groups.append(tuple(group))
        return tuple(groups), ids

    def _check_oos(self, labels: Sequence[str]) -> None:
        if not isinstance(self.oos, OOSRule):
            raise DecisionError(f"oos: expected an intentvcs.core.oos rule, got {type(self.oos).__name__}")
        is_train = isinstance(self.oos, TrainRule)
        if is_train and (self.oos.index >= len(labels) or labels[self.oos.index] != OOS_LABEL):
            raise DecisionError(f"oos: the train rule's column {self.oos.index} is not the {OOS_LABEL!r} label")

    # ------------------------------------------------------------ inference
    def confidences(self, logits: np.ndarray) -> np.ndarray:
        """Calibrated confidences ``min(1, p / c)``, float64 ``[N, L]`` in [0, 1], from logits ``[N, L]``."""
        return self._rescaled(self._probabilities(logits))

    def _rescaled(self, probs: np.ndarray) -> np.ndarray:
        return np.minimum(probs * self._inv_scale, 1.0)

    def _probabilities(self, logits: np.ndarray) -> np.ndarray:
        logits = np.asarray(logits)
        if logits.ndim != 2 or logits.shape[1] != len(self.labels):
            raise DecisionError(f"logits must be [N, {len(self.labels)}], got shape {list(logits.shape)}")
        # A NaN or infinite logit makes its row's confidences NaN: never out of scope, and the top
        # fallback would answer the first label. One pass over the batch; rows are counted on refusal only.
        problem = non_finite_problem(logits, "logits")
        if problem:
            raise DecisionError(problem)
        return probabilities(logits, self.activation, self.temperature)

    def top_intents(self, confidences: np.ndarray) -> np.ndarray:
        """Per row of ``confidences [N, L]``, the column of its most confident intent (the train rule's
        ``"oos"`` column is its verdict, no intent)."""
        return np.where(self._intent_columns, confidences, -1.0).argmax(axis=1)

    def apply(self, logits: np.ndarray, pooled: np.ndarray | None = None,
              pooled_mid: np.ndarray | None = None, *, top_fallback: bool = True) -> DecisionResult:
        """Decide a batch: ``apply(*graph_outputs.scores)`` (``intentvcs.core.outputs``).

        Logits ``[N, L]``; the distance rule also reads the pooled embeddings
        ``[N, H]`` and, when it has a neighbour bank, the middle layer's.
        ``top_fallback=False`` leaves an in-scope row with nothing above its
        threshold empty: what the upgrade audit counts, since a forced top
        intent says nothing about what the model recognises. A support is
        never empty (its most likely label is always in it), so under support
        decoding a row is left empty only where its support is the ``"oos"``
        class alone. Non-finite logits, or non-finite embeddings the OOS rule
        reads, raise ``DecisionError`` naming them and how many rows hold them.
        """
        probs = self._probabilities(logits)
        # p / c before the clip at 1: it orders labels as the confidence does, and breaks the ties of clipped
        # labels (p_k >= c_k, frequent with small c_k), which would otherwise all go to the first column, so that
        # the fallback, cover completion and every ranked answer would depend on label order.
        ranking = probs * self._inv_scale
        confidences = np.minimum(ranking, 1.0)
        try:
            out_of_scope, score = self.oos.judge(confidences, pooled, pooled_mid)
        except NonFiniteInput as exc:
            raise DecisionError(str(exc)) from None
        if self.support_noise is None:
            accepted = (confidences >= self.thresholds) & self._intent_columns
        else:
            accepted = support.support_sets(probs, self.support_noise, self._intent_ids) & self._intent_columns
        empty = np.flatnonzero(~out_of_scope & ~accepted.any(axis=1)) if top_fallback else np.array([], int)
        if empty.size:
            top = self.top_intents(ranking[empty])
            accepted[empty, top] = True
        if self._closure is not None:
            accepted = self._closure(accepted)
        if self._completion is not None:
            accepted = self._completion(accepted, ranking, self._closure)
        accepted[out_of_scope] = False
        return DecisionResult(confidences, accepted, out_of_scope, score, self.oos.name, ranking)

    def kept_entities(self, entities: np.ndarray | None) -> np.ndarray | None:
        """``entities`` (``GraphOutputs.entities``: per text a tuple of ``Entity``) without those whose
        confidence lies under ``entity_floor``: the entities answered. Applying it twice changes nothing."""
        if entities is None or not self.entity_floor:
            return entities
        return tuple_array([tuple(e for e in found if e.confidence >= self.entity_floor) for found in entities])

    # ------------------------------------------------------------ serialise
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe, versioned object (inverse of ``from_dict``)."""
        return {
            **DECISION_FORMAT.stamp(),
            "labels": list(self.labels),
            "activation": self.activation,
            "temperature": self.temperature,
            "label_scale": self.label_scale.tolist(),
            "thresholds": self.thresholds.tolist(),
            "oos": self.oos.to_dict(),
            "relations": None if self.relations is None else self.relations.to_dict(),
            "support_noise": self.support_noise,
            "support_intents": None if self.support_intents is None else [list(g) for g in self.support_intents],
            "entity_floor": self.entity_floor,
        }

    @classmethod
    def from_dict(cls, d: Any) -> "Decision":
        """Rebuild from ``to_dict`` output; raises ``DecisionError`` naming the bad field."""
        DECISION_FORMAT.check(d)
        try:
            oos = rule_from_dict(d["oos"])
        except ValueError as exc:
            raise DecisionError(f"oos: {exc}") from None
        try:
            relations = None if d["relations"] is None else LabelRelations.from_dict(d["relations"])
        except ValueError as exc:
            raise DecisionError(f"relations: {exc}") from None
        return cls(tuple(d["labels"]), d["activation"], d["temperature"], d["label_scale"], d["thresholds"],
                   oos, relations, d.get("support_noise"), d.get("support_intents"), d.get("entity_floor", 0.0))
