#!/usr/bin/env python3
"""Monitor-guided decoding and context from jedi (issue 35): completion quality and keystroke cost in one
run, four arms per line (their order rotates per line): ``off`` (no block, no monitor), ``jedi`` (the
context block of the imports and jedi sources, engine/context/jedi_source.py, in the comments layout),
``monitor`` (no block, the monitor on), ``both``.

    flock /tmp/flint-heavy.lock env FLINT_CACHE_DIR=$(mktemp -d) \\
        python scripts/bench_guidance.py --split validation

Held-out code: pinned PyPI packages installed with their dependencies into a virtual environment of their
own (``--env``, created on first use; none is in Flint's corpora, the stdlib, pygls or lsprotocol). That
venv is the "user's environment" jedi reads, its site-packages the workspace root. Tuning split:
packaging, requests (+ urllib3, idna, certifi, charset-normalizer); validation split: isort, rich (+
pygments, markdown-it-py, mdurl). Knobs are chosen on tuning, figures quoted from validation.

Lines: single-line statements inside functions. Cross-file: the statement's expression references a name
the module imports (a sibling module's or an installed library's); in-file: it references none, but a
name defined in the same file or ``self``. The cursor sits at the start of the expression (after
``x = ``, ``return ``, or the indentation); the expected text is the rest of the line.

Per line: the engine's KV is reset, jedi reads the file as it was before the line (the analyser's idle-time
warm-up) and the context block is gathered (idle time, untimed; the server's gather: Workspace with its
budget and JediContext's time budget); then per arm its prompt (with or without the block) is prefilled,
untimed as in the server's idle time, and one request is timed (the keystroke's time to a finished one-line
suggestion). RSS: what each arm's work added to the process's resident memory, summed over lines (one
process: jedi's caches are shared, so the first arm to need them pays). Measures: exact match of the first line,
edit similarity, the share of suggestions naming an attribute or name that does not exist
(engine/guidance/checker.py on the completed file, the same jedi project), p50/p95 time, RSS.

Writes docs/benchmarks/guidance[-SPLIT].json and .md.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.config import EngineConfig  # noqa: E402
from engine.context.jedi_source import JediContext  # noqa: E402
from engine.context.workspace import Workspace  # noqa: E402
from engine.engine import Engine  # noqa: E402
from engine.guidance.checker import check_suggestion  # noqa: E402
from engine.guidance.jedi_analyser import JediAnalyser  # noqa: E402
from engine.types import DocRef, GenParams  # noqa: E402

SPLITS = {
    "tuning": (("packaging==24.1", "requests==2.32.3"), ("packaging", "requests")),
    "validation": (("isort==5.13.2", "rich==13.7.1"), ("isort", "rich")),
}



# ---- held-out code ---------------------------------------------------------------------------------------
def environment(env: Path) -> Path:
    """The benchmark's venv with every split's packages (created once); its site-packages."""
    py = env / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
        pins = [p for pins, _ in SPLITS.values() for p in pins]
        subprocess.run([str(py), "-m", "pip", "install", "-q", *pins], check=True)
    out = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def _imported(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for n in tree.body:
        if isinstance(n, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.ImportFrom):
            names.update(a.asname or a.name for a in n.names if a.name != "*")
    return names


def _defined(tree: ast.Module) -> set[str]:
    out = {"self", "cls"}
    for n in tree.body:
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(n.name)
        elif isinstance(n, ast.Assign):
            out.update(t.id for t in n.targets if isinstance(t, ast.Name))
    return out


def _expression(stmt: ast.stmt) -> ast.expr | None:
    if isinstance(stmt, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Return | ast.Expr):
        return stmt.value
    return None


def cases(site: Path, packages: tuple[str, ...], seed: int) -> tuple[list[dict], list[dict]]:
    """(cross-file lines, in-file lines) of the packages' modules."""
    cross: list[dict] = []
    infile: list[dict] = []
    for pkg in packages:
        for f in sorted((site / pkg).rglob("*.py")):
            text = f.read_text(encoding="utf-8")
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            imported, defined = _imported(tree), _defined(tree)
            lines = text.splitlines(keepends=True)
            starts = [0]
            for ln in lines:
                starts.append(starts[-1] + len(ln))
            for fn in ast.walk(tree):
                if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for stmt in fn.body:
                    case = _case(f, text, lines, starts, stmt)
                    if case is None:
                        continue
                    value = _expression(stmt)
                    assert value is not None
                    used = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
                    if used & imported:
                        cross.append(case)
                    elif used & defined:
                        infile.append(case)
    rnd = random.Random(seed)
    rnd.shuffle(cross)
    rnd.shuffle(infile)
    return cross, infile


