"""Next edits across a real package's source tree (issue 50): docs/benchmarks/next_edit_workspace.md and .json.

The workspace: a real package's sources copied to a temporary folder (``--package``, by default cfnlint, the
largest package installed beside the interpreter: 2,297 ``.py`` files; ``--source DIR`` for another tree), given
to the real server (``python -m lsp_server``) as its rootUri. The cases: the package's module-level functions
defined once and called by name in other modules (``ast``), the ``--cases`` with the most calling files. For
each, the def's module is opened and one parameter changed at the def as one didChange (a parameter added at
the end when the function has no defaults, else its last parameter removed); 200 ms later flint/nextEdit is
asked, as the clients do. Two arms: ``disk`` (only the def's module is open: the callers are found on disk)
and ``open`` (every module the truth names is opened first: the callers' unsaved texts are searched).

Measured per case: ``readyMs`` (the server's: from the keystroke to the first offer being ready, the 150 ms
the edit takes to settle included; ``after settle``: the same less those 150 ms), the client's wait from the
keystroke to the first answer, ``completeMs`` (the server's: from the keystroke to the last location found;
the client asks again every 100 ms while the answer says ``pending``, as after a first offer elsewhere), and
the locations offered in other files (``elsewhere``) of the complete answer against the truth: the calls of the function by its name in the modules that
import it by name, or through their module (``mod.name(...)``), that the change affects (for a removal:
those that pass the removed parameter). Precision: offered locations that are such a call; recall: such
calls offered. CPU, load average and commit are recorded. A server that never says ``pending`` (before
the first offer came early) has its ``readyMs`` as its complete time too.

``--before DIR``: the server of another checkout (``git archive <commit> | tar -x -C DIR``) too, each arm run
on it and then on this one (``--rounds`` times), for the figures before a change.

    python scripts/bench_next_edit_workspace.py [--package cfnlint | --source DIR] [--cases 12] [--arm both]
        [--before DIR] [--rounds 1]
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_next_edit import Wire, _commit, lat_summary, lscpu_model, ratio  # noqa: E402

from engine.edits.ondisk import python_files  # noqa: E402
from lsp_server.convert import offset_to_position, position_to_offset  # noqa: E402

PAUSE_S = 0.2  # the clients ask this long after the last keystroke
SETTLE_MS = 150.0  # the server's QUIET_S: its computation starts this long after the keystroke
AGAIN_S = 0.1  # the client asks again this often while the answer is pending
OUT = ROOT / "docs" / "benchmarks" / "next_edit_workspace"


@dataclass
class Case:
    name: str
    module: str  # dotted
    path: Path
    kind: str  # "added" | "removed"
    span: tuple[int, int, str]  # the def's parameter text replaced: start, end, new text
    truth: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # path -> call spans (offsets)


def _offset(starts: list[int], line: int, col: int, text: str) -> int:
    base = starts[line - 1]
    return base + len(text[base:].encode("utf-8")[:col].decode("utf-8", "ignore"))


def _starts(text: str) -> list[int]:
    out = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            out.append(i + 1)
    return out


def module_of(root: Path, path: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def scan(root: Path) -> tuple[dict[str, list[tuple[Path, ast.FunctionDef]]], dict[Path, tuple[str, ast.Module]]]:
    defs: dict[str, list[tuple[Path, ast.FunctionDef]]] = {}
    trees: dict[Path, tuple[str, ast.Module]] = {}
    for p in map(Path, python_files([str(root)])):
        try:
            text = p.read_text(encoding="utf-8")
            tree = ast.parse(text)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        trees[p] = (text, tree)
        for n in tree.body:
            if isinstance(n, ast.FunctionDef) and not n.name.startswith("__"):
                defs.setdefault(n.name, []).append((p, n))
    return defs, trees


def _dotted(node: ast.expr) -> str:
    """``a.b.c`` for an attribute chain of names, else ""."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""


