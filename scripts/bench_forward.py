#!/usr/bin/env python3
"""What bounds the time to a first token: one decoder forward over m new tokens at a given context length,
per weight format, plus the LM head's row. Prints a table, writes docs/benchmarks/forward.json and
docs/benchmarks/forward.md.

A first token after an edit costs one forward over the changed tokens (and, in Flint's anchored FIM layout,
the tokens re-laid after them) plus one LM-head row; no cache can make it cheaper than that. This benchmark
measures that floor for the default weights and, for comparison, other weight formats of the same graph:

    python scripts/bench_forward.py                                   # the default model only
    python scripts/bench_forward.py --requant int4-b128=4:128:sym     # + int4 re-quantised from the fp32 export
    python scripts/bench_forward.py --extra LABEL=MODEL_DIR           # + any built model directory
    python scripts/bench_forward.py --tokens 1,9,64,256 --contexts 800  # prefill sizes too (tok/s column)

``--requant LABEL=BITS:BLOCK:sym|asym`` quantises the fp32 export's decoder (``flint model build
qwen2.5-coder-0.5b --precision fp32``) with onnxruntime's MatMulNBitsQuantizer (accuracy level 4, as the
builder does) into a temporary directory that borrows every other file of the default model. Models are
measured one at a time, alternated A B, B A over the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "benchmarks"
sys.path.insert(0, str(ROOT))

TOKENS = (1, 3, 5, 9)  # new tokens per forward; 9 is what bench_engine's ttft_reuse runs (5 changed + re-laid)
CONTEXTS = (16, 1000, 1900)  # cached positions before them


def requantize(fp32_dir: Path, like: Path, bits: int, block: int, symmetric: bool, dst: Path) -> None:
    """The fp32 export's decoder quantised to bits/block; every other file is the default model's."""
    import logging

    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    logging.getLogger("onnxruntime.quantization").setLevel(logging.WARNING)
    dst.mkdir(parents=True, exist_ok=True)
    for f in like.iterdir():
        if not f.name.startswith("model.onnx"):
            (dst / f.name).symlink_to(f)
    m = onnx.load(str(fp32_dir / "model.onnx"))
    q = MatMulNBitsQuantizer(m, bits=bits, block_size=block, is_symmetric=symmetric, accuracy_level=4)
    q.process()
    q.model.save_model_to_file(str(dst / "model.onnx"), use_external_data_format=True)


def weight_mb(mdir: Path) -> float:
    return sum(f.stat().st_size for f in mdir.glob("model.onnx*")) / 1e6


def timings_ms(fn, n: int) -> list[float]:
    """n timed calls of fn after one untimed one (ms)."""
    fn()
    xs = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        xs.append((time.perf_counter() - t0) * 1000)
    return xs


def cpu_model() -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_replay import cpu_model as described  # one description of the CPU for every benchmark

    return described()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=7, help="timed forwards per cell and round")
    ap.add_argument("--extra", action="append", default=[], metavar="LABEL=DIR")
    ap.add_argument("--requant", action="append", default=[], metavar="LABEL=BITS:BLOCK:sym|asym")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)), help="new tokens per forward (comma list)")
    ap.add_argument("--contexts", default=",".join(map(str, CONTEXTS)), help="cached positions (comma list)")
    args = ap.parse_args()
    tokens = tuple(int(x) for x in args.tokens.split(","))
    contexts = tuple(int(x) for x in args.contexts.split(","))
    # the summary's cells: the context nearest 1,000 and the smallest one, the token counts nearest 1 and 9
    c1k, c0 = min(contexts, key=lambda c: abs(c - 1000)), min(contexts)
    m1, m9 = min(tokens), min(tokens, key=lambda m: abs(m - 9))

    from engine.config import ModelNotBuilt, resolve_model_dir
    from engine.model.manifest import load_manifest
    from engine.model.runtime import OnnxDecoder

    try:
        mdir = resolve_model_dir(args.model)
    except ModelNotBuilt as e:
        print(e, file=sys.stderr)
        return 2
    man = load_manifest(mdir)
    if man is None:
        print(f"no built model at {mdir}: run `flint model build {args.model}`", file=sys.stderr)
        return 2
    recipe = "".join(f" block {v}" for k, v in sorted(man.quant.items()) if k == "block_size")
    models = {f"{man.precision}{recipe} (default)": mdir}
    for spec in args.extra:
        label, _, d = spec.partition("=")
        models[label] = Path(d).expanduser()
    tmp = tempfile.TemporaryDirectory(prefix="flint-bench-forward-")
    for spec in args.requant:
        label, _, recipe = spec.partition("=")
        bits, block, sym = recipe.split(":")
        fp32 = mdir.parent / mdir.name.replace(f"-{man.precision}", "-fp32")
        if not (fp32 / "model.onnx").exists():
            print(f"--requant needs the fp32 export at {fp32}: flint model build {args.model} --precision fp32",
                  file=sys.stderr)
            return 2
        dst = Path(tmp.name) / label
        t0 = time.perf_counter()
        requantize(fp32, mdir, int(bits), int(block), sym == "sym", dst)
        print(f"{label}: re-quantised in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        models[label] = dst

    load_start = os.getloadavg()
    decs = {label: OnnxDecoder(d, man, threads=args.threads, capacity=2048, batch_max=1)
            for label, d in models.items()}
    fill = np.array([[100 + (i * 37) % 20000 for i in range(max(contexts))]], dtype=np.int64)
    for dec in decs.values():  # every decoder's cache holds the same max(contexts) positions
        for c in range(0, fill.shape[1], 256):
            dec.forward(fill[:, c:c + 256], c)
    res: dict[str, dict[str, list[float]]] = {label: {} for label in decs}
    h = np.random.default_rng(0).standard_normal((1, man.hidden_size), dtype=np.float32)
    for r in range(args.rounds):
        # A B, then B A: whichever runs first in a round pays for caches the other left warm
        for label, dec in (list(decs.items()) if r % 2 == 0 else list(decs.items())[::-1]):
            for c in contexts:
                for m in tokens:
                    x = np.array([[500 + i for i in range(m)]], dtype=np.int64)
                    res[label].setdefault(f"{c}:{m}", []).extend(
                        timings_ms(lambda dec=dec, x=x, c=c: dec.forward(x, c), args.repeats))
            res[label].setdefault("head", []).extend(timings_ms(lambda dec=dec: dec.heads["full"](h), args.repeats))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    out: dict[str, dict] = {}
    for label, d in res.items():
        med = {k: round(statistics.median(v), 2) for k, v in d.items()}
        out[label] = {"forward_ms": {k: v for k, v in med.items() if k != "head"}, "head_row_ms": med["head"],
                      "weights_mb": round(weight_mb(models[label]), 1),
                      # the bench_engine ttft_reuse floor: 9 tokens at 1,000 cached positions + one head row
                      "ttft_reuse_floor_ms": round(med[f"{c1k}:{m9}"] + med["head"], 1),
                      "one_step_1000_ms": med[f"{c1k}:{m1}"],
                      "weights_gb_s_at_one_token": round(weight_mb(models[label]) / med[f"{c0}:{m1}"], 1),
                      # prefill throughput: new tokens per second of one forward, per context and m
                      "tokens_per_s": {k: round(int(k.split(":")[1]) / v * 1000, 1) for k, v in med.items()
                                       if k != "head"}}
    meta = {"model": man.model_id, "cpu": cpu_model(), "cpu_count": os.cpu_count(), "threads": args.threads, "rounds": args.rounds, "repeats": args.repeats,
            "date": time.strftime("%Y-%m-%d %H:%M:%S"), "load_avg_start": [round(x, 2) for x in load_start],
            "load_avg_end": [round(x, 2) for x in os.getloadavg()]}
    outd = Path(args.out)
    outd.mkdir(parents=True, exist_ok=True)
    (outd / "forward.json").write_text(json.dumps({"models": out, "meta": meta}, indent=2) + "\n")

    head = ["weights", "context"] + [f"m={m}" for m in tokens] + [f"tok/s at m={max(tokens)}"]
    rows = [head, ["---"] * len(head)]
    for label, o in out.items():
        for c in contexts:
            rows.append([label, str(c)] + [f"{o['forward_ms'][f'{c}:{m}']:.1f}" for m in tokens]
                        + [f"{o['tokens_per_s'][f'{c}:{max(tokens)}']:.0f}"])
    table = "\n".join(f"| {' | '.join(r)} |" for r in rows)
    summ = [["weights", "decoder weights MB", f"GB/s read at m={m1}", f"one step at {c1k}", "LM head row",
             f"ttft_reuse floor (m={m9} at {c1k} + head)"], ["---"] * 6]
    for label, o in out.items():
        summ.append([label, str(o["weights_mb"]), str(o["weights_gb_s_at_one_token"]), f"{o['one_step_1000_ms']:.1f}",
                     f"{o['head_row_ms']:.1f}", f"{o['ttft_reuse_floor_ms']:.1f}"])
    stable = "\n".join(f"| {' | '.join(r)} |" for r in summ)
    print(table + "\n\n" + stable)
    sizes = [] if (tokens, contexts) == (TOKENS, CONTEXTS) else [f"--tokens {args.tokens} --contexts {args.contexts}"]
    reproduce = " ".join(["python scripts/bench_forward.py"] + sizes + [f"--requant {s}" for s in args.requant]
                         + [f"--extra {s.split('=')[0]}=DIR" for s in args.extra])
    md = [f"# Decoder forward cost: the floor under time to first token\n\n{meta['date']} · model `{man.model_id}` · "
          f"{meta['cpu']} ({meta['cpu_count']} CPUs) · {args.threads} threads · {args.rounds} rounds × {args.repeats} forwards per cell, weight formats "
          f"alternated (A B, B A) · load average {meta['load_avg_start'][0]} at start, {meta['load_avg_end'][0]} "
          "at the end\n",
          f"Reproduce: `{reproduce}`\n",
          "Median ms of one decoder forward (no LM head) over m new tokens with `context` positions already "
          "cached; the LM head is one row of the full 151,936-token head. The ttft_reuse floor is what "
          "bench_engine's `ttft_reuse_ms_1000` cannot go below with these weights: a forward over the 9 "
          "tokens that edit runs (5 changed, the rest re-laid by the anchored FIM layout) plus one head row.\n",
          table, "", stable, ""]
    (outd / "forward.md").write_text("\n".join(md))
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
