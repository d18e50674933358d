#!/usr/bin/env bash
# Create .venv and install intentvcs with everything (train, export, serve, test).
#
# torch first, and explicitly its CPU build: on Linux, PyPI's torch wheels are
# CUDA builds that pull ~20 nvidia-* packages (several GB), which a CPU machine
# never uses. The CPU build carries the local version "+cpu" and lives on
# PyTorch's CPU wheel index; pip finds it when that index is configured (pip's
# extra-index-url, or PIP_EXTRA_INDEX_URL for this run). Where it is not, this
# script stops and says how to proceed, instead of downloading the CUDA build
# behind your back. TORCH_SPEC overrides the requirement (e.g. TORCH_SPEC=torch==2.13.0
# to accept the default build on a GPU machine). macOS wheels are CPU builds
# without the suffix.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
if [ "$(uname -s)" = Darwin ]; then
  TORCH_SPEC=${TORCH_SPEC:-torch==$TORCH_VERSION}
else
  TORCH_SPEC=${TORCH_SPEC:-torch==$TORCH_VERSION+cpu}
fi
# pyproject.toml's requires-python, asked before several hundred MB of torch are installed for nothing.
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup.sh: intentvcs needs Python 3.11 or later; $PYTHON is $("$PYTHON" --version 2>&1) (set PYTHON=python3.11)" >&2
  exit 1
fi
# A venv is usable when its interpreter runs and it has its activate script: .venv/bin/python alone is what
# a first run leaves where `python3 -m venv` failed half-way (Debian without python3-venv: no ensurepip, so
# neither pip nor activate) or was interrupted, and every rerun then failed at `. .venv/bin/activate`. Such
# a venv (or one whose interpreter is gone) is made again from nothing. One made without pip (`venv
# --without-pip`, uv) keeps what it holds and gets pip from ensurepip; only where that fails is it remade.
if [ -f .venv/bin/activate ] && .venv/bin/python -c '' >/dev/null 2>&1; then
  if ! .venv/bin/python -m pip --version >/dev/null 2>&1 && ! .venv/bin/python -m ensurepip -q >/dev/null 2>&1; then
    echo "setup.sh: .venv has no pip and ensurepip cannot add it; recreating it" >&2
    "$PYTHON" -m venv --clear .venv
  fi
else
  if [ -e .venv ]; then
    echo "setup.sh: .venv is incomplete (no activate script or no working interpreter); recreating it" >&2
  fi
  "$PYTHON" -m venv --clear .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip
if ! python -m pip install -q "$TORCH_SPEC"; then
  cat >&2 <<MESSAGE
setup.sh: could not install $TORCH_SPEC from the configured package index.
  The CPU build of torch is published on PyTorch's CPU wheel index, not on PyPI.
  Either add that index for this run (PIP_EXTRA_INDEX_URL=<PyTorch's CPU wheel index> bash $0;
  the address is the --index-url that pytorch.org's install selector gives for "CPU"),
  or accept PyPI's default build, which on Linux is the CUDA build (several GB):
  TORCH_SPEC=torch==$TORCH_VERSION bash $0
MESSAGE
  exit 1
fi
python -m pip install -q -e ".[all]"
echo "setup: $(python --version), torch $(python -c 'import torch; print(torch.__version__)')"
