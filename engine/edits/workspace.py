"""Exact next edits in the other open documents: a rename's references elsewhere (issue 37).

A rename in one document (``rename.find_rename``: jedi vouches for it there) of a name that is not one
function's own (a function, a class, an attribute, a module-level name) may have references in the other
open documents. Their texts are what the user sees, saved or not, so they are what counts:

1. each other open Python document that holds the old name as a word gets a jedi Script of its current
   text first. A Script parses its text into parso's cache under its path, stamped with the file's time on
   disk, and jedi, following an import into that module, takes the cached tree while the file on disk is no
   newer: so the unsaved text wins over the disk (the renamed document's text before the rename too, whose
   Script comes next);
2. jedi's ``goto`` (imports followed) at the renamed site in the text before the rename gives the
   definition; it must lie in the renamed document or in an open one (a library's name is not the user's to
   rename: changing it at a use is switching to another name);
3. in each such document, every occurrence of the old name as a name token (not in strings or comments) is
   asked ``goto`` too: those that reach the same definition are its references there.

A document is left out when the new name is in it already (a clash, or a switch to that name), when it
would hold more than ``MAX_SUGGESTIONS`` of them, or when the result would not parse. Everything jedi does
runs on the analyser's worker thread, one question at a time; the caller waits until its deadline.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from engine.edits.common import MAX_SUGGESTIONS, RENAME_CONFIDENCE, NextEdit, apply_all, parses
from engine.edits.lexer import NAME, tokens
from engine.edits.rename import Rename, new_script

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OpenDoc:
    """Another open document: the caller's ``key`` for it (a URI), its file and its current text."""

    key: str
    path: str
    text: str


def _word(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")


def references_elsewhere(rename: Rename, path: str, others: Sequence[OpenDoc], *, analyser: Any,
                         deadline: float) -> dict[str, list[NextEdit]]:
    """The rename's references in ``others`` (module docstring), by key, each list in document order; {}
    past the deadline, for a local name, or when jedi knows no definition in the user's documents."""
    if rename.local:
        return {}
    old_re, new_re = _word(rename.old), _word(rename.new)
    path = os.path.abspath(path)
    cands = [d for d in others if os.path.abspath(d.path) != path and len(d.text) <= analyser.max_chars
             and old_re.search(d.text) and not new_re.search(d.text)]
    if not cands:
        return {}
    mine = {path} | {os.path.abspath(d.path) for d in others}

    def run() -> dict[str, list[NextEdit]]:
        from engine.guidance.jedi_analyser import line_col

        try:
            scripts = {d.key: new_script(analyser, d.text, os.path.abspath(d.path)) for d in cands}
            here = new_script(analyser, rename.base, path)  # after the others: its text is the cached one
            if here is None:
                return {}
            line, col = line_col(rename.base, rename.site)
            defs = {(os.path.abspath(str(g.module_path)), g.line, g.column)
                    for g in here.goto(line, col, follow_imports=True) if g.module_path is not None and g.line}
        except Exception as e:  # jedi on arbitrary text: any failure is "no opinion"
            log.debug("jedi goto failed at %s:%d: %r", path, rename.site, e)
            return {}
        if not defs or any(p not in mine for p, _, _ in defs):
            return {}
        out: dict[str, list[NextEdit]] = {}
        for d in cands:
            if time.monotonic() > deadline:
                break
            edits = _references_in(scripts[d.key], d, rename, defs)
            if edits:
                out[d.key] = edits
        return out

    fut = analyser._pool.submit(run)  # jedi only ever runs on the analyser's worker thread
    try:
        result: dict[str, list[NextEdit]] = fut.result(timeout=max(0.0, deadline - time.monotonic()))
    except FutureTimeout:
        fut.cancel()
        return {}
    except Exception:
        return {}
    return result


def _references_in(script: Any, d: OpenDoc, rename: Rename, defs: set[tuple[str, int, int]]) -> list[NextEdit]:
    """The occurrences of the old name in ``d`` whose jedi ``goto`` reaches one of ``defs``, as renames;
    [] when there are too many, jedi fails, or the result would not parse (worker thread only)."""
    from engine.guidance.jedi_analyser import line_col

    occ = [t.start for t in tokens(d.text) if t.kind == NAME and t.text == rename.old]
    if script is None or not occ or len(occ) > MAX_SUGGESTIONS:
        return []
    refs = []
    try:
        for off in occ:
            ln, c = line_col(d.text, off)
            if any((os.path.abspath(str(g.module_path)), g.line, g.column) in defs
                   for g in script.goto(ln, c, follow_imports=True) if g.module_path is not None):
                refs.append(off)
    except Exception as e:  # jedi on arbitrary text: any failure is "no opinion"
        log.debug("jedi goto failed in %s: %r", d.path, e)
        return []
    edits = [NextEdit(o, o + len(rename.old), rename.old, rename.new, "rename", RENAME_CONFIDENCE) for o in refs]
    return edits if edits and parses(apply_all(d.text, edits)) else []
