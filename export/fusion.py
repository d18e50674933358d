"""Offline transformer fusions: the exported graph rewritten with ONNX Runtime's fused encoder ops.

``fuse_encoder`` runs ONNX Runtime's transformer optimizer
(``onnxruntime.transformers.optimizer``) over the traced graph: the
embedding sum and its LayerNorm become ``EmbedLayerNormalization``, each
self-attention block (Q/K/V projections, scaled dot product, softmax, mask)
one ``Attention`` op and each bias + GELU ``BiasGelu``. Only the graph-level rewrites run
(``opt_level=0``); ONNX Runtime's own load-time optimisations still run in the
engine, so the file stays provider-neutral (every fused op has CPU and CUDA
kernels).

Why offline, when the engine's ``ORT_ENABLE_ALL`` fuses at load time too: the
int8 graph is quantised from the file, and the quantiser only sees what the
file holds. Fused first, a whole attention block (Q/K/V projections in one
GEMM) becomes one ``QAttention``; quantised unfused, the load-time attention
fusion no longer matches the quantised pattern. Measured (docs/RESULTS.md
"Performance"): int8 of the fused graph ran 11% faster than int8 of the traced
one at batch 1 and as fast at batch 32; fp32 gains little, being fused at load
anyway.

Each residual add + LayerNorm stays Add + LayerNormalization, not one
``SkipLayerNormalization``: ONNX Runtime's CPU kernel for that op took 0.71 ms
where Add + LayerNormalization took 0.13-0.17 ms on a (32, 23, 384) input (2
threads, onnxruntime 1.32), 22% of the int8 graph's time at batch 32. The
engine keeps ONNX Runtime's load-time fusion from putting it back on CPU
(``intentvcs.service.onnx_session.CPU_DISABLED_FUSIONS``); on CUDA it fuses.

A backbone the optimizer does not know keeps its traced graph; the manifest
then records no fusions, and parity gates whichever graph was written.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from intentvcs.export.quiet import quiet_logger

log = logging.getLogger(__name__)

# Encoder architectures whose graphs ORT's "bert" fusion patterns match (the
# BERT family: same embedding, attention and FFN blocks).
BERT_LIKE = ("bert", "roberta", "xlm-roberta", "camembert", "electra")
# The fused op types reported in the manifest, in the order of a layer.
FUSED_OPS = ("EmbedLayerNormalization", "Attention", "BiasGelu", "FastGelu", "Gelu")


def _fusion_options():
    """The optimizer's BERT fusions without ``SkipLayerNormalization`` (slower on CPU; module docstring)."""
    from onnxruntime.transformers.fusion_options import FusionOptions

    options = FusionOptions("bert")
    options.enable_skip_layer_norm = False
    options.enable_bias_skip_layer_norm = False
    return options


def fuse_encoder(path: str | os.PathLike, encoder_config) -> dict[str, int]:
    """Rewrite the graph at ``path`` in place with the fused encoder ops; return the count of each fused op.

    ``encoder_config`` is the backbone's transformers config (its ``model_type``,
    ``num_attention_heads`` and ``hidden_size`` drive the optimizer). Returns
    ``{}`` (and leaves the file alone) for a backbone outside ``BERT_LIKE``.
    """
    if encoder_config.model_type not in BERT_LIKE:
        log.info("no offline fusions for a %s backbone (known: %s)", encoder_config.model_type, list(BERT_LIKE))
        return {}
    from onnxruntime.transformers.optimizer import optimize_model

    path = Path(path)
    # The optimizer logs every pattern it fused at INFO, and where it saved our temporary file; keep its
    # warnings. Its modules log under bare names (fusion_base, onnx_model, onnx_model_bert...: it imports
    # them from its own folder), so only the root logger's level reaches them all, as in export/quantize.py.
    with quiet_logger(None, logging.WARNING):
        model = optimize_model(str(path), model_type="bert", num_heads=encoder_config.num_attention_heads,
                               hidden_size=encoder_config.hidden_size, opt_level=0,
                               optimization_options=_fusion_options())
        counts = model.get_fused_operator_statistics()
        fused = {op: int(counts[op]) for op in FUSED_OPS if counts.get(op)}
        tmp = path.with_suffix(".fusing")
        model.save_model_to_file(str(tmp))
    os.replace(tmp, path)
    log.info("offline fusions: %s", ", ".join(f"{n} {op}" for op, n in fused.items()) or "none matched")
    return fused
