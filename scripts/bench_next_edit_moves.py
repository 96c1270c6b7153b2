"""Next edits after a function or class moved to another module, on real version pairs (issue 50):
docs/benchmarks/next_edit_moves.md.

Cases: for each pair of ``bench_next_edit_signatures.PAIRS`` (the same pinned releases, the same tuning and
validation halves), a top-level ``def`` or ``class`` *N* that a module *A* of the old version defines and the
new version's *A* does not, while a module *B* defines it in the new version and not in the old one (*B* may
be new); the case needs at least one other module of the old version that imports *N* from *A*
(``from A import N``, absolute or relative). The truth, per such importing module: *changed* when the new
version's same module imports *N* from *B*, *unchanged* when it still imports it from *A* (*A* re-exports
it), no truth when it imports it otherwise or no more.

The replay: the real server (``python -m lsp_server``, the local model) with the old version's unpacked
wheel as its workspace folder (its files on disk; nothing there is written); *A* and *B* are opened (*B*
empty when it is new), ``OPEN_S`` later *N* (its decorators and the blank lines after it) is cut from *A*
and, ``SWITCH_S`` later, pasted at *B*'s end, as two didChange; 200 ms after the paste flint/nextEdit is
asked in *B*, and again while the answer is ``pending``, at the clients' cadence. Scored: the edits offered
in other files (``elsewhere``), per file: right when the truth says the file's import changed and the file
with the edit applied imports *N* from *B* (``ast``); precision over the files offered, recall over the
changed ones; the first offer's and the whole answer's latency from the paste.

    python scripts/bench_next_edit_moves.py [--cache DIR] [--model NAME] [--scan] [--split S] [--out PATH]
        [--purpose WHY]
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_meta import append_ledger, cpu_info, cpu_line, ledger_row  # noqa: E402
from bench_next_edit import _commit, lat_summary, lscpu_model, ratio  # noqa: E402
from bench_next_edit_signatures import PAIRS, Replay  # noqa: E402
from replay_corpus import fetch_package  # noqa: E402

from lsp_server.convert import position_to_offset  # noqa: E402

OUT = ROOT / "docs" / "benchmarks" / "next_edit_moves"
OPEN_S, SWITCH_S, PAUSE_S = 2.0, 0.5, 0.2
MAX_CASES_PER_PAIR = 8  # a release that reorganises a package moves hundreds: the first few, in path order


@dataclass
class Case:
    pair: str
    split: str
    name: str
    source: str  # A, relative to the wheel's root
    target: str  # B
    root: Path = field(repr=False)
    cut: tuple[int, int] = (0, 0)  # N's span in A's old text
    truth: dict[str, bool] = field(default_factory=dict)  # importing module -> its import changed


def module_of(rel: str) -> str:
    """``pkg/util.py`` -> ``pkg.util``, ``pkg/__init__.py`` -> ``pkg``."""
    parts = rel[:-3].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(tree: ast.AST, rel: str, name: str) -> set[str]:
    """The modules (as ``module_of`` names) from which the module ``rel`` imports ``name``."""
    out = set()
    package = module_of(rel).split(".")
    if not rel.endswith("__init__.py"):
        package = package[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
            if node.level == 0:
                out.add(node.module or "")
            elif node.level - 1 <= len(package):
                base = package[:len(package) - (node.level - 1)]
                out.add(".".join([*base, *([node.module] if node.module else [])]))
    return out


def _tops(tree: ast.Module) -> dict[str, ast.stmt]:
    return {st.name: st for st in tree.body if isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}


def _parsed(root: Path) -> dict[str, tuple[str, ast.Module]]:
    """Every module of the wheel, its tests too (an import there follows a move as much as any)."""
    out = {}
    for p in sorted(root.rglob("*.py")):
        if ".dist-info" in str(p):
            continue
        try:
            text = p.read_text(encoding="utf-8")
            out[p.relative_to(root).as_posix()] = (text, ast.parse(text))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
    return out


def _cut(text: str, st: ast.stmt) -> tuple[int, int]:
    """A top-level statement's lines, decorators and the blank lines after it included."""
    lines = text.splitlines(keepends=True)
    first = min([st.lineno, *(d.lineno for d in getattr(st, "decorator_list", []))])
    last = st.end_lineno or st.lineno
    while last < len(lines) and not lines[last].strip():
        last += 1
    return sum(len(x) for x in lines[:first - 1]), sum(len(x) for x in lines[:last])