def callers(name: str, module: str, trees: dict, skip: Path) -> dict[Path, list[ast.Call]]:
    """The calls of ``name`` in the modules that import it by name, or their module (module docstring)."""
    pkg, _, last = module.rpartition(".")
    out: dict[Path, list[ast.Call]] = {}
    for p, (_text, tree) in trees.items():
        if p == skip:
            continue
        by_name, aliases = False, set()
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and n.module:
                for a in n.names:
                    if a.name == name and (n.module == module or n.module.endswith("." + last) or n.level and
                                           n.module.split(".")[-1] == last):
                        by_name = by_name or (a.asname is None)
                    if a.name == last and (n.module == pkg or n.level):
                        aliases.add(a.asname or a.name)
            elif isinstance(n, ast.Import):
                for a in n.names:
                    if a.name == module and a.asname:
                        aliases.add(a.asname)
        calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and (
            (by_name and isinstance(c.func, ast.Name) and c.func.id == name) or
            (isinstance(c.func, ast.Attribute) and c.func.attr == name and (
                (isinstance(c.func.value, ast.Name) and c.func.value.id in aliases)
                or _dotted(c.func.value) == module)))]  # (``import pkg.mod`` then ``pkg.mod.name(...)``)
        if calls:
            out[p] = calls
    return out


def _end_of(arg: ast.arg, defaults: dict, starts: list[int], text: str) -> int:
    """Where a parameter ends: after its default when it has one."""
    n = defaults.get(arg, arg)
    return _offset(starts, n.end_lineno or n.lineno, n.end_col_offset or 0, text)


def cases_of(root: Path, n: int) -> list[Case]:
    defs, trees = scan(root)
    found = []
    for name, where in defs.items():
        if len(where) != 1:
            continue
        path, fn = where[0]
        a = fn.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or not a.args or fn.decorator_list:
            continue
        module = module_of(root, path)
        calls = callers(name, module, trees, path)
        if not calls:
            continue
        text = trees[path][0]
        starts = _starts(text)
        first, last = a.args[0], a.args[-1]
        s = _offset(starts, first.lineno, first.col_offset, text)
        defaults = dict(zip(a.args[len(a.args) - len(a.defaults):], a.defaults, strict=True))
        e = _end_of(last, defaults, starts, text)
        idx, pname = len(a.args) - 1, last.arg
        if a.defaults:  # remove the last parameter (and its default)
            kind, new = "removed", text[s:_end_of(a.args[-2], defaults, starts, text)] if len(a.args) > 1 else ""
        else:
            kind, new = "added", text[s:e] + ", flint_extra"
        truth: dict[str, list[tuple[int, int]]] = {}
        for p, cs in calls.items():
            t = trees[p][0]
            st = _starts(t)
            spans = []
            for c in cs:
                if any(isinstance(x, ast.Starred) for x in c.args) or any(k.arg is None for k in c.keywords):
                    continue
                if kind == "removed" and not (len(c.args) > idx or any(k.arg == pname for k in c.keywords)):
                    continue
                spans.append((_offset(st, c.lineno, c.col_offset, t), _offset(st, c.end_lineno, c.end_col_offset, t)))
            if spans:
                truth[str(p)] = spans
        if truth:
            found.append(Case(name, module, path, kind, (s, e, new), truth))
    found.sort(key=lambda c: (-len(c.truth), c.name))
    return found[:n]


class Server:
    def __init__(self, root: Path, model: str, tree: Path = ROOT) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "lsp_server", "--model", model], cwd=tree,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ, "PYTHONPATH": str(tree)})
        self.w = Wire(self.proc)
        self.w.call("initialize", {"processId": None, "capabilities": {}, "rootUri": root.as_uri()})
        self.w.notify("initialized", {})

    def open(self, path: Path, text: str) -> str:
        uri = path.as_uri()
        self.w.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                                "text": text}})
        return uri

    def close_doc(self, uri: str) -> None:
        self.w.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    def ask(self, uri: str, version: int, text: str, at: int) -> dict:
        line, ch = offset_to_position(text, at, "utf-16")
        _, res = self.w.call("flint/nextEdit", {"textDocument": {"uri": uri, "version": version},
                                                "position": {"line": line, "character": ch}})
        return res.get("result") or {}

    def close(self) -> None:
        self.w.stop()


