"""The audit's failure-class cases (``benchmarks.audit_failures``): what each class's new intents hold, and
the verdicts their truth files expect."""

import json
import random

from benchmarks.audit_failures import absorbs_one, build, subset_word, union_two, words_of
from benchmarks.audit_scenarios import Base
from intentvcs.core.dataio import Example, read_jsonl


def _world() -> Base:
    rng = random.Random(0)
    heldout = {}
    for intent, core in (("alarm", "set an alarm"), ("weather", "what is the weather"), ("music", "play a song")):
        rows = []
        for k in range(60):
            # "morning" in 30% of the rows: a modifier; the core words in every row are not.
            extra = " in the morning" if k % 10 < 3 else f" number {rng.choice(['x', 'y'])}"
            rows.append(Example(f"{core}{extra} {k}", (intent,), id=f"{intent}-{k}"))
        heldout[intent] = rows
    unseen = [Example(f"book a taxi to place {k}", (), id=f"taxi-{k}") for k in range(90)]
    train = [ex for rows in heldout.values() for ex in rows[:5]]
    return Base(train, train[:3], sorted(heldout), heldout, unseen)


def test_a_subset_by_word_takes_the_rows_with_a_modifier():
    batch, relations = subset_word(_world(), random.Random(0), cases=5)
    names = sorted({ex.labels[0] for ex in batch})
    assert names == ["alarm@morning", "music@morning", "weather@morning"]
    assert all("morning" in words_of(ex.text) for ex in batch)
    assert sum(ex.labels == ("alarm@morning",) for ex in batch) == 18  # 30% of 60
    assert {(r.child, r.parent) for r in relations} == {(n, n.split("@")[0]) for n in names}


def test_a_generic_intent_is_half_an_existing_intent_half_new_scope():
    world = _world()
    batch, relations = absorbs_one(world, random.Random(0), cases=3)
    by_name = {}
    for ex in batch:
        by_name.setdefault(ex.labels[0], []).append(ex)
    assert sorted(by_name) == ["alarm+more", "music+more", "weather+more"]
    for name, rows in by_name.items():
        own = [ex for ex in rows if ex.id.startswith(name.split("+")[0])]
        assert len(own) == len(rows) - len(own) == 30  # 90 unseen rows shared by 3 cases
    assert len({ex.id.split(">")[0] for ex in batch}) == len(batch)  # no row in two cases
    assert {(r.child, r.parent) for r in relations} == {(n.split("+")[0], n) for n in by_name}


def test_a_union_takes_two_existing_intents_and_the_files_expect_supersets(tmp_path):
    world = _world()
    batch, relations = union_two(world, random.Random(0), cases=2)
    assert len({ex.labels[0] for ex in batch}) == 2 and all("|" in ex.labels[0] for ex in batch)
    made = build("toy", world, tmp_path, cases=3, seed=0)
    assert made == {"subset_word": 3, "absorbs_one": 3, "union_two": 3}
    expected = json.loads((tmp_path / "failures" / "union_two" / "truth.json").read_text())["expected"]
    assert {v["relation"] for v in expected.values()} == {"superset"}
    assert all(len(v["existing"]) == 2 for v in expected.values())
    expected = json.loads((tmp_path / "failures" / "subset_word" / "truth.json").read_text())["expected"]
    assert {v["relation"] for v in expected.values()} == {"subset"}
    folder = tmp_path / "failures" / "absorbs_one"
    assert (folder / "bundle").is_symlink() and str((folder / "bundle").readlink()) == "../../bundle"
    assert read_jsonl(folder / "base_train.jsonl") == world.train
