"""Next edits (issue 37): how right and how fast are the exact next edits (engine/edits/exact.py)?

(a) **Synthetic renames in real files.** Pinned pure-Python wheels none of Flint's other benchmarks use
(``RENAME_PACKAGES``). In every module, the rename targets are the parameters and locals of every function,
the module-level functions and the ``self.<attr>`` attributes of classes, each with at least two
occurrences by the syntactic truth below; per package, ordered by sha256 of ``package:module:kind:scope:
name``, the first ``--per-package``. The user's edit renames one occurrence (``name`` -> ``name_nx``,
deleted letter by letter and typed, one burst of EditHistory): the definition for even hashes, the last
occurrence for odd ones. ``exact_next_edits`` is asked for the rest (jedi on a cold ``Script``: the
analyser's script cache is cleared before each question). Its suggestions are compared with

- jedi's own full reference set at the same position (what the rename can at best offer: the difference is
  what exact.py's guards drop), and
- a syntactic truth from ``ast``: the same-scope occurrences (a function's ``Name``/``arg`` nodes of the
  name, nested scopes that bind it themselves left out; a module function's uses where no function
  rebinds it; ``self.<attr>``/``cls.<attr>`` in the class),

as precision and recall, whether the file parses with all of them applied, and the latency from the edit
to the suggestions (p50/p95/mean and the ordinary median), cold and with the Script cached.

(b) **Real edit sequences.** Pairs of released versions of held-out wheels (``SEQUENCE_PAIRS``). Each
module in both versions is diffed by lines (difflib); for every hunk that has a later one (at most
``--per-file`` per module), the hunks before it are applied, then its first token-level change is the
user's edit; the rest of the diff from there (the hunk's other token changes, the later hunks' token
changes) is what really came next. A suggestion is right when it is exactly one of those token changes
(same range, same new text). Reported: how often something is shown, precision of what is shown, the
first suggestion's precision, recall over all remaining token changes and over the very next one.

(c) **Through the server.** ``--server N`` renames of (a) typed into the real server process
(``python -m lsp_server``, by default with no model: next edits need none) over stdio, one didChange a
keystroke ``--key-ms`` apart; the client asks ``flint/nextEdit`` ``--pause-ms`` after the last keystroke, as
Flint's clients do. Reported: the answer's latency at the client and the server's ``readyMs``, both from
the last keystroke; the server's CPU against the same keystrokes into a server never asked (which never
speculates); didChange's own cost per keystroke with and without the edit history; the keystroke's round
trip at the client (a request sent right behind each didChange), asking and never asking.

(e) **The next offer after an applied edit** (issue 50). ``--only applied``: parameters and locals with at
least 4 occurrences in standard-library modules of ~1,000 lines (``APPLIED_MODULES``, pinned by the Python
version), ``--applied-per-module`` each (first by sha256 of their key), renamed at their definition as in
(c); after the first answer the client applies the first offered edit and asks again at once (Flint's
clients after Tab), at most ``--max-applied`` times. Reported: the first offer's latency from the last
keystroke, each next offer's from sending the didChange that applied an edit, and how many renames were
finished. ``--before DIR`` runs the same keystrokes into the server of another checkout (``git archive
<commit> | tar -x -C DIR``) for the figures before a change. Run alone, its section is merged into the
report's existing JSON.

    flock /tmp/flint-heavy.lock nice -n 19 python scripts/bench_next_edit.py   # all three; writes the report

No model is loaded unless ``--model-samples`` asks for one. Wheels are fetched with ``pip download --no-deps`` into ``--cache``.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import hashlib
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from benchstats import percentile  # noqa: E402
from replay_corpus import fetch_package, wheel_modules  # noqa: E402

from engine.edits.exact import apply_all, exact_next_edits, jedi_references, parses  # noqa: E402
from engine.edits.history import EditHistory  # noqa: E402
from engine.guidance.jedi_analyser import JediAnalyser  # noqa: E402

# none of these is in replay_corpus.PACKAGES, bench_context's, bench_served's or the older replay lists
RENAME_PACKAGES: tuple[tuple[str, str], ...] = (
    ("six", "1.16.0"),
    ("idna", "3.7"),
    ("pluggy", "1.5.0"),
    ("iniconfig", "2.0.0"),
    ("tomli", "2.0.1"),
)
SEQUENCE_PAIRS: tuple[tuple[str, str, str], ...] = (
    ("packaging", "23.2", "24.0"),
    ("platformdirs", "4.2.0", "4.2.2"),
    ("attrs", "23.1.0", "23.2.0"),
)
SUFFIX = "_nx"
DEADLINE_S = 2.0


def _commit(root: Path = ROOT) -> str:
    """The commit of a checkout, or of a ``git archive`` of one with its COMMIT file (the benchmarks' arms)."""
    if (root / "COMMIT").exists():
        return (root / "COMMIT").read_text().strip()[:7]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def lscpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or "?"
    fields = {k.strip(): v.strip() for k, v in (ln.split(":", 1) for ln in out.splitlines() if ":" in ln)}
    return f"{fields.get('Model name', '?')}, {fields.get('CPU(s)', '?')} CPUs"


def pct(xs: list[float], q: float) -> float:
    """The q-quantile (0..1) by benchstats (0.0 for no values): pct(v, 0.5) is the ordinary median, not the
    nearest rank."""
    return percentile(xs, 100 * q) if xs else 0.0


def lat_summary(ms: list[float]) -> dict:
    return {"n": len(ms), "p50_ms": round(pct(ms, 0.5), 1), "p95_ms": round(pct(ms, 0.95), 1),
            "mean_ms": round(statistics.fmean(ms), 1) if ms else 0.0,
            "median_ms": round(statistics.median(ms), 1) if ms else 0.0, "max_ms": round(max(ms, default=0.0), 1)}


def ratio(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


# ---------------------------------------------------------------------------------------------------------
# (a) synthetic renames


class Offsets:
    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for ln in self.lines:
            self.starts.append(self.starts[-1] + len(ln))

    def at(self, lineno: int, col_bytes: int) -> int:
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode("utf-8")[:col_bytes].decode("utf-8", "replace"))


def _binds(fn: ast.AST, name: str) -> bool:
    """Does a function/lambda/comprehension bind ``name`` itself (parameter, assignment, import, for)?"""
    if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        a = fn.args
        if any(x.arg == name for x in a.posonlyargs + a.args + a.kwonlyargs + [v for v in (a.vararg, a.kwarg) if v]):
            return True
        body: list[ast.AST] = list(fn.body) if isinstance(fn.body, list) else [fn.body]
    elif isinstance(fn, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
        return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
                   for g in fn.generators for n in ast.walk(g.target))
    elif isinstance(fn, ast.ClassDef):
        return False
    else:
        return False
    for stmt in body:
        for n in _walk_scope(stmt):
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store | ast.Del):
                return True
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n.name == name:
                return True
            if isinstance(n, ast.alias) and (n.asname or n.name.split(".")[0]) == name:
                return True
            if isinstance(n, ast.Global | ast.Nonlocal) and name in n.names:
                return False
    return False


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
           ast.GeneratorExp, ast.DictComp)


