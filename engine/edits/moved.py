"""A module-level function or class moved to another file: the imports of it follow (issue 50). Pure functions
on texts (``ast``; no jedi: where an import points is a matter of paths).

A move is two edits in two open documents, in either order, within ``MOVE_WINDOW_S``: one takes a top-level
``def``/``class`` out of a file (the *source*), the other puts a top-level one of the same name into another
(the *target*); after both, the target defines the name at its top level and the source no longer does
(``find_move``, asked on the edit that came last). Then each ``from <source module> import ..., name, ...``
in the other documents, open or on disk, is rewritten to import the name from the target's module
(``import_edits``): the whole statement when it imports that name alone, else the name taken out of it
and a ``from <target module> import name`` line after it, aliases kept. An absolute module name is matched
against the source's path by its last parts (``pkg.util`` is ``.../pkg/util.py``), and the target's name is
written from the same root; a relative import (``from .util import name``) gets a relative one, when the
target lies within the packages the import reached (else it is left alone). Not followed: ``import
pkg.util`` with ``pkg.util.name`` at its uses, the source's own remaining uses of the name, and re-exports.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.edits.common import Lines, NextEdit, apply_all, ast_offset, module_tree, parses
from engine.edits.history import Edit
from engine.edits.ondisk import DiskSearch
from engine.edits.workspace import OpenDoc, on_disk

MOVE_WINDOW_S = 600.0  # the cut and the paste of one move: within ten minutes of each other
MOVE_CONFIDENCE = 0.9
_DEF = re.compile(r"^(?:async[ \t]+def|def|class)[ \t]+([A-Za-z_]\w*)", re.M)


@dataclass(frozen=True)
class Moved:
    name: str
    source: str  # the file it left
    target: str  # the file it went to


def _top_names(text: str) -> set[str]:
    return set(_DEF.findall(text))


def defines(text: str, name: str) -> bool | None:
    """Does the module define ``name`` at its top level (a def or a class)? None when it does not parse."""
    tree = module_tree(text)
    if tree is None:
        return None
    return any(isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and st.name == name
               for st in tree.body)


def find_move(path: str, text: str, edits: Sequence[Edit], others: Sequence[OpenDoc]) -> Moved | None:
    """The move the last of ``edits`` (of the document ``path``, now ``text``) completed with a recent edit of
    another open document (``others``, with their edits), or None (module docstring)."""
    if not edits:
        return None
    last = edits[-1]
    put = _top_names(last.new_text) - _top_names(last.old_text)
    took = _top_names(last.old_text) - _top_names(last.new_text)
    if not put and not took:
        return None  # most edits
    for d in others:
        other, other_text = d.path, d.text
        for e in reversed(d.edits):
            if abs(e.t_last - last.t_last) > MOVE_WINDOW_S:
                continue
            came, gone = _top_names(e.new_text), _top_names(e.old_text)
            for name in sorted(put & (gone - came)):  # pasted here, cut there
                if defines(text, name) and defines(other_text, name) is False:
                    return Moved(name, other, path)
            for name in sorted(took & (came - gone)):  # cut here, pasted there
                if defines(other_text, name) and defines(text, name) is False:
                    return Moved(name, path, other)
    return None


def _parts(path: str) -> list[str]:
    """A file's module as path parts (``/w/pkg/util.py`` -> [.., "w", "pkg", "util"]; a package's
    ``__init__.py`` is its directory)."""
    head, stem = os.path.split(os.path.splitext(os.path.abspath(path))[0])
    parts = head.split(os.sep)
    return parts if stem == "__init__" else [*parts, stem]


def retarget(importer: str, module: str | None, level: int, moved: Moved) -> str | None:
    """The module an import in ``importer`` of ``module`` (``level`` dots) must name to reach ``moved``'s target
    instead of its source; None when the import is not of the source or the target has no name from there."""
    src, dst = _parts(moved.source), _parts(moved.target)
    mod = module.split(".") if module else []
    if level == 0:
        if not mod or src[-len(mod):] != mod:
            return None
        root = src[:-len(mod)]
        return ".".join(dst[len(root):]) if dst[:len(root)] == root and len(dst) > len(root) else None
    package = os.path.dirname(os.path.abspath(importer)).split(os.sep)
    if level - 1 >= len(package) or package[:len(package) - (level - 1)] + mod != src:
        return None
    for up in range(level):  # no higher than the import reached: above it may be no package
        base = package[:len(package) - up]
        if dst[:len(base)] == base and len(dst) > len(base):
            return "." * (up + 1) + ".".join(dst[len(base):])
    return None


def _without(text: str, start: int, end: int, a: int, b: int) -> str:
    """The statement ``text[start:end]`` without the imported name at ``a:b`` and its comma (its whole line
    when it stands alone on one)."""
    ls = text.rfind("\n", start, a) + 1 or start
    le = text.find("\n", b, end)
    if ls > start and not text[ls:a].strip() and text[b:end if le < 0 else le].strip() in ("", ","):
        return text[start:ls] + text[le + 1:end]
    after = re.compile(r"\s*,\s*").match(text, b, end)
    if after is not None:
        return text[start:a] + text[after.end():end]
    before = text.rfind(",", start, a)
    return text[start:before] + text[b:end]


def import_edits(path: str, text: str, moved: Moved) -> list[NextEdit]:
    """The edits that make the imports of ``moved.name`` from its source in the file ``path`` (its ``text``)
    import it from the target (module docstring); [] when it has none, or the edits would not parse."""
    if os.path.abspath(path) in (os.path.abspath(moved.source), os.path.abspath(moved.target)):
        return []
    if not re.search(rf"(?<!\w){re.escape(moved.name)}(?!\w)", text):
        return []
    tree = module_tree(text)
    if tree is None:
        return []
    lines, out = Lines(text), []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.end_lineno is None or node.end_col_offset is None:
            continue
        alias = next((x for x in node.names if x.name == moved.name), None)
        new_mod = retarget(path, node.module, node.level, moved) if alias is not None else None
        if alias is None or new_mod is None or alias.end_lineno is None or alias.end_col_offset is None:
            continue
        start = ast_offset(text, lines, node.lineno, node.col_offset)
        end = ast_offset(text, lines, node.end_lineno, node.end_col_offset)
        line = f"from {new_mod} import {moved.name}" + (f" as {alias.asname}" if alias.asname else "")
        if len(node.names) > 1:
            a = ast_offset(text, lines, alias.lineno, alias.col_offset)
            b = ast_offset(text, lines, alias.end_lineno, alias.end_col_offset)
            indent = text[text.rfind("\n", 0, start) + 1:start]
            line = _without(text, start, end, a, b) + "\n" + indent + line
        out.append(NextEdit(start, end, text[start:end], line, "move", MOVE_CONFIDENCE))
    return out if out and parses(apply_all(text, out)) else []


def move_next_edits(moved: Moved, others: Sequence[OpenDoc], *, disk: DiskSearch | None, deadline: float,
                    emit: Callable[[OpenDoc | None, list[NextEdit]], None] | None = None
                    ) -> dict[str, list[NextEdit]]:
    """The import edits in the other open documents, then in the workspace's files on disk that import the
    name, by key; ``emit``: each document's as found, after the asked document's (it has none)."""
    if emit is not None:
        emit(None, [])
    out: dict[str, list[NextEdit]] = {}
    for d in [*others, *on_disk(others, disk, moved.name, moved.source, deadline, imported=True)]:
        found = import_edits(d.path, d.text, moved)
        if found:
            out[d.key] = found
            if emit is not None:
                emit(d, found)
    return out
