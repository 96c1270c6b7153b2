#!/usr/bin/env python3
"""Repository context (issue 17): completion quality with vs without the context block, in one run, and the
cost of a keystroke with a full block in front of the file window.

    flock /tmp/flint-heavy.lock env FLINT_CACHE_DIR=$(mktemp -d) python scripts/bench_context.py

Held-out code: pinned multi-module PyPI packages (fetched now with `pip download --no-deps`; none is in
Flint's corpora, the stdlib, pygls or lsprotocol). Cross-file lines: single-line statements in a function
that call a name the module imports from a sibling module; the "user" has that sibling open in another tab
and the module open with the line emptied (cursor after its indentation). In-file lines: other single-line
statements of the same modules (no call to a sibling's name), with the sibling open too. Each line is
completed with no context and with the block at each budget, by one engine (greedy, one line).

Measured at the engine level: ``Engine.build`` has no context parameter yet, so a subclass here lays the
prompt out with ``engine.prompt.build_prompt(..., context=...)`` exactly as the integration would.

Writes docs/benchmarks/context.json and docs/benchmarks/context.md.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.context import Workspace, python_definitions, resolve_imports  # noqa: E402
from engine.engine import Engine, EngineConfig  # noqa: E402
from engine.prompt import Prompt, build_prompt, choose_anchor, clip_window, context_ids  # noqa: E402
from engine.types import GenParams  # noqa: E402

PACKAGES = ("click==8.1.7", "marshmallow==3.21.3", "tomlkit==0.13.2", "httpx==0.27.0")


class ContextEngine(Engine):
    """Engine whose prompts carry a repository context block (the change engine.py needs: a ``context``
    argument to build / complete / prefill, and the window cut keeping ``Prompt.head``)."""

    context: list[int] = []

    def build(self, prefix: str, suffix: str, heal: bool = True, max_new: int = 64,
              previous: tuple[str, str] | None = None) -> Prompt:
        prefix, suffix = clip_window(prefix, suffix, self.config.max_prefix_chars, self.config.max_suffix_chars)
        anchor = None
        if self.fim is not None and self.config.fast.anchored_fim:
            anchor, suffix = choose_anchor(prefix, suffix, previous)
        pr = build_prompt(self.tok, prefix, suffix, self.fim, bos_id=self.manifest.bos_token_id, heal=heal,
                          anchor=anchor, context=self.context)
        if anchor is not None:
            pr.anchor = (prefix[:anchor], suffix)
        limit = self.decoder.capacity - max_new - 16
        if len(pr.ids) > limit:  # drop the oldest file-window tokens, never the context block
            excess = len(pr.ids) - limit
            pr.ids = pr.ids[: pr.head] + pr.ids[pr.head + excess:]
        return pr


# ---- held-out code ---------------------------------------------------------------------------------------
def fetch(packages: tuple[str, ...], dest: Path) -> Path:
    """Download and unpack the wheels into one workspace folder."""
    wheels = dest / "wheels"
    ws = dest / "ws"
    ws.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
                    "-d", str(wheels), *packages], check=True)
    for w in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(w) as z:
            z.extractall(ws)
    return ws


def _calls(stmt: ast.stmt) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for n in ast.walk(stmt):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Name):
                out.append((f.id, None))
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                out.append((f.value.id, f.attr))
    return out


def cases(root: Path, seed: int) -> tuple[list[dict], list[dict]]:
    """(cross-file lines, in-file lines) of every module under root: dicts with file, sibling, prefix,
    suffix, expected."""
    cross: list[dict] = []
    infile: list[dict] = []
    for f in sorted(root.rglob("*.py")):
        if ".dist-info" in str(f):
            continue
        text = f.read_text(encoding="utf-8")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        imps = [i for i in resolve_imports(text, f, [root]) if i.module != f.resolve()]
        if not imps:
            continue
        by_local = {i.local: i for i in imps}
        defs_cache: dict[Path, dict] = {}
        lines = text.splitlines(keepends=True)
        starts = [0]
        for ln in lines:
            starts.append(starts[-1] + len(ln))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for stmt in ast.walk(fn):
                if not isinstance(stmt, ast.stmt) or isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                        ast.ClassDef, ast.If, ast.For, ast.While,
                                                                        ast.With, ast.Try)):
                    continue
                if stmt.end_lineno != stmt.lineno:
                    continue
                line = lines[stmt.lineno - 1]
                code = line.strip()
                if not 12 <= len(code) <= 100 or "#" in code or code.startswith(("'", '"')):
                    continue
                indent = line[: len(line) - len(line.lstrip())]
                s = starts[stmt.lineno - 1]
                case = {"file": f, "prefix": text[:s] + indent, "suffix": "\n" + text[starts[stmt.lineno]:],
                        "expected": code, "line": stmt.lineno}
                sib = None
                for local, attr in _calls(stmt):
                    imp = by_local.get(local)
                    if imp is None:
                        continue
                    name = imp.attr if imp.attr is not None else attr
                    if name is None:
                        continue
                    defs = defs_cache.setdefault(imp.module, python_definitions(imp.module.read_text()))
                    if name in defs:
                        sib = imp.module
                        break
                if sib is not None:
                    cross.append({**case, "sibling": sib})
                elif not any(local in by_local for local, _ in _calls(stmt)):
                    infile.append({**case, "sibling": imps[0].module})
    rnd = random.Random(seed)
    rnd.shuffle(cross)
    rnd.shuffle(infile)
    return cross, infile


# ---- measuring ---------------------------------------------------------------------------------------------
def block_for(eng: Engine, root: Path, case: dict, budget: int) -> tuple[list[int], list[str]]:
    if budget <= 0:
        return [], []
    ws = Workspace([root], budget=budget)
    ws.open(case["sibling"], case["sibling"].read_text())
    text = case["prefix"] + case["suffix"]
    ws.open(case["file"], text)
    ws.focus(case["file"])

    def count(s: str) -> int:
        return len(eng.tok.encode(s))

    block = ws.gather(case["file"], text, len(case["prefix"]), count=count)
    if block is None:
        return [], []
    return context_ids(eng.tok, block.repo, block.chunks, block.current_path), block.labels()


def edit_sim(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()


def complete_line(eng: ContextEngine, ctx: list[int], case: dict) -> tuple[str, dict]:
    eng.context = ctx
    eng.reset()
    eng.forget_outputs()
    outs, t = eng.complete(case["prefix"], case["suffix"], GenParams(max_tokens=48, max_lines=1))
    got = outs[0].text.split("\n")[0].strip()
    return got, {"raw": outs[0].text, "finish": outs[0].finish_reason, "prompt_tokens": t.prompt_tokens,
                 "prefill_ms": t.prefill_ms}


def keystrokes(eng: ContextEngine, ctx: list[int], case: dict, n: int = 3) -> list[float]:
    """Time to first token after each of the first ``n`` typed characters of the line, the cache warm
    from the previous state (as bench_engine's keystroke)."""
    eng.context = ctx
    eng.reset()
    eng.complete(case["prefix"], case["suffix"], GenParams(max_tokens=1))  # the user looked at the spot
    out = []
    for i in range(1, n + 1):
        _, t = eng.complete(case["prefix"] + case["expected"][:i], case["suffix"], GenParams(max_tokens=1))
        out.append(t.ttft_ms)
    return out


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, max(0, round(q / 100 * (len(xs) - 1))))]


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return "unknown"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--budgets", default="512,1024")
    ap.add_argument("--cross", type=int, default=40, help="cross-file lines (spread over the packages)")
    ap.add_argument("--infile", type=int, default=16)
    ap.add_argument("--keys", type=int, default=8, help="spots timed for keystrokes")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--max-prefix-chars", type=int, default=0, help="file window before the cursor (0: the engine's)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks" / "context"))
    args = ap.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    arms = [0] + budgets

    tmp = Path(tempfile.mkdtemp(prefix="flint-bench-context-"))
    root = fetch(PACKAGES, tmp)
    # an even share of lines per package
    cross_all, infile_all = cases(root, args.seed)
    pkgs = sorted({c["file"].relative_to(root).parts[0] for c in cross_all})

    def spread(items: list[dict], n: int) -> list[dict]:
        per = {p: [c for c in items if c["file"].relative_to(root).parts[0] == p] for p in pkgs}
        out: list[dict] = []
        while len(out) < n and any(per.values()):
            for p in pkgs:
                if per[p] and len(out) < n:
                    out.append(per[p].pop(0))
        return out

    cross, infile = spread(cross_all, args.cross), spread(infile_all, args.infile)
    print(f"packages: {', '.join(PACKAGES)}; cross-file candidates {len(cross_all)}, in-file {len(infile_all)}; "
          f"using {len(cross)} + {len(infile)}", flush=True)

    rss0 = rss_mb()
    cfg = EngineConfig(threads=args.threads, capacity=2048 + max(budgets))
    if args.max_prefix_chars:
        cfg.max_prefix_chars = args.max_prefix_chars
    t0 = time.perf_counter()
    eng = ContextEngine.load(args.model, config=cfg)
    print(f"model {eng.model_id} loaded in {time.perf_counter() - t0:.1f} s; KV capacity {eng.decoder.capacity}",
          flush=True)
    marks = {m: eng.tok.special_id(m) for m in ("<|repo_name|>", "<|file_sep|>", "<|fim_prefix|>")}
    print(f"repository markers in the tokenizer: {marks}", flush=True)
    assert all(v is not None for v in marks.values()), "the model's tokenizer lacks the repository markers"

    # memory: the same spots without, then with the largest block (KV pages are touched as positions fill)
    mem_spots = cross[:3]
    for case in mem_spots:
        complete_line(eng, [], case)
    rss_none = rss_mb()
    for case in mem_spots:
        complete_line(eng, block_for(eng, root, case, max(budgets))[0], case)
    rss_ctx = rss_mb()
    m = eng.manifest
    kv_per_token = 2 * m.num_layers * m.num_kv_heads * m.head_dim * 4 * eng.config.batch_max
    print(f"RSS: before load {rss0:.0f} MB, no context {rss_none:.0f} MB, budget {max(budgets)} {rss_ctx:.0f} MB; "
          f"KV {kv_per_token / 1024:.0f} KiB per position (all {eng.config.batch_max} rows)", flush=True)

    results: dict[str, list[dict]] = {"cross": [], "infile": []}
    for kind, items in (("cross", cross), ("infile", infile)):
        for i, case in enumerate(items):
            row: dict = {"file": str(case["file"].relative_to(root)), "line": case["line"],
                         "expected": case["expected"], "arms": {}}
            for b in arms:
                ctx, labels = block_for(eng, root, case, b)
                got, info = complete_line(eng, ctx, case)
                row["arms"][str(b)] = {"got": got, "exact": got == case["expected"],
                                       "sim": edit_sim(got, case["expected"]), "context_tokens": len(ctx),
                                       "chunks": labels, **info}
            results[kind].append(row)
            print(f"{kind} {i + 1}/{len(items)} {row['file']}:{row['line']} "
                  + " ".join(f"{b}:{'Y' if row['arms'][str(b)]['exact'] else '.'}" for b in arms), flush=True)

    # keystrokes: the same spots, no context vs the largest block
    keys: dict[str, list[float]] = {"0": [], str(max(budgets)): []}
    for case in cross[: args.keys]:
        for b in (0, max(budgets)):
            ctx, _ = block_for(eng, root, case, b)
            keys[str(b)] += keystrokes(eng, ctx, case)
    summary = summarize(results, arms, keys, {"before_load": rss0, "no_context": rss_none,
                                              f"budget_{max(budgets)}": rss_ctx,
                                              "kv_mb_per_1k_positions_all_rows": kv_per_token * 1000 / 2**20})
    meta = {"packages": list(PACKAGES), "cpu": cpu_model(), "threads": args.threads, "model": eng.model_id,
            "kv_capacity": eng.decoder.capacity, "max_prefix_chars": cfg.max_prefix_chars,
            "max_suffix_chars": cfg.max_suffix_chars, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    Path(args.out + ".json").write_text(json.dumps({"meta": meta, "summary": summary, "results": results},
                                                   indent=1, default=str))
    md = render(meta, summary, arms)
    Path(args.out + ".md").write_text(md)
    print(md)
    return 0


def summarize(results: dict, arms: list[int], keys: dict[str, list[float]], rss: dict[str, float]) -> dict:
    out: dict = {}
    for kind, rows in results.items():
        out[kind] = {}
        for b in arms:
            a = [r["arms"][str(b)] for r in rows]
            if not a:
                continue
            out[kind][str(b)] = {
                "n": len(a), "exact": sum(x["exact"] for x in a), "sim": statistics.mean(x["sim"] for x in a),
                "context_tokens_median": statistics.median(x["context_tokens"] for x in a),
                "prompt_tokens_median": statistics.median(x["prompt_tokens"] for x in a),
                "prefill_ms_median": statistics.median(x["prefill_ms"] for x in a),
            }
    out["keystroke_ttft_ms"] = {b: {"n": len(v), "median": statistics.median(v) if v else float("nan"),
                                    "p95": pct(v, 95), "p99": pct(v, 99)} for b, v in keys.items()}
    out["rss_mb"] = rss
    return out


def render(meta: dict, s: dict, arms: list[int]) -> str:
    lines = [
        "# Repository context: quality and keystroke cost (scripts/bench_context.py)", "",
        f"{meta['date']}; CPU: {meta['cpu']}, {meta['threads']} threads; model {meta['model']}; "
        f"KV capacity {meta['kv_capacity']}; file window {meta['max_prefix_chars']} characters before the "
        f"cursor, {meta['max_suffix_chars']} after.",
        f"Held-out code: {', '.join(meta['packages'])} (wheels fetched at bench time).", "",
        "Greedy, one line, cursor after the emptied line's indentation; the sibling module open in another tab.",
        "Budget 0 = no context (today's prompt, byte-identical).", "",
        "| lines | budget (tokens) | n | exact | edit sim | context tokens (median) | prompt tokens (median) "
        "| prefill ms (median, cold) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind in ("cross", "infile"):
        for b in arms:
            r = s.get(kind, {}).get(str(b))
            if r:
                lines.append(f"| {kind} | {b} | {r['n']} | {r['exact']} | {r['sim']:.3f} | "
                             f"{r['context_tokens_median']:.0f} | {r['prompt_tokens_median']:.0f} | "
                             f"{r['prefill_ms_median']:.0f} |")
    lines += ["", "Keystroke: time to first token after each of the first 3 typed characters of a line, the KV "
              "cache holding the previous state (ms):", "", "| budget | n | median | p95 | p99 |", "|---|---|---|---|---|"]
    for b, r in s["keystroke_ttft_ms"].items():
        lines.append(f"| {b} | {r['n']} | {r['median']:.1f} | {r['p95']:.1f} | {r['p99']:.1f} |")
    rss = s["rss_mb"]
    lines += ["", "Resident memory (MB; VmRSS after 3 completions without context, then after the same 3 with "
              "the largest block): " + ", ".join(f"{k}: {v:.0f}" for k, v in rss.items()), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
