"""Export an ``IntentModel`` to ONE ONNX graph: ids -> ``logits [B, L]``, ``pooled``, ``pooled_mid`` ``[B, H]``,
for a model with an entity head ``tag_logits [B, T, K]``, and for one with a boundary head
``boundary_logits [B, T]``.

How: Optimum's exporter (``optimum.exporters.onnx.export``) traces any
``nn.Module`` that carries a ``config`` and is described by an ``OnnxConfig``.
We hand it a thin wrapper around the whole ``IntentModel`` (encoder, mean
pooling, head) plus the backbone's own Optimum config (``feature-extraction``
task, so inputs, dummy-input generation, opset default and per-architecture
patches are Optimum's) whose ``outputs`` are overridden to the names of
``IntentModel.output_names`` (the per-token outputs' sequence axis is dynamic
too), each with a dynamic batch axis. Optimum maps the wrapper's output
tuple onto those names in order and marks batch and sequence axes of every
input dynamic; its ``fix_dynamic_axes`` pass leaves the label and hidden axes
static, which lets the engine check a bundle's label count against the graph.

Why one graph with pooling and head inside: serving then does no per-token
work in numpy (masking, summing, dividing over [B, T, H] would cost as much as
a small encoder layer on CPU and copy the whole hidden-state tensor out of the
device on GPU), and the exported graph is exactly what parity compares with
PyTorch. Appending the ops to an encoder-only graph with the ``onnx`` helper
API was not needed: the tracer handles ``mean_pool`` and ``nn.Linear``.

Optimum's own output validation is skipped (we call ``export``, not
``onnx_export_from_model``): its tolerance failures are only logged as a
warning, and ``intentvcs.export.parity`` performs the check that gates a bundle.
"""

from __future__ import annotations

import warnings
from importlib.metadata import version
from pathlib import Path
from typing import Any

import onnx
import torch
from onnx.external_data_helper import uses_external_data
from torch import nn

from intentvcs.core.outputs import BOUNDARY_OUTPUT, TAG_OUTPUT
from intentvcs.training.model import IntentModel

TASK = "feature-extraction"
# Node-name scopes of the traced graph: the tracer names each node after the module
# path that produced it (``_Exportable.model`` -> "/model/", its encoder -> "/model/encoder/");
# nodes fused offline get new names outside both. The quantiser keeps the heads fp32 by these.
MODEL_SCOPE = "/model/"
ENCODER_SCOPE = "/model/encoder/"


class _Exportable(nn.Module):
    """``IntentModel`` plus the ``config`` attribute Optimum's exporter reads."""

    def __init__(self, model: IntentModel):
        super().__init__()
        self.model = model
        self.config = model.encoder.config

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        return self.model(input_ids, attention_mask, token_type_ids)


def _onnx_config(encoder_config, outputs: list[str]):
    """The backbone's Optimum ``OnnxConfig`` with the intent graph's ``outputs``."""
    import optimum.exporters.onnx.model_configs  # noqa: F401  (registers the configs)
    from optimum.exporters.tasks import TasksManager

    constructor = TasksManager.get_exporter_config_constructor(
        exporter="onnx", model_type=encoder_config.model_type, task=TASK, library_name="transformers")
    base = type(constructor(encoder_config))

    class IntentOnnxConfig(base):
        @property
        def outputs(self) -> dict[str, dict[int, str]]:
            axes = {name: {0: "batch_size"} for name in outputs}
            for per_token in (TAG_OUTPUT, BOUNDARY_OUTPUT):
                if per_token in axes:
                    axes[per_token][1] = "sequence_length"
            return axes

    return IntentOnnxConfig(encoder_config, task=TASK)


def export_onnx(model: IntentModel, path: str | Path, opset: int | None = None) -> dict[str, Any]:
    """Write the fp32 graph to ``path``; return the manifest's ``model`` section.

    ``opset`` defaults to Optimum's choice for the backbone architecture.
    """
    from optimum.exporters.onnx import export

    path = Path(path)
    model = model.eval()
    config = _onnx_config(model.encoder.config, model.output_names())
    with warnings.catch_warnings():
        # The tracer warns about constants built from Python scalars inside
        # transformers' mask code; they are constant, and parity checks the graph.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        # Optimum selects torch's TorchScript exporter on purpose (dynamo=False);
        # torch's notice that it is the legacy path is not actionable here.
        warnings.simplefilter("ignore", DeprecationWarning)
        inputs, outputs = export(model=_Exportable(model), config=config, output=path, opset=opset)
    graph = onnx.load(str(path), load_external_data=False)
    if any(uses_external_data(tensor) for tensor in graph.graph.initializer):
        # The model's size is the input's limit, not a bug (ValueError: the CLI's one-line refusal); ``path`` lies in
        # the export's temporary folder, gone by the time this is read, so it is not named.
        raise ValueError("the model's ONNX graph is over protobuf's 2 GB, so the exporter wrote its weights as "
                         "external data; a bundle holds single-file graphs: export a smaller backbone")
    return {
        "inputs": list(inputs),
        "outputs": list(outputs),
        "opset": next(o.version for o in graph.opset_import if o.domain in ("", "ai.onnx")),
        "hidden_size": model.head.in_features,
        "mid_layer": model.mid_layer,
        "exporter": f"optimum-onnx {version('optimum-onnx')}, optimum {version('optimum')}, torch {torch.__version__}",
    }
