#!/usr/bin/env bash
# Create .venv and install intentvcs with everything (train, export, serve, test).
# torch is pinned to the CPU build first: an unpinned torch would pull a
# multi-GB CUDA build. On a GPU machine install onnxruntime-gpu afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q "torch==${TORCH_VERSION:-2.13.0}"
python -m pip install -q -e ".[all]"
echo "setup: $(python --version), torch $(python -c 'import torch; print(torch.__version__)')"
