#!/usr/bin/env python3
"""What a model directory costs a user besides its speed: disk, cold start (process start to a warmed engine)
and the resident memory of a process that has served a few completions. Arms are model directories, measured
one process at a time, alternated A B, B A over the rounds.

    python scripts/bench_footprint.py --arm int8=DIR --arm gguf=DIR [--rounds 5] [--out docs/benchmarks]
    python scripts/bench_footprint.py --arm before=DIR@/path/to/other/checkout --arm after=DIR   # code vs code

An arm's ``@ROOT`` runs the measured process from another checkout's engine (the same model directory
measured before and after a change).

Writes footprint.json and footprint.md under --out (the CPU recorded with them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.benchstats import median  # noqa: E402

PROMPTS = [("def fibonacci(n):\n    ", "\n"), ("import os\n\ndef list_py(root):\n    ", "\n"),
           ("class Stack:\n    def __init__(self):\n        ", "\n")]


def worker(model_dir: str) -> None:
    """Runs in the measured process: load + warm, then three completions; prints one JSON line."""
    t0 = float(os.environ["FLINT_BENCH_T0"])
    from engine.config import EngineConfig
    from engine.engine import Engine
    from engine.types import GenParams

    eng = Engine.load(model_dir, config=EngineConfig(threads=2), warm=True)
    ready = time.time() - t0
    rss_ready = _rss()["VmRSS"]
    took = []
    for pre, suf in PROMPTS:
        eng.reset()
        t1 = time.perf_counter()
        eng.complete(pre, suf, GenParams(max_tokens=24))
        took.append(time.perf_counter() - t1)
    print(json.dumps({"ready_s": ready, "first_completion_s": took[0], "next_completions_s": took[1:], "rss_ready_mb": rss_ready, "load_s": eng.load_s, "warm_s": eng.warm_s, **{k.lower() + "_mb": v for k, v in _rss().items()}}))


def _rss() -> dict[str, float]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            out[k] = int(v.split()[0]) / 1024
    return out


def measure(arm: str) -> dict:
    model_dir, _, root = arm.partition("@")
    root = root or str(ROOT)
    env = dict(os.environ, FLINT_BENCH_T0=repr(time.time()), PYTHONPATH=root)
    r = subprocess.run([sys.executable, __file__, "--worker", model_dir, "--worker-root", root], capture_output=True,
                       text=True, env=env, cwd=root, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def cpu_name() -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    # one description of the CPU for every benchmark (family, model, flags)
    from bench_replay import cpu_model

    return cpu_model()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arm", action="append", default=[], metavar="LABEL=DIR")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--worker-root", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        sys.path.insert(0, args.worker_root or str(ROOT))  # that checkout's engine, ahead of this one's
        worker(args.worker)
        return 0
    arms = dict(a.split("=", 1) for a in args.arm)
    samples: dict[str, list[dict]] = {k: [] for k in arms}
    load_start = os.getloadavg()
    for r in range(args.rounds):
        for label, d in (list(arms.items()) if r % 2 == 0 else list(arms.items())[::-1]):
            samples[label].append(measure(d))
    rows = {}
    for label, d in arms.items():
        s = samples[label]
        rows[label] = {
            "dir": d,
            "disk_mb": round(sum(f.stat().st_size for f in Path(d.partition("@")[0]).rglob("*") if f.is_file()) / 1e6,
                             1),
            "ready_s": round(median([x["ready_s"] for x in s]), 3),
            "ready_s_range": [round(min(x["ready_s"] for x in s), 3), round(max(x["ready_s"] for x in s), 3)],
            "load_s": round(median([x.get("load_s", 0.0) for x in s]), 3),
            "warm_s": round(median([x.get("warm_s", 0.0) for x in s]), 3),
            # the first request after ready (a warm-up too short would show here), and the later ones
            "first_completion_s": round(median([x.get("first_completion_s", 0.0) for x in s]), 3),
            "next_completions_s": round(median([y for x in s for y in x.get("next_completions_s", [])] or [0.0]), 3),
            "rss_ready_mb": round(median([x["rss_ready_mb"] for x in s]), 1),
            "rss_served_mb": round(median([x["vmrss_mb"] for x in s]), 1),
            "rss_peak_mb": round(median([x["vmhwm_mb"] for x in s]), 1),
            "manifest": json.loads((Path(d.partition("@")[0]) / "flint.json").read_text()).get("quant"),
        }
    meta = {"date": time.strftime("%Y-%m-%d %H:%M"), "cpu": cpu_name(), "cores": os.cpu_count(),
            "rounds": args.rounds, "load_avg_start": round(load_start[0], 2),
            "load_avg_end": round(os.getloadavg()[0], 2), "command": " ".join(["python scripts/bench_footprint.py", *sys.argv[1:]])}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "footprint.json").write_text(json.dumps({"meta": meta, "rows": rows, "samples": samples}, indent=1))
    lines = ["| arm | disk MB | ready s (median, min-max) | of it: Engine() s, warm-up s | first / later completion s "
             "| RSS ready MB | RSS after 3 completions MB | peak MB |", "|---|---|---|---|---|---|---|---|"]
    for label, r in rows.items():
        lines.append(f"| {label} | {r['disk_mb']:.0f} | {r['ready_s']:.2f} ({r['ready_s_range'][0]:.2f}-"
                     f"{r['ready_s_range'][1]:.2f}) | {r['load_s']:.2f}, {r['warm_s']:.2f} | "
                     f"{r['first_completion_s']:.2f} / {r['next_completions_s']:.2f} | {r['rss_ready_mb']:.0f} | "
                     f"{r['rss_served_mb']:.0f} | {r['rss_peak_mb']:.0f} |")
    table = "\n".join(lines)
    print(table)
    md = out / "footprint.md"
    # sections other scripts write below the table (bench_quickstart.sh's "## The quick start ...") stay
    rest = md.read_text().partition("\n## ")[2] if md.exists() else ""
    md.write_text(
        f"# Model footprint: disk, cold start, memory\n\n{meta['date']} · {meta['cpu']} · "
        f"{args.rounds} rounds, arms alternated (A B, B A) · load average {meta['load_avg_start']} at start, "
        f"{meta['load_avg_end']} at the end · ready = process start to an engine loaded and warmed "
        "(Engine.load, warm=True), imports included; RSS after load and after three short completions.\n\n"
        f"Reproduce: `{meta['command']}`\n\n{table}\n" + (f"\n## {rest}" if rest else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