def _walk_scope(node: ast.AST):
    """``node`` and what it holds, not entering nested scopes (a scope node is yielded, not entered)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        if not isinstance(n, _SCOPES):
            todo.extend(ast.iter_child_nodes(n))


def _class_binds(cls: ast.ClassDef, name: str) -> bool:
    return any((isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store))
               or (isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n.name == name)
               for stmt in cls.body for n in _walk_scope(stmt))


def _name_uses(scope: ast.AST, name: str, off: Offsets, include_own_args: bool) -> set[int]:
    """Offsets of ``name`` as a Name in ``scope`` (and the scope's own parameters), nested scopes included
    unless they bind the name themselves."""
    out: set[int] = set()

    def names_in(node: ast.AST) -> None:
        for n in _walk_scope(node):
            if isinstance(n, ast.Name) and n.id == name:
                out.add(off.at(n.lineno, n.col_offset))
            elif isinstance(n, _SCOPES):
                nested(n)

    def nested(n: ast.AST) -> None:
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            outer = list(getattr(n, "decorator_list", [])) + list(n.args.defaults) + \
                [d for d in n.args.kw_defaults if d is not None]
            for d in outer:  # evaluated in the enclosing scope
                names_in(d)
            if not _binds(n, name):
                for st in (n.body if isinstance(n.body, list) else [n.body]):
                    names_in(st)
        elif isinstance(n, ast.ClassDef):
            for d in list(n.decorator_list) + list(n.bases) + [k.value for k in n.keywords]:
                names_in(d)
            if not _class_binds(n, name):
                for st in n.body:
                    names_in(st)
        elif not _binds(n, name):  # a comprehension
            for ch in ast.iter_child_nodes(n):
                names_in(ch)

    if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
        if include_own_args:
            a = scope.args
            for x in a.posonlyargs + a.args + a.kwonlyargs + [v for v in (a.vararg, a.kwarg) if v]:
                if x.arg == name:
                    out.add(off.at(x.lineno, x.col_offset))
        for st in scope.body:
            names_in(st)
    else:
        for st in getattr(scope, "body", []):
            names_in(st)
    return out


def _def_name_offset(text: str, off: Offsets, node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    line_start = off.starts[node.lineno - 1]
    m = re.compile(rf"\bdef\s+({re.escape(node.name)})\b").search(text, line_start)
    assert m is not None
    return m.start(1)


@dataclass
class Target:
    package: str
    module: str
    kind: str  # param | local | function | attribute
    scope: str
    name: str
    truth: set[int]  # syntactic occurrences (offsets in the original text)
    definition: int
    key: str = ""
    site: int = 0
    mapping: dict = field(default_factory=dict)


def rename_targets(pkg: str, module: str, text: str) -> list[Target]:
    tree = ast.parse(text)
    off = Offsets(text)
    out: list[Target] = []
    funcs: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, ast.FunctionDef | ast.AsyncFunctionDef):
                funcs.append((prefix + ch.name, ch))
                visit(ch, prefix + ch.name + ".")
            elif isinstance(ch, ast.ClassDef):
                visit(ch, prefix + ch.name + ".")
            else:
                visit(ch, prefix)

    visit(tree, "")
    for qual, fn in funcs:
        a = fn.args
        params = [x for x in a.posonlyargs + a.args + a.kwonlyargs + [v for v in (a.vararg, a.kwarg) if v]
                  if x.arg not in ("self", "cls")]
        globals_ = {nm for n in _walk_scope(fn) if isinstance(n, ast.Global | ast.Nonlocal) for nm in n.names}
        for x in params:
            uses = _name_uses(fn, x.arg, off, True)
            if len(uses) >= 2:
                out.append(Target(pkg, module, "param", qual, x.arg, uses, off.at(x.lineno, x.col_offset)))
        seen = {x.arg for x in params} | {"self", "cls"} | globals_
        for stmt in fn.body:
            for n in _walk_scope(stmt):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in seen:
                    seen.add(n.id)
                    uses = _name_uses(fn, n.id, off, True)
                    if len(uses) >= 2:
                        out.append(Target(pkg, module, "local", qual, n.id, uses, off.at(n.lineno, n.col_offset)))
    # module-level functions: the def and the uses where no scope rebinds the name
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if sum(1 for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                   and n.name == node.name) > 1:
                continue  # conditional definitions: two defs of one name
            d = _def_name_offset(text, off, node)
            uses = {d} | _name_uses(tree, node.name, off, False)
            if len(uses) >= 2:
                out.append(Target(pkg, module, "function", "<module>", node.name, uses, d))
    # self.<attr> attributes of classes
    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
        attrs: dict[str, set[int]] = {}
        first: dict[str, int] = {}
        for n in ast.walk(cls):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls") \
                    and n.end_lineno is not None and n.end_col_offset is not None:
                o = off.at(n.end_lineno, n.end_col_offset) - len(n.attr)
                attrs.setdefault(n.attr, set()).add(o)
                if isinstance(n.ctx, ast.Store) and n.attr not in first:
                    first[n.attr] = o
        for name, uses in attrs.items():
            if len(uses) >= 2 and name in first:
                out.append(Target(pkg, module, "attribute", cls.name, name, uses, first[name]))
    for t in out:
        t.key = f"{pkg}:{module}:{t.kind}:{t.scope}:{t.name}"
        # the definition for even hashes, the last occurrence for odd ones
        h = int(hashlib.sha256(t.key.encode()).hexdigest(), 16)
        t.site = t.definition if h % 2 == 0 else max(t.truth)
        if text[t.site:t.site + len(t.name)] != t.name:
            t.site = -1
    return [t for t in out if t.site >= 0 and (t.name + SUFFIX) not in text]


def bench_renames(cache: Path, per_package: int, analyser: JediAnalyser, log) -> dict:
    samples = []
    for pkg, ver in RENAME_PACKAGES:
        root = fetch_package(pkg, ver, cache)
        analyser.add_root(str(root))
        cands: list[tuple[Target, Path, str]] = []
        for p in wheel_modules(root):
            text = p.read_text(encoding="utf-8")
            mod = p.relative_to(root).as_posix()
            try:
                cands += [(t, p, text) for t in rename_targets(pkg, mod, text)]
            except (SyntaxError, AssertionError):
                continue
        cands.sort(key=lambda c: hashlib.sha256(c[0].key.encode()).hexdigest())
        for t, p, text in cands[:per_package]:
            samples.append(run_rename(t, p, text, analyser))
        log(f"  {pkg} {ver}: {min(per_package, len(cands))} of {len(cands)} targets")
    return summarize_renames(samples)


def run_rename(t: Target, path: Path, text: str, analyser: JediAnalyser) -> dict:
    new = t.name + SUFFIX
    h = EditHistory()
    h.open("d", text)
    # as typed: the old name deleted letter by letter from its end, the new one typed (one burst)
    for i in range(len(t.name)):
        h.change("d", t.site + len(t.name) - i - 1, t.site + len(t.name) - i, "", now=0.0)
    for i, c in enumerate(new):
        h.change("d", t.site + i, t.site + i, c, now=0.0)
    cur = h.text("d") or ""
    assert len(h.edits("d")) == 1 and cur == text[:t.site] + new + text[t.site + len(t.name):]
    analyser._scripts.clear()  # (jedi_references makes a new Script anyway: see engine/edits/rename.py)
    t0 = time.perf_counter()
    got = exact_next_edits(cur, h.edits("d"), path=str(path), analyser=analyser,
                           deadline=time.monotonic() + DEADLINE_S)
    ms = (time.perf_counter() - t0) * 1000
    t1 = time.perf_counter()  # again at once: parso's tree of the file is cached
    exact_next_edits(cur, h.edits("d"), path=str(path), analyser=analyser, deadline=time.monotonic() + DEADLINE_S)
    ms_warm = (time.perf_counter() - t1) * 1000
    delta = len(new) - len(t.name)
    shown = {e.range_start - (delta if e.range_start > t.site else 0) for e in got}
    refs = jedi_references(text, t.site, path=str(path), analyser=analyser, deadline=time.monotonic() + 10)
    jedi_site = {o for o, _ in (refs or [])} - {t.site}
    # jedi is asymmetric at a binding (engine/edits/rename.py `_completed`): its full answer is the union of
    # its references asked at every occurrence whose answer holds the site
    jedi_set = set(jedi_site)
    for o in sorted(set(t.truth) - {t.site} - jedi_site):
        more = {r for r, _ in (jedi_references(text, o, path=str(path), analyser=analyser,
                                               deadline=time.monotonic() + 10) or [])}
        if t.site in more:
            jedi_set |= more - {t.site}
    truth = set(t.truth) - {t.site}
    ok_parse = parses(apply_all(cur, got)) if got else None
    complete = bool(got) and bool(ok_parse) and truth <= shown  # every same-scope occurrence offered
    return {"key": t.key, "kind": t.kind, "site": "definition" if t.site == t.definition else "use",
            "ms": ms, "ms_warm": ms_warm, "shown": len(shown), "jedi": len(jedi_set), "truth": len(truth),
            "jedi_site": len(jedi_site), "shown_in_jedi_site": len(shown & jedi_site),
            "shown_in_jedi": len(shown & jedi_set), "shown_in_truth": len(shown & truth),
            "jedi_in_truth": len(jedi_set & truth), "parses": ok_parse, "complete": complete,
            "timeout": ms >= DEADLINE_S * 1000 and not got}


def summarize_renames(samples: list[dict]) -> dict:
    def block(ss: list[dict]) -> dict:
        shown = sum(s["shown"] for s in ss)
        with_sugg = [s for s in ss if s["shown"]]
        return {
            "samples": len(ss),
            "nothing_shown": sum(1 for s in ss if not s["shown"]),
            "suggestions": shown,
            "precision_vs_jedi": ratio(sum(s["shown_in_jedi"] for s in ss), shown),
            "recall_vs_jedi": ratio(sum(s["shown_in_jedi"] for s in ss), sum(s["jedi"] for s in ss)),
            "recall_vs_jedi_site": ratio(sum(s.get("shown_in_jedi_site", 0) for s in ss),
                                         sum(s.get("jedi_site", 0) for s in ss)),
            "precision_vs_ast": ratio(sum(s["shown_in_truth"] for s in ss), shown),
            "recall_vs_ast": ratio(sum(s["shown_in_truth"] for s in ss), sum(s["truth"] for s in ss)),
            "jedi_precision_vs_ast": ratio(sum(s["jedi_in_truth"] for s in ss), sum(s["jedi"] for s in ss)),
            "jedi_recall_vs_ast": ratio(sum(s["jedi_in_truth"] for s in ss), sum(s["truth"] for s in ss)),
            "file_parses": f"{sum(1 for s in with_sugg if s['parses'])}/{len(with_sugg)}",
            "rename_complete": sum(1 for s in ss if s["complete"]),
            "timeouts": sum(1 for s in ss if s["timeout"]),
            "latency": lat_summary([s["ms"] for s in ss]),
            "latency_shown": lat_summary([s["ms"] for s in with_sugg]),
            "latency_warm": lat_summary([s["ms_warm"] for s in ss]),
        }

    kinds = sorted({s["kind"] for s in samples})
    return {"all": block(samples), "by_kind": {k: block([s for s in samples if s["kind"] == k]) for k in kinds},
            "by_site": {k: block([s for s in samples if s["site"] == k]) for k in ("definition", "use")},
            "samples": samples}


# ---------------------------------------------------------------------------------------------------------
# (b) real edit sequences

_TOK = re.compile(r"\w+|\s+|[^\w\s]")


def token_changes(a: str, b: str) -> list[tuple[int, int, str]]:
    """The token-level changes turning ``a`` into ``b``: (start, end in ``a``, new text)."""
    ta, tb = _TOK.findall(a), _TOK.findall(b)
    oa = [0]
    for x in ta:
        oa.append(oa[-1] + len(x))
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes():
        if tag != "equal":
            out.append((oa[i1], oa[i2], "".join(tb[j1:j2])))
    return out


def _trimmed(start: int, old: str, new: str) -> tuple[int, int, str]:
    n = 0
    while n < min(len(old), len(new)) and old[n] == new[n]:
        n += 1
    k = 0
    while k < min(len(old), len(new)) - n and old[-1 - k] == new[-1 - k]:
        k += 1
    return start + n, start + len(old) - k, new[n:len(new) - k]


def bench_sequences(cache: Path, per_file: int, analyser: JediAnalyser, log, model: dict | None = None) -> dict:
    samples = []
    for pkg, v0, v1 in SEQUENCE_PAIRS:
        r0, r1 = fetch_package(pkg, v0, cache), fetch_package(pkg, v1, cache)
        analyser.add_root(str(r0))
        n_pkg = 0
        for p in wheel_modules(r0):
            q = r1 / p.relative_to(r0)
            if not q.exists():
                continue
            a, b = p.read_text(encoding="utf-8"), q.read_text(encoding="utf-8")
            al, bl = a.splitlines(keepends=True), b.splitlines(keepends=True)
            hunks = [o for o in difflib.SequenceMatcher(None, al, bl, autojunk=False).get_opcodes() if o[0] != "equal"]
            if len(hunks) < 2:
                continue
            for k in range(min(len(hunks) - 1, per_file)):
                s = run_sequence(pkg, p.relative_to(r0).as_posix(), p, al, bl, hunks, k, analyser, model)
                if s is not None:
                    samples.append(s)
                    n_pkg += 1
        log(f"  {pkg} {v0} -> {v1}: {n_pkg} samples")
    return summarize_sequences(samples)


@dataclass
class Case:
    """One sample of (b): the user's edit (hunk ``k``'s first token change) made, what really came next."""

    key: str
    cur: str  # the text after the user's edit
    history: EditHistory
    changes: list[tuple[int, int, str]]  # the remaining token changes, in ``cur``'s offsets
    truth: set[tuple[int, int, str]]  # the same, trimmed
    nxt: tuple[int, int, str] | None  # the very next one, trimmed
    user_edit: tuple[str, str]


def sequence_case(pkg: str, module: str, al: list[str], bl: list[str], hunks: list, k: int) -> Case | None:
    """Hunks < k applied, then hunk k's first token change as the user's edit; None when it has none."""
    # the text with hunks < k applied, and where each later hunk's old lines start in it
    lines = list(al)
    shift = 0
    for _, i1, i2, j1, j2 in hunks[:k]:
        lines[i1 + shift:i2 + shift] = bl[j1:j2]
        shift += (j2 - j1) - (i2 - i1)
    text = "".join(lines)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))
    regions = []  # (offset in text, old text, new text) of hunk k and the later ones
    for _, i1, i2, j1, j2 in hunks[k:]:
        s = starts[i1 + shift]
        regions.append((s, "".join(lines[i1 + shift:i2 + shift]), "".join(bl[j1:j2])))
    changes = []  # token changes of hunk k onwards, in text offsets: (start, end, new, hunk index)
    for hi, (s, old, new) in enumerate(regions):
        for cs, ce, cn in token_changes(old, new):
            changes.append((s + cs, s + ce, cn, hi))
    if not changes:
        return None
    s0, e0, n0, _ = changes[0]
    user_old = text[s0:e0]
    delta = len(n0) - len(user_old)
    h = EditHistory()
    h.open("d", text)
    h.change("d", s0, e0, n0, now=0.0)
    cur = h.text("d") or ""
    truth = {_trimmed(cs + (delta if cs >= e0 else 0), text[cs:ce], cn) for cs, ce, cn, _ in changes[1:]}
    nxt = _trimmed(changes[1][0] + delta, text[changes[1][0]:changes[1][1]], changes[1][2]) if len(changes) > 1 \
        else None
    rest = [(cs + (delta if cs >= e0 else 0), ce + (delta if cs >= e0 else 0), cn) for cs, ce, cn, _ in changes[1:]]
    return Case(f"{pkg}:{module}:hunk{k}", cur, h, rest, truth, nxt, (user_old, n0))


def run_sequence(pkg: str, module: str, path: Path, al: list[str], bl: list[str], hunks: list, k: int,
                 analyser: JediAnalyser, model: dict | None = None) -> dict | None:
    case = sequence_case(pkg, module, al, bl, hunks, k)
    if case is None:
        return None
    cur, h, truth, nxt = case.cur, case.history, case.truth, case.nxt
    analyser._scripts.clear()
    t0 = time.perf_counter()
    got = exact_next_edits(cur, h.edits("d"), path=str(path), analyser=analyser,
                           deadline=time.monotonic() + DEADLINE_S)
    ms = (time.perf_counter() - t0) * 1000
    shown = [_trimmed(e.range_start, e.old_text, e.new_text) for e in got]
    right = [x for x in shown if x in truth]
    m = None
    if model is not None and not got and model["left"] > 0:
        model["left"] -= 1
        m = run_model(model["engine"], cur, h.edits("d"), str(path), case.changes)
    return {"key": case.key, "ms": ms, "edit": list(case.user_edit), "shown": len(shown), "model": m,
            "right": len(right), "first_right": bool(shown) and shown[0] in truth, "remaining": len(truth),
            "next_hit": nxt is not None and nxt in shown, "sources": sorted({e.source for e in got}),
            "parses": parses(apply_all(cur, got)) if got else None}


def run_model(engine, cur: str, edits: list, path: str, truth: list[tuple[int, int, str]]) -> dict:
    """The model's next edit where nothing exact was shown. Right when it makes exactly the real changes
    that fall in its range (the remaining token changes overlapping it, applied to the current text)."""
    from engine.edits.model import model_next_edit

    t0 = time.perf_counter()
    edit, answer = model_next_edit(engine, cur, edits, path=path)
    ms = (time.perf_counter() - t0) * 1000
    right = False
    if edit is not None:
        inside = [c for c in truth if c[0] <= edit.range_end and c[1] >= edit.range_start]
        want = cur
        for cs, ce, cn in sorted(inside, reverse=True):
            want = want[:cs] + cn + want[ce:]
        right = bool(inside) and edit.apply(cur) == want
    return {"ms": round(ms, 1), "shown": edit is not None, "right": right, "answer": answer[:400]}


def summarize_sequences(samples: list[dict]) -> dict:
    shown = [s for s in samples if s["shown"]]
    n_sugg = sum(s["shown"] for s in samples)
    return {
        "samples": len(samples),
        "shown_samples": len(shown),
        "nothing_shown": len(samples) - len(shown),
        "nothing_shown_rate": ratio(len(samples) - len(shown), len(samples)),
        "suggestions": n_sugg,
        "precision": ratio(sum(s["right"] for s in samples), n_sugg),
        "first_suggestion_precision": ratio(sum(1 for s in shown if s["first_right"]), len(shown)),
        "recall_remaining": ratio(sum(s["right"] for s in samples), sum(s["remaining"] for s in samples)),
        "next_change_recall": ratio(sum(1 for s in samples if s["next_hit"]), len(samples)),
        "by_source": {src: sum(1 for s in shown if src in s["sources"]) for src in ("rename", "repeat")},
        "file_parses": f"{sum(1 for s in shown if s['parses'])}/{len(shown)}",
        "latency": lat_summary([s["ms"] for s in samples]),
        "shown_detail": [s for s in shown],
        "model": model_summary([s["model"] for s in samples if s.get("model") is not None]),
    }


def model_summary(ms: list[dict]) -> dict | None:
    if not ms:
        return None
    shown = [m for m in ms if m["shown"]]
    return {"asked": len(ms), "shown": len(shown), "right": sum(1 for m in shown if m["right"]),
            "precision": ratio(sum(1 for m in shown if m["right"]), len(shown)),
            "latency": lat_summary([m["ms"] for m in ms])}


# ---------------------------------------------------------------------------------------------------------
# (d) can an Instruct checkpoint make model next edits at all? The compact prompt through llama.cpp


class LlamaAsk:
    """A GGUF through llama-cpp-python, greedy, with each generated token's probability (the checkpoint is
    the question here, not Flint's ONNX runtime). The prompt's common prefix (the compact prompt's fixed
    example) stays in llama.cpp's KV between calls."""

    def __init__(self, gguf: Path, threads: int = 2) -> None:
        from llama_cpp import Llama

        self.llm = Llama(model_path=str(gguf), n_ctx=4096, n_batch=512, n_threads=threads,
                         n_threads_batch=threads, verbose=False)
        self.name = gguf.name

    def __call__(self, prompt: str, max_tokens: int, stop: str = "```") -> tuple[str, bool, list[tuple[int, float]]]:
        """(answer, ended by itself, [(end offset in the answer, probability)] per token)."""
        import numpy as np

        llm = self.llm
        toks = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        eos = {llm.token_eos(), *(llm.tokenize(t.encode(), add_bos=False, special=True)[0]
                                  for t in ("<|im_end|>", "<|endoftext|>"))}
        out = b""
        probs: list[tuple[int, float]] = []
        n_vocab = llm.n_vocab()
        for i, t in enumerate(llm.generate(toks, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0)):
            logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,))
            m = float(logits.max())
            p = 1.0 / float(np.exp(logits - m).sum()) if logits[t] >= m else \
                float(np.exp(logits[t] - m) / np.exp(logits - m).sum())
            if t in eos:
                return out.decode("utf-8", "replace"), True, probs
            out += llm.detokenize([t])
            text = out.decode("utf-8", "replace")
            probs.append((len(text), p))
            if stop in text:
                return text, True, probs
            if i + 1 >= max_tokens:
                break
        return out.decode("utf-8", "replace"), False, probs


