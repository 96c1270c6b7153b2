#!/usr/bin/env bash
# Create .venv and install Flint with the given extras (default: none: the runtime, which builds the presets'
# models too). Idempotent.
# Usage: scripts/setup.sh [extras]   e.g. scripts/setup.sh dev   or   scripts/setup.sh export,dev
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
py="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv
fi
. .venv/bin/activate
stamp=".venv/.flint-installed-${extras//,/-}"
spec="."
[ -z "$extras" ] || spec=".[${extras}]"
# llama.cpp (remote-test, bench) from our portable wheel, checked on every run and installed before pip resolves
# the extras (pip would otherwise build it with -march=native): an environment holding a native build is fixed
if [[ ",$extras," == *",remote-test,"* || ",$extras," == *",bench,"* ]]; then
  PYTHON=python scripts/llama_wheel.sh ensure >&2
fi
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  python -m pip install -q --disable-pip-version-check --upgrade pip >&2
  # torch 2.13.0 (CPU) comes from the wheel on local disk; ask for it first so nothing pulls a CUDA build
  if [[ ",$extras," == *",export,"* ]]; then
    python -m pip install -q --disable-pip-version-check "torch==2.13.0" >&2
  fi
  # the distribution was called "flint" before it became "flint-lsp": drop the old editable install
  if python -m pip show flint >/dev/null 2>&1; then
    python -m pip uninstall -y -q flint >&2
  fi
  python -m pip install -q --disable-pip-version-check -e "$spec" >&2
  touch "$stamp"
fi
