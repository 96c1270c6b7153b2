#!/usr/bin/env python3
"""Repository context (issue 17): completion quality with vs without the context block, in one run, and the
cost of a keystroke with a full block in front of the file window.

    flock /tmp/flint-heavy.lock env FLINT_CACHE_DIR=$(mktemp -d) python scripts/bench_context.py

Held-out code: pinned multi-module PyPI packages (fetched now with `pip download --no-deps`; none is in
Flint's corpora, the stdlib, pygls or lsprotocol). Cross-file lines: single-line statements in a function
that call a name the module imports from a sibling module; the "user" has that sibling open in another tab
and the module open with the line emptied (cursor after its indentation). In-file lines: other single-line
statements of the same modules (no call to a sibling's name), with the sibling open too.

Quality goes through the real server path (lsp_server.session.Session: documents, the completion service,
the scheduler, idle admission of the context block, the store; no JSON-RPC transport): one session without
context (contextBudget 0) and one per budget, each with its own model, used in turn on the same lines. Per
line the "user" opens the sibling, opens the module with the line emptied, rests the cursor at the spot (an
automatic request, as an editor sends when the cursor moves), looks for 3 s, then asks (explicit request,
its 6 s deadline): "at deadline" is what that request showed; "eventual" is what the first of the user's
repeated requests there that shows anything shows (at most ``--patience`` seconds later).

Keystroke cost and memory are measured on one engine (Engine.set_context, the server's own path).

Writes docs/benchmarks/context.json and docs/benchmarks/context.md.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
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
sys.path.insert(0, str(ROOT / "scripts"))  # benchstats

from benchstats import percentile  # noqa: E402

from engine.config import EngineConfig  # noqa: E402
from engine.context.block import ContextBlock  # noqa: E402
from engine.context.definitions import python_definitions  # noqa: E402
from engine.context.sources import resolve_imports  # noqa: E402
from engine.context.workspace import Workspace  # noqa: E402
from engine.engine import Engine  # noqa: E402
from engine.types import GenParams  # noqa: E402

PACKAGES = ("click==8.1.7", "marshmallow==3.21.3", "tomlkit==0.13.2", "httpx==0.27.0")


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


def spread(items: list[dict], n: int, root: Path) -> list[dict]:
    """``n`` of ``items``, an even share per package (the first folder under ``root``), in their order."""
    pkgs = sorted({c["file"].relative_to(root).parts[0] for c in items})
    per = {p: [c for c in items if c["file"].relative_to(root).parts[0] == p] for p in pkgs}
    out: list[dict] = []
    while len(out) < n and any(per.values()):
        for p in pkgs:
            if per[p] and len(out) < n:
                out.append(per[p].pop(0))
    return out


# ---- measuring ---------------------------------------------------------------------------------------------
def block_for(eng: Engine, root: Path, case: dict, budget: int) -> ContextBlock | None:
    if budget <= 0:
        return None
    ws = Workspace([root], budget=budget)
    ws.open(case["sibling"], case["sibling"].read_text())
    text = case["prefix"] + case["suffix"]
    ws.open(case["file"], text)
    ws.focus(case["file"])

    def count(s: str) -> int:
        return len(eng.tok.encode(s))

    return ws.gather(case["file"], text, len(case["prefix"]), count=count)


def edit_sim(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()


def complete_line(eng: Engine, block: ContextBlock | None, case: dict) -> str:
    """The model's line at the spot on a cold cache, the block (if any) in front: no deadline, no window
    pressure (what the block is worth when its prefill is free)."""
    eng.set_context(block)
    return model_line(eng, case["prefix"], case["suffix"])


def model_line(eng: Engine, prefix: str, suffix: str) -> str:
    """The model's first line at the cursor, greedy, from a reset KV cache (whatever context is set)."""
    eng.reset()
    eng.drafts.forget()
    comps, _ = eng.complete(prefix, suffix, GenParams(max_tokens=48, max_lines=1))
    return first_line(comps[0].text) if comps else ""


