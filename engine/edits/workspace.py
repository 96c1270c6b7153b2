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
from collections.abc import Callable, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.edits.common import MAX_SUGGESTIONS, RENAME_CONFIDENCE, NextEdit, apply_all, parses
from engine.edits.lexer import NAME, tokens
from engine.edits.ondisk import DiskSearch, candidates, module_name
from engine.edits.rename import Rename, new_script

log = logging.getLogger(__name__)

DISK_SHARE = 0.5  # of a computation's time left, what the text search over the files on disk may take
GRACE_S = 0.25  # the wait for jedi past the deadline: the references found by then come back


@dataclass(frozen=True)
class OpenDoc:
    """Another open document: the caller's ``key`` for it (a URI), its file and its current text (or a file
    on disk that is not open: ``with_disk``)."""

    key: str
    path: str
    text: str


def with_disk(others: Sequence[OpenDoc], disk: DiskSearch | None, name: str, path: str,
              deadline: float, imported: bool = True) -> list[OpenDoc]:
    """``others`` and the workspace files on disk that may refer to ``name`` (ondisk.py: not open, holding
    it as a word; keyed by file URI, their texts kept in ``disk.docs``). The text search gets at most
    ``DISK_SHARE`` of the time left: jedi needs the rest."""
    if disk is None or not disk.roots:
        return list(others)
    now = time.monotonic()
    exclude = disk.exclude | {os.path.abspath(d.path) for d in others} | {os.path.abspath(path)}
    found, disk.scan = candidates(DiskSearch(disk.roots, frozenset(exclude), disk.cancelled, disk.max_candidates),
                                  name, module_name(path), now + DISK_SHARE * max(0.0, deadline - now),
                                  imported=imported)
    out = list(others)
    for p, text in found:
        key = Path(p).as_uri()
        disk.docs[key] = (p, text)
        out.append(OpenDoc(key, p, text))
    log.debug("disk search for %s: %s", name, disk.scan)
    return out


def _word(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")


def references_elsewhere(rename: Rename, path: str, others: Sequence[OpenDoc], *, analyser: Any,
                         deadline: float, disk: DiskSearch | None = None) -> dict[str, list[NextEdit]]:
    """The rename's references in ``others`` (module docstring) and, with ``disk``, in the workspace's files
    on disk, by key, each list in document order; {} past the deadline, for a local name, or when jedi
    knows no definition in the user's documents."""
    if rename.local:
        return {}
    others = with_disk(others, disk, rename.old, path, deadline)
    new_re = _word(rename.new)
    found = occurrences_elsewhere(rename.base, rename.site, rename.old, path, others, analyser=analyser,
                                  deadline=deadline, keep=lambda d: not new_re.search(d.text))
    out = {}
    texts = {d.key: d.text for d in others}
    for key, offs in found.items():
        edits = [NextEdit(o, o + len(rename.old), rename.old, rename.new, "rename", RENAME_CONFIDENCE) for o in offs]
        if edits and parses(apply_all(texts[key], edits)):
            out[key] = edits
    return out


def occurrences_elsewhere(base: str, site: int, name: str, path: str, others: Sequence[OpenDoc], *,
                          analyser: Any, deadline: float,
                          keep: Callable[[OpenDoc], bool] = lambda d: True) -> dict[str, list[int]]:
    """Where in ``others`` the name at ``site`` of ``base`` (the file ``path``) is referred to: the offsets of
    the occurrences of ``name`` whose jedi ``goto`` reaches its definition (steps 1-3 of the module
    docstring), by key, in document order; {} past the deadline or when the definition is not in the
    user's documents. ``keep``: which of ``others`` to search (all of them count as the user's)."""
    old_re = _word(name)
    path = os.path.abspath(path)
    cands = [d for d in others if os.path.abspath(d.path) != path and len(d.text) <= analyser.max_chars
             and old_re.search(d.text) and keep(d)]
    if not cands:
        return {}
    mine = {path} | {os.path.abspath(d.path) for d in others}  # (the files on disk found count as the user's)

    def run() -> dict[str, list[int]]:
        from engine.guidance.jedi_analyser import line_col

        try:
            scripts = {d.key: new_script(analyser, d.text, os.path.abspath(d.path)) for d in cands}
            here = new_script(analyser, base, path)  # after the others: its text is the cached one
            if here is None:
                return {}
            line, col = line_col(base, site)
            defs = {(os.path.abspath(str(g.module_path)), g.line, g.column)
                    for g in here.goto(line, col, follow_imports=True) if g.module_path is not None and g.line}
        except Exception as e:  # jedi on arbitrary text: any failure is "no opinion"
            log.debug("jedi goto failed at %s:%d: %r", path, site, e)
            return {}
        if not defs or any(p not in mine for p, _, _ in defs):
            return {}
        out: dict[str, list[int]] = {}
        for d in cands:
            if time.monotonic() > deadline:
                break
            offs = _references_in(scripts[d.key], d, name, defs, deadline)
            if offs:
                out[d.key] = offs
        return out

    fut = analyser.submit(run)  # jedi only ever runs on the analyser's worker thread
    try:
        # (a little past the deadline: what was found by then comes back, the rest is left)
        result: dict[str, list[int]] = fut.result(timeout=max(0.0, deadline - time.monotonic()) + GRACE_S)
    except FutureTimeout:
        fut.cancel()
        return {}
    except Exception:
        return {}
    return result


def _references_in(script: Any, d: OpenDoc, name: str, defs: set[tuple[str, int, int]],
                   deadline: float = float("inf")) -> list[int]:
    """The occurrences of ``name`` in ``d`` whose jedi ``goto`` reaches one of ``defs`` (those asked before
    the deadline: a bare name first, then after a dot, which jedi must infer the object of); [] when there
    are too many or jedi fails (worker thread only)."""
    from engine.guidance.jedi_analyser import line_col

    occ = [t.start for t in tokens(d.text) if t.kind == NAME and t.text == name]
    if script is None or not occ or len(occ) > MAX_SUGGESTIONS:
        return []
    occ.sort(key=lambda off: d.text[:off].rstrip().endswith("."))
    refs = []
    try:
        for off in occ:
            if time.monotonic() > deadline:
                break
            ln, c = line_col(d.text, off)
            if any((os.path.abspath(str(g.module_path)), g.line, g.column) in defs
                   for g in script.goto(ln, c, follow_imports=True) if g.module_path is not None):
                refs.append(off)
    except Exception as e:  # jedi on arbitrary text: any failure is "no opinion"
        log.debug("jedi goto failed in %s: %r", d.path, e)
        return []
    return sorted(refs)
