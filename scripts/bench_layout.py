"""Prompt windows and layouts: what a line completion loses with a shorter window or a longer middle, and
what each costs to run.

Why: on a CPU that prefills ~40 tokens/s the full window (6,000 + 600 characters, ~1,700 tokens) takes ~40 s,
so a fresh spot is served from the quick window (768 + 256 characters) and typing keeps that window's start
for a while (it grows to 1,280); and with the anchored layout every re-anchor (once the text typed since the
anchor passes ``max_middle_chars``) re-runs the suffix. This measures, on held-out lines, the quality of:

- ``full``: the full window, anchored at the cursor's line (the engine's default once warm);
- ``small``: half the quick window (what a first suggestion could use on a slow CPU);
- ``quick``: the quick window, anchored at the cursor's line (a fresh spot before session 11);
- ``quick-served``: the quick window, the anchor where the engine puts a new one (FRESH_MIDDLE_CHARS back);
- ``quick-grown``: the quick window after 512 characters typed into it (1,280 + 256);
- ``middle-N``: the grown quick window with the anchor N characters back (the text typed since it after
  the middle token), i.e. what ``max_middle_chars = N`` lets the prompt become between re-anchors.

Held-out code: function bodies of more-itertools 10.5.0, toolz 1.0.0 and boltons 24.1.0 (bench_replay's
pinned wheels; in none of Flint's corpora). The cursor is inside a line after a non-word character; the
truth is the rest of the line; the suffix starts at the line's end. Greedy, token healing on, one line.

    python scripts/bench_layout.py --lines 20
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_quality import prefix_agreement  # noqa: E402
from bench_replay import FUNCTIONS, body_region, cpu_model, fetch_package  # noqa: E402

from engine.config import EngineConfig, resolve_model_dir  # noqa: E402
from engine.decoding.prompt import FRESH_MIDDLE_CHARS, MAX_MIDDLE_CHARS  # noqa: E402
from engine.engine import Engine  # noqa: E402
from engine.text.window import clip_window  # noqa: E402
from engine.types import GenParams  # noqa: E402

SMALL = (384, 128)
QUICK = (768, 256)
GROWN = (768 + 512, 256)


def samples(n: int, cache: Path, seed: int) -> list[tuple[str, str, str, str]]:
    """(label, prefix, suffix, truth) at cursors inside lines of the pinned functions' bodies."""
    rng = random.Random(seed)
    spots: list[tuple[str, str, str, str]] = []
    for pkg, ver, member, func in FUNCTIONS:
        text = (fetch_package(pkg, ver, cache) / member).read_text(encoding="utf-8")
        start, end = body_region(text, func)
        pos = start
        while pos < end:
            le = text.find("\n", pos, end)
            le = end if le < 0 else le
            line = text[pos:le]
            ind = len(line) - len(line.lstrip())
            if len(line.strip()) >= 12 and not line.strip().startswith("#"):
                cands = [k for k in range(ind + 1, len(line) - 5) if not line[k - 1].isalnum()]
                if cands:
                    k = rng.choice(cands)
                    spots.append((f"{pkg}/{func}:{text.count(chr(10), 0, pos) + 1}", text[: pos + k], text[le:],
                                  line[k:]))
            pos = le + 1
    rng.shuffle(spots)
    return spots[:n]


def prefix_share(got: str, truth: str) -> float:
    """Share of the true line the suggestion gets right from its start."""
    return prefix_agreement(got, truth) * max(len(got), len(truth)) / max(1, len(truth))


