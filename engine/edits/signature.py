"""A function's parameter list changed: what follows at its call sites (issue 50). Pure functions on texts
(``ast``); finding the call sites is jedi's business (callsites.py).

The user's last edit changed the parameters of one ``def`` (the file parses before and after it), in one
of three ways (``signature_change``):

- a parameter renamed (``count`` -> ``times``): each call passing ``count=`` gets ``times=`` instead;
- a parameter removed: each call passing it (by keyword, or at its position) gets that argument removed,
  with the comma and spaces that went with it;
- a parameter added without a default: each call gets a *jump target* (an empty edit, ``note`` naming the
  parameter) where the new argument goes, with its ``Fill``: the separators (and ``name=``) an argument
  there needs; what to write is the model's guess (fill.py), offered only above a confidence floor.

A call that unpacks ``*args`` or ``**kwargs`` where the change falls is left alone: where its arguments
go is not in the text. A method called through an attribute (``obj.run(...)``) has its first parameter
(``self``, ``cls``) bound already; a static method does not.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass

from engine.edits.common import Fill, Lines, NextEdit, ast_offset, module_tree
from engine.edits.local import stmt_lists, walk_lines

KEYWORD_CONFIDENCE = 0.95
REMOVE_CONFIDENCE = 0.9
JUMP_CONFIDENCE = 0.9


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # posonly | pos | vararg | kwonly | kwarg
    default: bool


@dataclass(frozen=True)
class Change:
    """``kind``: renamed | removed | added, of the parameter ``index`` (in ``before``'s list for renamed and
    removed, ``after``'s for added) of the function ``name`` defined at ``def_start`` (the same offset in the
    texts before and after: the edit lies after it); ``name_at``: its name's offset in the text after."""

    kind: str
    name: str
    name_at: int
    index: int
    param: Param
    new_name: str = ""
    bound: bool = False  # a method: an attribute call binds the first parameter
    signature: str = ""  # the model's stub when it is not the def's header at name_at (a class: constructor.py)


@dataclass(frozen=True)
class Call:
    """One call in a text, as offsets: its callee's name token, ``(``/``)``, and its arguments in source order,
    each (start, end, keyword name or None, kind): kind ``arg`` | ``star`` (``*x``) | ``kw`` | ``dstar``."""

    name_at: int
    attribute: bool  # obj.name(...), not name(...)
    open_at: int
    close_at: int
    args: tuple[tuple[int, int, str | None, str], ...]


class _Pos:
    """ast's (line, UTF-8 byte column) as offsets of ``text``."""

    def __init__(self, text: str) -> None:
        self.text, self.lines = text, Lines(text)

    def __call__(self, lineno: int, col: int) -> int:
        return ast_offset(self.text, self.lines, lineno, col)


def params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[Param]:
    a = fn.args
    pos = a.posonlyargs + a.args
    n_default = len(a.defaults)
    out = [Param(x.arg, "posonly" if i < len(a.posonlyargs) else "pos", i >= len(pos) - n_default)
           for i, x in enumerate(pos)]
    if a.vararg:
        out.append(Param(a.vararg.arg, "vararg", True))
    out += [Param(x.arg, "kwonly", d is not None) for x, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)]
    if a.kwarg:
        out.append(Param(a.kwarg.arg, "kwarg", True))
    return out


def _defs(tree: ast.Module) -> Iterable[tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool]]:
    """Every function with whether it is a method whose first parameter an attribute call binds (a def
    right in a class's body). Only statements' bodies are entered: no def lies in an expression, and a
    large module's expressions are most of its nodes."""
    stack: list[tuple[list[ast.stmt], bool]] = [(tree.body, False)]
    while stack:
        body, in_class = stack.pop()
        for st in body:
            if isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef):
                static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in st.decorator_list)
                yield st, in_class and not static
                stack.append((st.body, False))
            elif isinstance(st, ast.ClassDef):
                stack.append((st.body, True))
            else:
                stack.extend((b, False) for b in stmt_lists(st))


