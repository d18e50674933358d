"""DialogVCS benchmark builder (docs/RESEARCH.md section 1).

Turns a public intent data set into a benchmark where every utterance carries
*one* observed label but the truth is a *set* of entangled labels.

Sources and splits
------------------
* SNIPS-VCS, ATIS-VCS: train, valid and test come from the data set's own
  ``train/``, ``valid/`` and ``test/`` folders.
* MultiWOZ-VCS, CrossWOZ-VCS: only the validation and test dialogues are
  available, so the MultiWOZ/CrossWOZ val dialogues are split by dialogue id
  80/20 into train/valid, and the test dialogues are the test set. Concretely,
  the val dialogue ids (of dialogues with at least one loaded turn) are ordered
  by the SHA-256 hex digest of the id and the first ``round(0.8 * n)`` go to
  train; the split does not depend on the seed, so seeds vary labels only.

Construction rule (per utterance; ``k = 2`` versions ``X_v1``, ``X_v2``)
-------------------------------------------------------------------------
Each base intent ``i`` is a *family* with one treatment:

* plain: gold ``{i}``, observed ``i``;
* versions (version conflict): gold ``{i, i_v1, i_v2}``; observed uniformly
  one of ``i``, ``i_v1``, ``i_v2``;
* split + versions (merge friction by pivot entity ``e``, then version
  conflict): the utterance is ``i_with_e`` if one of its spans has a slot type
  containing ``e`` (substring, so ATIS ``loc`` matches ``fromloc.city_name``),
  else ``i_without_e``; that sub-intent gets versions and is itself removed:
  gold ``{i, i_with_e_v1, i_with_e_v2}``; observed: first coarse (``i``) or fine
  uniformly, then for fine a version uniformly.

A composite label ``a&b`` from a multi-intent set (MultiWOZ, CrossWOZ) is
either treated as merge friction — gold ``{a&b}`` plus the gold of each part's
family; observed: uniformly ``a&b``, ``a`` or ``b``, a part then drawn by its
family's rule — or, when untreated, an ordinary opaque intent. A row with
several labels (ATIS ``atis_flight#atis_airfare``) has the union of its
families' gold sets and observes one family, chosen uniformly, by its rule.

Difficulty (our definition of the paper's "Easy k" / "Hard k")
----------------------------------------------------------------
* ``full``: every family as in the paper — pivot intents split + versions,
  every other base intent versions, every composite merge friction.
* ``easy k``: only k families, chosen by the seed among the base intents seen
  in train, get versions; no splits, composites untreated.
* ``hard k``: k families, chosen by the seed among those with a merge friction
  in train (intents with a pivot; intents that are part of a composite), get
  split + versions (or versions plus merge friction on every composite they
  are part of); everything else is plain.

Label counts (full; the same for every seed) vs the paper
---------------------------------------------------------
SNIPS-VCS 33 (paper 31), ATIS-VCS 74 (paper 66), MultiWOZ-VCS 28 (paper 22),
CrossWOZ-VCS 20 (paper 17). The paper does not publish its builder, so these
explanations are our reading, not verified:

* SNIPS: 6 split intents x (coarse + 2 children x 2 versions) = 30, plus
  RateBook, RateBook_v1, RateBook_v2 = 33. The paper's 31 equals 30 + a bare
  RateBook, which contradicts its own "an unsplit intent gets versions"
  example; we follow the stated rule.
* ATIS: 10 split intents x 5 = 50, plus 8 unsplit intents x 3 = 24. We count
  every intent of all three splits, including ``atis_day_name`` (test only, so
  its 3 labels never occur in train) and ``atis_cheapest`` (one train row).
  ``info.json`` lists the labels train.jsonl never observes, what a model
  trained on it cannot output (``labels_missing_from_train``: at seed 0 these
  3, ``atis_cheapest`` and ``atis_cheapest_v1``, and 3 version labels whose
  few train rows drew another label), and apart the labels no train gold set
  holds (``labels_missing_from_train_gold``). The paper's 66 would be 50 + 8 x 2, i.e.
  unsplit intents without their base label; it may also have dropped rare
  intents. (At seed 0 our train.jsonl happens to use 66 distinct labels.)
* MultiWOZ: 5 domains x 3 = 15 plus the 13 composites that occur in our
  val/test material, two of them only in test. CrossWOZ: 4 act types x 3 = 12
  plus 8 composites, one only in test. The paper built from the original
  training dialogues and may have dropped rare composites (22 = 15 + 7,
  17 = 12 + 5 would fit).
"""

