"""Every threshold and cost cap of the audit, in one frozen dataclass.

The decision rules (``intentvcs.service.audit.rules``) and the estimators
(``intentvcs.service.audit.containment``) read their parameters from here only, so a
report that records ``AuditConfig.to_dict()`` says exactly how it was decided.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from intentvcs.core.references import ROWS_PER_INTENT

RELATIONS = ("duplicate", "subset", "superset", "composite", "novel")
SEVERITIES = ("info", "warning", "blocking")  # ascending
EMBEDDINGS = ("middle", "final")  # AuditConfig.embedding

# Two names for one meaning is never wanted: merge before training. The other
# entanglements are legitimate once the relation is recorded (closure handles
# them at inference), so they warn.
DEFAULT_SEVERITY = {
    "duplicate": "blocking",
    "subset": "warning",
    "superset": "warning",
    "composite": "warning",
    "novel": "info",
}


# The fields that are rates in [0, 1], and those that count (>= 1).
RATES = ("high", "back_high", "sub_min", "part_min", "cover_min", "superset_back_min", "union_part_min",
         "union_cover", "composite_min", "segment_min", "corank_min", "part_share", "same_alpha", "entity_gap",
         "target_oos_max", "superset_oos_max")
COUNTS = ("knn_k", "min_rows", "intent_cap", "reference_cap", "max_candidates", "max_new_pairs", "permutations",
          "segment_cap", "infer_chunk")


def _expect(name: str, value: Any, kinds: type | tuple[type, ...], what: str) -> None:
    """Refuse ``value`` of setting ``name`` unless it is one of ``kinds``, in the config file's (JSON) words."""
    # bool is an int to Python, but "knn_k": true is a mistake, not 1.
    if not isinstance(value, kinds) or (isinstance(value, bool) and kinds is not bool):
        raise ValueError(f"AuditConfig.{name} must be {what}, got {_shown(value)}")


def _shown(value: Any) -> str:
    return json.dumps(value, default=repr)[:60]


