#!/usr/bin/env bash
# llama-cpp-python built for a portable x86-64 baseline (AVX2, FMA, F16C; no AVX-512, no AMX), kept as a wheel.
#   scripts/llama_wheel.sh build    build the wheel unless it is kept already; print its path
#   scripts/llama_wheel.sh ensure   build it if needed, and (re)install it into $PYTHON's environment unless
#                                   the installed llama_cpp is already this wheel's, byte for byte
#   scripts/llama_wheel.sh native   the yardstick for this machine (issue 47): every instruction set this CPU
#                                   reports (AVX-512, VNNI, BF16), AMX always off; unpacked into its own
#                                   directory (never the environment's), whose path is printed: bench_engine's
#                                   llama.cpp worker puts it first on its PYTHONPATH
#   scripts/llama_wheel.sh native-flags   print the CMake flags `native` builds with here
# Why: by default llama.cpp compiles with -march=native, and on a VM whose CPU advertises AMX without granting
# it the library dies with SIGILL at its first request (ggml's runtime dispatch reads cpuid only, so
# GGML_CPU_ALL_VARIANTS would pick AMX there too). pip's wheel cache is keyed by the sdist, not by CMAKE_ARGS,
# so a native wheel cached earlier would be reused silently: we build with --no-cache-dir into our own
# directory, named after the version and the flags.
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.3.36
flags="-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_SSE42=ON -DGGML_AVX=ON \
-DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF \
-DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
-DGGML_AMX_BF16=OFF"
py="${PYTHON:-python3}"

# ON where /proc/cpuinfo reports the flag. AMX stays off: a VM may advertise it in cpuid without granting it,
# and ggml reads cpuid alone, so such a build dies by SIGILL at its first request.
native_flags() {
  local have; have="$(grep -m1 '^flags' /proc/cpuinfo)"
  on() { [[ " $have " == *" $1 "* ]] && echo ON || echo OFF; }
  echo "-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_SSE42=$(on sse4_2) \
-DGGML_AVX=$(on avx) -DGGML_AVX2=$(on avx2) -DGGML_FMA=$(on fma) -DGGML_F16C=$(on f16c) -DGGML_BMI2=$(on bmi2) \
-DGGML_AVX_VNNI=$(on avx_vnni) -DGGML_AVX512=$(on avx512f) -DGGML_AVX512_VBMI=$(on avx512vbmi) \
-DGGML_AVX512_VNNI=$(on avx512_vnni) -DGGML_AVX512_BF16=$(on avx512_bf16) -DGGML_AMX_TILE=OFF \
-DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
}
kind=avx2
if [ "${1:-build}" = native ] || [ "${1:-build}" = native-flags ]; then
  flags="$(native_flags)"
  kind=native
fi
tag="$(printf %s "$flags" | sha256sum | cut -c1-8)"
dir="${FLINT_HOME:-$HOME/.cache/flint}/wheels/llama-cpp-python-$version-$kind-$tag"

build() {
  local whl
  whl="$(ls "$dir"/llama_cpp_python-"$version"-*.whl 2>/dev/null | head -1 || true)"
  if [ -z "$whl" ]; then
    echo "building llama-cpp-python $version ($kind: $flags; ~8 min on 2 cores) into $dir" >&2
    mkdir -p "$(dirname "$dir")"
    local tmp
    tmp="$(mktemp -d "$dir.tmp.XXXXXX")"
    # the flags travel only in CMAKE_ARGS; $flags is also recorded beside the wheel for whoever reads it
    CMAKE_ARGS="$flags" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
      "$py" -m pip wheel -q --disable-pip-version-check --no-deps --no-cache-dir \
      --no-binary llama-cpp-python "llama-cpp-python==$version" -w "$tmp" >&2
    printf '%s\n' "$flags" >"$tmp/CMAKE_ARGS"
    rm -rf "$dir"
    mv "$tmp" "$dir"  # one rename: a build that was interrupted leaves no wheel behind
    whl="$(ls "$dir"/llama_cpp_python-"$version"-*.whl | head -1)"
  fi
  printf '%s\n' "$whl"
}

# exit 0 when every shared library of the wheel is installed in $py's llama_cpp with the same bytes
installed_is() {
  "$py" - "$1" <<'EOF'
import hashlib, importlib.util, sys, zipfile
from pathlib import Path
spec = importlib.util.find_spec("llama_cpp")
if spec is None or spec.origin is None:
    sys.exit(1)
pkg = Path(spec.origin).parent.parent
with zipfile.ZipFile(sys.argv[1]) as z:
    libs = [n for n in z.namelist() if ".so" in Path(n).name]
    for n in libs:
        f = pkg / n
        if not f.is_file() or hashlib.sha256(f.read_bytes()).digest() != hashlib.sha256(z.read(n)).digest():
            sys.exit(1)
sys.exit(0 if libs else 1)
EOF
}

case "${1:-build}" in
  build) build ;;
  ensure)
    whl="$(build)"
    if ! installed_is "$whl"; then
      echo "installing the portable llama-cpp-python wheel $whl" >&2
      "$py" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$whl" >&2
    fi
    printf '%s\n' "$whl" ;;
  native-flags) printf '%s\n' "$flags" ;;
  native)
    whl="$(build)"
    site="$dir/site"
    if [ ! -d "$site/llama_cpp" ]; then
      tmp="$(mktemp -d "$dir/site.tmp.XXXXXX")"
      "$py" -m pip install -q --disable-pip-version-check --no-deps --target "$tmp" "$whl" >&2
      mv "$tmp" "$site"
    fi
    printf '%s\n' "$site" ;;
  *) echo "usage: $0 [build|ensure|native|native-flags]" >&2; exit 2 ;;
esac
