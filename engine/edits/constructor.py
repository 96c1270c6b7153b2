"""A class's constructor changed: its calls ``C(...)`` follow (issue 50). Pure functions on texts (``ast``).

Two edits change what a class's calls must pass, and both become a ``Change`` of the class itself (its name
and its name's offset, the parameter's index among what a call passes, nothing bound), so the call sites are
found and edited as a function's are (callsites.py, signature.py ``call_edits``):

- a parameter of its ``__init__`` renamed, removed or added (``signature_change`` on the ``def``;
  ``self`` is what the call does not pass). Explicit ``Base.__init__(self, ...)`` and ``super().__init__(...)``
  calls are not followed: they are the subclasses' business;
- a field added without a default to a dataclass, an attrs class (``@define``, ``@frozen``, ``@mutable``,
  ``@attr.s(auto_attribs=True)``) or a ``NamedTuple``: its index among the fields that ``__init__`` takes
  (``ClassVar`` and ``field(init=False)`` are none; after ``_: KW_ONLY``, or with ``kw_only=True``, by
  keyword). A class with other bases is left alone: inherited fields come first, in an order this module
  cannot see.

The model's prompt for an added argument gets the class's header and fields (or ``__init__``'s header) as
its stub (``Change.signature``).
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace

from engine.edits.common import Lines, ast_offset, module_tree
from engine.edits.fill import header
from engine.edits.local import class_at, statements_at
from engine.edits.signature import Change, Param

_ATTRS = ("define", "frozen", "mutable")  # attrs' decorators whose annotated names are fields
_FIELD_CALLS = ("field", "ib", "attrib")  # dataclasses.field, attr.ib, attrs.field
MAX_STUB_FIELDS = 16
# an annotated name without a value alone on a line: what an added field looks like (a cheap first look)
_FIELD_LINE = re.compile(r"^[ \t]+[A-Za-z_]\w*[ \t]*:[^=\n]+$", re.M)


def _callee(node: ast.expr) -> tuple[str, str]:
    """(module or "", name) of a decorator or base: ``dataclass``, ``dataclasses.dataclass``, ``attr.s(...)``."""
    f = node.func if isinstance(node, ast.Call) else node
    if isinstance(f, ast.Subscript):
        f = f.value
    if isinstance(f, ast.Name):
        return "", f.id
    if isinstance(f, ast.Attribute):
        return (f.value.id if isinstance(f.value, ast.Name) else "?"), f.attr
    return "?", ""


def _flag(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Call) and any(k.arg == name and isinstance(k.value, ast.Constant) and
                                              k.value.value is True for k in node.keywords)


def _style(cls: ast.ClassDef) -> tuple[str, bool] | None:
    """("dataclass" | "attrs" | "namedtuple", every field by keyword) when ``cls``'s annotated names are its
    constructor's parameters in order and nothing comes before them; else None."""
    bases = [_callee(b) for b in cls.bases]
    if [n for _, n in bases if n != "Generic"] == ["NamedTuple"]:
        return "namedtuple", False
    if any(n not in ("Generic", "object") for _, n in bases) or cls.keywords:
        return None  # inherited fields come first (or a metaclass decides)
    for d in cls.decorator_list:
        mod, name = _callee(d)
        if name == "dataclass" and mod in ("", "dataclasses"):
            return "dataclass", _flag(d, "kw_only")
        if (name in _ATTRS and mod in ("", "attr", "attrs")) or \
                (name in ("s", "attrs") and mod == "attr" and _flag(d, "auto_attribs")):
            return "attrs", _flag(d, "kw_only")
    return None


def _default(value: ast.expr | None) -> bool | None:
    """Does a field with this value have a default? None: it is no parameter (``field(init=False)``)."""
    if value is None:
        return False
    if isinstance(value, ast.Call) and _callee(value)[1] in _FIELD_CALLS:
        if any(k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
               for k in value.keywords):
            return None
        return any(k.arg in ("default", "default_factory", "factory") for k in value.keywords) or bool(value.args)
    return True


def fields(cls: ast.ClassDef) -> list[tuple[Param, ast.AnnAssign]] | None:
    """The constructor's parameters that ``cls``'s fields make, in order; None for another kind of class."""
    style = _style(cls)
    if style is None:
        return None
    kind, kw_only = style
    out = []
    for st in cls.body:
        if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.simple):
            continue
        mod, ann = _callee(st.annotation)
        if ann == "ClassVar" and mod in ("", "typing"):
            continue
        if ann == "KW_ONLY" and kind == "dataclass":
            kw_only = True
            continue
        default = _default(st.value) if kind != "namedtuple" else st.value is not None
        if default is not None:
            out.append((Param(st.target.id, "kwonly" if kw_only else "pos", default), st))
    return out


def _class_line(text: str, lines: Lines, cls: ast.ClassDef) -> tuple[str, int]:
    """The class's own lines (decorators to ``class ...:``) and its name's offset."""
    top = min([cls.lineno, *(d.lineno for d in cls.decorator_list)])
    at = text.find(cls.name, ast_offset(text, lines, cls.lineno, cls.col_offset) + len("class"))
    end = text.find("\n", at)
    return text[lines.starts[top - 1]:len(text) if end < 0 else end], at


def _lines(text: str, lines: Lines, st: ast.stmt) -> str:
    end = st.end_lineno or st.lineno
    return text[lines.starts[st.lineno - 1]:lines.starts[end] - 1 if end < len(lines.starts) else len(text)]


def field_change(before: str, after: str, start: int, new_end: int) -> Change | None:
    """The field the edit ``after[start:new_end]`` added without a default to a dataclass-like class, as a
    ``Change`` of the class (module docstring); else None."""
    lines = Lines(after)
    a, b = lines.starts[lines.line_of(start)], after.find("\n", new_end)
    if not _FIELD_LINE.search(after[a:len(after) if b < 0 else b]):
        return None  # most edits: no parse of the whole file twice
    ta, tb = module_tree(after), module_tree(before)
    cls = class_at(ta, lines.line_of(new_end) + 1) if ta is not None and tb is not None else None
    if cls is None or tb is None:
        return None
    old = next((s for s in statements_at(tb, cls.lineno) if isinstance(s, ast.ClassDef) and s.name == cls.name
                and s.lineno == cls.lineno), None)
    now, was = fields(cls), fields(old) if old is not None else None
    if now is None or was is None or len(now) != len(was) + 1:
        return None
    ps, olds = [p for p, _ in now], [p for p, _ in was]
    i = next((i for i in range(len(olds)) if ps[i] != olds[i]), len(olds))
    p = ps[i]
    if ps[:i] + ps[i + 1:] != olds or p.default:
        return None
    head, name_at = _class_line(after, lines, cls)
    body = [_lines(after, lines, st) for _, st in now[:MAX_STUB_FIELDS]]
    return Change("added", cls.name, name_at, i, p, signature="\n".join([head, *body]))


def constructor_change(after: str, change: Change) -> Change:
    """``change`` of a method ``__init__`` as the change of its class's calls (module docstring); other changes
    as they are."""
    if change.name != "__init__" or not change.bound or change.index == 0:
        return change
    tree = module_tree(after)
    lines = Lines(after)
    cls = class_at(tree, lines.line_of(change.name_at) + 1) if tree is not None else None
    if cls is None:
        return change
    head, name_at = _class_line(after, lines, cls)
    init = header(after, change.name_at)
    return replace(change, name=cls.name, name_at=name_at, index=change.index - 1, bound=False,
                   signature=f"{head}\n{init}" if init else "")
