"""The robustness suite: per-operator, Random and Hard sets scored from a fake
model with known failures, then the CLI on a tiny bundle and checkpoint."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from intentvcs.cli.main import main
from intentvcs.core.dataio import Example, Span, read_jsonl, write_jsonl
from intentvcs.core.decision import Decision
from intentvcs.core.entities import Entity
from intentvcs.core.oos import ThresholdRule
from intentvcs.core.outputs import GraphOutputs, tuple_array
from intentvcs.core.perturb import FAMILIES, OPERATORS, VALUE_OPERATORS, EntityValues, perturb, random_set
from intentvcs.core.robustness import (
    build_sets,
    compare,
    expand_operators,
    infer_distinct,
    outcomes,
    render_markdown,
    run_suite,
    tracked_metrics,
    worst_candidates,
)
from intentvcs.core.scoring import span_metrics
from intentvcs.core.spelling import Spelling
from tests.helpers.bundle import DEFAULT_LABELS, make_tiny_bundle

LABELS = ("music", "weather")
KEYWORD = {"music": "play", "weather": "rain"}


def row(text: str, *labels: str, spans: tuple[Span, ...] = ()) -> Example:
    return Example(text, tuple(labels), spans=spans)


# All lowercase. The last row has no keyword: the fake model gets it wrong clean.
EXAMPLES = [
    row("play some jazz in the kitchen", "music"),
    row("can you play the new album by daft punk", "music"),
    row("play music by the beatles", "music", spans=(Span(14, 25, "artist"),)),
    row("will it rain tomorrow in paris", "weather"),
    row("is rain expected this weekend", "weather"),
    row("put on something relaxing please", "music"),
]


def fake_top(text: str) -> int:
    """The fake model's answer: the keyword's label, flipped when the text has any capital letter."""
    top = int(KEYWORD["music"] not in text.lower())
    return 1 - top if any(c.isupper() for c in text) else top


class FakeModel:
    """``infer`` with logits 4 for ``fake_top`` and 0 otherwise; records every text it is given."""

    def __init__(self):
        self.seen: list[str] = []

    def infer(self, texts):
        self.seen += texts
        logits = np.zeros((len(texts), len(LABELS)), dtype=np.float32)
        logits[np.arange(len(texts)), [fake_top(t) for t in texts]] = 4.0
        pooled = np.zeros((len(texts), 3), dtype=np.float32)
        return GraphOutputs(logits, pooled, pooled)


def right(text: str, example: Example) -> bool:
    return LABELS[fake_top(text)] in example.labels


def accuracy(pairs) -> float:
    """Percent of (text, example) pairs the fake model gets right."""
    return 100.0 * np.mean([right(t, ex) for t, ex in pairs])


DECISION = Decision(LABELS, activation="softmax")


def predictor(infer, decision: Decision = DECISION) -> SimpleNamespace:
    """``infer`` and ``decision`` as an ``intentvcs.core.predictor.Predictor``."""
    return SimpleNamespace(labels=list(decision.labels), decision=decision, info={}, infer=infer)


@pytest.fixture(scope="module")
def report():
    return run_suite(EXAMPLES, predictor(FakeModel().infer), None, draws=3, seed=0, progress=False)


def test_casing_flips_every_row_and_punctuation_none(report):
    # Casing always leaves a capital, so each of the 5 clean-right rows breaks
    # and the clean-wrong row is fixed: 5/6 -> 1/6.
    casing = report["operators"]["casing"]
    assert casing["n"] == 6
    assert casing["accuracy"] == pytest.approx({"clean": 500 / 6, "perturbed": 100 / 6, "drop": 400 / 6})
    punctuation = report["operators"]["punctuation"]["accuracy"]
    assert punctuation["drop"] == 0.0 and punctuation["perturbed"] == punctuation["clean"]


def test_every_operator_is_scored_on_the_rows_it_applies_to(report):
    assert list(report["operators"]) == list(OPERATORS)
    for name, entry in report["operators"].items():
        pairs = [(out.text, ex) for ex in EXAMPLES if (out := perturb(ex, name, 0)) is not None]
        assert entry["n"] == len(pairs), name
        if not pairs:
            assert entry["accuracy"] == {"clean": None, "perturbed": None, "drop": None}
            continue
        clean = accuracy([(ex.text, ex) for _, ex in pairs])
        assert entry["accuracy"]["clean"] == pytest.approx(clean), name
        assert entry["accuracy"]["perturbed"] == pytest.approx(accuracy(pairs)), name
        assert entry["accuracy"]["drop"] == pytest.approx(clean - accuracy(pairs)), name


def test_random_set_mean_and_std_over_draws(report):
    values = EntityValues.build(EXAMPLES)  # the data has a span, so the value operators take part
    scores = [accuracy([(ex.text, src) for ex, src in zip(random_set(EXAMPLES, seed, values=values), EXAMPLES)])
              for seed in range(3)]
    random = report["random"]
    assert [d["seed"] for d in random["draws"]] == [0, 1, 2]
    assert [d["accuracy"]["perturbed"] for d in random["draws"]] == pytest.approx(scores)
    assert random["accuracy"]["clean"] == pytest.approx(500 / 6)
    assert random["accuracy"]["perturbed_mean"] == pytest.approx(np.mean(scores))
    assert random["accuracy"]["perturbed_std"] == pytest.approx(np.std(scores, ddof=1))
    assert random["accuracy"]["drop_mean"] == pytest.approx(500 / 6 - np.mean(scores))


def test_hard_set_is_wrong_wherever_any_operator_breaks_the_row(report):
    hard = report["hard"]
    # Casing applies to every row, so each row has a variant; the clean-wrong
    # row stays wrong only if some variant keeps it wrong (one without capitals).
    variants = [[out.text for name in OPERATORS if (out := perturb(ex, name, 0)) is not None] for ex in EXAMPLES]
    expected = 100.0 * np.mean([all(right(v, ex) for v in vs) for vs, ex in zip(variants, EXAMPLES)])
    assert hard["n"] == 6
    assert hard["accuracy"]["perturbed"] == pytest.approx(expected)
    assert hard["accuracy"]["perturbed"] == 0.0
    assert hard["accuracy"]["drop"] == pytest.approx(500 / 6)
    assert sum(hard["worst_operator"].values()) == 6


def test_each_distinct_text_is_inferred_once():
    """Every distinct text once; then, answered as served, the parts of the chained ones in one more run."""
    model = FakeModel()
    report = run_suite(EXAMPLES, predictor(model.infer), ["raddle"], draws=2, seed=0, progress=False)
    texts = model.seen[:report["distinct_texts"]]
    assert len(texts) == len(set(texts)) and {ex.text for ex in EXAMPLES} <= set(texts)
    whole = FakeModel()
    report = run_suite(EXAMPLES, predictor(whole.infer), ["raddle"], draws=2, seed=0, progress=False, segment=False)
    assert len(whole.seen) == len(set(whole.seen)) == report["distinct_texts"] and report["segment"] is False


def test_the_suite_scores_the_answers_the_service_gives():
    """A perturbation that chains a second request is scored on the part-by-part answer, as served (the suite
    decided every text whole)."""
    from intentvcs.core.robustness import infer_distinct
    from intentvcs.core.segmentation import decide_segmented

    model = FakeModel()
    texts = ["will it rain tomorrow in paris and play some jazz in the kitchen", "play music by the beatles"]
    served = decide_segmented(DECISION, model.infer, texts)[1].result
    assert served.accepted.sum(axis=1).tolist() == [2, 1]  # the chained text answers both requests
    outputs = infer_distinct(model.infer, texts, DECISION, progress=False)
    _, result = outputs.take(texts)
    assert (result.accepted == served.accepted).all() and (result.out_of_scope == served.out_of_scope).all()


def test_same_seed_same_report_other_seed_other_texts():
    first = run_suite(EXAMPLES, predictor(FakeModel().infer), None, draws=2, seed=5, progress=False)
    again = run_suite(EXAMPLES, predictor(FakeModel().infer), None, draws=2, seed=5, progress=False)
    assert json.dumps(first) == json.dumps(again)
    seed5 = build_sets(EXAMPLES, list(OPERATORS), 2, 5, progress=False)
    seed6 = build_sets(EXAMPLES, list(OPERATORS), 2, 6, progress=False)
    assert seed5.texts() == build_sets(EXAMPLES, list(OPERATORS), 2, 5, progress=False).texts()
    assert seed5.texts() != seed6.texts()
    # Draw d of seed s is seed s + d: draw 1 of seed 5 is draw 0 of seed 6.
    assert seed5.random[1] == seed6.random[0]


def test_sets_keep_protected_spans():
    sets = build_sets(EXAMPLES, list(OPERATORS), 2, 0, progress=False)
    for rows, variants in sets.operators.values():
        for r, variant in zip(rows, variants):
            if r == 2:
                [span] = variant.spans
                assert variant.text[span.start:span.end] == "the beatles"
    assert all("the beatles" in draw[2].text for draw in sets.random)


def test_multi_label_data_is_scored_by_f1_and_exact_match():
    labels = ("music", "weather", "alarm")
    words = {"music": "play", "weather": "rain", "alarm": "wake"}

    def infer(texts):
        # Sigmoid: +4 for each keyword present in an all-lowercase text, else -4; capitals push the
        # keywords' scores under the others' (-2), so only a wrong intent can be on top.
        def score(label, text):
            present = words[label] in text.lower()
            if text == text.lower():
                return 4.0 if present else -4.0
            return -4.0 if present else -2.0

        logits = np.array([[score(l, t) for l in labels] for t in texts])
        return GraphOutputs(logits, np.zeros((len(texts), 2)), np.zeros((len(texts), 2)))

    data = [row("play jazz and wake me at seven", "music", "alarm"), row("will it rain", "weather"),
            row("play the radio", "music")]
    report = run_suite(data, predictor(infer, Decision(labels, activation="sigmoid")), ["casing", "punctuation"],
                       draws=1, progress=False)
    assert report["metric"] == "f1" and report["metrics"] == ["f1", "exact_match"]
    assert report["clean"] == {"f1": 100.0, "exact_match": 100.0}
    casing = report["operators"]["casing"]
    # Capitals leave every label under its threshold; an in-scope row still answers its top intent,
    # here always a wrong one: F1 0, no row exact.
    assert casing["f1"] == {"clean": 100.0, "perturbed": 0.0, "drop": 100.0}
    assert casing["exact_match"] == {"clean": 100.0, "perturbed": 0.0, "drop": 100.0}
    assert report["hard"]["exact_match"]["perturbed"] == 0.0
    assert report["operators"]["punctuation"]["f1"]["drop"] == 0.0


def test_tracked_metrics_auto_detects_and_can_be_forced():
    single = [row("a", "x"), row("b", "y")]
    multi = single + [row("c", "x", "y")]
    with_oos = single + [row("d")]
    assert tracked_metrics(single) == ["accuracy"]
    assert tracked_metrics(multi) == ["f1", "exact_match"]
    assert tracked_metrics(multi, "accuracy") == ["accuracy"]
    assert tracked_metrics(with_oos) == ["accuracy", "oos_recall"]
    assert tracked_metrics(single, entities=True) == ["accuracy"]  # no spans: nothing to score
    assert tracked_metrics(EXAMPLES, entities=True) == ["accuracy", "slot_f1"]
    with pytest.raises(ValueError, match="unknown metric"):
        tracked_metrics(single, "precision")


def test_expand_operators_accepts_families_and_keeps_registry_order():
    assert expand_operators(None) == list(OPERATORS)
    assert expand_operators(["casing", "nature"]) == [*FAMILIES["nature"], "casing"]
    with pytest.raises(ValueError, match="unknown operator or family 'casng'"):
        expand_operators(["casng"])


def test_worst_candidate_prefers_wrong_then_least_firm_then_first():
    rows = np.array([0, 0, 0, 1, 1, 2, 2])
    right = np.array([True, False, False, True, True, True, True])
    firmness = np.array([0.1, 0.9, 0.5, 0.7, 0.3, 0.4, 0.4])
    assert worst_candidates(rows, right, firmness).tolist() == [2, 4, 5]


def test_outcomes_of_out_of_scope_and_unknown_gold_rows():
    decision = Decision(LABELS, activation="softmax", oos=ThresholdRule(0.3))
    logits = np.array([[4.0, 0.0], [0.0, 0.0], [0.0, 4.0]])
    # Row 0: music, right. Row 1: OOS gold, judged OOS (top confidence 0.5 < 0.7).
    # Row 2: a gold label the model does not know (extra column): wrong, firmness 0.
    gold = np.array([[True, False, False], [False, False, False], [False, False, True]])
    right, firmness = outcomes(decision, decision.apply(logits, None, None), gold, "accuracy")
    assert right.tolist() == [True, True, False]
    assert firmness[0] == pytest.approx(decision.confidences(logits)[0, 0])
    assert firmness[1] == pytest.approx(0.5)  # the OOS score: 1 - top confidence
    assert firmness[2] == 0.0


def test_markdown_has_a_row_per_set(report):
    lines = render_markdown(report).splitlines()
    table = [l for l in lines if l.startswith("| ")]
    assert len(table) == 1 + len(OPERATORS) + 2
    assert table[0].startswith("| set | family | n | accuracy clean | accuracy perturbed | accuracy drop |")
    casing = next(l for l in table if l.startswith("| casing |"))
    assert casing == "| casing | raddle | 6 | 83.33 | 16.67 | 66.67 |"
    assert any(l.startswith("| **Random** | – | 6 | 83.33 | ") and " ± " in l for l in table)


def test_empty_data_and_bad_draws_are_refused():
    with pytest.raises(ValueError, match="no examples"):
        run_suite([], predictor(FakeModel().infer), None, draws=1)
    with pytest.raises(ValueError, match="draws must be >= 1"):
        run_suite(EXAMPLES, predictor(FakeModel().infer), None, draws=0)


# -- entities ------------------------------------------------------------------------------
# Test rows; the fake entity model knows exactly the training rows' values.
ENTITY_ROWS = [
    row("play jazz in the kitchen", "music", spans=(Span(5, 9, "genre"), Span(17, 24, "room"))),
    row("play blues please", "music", spans=(Span(5, 10, "genre"),)),
    row("will it rain in paris", "weather", spans=(Span(16, 21, "city"),)),
    row("will it rain in rome", "weather", spans=(Span(16, 20, "city"),)),
    row("is rain expected this weekend", "weather"),
]
ENTITY_TRAIN = [row("play jazz", "music", spans=(Span(5, 9, "genre"),)),
                row("lights off in the kitchen", "music", spans=(Span(18, 25, "room"),)),
                row("rain in paris", "weather", spans=(Span(8, 13, "city"),))]
KNOWN = {"jazz": "genre", "kitchen": "room", "paris": "city"}


def entities_of(text: str) -> tuple[Entity, ...]:
    """The fake entity head: every known value, as a whole word, at its offsets in ``text``."""
    return tuple(Entity(KNOWN[m.group()], m.start(), m.end(), 0.9)
                 for m in re.finditer(r"\b(" + "|".join(KNOWN) + r")\b", text))


def entity_infer(texts):
    return GraphOutputs(*FakeModel().infer(texts)[:3], tuple_array([entities_of(t) for t in texts]))


def slot_f1(examples) -> float:
    """Slot F1 in percent of the fake entity head on ``examples`` against their own spans."""
    gold = [{(s.start, s.end, s.label) for s in ex.spans} for ex in examples]
    return 100.0 * span_metrics(gold, [{(e.start, e.end, e.label) for e in entities_of(ex.text)}
                                       for ex in examples])["slot_f1"]


@pytest.fixture(scope="module")
def entity_report():
    return run_suite(ENTITY_ROWS, predictor(entity_infer), None, draws=2, seed=0, progress=False,
                     train=ENTITY_TRAIN)


def test_value_operators_score_slots_against_the_replaced_spans(entity_report):
    assert entity_report["metrics"] == ["accuracy", "slot_f1"]
    # Clean: jazz, kitchen and paris found, blues and rome missed: P 1, R 3/5.
    assert entity_report["clean"] == pytest.approx({"accuracy": 100.0, "slot_f1": 75.0})
    # Unseen entities (blues and rome are the only values no training row has):
    # jazz -> blues and paris -> rome; blues and rome have no unseen alternative.
    unseen = entity_report["operators"]["unseen_entities"]
    assert unseen["n"] == 2
    assert unseen["slot_f1"] == pytest.approx({"clean": 100.0, "perturbed": 50.0, "drop": 50.0})
    assert unseen["accuracy"] == {"clean": 100.0, "perturbed": 100.0, "drop": 0.0}
    # Swapping values among the test rows trades a known value for an unknown one as often as back.
    swapped = entity_report["operators"]["slot_value_replacement"]
    assert swapped["n"] == 4
    assert swapped["slot_f1"] == pytest.approx({"clean": 75.0, "perturbed": 75.0, "drop": 0.0})
    assert entity_report["entity_values"] == {"types": 3, "values": 5, "unseen_values": 2,
                                              "unseen_checked_against_training": True}


def test_every_set_scores_slots_of_its_own_variants(entity_report):
    values = EntityValues.build(ENTITY_ROWS, ENTITY_TRAIN)
    for name, entry in entity_report["operators"].items():
        pairs = [(out, ex) for ex in ENTITY_ROWS if (out := perturb(ex, name, 0, values)) is not None]
        assert entry["n"] == len(pairs), name
        if not any(ex.spans for _, ex in pairs):
            assert entry["slot_f1"] == {"clean": None, "perturbed": None, "drop": None}, name
            continue
        assert entry["slot_f1"]["clean"] == pytest.approx(slot_f1([ex for _, ex in pairs])), name
        assert entry["slot_f1"]["perturbed"] == pytest.approx(slot_f1([out for out, _ in pairs])), name
        if name not in VALUE_OPERATORS:  # the spans kept, moved: the gazetteer finds them where they went
            assert entry["slot_f1"]["drop"] == pytest.approx(0.0), name
    for draw in entity_report["random"]["draws"]:
        drawn = random_set(ENTITY_ROWS, draw["seed"], list(OPERATORS), values)
        assert draw["slot_f1"]["perturbed"] == pytest.approx(slot_f1(drawn))
    assert set(entity_report["random"]["slot_f1"]) == {"clean", "perturbed_mean", "perturbed_std", "drop_mean",
                                                      "drop_std"}
    assert set(entity_report["hard"]["slot_f1"]) == {"clean", "perturbed", "drop"}


def test_a_set_without_gold_spans_has_no_slot_score():
    outputs = infer_distinct(entity_infer, [ex.text for ex in ENTITY_ROWS], DECISION, progress=False)
    entry = compare(DECISION, outputs, ENTITY_ROWS, [4], [ENTITY_ROWS[4]], ["accuracy", "slot_f1"])
    assert entry["slot_f1"] == {"clean": None, "perturbed": None, "drop": None}
    assert entry["accuracy"]["clean"] == 100.0


def test_markdown_shows_slot_columns_only_for_an_entity_model(entity_report):
    lines = render_markdown(entity_report).splitlines()
    assert lines[1] == ("Entity values: 5 of 3 type(s), from these rows; unseen_entities draws from 2, none of "
                        "them an entity value of the training rows.")
    header = next(l for l in lines if l.startswith("| set |"))
    assert header.endswith("| slot_f1 clean | slot_f1 perturbed | slot_f1 drop |")
    assert "| unseen_entities | raddle | 2 | 100.00 | 100.00 | 0.00 | 100.00 | 50.00 | 50.00 |" in lines
    intent_only = run_suite(ENTITY_ROWS, predictor(FakeModel().infer), None, draws=1, progress=False)
    assert intent_only["metrics"] == ["accuracy"]
    assert "slot_f1" not in render_markdown(intent_only)
    assert "not checked against training data" in render_markdown(intent_only)
    # without training rows, the unseen values are the test rows' own
    assert intent_only["entity_values"]["unseen_values"] == 5


def test_data_without_spans_runs_the_operators_it_ran_before():
    plain = [row(ex.text, *ex.labels) for ex in EXAMPLES]
    report = run_suite(plain, predictor(entity_infer), None, draws=2, progress=False)
    assert list(report["operators"]) == [n for n in OPERATORS if n not in VALUE_OPERATORS]
    assert "entity_values" not in report and report["metrics"] == ["accuracy"]
    assert [d["accuracy"] for d in report["random"]["draws"]] == [
        compare(DECISION, infer_distinct(FakeModel().infer, [ex.text for ex in plain + drawn], DECISION,
                                         progress=False),
                plain, range(len(plain)), drawn, ["accuracy"])["accuracy"]
        for drawn in (random_set(plain, seed) for seed in (0, 1))]


# -- the CLI on a tiny bundle ---------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("robustness")
    rows = [
        row("play the new album by daft punk", DEFAULT_LABELS[0], spans=(Span(22, 31, "artist"),)),
        row("book a table for two people tonight", DEFAULT_LABELS[1]),
        row("will it rain tomorrow", DEFAULT_LABELS[2]),
        row("rate this book five stars", DEFAULT_LABELS[3]),
        row("hi there how are you"),
    ]
    bundle = make_tiny_bundle(root, spelling_texts=[ex.text for ex in rows])
    data = root / "test.jsonl"
    write_jsonl(data, rows)
    return root, bundle, data


def test_cli_on_a_bundle_writes_report_and_markdown(tiny, capsys):
    root, bundle, data = tiny
    out, md = root / "report.json", root / "report.md"
    args = ["robustness", "--bundle", str(bundle), "--data", str(data), "--out", str(out), "--md", str(md),
            "--operators", "raddle", "filler_end", "--draws", "2", "--seed", "3"]
    assert main(args) == 0
    report = json.loads(out.read_text())
    assert list(report["operators"]) == ["filler_end", *FAMILIES["raddle"]]
    assert report["metrics"] == ["accuracy", "oos_recall"]
    assert (report["n"], report["n_out_of_scope"], report["seed"], report["draws"]) == (5, 1, 3, 2)
    assert [d["seed"] for d in report["random"]["draws"]] == [3, 4]
    assert report["source"]["bundle"] == str(bundle)
    for entry in [*report["operators"].values(), report["hard"]]:
        assert set(entry["accuracy"]) == {"clean", "perturbed", "drop"}
    assert md.read_text() == capsys.readouterr().out

    # The clean score is the evaluate command's accuracy on the same bundle.
    assert main(["evaluate", "--bundle", str(bundle), "--data", str(data), "--out", str(root / "eval.json")]) == 0
    figures = json.loads((root / "eval.json").read_text())
    assert report["clean"]["accuracy"] == pytest.approx(100 * figures["accuracy"])
    assert report["clean"]["oos_recall"] == pytest.approx(100 * figures["oos_recall"])

    # Same arguments, same report.
    again = root / "again.json"
    assert main([*args[:6], str(again), *args[7:]]) == 0
    assert json.loads(again.read_text()) == report


def test_cli_measures_with_and_without_the_spelling_normaliser(tiny):
    root, bundle, data = tiny
    reports = {}
    for flags in ([], ["--no-spelling"]):
        out = root / f"typos{len(flags)}.json"
        assert main(["robustness", "--bundle", str(bundle), "--data", str(data), "--out", str(out),
                     "--operators", "typo_keyboard", "--draws", "1", *flags]) == 0
        reports[bool(flags)] = json.loads(out.read_text())
    assert reports[False]["source"]["spelling"] is True and reports[True]["source"]["spelling"] is False
    # The rows whose typos the normaliser restores read exactly as clean with it on
    # (the engine-level effect is tested in test_export).
    spelling = Spelling.load(bundle / "spelling.json")
    examples = read_jsonl(data)
    restored = [ex for ex in examples if spelling.normalise(perturb(ex, "typo_keyboard", 0).text) == ex.text]
    assert len(restored) >= 3
    subset = root / "restored.jsonl"
    write_jsonl(subset, restored)
    out = root / "restored.json"
    assert main(["robustness", "--bundle", str(bundle), "--data", str(subset), "--out", str(out),
                 "--operators", "typo_keyboard", "--draws", "1"]) == 0
    assert json.loads(out.read_text())["operators"]["typo_keyboard"]["accuracy"]["drop"] == 0


def test_cli_checks_unseen_values_against_the_training_file(tiny, capsys):
    root, bundle, data = tiny
    train = root / "train.jsonl"
    write_jsonl(train, [row("play songs by daft punk", DEFAULT_LABELS[0], spans=(Span(14, 23, "artist"),))])
    out = root / "unseen.json"
    # The test rows' one value, "daft punk", is a training value: nothing unseen to draw, so the chosen operator
    # is refused, as any chosen operator that cannot run is (it reported a drop of 0 on rows it never changed).
    assert main(["robustness", "--bundle", str(bundle), "--data", str(data), "--out", str(out), "--train", str(train),
                 "--operators", "unseen_entities", "--draws", "1"]) == 2
    assert "operator unseen_entities has no unseen value to draw: every entity value of the rows is a training " \
           "value" in capsys.readouterr().err
    assert not out.exists()


def test_cli_on_the_checkpoint_matches_the_bundle_shape(tiny):
    root, _, data = tiny
    out = root / "ckpt-report.json"
    assert main(["robustness", "--checkpoint", str(root / "checkpoint"), "--data", str(data), "--out", str(out),
                 "--operators", "casing", "--draws", "1"]) == 0
    report = json.loads(out.read_text())
    assert list(report["operators"]) == ["casing"] and report["operators"]["casing"]["n"] == 5


def test_cli_unknown_operator_fails_cleanly(tiny, capsys):
    root, bundle, data = tiny
    code = main(["robustness", "--bundle", str(bundle), "--data", str(data), "--out", str(root / "x.json"),
                 "--operators", "casng"])
    assert code == 2
    assert "unknown operator or family 'casng'" in capsys.readouterr().err
    assert not (root / "x.json").exists()


def test_core_imports_no_torch():
    code = "import sys, intentvcs.core.robustness; print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert proc.stdout.strip() == "[]"