def run_case(srv: Server, case: Case, arm: str) -> dict:
    text = case.path.read_text(encoding="utf-8")
    opened = [srv.open(Path(p), Path(p).read_text(encoding="utf-8")) for p in case.truth] if arm == "open" else []
    uri = srv.open(case.path, text)
    srv.ask(uri, 1, text, 0)  # (speculation is on after the first ask; the def's module parsed)
    time.sleep(1.0)
    s, e, new = case.span
    a, b = offset_to_position(text, s, "utf-16"), offset_to_position(text, e, "utf-16")
    srv.w.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [
        {"range": {"start": {"line": a[0], "character": a[1]}, "end": {"line": b[0], "character": b[1]}},
         "text": new}]})
    t0 = time.perf_counter()
    cur = text[:s] + new + text[e:]
    time.sleep(PAUSE_S)
    res = srv.ask(uri, 2, cur, s + len(new))
    wait_ms = (time.perf_counter() - t0) * 1000
    ready = res.get("readyMs")  # (absent from an answer that had nothing yet: the first that has it)
    while res.get("pending") and time.perf_counter() - t0 < 5.0:
        time.sleep(AGAIN_S)
        res = srv.ask(uri, 2, cur, s + len(new))
        ready = res.get("readyMs") if ready is None else ready
    offered, right, hit = 0, 0, set()
    texts: dict[str, str] = {}
    for x in res.get("elsewhere", []):
        p = str(Path(x["uri"][len("file://"):]))
        t = texts.setdefault(p, Path(p).read_text(encoding="utf-8"))
        off = position_to_offset(t, x["range"]["start"]["line"], x["range"]["start"]["character"], "utf-16")
        offered += 1
        i = next((i for i, (lo, hi) in enumerate(case.truth.get(p, [])) if lo <= off <= hi), None)
        if i is not None:
            right += 1
            hit.add((p, i))
    srv.close_doc(uri)
    for u in opened:
        srv.close_doc(u)
    truth_n = sum(len(v) for v in case.truth.values())
    return {"case": f"{case.module}.{case.name}", "kind": case.kind, "arm": arm, "files": len(case.truth),
            "truth": truth_n, "offered": offered, "right": right, "found": len(hit),
            "ready_ms": ready, "answer_ms": round(wait_ms, 1),
            "complete_ms": res.get("completeMs", res.get("readyMs")), "pending": bool(res.get("pending")),
            "here": len(res.get("edits", [])) + len(res.get("jumps", []))}


def summary(rows: list[dict]) -> dict:
    ready = [r["ready_ms"] for r in rows if r["ready_ms"] is not None]
    complete = [r["complete_ms"] for r in rows if r.get("complete_ms") is not None]
    return {"cases": len(rows), "settled": lat_summary([x - SETTLE_MS for x in ready]),
            "complete": lat_summary(complete), "still_pending": sum(r.get("pending", False) for r in rows), "truth": sum(r["truth"] for r in rows), "offered": sum(r["offered"] for r in rows),
            "precision": ratio(sum(r["right"] for r in rows), sum(r["offered"] for r in rows)),
            "recall": ratio(sum(r["found"] for r in rows), sum(r["truth"] for r in rows)),
            "ready": lat_summary(ready), "answer": lat_summary([r["answer_ms"] for r in rows]),
            "no_ready": sum(r["ready_ms"] is None for r in rows)}


def _lat(x: dict) -> str:
    return f"{x['p50_ms']} / {x['p95_ms']} / {x['max_ms']}"


