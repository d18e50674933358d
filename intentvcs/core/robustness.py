"""The robustness suite (docs/RESEARCH.md section 3): how far a model's score drops on perturbed input.

From one labelled test set and the operators of ``intentvcs.core.perturb``:

- **per operator**: the operator applied (seed ``seed``) to every utterance it
  applies to, protected spans kept; scored against the same rows clean.
- **Random** (NATURE): one random applicable operator per utterance
  (``perturb.random_set``) on every row, drawn ``draws`` times with seeds
  ``seed, seed + 1, ...``; the mean and the sample standard deviation over
  draws are reported (NATURE averages 10 draws; the CLI defaults to 5 to keep
  a CPU run short). A row no operator applies to stays clean. Draw 0 uses the
  per-operator seed, so it adds no text the per-operator sets lack.
- **Hard** (NATURE): per utterance its worst per-operator variant *for the
  model under test* (NATURE fixes one reference model; here each model meets
  its own worst case). Worst means a wrong variant before a right one, then
  the least firm: the lowest calibrated confidence among the gold labels (the
  weakest gold label) for an in-scope row, the lowest OOS score for an
  out-of-scope row. Right means what the score counts: ``evaluate``'s
  ``accuracy`` verdict (metric ``accuracy``: the top intent is gold; on a row
  of several gold labels, the accepted set is exactly them), the accepted set
  equals the gold set (metric ``f1``), judged out of scope (an out-of-scope
  row). Rows no operator applies to are left out.

Entities: the operators that replace entity values (``perturb.VALUE_OPERATORS``)
draw from ``perturb.EntityValues.build(examples, train)``: the values of the
test rows themselves and, for unseen entities, those no training row has
when training rows are given (``intentvcs robustness --train``). Without
training rows the unseen values are the test rows' own, unchecked, and the
report says so (``entity_values``). Data without spans leaves both operators
out of the default set and out of the Random set, so its scores are what they
were before these operators existed, and the report lists them under
``skipped`` with the reason; operators the user chose (by name or family) that
the data cannot feed are refused instead (``choose_operators``).

Scores come from ``intentvcs.core.evaluation.evaluate`` on the answers the service
gives: chained requests answered part by part (``intentvcs.core.segmentation``;
``segment=False`` decides each text whole, as ``INTENTVCS_SEGMENT=0`` serves; until
2026-11-27 the suite always did, and 34 of 3,925 perturbed validation texts of the
demo were scored on answers the service does not give). The primary metric is
``accuracy`` (``evaluate``'s, OOS verdict ignored) unless some gold row has
more than one label, then micro ``f1`` (with ``exact_match`` tracked too).
Out-of-scope rows (``labels == []``) never enter those in-scope scores; when
the data has any, ``oos_recall`` is tracked as well, so a perturbation that
makes junk look in scope shows. A model with an entity head on data with
spans adds ``slot_f1`` (CoNLL span level, in-scope rows), each perturbed row
scored against its own re-mapped spans; a set whose rows carry no span has
no slot score (None). Every score is a percentage, every drop is
``clean - perturbed`` in points (positive = worse) on the rows the set covers.

Every distinct text (clean, per-operator, random) is run through the model
once, in length-sorted chunks, and decided once (its chained parts read in one
more run); all sets are then scored from those answers.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from tqdm.auto import tqdm

from intentvcs.core.dataio import Example
from intentvcs.core.decision import Decision, DecisionResult
from intentvcs.core.evaluation import PRIMARY_METRICS, evaluate, gold_matrix, row_verdicts
from intentvcs.core.outputs import GraphOutputs
from intentvcs.core.perturb import FAMILIES, FAMILY_OF, OPERATORS, EntityValues, perturb, random_set, unusable
from intentvcs.core.perturb.registry import NO_ENTITY_VALUES
from intentvcs.core.predictor import Infer, Predictor, in_chunks
from intentvcs.core.segmentation import DEFAULT_SEGMENT, decide_segmented

SLOT_METRIC = "slot_f1"


def expand_operators(names: Sequence[str] | None) -> list[str]:
    """Operator names for ``names`` (operator or family names; None or empty: all), in registry order."""
    if not names:
        return list(OPERATORS)
    chosen: set[str] = set()
    for name in names:
        if name in FAMILIES:
            chosen.update(FAMILIES[name])
        elif name in OPERATORS:
            chosen.add(name)
        else:
            raise ValueError(f"unknown operator or family {name!r}; families: {sorted(FAMILIES)}, "
                             f"operators: {sorted(OPERATORS)}")
    return [name for name in OPERATORS if name in chosen]


# Why a value operator cannot run on the rows given when they have no entity values (``perturb.unusable``).
_NO_VALUES = "needs entity values, and no row of the data has a span"


def choose_operators(names: Sequence[str] | None, values: EntityValues | None) -> tuple[list[str], dict[str, str]]:
    """The operators to run for ``names`` (``expand_operators``) on rows with entity ``values``,
    and those left out, each with why (``{name: reason}``).

    The default set (``names`` None or empty, or naming every operator, as the CLI
    passes it) leaves out what cannot apply, and the report says so. Operators the user chose are
    refused (ValueError) instead: left out silently, a chosen set would report a
    drop on rows nothing perturbed (a Random set of no operator is the clean set).
    """
    chosen = expand_operators(names)
    left_out = unusable(chosen, values)
    runnable = [name for name in chosen if name not in left_out]
    skipped = {name: _NO_VALUES if why == NO_ENTITY_VALUES else why for name, why in left_out.items()}
    if skipped and names and set(chosen) != set(OPERATORS):
        raise ValueError("; ".join(f"operator {name} {why}: leave it out (the default set skips it)"
                                   for name, why in skipped.items()))
    return runnable, skipped


def tracked_metrics(examples: Sequence[Example], metric: str = "auto", entities: bool = False) -> list[str]:
    """The metrics to report, primary first (see the module docstring).

    ``metric`` ``"auto"`` picks ``"f1"`` when any gold row has more than one
    label and ``"accuracy"`` otherwise; ``"f1"`` brings ``"exact_match"``; data
    with out-of-scope rows adds ``"oos_recall"``; ``entities`` (the model has an
    entity head) and data with spans add ``"slot_f1"``.
    """
    if metric not in PRIMARY_METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose from {', '.join(PRIMARY_METRICS)}")
    if metric == "auto":
        metric = "f1" if any(len(ex.labels) > 1 for ex in examples) else "accuracy"
    metrics = [metric, "exact_match"] if metric == "f1" else [metric]
    if any(ex.is_out_of_scope for ex in examples):
        metrics.append("oos_recall")
    if entities and any(ex.spans for ex in examples):
        metrics.append(SLOT_METRIC)
    return metrics


# -- building the perturbed sets ---------------------------------------------------
@dataclass(frozen=True)
class PerturbedSets:
    """Perturbed examples of a test set; rows are indices into that set.

    Whole examples, not texts: a perturbed row is scored against its own spans,
    which the operator re-mapped (or, for a value operator, replaced).

    ``operators``       operator -> (rows int ``[n]``, variants) for the rows it applies to;
    ``random``          per draw, one example per row (the clean one where nothing applied);
    ``random_changed``  per draw, how many rows an operator changed.
    """

    operators: dict[str, tuple[np.ndarray, list[Example]]]
    random: list[list[Example]]
    random_changed: list[int]

    def texts(self) -> list[str]:
        """Every perturbed text, repeats included."""
        return ([ex.text for _, variants in self.operators.values() for ex in variants]
                + [ex.text for draw in self.random for ex in draw])


def _operator_set(examples: Sequence[Example], name: str, seed: int,
                  values: EntityValues | None) -> tuple[np.ndarray, list[Example]]:
    """``(rows, variants)`` of the examples operator ``name`` applies to."""
    rows, variants = [], []
    for row, example in enumerate(examples):
        out = perturb(example, name, seed, values)
        if out is not None:
            rows.append(row)
            variants.append(out)
    return np.array(rows, dtype=np.int64), variants


def build_sets(examples: Sequence[Example], operators: Sequence[str], draws: int, seed: int,
               progress: bool = True, values: EntityValues | None = None) -> PerturbedSets:
    """Perturb ``examples`` once per operator (seed ``seed``) and once per Random draw (seeds ``seed + d``);
    ``values`` feeds the value operators (without it they apply nowhere)."""
    per_operator, random_rows, changed = {}, [], []
    # disable=None when asked for progress: a bar on a terminal, quiet in logs and CI.
    with tqdm(total=len(operators) + draws, desc="perturb", unit="set", disable=None if progress else True) as bar:
        for name in operators:
            per_operator[name] = _operator_set(examples, name, seed, values)
            bar.update()
        for draw in range(draws):
            drawn = random_set(examples, seed + draw, operators, values)
            random_rows.append(drawn)
            changed.append(sum(ex.meta["perturbation"] is not None for ex in drawn))
            bar.update()
    return PerturbedSets(per_operator, random_rows, changed)


# -- running the model ---------------------------------------------------------------
@dataclass(frozen=True)
class DistinctOutputs:
    """The model's ``GraphOutputs`` on distinct texts and their answers (``result``), with ``row_of``
    text -> row."""

    outputs: GraphOutputs
    result: DecisionResult
    row_of: dict[str, int]

    def rows(self, texts: Sequence[str]) -> np.ndarray:
        return np.fromiter((self.row_of[t] for t in texts), dtype=np.int64, count=len(texts))

    def take(self, texts: Sequence[str]) -> tuple[GraphOutputs, DecisionResult]:
        """The outputs' and the answers' rows for ``texts``, in their order."""
        rows = self.rows(texts)
        result = self.result
        return self.outputs.rows(rows), DecisionResult(result.confidences[rows], result.accepted[rows],
                                                       result.out_of_scope[rows], result.oos_score[rows],
                                                       result.oos_rule, result.ranking[rows])


def infer_distinct(infer: Infer, texts: Sequence[str], decision: Decision, segment: bool = DEFAULT_SEGMENT,
                   progress: bool = True) -> DistinctOutputs:
    """Run every distinct text of ``texts`` through ``infer`` once and decide it as served
    (``decide_segmented``; ``texts`` must not be empty)."""
    distinct = sorted(set(texts), key=lambda t: (len(t), t))
    outputs, segmented = decide_segmented(decision, infer, distinct, segment,
                                          outputs=in_chunks(infer, distinct, "inference", progress))
    return DistinctOutputs(outputs, segmented.result, {t: i for i, t in enumerate(distinct)})


# -- scoring ---------------------------------------------------------------------------
def _score(decision: Decision, outputs: DistinctOutputs, examples: Sequence[Example],
           metrics: Sequence[str]) -> dict[str, float | None]:
    """Each metric in percent for the model's outputs on ``examples``' texts against their labels and spans.

    None where the rows give the metric no denominator (e.g. no in-scope row,
    or no gold span on an in-scope row: ``evaluate`` gives no slot figure then, which would call a set
    without entities 0 F1).
    """
    if not examples:
        return dict.fromkeys(metrics)
    graph, result = outputs.take([ex.text for ex in examples])
    figures = evaluate(decision, graph, examples, include_tables=False, result=result)
    return {m: 100.0 * figures[m] if m in figures else None for m in metrics}


def compare(decision: Decision, outputs: DistinctOutputs, examples: Sequence[Example], rows: Sequence[int],
            variants: Sequence[Example], metrics: Sequence[str]) -> dict:
    """``{"n", <metric>: {"clean", "perturbed", "drop"}}`` for ``variants``, the perturbed ``examples[rows]``."""
    subset = [examples[r] for r in rows]
    clean = _score(decision, outputs, subset, metrics)
    perturbed = _score(decision, outputs, variants, metrics)
    entry: dict = {"n": len(subset)}
    for m in metrics:
        drop = None if clean[m] is None or perturbed[m] is None else clean[m] - perturbed[m]
        entry[m] = {"clean": clean[m], "perturbed": perturbed[m], "drop": drop}
    return entry


def outcomes(decision: Decision, result: DecisionResult, gold: np.ndarray,
             metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Per row: ``right`` bool ``[N]`` and ``firmness`` float ``[N]`` (lower = closer to failing).

    ``result``: the rows' answers; ``gold`` is bool ``[N, L + E]``
    (``evaluation.gold_matrix``: the model's labels first). Definitions in the
    module docstring (Hard set).
    """
    n_known = len(decision.labels)
    in_scope = gold.any(axis=1)
    # The verdicts the reported score counts (evaluate's): by the arg-max column, a train-rule row judged out
    # of scope with its top intent gold was "wrong" here and right in the score, and a row of several gold
    # labels right on its top one alone, so the Hard set could keep a variant the score counts right.
    verdicts = row_verdicts(decision, result, gold)
    right = verdicts.intents_right if metric == "accuracy" else verdicts.set_right
    confidences = np.zeros(gold.shape)  # gold labels unknown to the model: confidence 0
    confidences[:, :n_known] = result.confidences
    weakest_gold = np.where(gold, confidences, np.inf).min(axis=1)
    return (np.where(in_scope, right, result.out_of_scope),
            np.where(in_scope, weakest_gold, result.oos_score))


