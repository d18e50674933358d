"""The DialogVCS benchmark builder (intentvcs.training.vcs_builder) and ``intentvcs build-vcs``."""

from __future__ import annotations

import collections
import json
import random

import numpy as np
import pytest

from intentvcs.cli.main import main
from intentvcs.core.dataio import Example, Span, read_jsonl
from intentvcs.core.relations import LabelRelations
from tests.test_loaders import DATA, needs_data, write_slot_folder
from intentvcs.training import vcs_builder as vcs

SPEC = vcs.VCSSpec("TINY-VCS", pivots={"PlayMusic": "artist", "GetWeather": "state"})
MULTI = vcs.VCSSpec("MULTI-VCS", composites=True)


def ex(text: str, *labels: str, spans: tuple[Span, ...] = (), ident: str | None = None) -> Example:
    return Example(text, labels, ident or text, spans)


ARTIST = (Span(5, 10, "artist"),)
# Six hand-checked utterances: PlayMusic with/without artist, GetWeather with a
# state and with a city only, RateBook (no pivot) twice.
TINY_TRAIN = [
    ex("play adele", "PlayMusic", spans=ARTIST),
    ex("play some jazz", "PlayMusic", spans=(Span(10, 14, "genre"),)),
    ex("rain in ohio", "GetWeather", spans=(Span(8, 12, "state"),)),
    ex("rain in rome", "GetWeather", spans=(Span(8, 12, "city"),)),
    ex("rate it five", "RateBook"),
    ex("rate this book", "RateBook"),
]
TINY = {"train": TINY_TRAIN, "valid": TINY_TRAIN[:2], "test": [ex("play adele now", "PlayMusic", spans=ARTIST)]}

TINY_GOLD = [
    ("PlayMusic", "PlayMusic_with_artist_v1", "PlayMusic_with_artist_v2"),
    ("PlayMusic", "PlayMusic_without_artist_v1", "PlayMusic_without_artist_v2"),
    ("GetWeather", "GetWeather_with_state_v1", "GetWeather_with_state_v2"),
    ("GetWeather", "GetWeather_without_state_v1", "GetWeather_without_state_v2"),
    ("RateBook", "RateBook_v1", "RateBook_v2"),
    ("RateBook", "RateBook_v1", "RateBook_v2"),
]


def labels_of(rows):
    return [row.labels for row in rows]


# -------------------------------------------------------- hand-checked sets
def test_full_gold_sets_on_tiny_data():
    bench = vcs.build_benchmark(TINY, SPEC, seed=0)
    assert labels_of(bench.files["train_gold"]) == TINY_GOLD
    assert labels_of(bench.files["valid_gold"]) == TINY_GOLD[:2]
    assert labels_of(bench.files["test"]) == [TINY_GOLD[0]]
    for observed, gold in zip(bench.files["train"], bench.files["train_gold"]):
        assert len(observed.labels) == 1 and observed.labels[0] in gold.labels
        assert (observed.id, observed.text, observed.spans) == (gold.id, gold.text, gold.spans)


def test_relations_on_tiny_data():
    rel = vcs.build_benchmark(TINY, SPEC, seed=0).relations
    assert len(rel.labels) == 13  # 2 split intents x 5 + RateBook x 3
    assert rel.pairs("duplicate") == {
        ("PlayMusic_with_artist_v1", "PlayMusic_with_artist_v2"),
        ("PlayMusic_without_artist_v1", "PlayMusic_without_artist_v2"),
        ("GetWeather_with_state_v1", "GetWeather_with_state_v2"),
        ("GetWeather_without_state_v1", "GetWeather_without_state_v2"),
        ("RateBook", "RateBook_v1"), ("RateBook", "RateBook_v2"), ("RateBook_v1", "RateBook_v2"),
    }
    assert rel.pairs("subset") == {
        (f"{i}_{w}_{e}_v{k}", i)
        for i, e in (("PlayMusic", "artist"), ("GetWeather", "state"))
        for w in ("with", "without") for k in (1, 2)
    }
    assert rel.pairs("composite") == set()
    assert rel.families["RateBook"] == ("RateBook", "RateBook_v1", "RateBook_v2")
    assert rel.families["PlayMusic"][0] == "PlayMusic" and len(rel.families["PlayMusic"]) == 5
    assert rel.details["pivots"] == {"GetWeather": "state", "PlayMusic": "artist"}