def keystrokes(eng: Engine, block: ContextBlock | None, case: dict, n: int = 3) -> list[float]:
    """Time to first token after each of the first ``n`` typed characters of the line, the cache warm
    from the previous state (as bench_engine's keystroke), the block in front of every prompt."""
    eng.set_context(block)
    eng.reset()
    eng.complete(case["prefix"], case["suffix"], GenParams(max_tokens=1))  # the user looked at the spot
    out = []
    for i in range(1, n + 1):
        _, t = eng.complete(case["prefix"] + case["expected"][:i], case["suffix"], GenParams(max_tokens=1))
        out.append(t.ttft_ms)
    return out


# ---- through the server ----------------------------------------------------------------------------------
def first_line(text: str) -> str:
    return text.split("\n")[0].strip()


async def one_case(session, case: dict, patience: float) -> dict:
    """Open the sibling and the module, rest at the spot 3 s, ask; then what the spot shows once done."""
    sib, uri = case["sibling"].as_uri(), case["file"].as_uri()
    text = case["prefix"] + case["suffix"]
    session.documents.open(sib, case["sibling"].read_text(), 1, "python")
    session.did_change(sib)
    session.documents.open(uri, text, 1, "python")
    session.did_change(uri)
    line = case["prefix"].count("\n")
    col = len(case["prefix"]) - (case["prefix"].rfind("\n") + 1)
    t0 = time.monotonic()
    await session.suggest(uri, line, col, invoked=False)  # the cursor rests here
    await asyncio.sleep(max(0.0, 3.0 - (time.monotonic() - t0)))
    t1 = time.perf_counter()
    res = await session.suggest(uri, line, col, invoked=True)
    ms = (time.perf_counter() - t1) * 1000
    at_deadline = first_line(res.items[0].text) if res.items else ""
    # the user keeps asking at the spot (each ask joins the spot's generation) until something shows
    end = time.monotonic() + patience
    eventual = at_deadline
    while not eventual and time.monotonic() < end:
        res2 = await session.suggest(uri, line, col, invoked=True)
        eventual = first_line(res2.items[0].text) if res2.items else ""
    chunks = list((session.status.get("context") or {}).get("chunks", []))
    session.did_close(uri)
    session.did_close(sib)
    while session.worker.running() is not None:  # let the next arm have the CPU
        await asyncio.sleep(0.1)
    exp = case["expected"]
    return {"at_deadline": at_deadline, "eventual": eventual, "ask_ms": ms,
            "exact_at_deadline": at_deadline == exp, "exact": eventual == exp,
            "sim": edit_sim(eventual, exp), "answered_at_deadline": bool(at_deadline), "chunks": chunks,
            "eventual_s": time.monotonic() - t0}


async def through_server(root: Path, arms: list[int], items: list[tuple[str, dict]], threads: int,
                         model: str | None, patience: float) -> dict[str, list[dict]]:
    from dataclasses import replace

    from lsp_server.protocol.handlers import load_engine
    from lsp_server.session import Session
    from lsp_server.settings import Settings

    base = Settings(threads=threads, max_variants=1, cache_size_mb=0)
    if model:
        base = replace(base, model=model)
    sessions = {}
    loop = asyncio.get_running_loop()
    for b in arms:
        # every arm's KV has the same room for the file window (the largest budget's)
        s = Session(lambda st: load_engine(replace(st, context_budget=max(arms))),
                    replace(base, context_budget=b))
        s.attach_loop(loop)
        s.set_workspace_folders([root.as_uri()])
        s.start()
        await s.ready.wait()
        sessions[b] = s
        print(f"session contextBudget={b} ready", flush=True)
    results: dict[str, list[dict]] = {"cross": [], "infile": []}
    for i, (kind, case) in enumerate(items):
        row: dict = {"file": str(case["file"].relative_to(root)), "line": case["line"],
                     "expected": case["expected"], "arms": {}}
        for b in arms:
            row["arms"][str(b)] = await one_case(sessions[b], case, patience)
        results[kind].append(row)
        print(f"{i + 1}/{len(items)} {kind} {row['file']}:{row['line']} "
              + " ".join(f"{b}:{'Y' if row['arms'][str(b)]['exact'] else '.'}"
                         f"{'' if row['arms'][str(b)]['answered_at_deadline'] else '(late)'}" for b in arms),
              flush=True)
    for s in sessions.values():
        s.shutdown()
    return results


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def pct(xs: list[float], q: float) -> float:
    """The q-th percentile (0..100) by benchstats; nan for no values."""
    return percentile(xs, q) if xs else float("nan")


