"""``audit_batch``: validate an upgrade batch, run the model, decide, report.

Acceptance: the audit applies the bundle's decision layer (calibration, PU
scaling, thresholds, relation closure) with its out-of-scope rule set aside,
and reports the served OOS verdict separately (``Finding.out_of_scope``). The
OOS rule answers "should the service answer at all" and is fitted to reject
uncertain traffic; the audit asks which existing intents the classifier puts
an utterance in, and a tight OOS rule would hide exactly the overlaps it looks
for (a duplicate's rows accepted at 0.9 confidence, rejected as OOS). Except
where a refusal says the rows are new (``OOSRule.refusal_is_novelty``: the
distance rule, the trained OOS class): a new intent whose rows are mostly
refused so is no duplicate, subset or superset of the intent the classifier
forces on them (``AuditConfig.target_oos_max``, ``superset_oos_max``).

Cost is bounded whatever the batch's size: the batch is read once, row by
row, keeping a seeded sample of at most ``intent_cap`` rows per new intent
(``intentvcs.service.audit.sampling``); the model scores those once (chunked,
with a tqdm bar), then a capped sample of reference rows (at most
``reference_cap`` per candidate existing intent); every containment estimate
works on capped samples (``intentvcs.service.audit.containment``).
The search for duplicate new intents is the exception: one test per
candidate pair of new intents, quadratic when many share a verdict. A
caller with a deadline (the service) passes ``should_stop``, checked between
steps (each chunk of inference, each finding, each pair).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from tqdm.auto import tqdm

from intentvcs.core.dataio import Example, Span, parse_row
from intentvcs.core.decision import Decision, intent_columns
from intentvcs.core.oos import NoRule
from intentvcs.core.outputs import GraphOutputs
from intentvcs.core.predictor import Predictor
from intentvcs.core.references import reference_sample
from intentvcs.core.team_formats import out_of_scope_row
from intentvcs.service.audit.config import AuditConfig
from intentvcs.service.audit.containment import (
    Count,
    acceptance_counts,
    existing_in_new,
    independent_accepted,
    normalise,
    sample_rows,
    top_two,
    two_sample_test,
    wilson,
)
from intentvcs.service.audit.evidence import Reference, Scored, examples, relabel_list
from intentvcs.service.audit.report import AuditReport, Cooccurrence, Finding, NewPair, PairContainment
from intentvcs.service.audit.rules import Evidence, decide
from intentvcs.service.audit.sampling import BatchSample, row_key, sample_batch
from intentvcs.service.audit.segments import best_pairs
from intentvcs.service.audit.segments import splits as segment_splits
from intentvcs.service.audit.slots import entity_pivot
from intentvcs.service.audit.words import word_pivot


log = logging.getLogger(__name__)


class AuditInputError(ValueError):
    """A batch or training row is invalid; the message names the row (``rows[3]: ...``)."""


class AuditStopped(Exception):
    """``audit_batch`` stopped between two steps because its ``should_stop`` said so."""


def _never() -> bool:
    return False


# Told (stage, done, total) as the audit goes: the service's audit jobs publish it.
Progress = Callable[[str, int, int], None]


def _silent(stage: str, done: int, total: int) -> None:
    return None


def _check(should_stop: Callable[[], bool]) -> None:
    if should_stop():
        raise AuditStopped("the audit was asked to stop")


def validate_rows(rows: Iterable[Any], name: str = "rows") -> list[Example]:
    """Rows as ``Example``s; dicts are checked by ``intentvcs.core.dataio.parse_row``.

    Raises ``AuditInputError`` naming the first bad row by its index in
    ``name``, or when there are no rows at all.
    """
    check = row_checker(rows, name)
    out = [check(i, row) for i, row in enumerate(rows)]
    if not out:
        raise AuditInputError(f"{name}: no rows")
    return out


def row_checker(rows: Iterable[Any], name: str) -> Callable[[int, Any], Example]:
    """``check(index, row)``: the row as an ``Example``, or ``AuditInputError`` naming ``name[index]``.

    Refuses at once a ``rows`` that is one value rather than a collection of rows. A row labelled "oos"
    alone is an out-of-scope row (``labels []``), as train and evaluate read it (``out_of_scope_row``): as a
    new intent it would be one no model answers, and its proposed relations would name the verdict.
    """
    # None or a number is one value too: it raised a bare TypeError from the loop that reads the rows.
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
        raise AuditInputError(f"{name}: expected a list of rows, got {type(rows).__name__}")

    def check(i: int, row: Any) -> Example:
        try:
            return out_of_scope_row(_checked_example(row) if isinstance(row, Example) else parse_row(row))
        except ValueError as exc:
            raise AuditInputError(f"{name}[{i}]: {exc}") from None

    return check


def _checked_example(row: Example) -> Example:
    """``row``, held to the rules ``parse_row`` holds a dict row to. An ``Example`` built in code skipped
    them all: a blank text was scored, labels given as a string ("fresh") were one new intent per
    character, and a row labelled twice with one intent was offered twice to its sample (one row, counted
    as two)."""
    if not isinstance(row.labels, (tuple, list)):
        raise ValueError("'labels' must be a list of non-empty strings")
    if not isinstance(row.spans, (tuple, list)) or not all(isinstance(span, Span) for span in row.spans):
        raise ValueError("'spans' must be a list of {start, end, label} objects")
    parse_row(row.to_dict())
    return row


def _progress(config: AuditConfig, total: int, desc: str) -> tqdm:
    # tqdm's disable=None turns the bar off when stderr is not a terminal.
    disable = None if config.progress is None else not config.progress
    return tqdm(total=total, desc=desc, unit="utt", disable=disable, leave=False)


def _infer(model: Predictor, texts: Sequence[str], config: AuditConfig, desc: str,
           should_stop: Callable[[], bool] = _never, progress: Progress = _silent) -> GraphOutputs:
    """``model.infer`` over ``texts`` in chunks of ``infer_chunk``, with a progress bar (and ``progress``
    told ``(desc, done, total)`` after every chunk)."""
    chunks = []
    with _progress(config, len(texts), desc) as bar:
        for start in range(0, len(texts), config.infer_chunk):
            _check(should_stop)
            chunk = list(texts[start:start + config.infer_chunk])
            chunks.append(GraphOutputs(*model.infer(chunk)))
            bar.update(len(chunk))
            progress(desc, min(start + len(chunk), len(texts)), len(texts))
    return GraphOutputs.concatenate(chunks)


def _references(names: Iterable[str], own: dict[str, list[Example]], training: list[Example] | None,
                model_rows: list[Example], config: AuditConfig, rng: np.random.Generator) -> dict[str, Reference]:
    """A seeded sample of at most ``reference_cap`` rows per existing intent, and its profile rows (at most
    ``intent_cap``, drawn apart: ``Reference``).

    An intent's rows come from the first source that has any: the caller's
    ``training`` rows (``"training"``), the model's own sample of them
    (``model_rows``, ``"model"``: also where training rows were sent but hold
    none of the intent, a file of other data), else ``own``: the batch's rows
    of it that carry no new intent (those are the new intents' own evidence,
    not the existing intent's; ``BatchSample.existing``). The references of
    training rows are drawn as training drew the model's sample of them
    (``intentvcs.core.references.reference_sample``), so that an audit with
    the training file and one with the bundle alone read the same
    references; the profile draws on all of them.
    """
    sources = [("model", _by_label(model_rows), None)]
    if training is not None:
        sources.insert(0, ("training", _by_label(training),
                           _by_label(reference_sample(training, config.reference_cap))))
    out = {}
    # The profile's own draw: the sample of ``rng`` (and every draw after it) stays what it was.
    profile_rng = np.random.default_rng(config.seed)
    for name in names:
        source, pool, drawn = next(((source, rows[name], drawn) for source, rows, drawn in sources if name in rows),
                                   ("batch", own.get(name, []), None))
        references = drawn.get(name, []) if drawn is not None else pool
        chosen = sample_rows(len(references), config.reference_cap, rng)
        profile = [pool[i] for i in sample_rows(len(pool), config.intent_cap, profile_rng)]
        out[name] = Reference([references[i] for i in chosen], source, profile)
    return out


def _by_label(rows: Iterable[Example]) -> dict[str, list[Example]]:
    """``rows`` per label, a repeated row once (no new evidence, as in the batch: ``sample_batch``)."""
    by_label: dict[str, list[Example]] = {}
    seen = set()
    for ex in rows:
        key = row_key(ex)
        if key in seen:
            continue
        seen.add(key)
        for label in ex.labels:
            by_label.setdefault(label, []).append(ex)
    return by_label


def audit_batch(model: Predictor, rows: Iterable[Any], training_rows: Iterable[Any] | None = None,
                config: AuditConfig = AuditConfig(), should_stop: Callable[[], bool] = _never,
                progress: Progress = _silent) -> AuditReport:
    """Audit an upgrade batch against the current model.

    Args:
        model: the current model, an ``intentvcs.core.predictor.Predictor``
            (the bundle's ``Engine`` or a checkpoint's ``TorchPredictor``); its
            ``decision.relations`` are the known relations, and its ``info``
            is copied into the report.
        rows: the batch, canonical rows (dicts or ``Example``s). Labels that
            the model does not know are the new intents under audit.
        training_rows: optional sample of the old data, the preferred source of existing
            intents' utterances for contain(E->N); else ``model.reference_rows()``.
        config: thresholds and caps (``AuditConfig``).
        should_stop: called between steps; when it returns True the audit
            raises ``AuditStopped`` (the service's deadline).
        progress: told ``(stage, done, total)`` after every inference chunk
            and every new intent decided (the service's audit jobs).
    Returns an ``AuditReport``: one finding per new intent, in order of first
    appearance in the batch. Raises ``AuditInputError`` for a malformed row
    (the message names it), ``AuditStopped`` when ``should_stop`` said so.
    """
    started = time.perf_counter()
    labels = list(model.labels)
    sample = sample_batch(rows, labels, config.intent_cap, config.reference_cap, config.seed,
                          check=row_checker(rows, "rows"))
    if not sample.batch_rows:
        raise AuditInputError("rows: no rows")
    training = validate_rows(training_rows, "training_rows") if training_rows is not None else None
    trained = None if training is None else {label for row in training for label in row.labels}
    if trained is not None and not trained & set(labels):
        log.warning("training_rows: no row carries one of the model's %d intents: not the data it was trained "
                    "on? The audit reads the model's own rows of them where it keeps some", len(labels))
    known = model.decision.relations
    new_intents = sample.new_intents
    # "inference" is a figure of every report (the package's report format), 0 where nothing new was scored.
    timing = {"reading": time.perf_counter() - started, "inference": 0.0}
    findings, new_pairs, per_intent, missing = [], [], {}, []
    if sample.rows:
        audit = _score(model, sample, config, should_stop, progress)
        timing["inference"] = time.perf_counter() - started - timing["reading"]
        per_intent = {name: audit.candidates(name) for name in new_intents}
        segmented = audit.segment_pairs(model, new_intents)
        needed = list(dict.fromkeys(labels[j] for _, _, keep in per_intent.values() for j in keep))
        # The model's own sample of its training rows only where the training rows lack an intent.
        lacking = trained is None or not set(needed) <= trained
        references = _references(needed, sample.existing, training, (model.reference_rows() or []) if lacking else [],
                                 config, audit.rng)
        missing = [name for name, ref in references.items() if not ref.examples]
        embedding = time.perf_counter()
        audit.add_references(model, references)
        timing["inference"] += time.perf_counter() - embedding
        findings = audit.findings(new_intents, per_intent, segmented)
        new_pairs = audit.new_pairs(findings)
    timing["total"] = time.perf_counter() - started
    return AuditReport(
        findings=findings,
        new_pairs=new_pairs,
        cooccurrence=_cooccurrence(per_intent, labels),
        config=config,
        known_relations=known,
        labels=labels,
        batch_rows=sample.batch_rows,
        audited_rows=sample.audited_rows,
        scored_rows=len(sample.rows),
        duplicate_rows=sample.duplicate_rows,
        missing_references=missing,
        engine=dict(model.info),
        timing_s=timing,
    )


def _score(model: Predictor, sample: BatchSample, config: AuditConfig,
           should_stop: Callable[[], bool] = _never, progress: Progress = _silent) -> _Audit:
    """One model pass over the sampled rows that carry new intents, decided as the model decides.

    The decision runs without its OOS rule: a row judged out of scope accepts
    nothing, and the audit needs every row's accepted labels; the OOS verdict
    is judged apart, into ``out_of_scope``. Nor does it force a top intent on
    a row with nothing above its threshold: containment counts what the model
    recognises.
    """
    labels, served = list(model.labels), model.decision
    decision = dataclasses.replace(served, oos=NoRule())
    outputs = _infer(model, [ex.text for ex in sample.rows], config, "audit: new intents", should_stop, progress)
    result = decision.apply(*outputs.scores, top_fallback=False)
    known = decision.relations
    return _Audit(
        config=config, labels=labels, decision=decision, examples=sample.rows, members=sample.members,
        rows_per_intent=sample.rows_per_intent, confidences=result.confidences, ranking=result.ranking,
        accepted=result.accepted, ranked=top_two(result.ranking, intent_columns(labels)),
        vectors=_vectors(outputs, config),
        out_of_scope=served.oos.judge(result.confidences, outputs.pooled, outputs.pooled_mid)[0], oos_rule=served.oos,
        implication=(known.implication_matrix(labels) if known is not None else np.eye(len(labels), dtype=bool)),
        rng=np.random.default_rng(config.seed), should_stop=should_stop, progress=progress)


def _vectors(outputs: GraphOutputs, config: AuditConfig) -> np.ndarray:
    """The unit-norm pooled embedding the containment estimates read (``AuditConfig.embedding``)."""
    return normalise(outputs.pooled_mid if config.embedding == "middle" else outputs.pooled)


@dataclass
class _Audit:
    """Scored rows of the new intents (``examples``, aligned arrays) and the reference rows."""

    config: AuditConfig
    labels: list[str]
    decision: Decision       # the bundle's, with the OOS rule set aside
    examples: list[Example]
    members: dict[str, list[int]]    # new intent -> indices into examples of its own sample
    rows_per_intent: dict[str, int]  # new intent -> its rows in the whole batch
    confidences: np.ndarray  # [n, L]
    ranking: np.ndarray      # [n, L], the decision's (DecisionResult.ranking): confidences' ties at 1 broken
    accepted: np.ndarray     # bool [n, L]
    ranked: np.ndarray       # bool [n, L], the row's two most confident labels (by ``ranking``)
    out_of_scope: np.ndarray # bool [n], the served decision's OOS verdict
    oos_rule: Any            # the served decision's OOS rule
    vectors: np.ndarray      # unit-norm pooled [n, H], the layer AuditConfig.embedding names
    implication: np.ndarray  # bool [L, L], known relations
    rng: np.random.Generator
    should_stop: Callable[[], bool] = _never
    progress: Progress = _silent
    references: dict[str, Reference] = field(default_factory=dict)
    reference_vectors: dict[str, np.ndarray] = field(default_factory=dict)
    reference_ranked: dict[str, np.ndarray] = field(default_factory=dict)

    def candidates(self, name: str) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """``(rows of name, contain(N->E) numerators [L], candidate columns)``.

        Candidates: existing intents accepted on, or among the two most
        confident intents of, at least ``part_min`` of the new intent's rows;
        the ``max_candidates`` most often accepted (then most often ranked).
        """
        rows = np.array(self.members[name])
        counts = acceptance_counts(self.accepted[rows])
        ranked = self.ranked[rows].sum(axis=0)
        # In whole rows: 0.07 * 100 is 7.000000000000001 in floats, and an intent accepted on exactly part_min
        # of N's rows (7 of 100), which the rules count as enough (7 / 100 >= 0.07), was no candidate.
        floor = max(1, math.ceil(self.config.part_min * len(rows) - 1e-9))
        order = np.lexsort((-ranked, -counts))  # by counts, then ranked, both descending
        keep = [int(j) for j in order if counts[j] >= floor or ranked[j] >= floor]
        return rows, counts, keep[:self.config.max_candidates]

    def add_references(self, model: Predictor, references: dict[str, Reference]) -> None:
        """Score the reference rows (one model pass over all of them)."""
        texts = [ex.text for ref in references.values() for ex in ref.examples]
        if not texts:
            return
        outputs = _infer(model, texts, self.config, "audit: references", self.should_stop, self.progress)
        vectors = _vectors(outputs, self.config)
        ranked = top_two(self.decision.apply(*outputs.scores).ranking, intent_columns(self.labels))
        offset = 0
        for name, ref in references.items():
            self.reference_vectors[name] = vectors[offset:offset + len(ref.examples)]
            self.reference_ranked[name] = ranked[offset:offset + len(ref.examples)]
            offset += len(ref.examples)
        self.references.update(references)

    def pair_baseline(self, keep: list[int]) -> np.ndarray:
        """float ``[C, C]``: share of the reference rows of a and b ranking {a, b} first and second.

        How often two intents are co-ranked on their own utterances (siblings
        such as music and podcasts always are); 0 where neither has reference rows.
        """
        out = np.zeros((len(keep), len(keep)))
        for (x, a), (y, b) in itertools.combinations(enumerate(keep), 2):
            names = [self.labels[a], self.labels[b]]
            rows = [self.reference_ranked[n] for n in names if n in self.reference_ranked]
            rows = np.concatenate(rows) if rows else np.zeros((0, len(self.labels)), dtype=bool)
            out[x, y] = out[y, x] = float((rows[:, a] & rows[:, b]).mean()) if len(rows) else 0.0
        return out

    def segment_pairs(self, model: Predictor, names: list[str]) -> dict[str, tuple[tuple[str, str], Count]]:
        """Per new intent, its most frequent split pair of intents and its count (see ``segments``).

        One model pass over the halves of at most ``segment_cap`` sampled rows per intent.
        """
        sampled, cuts = {}, {}
        for name in names:
            rows = self.members[name]
            sampled[name] = [rows[i] for i in sample_rows(len(rows), self.config.segment_cap, self.rng)]
            cuts[name] = segment_splits([self.examples[i].text for i in sampled[name]])
        halves = [text for name in names for cut in cuts[name] for text in (cut.left, cut.right)]
        if not halves:
            return {}
        outputs = _infer(model, halves, self.config, "audit: split utterances", self.should_stop,
                         self.progress)
        result = self.decision.apply(*outputs.scores, top_fallback=False)
        # A half must be in scope for the service: the halves of a novel
        # request are no requests the model knows, whatever it accepts.
        in_scope = ~self.oos_rule.judge(result.confidences, outputs.pooled, outputs.pooled_mid)[0]
        accepted = result.accepted & in_scope[:, None]
        out, offset = {}, 0
        for name in names:
            n = len(cuts[name])
            left = slice(offset, offset + 2 * n, 2)
            right = slice(offset + 1, offset + 2 * n, 2)
            offset += 2 * n
            if not n:
                continue
            # The halves' top intents and strengths by the decision's ranking: by confidences, a half accepted
            # as two intents capped at 1 read as the first of them in label order, whatever the model said.
            pairs = best_pairs(cuts[name], result.ranking[left], accepted[left],
                               result.ranking[right], accepted[right], self.implication,
                               len(sampled[name]))
            counted = Counter(p for p in pairs if p is not None)
            if counted:
                (a, b), k = counted.most_common(1)[0]
                out[name] = ((self.labels[a], self.labels[b]),
                             wilson(k, len(sampled[name]), self.config.confidence))
        return out

    def findings(self, names: list[str], per_intent: dict[str, tuple[np.ndarray, np.ndarray, list[int]]],
                 segmented: dict[str, tuple[tuple[str, str], Count]]) -> list[Finding]:
        """One finding per new intent, in order, with progress after each."""
        out = []
        for done, name in enumerate(names, start=1):
            _check(self.should_stop)
            out.append(self.finding(name, *per_intent[name], segmented.get(name)))
            self.progress("audit: new intents decided", done, len(names))
        return out

    def finding(self, name: str, rows: np.ndarray, counts: np.ndarray, keep: list[int],
                segmented: tuple[tuple[str, str], Count] | None = None) -> Finding:
        """Estimate both directions for each candidate, decide, gather evidence."""
        config, n = self.config, len(rows)
        accepted = self.accepted[rows]
        independent = independent_accepted(accepted, self.implication)
        multi = wilson(int((independent.sum(axis=1) >= 2).sum()), n, config.confidence)
        candidates = [self.labels[j] for j in keep]
        memberships = {}
        for j, existing in zip(keep, candidates):
            membership = existing_in_new(
                self.vectors[rows][accepted[:, j]], self.reference_vectors.get(existing, np.zeros((0, 1))),
                k=config.knn_k, min_rows=config.min_rows, reference_cap=config.reference_cap,
                level=config.confidence, rng=self.rng)
            if membership is not None:
                memberships[existing] = membership
        own = [self.examples[i] for i in rows]
        # The entity and word tests read every row held (annotations and words: no inference), not the
        # kNN estimate's sample of 200: the sample's share of an entity type can stray far from the
        # intent's (a SNIPS sample of RateBook read object_type on 34% of its rows, the 946 rows on 47%).
        theirs = [self.references[c].profile if c in self.references else None for c in candidates]
        pivots = tuple(None if rows_of_e is None else
                       entity_pivot(own, rows_of_e, min_rows=config.min_rows, min_gap=config.entity_gap)
                       for rows_of_e in theirs)
        word_pivots = tuple(None if rows_of_e is None else
                            word_pivot(own, rows_of_e, min_rows=config.min_rows, min_gap=config.entity_gap)
                            for rows_of_e in theirs)
        to_existing = tuple(wilson(int(counts[j]), n, config.confidence) for j in keep)
        to_new = tuple(memberships[c].count if c in memberships else None for c in candidates)
        out_of_scope = wilson(int(self.out_of_scope[rows].sum()), n, config.confidence)
        # A refusal by confidence alone (the threshold rule) says the classifier is unsure, not that the
        # rows are new: those rules keep deciding on acceptance, as the module docstring says.
        novelty = out_of_scope if self.oos_rule.refusal_is_novelty else None
        verdict = decide(Evidence(
            intent=name, candidates=tuple(candidates), to_existing=to_existing, to_new=to_new,
            accepted=accepted[:, keep], independent=independent[:, keep],
            ranked=self.ranked[np.ix_(rows, keep)], pair_baseline=self.pair_baseline(keep),
            implication=self.implication[np.ix_(keep, keep)], multi=multi, pivots=pivots,
            word_pivots=word_pivots, segmented=segmented, out_of_scope=novelty), config)
        scored = Scored([self.examples[i] for i in rows], self.confidences[rows], accepted, self.ranking[rows])
        good, counter = examples(verdict, scored, self.labels, config.examples_cap)
        pairs = tuple(PairContainment(c, fwd, back, self.references[c].source if back is not None else None, pivot)
                      for c, fwd, back, pivot in zip(candidates, to_existing, to_new, pivots))
        return Finding(verdict=verdict, rows=self.rows_per_intent[name], scored_rows=n, containment=pairs,
                       multi_intent=multi, out_of_scope=out_of_scope, examples=good, counter_examples=counter,
                       relabel=relabel_list(memberships, self.references, config.relabel_cap))

    def new_pairs(self, findings: list[Finding]) -> list[NewPair]:
        """Pairs of new intents that duplicate each other (two new names for one meaning).

        Candidate pairs share a verdict (same relation, same existing
        intents), or are novel and one is the other's nearest novel intent by
        centroid. A pair is a duplicate when each lies inside the other
        (contain both ways >= ``back_high``, the kNN estimate of
        ``existing_in_new`` with one new intent as the positives) and neither
        the two-sample test nor the entity profiles tell their utterances
        apart. Cost: one test per candidate pair on capped samples.
        """
        vectors = {f.verdict.intent: self.vectors[self.members[f.verdict.intent]] for f in findings}
        groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
        for f in findings:
            if f.verdict.relation != "novel":
                groups.setdefault((f.verdict.relation, tuple(sorted(f.verdict.existing))), []).append(f.verdict.intent)
        pairs = {tuple(sorted(p)) for names in groups.values() for p in itertools.combinations(names, 2)}
        novel = [f.verdict.intent for f in findings if f.verdict.relation == "novel"]
        if len(novel) > 1:
            centroids = normalise(np.stack([vectors[x].mean(axis=0) for x in novel]))
            closeness = centroids @ centroids.T
            np.fill_diagonal(closeness, -np.inf)
            pairs |= {tuple(sorted((x, novel[int(closeness[i].argmax())]))) for i, x in enumerate(novel)}
        out = []
        tested = self._closest(sorted(pairs), vectors)
        for done, (a, b) in enumerate(tested, start=1):
            _check(self.should_stop)
            pair = self._duplicate_pair(a, b, vectors)
            if pair is not None:
                out.append(pair)
            # The quadratic step: a job's progress stayed at its last finding for all of it (seconds to minutes).
            self.progress("audit: new intent pairs compared", done, len(tested))
        return out

    def _duplicate_pair(self, a: str, b: str, vectors: dict[str, np.ndarray]) -> NewPair | None:
        """``a`` and ``b`` as a duplicate pair (``new_pairs``' test), or None."""
        config, members = self.config, self.members
        test = two_sample_test(vectors[a], vectors[b], k=config.knn_k, min_rows=config.min_rows,
                               cap=config.reference_cap, permutations=config.permutations, rng=self.rng)
        if test is None or test.p_value < config.same_alpha:
            return None
        pivot = entity_pivot([self.examples[i] for i in members[a]], [self.examples[i] for i in members[b]],
                             min_rows=config.min_rows, min_gap=config.entity_gap)
        if pivot is not None and pivot.p_value < config.same_alpha:
            return None
        estimate = dict(k=config.knn_k, min_rows=config.min_rows, reference_cap=config.reference_cap,
                        level=config.confidence, rng=self.rng)
        a_in_b = existing_in_new(vectors[b], vectors[a], **estimate)
        b_in_a = existing_in_new(vectors[a], vectors[b], **estimate)
        if min(a_in_b.count.rate, b_in_a.count.rate) < config.back_high:
            return None
        return NewPair(a, b, "duplicate", a_in_b.count, b_in_a.count, test, config.severity["duplicate"])

    def _closest(self, pairs: list[tuple[str, str]], vectors: dict[str, np.ndarray]) -> list[tuple[str, str]]:
        """At most ``max_new_pairs`` of ``pairs``, the closest first (cosine of the two centroids)."""
        cap = self.config.max_new_pairs
        if len(pairs) <= cap:
            return pairs
        centroid = {name: normalise(rows.mean(axis=0, keepdims=True))[0] for name, rows in vectors.items()}
        ranked = sorted(pairs, key=lambda pair: -float(centroid[pair[0]] @ centroid[pair[1]]))
        log.warning("audit: %d candidate pairs of new intents; testing the %d closest (max_new_pairs)",
                    len(pairs), cap)
        return ranked[:cap]


def _cooccurrence(per_intent: dict[str, tuple[np.ndarray, np.ndarray, list[int]]],
                  labels: list[str]) -> Cooccurrence:
    """The contain(N->E) count matrix over the existing intents accepted at least once."""
    names = list(per_intent)
    matrix = np.array([per_intent[x][1] for x in names], dtype=int).reshape(len(names), len(labels))
    sizes = np.array([len(per_intent[x][0]) for x in names], dtype=int)
    rates = matrix / np.maximum(sizes, 1)[:, None]
    columns = [j for j in np.argsort(-rates.max(axis=0, initial=0.0), kind="stable") if matrix[:, j].any()]
    return Cooccurrence(new=names, existing=[labels[j] for j in columns],
                        counts=[[int(matrix[i, j]) for j in columns] for i in range(len(names))],
                        rows=[int(s) for s in sizes])
