"""Is the model's argument made of names bound where it goes (issue 50)?

A name that no scope binds at the call (the functions holding it, the class body it sits in directly, the
module, the builtins) raises NameError when the call runs: an argument that reads one is wrong whatever the
model's confidence, so only the jump is offered. One exception: the new parameter's own name, which is how a
value is threaded through (the caller gets the same parameter next, as real changes do) - unless the caller
already reads a value of that name qualified (``request.config``, ``params['encoding']``: ``qualified``,
nearest the call first), which then becomes the argument.

Python's scoping, read conservatively (a name bound anywhere in the outermost function around the call
counts, nested scopes' too; so do the module's, wherever at module level): what is flagged is unbound for
sure. A module whose names cannot be read from its tree (``from m import *``, ``globals()``) is not judged.

Where the model wrote nothing it is sure of, a name the calling function itself binds (a parameter, a local)
spelled as the new parameter is the argument (``own``): in real changes the argument is most often the
parameter's own name (docs/next_edits.md); read the other way round (the function's own names only, not the
module's), so what it offers is surely there.
"""

from __future__ import annotations

import ast
import builtins

from engine.edits.local import statements_at

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_MODULE_DUNDERS = {"__name__", "__file__", "__doc__", "__spec__", "__loader__", "__package__", "__builtins__",
                   "__path__", "__annotations__", "__dict__", "__debug__"}


def _bound_in(node: ast.AST, *, scopes: bool) -> set[str]:
    """The names ``node`` binds; with ``scopes`` the nested functions', lambdas' and comprehensions' own too,
    without them only the functions' names (a class body's names are its own either way: not entered)."""
    out: set[str] = set()
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, ast.Import):
            out |= {a.asname or a.name.split(".")[0] for a in n.names}
        elif isinstance(n, ast.ImportFrom):
            out |= {a.asname or a.name for a in n.names}
        elif isinstance(n, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and n.name:
            out.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            out.add(n.rest)
        elif isinstance(n, ast.Global | ast.Nonlocal):
            out |= set(n.names)
        if isinstance(n, (*_FUNCTIONS, ast.ClassDef)) and n is not node:
            out.add(n.name)
            if isinstance(n, ast.ClassDef) or not scopes:
                todo.extend(n.decorator_list)
                continue
        if isinstance(n, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) and not scopes:
            continue
        todo.extend(ast.iter_child_nodes(n))
    return out


def _module_wide(tree: ast.Module) -> set[str] | None:
    """The names ``global`` statements anywhere declare, in one walk; None when names can appear in the module
    that its tree does not show (``from m import *``, ``globals()``, ``exec``, ``vars``)."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names):
            return None
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("globals", "exec", "vars"):
            return None
        if isinstance(n, ast.Global):
            out |= set(n.names)
    return out


def bound_at(tree: ast.Module, line: int) -> set[str] | None:
    """The names a call on ``line`` (1-based) can read, None when the module's names are not all in its tree."""
    declared = _module_wide(tree)
    if declared is None:
        return None
    names = set(vars(builtins)) | _MODULE_DUNDERS | declared
    names |= _bound_in(ast.Module(body=tree.body, type_ignores=[]), scopes=False)
    chain = statements_at(tree, line)
    outer = next((st for st in chain if isinstance(st, _FUNCTIONS)), None)
    if outer is not None:
        names |= _bound_in(outer, scopes=True) | {"__class__"}
    for i, st in enumerate(chain):  # a class body's names, for a statement directly in it
        if isinstance(st, ast.ClassDef) and not any(isinstance(s, _FUNCTIONS) for s in chain[i + 1:-1]):
            names |= {n for s in st.body for n in _bound_in(s, scopes=False)} | {"__qualname__", "__module__"}
    return names


def own(tree: ast.Module, line: int, name: str) -> bool:
    """Does a function holding ``line`` bind ``name`` itself (a parameter, an assignment, a loop variable: not a
    nested scope's, not only the module's)?"""
    chain = statements_at(tree, line)
    return any(name in _bound_in(st, scopes=False) - {st.name} for st in chain if isinstance(st, _FUNCTIONS))


def read_names(arg: str) -> list[str] | None:
    """The names the argument ``arg`` (as fill.py's ``argument`` gives it: an expression or ``name=value``)
    reads, less those it binds itself (a lambda's, a comprehension's); None when it does not parse."""
    try:
        call = ast.parse(f"f({arg})", mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    assert isinstance(call, ast.Call)
    values: list[ast.expr] = [*call.args, *(k.value for k in call.keywords)]
    own = set().union(*(_bound_in(v, scopes=True) for v in values)) if values else set()
    seen: list[str] = []
    for v in values:
        for n in ast.walk(v):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in own and n.id not in seen:
                seen.append(n.id)
    return seen


def _dotted(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) or (isinstance(node, ast.Attribute) and _dotted(node.value))


def qualified(tree: ast.Module, line: int, name: str) -> str | None:
    """How the function holding ``line`` reads a value called ``name``: ``x.name`` or ``x['name']`` (x a dotted
    name, not a method called), the occurrence nearest above the call first, then below; None when it has none."""
    chain = statements_at(tree, line)
    fn = next((st for st in reversed(chain) if isinstance(st, _FUNCTIONS)), None)
    if fn is None:
        return None
    found: list[tuple[int, str]] = []
    called = {id(n.func) for n in ast.walk(fn) if isinstance(n, ast.Call)}
    for n in ast.walk(fn):
        if isinstance(n, ast.Attribute) and n.attr == name and _dotted(n.value) and id(n) not in called:
            found.append((n.lineno, ast.unparse(n)))
        elif (isinstance(n, ast.Subscript) and _dotted(n.value) and isinstance(n.slice, ast.Constant)
              and n.slice.value == name):
            found.append((n.lineno, ast.unparse(n)))
    if not found:
        return None
    above = [f for f in found if f[0] <= line]
    return max(above)[1] if above else min(found)[1]


def checked(arg: str, tree: ast.Module | None, line: int, param: str = "") -> str:
    """``arg`` as it may be offered at a call on ``line`` for the parameter ``param``: itself when every name it
    reads is bound there (or that cannot be told) or it is ``param``'s bare name the caller has no qualified
    use of; that use when it has one; else "" (it would raise NameError)."""
    if tree is None or not arg:
        return arg
    names = read_names(arg)
    bound = bound_at(tree, line)
    if names is None or bound is None:
        return arg
    free = [n for n in names if n not in bound]
    if not free:
        return arg
    head, eq, value = arg.partition("=")
    keyword = bool(eq) and head.strip().isidentifier() and not value.startswith("=")
    bare = value.strip() if keyword else arg.strip()
    if free == [bare] and bare == param:
        q = qualified(tree, line, bare)
        if q is None:
            return arg
        return f"{head.strip()}={q}" if keyword else q
    return ""