def worst_candidates(rows: np.ndarray, right: np.ndarray, firmness: np.ndarray) -> np.ndarray:
    """Index of each distinct row's worst candidate, rows ascending.

    Candidate ``k`` is a variant of row ``rows[k]``; wrong beats right, then the
    lowest ``firmness``; ties go to the earliest candidate (lexsort is stable).
    """
    order = np.lexsort((firmness, right, rows))  # the last key sorts first
    _, first = np.unique(rows[order], return_index=True)
    return order[first]


def hard_set(decision: Decision, outputs: DistinctOutputs, examples: Sequence[Example], sets: PerturbedSets,
             metric: str) -> tuple[np.ndarray, list[Example], list[str]]:
    """The Hard set: ``(rows, variants, operator names)``, one worst variant per row with any
    (worst by the intent ``metric``; entities do not choose it)."""
    names = list(sets.operators)
    variants = [ex for n in names for ex in sets.operators[n][1]]
    if not variants:
        return np.zeros(0, dtype=np.int64), [], []
    rows = np.concatenate([sets.operators[n][0] for n in names])
    sources = [n for n in names for _ in sets.operators[n][1]]
    gold, _ = gold_matrix(examples, decision.labels)
    right, firmness = outcomes(decision, outputs.take([ex.text for ex in variants])[1], gold[rows], metric)
    chosen = worst_candidates(rows, right, firmness)
    return rows[chosen], [variants[k] for k in chosen], [sources[k] for k in chosen]


