#!/usr/bin/env bash
# The quick start's cost on a fresh clone, before the GGUF builder (0c135cd: the export extra, transformers + onnxruntime-genai)
# and at main: time to a built default model (pip cache warm in both) and the disk it leaves (.venv, FLINT_HOME).
# Usage: bash scripts/bench_quickstart.sh   (clones this checkout into /tmp/qs-old and /tmp/qs-new)
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
for arm in old new; do
  rm -rf /tmp/qs-$arm /tmp/qs-$arm-home
  if [ $arm = old ]; then git clone -q "$root" /tmp/qs-old && git -C /tmp/qs-old checkout -q 0c135cd; ext=export; else git clone -q "$root" /tmp/qs-new; ext=""; fi
  cd /tmp/qs-$arm
  t0=$(date +%s.%N)
  FLINT_HOME=/tmp/qs-$arm-home bash scripts/setup.sh $ext > /tmp/qs-$arm.log 2>&1
  t1=$(date +%s.%N)
  FLINT_HOME=/tmp/qs-$arm-home .venv/bin/flint model build >> /tmp/qs-$arm.log 2>&1
  t2=$(date +%s.%N)
  echo "$arm setup $(echo "$t1-$t0" | bc) s build $(echo "$t2-$t1" | bc) s total $(echo "$t2-$t0" | bc) s venv $(du -sm .venv | cut -f1) MB home $(du -sm /tmp/qs-$arm-home | cut -f1) MB torch $(.venv/bin/python -c 'import torch' 2>/dev/null && echo yes || echo no)"
  du -sm /tmp/qs-$arm-home/* 
done
