#!/usr/bin/env bash
# Set up, build the default model if needed, and run the whole test suite (real model included).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh export,dev,remote-test
. .venv/bin/activate
flint model build
# the fp32 build is the reference the quality tests compare against (tests/test_reference.py)
flint model build -p fp32
exec python -m pytest -q "$@"