def _confidence(answer: str, probs: list[tuple[int, float]], text: str, window, edit) -> float:
    """The lowest probability among the answer's tokens that wrote the changed part (from the first
    character where the answer leaves the window's text to the last; 1.0 for a pure deletion)."""
    old = text[window.start:window.end]
    body_at = answer.find("\n") + 1 if answer.lstrip().startswith("```") else 0
    a = answer[body_at:]
    n = 0
    while n < min(len(a), len(old)) and a[n] == old[n]:
        n += 1
    k = 0
    while k < min(len(a), len(old)) - n and a[len(a) - 1 - k] == old[len(old) - 1 - k]:
        k += 1
    lo, hi = body_at + n, body_at + len(a) - k
    inside = []
    prev = 0
    for end, p in probs:
        if end > lo and prev < max(hi, lo + 1):
            inside.append(p)
        prev = end
    return min(inside) if inside else 1.0


def _same_code(a: str, b: str) -> bool:
    return a == b or re.sub(r"[ \t]+", " ", a).replace(" \n", "\n") == re.sub(r"[ \t]+", " ", b).replace(" \n", "\n")


def model_cases(cache: Path, per_pair: int, per_file: int, analyser: JediAnalyser) -> dict[str, list[tuple[Case, str]]]:
    """Per version pair, the first ``per_pair`` cases by sha256 of their key where nothing exact is shown."""
    out: dict[str, list[tuple[Case, str]]] = {}
    for pkg, v0, v1 in SEQUENCE_PAIRS:
        r0, r1 = fetch_package(pkg, v0, cache), fetch_package(pkg, v1, cache)
        analyser.add_root(str(r0))
        cases = []
        for p in wheel_modules(r0):
            q = r1 / p.relative_to(r0)
            if not q.exists():
                continue
            al = p.read_text(encoding="utf-8").splitlines(keepends=True)
            bl = q.read_text(encoding="utf-8").splitlines(keepends=True)
            hunks = [o for o in difflib.SequenceMatcher(None, al, bl, autojunk=False).get_opcodes() if o[0] != "equal"]
            for k in range(min(len(hunks) - 1, per_file)):
                c = sequence_case(pkg, p.relative_to(r0).as_posix(), al, bl, hunks, k)
                if c is not None:
                    cases.append((c, str(p)))
        cases.sort(key=lambda c: hashlib.sha256(c[0].key.encode()).hexdigest())
        picked = []
        for c, path in cases:
            if len(picked) >= per_pair:
                break
            if not exact_next_edits(c.cur, c.history.edits("d"), path=path, analyser=analyser,
                                    deadline=time.monotonic() + DEADLINE_S):
                picked.append((c, path))
        out[f"{pkg} {v0} -> {v1}"] = picked
    return out


