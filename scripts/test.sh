#!/usr/bin/env bash
# Set up, build the default model if needed, and run the whole test suite (real model included).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev,remote-test
. .venv/bin/activate
# the GGUF is kept: the reference forward, the exactness test and the llama.cpp server tests read it
flint model build --keep-gguf
# the fp32 build is the reference the quality tests compare against (tests/test_reference.py); the gguf build
# holds the file's own blocks (tests/test_gguf_build.py)
flint model build -p fp32 --keep-gguf
flint model build -p gguf --keep-gguf
# the export path (--from-hf, torch) has its own command: scripts/test_export.sh
exec python -m pytest -q -m "not export" "$@"
