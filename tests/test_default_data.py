"""The embedded default data set (training/default_data/assistant) is well formed.

Every file goes through ``intentvcs.core.dataio.read_jsonl`` (which validates keys,
labels and span offsets); on top of that we check the set's own promises:
enough intents and utterances, no text leaking across splits, out-of-scope rows
in valid/test, and an upgrade batch whose ground-truth relations are coherent.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from intentvcs.core.dataio import read_jsonl

from intentvcs.training import DEFAULT_DATA as DATA
SPLITS = ("train", "valid", "test")
VERDICTS = {"duplicate", "subset", "superset", "composite", "novel"}


def _norm(text: str) -> str:
    """Case-, punctuation- and whitespace-insensitive key for duplicate checks."""
    return " ".join(re.sub(r"[^\w\s']", " ", text.lower()).split())


@pytest.fixture(scope="module")
def splits():
    return {name: read_jsonl(DATA / f"{name}.jsonl") for name in SPLITS}


@pytest.fixture(scope="module")
def upgrade():
    return read_jsonl(DATA / "upgrade.jsonl")


@pytest.fixture(scope="module")
def relations():
    return json.loads((DATA / "upgrade_relations.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def base_labels(splits):
    return {label for ex in splits["train"] for label in ex.labels}


@pytest.fixture(scope="module")
def new_labels(upgrade, base_labels):
    return {label for ex in upgrade for label in ex.labels} - base_labels


def test_files_present():
    for name in (*SPLITS, "upgrade"):
        assert (DATA / f"{name}.jsonl").is_file()
    assert (DATA / "upgrade_relations.json").is_file()
    assert (DATA / "README.md").is_file()


def test_rows_single_label_with_ids_and_clean_spans(splits, upgrade):
    for name, rows in {**splits, "upgrade": upgrade}.items():
        ids = [ex.id for ex in rows]
        assert all(ids), f"{name}: every row has an id"
        assert len(set(ids)) == len(ids), f"{name}: ids are unique"
        assert all(i.startswith(f"{name}-") for i in ids)
        for ex in rows:
            assert len(ex.labels) <= 1, (name, ex.text)
            assert 1 <= len(ex.text.split()) <= 25, (name, ex.text)
            assert ex.text == ex.text.strip()
            for span in ex.spans:
                surface = ex.text[span.start:span.end]
                assert surface and surface == surface.strip(), (name, ex.text, span)
                assert re.fullmatch(r"[a-z_]+", span.label), span.label
    assert not any(ex.is_out_of_scope for ex in upgrade), "upgrade rows are all labelled"


def test_train_has_enough_intents_and_utterances(splits):
    counts = Counter(label for ex in splits["train"] for label in ex.labels)
    assert len(counts) >= 15
    assert min(counts.values()) >= 25, counts
    assert not any(ex.is_out_of_scope for ex in splits["train"])


def test_valid_and_test_cover_every_intent_and_have_oos(splits, base_labels):
    for name in ("valid", "test"):
        rows = splits[name]
        counts = Counter(label for ex in rows for label in ex.labels)
        assert set(counts) == base_labels, f"{name} covers exactly the train intents"
        assert min(counts.values()) >= 5
        assert sum(ex.is_out_of_scope for ex in rows) >= 25, f"{name} has out-of-scope rows"


def test_no_text_duplicated_across_or_within_files(splits, upgrade):
    seen: dict[str, str] = {}
    for name, rows in {**splits, "upgrade": upgrade}.items():
        for ex in rows:
            key = _norm(ex.text)
            assert key not in seen, f"{ex.text!r} in {name} duplicates a row of {seen.get(key)}"
            seen[key] = name


def test_relations_file_schema(relations, base_labels, new_labels):
    assert relations["format"] == "intentvcs-relations"
    assert relations["format_version"] == 1
    assert set(relations["labels"]) == base_labels | new_labels
    assert isinstance(relations["details"], dict)
    labels = set(relations["labels"])
    for root, members in relations["families"].items():
        assert root in labels and root in members
        assert set(members) <= labels
    family_members = [m for members in relations["families"].values() for m in members]
    assert sorted(family_members) == sorted(labels), "families partition the labels"


def test_relations_refer_to_existing_labels(relations):
    labels = set(relations["labels"])
    types = set()
    for rel in relations["relations"]:
        types.add(rel["type"])
        if rel["type"] == "duplicate":
            assert {rel["a"], rel["b"]} <= labels and rel["a"] != rel["b"]
        elif rel["type"] == "subset":
            assert {rel["child"], rel["parent"]} <= labels and rel["child"] != rel["parent"]
        elif rel["type"] == "composite":
            assert rel["composite"] in labels
            assert len(rel["parts"]) >= 2 and set(rel["parts"]) <= labels
        else:
            pytest.fail(f"unknown relation type {rel['type']}")
    assert types == {"duplicate", "subset", "composite"}


def test_expected_verdicts(relations, base_labels, new_labels):
    expected = relations["expected"]
    assert set(expected) == new_labels, "one expected verdict per new intent"
    assert {v["relation"] for v in expected.values()} == VERDICTS, "every relation type present"
    rels = relations["relations"]
    pairs = {(r["type"], r.get("a"), r.get("b")) for r in rels if r["type"] == "duplicate"}
    subsets = {(r["child"], r["parent"]) for r in rels if r["type"] == "subset"}
    composites = {r["composite"]: set(r["parts"]) for r in rels if r["type"] == "composite"}
    for new, verdict in expected.items():
        existing = verdict["existing"]
        assert set(existing) <= base_labels, (new, existing)
        kind = verdict["relation"]
        if kind == "duplicate":
            assert len(existing) == 1
            assert ("duplicate", new, existing[0]) in pairs or ("duplicate", existing[0], new) in pairs
        elif kind == "subset":
            assert len(existing) == 1 and (new, existing[0]) in subsets
        elif kind == "superset":
            assert len(existing) >= 2
            assert all((old, new) in subsets for old in existing)
        elif kind == "composite":
            assert composites[new] == set(existing) and len(existing) >= 2
        else:
            assert existing == []
            assert not any(new in (r.get("a"), r.get("b"), r.get("child"), r.get("parent"),
                                   r.get("composite")) for r in rels)
    # a borderline novel intent is present (shares vocabulary with an existing intent)
    assert any(v["relation"] == "novel" and v.get("borderline_with") for v in expected.values())


def test_composite_parts_are_existing_intents(relations, base_labels):
    for rel in relations["relations"]:
        if rel["type"] == "composite":
            assert set(rel["parts"]) <= base_labels, rel


def test_upgrade_batch_sizes(upgrade, base_labels, new_labels):
    counts = Counter(label for ex in upgrade for label in ex.labels)
    for new in new_labels:
        assert 30 <= counts[new] <= 40, (new, counts[new])
    old = {label: n for label, n in counts.items() if label in base_labels}
    assert len(old) >= 3, "the batch also brings new data for existing intents"
