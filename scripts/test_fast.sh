#!/usr/bin/env bash
# The fast tier: every test that needs no model, no llama.cpp and no editor (imports, CLI, protocol, logic).
# No model build and no torch. The whole suite stays `bash scripts/test.sh` (what CI runs).
# Usage: scripts/test_fast.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev
. .venv/bin/activate
# an empty FLINT_HOME: a test that loads a model without its `model` marker fails here, whatever is built
home="$(mktemp -d)"
trap 'rm -rf "$home"' EXIT
FLINT_HOME="$home" python -m pytest -q -m "not model and not editor and not llamacpp" "$@"
