"""Next edits after a signature change, on real version pairs (issue 50): docs/benchmarks/next_edit_signatures.md.

For each pair of released versions of a pinned PyPI package (``PAIRS``: none of them is in
replay_corpus.PACKAGES, replay_test_split.PYPI, or the other benchmarks' lists, so nothing was tuned on
them), every module present in both is read with ``ast``: a function (same qualified name) whose parameter
list changed is a *case* when the change is one Flint handles (engine/edits/signature.py
``signature_change``: one parameter renamed, removed, or added without a default) and the module holds
calls of it. The truth: those calls matched between the versions (by enclosing function and order; a
group whose count changed is left out), and which of them changed with the signature in the way the change
asks (the new argument passed, the removed one gone, ``old=`` become ``new=``), with the new version's
argument as the expected text.

The replay: the old module is opened in the real server (``python -m lsp_server``, the local model) and,
``OPEN_S`` later, only the def's parameter list is replaced by the new version's, as one didChange; 200 ms later
flint/nextEdit is asked, as the clients do, and asked again while the answer is ``pending`` (a jump target's
argument still being written), at the clients' cadence. Every offered edit and jump target is located in a
call (call-site precision and recall against the truth; an edit in the edited def itself, a renamed
parameter's use, is a rename's next edit, counted apart); then, client-like, the first offer is taken in turn:
an edit applied as offered, a jump target written with the model's argument when one is offered (else the
true argument, as the user would), asking again at once, up to ``MAX_STEPS``. Scored: whether applying the
offered text makes the call what the new version has (``ast`` equal): argument-text exactness, for
jump targets with text among those offered and among all true ones.

Pairs alternate into tuning and validation halves (``split``). The floor (engine/edits/fill.py ``FLOOR``)
and the fill prompt's caller header were chosen on the tuning half's sweep (``--split tuning --sweep-only``,
``--no-caller`` for the prompt without it; ``--scope on|off`` with or without the caller's names in scope,
engine/edits/scope.py); the validation half is run once to confirm, and every run that looks at it appends a
row to docs/benchmarks/ledger.md before it starts (``--purpose``: why). The sweep also counts, per floor, the
sites where the model's text would be wrong and how many of them the floor leaves without text. CPU and commit
are recorded.

    python scripts/bench_next_edit_signatures.py [--cache DIR] [--model NAME] [--scan] [--split S]
        [--sweep | --sweep-only] [--no-caller] [--scope on|off] [--out PATH] [--purpose WHY]
        [--server-log PATH] [--only TEXT ...]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_meta import append_ledger, cpu_info, cpu_line, ledger_row  # noqa: E402
from bench_next_edit import Wire, _commit, lat_summary, lscpu_model, ratio  # noqa: E402
from replay_corpus import fetch_package, wheel_modules  # noqa: E402

from engine.edits import fill as fill_module  # noqa: E402
from engine.edits.constructor import constructor_change, field_change  # noqa: E402
from engine.edits.constructor import fields as ctor_fields  # noqa: E402
from engine.edits.fill import FLOOR  # noqa: E402
from engine.edits.signature import signature_change  # noqa: E402
from lsp_server.convert import offset_to_position, position_to_offset  # noqa: E402

PAIRS: tuple[tuple[str, str, str], ...] = (
    ("requests", "2.28.2", "2.32.3"),
    ("markdown", "3.4.4", "3.7"),
    ("urllib3", "2.0.7", "2.2.3"),
    ("werkzeug", "2.3.8", "3.0.6"),
    ("jinja2", "3.0.3", "3.1.4"),
    ("pygments", "2.15.1", "2.18.0"),
    ("docutils", "0.19", "0.21.2"),
    ("rich", "13.3.5", "13.9.4"),
    ("pytest", "7.4.4", "8.3.3"),
    ("sphinx", "6.2.1", "7.4.7"),
    ("astroid", "2.15.8", "3.3.5"),
    ("setuptools", "68.2.2", "75.1.0"),
    # more pairs, so that each half holds more than a handful of added parameters (the first twelve gave the
    # validation half six call sites, five of one function): every pair of a scan of 20 further packages that
    # held a case, in alphabetical order, split by the same alternation
    ("ansible-core", "2.15.13", "2.17.6"),
    ("celery", "5.3.4", "5.4.0"),
    ("django", "4.2.16", "5.1.3"),
    ("hypothesis", "6.82.0", "6.115.0"),
    ("matplotlib", "3.7.5", "3.9.2"),
    ("networkx", "3.1", "3.4.2"),
    ("pandas", "2.0.3", "2.2.3"),
    ("pylint", "2.17.7", "3.3.1"),
    ("scrapy", "2.9.0", "2.11.2"),
    ("sqlalchemy", "2.0.20", "2.0.36"),
    ("sympy", "1.12", "1.13.3"),
    ("twisted", "23.8.0", "24.10.0"),
)
MAX_STEPS = 8  # offers taken in turn per case
PAUSE_S = 0.2  # the clients ask this long after the last keystroke
# the edit comes this long after the module opens: a user reads before changing a signature, and the server
# has jedi parse an opened module meanwhile (0.5-0.9 s for 3,000 lines here; at 0.3 s, as before, the first
# answer in a large module waited for that parse)
OPEN_S = 2.0
AGAIN_MS, AGAIN_MAX_MS, AGAIN_FOR_S = 120, 400, 4.0  # their re-asks while an answer is pending
OUT = ROOT / "docs" / "benchmarks" / "next_edit_signatures"

Fn = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class Truth:
    """One call of the function in the edited text: its span, the new version's call (source), and whether
    it changed with the signature."""

    start: int
    end: int
    changed: bool
    new_call: str


@dataclass
class Case:
    pair: str
    split: str
    module: str
    qualname: str
    kind: str
    before: str = field(repr=False)
    edited: str = field(repr=False)
    span: tuple[int, int, int] = (0, 0, 0)  # the edit: start, end in before, end in edited
    truth: list[Truth] = field(default_factory=list, repr=False)
    calls: list[tuple[int, int]] = field(default_factory=list, repr=False)  # every call of it, truth or not
    body: tuple[int, int] = (0, 0)  # the edited def's own span (a renamed parameter's uses are there)


def functions(tree: ast.AST, prefix: str = "") -> dict[str, Fn]:
    out: dict[str, Fn] = {}
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, Fn):
            out[prefix + node.name] = node
            out.update(functions(node, prefix + node.name + ".<locals>."))
        elif isinstance(node, ast.ClassDef):
            out.update(functions(node, prefix + node.name + "."))
    return out


def param_span(text: str, fn: Fn) -> tuple[int, int]:
    """The offsets inside a def's parentheses."""
    lines = text.splitlines(keepends=True)
    at = sum(len(x) for x in lines[:fn.lineno - 1]) + len(lines[fn.lineno - 1].encode()[:fn.col_offset].decode())
    open_at = text.index("(", text.index(fn.name, at))
    depth = 0
    for i in range(open_at, len(text)):
        depth += text[i] in "([{"
        depth -= text[i] in ")]}"
        if depth == 0:
            return open_at + 1, i
    raise ValueError("unclosed parameter list")


