"""Typed verdicts from containment evidence: the audit's decision rules.

For a new intent N, with candidates E (existing intents accepted on, or
ranked among the two most confident intents of, at least ``part_min`` of N's
rows; at most ``max_candidates``, most accepted first), the rules are tried in
this order; the first that holds decides. Thresholds are ``AuditConfig``
fields.

1. composite, co-accepted: the share of N's rows on which >= 2 *independent*
   existing intents are accepted at once (accepted sets reduced modulo known
   relations) is >= ``composite_min``, and >= 2 candidates each appear on
   >= ``part_share`` of those rows. Parts = those candidates. Checked first
   because a composite also looks "contained" in each of its parts.
1b. composite, segmented: split at connectors ("X and Y"), the two
   halves of >= ``segment_min`` of N's sampled rows are accepted as the
   same two unrelated existing intents (``intentvcs.service.audit.segments``). For
   single-label models, whose softmax gives a joined request's mass to one
   part; the share counts every sampled row, so intents that are not
   chained requests cannot reach it.
2. duplicate / subset (after rule 3 when that finds two or more parts,
   each accepted on >= ``part_min`` of N's rows: a union whose biggest part
   holds most of N's rows is still a superset): targets = candidates with
   contain(N->E) >= ``high`` whose contain(E->N) is unknown or >=
   ``sub_min``, keeping the most specific (a target implied by another
   target, e.g. the parent of an accepted child, is dropped). For the best
   target E: contain(E->N) >= ``back_high`` and neither the entity profiles
   nor the words tell N's utterances from E's (``intentvcs.service.audit.slots``:
   no entity type is carried by a significantly different share of N's rows
   than of E's, p >= ``same_alpha``; ``intentvcs.service.audit.words``: no word on
   nearly all of N's rows is on significantly fewer of E's) -> duplicate
   (same meaning, same utterances); otherwise -> subset (N is too specific,
   N within E, "E with w" when a word tells them apart). The entity test
   matters for large subsets: when N covers most of E, contain(E->N) is
   high too, but N's rows still differ from E's in one entity. (The
   embedding's two-sample test is not used here: E's rows are training
   rows, which the model has pulled together, so unseen rows of E itself are
   told apart from them; measured on CLINC150, 4 of 20 true duplicates at
   p <= 0.01. New intents are compared with each other by it, both sides
   unseen; see ``batch._Audit.new_pairs``.) When contain(E->N) cannot be
   estimated (no rows of E in the training sample or the batch) the verdict
   is subset, the weaker claim the evidence supports, and the rationale says
   a duplicate is not excluded (or names the entity or word that excludes
   it). A candidate with contain(E->N) < ``sub_min`` is no target: no utterance of E resembles N's, so the model accepting E
   on N's rows is its forced choice on unfamiliar input (a softmax must put
   its mass somewhere), not containment; unless a word pivot explains the
   low estimate (N is the part of E that says the word, and the embedding
   does not see words). N whose rows the served model mostly answers out of
   scope (``target_oos_max``) has no target: they are not utterances of E it
   knows.
2a. A subset of E whose rows also carry an unrelated existing intent B,
   accepted on >= ``part_min`` of N's rows and with contain(B->N) >=
   ``sub_min`` (B's own rows resemble N's, so B is no forced choice), is a
   composite of E and B: a subset's rows are E's rows, and on the generated
   and scored subsets no unrelated intent is accepted on more than 10% of
   them, the one at 10% with 1% of its rows like N's (a hotel request that
   also books a train: train accepted on a fifth of the rows). Without that
   resemblance B is not named: a request the model never saw (a taxi beside
   a restaurant) is read as its nearest known intent, and a composite
   naming it would relate N to that intent's every version.
3. superset: parts = candidates with contain(E->N) >= ``superset_back_min`` (E lies
   inside N), keeping the most general (a part that implies another part is
   dropped). If the rows of N accepting some part cover >= ``cover_min`` of
   N, N is a superset of the parts (too generic). One part suffices. Not
   when the served model answers ``superset_oos_max`` or more of N's rows out
   of scope.
3b. union, read from acceptance (``_accepted_union``; with rule 3 ahead of
   rule 2): two or more unrelated candidates, each accepted on >=
   ``union_part_min`` of N's rows and together on >= ``union_cover``, none
   with contain(E->N) < ``sub_min``, no pair co-ranked beyond its baseline
   by ``corank_min`` (that would be a composite's rows) -> superset of them.
4. composite, co-ranked: a single-label model (softmax) never accepts two
   intents at once; on a composite's rows it ranks the two parts first and
   second and accepts one or the other. So: two unrelated candidates, each
   accepted on >= ``part_min`` of N's rows, that are the row's two most
   confident intents on a share of N's rows exceeding their share on the
   parts' own reference rows (the baseline) by >= ``corank_min``. The
   baseline removes siblings that a model always ranks together (music and
   podcasts; lights on and off); requiring both parts to be accepted
   removes an intent the model forces onto one E with a habitual runner-up.
   Checked after superset, because the sub-intents of a generic intent are
   co-ranked too; what separates them is that those lie inside N (rule 3)
   and a composite's parts do not. Composites of three or more parts need rule 1.
   A pair with a part inside N (contain(E->N) >= ``superset_back_min``)
   reaches this rule only where rule 3 did not hold for another reason (its
   parts cover under ``cover_min`` of N's rows, or the service refuses
   ``superset_oos_max`` of them); it is still typed composite, and the
   rationale gives both parts' contain(E->N) and that reason ("neither lies
   inside N" only when both are known and under the threshold).
5. novel: anything else, including overlap without containment (an
   embedding close to E, a minority of rows accepted as E, or the model's
   forced choice of rule 2).

Borderline: when a Wilson interval that decided the verdict holds its
threshold, more rows could flip the verdict to the one across that threshold
(the "alternative": novel when contain(N->E), the coverage or a composite
share is in doubt; subset <-> duplicate when contain(E->N) is).
The verdict stands with ``borderline`` set, and its severity is lowered one
step (blocking -> warning -> info) when some alternative is milder, so that a
CI gate fails only on what the evidence establishes. A subset that might be a
duplicate keeps its severity.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from intentvcs.service.audit.config import SEVERITIES, AuditConfig
from intentvcs.service.audit.containment import Count, percent, percent_under, wilson
from intentvcs.service.audit.slots import EntityPivot
from intentvcs.service.audit.words import WordPivot


@dataclass(frozen=True)
class Evidence:
    """What the rules read about one new intent.

    ``candidates`` are existing intents by decreasing contain(N->E);
    ``accepted`` / ``independent`` are bool ``[n, C]`` over N's rows and those
    candidates (raw acceptance, and acceptance reduced modulo relations);
    ``implication`` is bool ``[C, C]`` (known relations among candidates);
    ``to_new`` holds contain(E->N) or ``None`` where it could not be estimated;
    ``ranked`` is bool ``[n, C]``: the candidate is one of the row's two most
    confident intents; ``pair_baseline`` is float ``[C, C]``: how often two
    candidates are ranked first and second on their own reference rows;
    ``multi`` counts N's rows with >= 2 independent existing intents accepted
    (over all existing intents); ``pivots`` holds, per candidate, the entity
    type whose share of rows differs most between N's rows and the
    candidate's reference rows, ``None`` without annotations or difference;
    ``segmented`` the most frequent pair of intents the halves of N's rows
    split at a connector are accepted as, with its count over the sampled
    rows (``None``: no row splits into two intents); ``word_pivots`` holds,
    per candidate, the word on nearly all of N's rows and on fewer of the
    candidate's (``intentvcs.service.audit.words``), ``None`` where none is;
    ``out_of_scope`` the share of N's rows the served model refuses.
    """

    intent: str
    candidates: tuple[str, ...]
    to_existing: tuple[Count, ...]
    to_new: tuple[Count | None, ...]
    accepted: np.ndarray
    independent: np.ndarray
    ranked: np.ndarray
    pair_baseline: np.ndarray
    implication: np.ndarray
    multi: Count
    pivots: tuple[EntityPivot | None, ...] = ()
    segmented: tuple[tuple[str, str], Count] | None = None
    word_pivots: tuple[WordPivot | None, ...] = ()
    out_of_scope: Count | None = None  # N's rows the served model answers out of scope

    @property
    def n(self) -> int:
        return self.multi.n


@dataclass(frozen=True)
class Verdict:
    """A typed finding: ``relation`` of ``intent`` to ``existing`` intents.

    ``support`` marks N's rows that back the verdict (they accept the target,
    a part, or >= 2 parts); ``statistic`` is the deciding figure (coverage for
    supersets, the multi-intent share for composites) when it is not one of
    the per-pair containments.
    """

    intent: str
    relation: str
    existing: tuple[str, ...]
    severity: str
    borderline: bool
    rationale: str
    support: np.ndarray
    statistic: Count | None = field(default=None)


def decide(evidence: Evidence, config: AuditConfig) -> Verdict:
    """Apply the rules of this module's docstring to one new intent."""
    for rule in (_co_accepted, _co_segmented, _union_of_parts, _single_target, _superset, _co_ranked):
        verdict = rule(evidence, config)
        if verdict is not None:
            return verdict
    return _novel(evidence, config)