def _case(f: Path, text: str, lines: list[str], starts: list[int], stmt: ast.stmt) -> dict | None:
    value = _expression(stmt)
    if value is None or stmt.end_lineno != stmt.lineno or value.lineno != stmt.lineno:
        return None
    if not any(isinstance(n, ast.Call | ast.Attribute) for n in ast.walk(value)):
        return None
    line = lines[stmt.lineno - 1]
    if "#" in line or not 10 <= len(line.strip()) <= 100:
        return None
    s = starts[stmt.lineno - 1]
    col = len(line.encode("utf-8")[: value.col_offset].decode("utf-8", errors="ignore"))
    at = s + col
    expected = line[col:].rstrip("\n")
    if len(expected) < 6 or isinstance(value, ast.Constant):
        return None
    return {"file": str(f), "prefix": text[:at], "suffix": text[s + len(line) - 1:], "expected": expected,
            "line": stmt.lineno}


# ---- measuring -------------------------------------------------------------------------------------------
def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for ln in fh:
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1]) / 1024
    return 0.0


ARMS = {"off": (False, False), "jedi": (True, False), "monitor": (False, True), "both": (True, True)}


def warm(eng: Engine, case: dict, version: int, ws: Workspace) -> dict:
    """The user opened the file and went to the line (idle time, untimed): jedi has answered the line's
    scope question (engine/guidance/scope.py: the line blanked, the same for every keystroke on it), as the
    server's idle-time warm-up does, and the context block is gathered. The block and what it took."""
    eng.reset()
    assert eng.guidance is not None
    eng.guidance.warm(case["prefix"], case["suffix"], path=case["file"], version=-1 - version,
                      language="python", timeout=10.0)
    text = case["prefix"] + case["suffix"]
    r0, t0 = rss_mb(), time.perf_counter()
    block = ws.gather(Path(case["file"]), text, len(case["prefix"]), count=lambda x: len(eng.tok.encode(x)))
    ms = (time.perf_counter() - t0) * 1000
    grown = rss_mb() - r0
    labels = block.labels() if block is not None else []
    return {"block": block, "gather_ms": round(ms, 1), "labels": labels, "rss_grown_mb": round(grown, 1),
            "jedi_chunks": sum(1 for lb in labels if lb.endswith("(jedi)"))}


def run_arm(eng: Engine, case: dict, arm: str, version: int, block) -> dict:
    with_block, guided = ARMS[arm]
    eng.set_context(block if with_block else None)
    eng.prefill(case["prefix"], case["suffix"])  # idle time: the prompt (and block) are in the KV
    eng.drafts.forget()
    params = GenParams(max_tokens=48, max_lines=1, guidance=guided, doc=DocRef(case["file"], version),
                       language="python")
    t0 = time.perf_counter()
    comps, t = eng.complete(case["prefix"], case["suffix"], params)
    ms = (time.perf_counter() - t0) * 1000
    text = comps[0].text.split("\n")[0] if comps else ""
    return {"text": text, "ms": ms, "guidance": t.guidance, "block_tokens": eng.context_tokens}


def judge(case: dict, text: str, project) -> dict:
    exp = case["expected"].strip()
    got = text.strip()
    src = case["prefix"] + text + case["suffix"]
    chk = check_suggestion(src, len(case["prefix"]), len(case["prefix"]) + len(text), path=case["file"],
                           project=project) if got else None
    return {"exact": got == exp, "sim": difflib.SequenceMatcher(None, got, exp).ratio(),
            "bad": bool(chk is not None and chk.bad), "checked": chk is not None,
            "unresolved": [u.name for u in chk.unresolved] if chk is not None else []}


