#!/usr/bin/env bash
# The export path's tests (`flint model build --from-hf`, int4-mixed, int8-dyn): torch, transformers and
# onnxruntime-genai from the export extra. Not part of the README's test command, which needs no torch.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh export,dev
. .venv/bin/activate
flint model build --keep-gguf
exec python -m pytest -q -m export "$@"
