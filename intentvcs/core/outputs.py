"""What the intent graph gives per text: the decision layer's inputs (pure numpy).

PyTorch inference (``intentvcs.training.predict``) and the ONNX engine both return a
``GraphOutputs``; ``Decision.apply(*outputs.scores)`` turns it into answers.

``logits``      ``[N, L]`` head outputs, one column per label;
``pooled``      ``[N, H]`` mean-pooled final hidden states (the embedding the
                head reads, and the audit's and the distance rule's space);
``pooled_mid``  ``[N, H]`` mean-pooled hidden states of a middle layer
                (``mid_layer``), which fine-tuning changes less: the distance
                OOS rule's nearest-neighbour term reads it (``intentvcs.core.oos``);
``entities``    for a model with an entity head, ``[N]`` object array: per
                text a tuple of ``intentvcs.core.entities.Entity``, offsets into
                the text as given (already decoded from the graph's per-token
                ``tag_logits``, which vary in length per text); else None.
``starts``      for a model with a boundary head, ``[N]`` object array: per
                text a tuple of the character offsets where a further request
                begins (``intentvcs.core.boundaries``, decoded from the graph's
                ``boundary_logits``); else None.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np


class GraphOutputs(NamedTuple):
    logits: np.ndarray
    pooled: np.ndarray
    pooled_mid: np.ndarray
    entities: np.ndarray | None = None
    starts: np.ndarray | None = None

    @property
    def scores(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What the decision layer reads: ``Decision.apply(*outputs.scores)``."""
        return self.logits, self.pooled, self.pooled_mid

    def rows(self, index) -> "GraphOutputs":
        """The same rows of every array (``index``: anything numpy indexing takes)."""
        return GraphOutputs(*(None if array is None else array[index] for array in self))

    def with_rows(self, index: Sequence[int], other: "GraphOutputs") -> "GraphOutputs":
        """A copy whose rows ``index`` are ``other``'s rows, in order (fields None here stay None)."""
        merged = []
        for mine, theirs in zip(self, other):
            if mine is not None:
                mine = mine.copy()
                mine[list(index)] = theirs
            merged.append(mine)
        return GraphOutputs(*merged)

    @classmethod
    def concatenate(cls, parts: Sequence["GraphOutputs"]) -> "GraphOutputs":
        """Row-wise concatenation of chunked outputs, in order (``parts`` must not be empty)."""
        return cls(*(None if parts[0][i] is None else np.concatenate([np.asarray(part[i]) for part in parts])
                     for i in range(len(cls._fields))))


def non_finite_problem(matrix: np.ndarray, name: str) -> str | None:
    """None when every value of ``matrix`` (``[N, ...]``) is finite, else the refusal's message naming
    ``name`` and how many rows hold a NaN or infinite value: one pass when none does, the count only when
    some do."""
    finite = np.isfinite(matrix)
    if finite.all():
        return None
    rows = int(np.count_nonzero(~finite.reshape(len(matrix), -1).all(axis=1)))
    return f"{name}: {rows} of {len(matrix)} row(s) hold non-finite values (NaN or inf)"


def tuple_array(per_text: Sequence[tuple]) -> np.ndarray:
    """``[N]`` object array holding one tuple per text (entities, request starts; numpy would unpack the
    tuples)."""
    array = np.empty(len(per_text), dtype=object)
    for row, found in enumerate(per_text):
        array[row] = found
    return array


# The ONNX graph's intent output names, in this order; a graph with an entity
# head also has TAG_OUTPUT, ``[B, T, K]`` tag logits per token, then one with a
# boundary head BOUNDARY_OUTPUT, ``[B, T]`` request-boundary logits per token.
GRAPH_OUTPUTS: tuple[str, ...] = ("logits", "pooled", "pooled_mid")
TAG_OUTPUT = "tag_logits"
BOUNDARY_OUTPUT = "boundary_logits"


def default_mid_layer(num_hidden_layers: int) -> int:
    """The middle encoder layer (hidden-states index; 0 is the embeddings): 3 of MiniLM-L6's 6.

    ``benchmarks/oos_layer_study.py`` measured this choice on CLINC150.
    """
    if num_hidden_layers < 1:
        raise ValueError(f"an encoder needs at least one layer, got {num_hidden_layers}")
    return max(1, num_hidden_layers // 2)
