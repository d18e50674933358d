"""Parity between PyTorch and the exported graph: the gate every bundle passes.

The export runs the checkpoint in PyTorch (``intentvcs.training.predict.infer``) and the
new graph through the serving session (``intentvcs.service.onnx_session.OnnxSession``: the
bundle's tokenizer.json, per-chunk padding, ORT session settings) on held-out
utterances, then requires

- fp32 logits, and the pooled embeddings (``pooled``, ``pooled_mid``: the
  distance OOS rule's score and the audit read them), within ``PARITY_ATOL``
  (max abs) of PyTorch's, and
- identical entity sets (type and offsets), their confidences within
  ``PARITY_ATOL``, for a graph with an entity head,
  identical request starts for one with a boundary head, and
- identical accepted label sets and identical OOS verdicts after
  ``Decision.apply``: a logit gap below the tolerance can still cross a
  threshold, and what users see is the decision, not the logits. The one
  exception is a tie: an utterance whose reference score lies within
  ``TIE_RTOL`` of a cut (relative to the cut, at least absolute) may fall
  either side of it; no float reimplementation avoids that (checkpoints fitted
  before the retention and quantile cuts moved halfway to the next row have a
  cut exactly on one validation utterance's score). Ties are counted and
  reported; every other flip fails the gate.

The held-out utterances are the ``--parity-data`` rows (else the built-in
sample). Every export also runs the *probes* (``probe_texts``): the built-in
sample's texts that the rows lack and one text longer than the checkpoint's
``max_length``, with the same requirements, reported apart (``probes``): a
team's held-out rows are short, and a graph or tokenizer.json that reads a
long text otherwise (truncation on the other side, a sequence axis fixed at
the traced length) would pass on them alone.

Optimum's own validation is not relied on: it only warns on tolerance
failures, and it feeds random ids rather than real tokenised text.
Pure numpy here; the caller runs the models.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, NamedTuple, Sequence

import numpy as np

from intentvcs.core.dataio import Example
from intentvcs.core.team_formats import check_scored_rows, out_of_scope_as_such, read_numbered
from intentvcs.core.decision import Decision
from intentvcs.core.evaluation import check_known_labels
from intentvcs.core.outputs import GraphOutputs

PARITY_ATOL = 1e-4
# float32 rounding of a score near its cut, relative to the cut's size (see the docstring).
TIE_RTOL = 1e-5
MAX_REPORTED_MISMATCHES = 5
# The parity probes' long text (``overflow_text``): this many tokens past max_length at least, made of at
# most this many sentences of the sample.
OVERFLOW_TOKENS = 8
OVERFLOW_SENTENCES = 10_000

# Built-in held-out utterances when no --parity-data is given, and probes when
# one is (``probe_texts``): assistant requests across domains, chit-chat and
# out-of-scope lines, fillers, case and punctuation, non-ASCII text, an empty
# string and one long text (170 tokens of the default backbone: longer than the usual
# max_length, not than every one; ``overflow_text`` makes one that is).
SAMPLE_UTTERANCES = (
    "play the new album by daft punk",
    "add this song to my workout playlist",
    "put on some relaxing jazz in the living room",
    "book a table for two at an italian place tonight",
    "reserve a restaurant near the station for 8 people on friday",
    "will it rain tomorrow in paris",
    "what's the weather like this weekend?",
    "is it going to snow in Denver on Christmas Day",
    "rate this book four out of five stars",
    "give the current novel a 2",
    "find the movie schedule for the nearest cinema",
    "when is Dune showing at the IMAX",
    "search for the creative work called the lord of the rings",
    "set an alarm for 7 am",
    "wake me up at 6:45 tomorrow",
    "cancel my timer",
    "how do I transfer money to my savings account",
    "what's my account balance",
    "pay the electricity bill",
    "order a large pepperoni pizza",
    "i need a taxi to the airport and a hotel downtown",
    "find a cheap train from london to manchester",
    "turn off the lights in the kitchen please",
    "call mom",
    "text Sam that I'm running late",
    "hi there",
    "thanks, that's all",
    "um so like i was wondering if you could maybe play some jazz or something",
    "uh, actually, basically just book the flight, sorry, I mean the hotel",
    "WHAT IS THE CAPITAL OF AUSTRALIA",
    "tell me a joke about penguins",
    "how many calories are in an avocado",
    "Réserve une table pour deux ce soir, s'il vous plaît",
    "spiel bitte musik von Beyoncé",
    "東京の天気はどうですか",
    "play 🎵 something upbeat 🎉",
    "???",
    "",
    "ok",
    " ".join(["please play the song that goes like na na na and then the chorus"] * 12),
)


class ParityError(RuntimeError):
    """The exported graph does not reproduce PyTorch; ``report`` has the figures."""

    def __init__(self, report: dict[str, Any]):
        self.report = report
        probes = report.get("probes")
        super().__init__(
            f"parity failed on {report['utterances']} utterances ({report['source']}): {_figures(report)}"
            + ("" if probes is None or probes["passed"] else
               f"; on the {probes['utterances']} probe texts (the built-in sample's, one of "
               f"{probes.get('longest_tokens', '?')} tokens for max_length {probes.get('max_length', '?')}): "
               f"{_figures(probes)}"))


def _figures(report: dict[str, Any]) -> str:
    """The gated figures of a ``compare`` report, in words."""
    return (f"max |logit diff| {report['max_abs_logit_diff']:.3g} (limit {report['atol']:g}), "
            f"max |pooled diff| {report['max_abs_pooled_diff']:.3g}, "
            f"max |pooled_mid diff| {report['max_abs_pooled_mid_diff']:.3g}, "
            f"label sets differ on {report['label_set_mismatches']}, "
            f"OOS verdicts differ on {report['oos_mismatches']}, "
            f"entity sets differ on {report.get('entity_mismatches', 0)}"
            # Only a graph with an entity head has entity confidences to compare.
            + (f", max |entity confidence diff| {report['max_entity_confidence_diff']:.3g}"
               if "max_entity_confidence_diff" in report else "")
            # Only a graph with a boundary head has request starts to compare.
            + (f", request starts differ on {report['start_mismatches']}" if "start_mismatches" in report else ""))


class HeldOut(NamedTuple):
    """The utterances parity runs on; ``examples`` are their labelled rows (the int8 gate's
    data), None for the built-in sample, which has no labels."""

    texts: list[str]
    source: str
    examples: list[Example] | None
    lines: list[int] | None = None  # each row's line in ``source`` (a Rasa example's own), None for the sample


def probe_texts(held_out: Sequence[str], count_tokens: Callable[[str], int], max_length: int) -> list[str]:
    """The texts parity runs besides the held-out ones: the built-in sample's that ``held_out`` lacks (an
    empty text, one word, non-ASCII, ...), then ``overflow_text`` (unless ``held_out`` has it)."""
    have = set(held_out)
    probes = [text for text in SAMPLE_UTTERANCES if text not in have]
    overflow = overflow_text(count_tokens, max_length)
    return probes + ([overflow] if overflow not in have and overflow not in probes else [])


def overflow_text(count_tokens: Callable[[str], int], max_length: int) -> str:
    """A text of more than ``max_length`` + ``OVERFLOW_TOKENS`` tokens (``count_tokens``: the tokens of a text,
    special ones included, untruncated): the sample's English sentences one after another, varied so that its
    first and last ``max_length`` tokens differ (truncation on the wrong side is seen)."""
    sentences = [text for text in SAMPLE_UTTERANCES if text.isascii() and len(text.split()) > 2
                 and len(text) < 200]
    parts: list[str] = []
    for step in range(OVERFLOW_SENTENCES):
        parts.append(sentences[step % len(sentences)])
        text = ", ".join(parts)
        if count_tokens(text) > max_length + OVERFLOW_TOKENS:
            return text
    raise ValueError(f"cannot make a text longer than max_length {max_length} for the parity probes: "
                     f"{OVERFLOW_SENTENCES} sentences make {count_tokens(text)} tokens")


def held_out_rows(path: str | os.PathLike | None, labels: Sequence[str] | None = None,
                  entity_types: Iterable[str] = (), oos_rule: str | None = None) -> HeldOut:
    """The rows of a data file (JSONL, Rasa YAML or CSV), or the built-in sample.

    Given the model's ``labels`` and the ``entity_types`` its graph tags, the rows are checked against them
    before any heavy work, as ``intentvcs evaluate`` checks its data (the int8 gate scores them): rows of which
    no in-scope one carries a label of the model's are refused (``check_known_labels``: every in-scope row
    would count as missed by both graphs, and a gate of figures that read 0 for both would pass), a label
    the model lacks is named and a span type it cannot tag is refused (``check_scored_rows``). Rows labelled
    "oos" alone are out-of-scope rows, as evaluate reads them (``out_of_scope_as_such``; ``oos_rule``, the
    model's rule's name, only sets how loudly that is said).
    """
    if path is None:
        return HeldOut(list(SAMPLE_UTTERANCES), "built-in sample", None)
    rows = out_of_scope_as_such(path, read_numbered(path), oos_rule or "none")
    if not rows:
        raise ValueError(f"{path}: no utterances for the parity check")
    examples = [example for _, example in rows]
    if labels is not None:
        check_known_labels(str(path), examples, list(labels))
        check_scored_rows(path, rows, labels, entity_types)
    return HeldOut([example.text for example in examples], str(path), examples, [line for line, _ in rows])


def compare(reference: GraphOutputs, candidate: GraphOutputs, decision: Decision,
            texts: Sequence[str]) -> dict[str, Any]:
    """Agreement of ``candidate`` outputs with ``reference`` on (non-empty) ``texts``.

    Raw gaps (max abs logit, pooled, pooled_mid and calibrated-confidence differences) and
    decision agreement (rows with the same accepted label set, the same OOS
    verdict, the same top label), with a few mismatching texts for diagnosis.
    """
    ref, cand = decision.apply(*reference.scores), decision.apply(*candidate.scores)
    same_sets = np.all(ref.accepted == cand.accepted, axis=1)
    same_oos = ref.out_of_scope == cand.out_of_scope
    # Ties: flips whose reference score lies within TIE_RTOL of the cut.
    at_cut = np.abs(ref.confidences - decision.thresholds) <= TIE_RTOL
    cut = getattr(decision.oos, "threshold", None)
    oos_ties = (np.abs(ref.oos_score - cut) <= TIE_RTOL * max(1.0, abs(cut)) if cut is not None
                else np.zeros(len(texts), bool))
    # A row's label set may differ through a tied label (relation closure
    # carries its parents along) or through a tied OOS verdict (which empties it).
    label_ties = (np.any((ref.accepted != cand.accepted) & at_cut, axis=1) | (oos_ties & ~same_oos)
                  | _choice_ties(ref.confidences, ref.accepted != cand.accepted))
    labels = decision.labels
    mismatched = [
        {"text": texts[i],
         "reference": {"accepted": [labels[j] for j in np.flatnonzero(ref.accepted[i])],
                       "out_of_scope": bool(ref.out_of_scope[i])},
         "candidate": {"accepted": [labels[j] for j in np.flatnonzero(cand.accepted[i])],
                       "out_of_scope": bool(cand.out_of_scope[i])}}
        for i in np.flatnonzero(~(same_sets & same_oos))[:MAX_REPORTED_MISMATCHES]
    ]

    def gap(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.abs(a.astype(np.float64) - b).max(initial=0.0))

    return {
        "utterances": len(texts),
        **_entity_agreement(reference._replace(entities=decision.kept_entities(reference.entities)),
                            candidate._replace(entities=decision.kept_entities(candidate.entities)), texts),
        **_start_agreement(reference, candidate, texts),
        "max_abs_logit_diff": gap(reference.logits, candidate.logits),
        "max_abs_pooled_diff": gap(reference.pooled, candidate.pooled),
        "max_abs_pooled_mid_diff": gap(reference.pooled_mid, candidate.pooled_mid),
        "max_confidence_diff": gap(ref.confidences, cand.confidences),
        "label_set_agreement": float(same_sets.mean()),
        "oos_agreement": float(same_oos.mean()),
        "top1_agreement": float(np.mean(ref.confidences.argmax(1) == cand.confidences.argmax(1))),
        "label_set_mismatches": int((~same_sets & ~label_ties).sum()),
        "oos_mismatches": int((~same_oos & ~oos_ties).sum()),
        "ties_at_threshold": int(((~same_sets & label_ties) | (~same_oos & oos_ties)).sum()),
        "mismatched": mismatched,
    }


def _choice_ties(confidences: np.ndarray, differing: np.ndarray) -> np.ndarray:
    """Rows whose label sets differ on a label the decision picked by comparing confidences (the top
    intent an empty in-scope row falls back to, a cover's most confident child) whose reference
    confidence is within ``TIE_RTOL`` of another label's: float32 rounding may swap the pick."""
    ties = np.zeros(len(confidences), dtype=bool)
    for row in np.flatnonzero(differing.any(axis=1)):
        values = confidences[row]
        gaps = np.abs(values[differing[row]][:, None] - values[None, :])
        gaps[np.arange(gaps.shape[0]), np.flatnonzero(differing[row])] = np.inf  # a label against itself
        ties[row] = bool((gaps <= TIE_RTOL * max(float(values.max()), 1e-12)).any())
    return ties


def _entity_agreement(reference: GraphOutputs, candidate: GraphOutputs, texts: Sequence[str]) -> dict[str, Any]:
    """For graphs with an entity head: rows with the same entity set (types and offsets), a few that differ,
    and the largest confidence gap between entities both found; nothing for intent-only graphs. ``compare``
    passes the entities the decision answers (``Decision.kept_entities``: its entity floor applied)."""
    if reference.entities is None:
        return {}
    same, differing, confidence_gap = 0, [], 0.0
    for text, ref, cand in zip(texts, reference.entities, candidate.entities):
        ref_spans = {(e.label, e.start, e.end): e.confidence for e in ref}
        cand_spans = {(e.label, e.start, e.end): e.confidence for e in cand}
        if ref_spans.keys() == cand_spans.keys():
            same += 1
            confidence_gap = max([confidence_gap, *(abs(ref_spans[k] - cand_spans[k]) for k in ref_spans)])
        elif len(differing) < MAX_REPORTED_MISMATCHES:
            differing.append({"text": text, "reference": [e.to_dict(text) for e in ref],
                              "candidate": [e.to_dict(text) for e in cand]})
    return {"entity_set_agreement": same / max(len(texts), 1), "entity_mismatches": len(texts) - same,
            "max_entity_confidence_diff": confidence_gap, "entity_mismatched": differing}


def _start_agreement(reference: GraphOutputs, candidate: GraphOutputs, texts: Sequence[str]) -> dict[str, Any]:
    """For graphs with a boundary head: rows with the same request starts, and a few that differ; nothing
    for graphs without one."""
    if reference.starts is None:
        return {}
    differing = [i for i, (ref, cand) in enumerate(zip(reference.starts, candidate.starts)) if ref != cand]
    return {"start_mismatches": len(differing),
            "start_mismatched": [{"text": texts[i], "reference": list(reference.starts[i]),
                                  "candidate": list(candidate.starts[i])} for i in differing[:MAX_REPORTED_MISMATCHES]]}


def check_parity(reference: GraphOutputs, onnx: GraphOutputs,
                 decision: Decision, texts: Sequence[str], source: str, atol: float = PARITY_ATOL,
                 probes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The parity report of ONNX outputs against PyTorch's; raises ``ParityError`` unless it passes.

    ``probes``: the ``compare`` report of the two on the probe texts (``probe_texts``), held to the same
    requirements and kept under ``probes`` (with its own ``passed``); the report passes only when they do too.
    """
    report = {"source": source, "atol": atol, **compare(reference, onnx, decision, texts)}
    if probes is not None:
        report["probes"] = {**probes, "atol": atol, "passed": _passes(probes, atol)}
    report["passed"] = _passes(report, atol) and (probes is None or report["probes"]["passed"])
    if not report["passed"]:
        raise ParityError(report)
    return report


def _passes(report: dict[str, Any], atol: float) -> bool:
    """Whether a ``compare`` report meets the gate: every raw gap within ``atol`` (the confidence of the entities
    both found among them: answered, and cut by the entity floor, though an entity set survives far larger
    tag-logit drift), no decision, entity set or request start differing (ties aside)."""
    gaps = [report[key] for key in ("max_abs_logit_diff", "max_abs_pooled_diff", "max_abs_pooled_mid_diff")]
    return (all(gap <= atol for gap in gaps + [report.get("max_entity_confidence_diff", 0.0)])
            and report.get("entity_mismatches", 0) == 0 and report.get("start_mismatches", 0) == 0
            and report["label_set_mismatches"] == 0 and report["oos_mismatches"] == 0)