from __future__ import annotations

import hashlib
import itertools
import random
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Sequence

from intentvcs.core import atomic
from intentvcs.core.dataio import DataError, Example, write_jsonl
from intentvcs.core.manifest import file_digest
from intentvcs.core.relations import Composite, Duplicate, LabelRelations, Subset

COMPOSITE_SEPARATOR = "&"
SPLITS = ("train", "valid", "test")
DIFFICULTIES = ("full", "easy", "hard")
INFO_FILE = "info.json"  # what the benchmark is and how it was built; marks a benchmark directory
RELATIONS_FILE = "relations.json"
FILES = ("train", "train_gold", "valid", "valid_gold", "test")  # Benchmark.files: each written as <name>.jsonl
# What a benchmark directory holds, and nothing else: the names a build writes (no pattern: a file of the
# user's there, say predictions, is not ours and is replaced only with --force).
BENCHMARK_HOLDS = (INFO_FILE, RELATIONS_FILE, *(f"{name}.jsonl" for name in FILES))
GROUPS = (1, 2, 4)
TRAIN_FRACTION = 0.8

SNIPS_PIVOTS: Mapping[str, str] = MappingProxyType({
    "AddToPlaylist": "artist",
    "BookRestaurant": "restaurant_name",
    "GetWeather": "state",
    "PlayMusic": "artist",
    "SearchCreativeWork": "object_type",
    "SearchScreeningEvent": "object_type",
})
ATIS_PIVOTS: Mapping[str, str] = MappingProxyType({
    "atis_flight": "time",
    "atis_abbreviation": "fare_basis_code",
    "atis_aircraft": "loc",
    "atis_airfare": "cost_relative",
    "atis_airline": "airline_code",
    "atis_capacity": "aircraft_code",
    "atis_city": "airline_name",
    "atis_flight_no": "airline_name",
    "atis_flight_time": "depart",
    "atis_ground_service": "airport_name",
})


@dataclass(frozen=True)
class VCSSpec:
    """What a data set's benchmark entangles.

    ``pivots``      intent -> pivot entity for merge-friction splits; a row has
                    the pivot when a span's slot type contains it.
    ``composites``  treat ``a&b`` labels as merge friction (multi-intent sets).
    ``versions``    versions per conflicting intent (the paper uses 2).
    ``paper_labels`` label count the paper reports, for comparison only.
    """

    name: str
    pivots: Mapping[str, str] = field(default_factory=dict)
    composites: bool = False
    versions: int = 2
    paper_labels: int | None = None


SPECS: Mapping[str, VCSSpec] = MappingProxyType({
    "snips": VCSSpec("SNIPS-VCS", SNIPS_PIVOTS, paper_labels=31),
    "atis": VCSSpec("ATIS-VCS", ATIS_PIVOTS, paper_labels=66),
    "multiwoz": VCSSpec("MultiWOZ-VCS", composites=True, paper_labels=22),
    "crosswoz": VCSSpec("CrossWOZ-VCS", composites=True, paper_labels=17),
})

RULE = (
    "version conflict: observed uniformly among i, i_v1, i_v2; gold all three. "
    "split + versions by pivot e (row has a span whose slot type contains e): child c = i_with_e or "
    "i_without_e, c itself removed; observed: coarse i or fine (uniformly), fine then c_v1 or c_v2 "
    "(uniformly); gold {i, c_v1, c_v2}. merge-friction composite a&b: observed uniformly a&b, a or b "
    "(a part then by its family's rule); gold a&b plus every part's gold. multi-label row: gold union, "
    "observed from one label chosen uniformly."
)


@dataclass(frozen=True)
class Plan:
    """The treatment of every family, resolved from a spec and a difficulty.

    ``intents``    every base intent (labels without ``&`` and composite parts).
    ``composites`` every composite label seen in any split.
    ``versioned``  unsplit intents that get versions.
    ``splits``     intent -> pivot for intents split (their children get versions).
    ``merged``     composites treated as merge friction.
    ``selected``   families the difficulty chose (empty for ``full``).
    """

    versions: int
    intents: tuple[str, ...]
    composites: tuple[str, ...]
    versioned: frozenset[str]
    splits: Mapping[str, str]
    merged: frozenset[str]
    selected: tuple[str, ...] = ()