def test_closure_of_any_observed_label_recovers_the_gold_set():
    """The relations say exactly what the gold sets say: closing a label that
    implies its whole set (a version of an unsplit intent, a child version)
    gives the gold set of its rows."""
    bench = vcs.build_benchmark(TINY, SPEC, seed=0)
    rel = bench.relations
    for gold in bench.files["train_gold"]:
        # The most specific label: a child version if the family is split, else any version.
        start = max(gold.labels, key=lambda lab: ("_with" in lab, lab.endswith("_v1")))
        accepted = np.array([[lab == start for lab in rel.labels]])
        closed = rel.close(accepted)[0]
        closed_labels = {lab for lab, on in zip(rel.labels, closed) if on}
        # A child version implies its sibling version and the parent: the whole gold set.
        assert closed_labels == set(gold.labels)


def test_composites_gold_relations_and_closure():
    rows = [ex("hotel and taxi", "hotel&taxi"), ex("a hotel", "hotel"), ex("a taxi", "taxi")]
    bench = vcs.build_benchmark({"train": rows, "valid": rows, "test": rows}, MULTI, seed=0)
    assert labels_of(bench.files["test"]) == [
        ("hotel", "hotel&taxi", "hotel_v1", "hotel_v2", "taxi", "taxi_v1", "taxi_v2"),
        ("hotel", "hotel_v1", "hotel_v2"),
        ("taxi", "taxi_v1", "taxi_v2"),
    ]
    rel = bench.relations
    assert rel.pairs("composite") == {("hotel&taxi", "hotel"), ("hotel&taxi", "taxi")}
    assert rel.families["hotel&taxi"] == ("hotel&taxi",)
    closed = rel.close(np.array([[lab == "hotel&taxi" for lab in rel.labels]]))[0]
    assert {lab for lab, on in zip(rel.labels, closed) if on} == set(bench.files["test"][0].labels)


def test_multi_label_row_gold_is_union_and_observes_one_family():
    row = ex("flights and fares", "atis_flight", "atis_airfare")
    spec = vcs.VCSSpec("A", pivots={"atis_flight": "time"})
    plan = vcs.make_plan(spec, {"train": [row], "valid": [], "test": []})
    assert vcs.gold_labels(plan, row) == (
        "atis_airfare", "atis_airfare_v1", "atis_airfare_v2",
        "atis_flight", "atis_flight_without_time_v1", "atis_flight_without_time_v2",
    )
    rng = random.Random(1)
    seen = {vcs.observed_label(plan, row, rng) for _ in range(200)}
    assert seen == set(vcs.gold_labels(plan, row))


def test_pivot_matches_slot_type_substring():
    row = ex("aircraft from boston", "atis_aircraft", spans=(Span(14, 20, "fromloc.city_name"),))
    assert vcs.has_pivot(row, "loc") and not vcs.has_pivot(row, "airline_name")


# ------------------------------------------------------------ draw rule
def frequencies(plan, row, draws=6000, seed=0):
    rng = random.Random(seed)
    counts = collections.Counter(vcs.observed_label(plan, row, rng) for _ in range(draws))
    return {label: n / draws for label, n in counts.items()}


def test_draw_rule_split_family_is_coarse_half_then_versions():
    row = TINY_TRAIN[0]
    plan = vcs.make_plan(SPEC, TINY)
    freq = frequencies(plan, row)
    assert freq.keys() == {"PlayMusic", "PlayMusic_with_artist_v1", "PlayMusic_with_artist_v2"}
    assert freq["PlayMusic"] == pytest.approx(0.5, abs=0.03)
    assert freq["PlayMusic_with_artist_v1"] == pytest.approx(0.25, abs=0.03)


def test_draw_rule_unsplit_family_is_uniform_over_three():
    freq = frequencies(vcs.make_plan(SPEC, TINY), TINY_TRAIN[4])
    assert freq.keys() == {"RateBook", "RateBook_v1", "RateBook_v2"}
    assert all(f == pytest.approx(1 / 3, abs=0.03) for f in freq.values())


def test_draw_rule_composite_is_uniform_over_composite_and_parts():
    rows = [ex("hotel and taxi", "hotel&taxi")]
    freq = frequencies(vcs.make_plan(MULTI, {"train": rows, "valid": [], "test": []}), rows[0])
    assert freq["hotel&taxi"] == pytest.approx(1 / 3, abs=0.03)
    hotel_side = sum(f for lab, f in freq.items() if lab.startswith("hotel") and "&" not in lab)
    assert hotel_side == pytest.approx(1 / 3, abs=0.03)
    assert freq["taxi_v2"] == pytest.approx(1 / 9, abs=0.03)


# ------------------------------------------------------------ determinism
def build_dicts(splits, spec, **kwargs):
    bench = vcs.build_benchmark(splits, spec, **kwargs)
    return {name: [r.to_dict() for r in rows] for name, rows in bench.files.items()}, bench.relations.to_dict()


