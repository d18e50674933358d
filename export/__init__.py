"""Checkpoint -> serving bundle (``intentvcs export``).

``onnx_export``  one ONNX graph ids -> ``logits``, ``pooled`` via Optimum;
``parity``       the PyTorch-vs-ONNX gate every bundle must pass;
``quantize``     optional dynamic int8 graph and its measured agreement;
``bundle``       the writer, ``export_bundle``, tying them together atomically.
Imports torch (through ``training``); the serving side (``service``) never
imports this package.
"""
