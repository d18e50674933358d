#!/usr/bin/env bash
# The main job on a fresh machine: set up, train the default model on the
# embedded assistant data set, export it, evaluate the bundle, serve it on
# http://127.0.0.1:3000 (Ctrl-C stops the server).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
exec intentvcs demo "$@"
