"""What the intent graph gives per text: the decision layer's inputs (pure numpy).

PyTorch inference (``intentvcs.training.predict``) and the ONNX engine both return a
``GraphOutputs``; ``Decision.apply(*outputs)`` turns it into answers.

``logits``      ``[N, L]`` head outputs, one column per label;
``pooled``      ``[N, H]`` mean-pooled final hidden states (the embedding the
                head reads, and the audit's and the distance rule's space);
``pooled_mid``  ``[N, H]`` mean-pooled hidden states of a middle layer
                (``mid_layer``), which fine-tuning changes less: the distance
                OOS rule's nearest-neighbour term reads it (``intentvcs.core.oos``).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np


class GraphOutputs(NamedTuple):
    logits: np.ndarray
    pooled: np.ndarray
    pooled_mid: np.ndarray

    def rows(self, index) -> "GraphOutputs":
        """The same rows of every array (``index``: anything numpy indexing takes)."""
        return GraphOutputs(*(array[index] for array in self))

    @classmethod
    def concatenate(cls, parts: Sequence["GraphOutputs"]) -> "GraphOutputs":
        """Row-wise concatenation of chunked outputs, in order (``parts`` must not be empty)."""
        return cls(*(np.concatenate([np.asarray(part[i]) for part in parts]) for i in range(len(cls._fields))))


# The ONNX graph's output names, in this order.
GRAPH_OUTPUTS: tuple[str, ...] = GraphOutputs._fields


def default_mid_layer(num_hidden_layers: int) -> int:
    """The middle encoder layer (hidden-states index; 0 is the embeddings): 3 of MiniLM-L6's 6.

    ``benchmarks/oos_layer_study.py`` measured this choice on CLINC150.
    """
    if num_hidden_layers < 1:
        raise ValueError(f"an encoder needs at least one layer, got {num_hidden_layers}")
    return max(1, num_hidden_layers // 2)