def _verdict(evidence: Evidence, config: AuditConfig, relation: str, existing: list[str],
             alternatives: list[str], rationale: str, support: np.ndarray,
             statistic: Count | None = None) -> Verdict:
    """``alternatives``: the relations that the borderline intervals allow instead (may be empty)."""
    rank = {name: SEVERITIES.index(level) for name, level in config.severity.items()}
    level = rank[relation]
    if any(rank[alt] < level for alt in alternatives):
        level -= 1
    return Verdict(evidence.intent, relation, tuple(existing), SEVERITIES[level], bool(alternatives),
                   rationale, support, statistic)


def _corank(ev: Evidence, a: int, b: int) -> tuple[float, int]:
    """How much more often ``a`` and ``b`` are ranked first and second on N's rows than on their own (rule 4),
    and on how many of N's rows they are."""
    together = int((ev.ranked[:, a] & ev.ranked[:, b]).sum())
    return together / ev.n - float(ev.pair_baseline[a, b]), together


def _reaches(excess: float, threshold: float) -> bool:
    """``excess >= threshold`` for a difference of two shares: in floats 70% - 40% is 0.2999..., and an excess of
    exactly ``corank_min``, which the rule calls enough, read under it. A shortfall under 1e-9 is the subtraction's
    rounding (shares of fewer than a billion rows are further apart)."""
    return excess >= threshold - 1e-9