def summarise(rows: list[dict], arm: str) -> dict:
    xs = [r[arm] for r in rows]
    ms = sorted(x["ms"] for x in xs)
    shown = [x for x in xs if x["text"].strip()]
    return {"lines": len(xs), "exact": sum(x["exact"] for x in xs),
            "edit_similarity": round(statistics.mean(x["sim"] for x in xs), 3) if xs else 0.0,
            "nonexistent": sum(x["bad"] for x in xs), "shown": len(shown),
            "nonexistent_share": round(sum(x["bad"] for x in xs) / max(1, len(shown)), 3),
            "ms_p50": round(statistics.median(ms), 1) if ms else 0.0,
            "ms_mean": round(statistics.mean(ms), 1) if ms else 0.0,
            "ms_p95": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 1) if ms else 0.0,
            "ms_stdev": round(statistics.stdev(ms), 1) if len(ms) > 1 else 0.0,
            "constrained": sum(1 for x in xs if x.get("guidance") and x["guidance"]["constrained"]),
            # against the off arm, line by line: the time difference and the lines whose text differs
            "paired_ms_median": round(statistics.median(r[arm]["ms"] - r["off"]["ms"] for r in rows), 1) if rows else 0.0,
            "changed": sum(1 for r in rows if r[arm]["text"] != r["off"]["text"])}


def measure(eng: Engine, analyser: JediAnalyser, ws: Workspace, project, chosen: list, site: Path
            ) -> tuple[list[dict], dict]:
    """Every line through the four arms (their order rotating per line): the rows, and the resident memory
    each arm's work (and the gathers) added, summed."""
    arms = list(ARMS)
    rows: list[dict] = []
    grown = dict.fromkeys(arms + ["gather"], 0.0)
    for i, (kind, case) in enumerate(chosen):
        row = {"kind": kind, "file": os.path.relpath(case["file"], site), "line": case["line"],
               "expected": case["expected"]}
        ctx = warm(eng, case, i, ws)
        grown["gather"] += ctx["rss_grown_mb"]
        row["context"] = {k: v for k, v in ctx.items() if k != "block"}
        for arm in arms[i % 4:] + arms[: i % 4]:
            r0 = rss_mb()
            r = run_arm(eng, case, arm, i, ctx["block"])
            analyser.idle()  # jedi is not thread-safe: the check runs once the analyser's late answers are in
            grown[arm] += rss_mb() - r0
            r.update(judge(case, r["text"], project))
            row[arm] = r
        rows.append(row)
        print(f"[{i + 1}/{len(chosen)}] {kind} {row['file']}:{row['line']} " +
              " ".join(f"{a}={int(row[a]['exact'])}" for a in arms) + f" jedi_chunks={ctx['jedi_chunks']} "
              f"{row['jedi']['text']!r}", file=sys.stderr, flush=True)
    return rows, grown


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=sorted(SPLITS), default="tuning")
    ap.add_argument("--env", default="/tmp/flint-gbench/venv")
    ap.add_argument("--cross", type=int, default=50)
    ap.add_argument("--infile", type=int, default=25)
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--budget-ms", type=float, default=20.0)
    ap.add_argument("--wait-ms", type=float, default=None, help="the analyser wait per generation (3x budget)")
    ap.add_argument("--soft", action="store_true", help="soft trigger points constrain too")
    ap.add_argument("--context-budget", type=int, default=512, help="the block's token budget (jedi arms)")
    ap.add_argument("--jedi-budget-ms", type=float, default=500.0, help="JediContext's wait per gather")
    ap.add_argument("--stdlib", action="store_true", help="the jedi source keeps standard-library definitions")
    ap.add_argument("--unused-imports", type=int, default=0,
                    help="the jedi source also asks about this many imported names the function does not use")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import jedi

    site = environment(Path(args.env))
    pins, packages = SPLITS[args.split]
    cross, infile = cases(site, packages, args.seed)
    chosen = [("cross", c) for c in cross[: args.cross]] + [("infile", c) for c in infile[: args.infile]]
    cfg = EngineConfig(guidance_budget_s=args.budget_ms / 1000, guidance_soft=args.soft,
                       context_tokens=args.context_budget)
    eng = Engine.load(None, config=cfg)
    rss0 = rss_mb()
    analyser = JediAnalyser()
    analyser.add_root(str(site), args.env)
    g = eng.enable_guidance(analyser, wait=True)
    if args.wait_ms is not None:
        g.wait_s = args.wait_ms / 1000
    project = jedi.Project(str(site), environment_path=args.env)
    resolver = JediContext(analyser, budget_s=args.jedi_budget_ms / 1000, stdlib=args.stdlib,
                           unused_imports=args.unused_imports)
    ws = Workspace([site], budget=args.context_budget, sources=("imports", "jedi"), resolver=resolver)
    t_start = time.time()
    rows, grown = measure(eng, analyser, ws, project, chosen, site)
    report = _report(args, pins, rows, rss0, time.time() - t_start, eng, grown, resolver.stats)
    out = Path(args.out or ROOT / "docs" / "benchmarks" / f"guidance-{args.split}.json")
    out.write_text(json.dumps(report, indent=1) + "\n")
    out.with_suffix(".md").write_text(_markdown(report))
    print(_markdown(report))
    return 0