def _random_report(decision: Decision, outputs: DistinctOutputs, examples: Sequence[Example], sets: PerturbedSets,
                   metrics: Sequence[str], seed: int) -> dict:
    rows = range(len(examples))
    draws = [{"seed": seed + d, "changed": changed, **compare(decision, outputs, examples, rows, drawn, metrics)}
             for d, (drawn, changed) in enumerate(zip(sets.random, sets.random_changed))]
    report: dict = {"n": len(examples)}
    for m in metrics:
        if draws[0][m]["clean"] is None:
            report[m] = None
            continue
        perturbed = np.array([d[m]["perturbed"] for d in draws])
        drops = np.array([d[m]["drop"] for d in draws])
        ddof = 1 if len(draws) > 1 else 0  # sample std across draws; 0 for a single draw
        report[m] = {"clean": draws[0][m]["clean"],
                     "perturbed_mean": float(perturbed.mean()), "perturbed_std": float(perturbed.std(ddof=ddof)),
                     "drop_mean": float(drops.mean()), "drop_std": float(drops.std(ddof=ddof))}
    report["draws"] = draws
    return report


def _hard_report(decision: Decision, outputs: DistinctOutputs, examples: Sequence[Example], sets: PerturbedSets,
                 metrics: Sequence[str]) -> dict:
    rows, variants, sources = hard_set(decision, outputs, examples, sets, metrics[0])
    counts = Counter(sources)
    return {**compare(decision, outputs, examples, rows, variants, metrics),
            "worst_operator": {name: counts[name] for name in sets.operators if counts[name]}}