def _most_specific(indices: list[int], implication: np.ndarray) -> list[int]:
    """Drop each index strictly implied by another (keep children, drop parents)."""
    return [j for j in indices
            if not any(implication[i, j] and not implication[j, i] for i in indices if i != j)]


def _most_general(indices: list[int], implication: np.ndarray) -> list[int]:
    """Drop each index that strictly implies another (keep parents, drop children)."""
    return [i for i in indices
            if not any(implication[i, j] and not implication[j, i] for j in indices if j != i)]


def _co_accepted(ev: Evidence, config: AuditConfig) -> Verdict | None:
    if ev.multi.rate < config.composite_min or not ev.candidates:
        return None
    multi_rows = ev.independent.sum(axis=1) >= 2
    if not multi_rows.any():
        return None
    # A share of the rows ``ev.multi`` counts (>= 2 independent intents among all existing intents), as the
    # rule says: the mean over the rows with two *candidates* left out rows pairing a part with another intent,
    # and a D beside B on 2 of N's 20 rows, 13 of them multi-intent, made "B and D" a composite (2 of 2).
    # Rows where a part sits beside a non-candidate alone are not in the numerator: a share never above the
    # rule's.
    shares = ev.independent[multi_rows].sum(axis=0) / max(ev.multi.k, int(multi_rows.sum()))
    parts = [j for j in range(len(ev.candidates)) if shares[j] >= config.part_share]
    if len(parts) < 2:
        return None
    names = [ev.candidates[j] for j in parts]
    support = ev.independent[:, parts].sum(axis=1) >= 2
    rationale = (f"{percent(ev.multi.rate)} of {ev.intent}'s rows carry >= 2 existing intents at once "
                 f"(threshold {percent(config.composite_min)}); parts {', '.join(names)}")
    alternatives = ["novel"] if ev.multi.straddles(config.composite_min) else []
    return _verdict(ev, config, "composite", names, alternatives, rationale, support, ev.multi)