def calls_of(tree: ast.AST, text: str, qualname: str) -> dict[str, list[ast.Call]]:
    """The calls of the function ``qualname`` by enclosing function: ``name(...)`` for a module's function,
    ``self.name(...)`` / ``cls.name(...)`` for a method."""
    parts = qualname.split(".")
    name, method = parts[-1], len(parts) == 2
    ctor = method and name == "__init__"  # a class's __init__: its calls C(...) too
    groups: dict[str, list[ast.Call]] = {}

    def visit(node: ast.AST, where: str) -> None:
        for ch in ast.iter_child_nodes(node):
            inner = f"{where}.{ch.name}" if isinstance(ch, Fn | ast.ClassDef) else where
            if isinstance(ch, ast.Call):
                f = ch.func
                hit = (isinstance(f, ast.Name) and f.id == name and not method) or \
                    (ctor and isinstance(f, ast.Name) and f.id == parts[0]) or \
                    (method and isinstance(f, ast.Attribute) and f.attr == name and isinstance(f.value, ast.Name)
                     and f.value.id in ("self", "cls", parts[0]))
                if hit:
                    groups.setdefault(where, []).append(ch)
            visit(ch, inner)

    visit(tree, "")
    return groups


def change_of(before: str, edited: str, s: int, oe: int, ne: int):
    """The change the server sees (engine/edits/callsites.py ``last_signature_change``): a def's parameters, a
    class's ``__init__``'s as its calls see them, or a field added."""
    ch = signature_change(before, edited, s, oe, ne)
    return constructor_change(edited, ch) if ch is not None else field_change(before, edited, s, ne)


def _offset(text: str, line: int, col: int) -> int:
    lines = text.splitlines(keepends=True)
    return sum(len(x) for x in lines[:line - 1]) + len(lines[line - 1].encode()[:col].decode())


def changed_with(kind: str, change, old: ast.Call, new: ast.Call) -> bool:
    """Did this call change the way the signature change asks?"""
    okw = {k.arg for k in old.keywords}
    nkw = {k.arg for k in new.keywords}
    if kind == "added":
        return len(new.args) + len(new.keywords) == len(old.args) + len(old.keywords) + 1
    if kind == "removed":
        return len(new.args) + len(new.keywords) == len(old.args) + len(old.keywords) - 1
    return change.param.name in okw and change.new_name in nkw


