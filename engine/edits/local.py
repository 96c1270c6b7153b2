"""A function's own name (a parameter or a local) found from the syntax tree alone (issue 50: the first offer).

jedi's references look at every leaf of the name's spelling in the module and infer each one: an attribute
``x.name`` anywhere costs an inference of ``x``, hundreds of milliseconds in a 1,000-line module, for a
parameter whose references all sit in one function. Python's rule makes that function's own name plain to
see: a name a function binds (a parameter, an assignment target) and declares neither global nor nonlocal is
its own throughout its body. So its references are the function's parameters and the Name nodes of its body.

A nested scope (a def, lambda, class or comprehension inside the function) that only reads the name reads the
function's: Python resolves a free name in the nearest enclosing function that binds it.

``own_references`` answers only when the tree places every occurrence exactly; else None, and jedi is asked
as before: a nested scope binding the name itself, a binding the tree gives no position for (``except ... as``,
``import ... as``, a nested def's or class's own name, a match capture), ``global``/``nonlocal``, the name in the
function's own defaults, decorators or annotations (its enclosing scope's), and, for a parameter, a keyword
argument of its spelling anywhere in the text passed to any call but a builtin's or an imported module's
attribute of another name (``functools.partial``): a call's ``name=`` is a reference jedi resolves through the
callee, which may be an alias or a class attribute holding the function. rename.py still checks that no
occurrence in the function is left out (``_leftovers``).
"""

from __future__ import annotations

import ast
import bisect
import builtins
import re
from collections.abc import Iterator

from engine.edits.common import Lines, ast_offset

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (*_FUNCTIONS, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def walk_lines(tree: ast.AST, at: list[int], statements: bool = True) -> Iterator[ast.AST]:
    """The tree's nodes, not entering an expression (and, with ``statements``, a statement) whose lines hold
    none of the lines ``at`` (1-based, sorted): the lines that hold a word, so a large module's other code
    (its data literals) is not walked."""
    todo = [tree]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.expr) or (statements and isinstance(n, ast.stmt)):
            i = bisect.bisect_left(at, _first_line(n) if isinstance(n, ast.stmt) else n.lineno)
            if i == len(at) or at[i] > (n.end_lineno or n.lineno):
                continue
        yield n
        todo.extend(ast.iter_child_nodes(n))