def bench_model(cache: Path, ggufs: list[Path], per_pair: int, per_file: int, analyser: JediAnalyser, log) -> dict:
    from engine.edits.prompt import build_compact_prompt, parse_answer

    pairs = model_cases(cache, per_pair, per_file, analyser)
    res: dict = {"pairs": {k: len(v) for k, v in pairs.items()}, "models": {}}
    for gguf in ggufs:
        t_load = time.perf_counter()
        ask = LlamaAsk(gguf)
        log(f"  {gguf.name}: loaded in {time.perf_counter() - t_load:.1f} s")
        rows = []
        for pair, cases in pairs.items():
            for c, _path in cases:
                prompt = build_compact_prompt(c.cur, c.history.edits("d"), path=c.key.split(":")[1])
                t0 = time.perf_counter()
                answer, complete, probs = ask(prompt.text, prompt.max_tokens)
                ms = (time.perf_counter() - t0) * 1000
                edit = parse_answer(answer, c.cur, prompt.window, edits=c.history.edits("d"), complete=complete)
                right, conf = False, None
                if edit is not None:
                    conf = round(_confidence(answer, probs, c.cur, prompt.window, edit), 4)
                    inside = [x for x in c.changes if x[0] <= edit.range_end and x[1] >= edit.range_start]
                    want = c.cur
                    for cs, ce, cn in sorted(inside, reverse=True):
                        want = want[:cs] + cn + want[ce:]
                    right = bool(inside) and _same_code(edit.apply(c.cur), want)
                rows.append({"pair": pair, "key": c.key, "ms": round(ms, 1), "prompt_chars": len(prompt.text),
                             "tokens": len(probs), "complete": complete, "shown": edit is not None, "right": right,
                             "confidence": conf, "edit": [edit.old_text, edit.new_text] if edit else None,
                             "answer": answer[:300]})
                log(f"    {c.key}: {ms:.0f} ms, {'shown' if edit else '-'}{' right' if right else ''}"
                    f"{f' conf {conf}' if conf is not None else ''}")
        res["models"][gguf.name] = rows
    return res