def cases_of(pkg: str, v0: str, v1: str, split: str, cache: Path) -> tuple[list[Case], int]:
    """The cases of one pair, and how many changed signatures there were in all (any kind)."""
    r0, r1 = fetch_package(pkg, v0, cache), fetch_package(pkg, v1, cache)
    out, changed = [], 0
    for p0 in wheel_modules(r0):
        rel = p0.relative_to(r0)
        p1 = r1 / rel
        if not p1.exists():
            continue
        t0, t1 = p0.read_text(encoding="utf-8"), p1.read_text(encoding="utf-8")
        try:
            a0, a1 = ast.parse(t0), ast.parse(t1)
        except SyntaxError:
            continue
        f0, f1 = functions(a0), functions(a1)
        for q, fn in f0.items():
            if q not in f1 or ast.dump(fn.args) == ast.dump(f1[q].args):
                continue
            changed += 1
            s0, e0 = param_span(t0, fn)
            s1, e1 = param_span(t1, f1[q])
            edited = t0[:s0] + t1[s1:e1] + t0[e0:]
            pre = 0
            while pre < min(len(t0), len(edited)) and t0[pre] == edited[pre]:
                pre += 1
            post = 0
            while post < min(len(t0), len(edited)) - pre and t0[-1 - post] == edited[-1 - post]:
                post += 1
            ch = signature_change(t0, edited, pre, len(t0) - post, len(edited) - post)
            if ch is None:
                continue
            case = Case(f"{pkg} {v0}->{v1}", split, rel.as_posix(), q, ch.kind, t0, edited,
                        (pre, len(t0) - post, len(edited) - post))
            te = ast.parse(edited)
            fe = functions(te)[q]
            case.body = (_offset(edited, fe.lineno, fe.col_offset),
                         _offset(edited, fe.end_lineno or fe.lineno, fe.end_col_offset or 0))
            _truth(case, ch, te, q, t1, a1)
            if case.truth:
                out.append(case)
        k1 = classes(a1)
        for q, c0 in classes(a0).items():
            c1 = k1.get(q)
            case = field_case(f"{pkg} {v0}->{v1}", split, rel.as_posix(), q, t0, t1, a1, c0, c1) if c1 else None
            changed += case is not None
            if case is not None and case.truth:
                out.append(case)
    return out, changed


def classes(tree: ast.AST, prefix: str = "") -> dict[str, ast.ClassDef]:
    """A module's classes by qualified name (not those inside functions)."""
    out: dict[str, ast.ClassDef] = {}
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.ClassDef):
            out[prefix + node.name] = node
            out.update(classes(node, prefix + node.name + "."))
    return out


def field_case(pair: str, split: str, module: str, q: str, t0: str, t1: str, a1: ast.Module, c0: ast.ClassDef,
               c1: ast.ClassDef) -> Case | None:
    """A field added without a default to a dataclass-like class (engine/edits/constructor.py ``fields``): the
    new field's line inserted where the new version has it, as the case's edit; its truth the class's calls
    (``C(...)``) as for a changed ``__init__``."""
    f0, f1 = ctor_fields(c0), ctor_fields(c1)
    if f0 is None or f1 is None or len(f1) != len(f0) + 1 or not f0 or "." in q:
        return None
    p0, p1 = [p for p, _ in f0], [p for p, _ in f1]
    i = next((i for i in range(len(p0)) if p0[i] != p1[i]), len(p0))
    if p1[:i] + p1[i + 1:] != p0 or p1[i].default:
        return None
    new = f1[i][1]
    lines1 = t1.splitlines(keepends=True)
    line = "".join(lines1[new.lineno - 1:new.end_lineno or new.lineno])
    lines0 = t0.splitlines(keepends=True)
    row = f0[i][1].lineno - 1 if i < len(f0) else (f0[-1][1].end_lineno or f0[-1][1].lineno)
    at = sum(len(x) for x in lines0[:row])
    edited = t0[:at] + line + t0[at:]
    ch = field_change(t0, edited, at, at + len(line))
    if ch is None:
        return None
    case = Case(pair, split, module, f"{q}.<field {p1[i].name}>", ch.kind, t0, edited, (at, at, at + len(line)))
    case.body = (at, at + len(line))
    _truth(case, ch, ast.parse(edited), f"{q}.__init__", t1, a1)
    return case


def _truth(case: Case, ch, te: ast.Module, q: str, t1: str, a1: ast.Module) -> None:
    """The case's calls of ``q`` (in its edited text, whose tree is ``te``) and their truth from the new
    version (``t1``, its tree ``a1``), matched by enclosing function and order."""
    edited = case.edited
    ge, g1 = calls_of(te, edited, q), calls_of(a1, t1, q)
    for olds in ge.values():
        case.calls += [(_offset(edited, o.lineno, o.col_offset),
                        _offset(edited, o.end_lineno or o.lineno, o.end_col_offset or 0)) for o in olds]
    for where, olds in ge.items():
        news = g1.get(where, [])
        if len(news) != len(olds):
            continue  # the calls here were rewritten otherwise: no truth for them
        for o, n in zip(olds, news, strict=True):
            s = _offset(edited, o.lineno, o.col_offset)
            e = _offset(edited, o.end_lineno or o.lineno, o.end_col_offset or 0)
            case.truth.append(Truth(s, e, changed_with(ch.kind, ch, o, n), ast.get_source_segment(t1, n) or ""))