def stmt_lists(node: ast.stmt) -> Iterator[list[ast.stmt]]:
    if isinstance(node, ast.If | ast.For | ast.AsyncFor | ast.While):
        yield from (node.body, node.orelse)
    elif isinstance(node, ast.Try | ast.TryStar):
        yield from (node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody)
    elif isinstance(node, ast.With | ast.AsyncWith | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        yield node.body
    elif isinstance(node, ast.Match):
        yield from (c.body for c in node.cases)


def _first_line(st: ast.stmt) -> int:
    if isinstance(st, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and st.decorator_list:
        return min(st.lineno, *(d.lineno for d in st.decorator_list))
    return st.lineno


def statements_at(tree: ast.Module, line: int) -> list[ast.stmt]:
    """The statements whose lines hold ``line`` (1-based; a def's from its first decorator), outermost first,
    found through statement lists only (a large module is not walked whole)."""
    out: list[ast.stmt] = []
    blocks = [tree.body]
    while blocks:
        block = blocks.pop()
        for st in block:
            if _first_line(st) <= line <= (st.end_lineno or st.lineno):
                out.append(st)
                blocks.extend(stmt_lists(st))
                break
    return out


def class_at(tree: ast.Module, line: int) -> ast.ClassDef | None:
    """The innermost class whose body holds ``line`` directly (a statement of it, or a def's own lines: not
    inside a def's body)."""
    chain = statements_at(tree, line)
    inner = next((i for i in range(len(chain) - 1, -1, -1) if isinstance(chain[i], ast.ClassDef)), None)
    if inner is None or any(isinstance(s, _FUNCTIONS) for s in chain[inner + 1:-1]):
        return None
    cls = chain[inner]
    return cls if isinstance(cls, ast.ClassDef) else None


def enclosing_function(tree: ast.Module, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The innermost def whose lines hold ``line`` (1-based)."""
    return next((st for st in reversed(statements_at(tree, line)) if isinstance(st, _FUNCTIONS)), None)


def _builtin(text: str, name: str) -> bool:
    """Is ``name`` a builtin the module never binds itself (def, class, import, assignment, loop)?"""
    if name not in vars(builtins):
        return False
    w = re.escape(name)
    return re.search(rf"(?<![\w.]){w}\s*(?::[^=\n]*)?=(?!=)|\b(?:def|class|as|for|import)\s+{w}\b", text) is None


def _module_names(tree: ast.Module) -> set[str]:
    """Names the module binds only by a top-level ``import M`` / ``import a.b as M`` (modules, then)."""
    imported = {a.asname or a.name.split(".")[0] for st in tree.body if isinstance(st, ast.Import) for a in st.names}
    if not imported:
        return imported
    rebound: set[str] = set()  # bound any other way anywhere: not sure what it holds
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            rebound.add(n.id)
        elif isinstance(n, ast.arg):
            rebound.add(n.arg)
        elif isinstance(n, ast.ImportFrom):
            rebound |= {a.asname or a.name for a in n.names}
        elif isinstance(n, (*_FUNCTIONS, ast.ClassDef)):
            rebound.add(n.name)
        elif isinstance(n, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and n.name:
            rebound.add(n.name)
        elif isinstance(n, ast.Global | ast.Nonlocal):
            rebound |= set(n.names)
    return imported - rebound


def _keyword_calls(tree: ast.Module, text: str, lines: Lines, name: str, owner: str) -> bool:
    """Is ``name=`` passed by keyword to a call that could be the function ``owner``'s (any callee but a builtin
    the module leaves alone, or another module's attribute of another name, ``functools.partial``: an alias
    or a class attribute can hold the function, ``self.factory(name=...)``), or does a keyword of that spelling
    sit where no statement holds it (do not guess)?"""
    modules: set[str] | None = None
    for m in re.finditer(rf"[(,]\s*{re.escape(name)}\s*=(?!=)", text):
        chain = statements_at(tree, lines.line_of(m.end()) + 1)
        if not chain:
            return True
        st = chain[-1]
        todo: list[ast.AST] = [st]
        while todo:  # the statement itself, not the statements of its blocks
            n = todo.pop()
            if isinstance(n, ast.Call) and any(k.arg == name for k in n.keywords):
                f = n.func
                if isinstance(f, ast.Name) and _builtin(text, f.id):
                    continue
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.attr != owner:
                    modules = _module_names(tree) if modules is None else modules
                    if f.value.id in modules:
                        continue
                return True
            todo.extend(c for c in ast.iter_child_nodes(n) if n is st and not isinstance(c, ast.stmt) or n is not st)
    return False


def _positionless(n: ast.AST, name: str) -> bool:
    """A binding of ``name`` the tree gives no position for, or a declaration that moves it elsewhere."""
    if isinstance(n, ast.ExceptHandler | ast.MatchAs | ast.MatchStar):
        return n.name == name
    if isinstance(n, ast.MatchMapping):
        return n.rest == name
    if isinstance(n, ast.alias):
        return (n.asname or n.name.split(".")[0]) == name
    if isinstance(n, ast.Global | ast.Nonlocal):
        return name in n.names
    return isinstance(n, (*_FUNCTIONS, ast.ClassDef)) and n.name == name


def _mentions(node: ast.AST, name: str) -> bool:
    return any((isinstance(n, ast.Name) and n.id == name) or (isinstance(n, ast.arg) and n.arg == name)
               or _positionless(n, name) for n in ast.walk(node))


def _own_names(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> list[ast.Name] | None:
    """The Name nodes of ``name`` in ``fn``'s body, nested scopes' included where they only read it (a closure:
    the nearest enclosing function that binds a free name owns it, and a class body passes its free names
    through too); None when a nested scope binds it itself (a parameter, an assignment, ``nonlocal``, a
    comprehension's target) or a binding of it has no position."""
    out: list[ast.Name] = []
    todo: list[ast.AST] = list(fn.body)
    while todo:
        n = todo.pop()
        if isinstance(n, _SCOPES) and _mentions(n, name) and _binds_here(n, name):
            return None  # its own name there (a comprehension's first iterable aside: do not guess)
        if _positionless(n, name):
            return None
        if isinstance(n, ast.Name) and n.id == name:
            out.append(n)
        todo.extend(ast.iter_child_nodes(n))
    return out


def own_references(tree: ast.AST, text: str, site: int, name: str, *, keywords: bool = True
                   ) -> tuple[list[int], tuple[int, int]] | None:
    """The offsets of every reference of ``name`` (at ``site`` of ``text``, whose tree is ``tree``) when it is
    one function's own, with that function's span (from its ``def`` line); None when the tree cannot say
    (module docstring). ``keywords=False``: a parameter's references in its function even when ``name=`` is
    passed at calls that may be the function's (those keywords, which jedi must find, are then left out)."""
    if not isinstance(tree, ast.Module):
        return None
    lines = Lines(text)
    fn = enclosing_function(tree, lines.line_of(site) + 1)
    if fn is None:
        return None
    a = fn.args
    params = [x for x in a.posonlyargs + a.args + a.kwonlyargs + [v for v in (a.vararg, a.kwarg) if v]
              if x.arg == name]
    outer = [*fn.decorator_list, *a.defaults, *(d for d in a.kw_defaults if d is not None),
             *(x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs + [v for v in (a.vararg, a.kwarg) if v]
               if x.annotation is not None), *([fn.returns] if fn.returns is not None else [])]
    if any(_mentions(o, name) for o in outer):
        return None  # evaluated in the enclosing scope: not this function's name there
    names = _own_names(fn, name)
    if names is None or not (params or any(isinstance(n.ctx, ast.Store | ast.Del) for n in names)):
        return None  # a name the function only reads is another scope's
    if params and keywords and _keyword_calls(tree, text, lines, name, fn.name):
        return None  # passed by keyword to a call that may be this function's: jedi knows which ones are
    offs = sorted({ast_offset(text, lines, x.lineno, x.col_offset) for x in params}
                  | {ast_offset(text, lines, x.lineno, x.col_offset) for x in names})
    if site not in offs or any(text[o:o + len(name)] != name for o in offs):
        return None  # the site is in a nested scope, or a position is not the name's (do not guess)
    end = fn.end_lineno or fn.lineno
    span = (lines.starts[fn.lineno - 1], lines.starts[end] if end < len(lines.starts) else len(text))
    return offs, span


def _binds_here(scope: ast.AST, name: str) -> bool:
    """Does ``scope`` (a def, lambda, class or comprehension) bind ``name`` itself, or declare it global?"""
    if isinstance(scope, (*_FUNCTIONS, ast.Lambda)):
        a = scope.args
        if any(x.arg == name for x in a.posonlyargs + a.args + a.kwonlyargs + [v for v in (a.vararg, a.kwarg) if v]):
            return True
        body: list[ast.AST] = list(scope.body) if isinstance(scope.body, list) else [scope.body]
    elif isinstance(scope, ast.ClassDef):
        body = list(scope.body)
    elif isinstance(scope, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
        body = [g.target for g in scope.generators]
    else:
        return False
    todo = body
    while todo:
        n = todo.pop()
        if (isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store | ast.Del)) or _positionless(n, name):
            return True
        if not isinstance(n, _SCOPES):
            todo.extend(ast.iter_child_nodes(n))
    return False


def module_references(tree: ast.AST, text: str, site: int, name: str) -> list[int] | None:
    """The offsets of every reference of ``name`` in its own module (the def's or class's name among them)
    when a module-level ``def``/``class`` is its one binding there and no scope of the module binds it again
    (a parameter, a local, ``global``); None when the tree cannot say. Attribute uses (``mod.name``) are not
    followed. Only lines that hold the word are walked."""
    if not isinstance(tree, ast.Module):
        return None
    lines = Lines(text)
    word = re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")
    at = sorted({lines.line_of(m.start()) + 1 for m in word.finditer(text)})
    defs = [st for st in tree.body if isinstance(st, (*_FUNCTIONS, ast.ClassDef)) and st.name == name]
    if len(defs) != 1:
        return None
    own = word.search(text, lines.starts[defs[0].lineno - 1])
    if own is None:
        return None
    out = [own.start()]
    for n in walk_lines(tree, at):
        if (n is not defs[0] and _positionless(n, name)) or (isinstance(n, _SCOPES) and _binds_here(n, name)):
            return None  # bound again (at module level, or shadowed in a scope): jedi knows which is which
        if isinstance(n, ast.Name) and n.id == name:
            if not isinstance(n.ctx, ast.Load):
                return None
            out.append(ast_offset(text, lines, n.lineno, n.col_offset))
    out = sorted(set(out))
    if site not in out or any(text[o:o + len(name)] != name for o in out):
        return None
    return out
