#!/usr/bin/env bash
# llama.cpp's own server (llama-server), built for this machine from the llama.cpp that llama-cpp-python's
# sdist vendors (the same version the Python yardstick runs), with scripts/llama_wheel.sh's native flags
# (this CPU's instruction sets, AMX off). The engine benchmark runs it as the yardstick for drafted decoding:
# llama.cpp's speculative decoding without a draft model (--spec-type ngram-simple: prompt lookup in C++).
#   scripts/llama_server.sh        build unless kept already; print the binary's path
# Kept under $FLINT_HOME/llama-server/<version>-<flags hash>/ (outside the repo), published by one rename.
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.3.36
py="${PYTHON:-python3}"
flags="$(bash scripts/llama_wheel.sh native-flags)"
tag="$(printf %s "$flags" | sha256sum | cut -c1-8)"
dir="${FLINT_HOME:-$HOME/.cache/flint}/llama-server/$version-$tag"
if [ ! -x "$dir/llama-server" ]; then
  echo "building llama-server (llama.cpp of llama-cpp-python $version; $flags; ~10 min on 2 cores) into $dir" >&2
  mkdir -p "$(dirname "$dir")"
  work="$(mktemp -d "$dir.tmp.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  "$py" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    "llama-cpp-python==$version" -d "$work" >&2
  tar xzf "$work"/llama_cpp_python-"$version".tar.gz -C "$work"
  src="$work/llama_cpp_python-$version/vendor/llama.cpp"
  # no web UI (the prebuilt one is downloaded from outside the registries), no TLS, no tests or examples
  # shellcheck disable=SC2086
  cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF $flags >&2
  cmake --build "$work/build" --target llama-server -j "$(nproc)" >&2
  mkdir -p "$work/out"
  cp "$work/build/bin/llama-server" "$work/out/"
  printf '%s\n' "$flags" >"$work/out/CMAKE_ARGS"
  rm -rf "$dir"
  mv "$work/out" "$dir"
fi
printf '%s\n' "$dir/llama-server"
