#!/usr/bin/env python3
"""A keystroke the suggestion did not foresee, in the engine alone: how long until its first visible text,
and what the engine spends on it (issue 47: on the AVX2-only EPYC a fifth of keystrokes were superseded, the
next key coming 0.10-0.15 s after the last one, before any answer).

For functions of the replay's tuning half (Python), at positions inside a line: the text up to the position
is completed to its end (the ghost on screen), then the next character of the real code is typed; where the
ghost did not start with it, the engine completes the new text as the server would (one greedy row, the quick
window, token healing) and the sample records the milliseconds to the first streamed token, to the first
streamed text that shows something, the prompt tokens it ran and the process CPU time until that text.
Each arm is a tree (a ``git archive`` with a COMMIT file) run in its own process, arms alternated per round:

    python scripts/bench_keystroke.py --arm main=/tmp/arm-main --arm cand=/tmp/arm-cand --rounds 2 --samples 40

Writes docs/benchmarks/keystroke.json and keystroke.md (``--out DIR`` elsewhere).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

PARAMS = dict(max_tokens=72, max_lines=2, n=1, quick_start=True)  # an automatic request at a line's end


def positions(segs: list, samples: int, seed: int) -> list[tuple[str, str, str]]:
    """(prefix, typed character, suffix) inside lines of the typed regions, in a seeded order."""
    rng = random.Random(seed)
    out = []
    for seg in segs:
        at = 0
        for line in seg.typed.split("\n"):
            body = line.strip()
            if len(body) > 12:
                k = at + len(line) - len(line.lstrip()) + rng.randint(3, len(body) - 2)
                if not seg.typed[k].isspace():
                    out.append((seg.before + seg.typed[:k], seg.typed[k], seg.after))
            at += len(line) + 1
    rng.shuffle(out)
    return out[: samples * 3]  # some are foreseen by their ghost: skipped


def typed(eng, params, prefix: str, suffix: str) -> tuple[list[tuple[float, float, str]], object]:
    """Complete the text with the typed character until something shows: (ms, CPU ms, text) per streamed
    token, and the engine's timings."""
    from engine.types import CancelToken

    marks: list[tuple[float, float, str]] = []
    cancel = CancelToken()
    c0, t0 = time.process_time(), time.perf_counter()

    def on_token(_i: int, text: str, _doubts: object = None) -> None:
        marks.append(((time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000, text))
        if text.strip() or len(marks) >= 8:
            cancel.cancel("shown")

    _, t = eng.complete(prefix, suffix, params, cancel=cancel, on_token=on_token)
    return marks, t


def worker(samples: int, seed: int, spots_path: str) -> None:
    """In the arm's tree (PYTHONPATH): one JSON line per sample on stdout."""
    from engine.config import EngineConfig
    from engine.engine import Engine
    from engine.types import GenParams

    eng = Engine.load(None, config=EngineConfig())
    params = GenParams(**PARAMS)
    done = 0
    for prefix, ch, suffix in json.loads(Path(spots_path).read_text()):
        if done >= samples:
            break
        ghost, _ = eng.complete(prefix, suffix, params)
        if ghost[0].text.startswith(ch):
            continue
        marks, t = typed(eng, params, prefix + ch, suffix)
        shown = next((m for m in marks if m[2].strip()), None)
        if t.window != "quick" or shown is None:
            continue  # a cold window's prefill, or nothing to show: not the keystroke path measured here
        done += 1
        print(json.dumps({"first_ms": marks[0][0], "shown_ms": shown[0], "shown_cpu_ms": shown[1],
                          "ran": t.prompt_tokens - t.reused_tokens, "steps": len(marks)}), flush=True)


def main() -> int:
    from bench_meta import arm_commit, cpu_info, cpu_line, load_average
    from benchstats import median, percentile
    from replay_corpus import choose, pick, segments

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arm", action="append", default=[], help="NAME=TREE (at least one)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--samples", type=int, default=40, help="keystrokes per arm and round")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    p.add_argument("--worker", nargs=3, metavar=("SAMPLES", "SEED", "SPOTS"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        worker(int(a.worker[0]), int(a.worker[1]), a.worker[2])
        return 0
    arms = dict(x.split("=", 1) for x in a.arm)
    if not arms:
        p.error("--arm NAME=TREE")
    cache = Path.home() / ".cache" / "flint-bench" / "pypi"
    segs = segments(pick(choose(cache), "tuning"), cache)
    info, load0 = cpu_info(), load_average()
    rows: dict[str, list[dict]] = {name: [] for name in arms}
    spots = a.out / "keystroke.spots.tmp.json"
    a.out.mkdir(parents=True, exist_ok=True)
    for r in range(a.rounds):
        spots.write_text(json.dumps(positions(segs, a.samples, a.seed + r)))
        order = list(arms) if r % 2 == 0 else list(reversed(arms))
        for name in order:
            env = {**os.environ, "PYTHONPATH": arms[name]}
            cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(a.samples), str(a.seed + r),
                   str(spots)]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=arms[name]).stdout
            got = [dict(json.loads(ln), round=r) for ln in out.splitlines() if ln.startswith("{")]
            rows[name] += got
            print(f"[{name} r{r}] {len(got)} keystrokes: shown p50 "
                  f"{median(g['shown_ms'] for g in got):.1f} ms", flush=True)
    spots.unlink(missing_ok=True)
    summary = {}
    for name, got in rows.items():
        summary[name] = {
            "commit": arm_commit(arms[name]), "keystrokes": len(got),
            **{f"{k}_{q}": percentile([g[k] for g in got], q) for k in ("first_ms", "shown_ms", "shown_cpu_ms")
               for q in (50, 90)},
            "ran_none": sum(g["ran"] == 0 for g in got) / max(1, len(got)),
            "shown_after_one_token": sum(g["steps"] == 1 for g in got) / max(1, len(got))}
    meta = {"date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "cpu": cpu_line(info), "cpu_flags": info["flags"],
            "load_average": load0, "load_average_end": load_average(), "rounds": a.rounds, "samples": a.samples,
            "seed": a.seed, "command": "python scripts/bench_keystroke.py " + " ".join(sys.argv[1:])}
    (a.out / "keystroke.json").write_text(json.dumps({"meta": meta, "summary": summary, "samples": rows}, indent=1))
    lines = ["# A keystroke the suggestion did not foresee (engine alone)", "",
             f"{meta['date']} · {meta['cpu']} · {a.rounds} rounds × up to {a.samples} keystrokes per arm, arms "
             f"alternated · load average {load0} at start, {meta['load_average_end']} at the end", "",
             f"Reproduce: `{meta['command']}`", "",
             "Milliseconds from `complete()` with the typed character to the first streamed token and to the first "
             "text that shows something (median, p90); CPU: the process's CPU time until that text (both ONNX "
             "Runtime threads); ran none: the share whose prompt ran no token. Spots: up to 3 × samples positions "
             "inside lines per round, in a seeded order; one counts when its ghost did not start with the typed "
             "character, the new text ran the quick window and something showed within 8 tokens.", "",
             "| arm | commit | keystrokes | first token p50 / p90 | text shown p50 / p90 | CPU to text p50 | ran none "
             "| shown after one token |", "|---|---|---|---|---|---|---|---|"]
    for name, s in summary.items():
        lines.append(f"| {name} | {s['commit']} | {s['keystrokes']} | {s['first_ms_50']:.1f} / {s['first_ms_90']:.1f} "
                     f"| {s['shown_ms_50']:.1f} / {s['shown_ms_90']:.1f} | {s['shown_cpu_ms_50']:.1f} "
                     f"| {s['ran_none']:.0%} | {s['shown_after_one_token']:.0%} |")
    (a.out / "keystroke.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-len(summary) - 2:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