def check_draws(draws: int) -> None:
    """Refuse fewer than one Random draw (a Random figure of no draw); the CLI asks before the model loads."""
    if draws < 1:
        raise ValueError(f"draws must be >= 1, got {draws}")


def run_suite(examples: Sequence[Example], model: Predictor, operators: Sequence[str] | None,
              draws: int, seed: int = 0, metric: str = "auto", progress: bool = True,
              train: Sequence[Example] | None = None, segment: bool = DEFAULT_SEGMENT) -> dict:
    """Build every set, run the model once per distinct text and return the JSON-safe report.

    ``model`` is any ``Predictor`` (the bundle's ``Engine``, a checkpoint's
    ``TorchPredictor``), decided by its own ``decision``;
    ``operators`` operator or family names (None: all; the value operators
    only where the data has entity values, and chosen ones the data cannot feed
    are refused: ``choose_operators``); ``draws`` Random-set draws (>= 1);
    ``metric`` ``"auto"``, ``"accuracy"`` or ``"f1"``; ``train`` the training
    rows, whose entity values unseen entities avoid (module docstring);
    ``segment`` chained requests answered part by part, as served.
    Report keys: ``metric``, ``metrics`` (``slot_f1`` last when scored),
    ``n``, ``n_out_of_scope``, ``seed``, ``draws``, ``distinct_texts``,
    ``clean``, ``operators`` (name ->
    ``{"family", "n", <metric>: {"clean", "perturbed", "drop"}}``), ``random``
    (``{"n", <metric>: {"clean", "perturbed_mean", "perturbed_std",
    "drop_mean", "drop_std"}, "draws": [...]}``), ``hard`` (like an operator,
    plus ``worst_operator`` counts), for data with spans ``entity_values``
    (``EntityValues.summary``), and when the default set left operators out
    ``skipped`` (name -> why).
    """
    if not examples:
        raise ValueError("no examples to perturb")
    check_draws(draws)
    values = EntityValues.build(examples, train)
    operators, skipped = choose_operators(operators, values)
    tracked_metrics(examples, metric)  # a bad metric fails before the model runs
    sets = build_sets(examples, operators, draws, seed, progress, values)
    outputs = infer_distinct(model.infer, [ex.text for ex in examples] + sets.texts(), model.decision, segment,
                             progress)
    metrics = tracked_metrics(examples, metric, entities=outputs.outputs.entities is not None)
    decision = model.decision
    report = {
        "metric": metrics[0],
        "metrics": metrics,
        "n": len(examples),
        "n_out_of_scope": sum(ex.is_out_of_scope for ex in examples),
        "seed": seed,
        "draws": draws,
        "segment": segment,
        "distinct_texts": len(outputs.row_of),
        "clean": _score(decision, outputs, examples, metrics),
        "operators": {name: {"family": FAMILY_OF[name], **compare(decision, outputs, examples, rows, variants, metrics)}
                      for name, (rows, variants) in sets.operators.items()},
        "random": _random_report(decision, outputs, examples, sets, metrics, seed),
        "hard": _hard_report(decision, outputs, examples, sets, metrics),
    }
    if values:
        report["entity_values"] = values.summary()
    if skipped:
        report["skipped"] = skipped
    return report