@dataclass(frozen=True)
class AuditConfig:
    """Parameters of ``audit_batch``. Rates are fractions in [0, 1].

    Decision thresholds (see ``intentvcs.service.audit.rules`` for the rules):
      high:          contain(N->E) at or above which N "maps to" E.
      back_high:     contain(E->N) at or above which E lies inside N.
      sub_min:       contain(E->N) below which N and E are disjoint in the data,
                     so a high contain(N->E) is the model's extrapolation, not
                     containment (no subset is claimed).
      part_min:      share of N's rows on which E must be accepted (or ranked
                     among the two most confident) to be a candidate, scored
                     in both directions; also the least contain(N->E) of a
                     co-ranked composite's parts and of a part beside a
                     subset's target (rule 2a).
      cover_min:     share of N's rows on which some superset part is accepted.
      superset_back_min: contain(E->N) at or above which E counts as lying
                     inside N for a superset (rule 3); lower than ``back_high``
                     because the estimate runs low for the unseen rows of E
                     that a superset carries (``rules._accepted_union``). 0.4:
                     the highest level at which the generated absorbs-one
                     cases are typed right >= 90% on both audit paths (0.5:
                     83%; 0.3: 97%), with every scored scenario unchanged.
      union_part_min, union_cover: a union read from acceptance (rule 3b):
                     the share of N's rows each part is accepted on, and the
                     share the parts cover together.
      composite_min: share of N's rows with >= 2 independent existing intents
                     accepted at once.
      segment_min:   share of N's sampled rows whose halves, split at a
                     connector, are accepted as the same two unrelated
                     intents (rule 1b). 0.35: MultiWOZ's multi-domain turns
                     chain their requests in only 17-41% of rows, and no
                     other scenario's verdict moves between 0.25 and 0.5.
      corank_min:    for single-label models: how much more often (in share
                     of rows) two intents are ranked first and second on N's
                     rows than on their own rows.
      part_share:    share of those multi-intent rows that must carry E for E
                     to be a part of the composite.
      same_alpha:    p-value below which two intents' utterances are told
                     apart, by the two-sample test in the embedding or by an
                     entity type's share (``intentvcs.service.audit.slots``): not
                     duplicates (a new intent that maps to E but is told apart
                     from E is a subset). Above 0, and above the least p-value
                     of the two-sample test, 1 / (permutations + 1).
      entity_gap:    least difference in an entity type's share of rows
                     that can tell two intents apart.
      target_oos_max, superset_oos_max: the share of N's rows the served model
                     answers out of scope at or above which N is no duplicate or
                     subset (rule 2), no superset (rule 3): its rows are not
                     utterances the model knows, and accepting E on them is the
                     classifier's forced choice (a gift-card balance read as a
                     loyalty-points one, every row refused as out of scope, was
                     typed a duplicate and a merge proposed). On the scored
                     scenarios true duplicates have at most 6% of their rows
                     refused, subsets 21%, supersets that absorb one intent and
                     add new scope 71%; composites, refused up to 88% (the whole
                     chained text is judged), are not guarded.
    Estimation:
      confidence:    level of the Wilson intervals (0.95).
      knn_k:         neighbours of the kNN membership test for contain(E->N).
      embedding:     which pooled embedding the kNN estimates and tests read:
                     ``middle`` (a middle layer's, as the OOS rule's neighbour
                     term) or ``final`` (the last layer's). Fine-tuning makes
                     the last layer blind to what an intent's utterances differ
                     in (one modifier word), so a subset defined by a word looks
                     like the whole intent there (benchmarks/results/audit_layers.md).
      min_rows:      fewest rows on each side for contain(E->N) to be estimated
                     (``intent_cap`` and ``reference_cap`` are at least this).
      intent_cap:    most rows per new intent the model scores (a seeded
                     uniform sample; ``intentvcs.service.audit.sampling``):
                     a share's 95% interval is within 2.2 points from 2,000
                     rows on, and inference is the audit's cost.
      reference_cap: most rows per intent used by the kNN test (random, seeded),
                     which bounds its cost whatever the batch size.
      max_candidates: most existing intents scored per new intent.
      max_new_pairs: most pairs of new intents tested for duplication, the
                     closest first (centroid cosine): the pairs grow with
                     the square of the new intents, each a permutation test.
      permutations:  label permutations of the two-sample test.
      segment_cap:   most rows per new intent split at connectors and
                     scored half by half (``intentvcs.service.audit.segments``).
      seed:          seed of the audit's draws (the references of training rows are drawn as
                     training drew the bundle's, with ``intentvcs.core.references.SEED``).
    Evidence and output:
      examples_cap, relabel_cap: lengths of the example and relabel lists.
      heatmap_cap:   most existing-intent columns in the heatmap.
      infer_chunk:   texts per engine call (progress granularity).
      progress:      tqdm bar: True, False, or None (on when stderr is a TTY).
      severity:      relation -> severity before borderline downgrades.
    """

    high: float = 0.7
    back_high: float = 0.5
    sub_min: float = 0.15
    part_min: float = 0.1
    # 0.3, not the 0.7 of "mostly existing intents": a generic intent that absorbs one
    # existing intent and adds new scope is a superset too (benchmarks/results/audit_layers.md).
    cover_min: float = 0.3
    superset_back_min: float = 0.4
    union_part_min: float = 0.25
    union_cover: float = 0.8
    composite_min: float = 0.5
    segment_min: float = 0.35
    corank_min: float = 0.3
    part_share: float = 0.5
    target_oos_max: float = 0.5
    superset_oos_max: float = 0.9
    same_alpha: float = 0.01
    entity_gap: float = 0.1
    confidence: float = 0.95
    knn_k: int = 10
    embedding: str = "middle"
    min_rows: int = 3
    intent_cap: int = 2000
    reference_cap: int = ROWS_PER_INTENT  # what a bundle keeps per intent (intentvcs.core.references)
    max_candidates: int = 5
    max_new_pairs: int = 200
    permutations: int = 200
    segment_cap: int = 50
    seed: int = 0
    examples_cap: int = 5
    relabel_cap: int = 20
    heatmap_cap: int = 30
    infer_chunk: int = 256
    progress: bool | None = None
    severity: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_SEVERITY))

    def __post_init__(self) -> None:
        self._check_types()
        for name in RATES:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"AuditConfig.{name} must be in [0, 1], got {value}")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"AuditConfig.confidence must be in (0, 1), got {self.confidence}")
        for name in (*COUNTS, "heatmap_cap"):
            if getattr(self, name) < 1:
                raise ValueError(f"AuditConfig.{name} must be >= 1, got {getattr(self, name)}")
        # A negative cap would slice from the end (all but the last few rows); 0 lists none.
        for name in ("seed", "examples_cap", "relabel_cap"):
            if getattr(self, name) < 0:
                raise ValueError(f"AuditConfig.{name} must be >= 0, got {getattr(self, name)}")
        if self.embedding not in EMBEDDINGS:
            raise ValueError(f"AuditConfig.embedding must be one of {EMBEDDINGS}, got {self.embedding!r}")
        if self.min_rows < 2:
            # The kNN test leaves each row out of its own neighbourhood.
            raise ValueError(f"AuditConfig.min_rows must be >= 2, got {self.min_rows}")
        # Caps that keep fewer rows than an estimate needs: no contain(E->N), no two-sample test, ever.
        for name in ("intent_cap", "reference_cap"):
            if getattr(self, name) < self.min_rows:
                raise ValueError(f"AuditConfig.{name} must be >= min_rows ({self.min_rows}), got "
                                 f"{getattr(self, name)}: every estimate needs min_rows rows a side")
        # No p-value is below 0, and a permutation test's is never below 1 / (permutations + 1): an alpha
        # out of reach tells no two intents apart, and every pair the containment admits is a duplicate.
        if self.same_alpha <= 0.0:
            raise ValueError(f"AuditConfig.same_alpha must be in (0, 1], got {self.same_alpha}")
        if 1.0 / (self.permutations + 1) >= self.same_alpha:
            least = math.floor(1.0 / self.same_alpha)
            least += 1.0 / (least + 1) >= self.same_alpha  # 1 / alpha a whole number: one more
            raise ValueError(f"AuditConfig.permutations must be >= {least} for "
                             f"same_alpha {self.same_alpha}, got {self.permutations}: the two-sample test's "
                             f"least p-value, 1/{self.permutations + 1}, is never below it")
        severity = {**DEFAULT_SEVERITY, **dict(self.severity)}
        bad = {k: v for k, v in severity.items() if k not in RELATIONS or v not in SEVERITIES}
        if bad:
            raise ValueError(f"AuditConfig.severity: unknown relation or severity in {bad}")
        object.__setattr__(self, "severity", severity)

    def _check_types(self) -> None:
        """Refuse a value of the wrong type by its setting's name: a config file's "0.5" or null would
        otherwise fail later as a TypeError (a traceback) or, as 2.5 for a count, pass unchecked."""
        for name in (*RATES, "confidence"):
            _expect(name, getattr(self, name), (int, float), "a number")
        for name in (*COUNTS, "seed", "examples_cap", "relabel_cap", "heatmap_cap"):
            _expect(name, getattr(self, name), int, "an integer")
        _expect("embedding", self.embedding, str, "a string")
        if self.progress is not None:
            _expect("progress", self.progress, bool, "true, false or null")
        if not isinstance(self.severity, Mapping):
            raise ValueError(f"AuditConfig.severity must be an object of relation -> severity, "
                             f"got {_shown(self.severity)}")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["severity"] = dict(self.severity)
        return out

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> "AuditConfig":
        """Build from a (partial) mapping; unknown keys are an error naming them."""
        unknown = sorted(set(obj) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"unknown audit config key(s) {unknown}")
        return cls(**dict(obj))