def all_cases(cache: Path, log) -> tuple[list[Case], dict]:
    cases, counts = [], {}
    for i, (pkg, v0, v1) in enumerate(PAIRS):
        split = "tuning" if i % 2 == 0 else "validation"
        found, changed = cases_of(pkg, v0, v1, split, cache)
        counts[f"{pkg} {v0}->{v1}"] = {"split": split, "signatures_changed": changed, "cases": len(found),
                                       "by_kind": {k: sum(c.kind == k for c in found) for k in ("added", "removed", "renamed")},
                                       "calls_changed": sum(t.changed for c in found for t in c.truth)}
        log(f"{pkg} {v0}->{v1} ({split}): {counts[f'{pkg} {v0}->{v1}']}")
        cases += found
    return cases, counts


def _expr(src: str) -> str | None:
    try:
        return ast.dump(ast.parse(src.strip(), mode="eval"))
    except SyntaxError:
        return None


def _body(src: str) -> str | None:
    try:
        return ast.dump(ast.parse(src.strip(), mode="eval").body)
    except SyntaxError:
        return None


def _argument_of(insert: str) -> str:
    """The argument in a jump's newText (its separators and ``name=`` off)."""
    a = insert.strip().strip(",").strip()
    head, eq, rest = a.partition("=")
    return rest.strip() if eq and head.strip().isidentifier() and not rest.startswith("=") else a


def _new_args(call_src: str) -> list[str]:
    tree = ast.parse(call_src.strip(), mode="eval").body
    assert isinstance(tree, ast.Call)
    return [ast.dump(a) for a in tree.args] + [ast.dump(k.value) for k in tree.keywords]


def _placeholder(text: str, at: int) -> str:
    """What a user writes at a jump target the model had nothing for (only its being written matters)."""
    before, after = text[:at].rstrip(), text[at:].lstrip()
    if before.endswith(("(", ",")):
        return "None" if after.startswith(")") else "None, "
    return ", None"


class Replay:
    """The real server over stdio (bench_next_edit.Wire); one document at a time."""

    def __init__(self, model: str, server_log: Path | None = None, root: Path | None = None) -> None:
        # a fresh completion cache: an argument a run before wrote must not come from disk
        self.cache = tempfile.TemporaryDirectory(prefix="flint-bench-signatures-")
        logs = ["-v", "--log-file", str(server_log)] if server_log is not None else []
        self.proc = subprocess.Popen([sys.executable, "-m", "lsp_server", *logs, "--model", model], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ, "PYTHONPATH": str(ROOT), "FLINT_CACHE_DIR": self.cache.name})
        self.w = Wire(self.proc)
        self.w.call("initialize", {"processId": None, "capabilities": {},
                                   "rootUri": root.as_uri() if root is not None else None})
        self.w.notify("initialized", {})
        self.asked = False

    def ask(self, uri: str, version: int, text: str, at: int) -> dict:
        line, ch = offset_to_position(text, at, "utf-16")
        _, res = self.w.call("flint/nextEdit", {"textDocument": {"uri": uri, "version": version},
                                                "position": {"line": line, "character": ch}})
        return res.get("result") or {}

    def settle(self, uri: str, version: int, text: str, at: int, res: dict, offered: list[float] | None = None
               ) -> dict:
        """Ask again while the answer is ``pending`` (a jump's argument still being written, other documents
        still searched), as the clients do: after ``AGAIN_MS``, each wait half as long again up to
        ``AGAIN_MAX_MS``, for ``AGAIN_FOR_S``. ``offered``: gets the time of the first answer with an offer."""
        t0, delay = time.perf_counter(), AGAIN_MS
        while res.get("pending") and time.perf_counter() + delay / 1000 - t0 <= AGAIN_FOR_S:
            time.sleep(delay / 1000)
            res = self.ask(uri, version, text, at)
            if offered is not None and not offered and _offers(res):
                offered.append(time.perf_counter())
            delay = min(delay * 1.5, AGAIN_MAX_MS)
        return res

    def change(self, uri: str, version: int, text: str, a: int, b: int, new: str) -> str:
        ra, rb = offset_to_position(text, a, "utf-16"), offset_to_position(text, b, "utf-16")
        self.w.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [
            {"range": {"start": {"line": ra[0], "character": ra[1]}, "end": {"line": rb[0], "character": rb[1]}},
             "text": new}]})
        return text[:a] + new + text[b:]

    def close(self) -> None:
        self.w.stop()
        self.cache.cleanup()


def _offers(res: dict) -> bool:
    return bool(res.get("edits") or res.get("jumps") or res.get("elsewhere"))


OFFER_PLACES = ("changed", "unchanged", "call without truth", "elsewhere", "its own body")
CALL_SITE = OFFER_PLACES[:4]  # the offers call-site precision counts (all but the def's own body)