def _word(ev: Evidence, j: int, config: AuditConfig) -> WordPivot | None:
    """Candidate ``j``'s word pivot when it is significant (``intentvcs.service.audit.words``)."""
    pivot = ev.word_pivots[j] if j < len(ev.word_pivots) else None
    return pivot if pivot is not None and pivot.p_value < config.same_alpha else None


def _refused(ev: Evidence, most: float) -> bool:
    """Whether the served model answers ``most`` or more of N's rows out of scope (see ``AuditConfig``)."""
    return ev.out_of_scope is not None and ev.out_of_scope.rate >= most


def _single_target(ev: Evidence, config: AuditConfig) -> Verdict | None:
    """Rule 2, and rule 2a on a subset."""
    if _refused(ev, config.target_oos_max):
        return None
    # A candidate whose rows barely resemble N's (contain(E->N) < sub_min) is no target, unless a word
    # explains why: N is the part of E that says it, and the embedding does not see words.
    targets = [j for j, c in enumerate(ev.to_existing)
               if c.rate >= config.high and (ev.to_new[j] is None or ev.to_new[j].rate >= config.sub_min
                                             or _word(ev, j, config) is not None)]
    targets = _most_specific(targets, ev.implication)
    if not targets:
        return None
    j = targets[0]
    verdict, alternatives = _target_verdict(ev, j, config)
    if verdict.relation == "subset":
        return _part_beside(ev, j, config, alternatives) or verdict
    return verdict


def _part_beside(ev: Evidence, j: int, config: AuditConfig, doubts: list[str]) -> Verdict | None:
    """Rule 2a's composite: an unrelated intent accepted beside subset target ``j`` on N's rows.

    ``doubts``: the subset's own alternatives. The composite stands on that subset, so what the subset's
    intervals leave open (contain(N->E) under ``high``: no target, no rule 2a) is open for it too."""
    beside = [b for b in range(len(ev.candidates))
              if b != j and not (ev.implication[j, b] or ev.implication[b, j])
              and ev.to_existing[b].rate >= config.part_min and ev.to_new[b] is not None
              and ev.to_new[b].rate >= config.sub_min]
    if not beside:
        return None
    b = max(beside, key=lambda i: ev.to_existing[i].rate)
    names = [ev.candidates[j], ev.candidates[b]]
    rationale = (f"the model accepts {names[0]} on {percent(ev.to_existing[j].rate)} of {ev.intent}'s rows and "
                 f"{names[1]}, an unrelated intent, on {percent(ev.to_existing[b].rate)} of them, and "
                 f"{percent(ev.to_new[b].rate)} of {names[1]} lies in {ev.intent}: {ev.intent}'s rows carry both "
                 f"(a subset of {names[0]} would carry {names[0]}'s alone)")
    alternatives = [*doubts, *(["subset"] if ev.to_existing[b].straddles(config.part_min) else [])]
    return _verdict(ev, config, "composite", names, alternatives, rationale, ev.accepted[:, [j, b]].any(axis=1))


