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

The replay: the old module is opened in the real server (``python -m lsp_server``, the local model) and
only the def's parameter list is replaced by the new version's, as one didChange; 200 ms later
flint/nextEdit is asked, as the clients do. Every offered edit and jump target is located in a call
(location precision and recall against the truth); then, client-like, the first offer is taken in turn:
an edit applied as offered, a jump target written with the model's argument when one is offered (else the
true argument, as the user would), asking again at once, up to ``MAX_STEPS``. Scored: whether applying the
offered text makes the call what the new version has (``ast`` equal): argument-text exactness, for
jump targets with text among those offered and among all true ones.

Pairs alternate into tuning and validation halves (``split``); nothing was tuned on either yet (the floor,
engine/edits/fill.py ``FLOOR``, is the documented first guess). CPU and commit are recorded.

    python scripts/bench_next_edit_signatures.py [--cache DIR] [--model NAME] [--scan]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_next_edit import Wire, _commit, lat_summary, lscpu_model, ratio  # noqa: E402
from replay_corpus import fetch_package, wheel_modules  # noqa: E402

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
)
MAX_STEPS = 8  # offers taken in turn per case
PAUSE_S = 0.2  # the clients ask this long after the last keystroke
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
    groups: dict[str, list[ast.Call]] = {}

    def visit(node: ast.AST, where: str) -> None:
        for ch in ast.iter_child_nodes(node):
            inner = f"{where}.{ch.name}" if isinstance(ch, Fn | ast.ClassDef) else where
            if isinstance(ch, ast.Call):
                f = ch.func
                hit = (isinstance(f, ast.Name) and f.id == name and not method) or \
                    (method and isinstance(f, ast.Attribute) and f.attr == name and isinstance(f.value, ast.Name)
                     and f.value.id in ("self", "cls", parts[0]))
                if hit:
                    groups.setdefault(where, []).append(ch)
            visit(ch, inner)

    visit(tree, "")
    return groups


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
            ge, g1 = calls_of(ast.parse(edited), edited, q), calls_of(a1, t1, q)
            for where, olds in ge.items():
                news = g1.get(where, [])
                if len(news) != len(olds):
                    continue  # the calls here were rewritten otherwise: no truth for them
                for o, n in zip(olds, news, strict=True):
                    s = _offset(edited, o.lineno, o.col_offset)
                    e = _offset(edited, o.end_lineno or o.lineno, o.end_col_offset or 0)
                    case.truth.append(Truth(s, e, changed_with(ch.kind, ch, o, n), ast.get_source_segment(t1, n) or ""))
            if case.truth:
                out.append(case)
    return out, changed


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
