"""Cutting an automatic suggestion where the model doubts: what a typist takes with each threshold.

Why: a typist takes a ghost only when all of it is what they were about to type; bench_replay's ghost
record shows most ghosts typed past were right for their first part and wrong later. The model says how
sure it was of each token it wrote (engine ``Completion.doubts``); a suggestion cut before its first token
below a threshold is shorter but more often wholly right. This measures, at cursors inside held-out lines,
for each threshold: how often the cut suggestion is what the line says next (the typist takes it), and the
characters that saves (a proxy of bench_replay's characters saved: one fresh ghost per cursor, no
type-through, no reaction time).

Held-out code: the top-level functions of the modules bench_replay types from (more-itertools 10.5.0,
toolz 1.0.0, boltons 24.1.0; in none of Flint's corpora) *other than* the ones bench_replay types, so the
threshold is chosen on code the replay does not measure. The cursor is anywhere inside a line (after its
indentation); the truth is the rest of the line; the suffix starts at the line's end; the quick window
(768 + 256 characters), greedy, token healing on, one line.

    python scripts/bench_doubt.py --spots 150
"""

from __future__ import annotations

import argparse
import ast
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

from bench_replay import cpu_model  # noqa: E402
from replay_corpus import body_region, fetch_package  # noqa: E402

from engine.config import EngineConfig, resolve_model_dir  # noqa: E402
from engine.engine import Engine  # noqa: E402
from engine.text.postprocess import doubt_cut, lead_doubt  # noqa: E402
from engine.text.window import clip_window  # noqa: E402
from engine.types import GenParams  # noqa: E402

QUICK = (768, 256)
# the functions the replay typed before its corpus moved to replay_corpus.py (issue 32), still skipped so the
# cursors are the ones doubt.md was first measured at; none of these packages is in replay_corpus's
FUNCTIONS = [
    ("more-itertools", "10.5.0", "more_itertools/more.py", "split_when"),
    ("toolz", "1.0.0", "toolz/itertoolz.py", "reduceby"),
    ("boltons", "24.1.0", "boltons/iterutils.py", "windowed_iter"),
    ("more-itertools", "10.5.0", "more_itertools/more.py", "map_reduce"),
    ("toolz", "1.0.0", "toolz/itertoolz.py", "diff"),
    ("boltons", "24.1.0", "boltons/strutils.py", "ordinalize"),
    ("more-itertools", "10.5.0", "more_itertools/more.py", "nth_permutation"),
    ("toolz", "1.0.0", "toolz/itertoolz.py", "unique"),
    ("boltons", "24.1.0", "boltons/iterutils.py", "soft_sorted"),
    ("more-itertools", "10.5.0", "more_itertools/more.py", "unique_in_window"),
    ("toolz", "1.0.0", "toolz/dicttoolz.py", "update_in"),
    ("boltons", "24.1.0", "boltons/strutils.py", "int_ranges_from_int_list"),
]
MODULES = sorted({(pkg, ver, member) for pkg, ver, member, _ in FUNCTIONS})
THRESHOLDS = (0.0, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9)
GATES = (0.0, 0.2, 0.3, 0.5)


def other_functions(text: str, skip: set[str]) -> list[str]:
    tree = ast.parse(text)
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name not in skip]