def _target_verdict(ev: Evidence, j: int, config: AuditConfig) -> tuple[Verdict, list[str]]:
    """Duplicate or subset of target ``j`` (rule 2), and the alternatives its intervals allow."""
    name, forward, backward = ev.candidates[j], ev.to_existing[j], ev.to_new[j]
    support = ev.accepted[:, j]
    alternatives = ["novel"] if forward.straddles(config.high) else []
    head = f"the model accepts {name} on {percent(forward.rate)} of {ev.intent}'s rows"
    pivot = ev.pivots[j] if j < len(ev.pivots) else None
    by_entity = pivot is not None and pivot.p_value < config.same_alpha
    word = _word(ev, j, config)
    if backward is None and word is None:
        # existing_in_new needs min_rows on both sides: N's rows accepting E, and E's reference rows.
        short = (f"{forward.k} of {ev.intent}'s rows accept {name}" if forward.k < config.min_rows
                 else f"too few rows of {name}")
        # A significant entity pivot tells N's rows from E's, which excludes a duplicate (as a word does, below).
        why = (f"but {percent(pivot.new_share)} of {ev.intent}'s rows carry a '{pivot.entity}' entity against "
               f"{percent(pivot.existing_share)} of {name}'s ({pivot.p_text}): {ev.intent} is {name} "
               f"{pivot.direction} {pivot.entity}, too specific" if by_entity else "so a duplicate is not excluded")
        rationale = (f"{head}; contain({name}->{ev.intent}) could not be estimated ({short}, "
                     f"{config.min_rows} needed), {why}")
        return _verdict(ev, config, "subset", [name], alternatives, rationale, support), alternatives
    if by_entity and backward is not None and backward.rate >= config.back_high:
        relation = "subset"
        tail = (f"and {percent(backward.rate)} of {name} lies in {ev.intent}, but {percent(pivot.new_share)} of "
                f"{ev.intent}'s rows carry a '{pivot.entity}' entity against {percent(pivot.existing_share)} of "
                f"{name}'s ({pivot.p_text}): {ev.intent} is {name} {pivot.direction} {pivot.entity}, too specific")
    elif word is not None:
        relation = "subset"
        tail = f"but {word.describe(ev.intent, name)}: {ev.intent} is {name} with '{word.word}', too specific"
    elif backward.rate >= config.back_high:
        relation = "duplicate"
        tail = f"and {percent(backward.rate)} of {name} lies in {ev.intent}: same meaning"
    else:
        relation = "subset"
        tail = f"but only {percent_under(backward.rate, config.back_high)} of {name} lies in {ev.intent}: too specific"
    # Only where contain(E->N) decided: a word or a significant entity pivot makes a subset whichever side of
    # back_high it falls (the entity case marked such subsets borderline, "maybe a duplicate", for nothing).
    if backward is not None and backward.straddles(config.back_high) and word is None and not by_entity:
        alternatives.append("subset" if relation == "duplicate" else "duplicate")
    return _verdict(ev, config, relation, [name], alternatives, f"{head} {tail}", support), alternatives


def _co_segmented(ev: Evidence, config: AuditConfig) -> Verdict | None:
    if ev.segmented is None or ev.segmented[1].rate < config.segment_min:
        return None
    names, share = list(ev.segmented[0]), ev.segmented[1]
    rationale = (f"split at a connector, {percent(share.rate)} of {ev.intent}'s sampled rows are {names[0]} and "
                 f"{names[1]} half by half (threshold {percent(config.segment_min)})")
    support = np.ones(ev.n, dtype=bool)  # the split evidence is on a sample; the claim is on every row
    alternatives = ["novel"] if share.straddles(config.segment_min) else []
    return _verdict(ev, config, "composite", names, alternatives, rationale, support, share)


def _union_of_parts(ev: Evidence, config: AuditConfig) -> Verdict | None:
    """Rule 3 ahead of rule 2 when two or more unrelated parts, each accepted on
    at least ``part_min`` of N's rows, lie inside N: one part may then hold
    most of N's rows (>= ``high``) and look like N's target, but N also
    covers the others. Else ``_accepted_union``."""
    verdict = _superset(ev, config, min_accepted=config.part_min)
    if verdict is not None and len(verdict.existing) >= 2:
        return verdict
    return _accepted_union(ev, config)