def choose_threshold(rows: list[dict], bar: float = 0.6, min_shown: int = 3) -> float | None:
    """The lowest confidence threshold at which what is shown is right at least ``bar`` of the time, with
    at least ``min_shown`` shown; None when none is."""
    for t in sorted({r["confidence"] for r in rows if r["shown"]}):
        tab = model_table(rows, t)
        if tab["shown"] >= min_shown and (tab["precision"] or 0) >= bar:
            return t
    return None


def model_report(d: dict) -> list[str]:
    """Section (d) of the report from a ``--llama`` run's JSON."""
    m = d["model_llama"]
    out = ["## (d) Can the Instruct checkpoints make model next edits?", "",
           f"Command: `flock /tmp/flint-heavy.lock nice -n 5 {d['command']}` (commit {d.get('commit', '?')}); CPU: {d['cpu']}; date {d['date']}; "
           f"wall {d.get('wall_s')} s. The compact prompt (engine/edits/prompt.py `build_compact_prompt`: a fixed "
           "one-shot example, the last two edits as diffs, six read-only lines, a 10-line region around the "
           "cursor that the model rewrites), greedy, through llama-cpp-python on 2 threads (the checkpoint is "
           "the question, not the runtime). Samples: per version pair of (b), the first by sha256 of their key "
           f"where nothing exact is shown: {m['pairs']}. Right: the edit makes exactly the real changes that fall "
           "in its range (or the same after spaces). Confidence: the lowest probability of the tokens that wrote "
           "the changed part; the threshold is chosen on packaging (the lowest with >= 60% of >= 3 shown right) "
           "and checked on the other two.", "",
           "| model | pair | asked | shown | right | precision | shown (threshold) | right | precision | "
           "p50 ms | p95 ms |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, rows in m["models"].items():
        pairs = sorted({r["pair"] for r in rows})
        tune = [r for r in rows if r["pair"].startswith("packaging")]
        t = choose_threshold(tune)
        for pair in pairs + ["all"]:
            rs = rows if pair == "all" else [r for r in rows if r["pair"] == pair]
            a = model_table(rs)
            b = model_table(rs, t) if t is not None else None
            out.append(f"| {name} | {pair} | {a['asked']} | {a['shown']} | {a['right']} | {_f(a['precision'])} | "
                       + (f"{b['shown']} (>= {t}) | {b['right']} | {_f(b['precision'])}" if b else "- (none) | - | -")
                       + f" | {a['latency']['p50_ms']} | {a['latency']['p95_ms']} |")
    out += ["", "\"- (none)\": no threshold on packaging has >= 60% of >= 3 shown edits right. Answers that kept "
            "the format (code only, fenced, closed): " + ", ".join(
                f"{name} {sum(r['complete'] for r in rows)}/{len(rows)}" for name, rows in m["models"].items())
            + ". The edits shown (confidence, right or not, old -> new, cut at 60 characters):", ""]
    for name, rows in m["models"].items():
        for r in rows:
            if r["shown"]:
                old, new = (repr(x)[:60] for x in r["edit"])
                out.append(f"- {name} `{r['key']}` {r['confidence']} {'right' if r['right'] else 'wrong'}: "
                           f"`{old}` -> `{new}`")
    out.append("")
    return out


def model_table(rows: list[dict], threshold: float = 0.0) -> dict:
    shown = [r for r in rows if r["shown"] and (r["confidence"] or 0) >= threshold]
    right = [r for r in shown if r["right"]]
    return {"asked": len(rows), "shown": len(shown), "right": len(right),
            "precision": ratio(len(right), len(shown)), "latency": lat_summary([r["ms"] for r in rows])}


# ---------------------------------------------------------------------------------------------------------
# (c) through the server: the real `flint` process over stdio, a client typing the rename and asking


class Wire:
    """A minimal LSP client over a subprocess's pipes (requests answered in order; notifications kept)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        import queue
        import threading

        self.proc = proc
        self.answers: dict = {}
        self.cond = threading.Condition()
        self.next_id = 0
        self.queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            headers = {}
            while True:
                line = out.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    break
                k, v = line.decode().split(":", 1)
                headers[k.lower()] = v.strip()
            body = json.loads(out.read(int(headers["content-length"])))
            if "id" in body and "method" not in body:
                with self.cond:
                    self.answers[body["id"]] = (time.perf_counter(), body)
                    self.cond.notify_all()
            elif "id" in body:  # a request from the server: answer null
                self.send({"jsonrpc": "2.0", "id": body["id"], "result": None})

    def send(self, msg: dict) -> None:
        data = json.dumps(msg).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
        self.proc.stdin.flush()

    def notify(self, method: str, params: dict) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def call(self, method: str, params: dict, timeout: float = 60) -> tuple[float, dict]:
        self.next_id += 1
        i = self.next_id
        self.send({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
        with self.cond:
            if not self.cond.wait_for(lambda: i in self.answers, timeout):
                raise TimeoutError(method)
            return self.answers.pop(i)

    def stop(self) -> None:
        """Shut the server down as a client does (shutdown, exit), killing it if it does not exit in 10 s."""
        self.call("shutdown", {})
        self.notify("exit", {})
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _cpu_s(pid: int) -> float:
    """The process's user + system CPU seconds (/proc)."""
    fields_ = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields_[11]) + int(fields_[12])) / os.sysconf("SC_CLK_TCK")


def server_targets(cache: Path, n: int) -> list[tuple[Target, Path, str]]:
    """``n`` rename targets of (a), spread over its packages (the first by hash in each)."""
    per = max(1, math.ceil(n / len(RENAME_PACKAGES)))
    out = []
    for pkg, ver in RENAME_PACKAGES:
        root = fetch_package(pkg, ver, cache)
        cands = []
        for p in wheel_modules(root):
            text = p.read_text(encoding="utf-8")
            try:
                cands += [(t, p, text) for t in rename_targets(pkg, p.relative_to(root).as_posix(), text)]
            except (SyntaxError, AssertionError):
                continue
        cands.sort(key=lambda c: hashlib.sha256(c[0].key.encode()).hexdigest())
        out += cands[:per]
    return out[:n]