def cpu_model() -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_replay import cpu_model as described  # one description of the CPU for every benchmark

    return described()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--budgets", default="512")
    ap.add_argument("--cross", type=int, default=40, help="cross-file lines (spread over the packages)")
    ap.add_argument("--infile", type=int, default=16)
    ap.add_argument("--keys", type=int, default=8, help="spots timed for keystrokes")
    ap.add_argument("--patience", type=float, default=30.0, help="seconds the eventual answer may take")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks" / "context"))
    ap.add_argument("--engine-quality", action="store_true",
                    help="also every line on one engine, cold cache, no deadline: with vs without the block")
    ap.add_argument("--no-server", action="store_true", help="skip the server part")
    args = ap.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    arms = [0] + budgets

    tmp = Path(tempfile.mkdtemp(prefix="flint-bench-context-"))
    root = fetch(PACKAGES, tmp)
    cross_all, infile_all = cases(root, args.seed)

    cross, infile = spread(cross_all, args.cross, root), spread(infile_all, args.infile, root)
    print(f"packages: {', '.join(PACKAGES)}; cross-file candidates {len(cross_all)}, in-file {len(infile_all)}; "
          f"using {len(cross)} + {len(infile)}", flush=True)

    items = [("cross", c) for c in cross] + [("infile", c) for c in infile]
    t0 = time.perf_counter()
    results: dict = {"cross": [], "infile": []}
    if not args.no_server:
        results = asyncio.run(through_server(root, arms, items, args.threads, args.model, args.patience))
        print(f"server part: {time.perf_counter() - t0:.0f} s", flush=True)
        # kept even if the engine part is cut short (a time limit on a shared machine)
        Path(args.out + ".server.json").write_text(json.dumps(results, indent=1, default=str))

    # keystrokes and memory: one engine, the block set as the server sets it
    import gc

    gc.collect()
    rss0 = rss_mb()
    eng = Engine.load(args.model, config=EngineConfig(threads=args.threads, context_tokens=max(budgets)))
    mem_spots = cross[:max(1, min(3, args.keys))]
    for case in mem_spots:
        complete_line(eng, None, case)
    rss_none = rss_mb()
    for case in mem_spots:
        complete_line(eng, block_for(eng, root, case, max(budgets)), case)
    rss_ctx = rss_mb()
    keys: dict[str, list[float]] = {"0": [], str(max(budgets)): []}
    block_tokens = []
    for case in cross[: args.keys]:
        for b in (0, max(budgets)):
            block = block_for(eng, root, case, b)
            keys[str(b)] += keystrokes(eng, block, case)
            if b:
                block_tokens.append(eng.context_tokens)
    engine_q: dict[str, list[dict]] = {"cross": [], "infile": []}
    if args.engine_quality:
        for i, (kind, case) in enumerate(items, 1):
            row = {"file": str(case["file"].relative_to(root)), "expected": case["expected"], "arms": {}}
            for b in arms:
                got = complete_line(eng, block_for(eng, root, case, b), case)
                row["arms"][str(b)] = {"line": got, "exact": got == case["expected"],
                                       "sim": edit_sim(got, case["expected"]), "block_tokens": eng.context_tokens}
            engine_q[kind].append(row)
            print(f"engine {i}/{len(items)} {kind} " + " ".join(
                f"{b}:{'Y' if row['arms'][str(b)]['exact'] else '.'}" for b in arms), flush=True)
    m = eng.manifest
    kv_per_token = 2 * m.num_layers * m.num_kv_heads * m.head_dim * 4 * eng.config.batch_max
    summary = summarize(results, arms, keys, {"engine_loaded_after_server_part": rss0, "no_context": rss_none,
                                              f"budget_{max(budgets)}": rss_ctx,
                                              "kv_mb_per_1k_positions_all_rows": kv_per_token * 1000 / 2**20})
    summary["keystroke_block_tokens_median"] = statistics.median(block_tokens) if block_tokens else 0
    summary["engine"] = {kind: {str(b): {"n": len(rows), "exact": sum(r["arms"][str(b)]["exact"] for r in rows),
                                         "sim": statistics.mean(r["arms"][str(b)]["sim"] for r in rows),
                                         "block_tokens_median": statistics.median(
                                             r["arms"][str(b)]["block_tokens"] for r in rows)}
                                for b in arms} for kind, rows in engine_q.items() if rows}
    meta = {"packages": list(PACKAGES), "cpu": cpu_model(), "threads": args.threads, "model": eng.model_id,
            "kv_capacity": eng.decoder.capacity, "max_prefix_chars": eng.config.max_prefix_chars,
            "max_suffix_chars": eng.config.max_suffix_chars, "patience_s": args.patience,
            "command": " ".join(sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    Path(args.out + ".json").write_text(json.dumps({"meta": meta, "summary": summary, "results": results,
                                                    "engine_quality": engine_q},
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
            asks = [x["ask_ms"] for x in a]
            out[kind][str(b)] = {
                "n": len(a), "answered_at_deadline": sum(x["answered_at_deadline"] for x in a),
                "exact_at_deadline": sum(x["exact_at_deadline"] for x in a),
                "answered": sum(bool(x["eventual"]) for x in a),
                "exact": sum(x["exact"] for x in a), "sim": statistics.mean(x["sim"] for x in a),
                "with_chunks": sum(bool(x["chunks"]) for x in a),
                "ask_ms_median": statistics.median(asks), "ask_ms_p95": pct(asks, 95),
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
        f"Held-out code: {', '.join(meta['packages'])} (wheels fetched at bench time).",
        f"Command: `scripts/bench_context.py {meta['command']}`", "",
        "Through the server (Session): sibling open in another tab, the module opened with the line emptied, the "
        "cursor resting there 3 s, then an explicit request (6 s deadline). Greedy, one variant. Budget 0 = "
        f"contextBudget 0. \"Eventual\": the first of repeated requests at the spot that shows anything (≤ "
        f"{meta['patience_s']:.0f} s more).", "",
        "| lines | budget | n | answered at deadline | exact at deadline | answered (eventual) | exact (eventual) "
        "| edit sim (eventual) | prompt had chunks | ask ms median | p95 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for kind in ("cross", "infile"):
        for b in arms:
            r = s.get(kind, {}).get(str(b))
            if r:
                lines.append(f"| {kind} | {b} | {r['n']} | {r['answered_at_deadline']} | {r['exact_at_deadline']} | "
                             f"{r['answered']} | {r['exact']} | {r['sim']:.3f} | {r['with_chunks']} | {r['ask_ms_median']:.0f} | "
                             f"{r['ask_ms_p95']:.0f} |")
    if s.get("engine"):
        lines += ["", "One engine, every line on a cold cache with no deadline (the block, if any, prefilled with the "
                  "window: what the block is worth when its prefill costs nothing). Greedy, one line:", "",
                  "| lines | budget | n | exact | edit sim | block tokens (median) |", "|---|---|---|---|---|---|"]
        for kind, per in s["engine"].items():
            for b, r in per.items():
                lines.append(f"| {kind} | {b} | {r['n']} | {r['exact']} | {r['sim']:.3f} | "
                             f"{r['block_tokens_median']:.0f} |")
    lines += ["", "Keystroke (one engine, Engine.set_context): time to first token after each of the first 3 typed "
              "characters of a line, the KV cache holding the previous state (ms); block of "
              f"{s.get('keystroke_block_tokens_median', 0):.0f} tokens (median):", "",
              "| budget | n | median | p95 | p99 |", "|---|---|---|---|---|"]
    for b, r in s["keystroke_ttft_ms"].items():
        lines.append(f"| {b} | {r['n']} | {r['median']:.1f} | {r['p95']:.1f} | {r['p99']:.1f} |")
    rss = s["rss_mb"]
    lines += ["", "Resident memory (MB; VmRSS after 3 completions without context, then after the same 3 with "
              "the block): " + ", ".join(f"{k}: {v:.0f}" for k, v in rss.items()), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