def samples(n: int, cache: Path, seed: int) -> list[tuple[str, str, str, str]]:
    """(label, prefix, suffix, truth) at random cursors inside lines of functions bench_replay does not type."""
    rng = random.Random(seed)
    typed = {f for _, _, _, f in FUNCTIONS}
    spots: list[tuple[str, str, str, str]] = []
    for pkg, ver, member in MODULES:
        text = (fetch_package(pkg, ver, cache) / member).read_text(encoding="utf-8")
        for func in other_functions(text, typed):
            try:
                start, end = body_region(text, func)
            except ValueError:
                continue
            pos = start
            while pos < end:
                le = text.find("\n", pos, end)
                le = end if le < 0 else le
                line = text[pos:le]
                ind = len(line) - len(line.lstrip())
                if len(line.strip()) >= 8 and not line.strip().startswith(("#", '"', "'")):
                    k = rng.randrange(ind, len(line) - 1)
                    spots.append((f"{pkg}/{func}:{text.count(chr(10), 0, pos) + 1}", text[: pos + k], text[le:],
                                  line[k:]))
                pos = le + 1
    rng.shuffle(spots)
    return spots[:n]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spots", type=int, default=150)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--pkg-cache", type=Path, default=Path.home() / ".cache" / "flint-bench" / "pypi",
                    help="where the pinned wheels are (bench_replay's cache)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = ap.parse_args()
    spots = samples(args.spots, args.pkg_cache, args.seed)
    eng = Engine.load(resolve_model_dir(args.model), config=EngineConfig(threads=2, max_prefix_chars=6000,
                                                                        max_suffix_chars=600))
    eng.complete("def f(x):\n    return ", "\n", GenParams(max_tokens=2))  # warm-up
    per_spot: list[dict] = []
    for i, (label, pre, suf, truth) in enumerate(spots):
        p, s = clip_window(pre, suf, *QUICK)
        eng.reset()
        eng.drafts.forget()
        comps, _ = eng.complete(p, s, GenParams(max_tokens=32, max_lines=1))
        c = comps[0]
        line = c.text.split("\n")[0].rstrip()
        row = {"spot": label, "truth": truth, "text": line, "doubts": [list(d) for d in c.doubts if d[0] < len(line)]}
        per_spot.append(row)
        cuts = {tau: doubt_cut(line, c.doubts, tau) for tau in THRESHOLDS}
        print(f"[{i + 1}/{len(spots)}] {label}: {'=' if line == truth.rstrip() else 'x'} {line!r} "
              f"doubts {row['doubts']}", flush=True)
        row["cuts"] = {str(tau): cuts[tau] for tau in THRESHOLDS}
    rows = {}
    for tau in THRESHOLDS:
        shown = taken = saved = 0
        lens = []
        for r in per_spot:
            cut = r["cuts"][str(tau)]
            if not cut.strip():
                continue
            shown += 1
            lens.append(len(cut))
            if r["truth"].startswith(cut):
                taken += 1
                saved += len(cut)
        rows[str(tau)] = {"shown": shown, "taken": taken, "saved_chars": saved,
                          "taken_share_of_shown": round(taken / max(1, shown), 3),
                          "shown_chars_p50": statistics.median(lens) if lens else 0}
    grid = {}
    for tau in THRESHOLDS:  # the cut and the gate together: a suggestion whose first token is doubted shows nothing
        for gate in GATES:
            shown = taken = saved = 0
            for r in per_spot:
                cut = r["cuts"][str(tau)]
                if not cut.strip() or lead_doubt(r["text"], tuple(map(tuple, r["doubts"]))) < gate:
                    continue
                shown += 1
                if r["truth"].startswith(cut):
                    taken += 1
                    saved += len(cut)
            grid[f"{tau}/{gate}"] = {"shown": shown, "taken": taken, "wrong": shown - taken, "saved_chars": saved}
    total = sum(len(r["truth"].rstrip()) for r in per_spot)
    table = ["| threshold | shown | taken (wholly right) | right of shown | characters saved | shown length p50 |",
             "|---|---|---|---|---|---|"]
    for tau in THRESHOLDS:
        r = rows[str(tau)]
        table.append(f"| {'none' if tau == 0 else tau} | {r['shown']} | {r['taken']} | {r['taken_share_of_shown']:.0%} | "
                     f"{r['saved_chars']} of {total} ({r['saved_chars'] / max(1, total):.1%}) | {r['shown_chars_p50']} |")
    gtable = ["| cut below | gate below | shown | taken | wrong | characters saved |", "|---|---|---|---|---|---|"]
    for key, r in grid.items():
        tau, gate = key.split("/")
        gtable.append(f"| {tau} | {gate} | {r['shown']} | {r['taken']} | {r['wrong']} | {r['saved_chars']} of {total} "
                      f"({r['saved_chars'] / max(1, total):.1%}) |")
    table += ["", "With the gate (`lead_doubt`: a suggestion whose first visible token the model gave less than the "
              "gate shows nothing):", ""] + gtable
    print("\n".join(table))
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_model(),
            "python": platform.python_version(), "model": eng.model_id, "command": " ".join(sys.argv)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "doubt.json").write_text(json.dumps({"meta": meta, "rows": rows, "grid": grid, "spots": per_spot}, indent=1))
    (args.out / "doubt.md").write_text(
        "# Cutting automatic suggestions where the model doubts\n\n"
        f"Generated by `python scripts/bench_doubt.py {' '.join(sys.argv[1:])}` on {meta['date']} ({meta['cpu']}, "
        f"2 threads; Python {meta['python']}); model `{meta['model']}`.\n\n"
        f"{len(per_spot)} cursors at random points inside lines of the top-level functions of "
        + ", ".join(f"{p} {v} `{m}`" for p, v, m in MODULES)
        + " that bench_replay does not type (in none of Flint's corpora). One greedy line from the quick window "
        "(768 + 256 characters) per cursor; the suggestion is cut before its first token the model chose with a "
        "probability below the threshold (`engine.postprocess.doubt_cut`); it is *taken* when all of it is what "
        "the line says next, and then saves its length. A proxy of bench_replay's characters saved (one fresh "
        "ghost per cursor, no type-through, no reaction time).\n\n" + "\n".join(table) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