# -- Markdown ------------------------------------------------------------------------------
def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _plain(entry: dict) -> list[str]:
    return [_fmt(entry["clean"]), _fmt(entry["perturbed"]), _fmt(entry["drop"])]


def _spread(entry: dict) -> list[str]:
    return [_fmt(entry["clean"]), f"{_fmt(entry['perturbed_mean'])} ± {_fmt(entry['perturbed_std'])}",
            f"{_fmt(entry['drop_mean'])} ± {_fmt(entry['drop_std'])}"]


def _values_note(summary: dict) -> str:
    """Where the value operators' values came from, so an unseen_entities score is read for what it is."""
    unseen = ("none of them an entity value of the training rows" if summary["unseen_checked_against_training"]
              else "not checked against training data (none was given)")
    return (f"Entity values: {summary['values']} of {summary['types']} type(s), from these rows; "
            f"unseen_entities draws from {summary['unseen_values']}, {unseen}.")


def _skipped_note(skipped: dict[str, str]) -> str:
    """The operators the default set left out, grouped by why."""
    by_reason: dict[str, list[str]] = {}
    for name, why in skipped.items():
        by_reason.setdefault(why, []).append(name)
    return " ".join(f"Skipped: {', '.join(names)} ({'each ' if len(names) > 1 else ''}{why})."
                    for why, names in by_reason.items())


def render_markdown(report: dict) -> str:
    """The report as a Markdown table: one row per operator, then Random and Hard."""
    metrics = report["metrics"]

    def row(name: str, family: str, entry: dict, cells: Callable[[dict], list[str]]) -> str:
        values = [c for m in metrics for c in (cells(entry[m]) if entry[m] is not None else ["–"] * 3)]
        return f"| {name} | {family} | {entry['n']} | " + " | ".join(values) + " |"

    lines = [
        f"Scores in %; drop = clean − perturbed, in points, on the rows each set covers. Primary metric: "
        f"{report['metric']}. Random: mean ± std over {report['draws']} draw(s) from seed {report['seed']}. "
        f"Hard: each utterance's worst operator for this model.",
        *([_values_note(report["entity_values"])] if "entity_values" in report else []),
        *([_skipped_note(report["skipped"])] if report.get("skipped") else []),
        "",
        "| set | family | n | " + " | ".join(f"{m} clean | {m} perturbed | {m} drop" for m in metrics) + " |",
        "|---|---|---|" + "---|" * (3 * len(metrics)),
        *(row(name, e["family"], e, _plain) for name, e in report["operators"].items()),
        row("**Random**", "–", report["random"], _spread),
        row("**Hard**", "–", report["hard"], _plain),
    ]
    return "\n".join(lines) + "\n"
