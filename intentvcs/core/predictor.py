"""The one model interface every analysis takes: labels, the decision, and ``infer``.

Evaluation, the robustness suite and the upgrade audit need the same three
things of a model, whichever runtime holds it: the label names, the decision
layer that turns raw outputs into answers, and raw outputs for texts. The ONNX
engine (``intentvcs.service.engine.Engine``, what the service runs) and the
PyTorch predictor (``intentvcs.training.predict.TorchPredictor``, on a
checkpoint before export) both offer them, so each analysis is written once and
runs on either, and a figure taken through the engine is a figure of the
shipped bundle.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from intentvcs.core.dataio import Example
from intentvcs.core.decision import Decision
from intentvcs.core.outputs import GraphOutputs


@runtime_checkable
class Predictor(Protocol):
    """A loaded intent model.

    ``labels``    label names, in the order of the logits' columns.
    ``decision``  the decision layer the model's answers are decided by.
    ``entity_types``  the entity types its answers can carry ([] without an entity head).
    ``info``      what is loaded (source, backbone, runtime...), JSON-ready, for reports.
    ``reference_rows``  the model's sample of its training rows (``intentvcs.core.references``),
                  which the upgrade audit reads when given no training rows; None without one.
    ``infer``     raw ``GraphOutputs`` (logits ``[N, L]``, pooled and middle-layer pooled
                  ``[N, H]``, float32), rows in input order, after the model's own
                  input normalisation (its spelling normaliser); for a model with an
                  entity head also each text's entities, at offsets into the texts given.
    """

    @property
    def labels(self) -> list[str]: ...

    @property
    def decision(self) -> Decision: ...

    @property
    def entity_types(self) -> list[str]: ...

    @property
    def info(self) -> dict[str, Any]: ...

    def reference_rows(self) -> list[Example] | None: ...

    def infer(self, texts: Sequence[str]) -> GraphOutputs: ...


Infer = Callable[[Sequence[str]], GraphOutputs]
# Texts per model call of ``in_chunks``. The caller sorts them by length first, so each call's batches pad
# little; chunking gives the progress bar something to count.
CHUNK = 1024


def in_chunks(infer: Infer, texts: Sequence[str], desc: str, progress: bool = True) -> GraphOutputs:
    """``infer(texts)``, ``CHUNK`` texts at a time, with a progress bar on a terminal only (quiet in logs and
    CI, and with ``progress`` False); the rows as one call gives them, in order."""
    from tqdm.auto import tqdm

    if not texts:
        return GraphOutputs(*infer(texts))
    parts = []
    with tqdm(total=len(texts), desc=desc, unit="text", disable=None if progress else True) as bar:
        for start in range(0, len(texts), CHUNK):
            chunk = texts[start:start + CHUNK]
            parts.append(GraphOutputs(*infer(chunk)))
            bar.update(len(chunk))
    return GraphOutputs.concatenate(parts)
