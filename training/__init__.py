"""Training: data loaders, the DialogVCS builder, the PyTorch model, losses, trainer, PU estimation.

Installed as ``intentvcs.training``. Imports torch and transformers (inside the
modules that need them), the shared core (``intentvcs.core``) and nothing else
of ours: never ``intentvcs.service``, ``intentvcs.export`` or the command line.
"""

from pathlib import Path

# The embedded default data set (train/valid/test, an upgrade batch and its truth): see its README.md.
DEFAULT_DATA = Path(__file__).resolve().parent / "default_data" / "assistant"
