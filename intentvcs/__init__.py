"""intentvcs: PU multi-label intent models, trained, exported to ONNX, served and audited.

The installed package is one namespace whose floors import only downwards
(docs/ARCHITECTURE.md; tests/test_layering.py keeps it so):

``intentvcs.cli``        the ``intentvcs`` command; parses arguments, calls the floors below
``intentvcs.export``     checkpoint -> bundle (folder ``export/``)
``intentvcs.training``   torch side (folder ``training/``)  |  ``intentvcs.service``  serving side (folder ``service/``)
``intentvcs.core``       torch-free shared core: data format, decision layer, OOS rules, relations, metrics, manifest

This module holds only the version and the process-wide thread policy below.
"""

import os

__version__ = "0.1.0"

# numpy's OpenBLAS would start one thread per core for the decision layer's
# small matrix products and fight ONNX Runtime's own threads for the cores:
# measured on 2 cores, engine throughput at batch 32 fell from 823 to 361
# utterances/s. It must be set before numpy is first imported, and every entry
# point (the CLI, the BentoML service, the benchmarks) imports this package
# first; child processes get it through their environment (serve.service_env,
# bentofile.yaml's envs). torch does not use OpenBLAS, so training is unaffected.
BLAS_THREADS = {"OPENBLAS_NUM_THREADS": "1"}
for _name, _value in BLAS_THREADS.items():
    os.environ.setdefault(_name, _value)