@dataclass(frozen=True)
class Benchmark:
    """Built files (``train``, ``train_gold``, ``valid``, ``valid_gold``, ``test``),
    the ground-truth relations and the plan that made them."""

    files: Mapping[str, list[Example]]
    relations: LabelRelations
    plan: Plan


# --------------------------------------------------------------- label names
def version_labels(label: str, versions: int) -> tuple[str, ...]:
    return tuple(f"{label}_v{j}" for j in range(1, versions + 1))


def child_label(intent: str, pivot: str, has_pivot: bool) -> str:
    return f"{intent}_{'with' if has_pivot else 'without'}_{pivot}"


def has_pivot(example: Example, pivot: str) -> bool:
    """True when one of the example's spans has a slot type containing ``pivot``."""
    return any(pivot in span.label for span in example.spans)


def _parts(label: str) -> list[str]:
    return label.split(COMPOSITE_SEPARATOR)


# ------------------------------------------------------------------- planning
def check_difficulty(difficulty: str, groups: int | None) -> None:
    """Refuse a difficulty and group count no data could make a plan of (``build`` asks before it loads the
    data set: seconds of reading, then the refusal)."""
    if difficulty not in DIFFICULTIES:
        raise ValueError(f"unknown difficulty {difficulty!r}; choose from {', '.join(DIFFICULTIES)}")
    if (difficulty == "full") != (groups is None):
        raise ValueError("--groups k is required with easy/hard difficulty and not allowed with full")
    if groups is not None and groups not in GROUPS:
        raise ValueError(f"--groups must be one of {GROUPS}")


def make_plan(
    spec: VCSSpec,
    splits: Mapping[str, Sequence[Example]],
    difficulty: str = "full",
    groups: int | None = None,
    seed: int = 0,
) -> Plan:
    """Decide each family's treatment (see the module docstring, "Difficulty").

    ``splits`` maps ``train``/``valid``/``test`` to source examples. Families
    for ``easy``/``hard`` are drawn with ``random.Random(f"{seed}/families")``
    from the sorted eligible list, so the choice is reproducible and does not
    depend on the label draws.
    """
    check_difficulty(difficulty, groups)
    intents, composites = _inventory(ex for rows in splits.values() for ex in rows)
    train_intents, train_composites = _inventory(splits["train"])
    if difficulty == "full":
        pivots = {i: e for i, e in spec.pivots.items() if i in intents}
        merged = frozenset(composites) if spec.composites else frozenset()
        return Plan(spec.versions, intents, composites, frozenset(intents) - set(pivots), pivots, merged)

    if difficulty == "easy":
        eligible = sorted(train_intents)
    else:
        with_composite = {p for c in train_composites for p in _parts(c)} if spec.composites else set()
        eligible = sorted((set(spec.pivots) & set(train_intents)) | with_composite)
    if groups > len(eligible):
        raise ValueError(
            f"--groups must be one of {GROUPS} and at most the {len(eligible)} eligible families {eligible}"
        )
    chosen = tuple(sorted(random.Random(f"{seed}/families").sample(eligible, groups)))
    if difficulty == "easy":
        return Plan(spec.versions, intents, composites, frozenset(chosen), {}, frozenset(), chosen)
    pivots = {i: spec.pivots[i] for i in chosen if i in spec.pivots}
    merged = frozenset(c for c in composites if spec.composites and set(_parts(c)) & set(chosen))
    return Plan(spec.versions, intents, composites, frozenset(chosen) - set(pivots), pivots, merged, chosen)


