#!/usr/bin/env python3
"""Which repository context block helps cross-file lines (issue 17)? One engine, every line on a cold cache
with no deadline (the block prefilled with the window: what a block is worth when its prefill is free),
several ways of building the block side by side in one run.

    flock /tmp/flint-heavy.lock env FLINT_CACHE_DIR=$(mktemp -d) python scripts/bench_context_arms.py

Lines and held-out packages are bench_context.py's (same seed, same even spread over the packages). Arms:
``none`` (no block), ``frame`` (the repository format with no chunk: ``<|repo_name|>``, then
``<|file_sep|>`` and the current file's path before the FIM block; what the format alone does), ``default``
(engine.context.Workspace as the server builds it, budget 512: imports, the file's own far definitions, open
tabs, recent edits), and blocks of the imports source alone: ``imp_doc`` (outlines with docstrings of the
imported names used near the cursor), ``imp_sig`` (the same, signatures only), ``imp_all_sig`` (signatures of
every imported name of the file, the ones used near the cursor first); these lay the block out in the
repository format (EngineConfig.context_layout "repository"). ``comment_*``: that block in the engine's
comments layout (context_layout "comments", the server's default: each chunk as comments, ``# Path: ...``
then each line commented, at the start of the FIM prefix). Writes context.arms.json and context.arms.md
under --out.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bench_context as bc  # noqa: E402

from engine.config import EngineConfig  # noqa: E402
from engine.context.block import Chunk, ContextBlock, merge_by_file, select_chunks  # noqa: E402
from engine.context.definitions import parsed_definitions  # noqa: E402
from engine.context.sources import around_span, names_near, resolve_imports  # noqa: E402
from engine.context.workspace import Workspace  # noqa: E402
from engine.decoding.layout import context_ids  # noqa: E402
from engine.engine import Engine  # noqa: E402

ARMS = ("none", "frame", "default", "imp_doc", "imp_sig", "imp_all_sig", "comment_default", "comment_imp_sig")


def imports_block(root: Path, case: dict, count, doc_lines: int, near_only: bool, budget: int) -> ContextBlock | None:
    text = case["prefix"] + case["suffix"]
    f, off = case["file"], len(case["prefix"])
    rank = {n: i for i, n in enumerate(names_near(text, off))}
    ws = Workspace([root], budget=budget)
    chunks = []
    for imp in resolve_imports(text, f, [root]):
        if imp.module == f.resolve():
            continue
        every = parsed_definitions(imp.module.read_text(encoding="utf-8"), None, max_doc_lines=doc_lines) or {}
        names: dict[str, int | None] = {}
        if imp.attr is not None:
            names[imp.attr] = rank.get(imp.local)
        else:
            for n, i in rank.items():
                if n.startswith(imp.local + "."):
                    names[n[len(imp.local) + 1:]] = i
            if not near_only:  # a module imported whole: its attributes used anywhere in the file
                for m in re.finditer(re.escape(imp.local) + r"\.([A-Za-z_]\w*)", text):
                    names.setdefault(m.group(1), None)
        for name, r in names.items():
            if (near_only and r is None) or name not in every:
                continue
            line, outline = every[name]
            chunks.append(Chunk(ws.relpath(imp.module), outline, "import", line,
                                2.0 + (1.0 / (1.0 + r / 8) if r is not None else 0.0)))
    s, e = around_span(text, off)
    chosen = merge_by_file(select_chunks(chunks, text[s:e], budget, count))
    if not chosen:
        return None
    return ContextBlock(ws.repo_name(), tuple(sorted(chosen, key=lambda c: c.score)), ws.relpath(f))


def frame_line(eng: Engine, block: ContextBlock, case: dict) -> str:
    eng.config.context_layout = "repository"
    eng.set_context(None)  # the engine now lays a block out in the repository format
    eng._context = context_ids(eng.tok, block.repo, (), block.current_path)
    eng._context_digest = "frame"
    try:
        return bc.model_line(eng, case["prefix"], case["suffix"])
    finally:
        eng._context, eng._context_digest = [], ""


def layout_of(arm: str) -> str:
    """The engine's context layout an arm measures."""
    return "comments" if arm.startswith("comment_") else "repository"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cross", type=int, default=40)
    ap.add_argument("--infile", type=int, default=0, help="also in-file lines (no call to a sibling's name)")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--budget", type=int, default=512)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default=None)
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks"))
    args = ap.parse_args()
    arms = args.arms.split(",")
    root = bc.fetch(bc.PACKAGES, Path(tempfile.mkdtemp(prefix="flint-bench-context-arms-")))
    cross_all, infile_all = bc.cases(root, args.seed)
    cross = [{**c, "kind": "cross"} for c in bc.spread(cross_all, args.cross, root)] + \
        [{**c, "kind": "infile"} for c in bc.spread(infile_all, args.infile, root)]
    eng = Engine.load(args.model, config=EngineConfig(threads=args.threads, context_tokens=max(1024, args.budget)))

    def count(s: str) -> int:
        return len(eng.tok.encode(s))

    def block(arm: str, case: dict) -> ContextBlock | None:
        if arm == "none":
            return None
        if arm == "default":
            return bc.block_for(eng, root, case, args.budget)
        if arm == "frame":
            ws = Workspace([root])
            return ContextBlock(ws.repo_name(), (), ws.relpath(case["file"]))
        if arm.startswith("comment_"):
            return block(arm[len("comment_"):], case)
        doc, near = {"imp_doc": (12, True), "imp_sig": (0, True), "imp_all_sig": (0, False)}[arm]
        return imports_block(root, case, count, doc, near, args.budget)

    rows = []
    t0 = time.time()
    for i, case in enumerate(cross, 1):
        row = {"file": str(case["file"].relative_to(root)), "line": case["line"], "expected": case["expected"],
               "kind": case["kind"], "arms": {}}
        for arm in arms:
            b = block(arm, case)
            if arm == "frame":  # Engine.set_context ignores a block without chunks: set its ids directly
                got = frame_line(eng, b, case)
            else:
                eng.config.context_layout = layout_of(arm)  # set_context lays the block out this way
                got = bc.complete_line(eng, b, case)
            row["arms"][arm] = {"line": got, "exact": got == case["expected"],
                                "sim": bc.edit_sim(got, case["expected"]), "tokens": eng.context_tokens,
                                "labels": b.labels() if b else []}
        rows.append(row)
        print(f"{i}/{len(cross)} {time.time() - t0:.0f}s " + " ".join(
            f"{a}:{'Y' if row['arms'][a]['exact'] else '.'}" for a in arms) + f"  | {case['expected'][:60]}",
              flush=True)
    def summary_of(rows: list[dict]) -> dict:
        return {a: {"n": len(rows), "exact": sum(r["arms"][a]["exact"] for r in rows),
                    "sim": statistics.mean(r["arms"][a]["sim"] for r in rows),
                    "tokens_median": statistics.median(r["arms"][a]["tokens"] for r in rows),
                    "changed_vs_none": sum(r["arms"][a]["line"] != r["arms"]["none"]["line"] for r in rows)
                    if "none" in arms else None} for a in arms}

    summaries = {k: summary_of(sel) for k in ("cross", "infile") if (sel := [r for r in rows if r["kind"] == k])}
    summary = summaries["cross"] if "cross" in summaries else next(iter(summaries.values()))
    meta = {"cpu": bc.cpu_model(), "model": eng.model_id, "packages": list(bc.PACKAGES), "budget": args.budget,
            "command": "python scripts/bench_context_arms.py " + " ".join(sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "context.arms.json").write_text(json.dumps({"meta": meta, "summary": summary, "summaries": summaries,
                                                      "rows": rows}, indent=1))
    md = ["# Which context block helps cross-file lines (scripts/bench_context_arms.py)", "",
          f"{meta['date']}; CPU: {meta['cpu']}; model {meta['model']}; budget {args.budget} tokens.",
          f"Held-out code: {', '.join(bc.PACKAGES)}. Command: `{meta['command']}`", "",
          "One engine, every line on a cold cache, no deadline, greedy, one line (the block prefilled with the "
          "window). Arms: see the script's docstring.", "",
          "| lines | arm | n | exact | edit sim | block tokens (median) | lines changed vs none |",
          "|---|---|---|---|---|---|---|"]
    for kind, summ in summaries.items():
        for a in arms:
            s = summ[a]
            md.append(f"| {kind} | {a} | {s['n']} | {s['exact']} | {s['sim']:.3f} | {s['tokens_median']:.0f} | "
                      f"{s['changed_vs_none'] if s['changed_vs_none'] is not None else '-'} |")
    (out / "context.arms.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
