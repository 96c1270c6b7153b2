#!/usr/bin/env python3
"""One MatMulNBits node per configuration, timed alone: which block layouts onnxruntime's CPU kernel runs fast.

    python scripts/bench_matmulnbits.py [--m 1,9] [--repeats 200]

Each configuration is a tiny graph (the decoder's shapes: qkv, o, gate, gate+up, down) with random weights;
configurations are alternated over the rounds. Prints median microseconds per call and writes
docs/benchmarks/matmulnbits.md (``--out``). A configuration is ``<bits>b<block>a<accuracy_level>``, plus
``off`` for Q4_K's block-offset correction beside it (qwen2_graph.linear) or ``zp`` for uint8 zero points.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHAPES = {"qkv": (1152, 896), "o": (896, 896), "gate": (4864, 896), "gate+up": (9728, 896), "down": (896, 4864)}


def node_model(n: int, k: int, bits: int, block: int, acc: int, zp: bool, offset: bool, path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nb = k // block
    packed = rng.integers(0, 256, (n, nb, block * bits // 8), dtype=np.uint8)
    scales = (rng.random(n * nb, dtype=np.float32) * 0.01).astype(np.float32)
    inits = [numpy_helper.from_array(packed, "B"), numpy_helper.from_array(scales, "S")]
    ins = ["x", "B", "S"]
    if zp:
        zb = (nb * bits + 7) // 8
        inits.append(numpy_helper.from_array(rng.integers(0, 256, n * zb, dtype=np.uint8), "Z"))
        ins.append("Z")
    nodes = [helper.make_node("MatMulNBits", ins, ["y0" if offset else "y"], domain="com.microsoft", K=k, N=n,
                              bits=bits, block_size=block, accuracy_level=acc)]
    if offset:  # the Q4_K offset path of qwen2_graph.linear
        nb32 = k // 32
        inits += [numpy_helper.from_array(np.array([0, 0, nb32, 32], dtype=np.int64), "shape"),
                  numpy_helper.from_array(np.array([-1], dtype=np.int64), "axes"),
                  numpy_helper.from_array(rng.random((nb32, n), dtype=np.float32), "off")]
        nodes += [helper.make_node("Reshape", ["x", "shape"], ["xb"]),
                  helper.make_node("ReduceSum", ["xb", "axes"], ["sums"], keepdims=0),
                  helper.make_node("MatMul", ["sums", "off"], ["corr"]),
                  helper.make_node("Sub", ["y0", "corr"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "M", k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "M", n])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10
    onnx.save_model(m, str(path))


def main() -> int:
    import onnxruntime as ort

    ap = argparse.ArgumentParser()
    ap.add_argument("--m", default="1,9")
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--configs", default="8b128a4,8b64a4,8b32a4,8b16a4,4b32a4,4b32a4off,8b32a0")
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks"))
    ap.add_argument("--no-prepack", action="store_true", help="session.disable_prepacking=1")
    args = ap.parse_args()
    ms = [int(x) for x in args.m.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="flint-mnb-"))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if args.no_prepack:
        so.add_session_config_entry("session.disable_prepacking", "1")
    sess = {}
    for shape in args.shapes.split(","):
        n, k = SHAPES[shape]
        for c in args.configs.split(","):
            bits, rest = int(c[0]), c[2:]
            block = int(rest.split("a")[0])
            acc = int(rest.split("a")[1][:1])
            zp, off = "zp" in c, "off" in c
            p = tmp / f"{shape}-{c}.onnx"
            node_model(n, k, bits, block, acc, zp, off, p)
            sess[(shape, c)] = ort.InferenceSession(str(p), so, providers=["CPUExecutionProvider"])
    res: dict = {}
    rng = np.random.default_rng(1)
    load_start = os.getloadavg()[0]
    for r in range(args.rounds):
        for (shape, c), s in (list(sess.items()) if r % 2 == 0 else list(sess.items())[::-1]):
            for m in ms:
                x = rng.standard_normal((1, m, SHAPES[shape][1]), dtype=np.float32)
                s.run(None, {"x": x})
                xs = []
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    s.run(None, {"x": x})
                    xs.append(time.perf_counter() - t0)
                res.setdefault((shape, c, m), []).extend(xs)
    configs = args.configs.split(",")
    lines = ["| shape (N x K) | m | " + " | ".join(configs) + " |", "|---|---|" + "---|" * len(configs)]
    for shape in args.shapes.split(","):
        for m in ms:
            lines.append(f"| {shape} ({SHAPES[shape][0]} x {SHAPES[shape][1]}) | {m} | "
                         + " | ".join(f"{statistics.median(res[(shape, c, m)]) * 1e6:.0f}" for c in configs) + " |")
    table = "\n".join(lines)
    print(table)
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_replay import cpu_model

    cmd = " ".join(["python scripts/bench_matmulnbits.py", *sys.argv[1:]])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    md = out / "matmulnbits.md"
    rest = md.read_text().partition("\n## ")[2] if md.exists() else ""  # notes written under the table stay
    md.write_text(
        f"# One MatMulNBits node per block layout\n\n{time.strftime('%Y-%m-%d %H:%M')} · {cpu_model()} · "
        f"onnxruntime {ort.__version__} · 2 threads · {args.rounds} rounds × {args.repeats} calls, configurations "
        f"alternated · load average {load_start:.2f} at start, {os.getloadavg()[0]:.2f} at the end"
        f"{' · prepacking off' if args.no_prepack else ''}\n\nReproduce: `{cmd}`\n\n"
        "Median µs per call of one node with the decoder's shapes (random weights). `8b32a4` is how the `gguf` "
        "precision stores Q5_0 and Q8_0 matrices, `8b16a4` Q6_K, `4b32a4off` Q4_K; `8b128a4` is the `int8` "
        "precision.\n\n" + table + "\n" + (f"\n## {rest}" if rest else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