def run_server(targets: list[tuple[Target, Path, str]], ask: bool, model: str, key_ms: float,
               pause_ms: float, log, root: Path = ROOT) -> dict:
    """Open each file, type its rename as keystrokes (one didChange each, ``key_ms`` apart), then, with
    ``ask``, flint/nextEdit ``pause_ms`` after the last keystroke (what Flint's clients do). Without ``ask``
    the server never speculates: the CPU difference is what next edits cost."""
    from lsp_server.convert import offset_to_position

    proc = subprocess.Popen([sys.executable, "-m", "lsp_server", "--model", model], cwd=root,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(root)})
    w = Wire(proc)
    w.call("initialize", {"processId": None, "capabilities": {}, "rootUri": None})
    w.notify("initialized", {})
    time.sleep(1.0)
    lat, ready, shown, trips, cpu0 = [], [], 0, [], _cpu_s(proc.pid)
    per: list[dict] = []  # each rename's own figures: which ones are slow, and what they are
    for k, (t, path, text) in enumerate(targets):
        uri = path.as_uri()
        w.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                           "text": text}})
        v, cur = 1, text
        if ask and k == 0:
            w.call("flint/nextEdit", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})
        time.sleep(0.3)
        keys = [(t.site + len(t.name) - i - 1, t.site + len(t.name) - i, "") for i in range(len(t.name))]
        keys += [(t.site + i, t.site + i, c) for i, c in enumerate(t.name + SUFFIX)]
        for a, b, new in keys:
            v += 1
            ra, rb = offset_to_position(cur, a, "utf-16"), offset_to_position(cur, b, "utf-16")
            w.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": v}, "contentChanges": [
                {"range": {"start": {"line": ra[0], "character": ra[1]}, "end": {"line": rb[0], "character": rb[1]}},
                 "text": new}]})
            cur = cur[:a] + new + cur[b:]
            t_last = time.perf_counter()
            # the keystroke path: a request no handler knows is answered (an error) once the event loop
            # has handled the didChange before it and whatever the next edits' threads left it to wait on
            t_trip, _ = w.call("flint/noSuchMethod", {})
            trips.append((t_trip - t_last) * 1000)
            time.sleep(max(0.0, key_ms / 1000 - (time.perf_counter() - t_last)))
        if ask:
            time.sleep(max(0.0, pause_ms / 1000 - (time.perf_counter() - t_last)))
            line, ch = offset_to_position(cur, t.site + len(t.name) + len(SUFFIX), "utf-16")
            t_ans, res = w.call("flint/nextEdit", {"textDocument": {"uri": uri, "version": v},
                                                   "position": {"line": line, "character": ch}})
            r = res.get("result") or {}
            lat.append((t_ans - t_last) * 1000)
            if r.get("readyMs") is not None:
                ready.append(r["readyMs"])
            shown += bool(r.get("edits"))
            per.append({"key": t.key, "kind": t.kind, "lines": text.count("\n") + 1, "uses": len(t.truth),
                        "answer_ms": round(lat[-1], 1), "ready_ms": r.get("readyMs"),
                        "edits": len(r.get("edits") or [])})
        else:
            time.sleep(pause_ms / 1000 + 0.3)
        w.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    cpu = _cpu_s(proc.pid) - cpu0
    w.stop()
    log(f"  server ({'asking' if ask else 'not asking'}, {root}): {len(targets)} renames, cpu {cpu:.2f} s")
    return {"root": str(root), "samples": len(targets), "shown": shown, "cpu_s": round(cpu, 3),
            "answer_after_last_key": lat_summary(lat) if lat else None,
            "ready_after_last_key": lat_summary(ready) if ready else None,
            "keystroke_round_trip": lat_summary(trips), **({"per_rename": per} if ask else {})}


def keystroke_cost(n: int = 2000) -> dict:
    """didChange's own work per keystroke on a 2,000-line file, with the edit history and without
    (DocumentStore.edit; MAX_HISTORY_CHARS 0 keeps no history)."""
    import lsp_server.documents as documents
    from lsp_server.documents import Change, DocumentStore

    text = "".join(f"    value_{i} = compute(value_{i - 1}, factor) + {i}\n" for i in range(2000))
    out = {}
    for name, limit in (("with_history", documents.MAX_HISTORY_CHARS), ("without_history", 0)):
        saved = documents.MAX_HISTORY_CHARS
        documents.MAX_HISTORY_CHARS = limit
        try:
            st = DocumentStore()
            st.open("file:///k.py", text, 1)
            t0 = time.perf_counter()
            for i in range(n):  # typing on line 1000: a letter, then a jump elsewhere every 20 keys
                line = 1000 + (i // 20) % 50
                st.edit("file:///k.py", i + 2, [Change("x", (line, 4 + i % 20, line, 4 + i % 20))], "utf-16")
            out[name + "_us"] = round((time.perf_counter() - t0) / n * 1e6, 1)
        finally:
            documents.MAX_HISTORY_CHARS = saved
    return out


def bench_server(cache: Path, n: int, model: str, key_ms: float, pause_ms: float, log,
                 before: Path | None = None) -> dict:
    """This checkout asking and never asking; with ``before``, that checkout asking too, between the two."""
    targets = server_targets(cache, n)
    asking = run_server(targets, True, model, key_ms, pause_ms, log)
    earlier = run_server(targets, True, model, key_ms, pause_ms, log, root=before) if before else None
    quiet = run_server(targets, False, model, key_ms, pause_ms, log)
    per_edit = (asking["cpu_s"] - quiet["cpu_s"]) / max(1, len(targets)) * 1000
    from lsp_server.nextedit.service import QUIET_S

    for run in (asking, earlier):  # the target's clock: from the moment the edit settles (QUIET_S after the last key)
        if run and run.get("per_rename"):
            run["ready_after_settling"] = lat_summary([r["ready_ms"] - QUIET_S * 1000 for r in run["per_rename"]
                                                       if r["ready_ms"] is not None])
    return {"model": model, "key_ms": key_ms, "pause_ms": pause_ms, "quiet_ms": QUIET_S * 1000, "asking": asking,
            "not_asking": quiet, "cpu_ms_per_edit": round(per_edit, 1), "keystroke": keystroke_cost(),
            **({"asking_before": {**earlier, "commit": _commit(before)}} if earlier else {})}


# ---------------------------------------------------------------------------------------------------------
# (e) the next offer after an applied edit (issue 50): the client applies what it is offered, one by one

APPLIED_MODULES = ("ftplib", "smtplib", "nntplib", "traceback", "random", "plistlib")  # stdlib, 900-1,150 lines


def applied_targets(per_module: int, min_uses: int = 4) -> list[tuple[Target, Path, str]]:
    """Parameters and locals with at least ``min_uses`` occurrences in the Python standard library's
    modules of ~1,000 lines (``APPLIED_MODULES``: pinned by the Python version), renamed at their
    definition; per module, the first ``per_module`` by sha256 of their key."""
    import sysconfig

    std = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for mod in APPLIED_MODULES:
        path = std / f"{mod}.py"
        text = path.read_text(encoding="utf-8")
        cands = [t for t in rename_targets("stdlib", mod, text)
                 if t.kind in ("param", "local") and len(t.truth) >= min_uses]
        cands.sort(key=lambda t: hashlib.sha256(t.key.encode()).hexdigest())
        for t in cands[:per_module]:
            t.site = t.definition
            out.append((t, path, text))
    return out


def run_applied(targets: list[tuple[Target, Path, str]], root: Path, key_ms: float, pause_ms: float,
                max_applied: int, log) -> dict:
    """Type each rename at its definition into the server running from ``root`` (another checkout: the
    figures before a change), ask after the pause, then apply the first offered edit and ask again at
    once, as Flint's clients do, up to ``max_applied`` times: the latency of each next offer, from sending
    the didChange that applied the edit to the answer."""
    from lsp_server.convert import offset_to_position

    proc = subprocess.Popen([sys.executable, "-m", "lsp_server", "--model", "no-such-model"], cwd=root,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(root)})
    w = Wire(proc)
    w.call("initialize", {"processId": None, "capabilities": {}, "rootUri": None})
    w.notify("initialized", {})
    time.sleep(1.0)
    first, after, offered, applied, finished = [], [], 0, 0, 0
    for k, (t, path, text) in enumerate(targets):
        uri = path.as_uri()
        w.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                           "text": text}})
        v, cur = 1, text
        if k == 0:
            w.call("flint/nextEdit", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})
        time.sleep(0.5)
        keys = [(t.site + len(t.name) - i - 1, t.site + len(t.name) - i, "") for i in range(len(t.name))]
        keys += [(t.site + i, t.site + i, c) for i, c in enumerate(t.name + SUFFIX)]
        for a, b, new in keys:
            v += 1
            ra, rb = offset_to_position(cur, a, "utf-16"), offset_to_position(cur, b, "utf-16")
            w.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": v}, "contentChanges": [
                {"range": {"start": {"line": ra[0], "character": ra[1]}, "end": {"line": rb[0], "character": rb[1]}},
                 "text": new}]})
            cur = cur[:a] + new + cur[b:]
            t_last = time.perf_counter()
            time.sleep(key_ms / 1000)
        time.sleep(max(0.0, pause_ms / 1000 - (time.perf_counter() - t_last)))
        line, ch = offset_to_position(cur, t.site + len(t.name) + len(SUFFIX), "utf-16")
        t_ans, res = w.call("flint/nextEdit", {"textDocument": {"uri": uri, "version": v},
                                               "position": {"line": line, "character": ch}})
        first.append((t_ans - t_last) * 1000)
        edits = (res.get("result") or {}).get("edits") or []
        offered += bool(edits)
        n = 0
        while edits and n < max_applied:
            e = edits[0]
            r = e["range"]
            v += 1
            t_send = time.perf_counter()
            w.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": v},
                                                "contentChanges": [{"range": r, "text": e["newText"]}]})
            a = _offset(cur, r["start"])
            cur = cur[:a] + e["newText"] + cur[_offset(cur, r["end"]):]
            pos = offset_to_position(cur, a + len(e["newText"]), "utf-16")
            t_ans, res = w.call("flint/nextEdit", {"textDocument": {"uri": uri, "version": v},
                                                   "position": {"line": pos[0], "character": pos[1]}})
            after.append((t_ans - t_send) * 1000)
            edits = (res.get("result") or {}).get("edits") or []
            n += 1
        applied += n
        finished += not edits
        w.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    w.stop()
    log(f"  applied ({root}): {len(targets)} renames, {applied} edits applied")
    return {"root": str(root), "renames": len(targets), "offered": offered, "applied": applied,
            "finished": finished, "first_offer": lat_summary(first) if first else None,
            "next_offer_after_applied": lat_summary(after) if after else None}


