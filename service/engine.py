"""The serving engine: a bundle run with ONNX Runtime, no torch anywhere.

Imports only onnxruntime, tokenizers, numpy and the torch-free ``intentvcs``
core (the test suite proves it with torch, transformers and optimum made
unimportable). The decision layer is the same ``intentvcs.core.decision.Decision``
that evaluation applies after PyTorch, so served answers match the figures.
Session settings and batching are ``intentvcs.service.onnx_session``'s.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Sequence

import numpy as np

from intentvcs.core.dataio import Example, check_unicode
from intentvcs.core.decision import Decision
from intentvcs.core.entities import entity_types, whole_words
from intentvcs.core.manifest import INT8_MODEL_FILE, BundleError
from intentvcs.core.outputs import GraphOutputs
from intentvcs.core.segmentation import SegmentedResult, decide_segmented
from intentvcs.core.spelling import Spelling, infer_normalised
from intentvcs.service.bundle import check_graph, on_cpu, open_bundle
from intentvcs.service.onnx_session import EngineError, OnnxSession, default_threads, uses_cuda
from intentvcs.service.settings import DEFAULT_MAX_BATCH, DEFAULT_QUANTIZED, DEFAULT_SEGMENT

__all__ = ["BundleError", "Engine", "EngineError", "default_threads", "read_as_served"]

log = logging.getLogger(__name__)


class Engine:
    """Serve one bundle: ``infer`` gives raw arrays, ``predict`` the decided answers.

    An ``intentvcs.core.predictor.Predictor`` (``labels``, ``decision``, ``info``,
    ``infer``), so evaluation, robustness and the audit run on it as on a checkpoint.

    ``bundle_dir``  a bundle written by ``intentvcs export``.
    ``provider``    ``"auto"`` (CUDA, else CPU), ``"cpu"`` or ``"cuda"``.
    ``threads``     intra-op threads; default ``default_threads()``.
    ``quantized``   which graph: ``"auto"`` (int8 when its export passed the accuracy gate),
                    ``"on"`` (int8), ``"off"`` (fp32); ``intentvcs.service.bundle.serving_graph``.
    ``max_batch``   texts per graph run; a request is split into chunks of this size.
    ``spelling``    run texts through the bundle's spelling normaliser (when it has
                    one) before the graph, as training's evaluation did.
    ``segment``     answer chained requests ("X and Y") with every request's intents
                    (``intentvcs.core.segmentation``); False decides each text whole.
    Raises ``BundleError`` for a missing, corrupt or incompatible bundle and
    ``EngineError`` when the requested provider cannot be used.
    """

    def __init__(self, bundle_dir: str | os.PathLike, provider: str = "auto", threads: int | None = None,
                 quantized: str = DEFAULT_QUANTIZED, max_batch: int = DEFAULT_MAX_BATCH, spin: bool = True,
                 spelling: bool = True, segment: bool = DEFAULT_SEGMENT):
        self.segment = segment
        self.bundle = open_bundle(bundle_dir, quantized=quantized, gpu=uses_cuda(provider))
        self.spelling = self.bundle.spelling if spelling else None
        self.session = OnnxSession(self.bundle.model_path, self.bundle.tokenizer, provider, threads, max_batch, spin,
                                   tags=self.bundle.tags)
        fallback = self.session.cuda_fallback
        if fallback is not None:
            # CUDA offered but not started (the session logged it as an error): serve as on a CPU, with the
            # CPU's graph (int8 where its gate passed) and session settings (its disabled fusions), not with
            # the fp32 graph picked for CUDA, whose reason ("fp32 on CUDA") /status and the log then gave.
            self.bundle = on_cpu(self.bundle, quantized)
            self.session = OnnxSession(self.bundle.model_path, self.bundle.tokenizer, "cpu", threads, max_batch,
                                       spin, tags=self.bundle.tags)
            self.session.cuda_fallback = fallback  # still reported: /status, intentvcs_model_info
        check_graph(self.bundle, self.session.output_widths)
        self.quantized = self.bundle.model_path.name == INT8_MODEL_FILE
        log.info("engine: serving %s (%s: %s) with %d labels on %s", self.bundle.directory,
                 self.bundle.model_path.name, self.bundle.graph_reason, len(self.labels), self.session.provider)

    @property
    def labels(self) -> list[str]:
        return self.bundle.labels

    @property
    def decision(self) -> Decision:
        """The bundle's decision layer (calibration, thresholds, OOS rule, relations)."""
        return self.bundle.decision

    @property
    def entity_types(self) -> list[str]:
        """The entity types answers can carry ([] for an intent-only bundle)."""
        return entity_types(self.bundle.tags)

    @property
    def provider(self) -> str:
        """The active ONNX Runtime execution provider."""
        return self.session.provider

    @property
    def info(self) -> dict[str, Any]:
        """What is being served, for health endpoints and logs."""
        manifest = self.bundle.manifest
        return {
            # The name people use, and the content hash that tells two bundles apart (never the
            # server's folder, which is nobody's business).
            "name": manifest["name"],
            "bundle_digest": manifest["digest"],
            "bundle_version": manifest["format_version"],
            "created_at": manifest["created_at"],
            "backbone": manifest["backbone"],
            "data_fingerprint": manifest["data_fingerprint"],
            "model_file": self.bundle.model_path.name,
            "quantized": self.quantized,
            "graph_reason": self.bundle.graph_reason,
            "provider": self.session.provider,
            "cuda_fallback": self.session.cuda_fallback,
            "threads": self.session.threads,
            "max_batch": self.session.max_batch,
            "max_length": manifest["max_length"],
            "labels": len(self.labels),
            "entity_types": len(self.entity_types),
            "hidden_size": self.session.output_widths["pooled"],
            "oos_rule": self.decision.oos.name,
            "support_noise": self.decision.support_noise,  # None: labels accepted by their thresholds
            # Labels support decoding reads as the names of one intent (None: each label its own).
            "support_intents": (None if self.decision.support_intents is None
                                else [list(group) for group in self.decision.support_intents]),
            # The confidence under which a decoded entity is not answered (None: no entity head).
            "entity_floor": self.decision.entity_floor if self.entity_types else None,
            "segment": self.segment,
            "request_boundaries": self.session.boundaries,
            "spelling_words": len(self.spelling) if self.spelling is not None else None,
        }

    def reference_rows(self) -> list[Example] | None:
        """The bundle's sample of the training rows, for the audit; None when it carries none."""
        return self.bundle.reference_rows()

    def infer(self, texts: Sequence[str]) -> GraphOutputs:
        """Raw outputs (float32: logits, pooled, pooled_mid; entities at offsets into ``texts``), rows in input
        order."""
        return self._infer(_check_texts(texts))[0]

    def predict(self, texts: Sequence[str], top_k: int | None = None) -> list[dict[str, Any]]:
        """Decided answers, one dict per text (schema in docs/ARCHITECTURE.md).

        ``intents`` ranks every label by calibrated confidence (the best
        ``top_k`` when given); ``accepted`` lists the accepted labels after
        relation closure, most confident first; ``parts`` says where each
        accepted intent sits: the requests of a chained text ("X and Y"),
        else one part spanning the text (``intentvcs.core.segmentation``),
        a request the OOS rule rejects being a part out of scope, with no intent;
        ``oos`` gives the rule, this text's score and the rule's threshold
        (OOS when score > threshold); ``normalised`` is the text the graph
        read when the spelling normaliser rewrote it, else None; ``entities``
        (``[]`` for an intent-only bundle) gives ``{entity, value, start, end,
        confidence}`` with offsets into the text as sent, also where the
        normaliser rewrote it.
        """
        if top_k is not None and top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        texts = _check_texts(texts)
        outputs, read, segmented = read_as_served(self.session, self.spelling, self.decision, texts, self.segment)
        result = segmented.result
        # By the decision's ranking (the confidences' order, their ties at 1 broken by p / c), stable: exact
        # ties keep label order.
        ranking = np.argsort(-result.ranking, axis=1, kind="stable")
        labels = self.labels
        threshold = self.decision.oos.threshold
        answers = []
        for i, (text, model_text) in enumerate(zip(texts, read)):
            order = ranking[i]
            answers.append({
                "text": text,
                # What the graph read, when the spelling normaliser changed it:
                # lets a caller see why "lyft" was read as "left".
                "normalised": model_text if model_text != text else None,
                "intents": [{"intent": labels[j], "confidence": float(result.confidences[i, j])}
                            for j in order[:top_k]],
                "accepted": [labels[j] for j in order if result.accepted[i, j]],
                "parts": [part.to_dict(text, labels) for part in segmented.parts[i]],
                "entities": [] if outputs.entities is None else [e.to_dict(text) for e in outputs.entities[i]],
                "out_of_scope": bool(result.out_of_scope[i]),
                "oos": {"rule": result.oos_rule, "score": float(result.oos_score[i]), "threshold": threshold},
            })
        return answers

    def _infer(self, texts: list[str]) -> tuple[GraphOutputs, list[str]]:
        return read_normalised(self.session, self.spelling, texts)