def _report(args: argparse.Namespace, pins: tuple[str, ...], rows: list[dict], rss0: float, wall: float,
            eng: Engine, grown: dict, context_stats: dict) -> dict:
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    if not commit and (ROOT / "COMMIT").exists():  # run from an exported snapshot of the tree
        commit = (ROOT / "COMMIT").read_text().strip()
    cpu = next((ln.split(":", 1)[1].strip() for ln in subprocess.run(["lscpu"], capture_output=True, text=True)
                .stdout.splitlines() if ln.startswith("Model name")), platform.processor())
    groups = {k: [r for r in rows if r["kind"] == k] for k in ("cross", "infile")}
    stats = getattr(eng.guidance.analyser, "stats", {}) if eng.guidance else {}
    return {"command": " ".join(sys.argv), "commit": commit, "cpu": cpu, "cores": os.cpu_count(),
            "split": args.split, "packages": list(pins), "budget_ms": args.budget_ms, "wait_ms": args.wait_ms, "soft": args.soft,
            "wall_s": round(wall, 1), "rss_mb": {"after_load": round(rss0, 1), "end": round(rss_mb(), 1)},
            "context_budget": args.context_budget, "jedi_budget_ms": args.jedi_budget_ms, "stdlib": args.stdlib,
            "unused_imports": args.unused_imports,
            "rss_grown_mb": {k: round(v, 1) for k, v in grown.items()}, "context": context_stats,
            "blocks": {"with_jedi_chunks": sum(1 for r in rows if r["context"]["jedi_chunks"]),
                       "gather_ms_p50": round(statistics.median(r["context"]["gather_ms"] for r in rows), 1),
                       "gather_ms_max": round(max(r["context"]["gather_ms"] for r in rows), 1),
                       "tokens_p50": statistics.median(r["jedi"]["block_tokens"] for r in rows)},
            "analyser": stats,
            "results": {k: {a: summarise(v, a) for a in ARMS} for k, v in groups.items() if v},
            "rows": rows}


def _markdown(rep: dict) -> str:
    out = [f"# Monitor-guided decoding: {rep['split']} split", "",
           f"`{rep['command']}` at {rep['commit']}, {rep['cpu']} ({rep['cores']} cores, shared), "
           f"packages {', '.join(rep['packages'])}, budget {rep['budget_ms']} ms, soft triggers {rep['soft']}.", "",
           "| lines | arm | n | exact | edit sim | nonexistent (of shown) | p50 ms | mean ms | p95 ms | sd ms | "
           "paired vs off, median ms | text differs from off |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for kind, arms in rep["results"].items():
        for arm in ARMS:
            s = arms[arm]
            out.append(f"| {kind} | {arm} | {s['lines']} | {s['exact']} | {s['edit_similarity']} | "
                       f"{s['nonexistent']}/{s['shown']} ({s['nonexistent_share']}) | {s['ms_p50']} | "
                       f"{s['ms_mean']} | {s['ms_p95']} | {s['ms_stdev']} | {s['paired_ms_median']:+} | {s['changed']} |")
    out += ["", f"RSS after load {rep['rss_mb']['after_load']} MB, at the end {rep['rss_mb']['end']} MB; "
            f"grown during each arm's work (and the gathers), summed: {rep['rss_grown_mb']}. Wall {rep['wall_s']} s.",
            f"Context budget {rep['context_budget']} tokens, jedi {rep['jedi_budget_ms']} ms per gather, "
            f"standard library {rep['stdlib']}, unused imports {rep.get('unused_imports', 0)}; "
            f"blocks: {rep['blocks']}; JediContext: {rep['context']}",
            f"Analyser: {rep['analyser']}", ""]
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
