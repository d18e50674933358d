#!/usr/bin/env bash
# Set up from nothing and run the test suite (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The dashboard test scrapes the real service with a real Prometheus (Debian
# package). Installed here when we can; without it that one test skips.
if ! command -v prometheus >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null) \
    || echo "test.sh: could not install prometheus; the dashboard test will fail (CI must run it)" >&2
fi
. .venv/bin/activate
python -m pytest -q -ra "$@"
