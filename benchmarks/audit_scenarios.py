"""Upgrade scenarios with known answers, for scoring the audit's verdicts.

A scenario is what a team faces at an upgrade: an existing model trained on
the original intents, and a batch of new utterances under new intent names,
some of which re-express existing intents. Each scenario directory holds

* ``base_train.jsonl`` / ``base_valid.jsonl``: the existing model's data
  (original intent names only);
* ``batch.jsonl``: the upgrade batch;
* ``truth.json``: a relations file over the original and new intents (every
  true relation, new-new ones included) plus ``expected``, each new intent's
  verdict against the existing intents (``{"relation", "existing"}``).

Builders:

``vcs``        SNIPS / ATIS / MultiWOZ. The train rows are split in two halves by a hash of
               their id. The existing model trains on the first half with the
               original labels. The batch is the second half as the DialogVCS
               builder (``intentvcs.training.vcs_builder``) relabelled it: versions
               (``X_v1``, ``X_v2``: duplicates of X and of each other) and
               slot-pivot splits (``X_with_p_v1``: a subset of X). Added by
               relabelling second-half rows the builder left under X:
               supersets (``X|Y``, the rows of X and Y), composites (``X&Y``,
               "<x utterance> and <y utterance>") and one novel intent
               (an original intent withheld from the existing model), and two
               versions ``X~v2`` of untouched rows. New intents with fewer than
               ``MIN_INTENT_ROWS`` rows are left out. MultiWOZ the same way, with
               its own composites in place of joined ones: the existing model
               knows the single domains only, and every multi-domain turn
               (``hotel&train``, from both halves) comes in the batch under its name.
``clinc``      CLINC150. The existing model trains on the in-scope train split;
               the batch relabels held-out rows (valid + test): versions
               (``X~v2``, duplicate), supersets, composites, and the
               out-of-scope rows as one novel intent. CLINC150 has no slot
               spans, so it has no subsets.

    python -m benchmarks.audit_scenarios vcs --dataset snips --out runs/bench/audit/snips
    python -m benchmarks.audit_scenarios vcs --dataset multiwoz --out runs/bench/audit/multiwoz
    python -m benchmarks.audit_scenarios clinc --out runs/bench/audit/clinc150
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence


from benchmarks.common import SHARED_DATA
from intentvcs.core import atomic
from intentvcs.core.dataio import Example, fingerprint, known_spans_only, read_jsonl, write_jsonl
from intentvcs.core.relations import Composite, Duplicate, LabelRelations, Relation, Subset

# Fewer rows than this and no relation can be typed with confidence (a Wilson
# interval on 5 rows spans about half of [0, 1]); the VCS scenarios leave such
# new intents out (ATIS's long tail has many).
MIN_INTENT_ROWS = 10
# When a new intent has several relations to existing intents, the strongest names its verdict.
PRIORITY = ("duplicate", "subset", "superset", "composite")


def expected_verdicts(truth: LabelRelations, new_intents: Iterable[str],
                      existing: Iterable[str]) -> dict[str, dict[str, Any]]:
    """new intent -> ``{"relation", "existing"}``: its strongest relation to existing intents."""
    existing = set(existing)
    out = {}
    for name in new_intents:
        found: dict[str, set[str]] = {kind: set() for kind in PRIORITY}
        for kind, x, y in truth.typed_pairs():
            if kind == "duplicate" and name in (x, y):
                found[kind].update({x, y} & existing)
            elif kind == "subset" and x == name and y in existing:
                found["subset"].add(y)
            elif kind == "subset" and y == name and x in existing:
                found["superset"].add(x)
            elif kind == "composite" and x == name and y in existing:
                found["composite"].add(y)
        kind = next((k for k in PRIORITY if found[k]), "novel")
        out[name] = {"relation": kind, "existing": sorted(found.get(kind, ()))}
    return out


def _drop_small(batch: list[Example], min_rows: int) -> list[Example]:
    """Leave out new intents with fewer than ``min_rows`` rows."""
    sizes: dict[str, int] = {}
    for ex in batch:
        sizes[ex.labels[0]] = sizes.get(ex.labels[0], 0) + 1
    return [ex for ex in batch if sizes[ex.labels[0]] >= min_rows]


def half_of(example_id: str, salt: str = "audit-scenario") -> int:
    """0 or 1, from a hash of the row id: a split that no seed or row order changes."""
    return hashlib.sha256(f"{salt}:{example_id}".encode()).digest()[0] & 1


def _by_label(rows: Iterable[Example]) -> dict[str, list[Example]]:
    groups: dict[str, list[Example]] = {}
    for ex in rows:
        if len(ex.labels) == 1:
            groups.setdefault(ex.labels[0], []).append(ex)
    return groups


def _joined(a: Example, b: Example) -> str:
    return f"{a.text.rstrip('.?! ')} and {b.text[0].lower()}{b.text[1:]}"


def inject(pool: dict[str, list[Example]], rng: random.Random, versions: int, unions: int, joins: int,
           min_rows: int = 10) -> tuple[list[Example], list[Relation]]:
    """Versions ``X~v2``, supersets ``X|Y`` and composites ``X&Y`` made by relabelling ``pool``'s rows.

    ``pool`` maps existing intents to rows that no other new intent uses.
    Versions take distinct intents and pairs are distinct; an intent used
    several times gives each use a disjoint share of its rows, so no row
    carries two new intents. Returns the rows and the true relations.
    """
    names = sorted(x for x, rows in pool.items() if len(rows) >= min_rows)
    pairs = list(itertools.combinations(names, 2))
    rng.shuffle(pairs)
    # Pairs of intents not used yet first, so that few intents are shared out.
    used: set[str] = set()
    fresh = []
    for pair in pairs:
        if not used.intersection(pair):
            fresh.append(pair)
            used.update(pair)
    pairs = fresh + [pair for pair in pairs if pair not in fresh]
    singles = rng.sample(names, min(versions, len(names)))
    if len(pairs) < unions + joins or len(singles) < versions:
        raise ValueError(f"{len(names)} intents with >= {min_rows} rows cannot give {versions} versions, "
                         f"{unions} supersets and {joins} composites")
    uses = [(x,) for x in singles] + pairs[:unions + joins]
    owners = {x: [i for i, use in enumerate(uses) if x in use] for x in names}
    share = {(i, x): pool[x][k::len(owners[x])] for x in names for k, i in enumerate(owners[x])}
    rows: list[Example] = []
    relations: list[Relation] = []
    for i, use in enumerate(uses):
        if len(use) == 1:
            (x,), name = use, f"{use[0]}~v2"
            rows += [Example(ex.text, (name,), id=f"{ex.id}>{name}") for ex in share[i, x]]
            relations.append(Duplicate(name, x))
        elif i < versions + unions:
            (x, y), name = use, f"{use[0]}|{use[1]}"
            # As many rows of each part: a generic intent, not one part with a sprinkle of the other.
            n = min(len(share[i, x]), len(share[i, y]))
            rows += [Example(ex.text, (name,), id=f"{ex.id}>{name}") for ex in share[i, x][:n] + share[i, y][:n]]
            relations += [Subset(child=x, parent=name), Subset(child=y, parent=name)]
        else:
            (x, y), name = use, f"{use[0]}&{use[1]}"
            partners = rng.sample(share[i, y], len(share[i, y]))
            rows += [Example(_joined(a, b), (name,), id=f"{a.id}+{b.id}>{name}")
                     for a, b in zip(share[i, x], itertools.cycle(partners))]
            relations.append(Composite(name, (x, y)))
    return rows, relations


def _truth(existing: Sequence[str], batch: Sequence[Example], relations: Sequence[Relation]) -> dict[str, Any]:
    new = list(dict.fromkeys(x for ex in batch for x in ex.labels if x not in set(existing)))
    truth = LabelRelations(labels=tuple(existing) + tuple(new), relations=tuple(relations))
    body = truth.to_dict()
    body["expected"] = expected_verdicts(truth, new, existing)
    return body


Scenario = tuple[list[Example], list[Example], list[Example], dict]  # base_train, base_valid, batch, truth


@dataclass(frozen=True)
class Base:
    """An existing model's world: its training rows, and the rows held out from it by intent.

    ``heldout`` maps each existing intent to held-out rows carrying it alone
    (the material that new intents are made of); ``unseen`` are held-out rows
    of what the existing model never saw (a withheld intent, or out-of-scope
    queries), the "new scope" of a generic intent.
    """

    train: list[Example]
    valid: list[Example]
    existing: list[str]
    heldout: dict[str, list[Example]]
    unseen: list[Example]


def _multi_domain(labels: Iterable[str]) -> bool:
    """Whether a row's labels include a composite (MultiWOZ's "hotel&train"), which no existing model knows."""
    from intentvcs.training.vcs_builder import COMPOSITE_SEPARATOR

    return any(COMPOSITE_SEPARATOR in label for label in labels)


def vcs_base(dataset: str, data_root: Path, seed: int = 0,
             withheld: str | None = None) -> tuple[Base, Any, str, dict[str, Example]]:
    """The SNIPS / ATIS / MultiWOZ existing model's world (train rows of the first half, one intent withheld), the
    DialogVCS build of the train rows, the withheld intent and the original train rows by id (see the
    module docstring)."""
    from intentvcs.training import vcs_builder as vcs

    sources, _, _ = vcs.load_sources(dataset, data_root)
    bench = vcs.build_benchmark(sources, vcs.SPECS[dataset], seed=seed)
    original = {ex.id: ex for ex in sources["train"]}
    # Multi-domain turns (MultiWOZ's "hotel&train") are what the upgrade brings as composites: the
    # existing model knows the base intents only.
    originals = sorted({x for ex in sources["train"] for x in ex.labels if not _multi_domain([x])})
    counts = {x: sum(ex.labels == (x,) for ex in sources["train"]) for x in originals}
    # The novel intent: a mid-sized original intent the existing model never sees.
    withheld = withheld or sorted(originals, key=lambda x: abs(counts[x] - 200))[0]

    def known(ex: Example) -> bool:  # a row the existing model may learn from
        return withheld not in ex.labels and not _multi_domain(ex.labels)

    train = [original[ex.id] for ex in bench.files["train"] if half_of(ex.id) == 0 and known(original[ex.id])]
    # Training refuses validation spans of a type its rows never show (MultiWOZ's rare slots): such spans
    # are dropped, the rows kept.
    types = {span.label for ex in train for span in ex.spans}
    valid = known_spans_only((ex for ex in sources["valid"] if known(ex)), types)
    second = [original[ex.id] for ex in bench.files["train"] if half_of(ex.id) == 1]
    heldout = _by_label(ex for ex in second if known(ex))
    base = Base(train, valid, [x for x in originals if x != withheld], heldout,
                [ex for ex in second if ex.labels == (withheld,)])
    return base, bench, withheld, original


def vcs_scenario(dataset: str, data_root: Path, seed: int = 0, versions: int = 2, unions: int = 2,
                 joins: int = 2, withheld: str | None = None, min_rows: int = MIN_INTENT_ROWS) -> Scenario:
    """``(base_train, base_valid, batch, truth)`` for SNIPS, ATIS or MultiWOZ (see the module docstring)."""
    from intentvcs.training.vcs_builder import SPECS

    base, bench, withheld, original = vcs_base(dataset, data_root, seed, withheld)
    rng = random.Random(seed)
    second = [ex for ex in bench.files["train"] if half_of(ex.id) == 1]
    new_labels = set(bench.relations.labels) - set(base.existing) - {withheld}

    batch = [ex for ex in second if ex.labels[0] in new_labels and withheld not in original[ex.id].labels
             and not _multi_domain(original[ex.id].labels)]
    batch += base.unseen
    if SPECS[dataset].composites:
        # The set's own multi-domain turns, of both halves, are the composites, under their own names
        # (as many rows as there are: the builder would scatter a third of them over the parts' versions).
        joins = 0
        batch += [original[ex.id] for ex in bench.files["train"] if _multi_domain(original[ex.id].labels)]
    relabelled = {ex.id for ex in batch}
    untouched = {x: [ex for ex in rows if ex.id not in relabelled] for x, rows in base.heldout.items()}
    injected, relations = inject(untouched, rng, versions, unions, joins)
    batch += injected
    batch = _drop_small(batch, min_rows)
    present = {x for ex in batch for x in ex.labels} | set(base.existing)
    kept = [r for r in (*bench.relations.relations, *relations) if set(r.labels()) <= present]
    return base.train, base.valid, batch, _truth(base.existing, batch, kept)


def clinc_base(path: Path) -> Base:
    """The CLINC150 existing model's world: the in-scope train split; valid + test held out, out-of-scope
    queries as the unseen rows."""
    from intentvcs.training.loaders.clinc150 import load_split

    train, valid, test = (load_split(path, split) for split in ("train", "valid", "test"))
    base_train = [ex for ex in train if ex.labels]
    return Base(base_train, [ex for ex in valid if ex.labels], sorted({x for ex in base_train for x in ex.labels}),
                _by_label(valid + test), [ex for ex in valid + test if not ex.labels])


def clinc_scenario(path: Path, seed: int = 0, versions: int = 20, unions: int = 5, joins: int = 5) -> Scenario:
    """``(base_train, base_valid, batch, truth)`` for CLINC150 (see the module docstring)."""
    base = clinc_base(path)
    injected, relations = inject(base.heldout, random.Random(seed), versions, unions, joins)
    batch = injected + [Example(ex.text, ("oos~new",), id=ex.id) for ex in base.unseen]
    return base.train, base.valid, batch, _truth(base.existing, batch, relations)


def write_scenario(out: Path, base_train: list[Example], base_valid: list[Example], batch: list[Example],
                   truth: dict[str, Any], info: dict[str, Any]) -> Path:
    """The scenario's files, each written atomically (see the module docstring).

    File by file rather than the whole directory, so that the models trained
    in it (``ckpt/``, ``bundle/``) survive a rebuild that leaves their data as it was.
    """
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "base_train.jsonl", base_train)
    write_jsonl(out / "base_valid.jsonl", base_valid)
    write_jsonl(out / "batch.jsonl", batch)
    atomic.write_json(out / "truth.json", truth)
    counts = {"base_train": len(base_train), "base_valid": len(base_valid), "batch": len(batch),
              "new_intents": len(truth["expected"])}
    atomic.write_json(out / "info.json", {**info, "counts": counts,
                                          "base_train_fingerprint": fingerprint(base_train, base_valid)})
    return out


def load_scenario(path: Path) -> tuple[list[Example], dict[str, Any]]:
    """``(batch, truth)`` of a scenario directory."""
    return read_jsonl(path / "batch.jsonl"), json.loads((path / "truth.json").read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=("vcs", "clinc"))
    parser.add_argument("--dataset", choices=("snips", "atis", "multiwoz"), help="for 'vcs'")
    parser.add_argument("--data-root", default=str(SHARED_DATA))
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.kind == "vcs":
        if not args.dataset:
            parser.error("vcs needs --dataset")
        parts = vcs_scenario(args.dataset, Path(args.data_root), args.seed)
        name = args.dataset
    else:
        parts = clinc_scenario(Path(args.data_root) / "clinc150" / "data_full.json", args.seed)
        name = "clinc150"
    info = {"scenario": name, "builder": args.kind, "seed": args.seed,
            "command": "python -m benchmarks.audit_scenarios " + " ".join(sys.argv[1:] if argv is None else argv)}
    out = write_scenario(Path(args.out), *parts, info)
    expected = parts[3]["expected"]
    kinds = {k: sum(v["relation"] == k for v in expected.values()) for k in (*PRIORITY, "novel")}
    print(f"wrote {out}: {len(parts[0])} base training rows, {len(parts[2])} batch rows, "
          f"{len(expected)} new intents {kinds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