def read_normalised(session: OnnxSession, spelling: Spelling | None,
                    texts: list[str]) -> tuple[GraphOutputs, list[str]]:
    """The graph's outputs for ``texts`` read through the spelling normaliser (None: as sent), and the texts it
    read (answers keep the originals, entity offsets included, each entity over whole words: ``on_whole_words``)."""
    outputs, read = infer_normalised(spelling, texts, session.infer, tags=bool(session.tags))
    return on_whole_words(session, outputs, texts, read), read


def on_whole_words(session: OnnxSession, outputs: GraphOutputs, texts: Sequence[str],
                   read: Sequence[str] | None = None) -> GraphOutputs:
    """``outputs`` with each entity (offsets into ``texts``) over the whole words of its text as sent
    (``intentvcs.core.entities.whole_words``): a word cut by ``max_length`` and a word's final combining
    marks included. Only the texts with entities that ``max_length`` may have cut are tokenised again,
    untruncated (about 0.2 ms per long text); the others' words are those the graph read. ``read``: the texts
    the graph read (the spelling normaliser's, which a correction can lengthen), when not ``texts``."""
    if outputs.entities is None:
        return outputs
    rows = [row for row, found in enumerate(outputs.entities) if found]
    if not rows:
        return outputs
    may_be_cut = session.tokenizer.may_be_cut
    cut = [row for row in rows
           if may_be_cut(texts[row]) or (read is not None and read[row] != texts[row] and may_be_cut(read[row]))]
    untruncated = dict(zip(cut, session.tokenizer.words([texts[row] for row in cut])))
    entities = outputs.entities.copy()
    for row in rows:
        entities[row] = whole_words(entities[row], texts[row], untruncated.get(row, ()))
    return outputs._replace(entities=entities)