def run(eng: Engine, prefix: str, suffix: str, window: tuple[int, int], middle: int | None) -> tuple[str, int, float]:
    """(first line, prompt tokens, seconds) for one layout, on a cold cache. ``middle`` None: the anchor at
    the cursor's line; -1: where the engine puts a new anchor (FRESH_MIDDLE_CHARS back, what is served)."""
    p, s = clip_window(prefix, suffix, *window)
    eng.reset()
    eng.drafts.forget()
    eng.config.fast.fresh_middle_chars = FRESH_MIDDLE_CHARS if middle == -1 else 0
    if middle is not None and middle >= 0:  # the anchor ``middle`` characters back, at a line start
        nl = p.rfind("\n", 0, max(0, len(p) - middle))
        eng.rows.anchor = (p[: nl + 1], s)
        eng.config.fast.max_middle_chars = len(p) - (nl + 1) + 1
    else:
        eng.config.fast.max_middle_chars = MAX_MIDDLE_CHARS
    t0 = time.perf_counter()
    comps, t = eng.complete(p, s, GenParams(max_tokens=24, max_lines=1))
    return comps[0].text.split("\n")[0], t.prompt_tokens, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=20)
    ap.add_argument("--middles", default="480,960", help="comma-separated middle lengths (characters)")
    ap.add_argument("--no-full", action="store_true", help="skip the full window (the slowest row)")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--pkg-cache", type=Path, default=Path.home() / ".cache" / "flint-bench" / "pypi",
                    help="where the pinned wheels are (bench_replay's cache)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = ap.parse_args()
    layouts: list[tuple[str, tuple[int, int], int | None]] = []
    if not args.no_full:
        layouts.append(("full", (6000, 600), None))
    layouts += [("small", SMALL, None), ("quick", QUICK, None), ("quick-served", QUICK, -1), ("quick-grown", GROWN, None)]
    layouts += [(f"middle-{m}", GROWN, int(m)) for m in args.middles.split(",") if m]
    spots = samples(args.lines, args.pkg_cache, args.seed)
    mdir = resolve_model_dir(args.model)
    eng = Engine.load(mdir, config=EngineConfig(threads=2, max_prefix_chars=6000, max_suffix_chars=600))
    eng.complete("def f(x):\n    return ", "\n", GenParams(max_tokens=2))  # warm-up
    res: dict[str, dict] = {name: {"exact": 0, "share": [], "tokens": [], "s": []} for name, _, _ in layouts}
    for i, (label, pre, suf, truth) in enumerate(spots):
        for name, window, middle in layouts:  # every layout on a spot before the next spot
            got, ntok, secs = run(eng, pre, suf, window, middle)
            r = res[name]
            r["exact"] += got.rstrip() == truth.rstrip()
            r["share"].append(prefix_share(got, truth))
            r["tokens"].append(ntok)
            r["s"].append(secs)
        print(f"[{i + 1}/{len(spots)}] {label}: " + ", ".join(
            f"{n} {'=' if res[n]['share'][-1] >= 1 else round(res[n]['share'][-1], 2)}" for n, _, _ in layouts),
            flush=True)
    rows = {n: {"exact": r["exact"], "n": len(spots), "share": round(statistics.mean(r["share"]), 3),
                "prompt_tokens_p50": statistics.median(r["tokens"]), "seconds_p50": round(statistics.median(r["s"]), 2)}
            for n, r in res.items()}
    table = ["| layout | window (prefix + suffix chars) | exact line | mean share of the line | prompt tokens p50 | "
             "cold run p50 (s) |", "|---|---|---|---|---|---|"]
    for name, window, middle in layouts:
        r = rows[name]
        table.append(f"| {name} | {window[0]} + {window[1]}{f', middle {middle}' if middle else ''} | "
                     f"{r['exact']}/{r['n']} | {r['share']} | {r['prompt_tokens_p50']:.0f} | {r['seconds_p50']} |")
    print("\n".join(table))
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_model(),
            "python": platform.python_version(), "model": eng.model_id, "command": " ".join(sys.argv)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "layout.json").write_text(json.dumps({"meta": meta, "rows": rows,
                                                      "spots": [s[0] for s in spots]}, indent=1))
    (args.out / "layout.md").write_text(
        "# Prompt windows and layouts: quality and cost of a line completion\n\n"
        f"Generated by `python scripts/bench_layout.py {' '.join(sys.argv[1:])}` on {meta['date']} ({meta['cpu']}, "
        f"2 threads; Python {meta['python']}); model `{meta['model']}`.\n\n"
        f"{len(spots)} cursors inside lines of function bodies from more-itertools 10.5.0, toolz 1.0.0 and boltons "
        "24.1.0 (bench_replay's pinned wheels, in none of Flint's corpora), after a non-word character; the truth "
        "is the rest of the line, the suffix starts at its end. Greedy, token healing on, one line, a cold KV "
        "cache for every run (the seconds are a fresh spot's whole prefill + generation).\n\n"
        "*full*: the full window, anchored at the cursor's line; *small*: half the quick window; *quick*: the quick first window; "
        "*quick-served*: the quick window with the anchor where the engine puts a new one (prompt.FRESH_MIDDLE_CHARS "
        "back, at a line start: what a fresh spot is served from); *quick-grown*: "
        "the quick window 512 typed characters later (its start stays put: engine QUICK_SLACK); *middle-N*: the "
        "grown window with the anchor N characters back, the text typed since it after the middle token "
        "(what FastPaths.max_middle_chars = N allows between re-anchors, each of which re-runs the suffix).\n\n"
        + "\n".join(table) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
