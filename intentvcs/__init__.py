"""Shared, torch-free core of intentvcs.

Everything under ``intentvcs`` may be imported by the serving path, so no module
here imports torch, transformers or optimum. Training (``training``) and export
(``export``) depend on this package; ``service`` depends on it too; never the
other way round.
"""

__version__ = "0.1.0"