def _header(fn: ast.FunctionDef | ast.AsyncFunctionDef, pos: _Pos) -> tuple[int, int]:
    """The span of a def from its start to its body's first statement."""
    return pos(fn.lineno, fn.col_offset), pos(fn.body[0].lineno, fn.body[0].col_offset)


def signature_change(before: str, after: str, start: int, old_end: int, new_end: int) -> Change | None:
    """The parameter change the edit ``before[start:old_end]`` -> ``after[start:new_end]`` made, when it lies
    in one def's parameter list and renamed, removed or added exactly one parameter; else None."""
    if not _in_parameters(after, start):
        return None  # most edits: no parse of the whole file twice
    tb, ta = module_tree(before), module_tree(after)
    if tb is None or ta is None:
        return None
    pb, pa = _Pos(before), _Pos(after)
    fa = [(f, bound) for f, bound in _defs(ta) if _header(f, pa)[0] < start and new_end <= _header(f, pa)[1]]
    fb = [f for f, _ in _defs(tb) if _header(f, pb)[0] < start and old_end <= _header(f, pb)[1]]
    if len(fa) != 1 or len(fb) != 1 or fa[0][0].name != fb[0].name:
        return None
    (fn, bound), old_fn = fa[0], fb[0]
    name_at = after.find(fn.name, pa(fn.lineno, fn.col_offset))
    if not start > name_at + len(fn.name):
        return None  # the edit is in the name or the decorators, not the parameters
    a, b = params(old_fn), params(fn)
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        if len(diff) == 1 and (a[diff[0]].kind, a[diff[0]].default) == (b[diff[0]].kind, b[diff[0]].default):
            i = diff[0]
            return Change("renamed", fn.name, name_at, i, a[i], b[i].name, bound)
        return None
    if _self_only(a, b):
        return None  # a method made static or the other way round: its kind changed, not its calls
    if len(a) == len(b) + 1:
        i = next((i for i in range(len(b)) if a[i] != b[i]), len(b))
        if a[:i] + a[i + 1:] == b:
            return Change("removed", fn.name, name_at, i, a[i], bound=bound)
    if len(b) == len(a) + 1:
        i = next((i for i in range(len(a)) if a[i] != b[i]), len(a))
        if b[:i] + b[i + 1:] == a and not b[i].default and b[i].kind in ("posonly", "pos", "kwonly"):
            return Change("added", fn.name, name_at, i, b[i], bound=bound)
    return None


def _self_only(a: list[Param], b: list[Param]) -> bool:
    """Did the parameter lists ``a`` -> ``b`` gain or lose a first ``self`` / ``cls`` and nothing else? (Calls
    through an instance or class never pass it.)"""
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return len(long) == len(short) + 1 and long[0].name in ("self", "cls") and long[1:] == short


_PAREN = re.compile(r"[()]")


def _in_parameters(text: str, at: int) -> bool:
    """A cheap first look: is ``at`` after a ``def`` whose parentheses are still open there? (Strings with
    parentheses in defaults may fool it either way; ``signature_change`` parses to be sure.)"""
    d = max(text.rfind("def ", 0, at), text.rfind("def\t", 0, at))
    if d < 0:
        return False
    depth = 0
    for m in _PAREN.finditer(text, d, at):  # from the def's "(": still open at ``at`` (not closed since)
        depth += 1 if m.group() == "(" else -1
        if depth == 0:
            return False
    return depth > 0