def cases_of(pkg: str, v0: str, v1: str, split: str, cache: Path) -> list[Case]:
    r0, r1 = fetch_package(pkg, v0, cache), fetch_package(pkg, v1, cache)
    old, new = _parsed(r0), _parsed(r1)
    tops0 = {rel: _tops(t) for rel, (_, t) in old.items()}
    tops1 = {rel: _tops(t) for rel, (_, t) in new.items()}
    out: list[Case] = []
    for a, names in tops0.items():
        for n, st in names.items():
            if a not in tops1 or n in tops1[a] or n.startswith("__"):
                continue
            bs = [b for b, t in tops1.items() if n in t and b != a and n not in tops0.get(b, {})]
            if len(bs) != 1:
                continue  # gone, or in several modules: no one target
            case = Case(f"{pkg} {v0}->{v1}", split, n, a, bs[0], r0, _cut(old[a][0], st))
            for f, (_text, tree) in old.items():
                if f in (a, bs[0]) or module_of(a) not in imports_of(tree, f, n):
                    continue
                now = imports_of(new[f][1], f, n) if f in new else set()
                if module_of(bs[0]) in now:
                    case.truth[f] = True
                elif now == {module_of(a)}:
                    case.truth[f] = False
            if case.truth:
                out.append(case)
    return sorted(out, key=lambda c: (c.source, c.name))[:MAX_CASES_PER_PAIR]


def _applied(text: str, e: dict) -> str:
    a = position_to_offset(text, e["range"]["start"]["line"], e["range"]["start"]["character"], "utf-16")
    b = position_to_offset(text, e["range"]["end"]["line"], e["range"]["end"]["character"], "utf-16")
    return text[:a] + e.get("newText", "") + text[b:]


def replay(r: Replay, case: Case) -> dict:
    """One case through the server (module docstring)."""
    a_path, b_path = case.root / case.source, case.root / case.target
    a_text = a_path.read_text(encoding="utf-8")
    b_text = b_path.read_text(encoding="utf-8") if b_path.exists() else ""
    for p, t in ((a_path, a_text), (b_path, b_text)):
        r.w.notify("textDocument/didOpen", {"textDocument": {"uri": p.as_uri(), "languageId": "python",
                                                             "version": 1, "text": t}})
    if not r.asked:
        r.ask(a_path.as_uri(), 1, a_text, 0)  # the first ask starts speculation and warms jedi
        r.asked = True
        time.sleep(1.0)
    time.sleep(OPEN_S)
    s, e = case.cut
    moved = a_text[s:e]
    r.change(a_path.as_uri(), 2, a_text, s, e, "")
    time.sleep(SWITCH_S)
    paste = ("\n\n" if b_text.strip() else "") + moved.rstrip() + "\n"
    b_now = r.change(b_path.as_uri(), 2, b_text, len(b_text), len(b_text), paste)
    t0 = time.perf_counter()
    time.sleep(PAUSE_S)
    res = r.ask(b_path.as_uri(), 2, b_now, len(b_now))
    first_ms = (time.perf_counter() - t0) * 1000
    offered = [time.perf_counter()] if res.get("elsewhere") else []
    res = r.settle(b_path.as_uri(), 2, b_now, len(b_now), res, offered)
    whole_ms = (time.perf_counter() - t0) * 1000
    files: dict[str, list[dict]] = {}
    for x in res.get("elsewhere", []):
        files.setdefault(Path(x["uri"].removeprefix("file://")).relative_to(case.root).as_posix(), []).append(x)
    right, wrong, untold = [], [], []
    for f, edits in files.items():
        text = (case.root / f).read_text(encoding="utf-8")
        for x in sorted(edits, key=lambda x: (-x["range"]["start"]["line"], -x["range"]["start"]["character"])):
            text = _applied(text, x)
        try:
            ok = module_of(case.target) in imports_of(ast.parse(text), f, case.name)
        except SyntaxError:
            ok = False
        if f not in case.truth:
            untold.append(f)  # the new version imports it otherwise, or no more: it does not say
        else:
            (right if ok and case.truth[f] else wrong).append(f)
    for p in (a_path, b_path):
        r.w.notify("textDocument/didClose", {"textDocument": {"uri": p.as_uri()}})
    return {"case": f"{case.pair} {case.name}: {case.source} -> {case.target}", "split": case.split,
            "truth_changed": sum(case.truth.values()), "truth_unchanged": sum(not v for v in case.truth.values()),
            "files_offered": len(files), "right": len(right), "wrong": wrong, "untold": untold,
            "missed": sorted(f for f, v in case.truth.items() if v and f not in right),
            "first_answer_ms": round(first_ms, 1),
            "first_offer_ms": round((offered[0] - t0) * 1000, 1) if offered else None,
            "whole_answer_ms": round(whole_ms, 1)}