def report(result: dict) -> str:
    lines = ["# Next edits across a real package's source tree (issue 50)", "",
             f"`scripts/bench_next_edit_workspace.py`, commit {result['commit']}, {result['cpu']}, model "
             f"{result['model']}, {result['date']}. Workspace: {result['workspace']} ({result['files']} `.py` "
             f"files). Load average {result.get('load', '?')}. What it measures: the script's docstring.", "",
             "| arm | cases | calls to change | locations offered | precision | recall | first offer ready p50 / p95 "
             "/ max ms | after settle p50 / p95 / max ms | complete p50 / p95 / max ms | answer p50 / p95 ms |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for arm, m in result["arms"].items():
        lines.append(f"| {arm} | {m['cases']} | {m['truth']} | {m['offered']} | {m['precision']} | {m['recall']} | "
                     f"{_lat(m['ready'])} | {_lat(m['settled'])} | {_lat(m['complete'])} | "
                     f"{m['answer']['p50_ms']} / {m['answer']['p95_ms']} |")
    lines += ["", "Per case (arm, kind, calling files, calls to change, offered / right / found, first offer ready ms, "
              "complete ms):", ""]
    for r in result["rows"]:
        lines.append(f"- {r['arm']}, {r['kind']}: {r['case']}: {r['files']} files, {r['truth']} calls; "
                     f"{r['offered']} / {r['right']} / {r['found']}; ready {r['ready_ms']} ms, "
                     f"complete {r.get('complete_ms')} ms")
    return "\n".join(lines) + "\n"


def installed(package: str) -> Path:
    """The folder of an installed package: this interpreter's, else the machine's ``python3``'s."""
    spec = importlib.util.find_spec(package)
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    out = subprocess.run(["python3", "-c", f"import importlib.util as u; print(list(u.find_spec({package!r})"
                          ".submodule_search_locations)[0])"], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{package} is not an installed package here or in python3 (--source DIR instead)")
    return Path(out.stdout.strip())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--package", default="cfnlint")
    ap.add_argument("--source", type=Path, help="a source tree to copy instead of an installed package")
    ap.add_argument("--cases", type=int, default=12)
    ap.add_argument("--arm", choices=("disk", "open", "both"), default="both")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--work", type=Path, default=Path("/tmp/flint-bench-workspace"))
    ap.add_argument("--before", type=Path, help="another checkout's server, each arm run on it first")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    if args.source is not None:
        src, name = args.source.resolve(), args.source.name
    else:
        src, name = installed(args.package), args.package
    root = args.work
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    files = sum(1 for _ in python_files([str(root)]))
    cases = cases_of(root, args.cases)
    log(f"{files} files, {len(cases)} cases")
    trees = [(" (before)", args.before.resolve()), ("", ROOT)] if args.before is not None else [("", ROOT)]
    runs = [(arm, label, tree) for _ in range(args.rounds)
            for arm in (("disk", "open") if args.arm == "both" else (args.arm,)) for label, tree in trees]
    rows = []
    load0 = os.getloadavg()
    for arm, label, tree in runs:
        srv = Server(root, args.model, tree)  # a server per arm: the disk arm's parses do not warm the open one
        time.sleep(2.0)
        try:
            for c in cases:
                rows.append({**run_case(srv, c, arm), "arm": arm + label})
                log(f"  {arm}{label} {rows[-1]}")
        finally:
            srv.close()
    load1 = os.getloadavg()
    arms = list(dict.fromkeys(arm + label for arm, label, _ in runs))
    result = {"commit": _commit(), "cpu": lscpu_model(), "model": args.model, "date": time.strftime("%Y-%m-%d"),
              "workspace": f"{name} (from {src})", "files": files,
              "before": str(args.before) if args.before is not None else None,
              "load": f"{load0[0]:.2f} at the start, {load1[0]:.2f} at the end (1 min)",
              "arms": {arm: summary([r for r in rows if r["arm"] == arm]) for arm in arms}, "rows": rows}
    OUT.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    OUT.with_suffix(".md").write_text(report(result))
    log(json.dumps(result["arms"], indent=1))


if __name__ == "__main__":
    main()