def test_same_seed_same_benchmark_other_seed_other_labels():
    many = {"train": TINY_TRAIN * 20, "valid": TINY_TRAIN, "test": TINY_TRAIN}
    assert build_dicts(many, SPEC, seed=7) == build_dicts(many, SPEC, seed=7)
    files7, rel7 = build_dicts(many, SPEC, seed=7)
    files8, rel8 = build_dicts(many, SPEC, seed=8)
    assert files7["train"] != files8["train"]
    assert files7["train_gold"] == files8["train_gold"] and rel7["labels"] == rel8["labels"]


def test_train_draws_do_not_depend_on_valid():
    a, _ = build_dicts({"train": TINY_TRAIN, "valid": TINY_TRAIN, "test": TINY_TRAIN}, SPEC, seed=3)
    b, _ = build_dicts({"train": TINY_TRAIN, "valid": TINY_TRAIN[:1], "test": TINY_TRAIN}, SPEC, seed=3)
    assert a["train"] == b["train"]


# ------------------------------------------------------------- difficulty
def test_easy_versions_only_k_families_and_never_splits():
    bench = vcs.build_benchmark(TINY, SPEC, seed=0, difficulty="easy", groups=1)
    (chosen,) = bench.plan.selected
    assert chosen in {"PlayMusic", "GetWeather", "RateBook"}
    for row in bench.files["train_gold"]:
        intent = TINY_TRAIN[[r.id for r in TINY_TRAIN].index(row.id)].labels[0]
        expected = (intent, f"{intent}_v1", f"{intent}_v2") if intent == chosen else (intent,)
        assert row.labels == expected
    assert not bench.plan.splits and bench.relations.pairs("subset") == set()


def test_hard_splits_only_k_pivot_families():
    bench = vcs.build_benchmark(TINY, SPEC, seed=0, difficulty="hard", groups=1)
    (chosen,) = bench.plan.selected
    assert chosen in SPEC.pivots and dict(bench.plan.splits) == {chosen: SPEC.pivots[chosen]}
    gold = labels_of(bench.files["train_gold"])
    assert gold[4:] == [("RateBook",), ("RateBook",)]  # RateBook has no pivot: plain
    other = ({"PlayMusic", "GetWeather"} - {chosen}).pop()
    assert (other,) in gold
    assert len(bench.relations.labels) == 5 + 2  # chosen family + two plain intents


def test_selection_depends_on_seed_only():
    picks = {vcs.make_plan(SPEC, TINY, "easy", 1, seed).selected for seed in range(20)}
    assert len(picks) == 3  # every family gets picked by some seed
    assert vcs.make_plan(SPEC, TINY, "easy", 2, 5) == vcs.make_plan(SPEC, TINY, "easy", 2, 5)


def test_hard_on_composites_treats_composites_of_chosen_family():
    rows = [ex("h t", "hotel&taxi"), ex("r t", "restaurant&train"), ex("h", "hotel"), ex("r", "restaurant"),
            ex("t", "taxi"), ex("tr", "train")]
    splits = {"train": rows, "valid": rows, "test": rows}
    for seed in range(10):
        plan = vcs.make_plan(MULTI, splits, "hard", 1, seed)
        (chosen,) = plan.selected
        assert plan.versioned == {chosen}
        assert plan.merged == {c for c in ("hotel&taxi", "restaurant&train") if chosen in c}
        untreated = ({"hotel&taxi", "restaurant&train"} - plan.merged).pop()
        assert vcs.gold_labels(plan, ex("x", untreated)) == (untreated,)


@pytest.mark.parametrize("difficulty,groups,message", [
    ("full", 1, "not allowed with full"),
    ("easy", None, "required"),
    ("easy", 3, "must be one of"),
    ("hard", 4, "at most the 2 eligible"),
    ("medium", None, "unknown difficulty"),
])
def test_bad_difficulty_arguments(difficulty, groups, message):
    with pytest.raises(ValueError, match=message):
        vcs.make_plan(SPEC, TINY, difficulty, groups)


# ------------------------------------------------------------- splitting
def test_split_by_dialogue_keeps_dialogues_whole_and_is_order_free():
    rows = [Example(f"t{d}-{t}", ("x",), f"{d}:{t}", meta={"dialogue": f"D{d}"}) for d in range(50) for t in range(3)]
    train, valid = vcs.split_by_dialogue(rows)
    train_ids = {r.meta["dialogue"] for r in train}
    assert len(train_ids) == 40 and not train_ids & {r.meta["dialogue"] for r in valid}
    assert len(train) + len(valid) == len(rows)
    again, _ = vcs.split_by_dialogue(list(reversed(rows)))
    assert {r.meta["dialogue"] for r in again} == train_ids


# ------------------------------------------------------- writing and CLI
def write_tiny_snips(root):
    for split in ("train", "valid", "test"):
        write_slot_folder(root / "snips", split, [
            ("play adele", "O B-artist", "PlayMusic"),
            ("play jazz", "O B-genre", "PlayMusic"),
            ("rate it", "O O", "RateBook"),
        ])