def _where(case: Case, off: int, i: int | None) -> str:
    """Where an offer lies: in a call that changed, one that did not, a call of the function whose group the
    truth leaves out (the calls there were rewritten otherwise), in the edited def itself (a renamed
    parameter's uses in its body: a rename's next edits, not a call site's), or elsewhere."""
    if i is not None:
        return "changed" if case.truth[i].changed else "unchanged"
    if any(s <= off <= e for s, e in case.calls):
        return "call without truth"
    return "its own body" if case.body[0] <= off <= case.body[1] else "elsewhere"


def replay(r: Replay, case: Case, k: int) -> dict:
    """One case through the server (module docstring): what was offered where, and how right."""
    uri = (Path("/tmp/flint-bench-signatures") / str(k) / case.module).as_uri()
    r.w.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                         "text": case.before}})
    if not r.asked:
        r.ask(uri, 1, case.before, 0)  # the first ask starts speculation and warms jedi
        r.asked = True
        time.sleep(1.0)
    time.sleep(OPEN_S)
    s, oe, ne = case.span
    cur = r.change(uri, 2, case.before, s, oe, case.edited[s:ne])
    t_last = time.perf_counter()
    time.sleep(PAUSE_S)
    res = r.ask(uri, 2, cur, ne)
    first_ms = (time.perf_counter() - t_last) * 1000
    offered = [time.perf_counter()] if _offers(res) else []
    res = r.settle(uri, 2, cur, ne, res, offered)
    whole_ms = (time.perf_counter() - t_last) * 1000
    offers = [(position_to_offset(cur, e["range"]["start"]["line"], e["range"]["start"]["character"], "utf-16"), "edit")
              for e in res.get("edits", [])]
    offers += [(position_to_offset(cur, j["range"]["start"]["line"], j["range"]["start"]["character"], "utf-16"), "jump")
               for j in res.get("jumps", [])]
    hit = [next((i for i, t in enumerate(case.truth) if t.start <= off <= t.end), None) for off, _ in offers]
    where = [_where(case, off, i) for (off, _), i in zip(offers, hit, strict=True)]
    out = {"case": f"{case.pair} {case.module} {case.qualname}", "split": case.split, "kind": case.kind,
           "truth_changed": sum(t.changed for t in case.truth), "offered": len(offers),
           "offered_right": sum(i is not None and case.truth[i].changed for i in hit),
           "found": len({i for i in hit if i is not None and case.truth[i].changed}),
           "offers_at": {w: where.count(w) for w in OFFER_PLACES},
           "not_right": [{"at": w, "kind": kind, "line": cur[cur.rfind("\n", 0, off) + 1:cur.find("\n", off)].strip()[:120]}
                         for (off, kind), w in zip(offers, where, strict=True) if w != "changed"],
           "first_answer_ms": round(first_ms, 1),
           "first_offer_ms": round((offered[0] - t_last) * 1000, 1) if offered else None, "whole_answer_ms": round(whole_ms, 1), "steps": []}
    shifts: list[tuple[int, int]] = []  # (offset in the edited text, length added there)
    v = 2
    for _ in range(MAX_STEPS):
        offer = (res.get("edits") or res.get("jumps") or [None])[0]
        if offer is None:
            break
        a = position_to_offset(cur, offer["range"]["start"]["line"], offer["range"]["start"]["character"], "utf-16")
        b = position_to_offset(cur, offer["range"]["end"]["line"], offer["range"]["end"]["character"], "utf-16")
        base = a - sum(d for o, d in shifts if o < a)  # back into the edited text's offsets
        i = next((i for i, t in enumerate(case.truth) if t.start <= base <= t.end), None)
        jump = "note" in offer
        new = offer.get("newText") or (_placeholder(cur, a) if jump else "")
        step = {"jump": jump, "text": offer.get("newText"), "confidence": offer.get("confidence"),
                "truth": None if i is None else case.truth[i].changed}
        t = case.truth[i] if i is not None else None
        v += 1
        cur = r.change(uri, v, cur, a, b, new)
        shifts.append((base, len(new) - (b - a)))
        if t is not None and t.changed and offer.get("newText") is not None:
            lo = t.start + sum(d for o, d in shifts if o < t.start)
            hi = t.end + sum(d for o, d in shifts if o <= t.end)
            step["call_exact"] = _expr(cur[lo:hi]) == _expr(t.new_call)
            if jump:
                step["argument_exact"] = _body(_argument_of(offer["newText"])) in _new_args(t.new_call)
        out["steps"].append(step)
        t0 = time.perf_counter()
        res = r.ask(uri, v, cur, a + len(new))
        step["next_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        res = r.settle(uri, v, cur, a + len(new), res)
        step["next_whole_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    r.w.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    return out


def summary(rows: list[dict]) -> dict:
    jumps = [st for r in rows for st in r["steps"] if st["jump"] and st["truth"]]
    shown = [st for st in jumps if st["text"]]
    edits = [st for r in rows for st in r["steps"] if not st["jump"] and st["truth"]]
    offered, right = sum(r["offered"] for r in rows), sum(r["offered_right"] for r in rows)
    truth, found = sum(r["truth_changed"] for r in rows), sum(r["found"] for r in rows)
    return {"cases": len(rows), "calls_changed": truth, "locations_offered": offered,
            "location_precision": ratio(right, offered), "location_recall": ratio(found, truth),
            "offers_at": {w: sum(r.get("offers_at", {}).get(w, 0) for r in rows) for w in OFFER_PLACES},
            "call_site_precision": ratio(right, sum(r.get("offers_at", {}).get(w, 0) for r in rows for w in CALL_SITE)),
            "edits_taken": len(edits), "edits_call_exact": sum(bool(st.get("call_exact")) for st in edits),
            "jumps_taken": len(jumps), "jumps_with_text": len(shown),
            "argument_exact": sum(bool(st.get("argument_exact")) for st in shown),
            "argument_exact_of_shown": ratio(sum(bool(st.get("argument_exact")) for st in shown), len(shown)),
            "argument_exact_of_all": ratio(sum(bool(st.get("argument_exact")) for st in shown), len(jumps)),
            "first_answer": lat_summary([r["first_answer_ms"] for r in rows]),
            "first_offer": lat_summary([r["first_offer_ms"] for r in rows if r.get("first_offer_ms") is not None]),
            "whole_answer": lat_summary([r["whole_answer_ms"] for r in rows if "whole_answer_ms" in r]),
            "argument_ready": lat_summary([r["whole_answer_ms"] for r in rows if "whole_answer_ms" in r
                                           and r["steps"] and r["steps"][0]["jump"] and r["steps"][0]["text"]]),
            "next_answer": lat_summary([st["next_ms"] for r in rows for st in r["steps"] if "next_ms" in st])}


def report(result: dict) -> str:
    lines = ["# Next edits after a signature change, on real version pairs (issue 50)", "",
             f"`scripts/bench_next_edit_signatures.py`, commit {result['commit']}, {result['cpu']}, "
             f"model {result['model']}, {result['date']}. What it measures: the script's docstring.", "",
             "| pair | split | signatures changed | cases (added/removed/renamed) | calls changed |",
             "| --- | --- | --- | --- | --- |"]
    for pair, c in result["pairs"].items():
        k = c["by_kind"]
        lines.append(f"| {pair} | {c['split']} | {c['signatures_changed']} | {c['cases']} "
                     f"({k['added']}/{k['removed']}/{k['renamed']}) | {c['calls_changed']} |")
    lines += ["", "| split | cases | calls changed | locations offered | call-site precision (of all offers) | "
              "recall | edits taken (call exact) | jumps taken | with text | argument exact (of shown / of all) | "
              "first answer p50 / p95 ms | first offer p50 / p95 ms (cases) | whole answer p50 / p95 ms | "
              "argument shown p50 / p95 ms |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for split, m in result["splits"].items():
        whole, arg, offer = m.get("whole_answer", {}), m.get("argument_ready", {}), m.get("first_offer", {})
        lines.append(f"| {split} | {m['cases']} | {m['calls_changed']} | {m['locations_offered']} | "
                     f"{m.get('call_site_precision')} ({m['location_precision']}) | {m['location_recall']} | "
                     f"{m['edits_taken']} ({m['edits_call_exact']}) | {m['jumps_taken']} | {m['jumps_with_text']} | "
                     f"{m['argument_exact']} ({m['argument_exact_of_shown']} / {m['argument_exact_of_all']}) | "
                     f"{m['first_answer']['p50_ms']} / {m['first_answer']['p95_ms']} | "
                     f"{offer.get('p50_ms')} / {offer.get('p95_ms')} ({offer.get('n')}) | "
                     f"{whole.get('p50_ms')} / {whole.get('p95_ms')} | {arg.get('p50_ms')} / {arg.get('p95_ms')} |")
    lines += ["", "First answer: from the edit to the server's first answer, whatever it holds (the first offer's "
              "place, a jump target's argument may follow; or nothing, pending or final); first offer: from the edit "
              "to the first answer that holds an offer, over the cases with one (an offer that came on a re-ask "
              "counts when that re-ask came, as a client sees it); both include the client's 200 ms pause and the "
              "server's 150 ms settle; whole answer: to the last re-ask while the answer was `pending`, as the clients "
              "ask; argument shown: the whole answer of the cases whose first offer was a jump that came with "
              "the model's argument.", "",
              "Where the offers lay (call-site precision counts the first column right of the first four; a call "
              "without truth is one whose enclosing function's calls of it were rewritten otherwise, so the new "
              "version does not say; its own body: a renamed parameter's uses in the edited def, a rename's next "
              "edits; the precision in brackets counts every offer, these too, as not right):",
              "", "| split | " + " | ".join(OFFER_PLACES) + " |", "| --- |" + " --- |" * len(OFFER_PLACES)]
    for split, m in result["splits"].items():
        lines.append(f"| {split} | " + " | ".join(str(m["offers_at"][w]) for w in OFFER_PLACES) + " |")
    if result.get("floors"):
        lines += ["", "Floor sweep (`--sweep`: the model at every true jump target, in process, no floor; "
                  "shown / exact of all true jump targets):", "",
                  "| floor | " + " | ".join(result["floors"]) + " |",
                  "| --- |" + " --- |" * len(result["floors"])]
        for fl in [*map(str, FLOORS), "served"]:
            if not all(fl in v for v in result["floors"].values()):
                continue
            cells = [f"{v[fl]['shown']} / {v[fl]['exact']} of {v[fl]['of']}"
                     + (f" (wrong hidden {v[fl]['wrong_hidden']} of {v[fl]['wrong']})" if "wrong" in v[fl] else "")
                     for v in result["floors"].values()]
            lines.append(f"| {fl} | " + " | ".join(cells) + " |")
        lines += ["", "served: what the server shows (the floor, the names checked against the call's scope, the "
                  "caller's own name of the parameter where the model was unsure: engine/edits/bound.py); its wrong "
                  "hidden counts the sites where the model's own text was wrong and no wrong text is shown."]
    lines += ["", "Per case (offered / right / changed calls found of all; each jump taken: its text, "
              "confidence, argument exact):", ""]
    for r in result["rows"]:
        js = "; ".join(f"{st['text']!r} p={st['confidence']} {'exact' if st.get('argument_exact') else 'wrong'}"
                       for st in r["steps"] if st["jump"] and st["text"])
        lines.append(f"- {r['split']}, {r['kind']}: {r['case']}: {r['offered']} / {r['offered_right']} / "
                     f"{r['found']} of {r['truth_changed']}" + (f"; {js}" if js else ""))
        lines += [f"  - not right ({x['at']}, {x['kind']}): `{x['line']}`" for x in r.get("not_right", [])]
    return "\n".join(lines) + "\n"


FLOORS = (0.0, 0.2, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.8, 0.9)


def sweep(cases: list[Case], model: str, log) -> list[dict]:
    """The model's argument at every true jump target of the ``added`` cases, in process (engine_fill, the
    same prompt and cut as the server's, no floor): its confidence and whether it is exact. What the floor
    would show at each value (chosen on the tuning half only)."""
    from engine.config import EngineConfig, resolve_model_dir
    from engine.edits import fill
    from engine.edits.fill import FILL_PARAMS, answer, def_line, fill_prompt, header
    from engine.edits.scope import names_in_scope
    from engine.edits.signature import call_edits, calls
    from engine.engine import Engine
    from engine.guidance.jedi_analyser import JediAnalyser

    eng = Engine.load(resolve_model_dir(model), config=EngineConfig(threads=2))
    jedi = JediAnalyser()
    out = []
    for c in cases:
        if c.kind != "added":
            continue
        s, oe, ne = c.span
        ch = change_of(c.before, c.edited, s, oe, ne)
        assert ch is not None
        offs = [i for i in range(len(c.edited)) if c.edited.startswith(ch.name + "(", i)]
        sig, def_at = ch.signature or header(c.edited, ch.name_at), c.edited.rfind("\n", 0, ch.name_at) + 1
        for j in call_edits(c.edited, ch, calls(c.edited, offs)):
            t = next((t for t in c.truth if t.start <= j.range_start <= t.end and t.changed), None)
            if not j.jump or t is None:
                continue
            t0 = time.perf_counter()
            path = str(Path("/tmp/flint-bench-signatures") / "sweep" / c.module)  # (as the server's: no project)
            names = names_in_scope(c.edited, j.range_start, def_line(c.edited, j.range_start), path=path,
                                   lead=j.fill.lead if j.fill else "", analyser=jedi, wait_s=10.0
                                   ) if fill.SCOPE_NAMES else []
            prefix, suffix = fill_prompt(c.edited, j, sig, def_at=def_at, names=names)
            comp = eng.complete(prefix, suffix, FILL_PARAMS)[0][0]
            after, said = c.edited[j.range_start:], (comp.text, comp.doubts, comp.finish_reason)
            f = answer(j, *said, 0.0, after=after).fill  # the model's own text, no floor, no scope check
            served = answer(j, *said, fill.FLOOR, after=after, text=c.edited).fill  # what the server shows
            assert f is not None and served is not None
            truth = _new_args(t.new_call)
            out.append({"split": c.split, "case": f"{c.pair} {c.qualname}", "text": f.text, "raw": comp.text[:60],
                        "names": names, "call": t.new_call[:160], "param": j.note,
                        "confidence": f.confidence, "ms": round((time.perf_counter() - t0) * 1000, 1),
                        "exact": bool(f.text) and _body(_argument_of(f.text)) in truth, "served": served.text,
                        "served_confidence": served.confidence,
                        "served_exact": bool(served.text) and _body(_argument_of(served.text)) in truth})
            log(f"  sweep {c.qualname}: {f.text!r} p={f.confidence} exact={out[-1]['exact']} served={served.text!r} "
                f"call={t.new_call[:100]!r}")
    return out


def floors(rows: list[dict], splits: tuple[str, ...] = ("tuning", "validation")) -> dict:
    """Per split and floor: shown, exact, of all; ``wrong_hidden`` of ``wrong``: the sites where the model's
    text (no floor) is not the real argument, and how many of them the floor leaves without text."""
    out = {}
    for s in splits:
        rs = [r for r in rows if r["split"] == s]
        wrong = [r for r in rs if not r["exact"]]
        out[s] = {str(fl): {"shown": sum(r["confidence"] >= fl and bool(r["text"]) for r in rs),
                            "exact": sum(r["confidence"] >= fl and r["exact"] for r in rs), "of": len(rs),
                            "wrong": len(wrong),
                            "wrong_hidden": sum(not (r["confidence"] >= fl and bool(r["text"])) for r in wrong)}
                  for fl in FLOORS}
        if rs and "served" in rs[0]:  # (a sweep before the served text was recorded has none)
            out[s]["served"] = {"shown": sum(bool(r["served"]) for r in rs), "exact": sum(r["served_exact"] for r in rs),
                                "of": len(rs), "wrong": len(wrong),
                                "wrong_hidden": sum(not r["served"] or r["served_exact"] for r in wrong)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/flint-bench-signatures-cache"))
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--scan", action="store_true", help="list the cases only (no server)")
    ap.add_argument("--sweep", action="store_true", help="also the floor sweep (the model in process, no floor)")
    ap.add_argument("--sweep-only", action="store_true", help="the sweep alone (no server replay)")
    ap.add_argument("--split", choices=("tuning", "validation", "both"), default="both",
                    help="the cases of one half only (tune on tuning; validation once)")
    ap.add_argument("--no-caller", action="store_true", help="the fill prompt without the caller's header")
    ap.add_argument("--scope", choices=("on", "off"), help="the sweep's fill prompt with or without the caller's "
                    "names in scope (default: engine/edits/fill.py SCOPE_NAMES)")
    ap.add_argument("--out", type=Path, default=OUT, help="the report's path without its suffix")
    ap.add_argument("--purpose", default="", help="why this run looks at the validation half: one line for "
                    "docs/benchmarks/ledger.md (required then)")
    ap.add_argument("--only", action="append", help="only the cases whose 'module qualname' holds this (repeatable)")
    ap.add_argument("--server-log", type=Path, help="the server's debug log to this file (-v --log-file): for "
                    "diagnosis only, it logs every message and slows every request")
    args = ap.parse_args()
    commit = _commit()  # the code the server starts with (a commit made during the run is not it)
    if args.split != "tuning" and not args.scan and not args.purpose:
        ap.error("the validation half is looked at: say why (--purpose), for docs/benchmarks/ledger.md")
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    if args.no_caller:
        fill_module.CALLER_HEADER = False
    if args.scope is not None:
        fill_module.SCOPE_NAMES = args.scope == "on"
    cases, counts = all_cases(args.cache, log)
    splits = ("tuning", "validation") if args.split == "both" else (args.split,)
    cases = [c for c in cases if c.split in splits and (not args.only or any(o in f"{c.module} {c.qualname}" for o in args.only))]
    if args.scan:
        for c in cases:
            print(c.split, c.kind, c.pair, c.module, c.qualname, sum(t.changed for t in c.truth), len(c.truth))
        return
    if args.split != "tuning":  # before looking: an interrupted run has looked too
        append_ledger(ledger_row(time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "validation", {"this": commit},
                                 "python scripts/bench_next_edit_signatures.py " + " ".join(sys.argv[1:]),
                                 args.purpose + " (the signature benchmark's pairs, not the replay's)", cpu_line(cpu_info())))
    swept = sweep(cases, args.model, log) if args.sweep or args.sweep_only else []
    rows = []
    if not args.sweep_only:
        r = Replay(args.model, args.server_log)
        time.sleep(2.0)
        try:
            for k, c in enumerate(cases):
                rows.append(replay(r, c, k))
                log(f"  {rows[-1]['case']}: {rows[-1]['offered']} offered, {rows[-1]['found']} of "
                    f"{rows[-1]['truth_changed']} found")
        finally:
            r.close()
    result = {"commit": commit, "cpu": lscpu_model(), "model": args.model,
              "date": time.strftime("%Y-%m-%d"), "pairs": counts,
              "splits": {s: summary([x for x in rows if x["split"] == s]) for s in splits} if rows else {},
              "rows": rows, "sweep": swept, "floors": floors(swept, splits) if swept else None,
              "fill_prompt": {"caller_header": not args.no_caller, "scope_names": fill_module.SCOPE_NAMES},
              "floor": FLOOR}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(report(result))
    log(json.dumps({"splits": result["splits"], "floors": result["floors"]}, indent=1))


if __name__ == "__main__":
    main()
