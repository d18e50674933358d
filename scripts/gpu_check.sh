#!/usr/bin/env bash
# The CUDA checks, on a machine with an NVIDIA GPU, for a bundle and the checkpoint it was exported from:
#
#   bash scripts/gpu_check.sh BUNDLE CHECKPOINT SNIPS_DIR [RESULTS_DIR]
#
# 1. the engine starts CUDA with torch not imported, as the torch-free service does, and answers;
# 2. the engine tests, CUDA ones included (parity with the CPU; `auto` serves fp32 on CUDA);
# 3. perf_bench --gpu-only: the GPU records (engine fp32 and int8 against PyTorch on CUDA, parity with the
#    CPU engine on the SNIPS test split) merged into RESULTS_DIR/perf.json (default benchmarks/results),
#    whose CPU figures stay as they were.
# Needs intentvcs with the gpu and test extras, and torch with CUDA for the PyTorch baseline.
set -euo pipefail
if [ $# -lt 3 ]; then
    sed -n '2,11p' "$0" >&2
    exit 2
fi
# Paths given relative to where it is run from, not to the repository root it moves to below.
absolute() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }
bundle=$(absolute "$1") checkpoint=$(absolute "$2") snips=$(absolute "$3")
results=${4:+$(absolute "$4")}
results=${results:-benchmarks/results}
cd "$(dirname "$0")/.."
python - "$bundle" <<'PY'
import json
import sys
import time

from intentvcs.service.engine import Engine

began = time.perf_counter()
engine = Engine(sys.argv[1], provider="cuda")
print(f"engine started on {engine.provider} in {time.perf_counter() - began:.2f} s; "
      f"torch imported: {'torch' in sys.modules}")
print(json.dumps(engine.info))
print(json.dumps(engine.predict(["play some jazz and turn off the lights"])[0]["accepted"]))
PY
python -m pytest -q tests/test_engine.py
python -m benchmarks.perf_bench --gpu-only --bundle "$bundle" --checkpoint "$checkpoint" --snips "$snips" \
    --repeats 3 --results-dir "$results"