def test_build_writes_every_file_and_cli_summary(tmp_path, capsys):
    write_tiny_snips(tmp_path)
    out = tmp_path / "bench"
    assert main(["build-vcs", "--dataset", "snips", "--data-root", str(tmp_path), "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["labels"] == 8 and summary["paper_labels"] == 31
    names = {"train", "train_gold", "valid", "valid_gold", "test"}
    assert {p.name for p in out.iterdir()} == {f"{n}.jsonl" for n in names} | {"relations.json", "info.json"}
    rel = LabelRelations.load(out / "relations.json")
    assert set(rel.families) == {"PlayMusic", "RateBook"}
    info = json.loads((out / "info.json").read_text())
    assert info["counts"] == {n: 3 for n in names}
    assert info["sources"][0]["path"].endswith("train/seq.in") and info["sources"][0]["sha256"].startswith("sha256:")
    observed = {label for row in read_jsonl(out / "train.jsonl") for label in row.labels}
    assert info["labels_missing_from_train"] == sorted(set(rel.labels) - observed)  # what training never sees
    assert info["labels_missing_from_train_gold"] == []
    train, gold = read_jsonl(out / "train.jsonl"), read_jsonl(out / "train_gold.jsonl")
    assert all(t.labels[0] in g.labels and t.id == g.id for t, g in zip(train, gold))


def test_build_with_a_custom_spec(tmp_path):
    write_tiny_snips(tmp_path)
    info = vcs.build("snips", tmp_path, tmp_path / "out", spec=vcs.VCSSpec("CUSTOM", versions=3))
    rel = LabelRelations.load(tmp_path / "out" / "relations.json")
    assert info["benchmark"] == "CUSTOM" and info["paper_labels"] is None
    assert set(rel.labels) == {f"{i}{v}" for i in ("PlayMusic", "RateBook") for v in ("", "_v1", "_v2", "_v3")}
    assert len(rel.pairs("duplicate")) == 2 * 6  # 4 names per intent, all pairs


def test_bad_data_exits_2_and_leaves_previous_output_untouched(tmp_path, capsys):
    write_tiny_snips(tmp_path)
    out = tmp_path / "bench"
    out.mkdir()
    (out / "marker").write_text("old")
    (tmp_path / "snips" / "test" / "seq.out").write_text("O\nO O\nO O\n")  # line 1: 1 tag, 2 tokens
    assert main(["build-vcs", "--dataset", "snips", "--data-root", str(tmp_path), "--out", str(out)]) == 2
    assert "seq.out:1" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["marker"]


@needs_data
@pytest.mark.parametrize("dataset,labels", [("snips", 33), ("atis", 74)])
def test_shared_data_full_label_counts(tmp_path, dataset, labels):
    info = vcs.build(dataset, DATA, tmp_path / dataset, seed=0)
    assert info["labels"] == labels
    rel = LabelRelations.load(tmp_path / dataset / "relations.json")
    assert len(rel.labels) == labels and len(rel.families) == (7 if dataset == "snips" else 18)


def test_diagnosis_puts_each_wrong_row_in_the_first_class_that_applies():
    from benchmarks.vcs_diagnosis import error_class

    family = {label: "Play" for label in ("Play", "Play_with_artist_v1", "Play_with_artist_v2",
                                          "Play_without_artist_v1", "Play_without_artist_v2")}
    family["Weather"] = "Weather"
    gold = {"Play", "Play_with_artist_v1", "Play_with_artist_v2"}
    assert error_class(set(gold), gold, set(gold), family) is None
    # The other split of the same intent: the precision loss of SNIPS-VCS.
    assert error_class(gold | {"Play_without_artist_v1"}, gold, gold, family) == "extra_in_family"
    assert error_class(gold | {"Weather"}, gold, gold, family) == "extra_other_family"
    # A missing version that the relations would add back, and one they would not.
    assert error_class({"Play", "Play_with_artist_v1"}, gold, gold, family) == "missing_implied"
    assert error_class({"Play"}, gold, {"Play"}, family) == "missing"


@pytest.mark.parametrize("difficulty,groups,message", [
    ("full", 1, "not allowed with full"), ("easy", 3, "must be one of"), ("medium", None, "unknown difficulty")])
def test_bad_difficulty_arguments_are_refused_before_the_data_is_read(tmp_path, monkeypatch, difficulty, groups,
                                                                      message):
    """The checks no data can answer came after the data set was read (seconds for SNIPS, more for MultiWOZ)."""
    monkeypatch.setattr(vcs, "load_sources", lambda *args: pytest.fail("the data was read"))
    with pytest.raises(ValueError, match=message):
        vcs.build("snips", tmp_path / "data", tmp_path / "out", difficulty=difficulty, groups=groups)