def calls(text: str, name_offsets: Iterable[int]) -> list[Call]:
    """The calls in ``text`` whose callee's name token starts at one of ``name_offsets``."""
    tree = module_tree(text)
    wanted = set(name_offsets)
    if tree is None or not wanted:
        return []
    pos = _Pos(text)
    out = []
    for node in walk_lines(tree, sorted({pos.lines.line_of(o) + 1 for o in wanted})):  # (only the lines with them)
        if not isinstance(node, ast.Call) or node.end_lineno is None or node.end_col_offset is None:
            continue
        f = node.func
        if isinstance(f, ast.Name):
            at, attribute = pos(f.lineno, f.col_offset), False
        elif isinstance(f, ast.Attribute) and f.end_lineno is not None and f.end_col_offset is not None:
            at, attribute = pos(f.end_lineno, f.end_col_offset) - len(f.attr), True
        else:
            continue
        if at not in wanted or f.end_lineno is None or f.end_col_offset is None:
            continue
        args: list[tuple[int, int, str | None, str]] = [
                (pos(x.lineno, x.col_offset), pos(x.end_lineno, x.end_col_offset), None,  # type: ignore[arg-type]
                 "star" if isinstance(x, ast.Starred) else "arg") for x in node.args]
        args += [(pos(k.lineno, k.col_offset), pos(k.end_lineno, k.end_col_offset), k.arg,  # type: ignore[arg-type]
                  "kw" if k.arg else "dstar") for k in node.keywords]
        open_at = text.find("(", pos(f.end_lineno, f.end_col_offset))
        out.append(Call(at, attribute, open_at, pos(node.end_lineno, node.end_col_offset) - 1, tuple(sorted(args))))
    return sorted(out, key=lambda c: c.name_at)


def _removal(text: str, call: Call, j: int) -> tuple[int, int] | None:
    """The span that removes argument ``j`` of ``call`` with its comma: up to the next argument, else from
    the end of the previous one, else (the only one) up to ``)``; None across a comment."""
    args = call.args
    if j + 1 < len(args):
        span = (args[j][0], args[j + 1][0])
    elif j > 0:
        span = (args[j - 1][1], args[j][1])
    else:
        span = (call.open_at + 1, call.close_at)
    return None if "#" in text[span[0]:span[1]] else span


def call_edits(text: str, change: Change, found: Iterable[Call]) -> list[NextEdit]:
    """What each call needs after ``change`` (module docstring), in document order."""
    out = []
    p = change.param
    for call in found:
        kinds = [k for _, _, _, k in call.args]
        keywords = {kw: j for j, (_, _, kw, _) in enumerate(call.args) if kw}
        positional = [j for j, k in enumerate(kinds) if k == "arg"]
        shift = 1 if change.bound and call.attribute else 0
        at = change.index - shift  # the parameter's position among this call's positional arguments
        if change.kind == "renamed":
            if p.name in keywords:
                s = call.args[keywords[p.name]][0]
                out.append(NextEdit(s, s + len(p.name), p.name, change.new_name, "signature", KEYWORD_CONFIDENCE))
            continue
        if at < 0:
            continue
        unknown = "dstar" in kinds or ("star" in kinds and p.kind in ("posonly", "pos"))
        if change.kind == "removed":
            if p.name in keywords and p.kind != "posonly":
                j = keywords[p.name]
            elif p.kind in ("posonly", "pos") and "star" not in kinds and at < len(positional):
                j = positional[at]
            else:
                continue  # not passed here (it had a default), or behind an unpacking
            span = _removal(text, call, j)
            if span is not None and "dstar" not in kinds:
                out.append(NextEdit(span[0], span[1], text[span[0]:span[1]], "", "signature", REMOVE_CONFIDENCE))
            continue
        if unknown:
            continue
        # where, and the separators an argument written there needs (Fill: the model's text goes between)
        if p.kind == "kwonly" or at > len(positional):
            where = call.args[-1][1] if call.args else call.close_at  # after every argument, by keyword
            fill = Fill(", " if call.args else "", "", p.name)
        elif at < len(positional):
            where, fill = call.args[positional[at]][0], Fill("", ", ")  # before the argument now in its place
        elif positional:
            where, fill = call.args[positional[-1]][1], Fill(", ", "")  # after the last positional one
        else:
            where, fill = (call.args[0][0], Fill("", ", ")) if call.args else (call.close_at, Fill())
        out.append(NextEdit(where, where, "", "", "signature", JUMP_CONFIDENCE, note=p.name, fill=fill))
    return out
