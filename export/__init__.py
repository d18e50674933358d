"""Checkpoint -> serving bundle (``intentvcs export``).

``onnx_export``  one ONNX graph via Optimum: token ids -> ``logits``, ``pooled``,
                 ``pooled_mid``, and the entity and boundary heads' logits when
                 the model has them;
``fusion``       ONNX Runtime's offline transformer fusions of that graph;
``parity``       the PyTorch-vs-ONNX gate every bundle must pass;
``quantize``     the int8 graph (dynamic, else weight-only), its agreement with
                 fp32 and its accuracy gate;
``exporter``     the writer, ``export_bundle``, tying them together atomically;
``quiet``        silences chatty third-party loggers for one call.
Imports torch (through ``training``); the serving side (``service``) never
imports this package.
"""