def _inventory(examples: Iterable[Example]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Sorted base intents (composite parts included) and composite labels."""
    intents, composites = set(), set()
    for ex in examples:
        for label in ex.labels:
            if COMPOSITE_SEPARATOR in label:
                composites.add(label)
                intents.update(_parts(label))
            else:
                intents.add(label)
    return tuple(sorted(intents)), tuple(sorted(composites))


# ------------------------------------------------------------------ labelling
# A *family draw* is a tuple of groups: observing picks a group uniformly, then
# a label in it uniformly; gold is every label of every group. One shape covers
# plain, versioned and split families and literal composite labels.
Draw = tuple[tuple[str, ...], ...]


def _family_draw(plan: Plan, intent: str, example: Example) -> Draw:
    if intent in plan.splits:
        pivot = plan.splits[intent]
        child = child_label(intent, pivot, has_pivot(example, pivot))
        return ((intent,), version_labels(child, plan.versions))
    if intent in plan.versioned:
        return ((intent, *version_labels(intent, plan.versions)),)
    return ((intent,),)


def _row_draws(plan: Plan, example: Example) -> list[Draw]:
    """The alternatives one of which is observed, chosen uniformly."""
    if not example.labels:
        raise ValueError(f"row {example.id!r} is out of scope; DialogVCS rows need an intent")
    if len(example.labels) == 1 and COMPOSITE_SEPARATOR in example.labels[0]:
        label = example.labels[0]
        if label not in plan.merged:
            return [((label,),)]
        return [((label,),)] + [_family_draw(plan, part, example) for part in _parts(label)]
    if any(COMPOSITE_SEPARATOR in label for label in example.labels):
        raise ValueError(f"row {example.id!r} mixes a composite with other labels: {example.labels}")
    return [_family_draw(plan, label, example) for label in example.labels]


def gold_labels(plan: Plan, example: Example) -> tuple[str, ...]:
    """Every label that applies to ``example`` under ``plan``, sorted."""
    return tuple(sorted({lab for draw in _row_draws(plan, example) for group in draw for lab in group}))


def observed_label(plan: Plan, example: Example, rng: random.Random) -> str:
    """Draw the one training label of ``example`` (see ``Draw``)."""
    draw = rng.choice(_row_draws(plan, example))
    return rng.choice(rng.choice(draw))


def relations_for(plan: Plan, labels: set[str], details: Mapping[str, Any]) -> LabelRelations:
    """Ground-truth relations among ``labels`` (the gold labels that occur).

    duplicate: every pair among a versioned intent and its versions, and among
    the versions of one split child; subset: each child version -> its intent;
    composite: each merge-friction composite -> its parts. ``families`` maps a
    base intent to its labels, and an opaque or merged composite to itself.

    No ``cover``, though a split intent is covered by its child versions by
    construction: a decision completes a parent accepted without any child under
    a cover (``relations.Completion``), so covers here would change the recorded
    "+ ground-truth closure" figures (``benchmarks/vcs_bench.py``'s
    ``test_closure``, docs/RESULTS.md), which are closure alone.
    """
    relations: list = []
    families: dict[str, list[str]] = {}
    for intent in plan.intents:
        if intent in plan.splits:
            members = [intent]
            for has in (True, False):
                child = child_label(intent, plan.splits[intent], has)
                present = [v for v in version_labels(child, plan.versions) if v in labels]
                relations += [Duplicate(a, b) for a, b in itertools.combinations(present, 2)]
                relations += [Subset(v, intent) for v in present]
                members += present
        else:
            versions = version_labels(intent, plan.versions) if intent in plan.versioned else ()
            members = [m for m in (intent, *versions) if m in labels]
            relations += [Duplicate(a, b) for a, b in itertools.combinations(members, 2)]
        members = [m for m in members if m in labels]
        if members:
            families[intent] = members
    for label in plan.composites:
        if label in labels:
            families[label] = [label]
            if label in plan.merged:
                relations.append(Composite(label, tuple(_parts(label))))
    return LabelRelations(tuple(sorted(labels)), tuple(relations), families, details)


# ----------------------------------------------------------------- building
def build_benchmark(
    splits: Mapping[str, Sequence[Example]],
    spec: VCSSpec,
    *,
    seed: int = 0,
    difficulty: str = "full",
    groups: int | None = None,
) -> Benchmark:
    """Build the benchmark from source ``splits`` (``train``, ``valid``, ``test``).

    Deterministic for a seed: families come from ``make_plan`` and the observed
    labels of train and valid from ``random.Random(f"{seed}/<split>")`` each,
    so changing one split never changes another's draws.
    """
    missing = [s for s in SPLITS if s not in splits]
    if missing:
        raise ValueError(f"missing source split(s) {missing}")
    plan = make_plan(spec, splits, difficulty, groups, seed)
    files: dict[str, list[Example]] = {}
    for split in SPLITS:
        gold = [ex.with_labels(gold_labels(plan, ex)) for ex in splits[split]]
        if split == "test":
            files["test"] = gold
            continue
        rng = random.Random(f"{seed}/{split}")
        files[split] = [ex.with_labels((observed_label(plan, ex, rng),)) for ex in splits[split]]
        files[f"{split}_gold"] = gold
    files = {name: files[name] for name in FILES}  # the order written, and no name BENCHMARK_HOLDS lacks
    labels = {lab for rows in files.values() for ex in rows for lab in ex.labels}
    details = {
        "benchmark": spec.name,
        "seed": seed,
        "difficulty": difficulty,
        "groups": groups,
        "selected_families": list(plan.selected),
        "versions": plan.versions,
        "pivots": dict(plan.splits),
        "pivot_match": "a row has pivot e when one of its spans' slot type contains e",
        "versioned": sorted(plan.versioned),
        "merged_composites": sorted(plan.merged),
        "rule": RULE,
    }
    return Benchmark(files, relations_for(plan, labels, details), plan)


def split_by_dialogue(
    examples: Sequence[Example], train_fraction: float = TRAIN_FRACTION
) -> tuple[list[Example], list[Example]]:
    """Split examples by ``meta["dialogue"]``: dialogue ids ordered by SHA-256
    of the id, the first ``round(train_fraction * n)`` to the first list."""
    ids = sorted({ex.meta["dialogue"] for ex in examples}, key=lambda d: hashlib.sha256(d.encode()).hexdigest())
    first = set(ids[: round(train_fraction * len(ids))])
    return [ex for ex in examples if ex.meta["dialogue"] in first], [
        ex for ex in examples if ex.meta["dialogue"] not in first
    ]


def source_paths(dataset: str, data_root: str | Path) -> list[Path]:
    """What a build of ``dataset`` reads under ``data_root``: the ``train/``, ``valid/`` and ``test/`` folders
    of SNIPS and ATIS, the val and test archives of MultiWOZ and CrossWOZ. The inputs an output folder must
    neither be nor hold (``atomic.check_folder_target``), since replacing it would delete them."""
    from intentvcs.training.loaders import convlab_zip

    root = Path(data_root) / dataset
    if dataset in ("snips", "atis"):
        return [root / split for split in SPLITS]
    if dataset in ("multiwoz", "crosswoz"):
        return [convlab_zip.split_path(root, split) for split in ("valid", "test")]
    raise ValueError(f"unknown dataset {dataset!r}; choose from {', '.join(SPECS)}")


def load_sources(
    dataset: str, data_root: str | Path, skipped: dict[str, dict[str, int]] | None = None
) -> tuple[dict[str, list[Example]], list[Path], str]:
    """Source splits of ``dataset`` under ``data_root``, the files read, and how
    the splits were made (one sentence for ``info.json``). ``skipped``, when
    given, receives per source split the rows its loader left out, by reason
    (MultiWOZ/CrossWOZ user turns without an intent; none for SNIPS and ATIS)."""
    from intentvcs.training.loaders import crosswoz, multiwoz, slot_folder

    root = Path(data_root) / dataset
    skipped = {} if skipped is None else skipped
    if dataset in ("snips", "atis"):
        splits = {split: slot_folder.load_split(root, split) for split in SPLITS}
        skipped.update({split: {} for split in SPLITS})
        files = [root / split / name for split in SPLITS for name in slot_folder.FILES]
        _refuse_empty(splits, {split: root / split for split in SPLITS}, "rows")
        return splits, files, f"train, valid and test from the {dataset} train/, valid/ and test/ folders"
    if dataset in ("multiwoz", "crosswoz"):
        module = multiwoz if dataset == "multiwoz" else crosswoz
        skipped.update({"valid": {}, "test": {}})
        train, valid = split_by_dialogue(module.load_split(root, "valid", skipped["valid"]))
        splits = {"train": train, "valid": valid, "test": module.load_split(root, "test", skipped["test"])}
        files = source_paths(dataset, data_root)
        _refuse_empty(splits, {"train": files[0], "valid": files[0], "test": files[1]}, "user turns with an intent")
        how = (
            f"{dataset} val dialogues split by dialogue id 80/20 into train/valid (ids ordered by "
            "SHA-256 of the id, first round(0.8 n) to train, independent of the seed); "
            "test dialogues = test"
        )
        return splits, files, how
    raise ValueError(f"unknown dataset {dataset!r}; choose from {', '.join(SPECS)}")


def _refuse_empty(splits: Mapping[str, Sequence[Example]], paths: Mapping[str, Path], what: str) -> None:
    """``DataError`` naming the source of the first benchmark split without rows: built, it would be an
    empty train, valid or test file (a benchmark no score can be read from), written with exit status 0."""
    for split in SPLITS:
        if not splits[split]:
            raise DataError(paths[split], None, f"no {what} for the {split} split of the benchmark")


def build(
    dataset: str,
    data_root: str | Path,
    out: str | Path,
    *,
    seed: int = 0,
    difficulty: str = "full",
    groups: int | None = None,
    spec: VCSSpec | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Load ``dataset``, build its benchmark and write ``out`` atomically.

    An existing ``out`` is replaced when it is an earlier benchmark (it holds
    ``info.json`` naming a DialogVCS benchmark, and nothing but the files a build
    writes, ``BENCHMARK_HOLDS``) or empty, any other folder (a file of the user's
    beside a benchmark's) only with ``force`` (``intentvcs.core.atomic.check_replaceable``).

    ``out`` receives ``train.jsonl``, ``train_gold.jsonl``, ``valid.jsonl``,
    ``valid_gold.jsonl``, ``test.jsonl``, ``relations.json`` and ``info.json``;
    the returned dict is ``info.json``'s content. ``spec`` defaults to
    ``SPECS[dataset]``.
    """
    if dataset not in SPECS:
        raise ValueError(f"unknown dataset {dataset!r}; choose from {', '.join(SPECS)}")
    spec = spec or SPECS[dataset]
    # An info.json naming a DialogVCS benchmark, not another command's build or a user's own data folder.
    kind = atomic.OutputKind(INFO_FILE, BENCHMARK_HOLDS,
                             named_by=("benchmark", frozenset({s.name for s in SPECS.values()} | {spec.name})))
    check_earlier_build(out, kind, force)
    check_difficulty(difficulty, groups)
    skipped: dict[str, dict[str, int]] = {}
    splits, sources, how = load_sources(dataset, data_root, skipped)
    bench = build_benchmark(splits, spec, seed=seed, difficulty=difficulty, groups=groups)
    labels = set(bench.relations.labels)
    info = {
        "dataset": dataset,
        "benchmark": spec.name,
        "seed": seed,
        "difficulty": difficulty,
        "groups": groups,
        "selected_families": list(bench.plan.selected),
        "labels": len(bench.relations.labels),
        "paper_labels": spec.paper_labels,
        "counts": {name: len(rows) for name, rows in bench.files.items()},
        # Labels a model never sees in training: it trains on train.jsonl's one observed label per row, so
        # these are the labels no train row is observed with (test-only intents, and labels whose rows all
        # drew another label of their family); a model cannot output them.
        "labels_missing_from_train": sorted(labels - {lab for ex in bench.files["train"] for lab in ex.labels}),
        # The gold view: labels no train_gold.jsonl set holds (test- or valid-only intents and composites).
        "labels_missing_from_train_gold": sorted(
            labels - {lab for ex in bench.files["train_gold"] for lab in ex.labels}
        ),
        "splits": how,
        # Source rows the loaders left out, per source split and reason (MultiWOZ turns without a DialogVCS
        # domain, CrossWOZ messages without an act): rows no split of the benchmark has.
        "source_rows_skipped": {split: dict(sorted(reasons.items())) for split, reasons in skipped.items()},
        "sources": [{"path": str(p.resolve()), "sha256": file_digest(p)} for p in sources],
        "rule": RULE,
    }
    with atomic.directory(out, kind, force) as tmp:
        for name, rows in bench.files.items():
            write_jsonl(tmp / f"{name}.jsonl", rows)
        bench.relations.save(tmp / RELATIONS_FILE)
        atomic.write_json(tmp / INFO_FILE, info)
    return info


def check_earlier_build(out: str | Path, kind: atomic.OutputKind, force: bool) -> None:
    """``atomic.check_replaceable`` before the sources are read, where ``out`` holds the marker of a build
    (its ``info.json``), so that a build of another command or a user's folder is refused at no cost; any
    other folder is judged as the build is written (``atomic.directory``), after the data have been read."""
    if (Path(out) / kind.marker).is_file():
        atomic.check_replaceable(out, kind, force)
