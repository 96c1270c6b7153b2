"""A function's parameters changed: the edits its call sites need, found by jedi (issue 50).

signature.py says what changed (``signature_change``) and what each call needs (``call_edits``); this
module finds the calls: jedi's references to the function's name in this document
(``Script.get_references``, through the analyser's worker thread) and, for a function the other open
documents can import (not a nested one), its references there (workspace.py's ``goto``: the unsaved texts
count) and in the workspace's Python files on disk that are not open (ondisk.py finds the few that hold
the name; jedi asks them as it asks the open ones). Each reference that is a call's callee is a call site. A document's edits are offered only when
the text with them applied parses.
"""

from __future__ import annotations

import ast
import time
from collections.abc import Callable, Sequence
from typing import Any

from engine.edits.common import JEDI_BUDGET_S, Lines, NextEdit, apply_all, ast_offset, parse, parses
from engine.edits.constructor import constructor_change, field_change
from engine.edits.history import Edit
from engine.edits.local import class_at, module_references
from engine.edits.ondisk import DiskSearch
from engine.edits.rename import jedi_references
from engine.edits.signature import Change, call_edits, calls, signature_change
from engine.edits.workspace import OpenDoc, occurrences_elsewhere, on_disk


def last_signature_change(text: str, edits: Sequence[Edit]) -> Change | None:
    """The parameter change the last of ``edits`` made to the current ``text`` (signature.py), a class's
    ``__init__``'s or an added field's as its calls see it (constructor.py)."""
    if not edits:
        return None
    e = edits[-1]
    before = e.undo(text)
    change = signature_change(before, text, e.start, e.old_end, e.new_end)
    if change is not None:
        return constructor_change(text, change)
    return field_change(before, text, e.start, e.new_end)


def _checked(text: str, edits: list[NextEdit]) -> list[NextEdit]:
    return edits if edits and parses(apply_all(text, edits)) else []


def call_site_edits(text: str, change: Change, *, path: str | None, analyser: Any, deadline: float | None = None,
                    others: Sequence[OpenDoc] = (), disk: DiskSearch | None = None
                    ) -> tuple[list[NextEdit], dict[str, list[NextEdit]]]:
    """The call sites' edits after ``change`` of the current ``text``: here, and in ``others`` (and, with
    ``disk``, the workspace's files on disk: ondisk.py) by key."""
    deadline = deadline if deadline is not None else time.monotonic() + JEDI_BUDGET_S
    here = call_sites_here(text, change, path=path, analyser=analyser, deadline=deadline)
    if here is None:
        return [], {}
    return here, call_sites_elsewhere(text, change, path=path, analyser=analyser, deadline=deadline, others=others,
                                      disk=disk)


def call_sites_here(text: str, change: Change, *, path: str | None, analyser: Any, deadline: float
                    ) -> list[NextEdit] | None:
    """The edits of the calls in this document (a module's function: the syntax tree's references, local.py;
    else jedi's); None when jedi does not know the function (then it has no opinion elsewhere either)."""
    offs = None
    if _top_level(text, change.name_at, 0):
        try:
            offs = module_references(parse(text), text, change.name_at, change.name)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            offs = None  # (jedi reads a text that does not parse)
    if offs is None:
        refs = jedi_references(text, change.name_at, path=path, analyser=analyser, deadline=deadline)
        if not refs or all(off != change.name_at for off, _ in refs):
            return None
        offs = [off for off, _ in refs]
    return _checked(text, call_edits(text, change, calls(text, offs)))


def self_calls_here(text: str, change: Change) -> list[NextEdit]:
    """The edits of a method's calls through ``self.`` or ``cls.`` in its own class, from the syntax tree
    alone: a first part while jedi looks for every call (on the signature benchmark, 63 of the 66 changed
    calls of methods); [] for a module's function, or when the tree cannot say."""
    if _top_level(text, change.name_at, 0):
        return []
    try:
        tree = parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return []
    lines = Lines(text)
    owner = class_at(tree, lines.line_of(change.name_at) + 1) if isinstance(tree, ast.Module) else None
    if owner is None:  # (the class the def stands in)
        return []
    offs, todo = [change.name_at], list[ast.AST](owner.body)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.ClassDef):
            continue  # another class's self
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == change.name and \
                isinstance(n.func.value, ast.Name) and n.func.value.id in ("self", "cls") and n.func.end_lineno:
            at = ast_offset(text, lines, n.func.end_lineno, n.func.end_col_offset or 0) - len(change.name)
            if text[at:at + len(change.name)] == change.name:
                offs.append(at)
        todo.extend(ast.iter_child_nodes(n))
    return _checked(text, call_edits(text, change, calls(text, offs))) if len(offs) > 1 else []


def call_sites_elsewhere(text: str, change: Change, *, path: str | None, analyser: Any, deadline: float,
                         others: Sequence[OpenDoc] = (), disk: DiskSearch | None = None,
                         each: Callable[[OpenDoc, list[NextEdit]], None] | None = None
                         ) -> dict[str, list[NextEdit]]:
    """The edits of the calls in ``others``, then (with ``disk``) in the files on disk, by key; ``each(doc,
    edits)`` as each document's are found (workspace.occurrences_elsewhere)."""
    if not (others or disk is not None) or path is None or analyser is None or not _top_level(text, change.name_at):
        return {}

    def at_calls(d: OpenDoc, offs: list[int]) -> list[NextEdit]:
        return _checked(d.text, call_edits(d.text, change, calls(d.text, offs)))

    return occurrences_elsewhere(text, change.name_at, change.name, path, others, at_calls, analyser=analyser,
                                 deadline=deadline, each=each,
                                 more=None if disk is None else lambda: on_disk(others, disk, change.name, path, deadline),
                                 cancelled=disk.cancelled if disk is not None else lambda: False, calls_only=True)


def _top_level(text: str, name_at: int, most: int = 4) -> bool:
    """Is the def at ``name_at`` a module's function or a class's method (indented at most ``most``)? A nested
    function is no other module's to call."""
    line_start = text.rfind("\n", 0, name_at) + 1
    indent = len(text[line_start:name_at]) - len(text[line_start:name_at].lstrip())
    return indent <= most or (most > 0 and "\t" in text[line_start:name_at])