def _accepted_union(ev: Evidence, config: AuditConfig) -> Verdict | None:
    """A union read from acceptance: N's rows fall apart into two or more unrelated existing intents,
    each accepted on >= ``union_part_min`` of them (not mostly beside another part), together on >=
    ``union_cover``, with no sign of a composite (no pair co-ranked beyond its baseline by
    ``corank_min``) and no part whose rows are unlike N's (contain(E->N) < ``sub_min``: the model's
    forced choice).

    contain(E->N) of a part runs low exactly here: N holds a few unseen rows of E,
    E's side is its training rows, which fine-tuning pulled together, and the kNN
    estimate needs many of N's rows near E's (measured 5-72% for the parts of
    generated unions whose truth is 100%), so rule 3 alone misses one part.
    """
    if _refused(ev, config.superset_oos_max):
        return None
    parts: list[int] = []
    for j in sorted(range(len(ev.candidates)), key=lambda j: -ev.to_existing[j].rate):
        mine = ev.accepted[:, j]
        if ev.to_existing[j].rate < config.union_part_min or (ev.to_new[j] is not None
                                                      and ev.to_new[j].rate < config.sub_min):
            continue
        # An intent a multi-label model accepts beside a part, on most of the rows it is accepted on
        # (a flight number with a flight), is no part of its own.
        if not any((mine & ev.accepted[:, i]).sum() * 2 > mine.sum() for i in parts):
            parts.append(j)
    parts = _most_general(parts, ev.implication)
    if len(parts) < 2 or any(ev.implication[a, b] or ev.implication[b, a]
                             for a, b in itertools.combinations(parts, 2)):
        return None
    for a, b in itertools.combinations(parts, 2):
        if _reaches(_corank(ev, a, b)[0], config.corank_min):
            return None
    support, coverage = _coverage(ev, parts, config)
    if coverage.rate < config.union_cover:
        return None
    names = [ev.candidates[j] for j in parts]
    shares = ", ".join(f"{ev.candidates[j]} on {percent(ev.to_existing[j].rate)}" for j in parts)
    rationale = (f"{ev.intent}'s rows are accepted as {shares}, together {percent(coverage.rate)} of them, and no two "
                 f"are ranked together as a composite's parts are: a union of those intents, too generic")
    return _verdict(ev, config, "superset", names, ["novel"] if coverage.straddles(config.union_cover) else [],
                    rationale, support, coverage)


def _coverage(ev: Evidence, parts: list[int], config: AuditConfig) -> tuple[np.ndarray, Count]:
    """N's rows on which some of ``parts`` is accepted, and their share with its interval."""
    support = ev.accepted[:, parts].any(axis=1)
    return support, wilson(int(support.sum()), ev.n, config.confidence)


def _superset(ev: Evidence, config: AuditConfig, min_accepted: float = 0.0) -> Verdict | None:
    if _refused(ev, config.superset_oos_max):
        return None
    inside = [j for j, c in enumerate(ev.to_new) if c is not None and c.rate >= config.superset_back_min
              and ev.to_existing[j].rate >= min_accepted]
    parts = _most_general(inside, ev.implication)
    if not parts:
        return None
    support, coverage = _coverage(ev, parts, config)
    if coverage.rate < config.cover_min:
        return None
    names = [ev.candidates[j] for j in parts]
    doubtful = coverage.straddles(config.cover_min) or any(
        ev.to_new[j].straddles(config.superset_back_min) for j in parts)
    rationale = (f"{', '.join(names)} lie(s) inside {ev.intent} and together cover "
                 f"{percent(coverage.rate)} of its rows: too generic")
    return _verdict(ev, config, "superset", names, ["novel"] if doubtful else [], rationale, support, coverage)


def _co_ranked(ev: Evidence, config: AuditConfig) -> Verdict | None:
    best = None
    for a, b in itertools.combinations(range(len(ev.candidates)), 2):
        related = ev.implication[a, b] or ev.implication[b, a]
        accepted = min(ev.to_existing[a].rate, ev.to_existing[b].rate) >= config.part_min
        if related or not accepted:
            continue
        excess, together = _corank(ev, a, b)
        if best is None or excess > best[0]:
            best = (excess, a, b, together)
    if best is None or not _reaches(best[0], config.corank_min):
        return None
    excess, a, b, together = best
    share, baseline = wilson(together, ev.n, config.confidence), ev.pair_baseline[a, b]
    names = [ev.candidates[a], ev.candidates[b]]
    rationale = (f"{names[0]} and {names[1]} are the model's two most confident intents on {percent(share.rate)} "
                 f"of {ev.intent}'s rows but on only {percent(baseline)} of their own (excess {percent(excess)}, "
                 f"threshold {percent(config.corank_min)}); accepted one at a time "
                 f"({percent(ev.to_existing[a].rate)} and {percent(ev.to_existing[b].rate)})"
                 f"{_inside_tail(ev, [a, b], config)}")
    alternatives = ["novel"] if share.straddles(config.corank_min + baseline) else []
    return _verdict(ev, config, "composite", names, alternatives, rationale,
                    ev.ranked[:, a] & ev.ranked[:, b], share)


