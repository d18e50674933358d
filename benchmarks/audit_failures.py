"""Generated upgrade cases of the audit's three known failure classes, with known answers.

Each class is a kind of new intent that the scored scenarios did not contain and that a held-out
scenario showed the audit typing wrong (issue "The upgrade audit"):

``subset_word``   the held-out rows of an existing intent X that contain one content word ``w`` (a
                  word found in 10-40% of X's held-out rows, in at least ``MIN_INTENT_ROWS`` of them:
                  "X in the morning"). Truth: ``X@w`` is a **subset** of X.
``absorbs_one``   a generic intent that absorbs one existing intent X and adds scope the model never
                  saw: as many held-out rows of X as rows the existing model never saw (the withheld
                  intent of SNIPS / ATIS, out-of-scope queries of CLINC150). Truth: ``X+more`` is a
                  **superset** of X.
``union_two``     the held-out rows of two existing intents X and Y, as many of each. Truth: ``X|Y``
                  is a **superset** of X and of Y.

The existing model is the one of each data set's scenario (``benchmarks.audit_scenarios``: SNIPS and
ATIS on the first half of their train rows with one intent withheld, CLINC150 on its in-scope train
split), so the cases reuse that scenario's bundle. Per data set and class, at most ``--cases`` new
intents (each existing intent in at most one case of a class, rows never shared between cases) go
into one batch: ``<scenario dir>/failures/<class>/`` with ``batch.jsonl`` and ``truth.json`` (the
scenario format), ``base_train.jsonl`` and ``bundle`` linking to the scenario's own.

    python -m benchmarks.audit_failures --scenario snips=runs/bench/audit/snips \
        --scenario atis=runs/bench/audit/atis --scenario clinc150=runs/bench/audit/clinc150

then ``benchmarks.audit_bench --scenario snips-subset_word=runs/bench/audit/snips/failures/subset_word
...`` scores them (relation accuracy = the share of cases typed right).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
from collections import Counter
from pathlib import Path

from benchmarks.audit_scenarios import (
    MIN_INTENT_ROWS, Base, _truth, clinc_base, inject, vcs_base, write_scenario,
)
from benchmarks.common import SHARED_DATA
from intentvcs.core.dataio import Example
from intentvcs.core.relations import Relation, Subset

CLASSES = ("subset_word", "absorbs_one", "union_two")
# A modifier, not the intent's own vocabulary (present in most rows) nor a rarity.
WORD_SHARE = (0.10, 0.40)
# Words that carry no scope of their own.
STOPWORDS = frozenset(
    "the and for you are can what with that this from have has was will would could please about into "
    "there their them they your yours me my mine our ours its it's i'm i'd i'll let let's want need like "
    "how who when where which why tell give get some any all one two much many more most just also not "
    "does did done doing than then been being".split())
WORD = re.compile(r"[a-z][a-z']+")


def words_of(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if len(w) >= 3 and w not in STOPWORDS}


def subset_word(base: Base, rng: random.Random, cases: int) -> tuple[list[Example], list[Relation]]:
    """``X@w``: X's held-out rows containing ``w`` (see the module docstring)."""
    found = []
    for intent in sorted(base.heldout):
        rows = base.heldout[intent]
        counts = Counter(w for ex in rows for w in words_of(ex.text))
        low, high = WORD_SHARE
        fitting = [w for w, n in counts.items()
                   if n >= MIN_INTENT_ROWS and low * len(rows) <= n <= high * len(rows)]
        if fitting:
            word = max(sorted(fitting), key=lambda w: counts[w])
            found.append((intent, word))
    chosen = sorted(rng.sample(found, min(cases, len(found))))
    batch, relations = [], []
    for intent, word in chosen:
        name = f"{intent}@{word}"
        batch += [Example(ex.text, (name,), id=f"{ex.id}>{name}") for ex in base.heldout[intent]
                  if word in words_of(ex.text)]
        relations.append(Subset(child=name, parent=intent))
    return batch, relations


def absorbs_one(base: Base, rng: random.Random, cases: int) -> tuple[list[Example], list[Relation]]:
    """``X+more``: X's held-out rows and as many rows the existing model never saw."""
    intents = sorted(x for x, rows in base.heldout.items() if len(rows) >= MIN_INTENT_ROWS)
    chosen = sorted(rng.sample(intents, min(cases, len(intents))))
    unseen = rng.sample(base.unseen, len(base.unseen))
    # Each case its own share of the unseen rows, as many as of its intent.
    per_case = len(unseen) // max(len(chosen), 1)
    batch, relations = [], []
    for k, intent in enumerate(chosen):
        more = unseen[k * per_case:(k + 1) * per_case]
        own = base.heldout[intent][:len(more)]
        more = more[:len(own)]
        if len(more) < MIN_INTENT_ROWS // 2:  # the new intent needs MIN_INTENT_ROWS rows in all
            continue
        name = f"{intent}+more"
        batch += [Example(ex.text, (name,), id=f"{ex.id}>{name}") for ex in own + more]
        relations.append(Subset(child=intent, parent=name))
    return batch, relations


def union_two(base: Base, rng: random.Random, cases: int) -> tuple[list[Example], list[Relation]]:
    """``X|Y``: two existing intents' held-out rows, as many of each (the scenarios' own construction)."""
    pool = {x: rows for x, rows in base.heldout.items() if len(rows) >= MIN_INTENT_ROWS}
    return inject(pool, rng, versions=0, unions=min(cases, len(pool) * (len(pool) - 1) // 2), joins=0)


BUILDERS = {"subset_word": subset_word, "absorbs_one": absorbs_one, "union_two": union_two}


def build(name: str, base: Base, folder: Path, cases: int, seed: int) -> dict[str, int]:
    """Write each class's batch under ``folder/failures/<class>``; return the cases per class."""
    made = {}
    for kind in CLASSES:
        batch, relations = BUILDERS[kind](base, random.Random(f"{seed}/{name}/{kind}"), cases)
        out = folder / "failures" / kind
        truth = _truth(base.existing, batch, relations)
        write_scenario(out, base.train, base.valid, batch, truth,
                       {"scenario": f"{name}-{kind}", "builder": "audit_failures", "class": kind, "seed": seed})
        link = out / "bundle"
        if not link.is_symlink():
            os.symlink(os.path.join("..", "..", "bundle"), link)
        made[kind] = len(truth["expected"])
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append", required=True, metavar="NAME=DIR",
                        help="snips, atis or clinc150 and its scenario folder (benchmarks.audit_scenarios)")
    parser.add_argument("--data-root", default=str(SHARED_DATA))
    parser.add_argument("--cases", type=int, default=20, help="new intents per data set and class (at most)")
    parser.add_argument("--seed", type=int, default=0, help="the scenario's seed (the same existing model)")
    args = parser.parse_args(argv)
    for spec in args.scenario:
        name, _, folder = spec.partition("=")
        if name not in ("snips", "atis", "clinc150") or not folder:
            parser.error(f"--scenario {spec!r}: expected snips|atis|clinc150=DIR")
        if name == "clinc150":
            base = clinc_base(Path(args.data_root) / "clinc150" / "data_full.json")
        else:
            base = vcs_base(name, Path(args.data_root), args.seed)[0]
        made = build(name, base, Path(folder), args.cases, args.seed)
        print(f"{name}: {made}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