def _offset(text: str, pos: dict) -> int:
    from lsp_server.convert import position_to_offset

    return position_to_offset(text, pos["line"], pos["character"], "utf-16")


def applied_md(d: dict) -> list[str]:
    out = ["## (e) The next offer after an applied edit", "",
           f"Command: `{d['command']}` (commit {d['commit']}); CPU: {d['cpu']}; "
           f"date {d['date']}.", "",
           f"Parameters and locals with at least 4 occurrences in standard-library modules of ~1,000 lines "
           f"({', '.join(APPLIED_MODULES)}; Python {d['python']}), {d['per_module']} per module, renamed at their "
           f"definition as keystrokes {d['key_ms']:.0f} ms apart into the real server (no model); the client asks "
           f"{d['pause_ms']:.0f} ms after the last keystroke, then applies the first offered edit and asks again at "
           f"once (what Flint's clients do after Tab), at most {d['max_applied']} times a rename. The next offer's "
           "latency runs from sending the didChange that applied the edit to the answer.", "",
           "| server | renames | offered | edits applied | renames finished | first offer p50 / p95 ms | "
           "next offer after an applied edit: n, p50 / p95 / max ms |", "|---|---|---|---|---|---|---|"]
    for name, r in d["runs"].items():
        f, a = r["first_offer"] or {}, r["next_offer_after_applied"] or {}
        out.append(f"| {name} | {r['renames']} | {r['offered']} | {r['applied']} | {r['finished']} | "
                   f"{f.get('p50_ms')} / {f.get('p95_ms')} | {a.get('n')}, {a.get('p50_ms')} / {a.get('p95_ms')} / "
                   f"{a.get('max_ms')} |")
    return out + [""]


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def report_md(res: dict) -> str:
    a, b = res.get("renames"), res.get("sequences")
    out = ["# Next edits (issue 37)", "",
           f"Command: `{res['command']}` (commit {res.get('commit', '?')})  ",
           f"CPU: {res['cpu']}  ",
           f"Date: {res['date']}; jedi {res['jedi']}; Python {res['python']}", "",
           "What is measured and how: scripts/bench_next_edit.py's docstring. No model is involved "
           "unless `--model-samples` says so, except in (d), its own run (`--llama`).", ""]
    if a:
        out += ["## (a) Synthetic renames in real files", "",
                "Packages: " + ", ".join(f"{p} {v}" for p, v in RENAME_PACKAGES)
                + f"; {res['per_package']} targets per package; deadline {DEADLINE_S:.0f} s; cold jedi Script.", "",
                "| rows | samples | nothing shown | suggestions | precision vs jedi | recall vs jedi | precision vs ast | "
                "recall vs ast | file parses | complete renames | p50 ms | p95 ms | mean ms | median ms |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        rows = [("all", a["all"])] + [(k, v) for k, v in a["by_kind"].items()] + \
            [(f"at the {k}", v) for k, v in a["by_site"].items()]
        for name, r in rows:
            lat = r["latency"]
            out.append(f"| {name} | {r['samples']} | {r['nothing_shown']} | {r['suggestions']} | "
                       f"{_f(r['precision_vs_jedi'])} | {_f(r['recall_vs_jedi'])} | {_f(r['precision_vs_ast'])} | "
                       f"{_f(r['recall_vs_ast'])} | {r['file_parses']} | {r['rename_complete']} | {lat['p50_ms']} | "
                       f"{lat['p95_ms']} | {lat['mean_ms']} | {lat['median_ms']} |")
        al = a["all"]
        out += ["", "\"vs jedi\": jedi's references asked at the renamed site, joined with its references asked at "
                "every other occurrence whose answer holds the site (jedi is asymmetric at a binding: at a parameter "
                "it stops at a rebinding). Recall against jedi asked at the site alone: "
                f"{_f(al.get('recall_vs_jedi_site'))}.",
                "", f"jedi's own reference set against the ast truth: precision {_f(al['jedi_precision_vs_ast'])}, "
                f"recall {_f(al['jedi_recall_vs_ast'])}. Timeouts (nothing by the deadline): {al['timeouts']}. "
                f"Latency of the samples that showed something: {al['latency_shown']}. The same questions asked again "
                f"at once (a new jedi Script each time: parso's tree of the file cached, jedi's inference not): "
                f"{al['latency_warm']}.", ""]
    if b:
        out += ["## (b) Real edit sequences", "",
                "Version pairs: " + ", ".join(f"{p} {v0} -> {v1}" for p, v0, v1 in SEQUENCE_PAIRS)
                + f"; at most {res['per_file']} hunks per module.", "",
                "| samples | shown | nothing shown | suggestions | precision (right/shown) | first suggestion right | "
                "recall (all remaining changes) | next change found | file parses | p50 ms | p95 ms | mean ms | "
                "median ms |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
                f"| {b['samples']} | {b['shown_samples']} | {b['nothing_shown']} ({_f(b['nothing_shown_rate'])}) | "
                f"{b['suggestions']} | {_f(b['precision'])} | {_f(b['first_suggestion_precision'])} | "
                f"{_f(b['recall_remaining'])} | {_f(b['next_change_recall'])} | {b['file_parses']} | "
                f"{b['latency']['p50_ms']} | {b['latency']['p95_ms']} | {b['latency']['mean_ms']} | "
                f"{b['latency']['median_ms']} |", "",
                f"Samples with suggestions by source: {b['by_source']}.", ""]
        if b.get("model"):
            mm = b["model"]
            out += [f"The model where nothing exact was shown: asked {mm['asked']}, shown {mm['shown']}, right "
                    f"{mm['right']} (precision {_f(mm['precision'])}), latency {mm['latency']}.", ""]
        out += ["Samples that showed something:", ""]
        for s in b["shown_detail"]:
            out.append(f"- `{s['key']}`: edit `{s['edit'][0]!r} -> {s['edit'][1]!r}`, {s['shown']} shown, "
                       f"{s['right']} right, next change {'found' if s['next_hit'] else 'not found'} "
                       f"({', '.join(s['sources'])})")
        out.append("")
    c = res.get("server")
    if c:
        a_, q_ = c["asking"], c["not_asking"]
        out += ["## (c) Through the server", "",
                *([f"Command: `{c['command']}` (commit {c['commit']}), {c['date']}, {c['cpu']}.", ""]
                  if c.get("command") else []),
                f"The real server process (`python -m lsp_server --model {c['model']}`; next edits need no model) "
                f"over stdio; {a_['samples']} renames of (a) (the first by hash in each package) typed as "
                f"keystrokes {c['key_ms']:.0f} ms apart, one didChange each; the client asks `flint/nextEdit` "
                f"{c['pause_ms']:.0f} ms after the last keystroke (what Flint's clients do).", "",
                "| | n | p50 ms | p95 ms | mean ms | max ms |", "|---|---|---|---|---|---|"]
        rows = [("answer at the client, from the last keystroke", a_["answer_after_last_key"]),
                ("next edits ready in the server, from the last keystroke", a_["ready_after_last_key"])]
        if a_.get("ready_after_settling"):
            rows.append(("next edits ready in the server, after the edit settles", a_["ready_after_settling"]))
        if c.get("asking_before"):
            bb = c["asking_before"]
            rows.append((f"before ({bb['commit']}): ready in the server, from the last keystroke",
                         bb["ready_after_last_key"]))
            rows.append((f"before ({bb['commit']}): ready in the server, after the edit settles",
                         bb.get("ready_after_settling")))
        for name, lat in rows:
            if lat:
                out.append(f"| {name} | {lat['n']} | {lat['p50_ms']} | {lat['p95_ms']} | {lat['mean_ms']} | "
                           f"{lat['max_ms']} |")
        if c.get("quiet_ms"):
            out += ["", f"An edit settles {c['quiet_ms']:.0f} ms after its last keystroke (`QUIET_S`): the "
                    "computation starts then, so \"from the last keystroke\" is that much more than \"after the "
                    "edit settles\"."]
        slow = sorted(a_.get("per_rename") or [], key=lambda r: -(r["ready_ms"] or 0))[:5]
        if slow:
            out += ["", "The slowest renames (ready ms from the last keystroke; module lines): " + "; ".join(
                f"`{r['key']}` {r['ready_ms']} ({r['lines']})" for r in slow) + "."]
        k = c["keystroke"]
        out += ["", f"Shown: {a_['shown']} of {a_['samples']}. Server CPU for the run: {a_['cpu_s']} s asking, "
                f"{q_['cpu_s']} s for the same keystrokes never asking (no speculation then): "
                f"**{c['cpu_ms_per_edit']} ms CPU per edit** for next edits. The keystroke path: didChange's own "
                f"work (DocumentStore.edit, 2,000-line file) {k['with_history_us']} us a keystroke with the edit "
                f"history, {k['without_history_us']} us without; the next edits themselves run on their own "
                f"thread once the edit settles.", ""]
        if a_.get("keystroke_round_trip") and q_.get("keystroke_round_trip"):
            out += ["The keystroke as the client feels it: from sending each didChange to the answer of a request "
                    "sent right behind it (an unknown method, answered at once by the event loop once the "
                    "didChange is handled), asking for next edits against never asking:", "",
                    "| keystrokes | n | p50 ms | p95 ms | mean ms | max ms |", "|---|---|---|---|---|---|"]
            for name, lat in (("asking for next edits", a_["keystroke_round_trip"]),
                              ("never asking", q_["keystroke_round_trip"])):
                out.append(f"| {name} | {lat['n']} | {lat['p50_ms']} | {lat['p95_ms']} | {lat['mean_ms']} | "
                           f"{lat['max_ms']} |")
            out.append("")
    if res.get("applied"):
        out += applied_md(res["applied"])
    if res.get("model_llama_run"):
        out += model_report(res["model_llama_run"])
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("FLINT_BENCH_CACHE",
                                                                       Path.home() / ".cache/flint/bench")))
    ap.add_argument("--per-package", type=int, default=40)
    ap.add_argument("--per-file", type=int, default=25)
    ap.add_argument("--only", choices=("renames", "sequences", "server", "applied"))
    ap.add_argument("--server", type=int, default=40, help="(c): this many renames typed into the real server")
    ap.add_argument("--server-model", default="no-such-model",
                    help="(c): the server's model (default: none; next edits need no model)")
    ap.add_argument("--key-ms", type=float, default=80.0, help="(c): time between keystrokes")
    ap.add_argument("--pause-ms", type=float, default=200.0, help="(c): the client asks this long after the last key")
    ap.add_argument("--applied-per-module", type=int, default=4, help="(e): renames per standard-library module")
    ap.add_argument("--max-applied", type=int, default=40, help="(e): edits applied per rename")
    ap.add_argument("--before", type=Path,
                    help="(c), (e): also run the server from this checkout (the figures before, in the same run)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs/benchmarks/next_edit")
    ap.add_argument("--llama", type=Path, nargs="*", default=[],
                    help="(d) only: these GGUF checkpoints through llama-cpp-python on the compact prompt")
    ap.add_argument("--llama-per-pair", type=int, default=30, help="(d): samples per version pair")
    ap.add_argument("--model-samples", type=int, default=0,
                    help="(b): ask the model (the built default) on this many samples where nothing exact was shown")
    args = ap.parse_args()
    import jedi

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    analyser = JediAnalyser()
    res: dict = {"command": "python scripts/bench_next_edit.py " + " ".join(sys.argv[1:]), "cpu": lscpu_model(),
                 "date": time.strftime("%Y-%m-%d"), "jedi": jedi.__version__, "python": platform.python_version(),
                 "per_package": args.per_package, "per_file": args.per_file, "commit": _commit()}
    t0 = time.perf_counter()
    if args.llama:
        log("(d) model next edits, compact prompt, llama.cpp")
        res["model_llama"] = bench_model(args.cache, args.llama, args.llama_per_pair, args.per_file, analyser, log)
        res["wall_s"] = round(time.perf_counter() - t0, 1)
        out = args.out.with_name(args.out.name + "_model")
        out.with_suffix(".json").write_text(json.dumps(res, indent=1) + "\n")
        log("\n".join(model_report(res)))
        analyser.close()
        return
    if args.only in (None, "renames"):
        log("(a) synthetic renames")
        res["renames"] = bench_renames(args.cache, args.per_package, analyser, log)
    if args.only in (None, "sequences"):
        log("(b) real edit sequences")
        model = None
        if args.model_samples > 0:
            from engine.engine import Engine, EngineConfig, resolve_model_dir

            model = {"engine": Engine.load(resolve_model_dir(None), config=EngineConfig(threads=2), warm=False),
                     "left": args.model_samples}
        res["sequences"] = bench_sequences(args.cache, args.per_file, analyser, log, model)
    if args.only in (None, "server") and args.server > 0:
        log("(c) through the server")
        res["server"] = {**bench_server(args.cache, args.server, args.server_model, args.key_ms, args.pause_ms, log,
                                        args.before),
                         "command": res["command"], "commit": res["commit"], "cpu": res["cpu"], "date": res["date"]}
    if args.only in (None, "applied"):
        log("(e) the next offer after an applied edit")
        targets = applied_targets(args.applied_per_module)
        runs = {f"this checkout ({res['commit']})": run_applied(targets, ROOT, args.key_ms, args.pause_ms,
                                                                args.max_applied, log)}
        if args.before:
            runs[f"before ({args.before.name})"] = run_applied(targets, args.before, args.key_ms, args.pause_ms,
                                                               args.max_applied, log)
        res["applied"] = {"command": res["command"], "commit": res["commit"], "cpu": res["cpu"], "date": res["date"],
                          "python": platform.python_version(), "per_module": args.applied_per_module,
                          "key_ms": args.key_ms, "pause_ms": args.pause_ms, "max_applied": args.max_applied,
                          "runs": runs}
    res["wall_s"] = round(time.perf_counter() - t0, 1)
    analyser.close()
    llama = args.out.with_name(args.out.name + "_model").with_suffix(".json")
    if llama.exists():  # the last --llama run, reported as (d)
        res["model_llama_run"] = json.loads(llama.read_text())
    if args.only in ("applied", "server") and args.out.with_suffix(".json").exists():  # alone: the others stay
        res = {**json.loads(args.out.with_suffix(".json").read_text()), args.only: res[args.only]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(res, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(report_md(res))
    log(report_md(res))


if __name__ == "__main__":
    main()