def read_as_served(session: OnnxSession, spelling: Spelling | None, decision: Decision, texts: list[str],
                   segment: bool = DEFAULT_SEGMENT,
                   outputs: GraphOutputs | None = None) -> tuple[GraphOutputs, list[str], SegmentedResult]:
    """How the service reads and decides ``texts`` with ``session``'s graph: through the spelling normaliser
    (``read_normalised``), a chained request part by part (``segment``). Returns the texts' outputs, the
    texts the graph read and the decision. ``Engine.predict``'s reading, and the one the export's int8 gate
    scores both graphs by, so that the gate judges the answers served. ``outputs``: the graph's outputs for
    ``texts`` as sent, when the caller has them; reused where there is no normaliser to read them again."""
    if outputs is not None and spelling is None:
        read = list(texts)
        outputs = on_whole_words(session, outputs, texts)
    else:
        outputs, read = read_normalised(session, spelling, texts)
    outputs, segmented = decide_segmented(decision, lambda batch: read_normalised(session, spelling, batch)[0],
                                          texts, segment, outputs=outputs)
    return outputs, read, segmented


def _check_texts(texts: Sequence[str]) -> list[str]:
    # A bare string is a sequence too; serving it character by character would
    # be a silent, expensive mistake. Listed first: an iterator read by the check would be empty after it.
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not one string")
    texts = list(texts)
    for row, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts must be strings; texts[{row}] is {type(text).__name__}")
        check_unicode(f"texts[{row}]", text)  # the tokenizer's own error names neither the row nor the cause
    return texts
