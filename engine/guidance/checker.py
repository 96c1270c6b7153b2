"""Names in a suggestion that do not exist: the benchmark's "share of suggestions naming an attribute or a
name that does not exist" (issue 35), through jedi.

``check_suggestion(source, start, end)`` reads the completed file (the suggestion inserted at
``source[start:end]``) and looks at every name the suggestion references (not the ones it defines):

- ``name``: jedi cannot go to it and it is not among the names in scope there;
- ``attribute`` (``obj.attr``): jedi cannot go to it and the receiver's attributes are known (jedi completes
  some there) without it. An unknown receiver (nothing to complete) is counted as ``unknown``, not missing;
- ``keyword_argument`` (``f(key=...)``): the callee's signature is known, takes no ``**kwargs`` and has
  no such parameter (no signature: unknown);
- ``import``: a module or an imported name the environment does not have.

Limits: names from a ``from x import *`` jedi cannot resolve, and attributes made by ``__getattr__`` or
set from outside the class, are reported as missing; dynamic code jedi cannot follow may make ``unknown``
large. The same environment as the monitor's (``jedi.Project``) should be used for both.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Unresolved:
    name: str
    offset: int  # where the name starts in the source
    kind: str  # name | attribute | keyword_argument | import


@dataclass(frozen=True, slots=True)
class Check:
    checked: int  # names the suggestion references
    unresolved: tuple[Unresolved, ...]
    unknown: int  # references whose validity jedi cannot tell (an attribute of a receiver it cannot infer)

    @property
    def bad(self) -> bool:
        """The suggestion names something that does not exist."""
        return bool(self.unresolved)


def check_suggestion(source: str, start: int, end: int, *, path: str | None = None,
                     project: Any = None) -> Check | None:
    """The names referenced in ``source[start:end]`` that do not exist (see the module doc); None when jedi
    cannot read the file."""
    import jedi

    try:
        script = jedi.Script(source, path=path, project=project)
        module = script._module_node  # parso's tree of the same text jedi reads
    except Exception:
        return None
    starts = _line_starts(source)
    checked = unknown = 0
    bad: list[Unresolved] = []
    for leaf in _names_in(module, starts, start, end):
        kind = _kind(leaf)
        if kind is None:
            continue
        checked += 1
        line, col = leaf.start_pos
        try:
            verdict = _verdict(script, leaf, kind, line, col)
        except Exception:
            verdict = None
        if verdict is None:
            unknown += 1
        elif not verdict:
            bad.append(Unresolved(leaf.value, starts[line - 1] + col, kind))
    return Check(checked, tuple(bad), unknown)


def _line_starts(source: str) -> list[int]:
    out = [0]
    at = source.find("\n")
    while at >= 0:
        out.append(at + 1)
        at = source.find("\n", at + 1)
    return out


def _names_in(module: Any, starts: list[int], start: int, end: int) -> list[Any]:
    """Name leaves starting in [start, end)."""
    first = bisect.bisect_right(starts, start)  # 1-based line holding ``start``
    leaf = module.get_leaf_for_position((first, start - starts[first - 1]), include_prefixes=True)
    out = []
    while leaf is not None:
        line, col = leaf.start_pos
        off = starts[line - 1] + col if line - 1 < len(starts) else end
        if off >= end:
            break
        if off >= start and leaf.type == "name":
            out.append(leaf)
        leaf = leaf.get_next_leaf()
    return out


def _kind(leaf: Any) -> str | None:
    """What the name is, None for one the suggestion defines."""
    node = leaf.parent
    while node is not None and node.type not in ("import_name", "import_from", "file_input", "funcdef",
                                                   "classdef", "simple_stmt", "expr_stmt"):
        node = node.parent
    if node is not None and node.type in ("import_name", "import_from"):
        prev = leaf.get_previous_leaf()
        if prev is not None and prev.value == "as":
            return None  # the alias it defines
        return "import"
    if leaf.is_definition():
        return None
    parent = leaf.parent
    prev = leaf.get_previous_leaf()
    if parent.type == "trailer" and prev is not None and prev.value == ".":
        return "attribute"
    nxt = leaf.get_next_leaf()
    if parent.type == "argument" and parent.children[0] is leaf and nxt is not None and nxt.value == "=":
        return "keyword_argument"
    return "name"


def _verdict(script: Any, leaf: Any, kind: str, line: int, col: int) -> bool | None:
    """True: it exists; False: it does not; None: cannot tell."""
    if script.goto(line, col, follow_imports=True):
        return True
    if kind == "import":
        return False
    if kind == "keyword_argument":
        sigs = script.get_signatures(line, col)
        if not sigs:
            return None
        for sig in sigs:
            for p in sig.params:
                if p.name == leaf.value or p.kind.name == "VAR_KEYWORD":
                    return True
        return False
    names = {c.name for c in script.complete(line, col)}
    if kind == "attribute" and not names:
        return None
    return leaf.value in names