def summary(rows: list[dict]) -> dict:
    offered, right = sum(r["files_offered"] for r in rows), sum(r["right"] for r in rows)
    truth, untold = sum(r["truth_changed"] for r in rows), sum(len(r["untold"]) for r in rows)
    return {"cases": len(rows), "imports_changed": truth, "imports_unchanged": sum(r["truth_unchanged"] for r in rows),
            "files_offered": offered, "offered_untold": untold, "precision": ratio(right, offered - untold),
            "recall": ratio(right, truth),
            "first_offer": lat_summary([r["first_offer_ms"] for r in rows if r["first_offer_ms"] is not None]),
            "whole_answer": lat_summary([r["whole_answer_ms"] for r in rows])}


def report(result: dict) -> str:
    lines = ["# Next edits after a move, on real version pairs (issue 50)", "",
             f"`scripts/bench_next_edit_moves.py`, commit {result['commit']}, {result['cpu']}, "
             f"{result['date']}. What it measures: the script's docstring.", "",
             "| split | cases | imports that changed | that did not | files offered (of them without truth) | "
             "precision | recall | first offer p50 / p95 ms (cases) | whole answer p50 / p95 ms |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for split, m in result["splits"].items():
        fo, wa = m["first_offer"], m["whole_answer"]
        lines.append(f"| {split} | {m['cases']} | {m['imports_changed']} | {m['imports_unchanged']} | "
                     f"{m['files_offered']} ({m['offered_untold']}) | {m['precision']} | {m['recall']} | {fo['p50_ms']} / {fo['p95_ms']} "
                     f"({fo['n']}) | {wa['p50_ms']} / {wa['p95_ms']} |")
    lines += ["", "Precision: right of the files offered whose import the new version says something about (changed "
              "to the target, or left importing from the source: then an offer there is counted wrong); a file "
              "without truth imports the name otherwise in the new version, or no more. Latencies from the paste "
              "(the client's 200 ms pause and the server's 150 ms settle included).",
              "", "Per case (right of the changed imports; files offered wrongly; without truth; changed imports "
              "missed):", ""]
    for r in result["rows"]:
        lines.append(f"- {r['split']}: {r['case']}: {r['right']} of {r['truth_changed']}"
                     + (f"; wrong: {', '.join(r['wrong'])}" if r["wrong"] else "")
                     + (f"; without truth: {', '.join(r['untold'])}" if r["untold"] else "")
                     + (f"; missed: {', '.join(r['missed'])}" if r["missed"] else ""))
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/flint-bench-signatures-cache"))
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--scan", action="store_true", help="list the cases only (no server)")
    ap.add_argument("--split", choices=("tuning", "validation", "both"), default="tuning")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--purpose", help="why validation is looked at (required for it: the ledger)")
    args = ap.parse_args()
    commit = _commit()  # the code the server starts with (a commit made during the run is not it)
    splits = ("tuning", "validation") if args.split == "both" else (args.split,)
    if "validation" in splits and not args.scan:
        if not args.purpose:
            raise SystemExit("--purpose is required to look at validation (docs/benchmarks/ledger.md)")
        append_ledger(ledger_row(time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "validation", {"this": commit},
                                 "python " + " ".join(sys.argv), args.purpose + " (the move benchmark's pairs)",
                                 cpu_line(cpu_info())))
    cases: list[Case] = []
    for i, (pkg, v0, v1) in enumerate(PAIRS):
        split = "tuning" if i % 2 == 0 else "validation"
        if split in splits:
            found = cases_of(pkg, v0, v1, split, args.cache)
            print(f"{pkg} {v0}->{v1} ({split}): {len(found)} cases", file=sys.stderr)
            cases += found
    if args.scan:
        for c in cases:
            print(c.split, c.pair, c.name, c.source, "->", c.target, c.truth)
        return
    rows = []
    for root in sorted({c.root for c in cases}):
        r = Replay(args.model, root=root)
        try:
            for c in (c for c in cases if c.root == root):
                rows.append(replay(r, c))
                print(f"  {rows[-1]['case']}: {rows[-1]['right']} of {rows[-1]['truth_changed']}", file=sys.stderr)
        finally:
            r.close()
    result = {"commit": commit, "cpu": cpu_line(cpu_info()) or lscpu_model(), "date": time.strftime("%Y-%m-%d"),
              "splits": {s: summary([r for r in rows if r["split"] == s]) for s in splits}, "rows": rows}
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    args.out.with_suffix(".md").write_text(report(result))
    print(report(result))


if __name__ == "__main__":
    main()