def _inside_tail(ev: Evidence, pair: list[int], config: AuditConfig) -> str:
    """What rule 4's rationale says of contain(E->N) for its two parts: the figures, and "neither lies
    inside N" only when both are known and under ``superset_back_min``. A part at or above it lies inside
    N, yet rule 3 did not hold; the tail says why (N's rows refused, or too few of them accepting its
    parts)."""
    known = [j for j in pair if ev.to_new[j] is not None]
    unknown = [ev.candidates[j] for j in pair if ev.to_new[j] is None]
    figures = " and ".join(f"{percent_under(ev.to_new[j].rate, config.superset_back_min)} of {ev.candidates[j]}"
                           for j in known)
    verb = "lies" if len(known) == 1 else "lie"
    inside = [j for j in known if ev.to_new[j].rate >= config.superset_back_min]
    if not inside:
        if not unknown:
            return (f", and neither lies inside {ev.intent} ({figures} {verb} in it, under "
                    f"{percent(config.superset_back_min)})")
        missing = (f"how much of {' or '.join(unknown)} lies in {ev.intent} could not be estimated")
        if not known:
            return f"; {missing}"
        return f"; {figures} {verb} in {ev.intent} (under {percent(config.superset_back_min)}), and {missing}"
    names = " and ".join(ev.candidates[j] for j in inside)
    if _refused(ev, config.superset_oos_max):
        why = (f"the service answers {percent(ev.out_of_scope.rate)} of {ev.intent}'s rows out of scope "
               f"(a superset needs under {percent(config.superset_oos_max)})")
    else:
        parts = _most_general([j for j, c in enumerate(ev.to_new)
                               if c is not None and c.rate >= config.superset_back_min], ev.implication)
        _, coverage = _coverage(ev, parts, config)
        why = (f"the rows accepting {', '.join(ev.candidates[j] for j in parts)} cover only "
               f"{percent_under(coverage.rate, config.cover_min)} of {ev.intent}'s "
               f"(a superset needs {percent(config.cover_min)})")
    tail = f"; {figures} {verb} in {ev.intent}"
    if unknown:
        tail += f" (how much of {' or '.join(unknown)} does could not be estimated)"
    return (f"{tail}: {names} {'lies' if len(inside) == 1 else 'lie'} inside {ev.intent} "
            f"(from {percent(config.superset_back_min)}), yet {ev.intent} is no superset: {why}")


def _novel(ev: Evidence, config: AuditConfig) -> Verdict:
    if ev.candidates:
        best, back = ev.candidates[0], ev.to_new[0]
        rationale = (f"closest existing intent {best} is accepted on {percent(ev.to_existing[0].rate)} of "
                     f"{ev.intent}'s rows; no containment rule holds")
        if ev.to_existing[0].rate >= config.high and back is not None and back.rate < config.sub_min:
            rationale += (f" (only {percent_under(back.rate, config.sub_min)} of {best} resembles {ev.intent}: the "
                          f"model's forced choice, not containment)")
        elif _refused(ev, config.target_oos_max) and ev.to_existing[0].k:
            # Only where the classifier accepts it: a candidate ranked but accepted on none of N's rows is no
            # "forced choice" to explain.
            rationale += (f" (the service answers {percent(ev.out_of_scope.rate)} of {ev.intent}'s rows out of scope: "
                          f"they are not utterances of {best} it knows, and accepting {best} is the classifier's "
                          f"forced choice)")
        support = ~ev.accepted.any(axis=1)
    else:
        rationale = f"no existing intent is accepted on {percent(config.part_min)} or more of {ev.intent}'s rows"
        support = np.ones(ev.n, dtype=bool)
    return _verdict(ev, config, "novel", [], [], rationale, support)
