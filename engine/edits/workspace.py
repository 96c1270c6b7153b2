"""Exact next edits in the other open documents: a rename's references elsewhere (issue 37).

A rename in one document (``rename.find_rename``: jedi vouches for it there) of a name that is not one
function's own (a function, a class, an attribute, a module-level name) may have references in the other
open documents. Their texts are what the user sees, saved or not, so they are what counts:

1. each other open Python document that holds the old name as a word, and whose text jedi would not read
   by itself (``jedi_reads``: unsaved, or parso's cache holds another text of the file), gets a jedi Script
   of its current text first. A Script parses its text into parso's cache under its path, stamped with the
   file's time on disk, and jedi, following an import into that module, takes the cached tree while the
   file on disk is no newer: so the unsaved text wins over the disk (the renamed document's text before the
   rename too, whose Script comes next);
2. jedi's ``goto`` (imports followed) at the renamed site in the text before the rename gives the
   definition; it must lie in the renamed document or in an open one (a library's name is not the user's to
   rename: changing it at a use is switching to another name);
3. in each such document, every occurrence of the old name as a name token (not in strings or comments) is
   asked ``goto`` too: those that reach the same definition are its references there.

A document is left out when the new name is in it already (a clash, or a switch to that name), when it
would hold more than ``MAX_SUGGESTIONS`` of them, or when the result would not parse. Everything jedi does
runs on the analyser's worker thread, one question at a time, one document after another, each document's
edits handed to the caller as soon as it is done (the first offer need not wait for the last file); the
files on disk are found meanwhile (ondisk.py, on a thread of its own) and asked after the open documents.
The caller waits until its deadline.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.edits.common import MAX_SUGGESTIONS, RENAME_CONFIDENCE, NextEdit, apply_all, parses
from engine.edits.history import Edit
from engine.edits.lexer import NAME, tokens
from engine.edits.ondisk import DiskSearch, candidates, module_name
from engine.edits.rename import Rename, new_script

log = logging.getLogger(__name__)

DISK_SHARE = 0.5  # of a computation's time left, what the text search over the files on disk may take
GRACE_S = 0.25  # the wait for jedi past the deadline: the references found by then come back


@dataclass(frozen=True)
class OpenDoc:
    """Another open document: the caller's ``key`` for it (a URI), its file and its current text (or a file
    on disk that is not open: ``on_disk``)."""

    key: str
    path: str
    text: str
    edits: tuple[Edit, ...] = ()  # its recent edits (an open one's: moved.py pairs a cut with a paste)


def on_disk(others: Sequence[OpenDoc], disk: DiskSearch | None, name: str, path: str,
            deadline: float, imported: bool = True) -> list[OpenDoc]:
    """The workspace files on disk that may refer to ``name`` (ondisk.py: not open, not among ``others``,
    holding it as a word; keyed by file URI, their texts also kept in ``disk.docs``). The text search gets
    at most ``DISK_SHARE`` of the time left: jedi needs the rest."""
    if disk is None or not disk.roots:
        return []
    now = time.monotonic()
    exclude = disk.exclude | {os.path.abspath(d.path) for d in others} | {os.path.abspath(path)}
    found, disk.scan = candidates(DiskSearch(disk.roots, frozenset(exclude), disk.cancelled, disk.max_candidates),
                                  name, module_name(path), now + DISK_SHARE * max(0.0, deadline - now),
                                  imported=imported)
    out = []
    for p, text in found:
        key = Path(p).as_uri()
        disk.docs[key] = (p, text)
        out.append(OpenDoc(key, p, text))
    log.debug("disk search for %s: %s", name, disk.scan)
    return out


# a document's references (offsets) as next edits: [] when they are none
EditsOf = Callable[[OpenDoc, list[int]], list[NextEdit]]


def _word(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")


def references_elsewhere(rename: Rename, path: str, others: Sequence[OpenDoc], *, analyser: Any,
                         deadline: float, disk: DiskSearch | None = None,
                         each: Callable[[OpenDoc, list[NextEdit]], None] | None = None) -> dict[str, list[NextEdit]]:
    """The rename's references in ``others`` (module docstring) and, with ``disk``, in the workspace's files
    on disk, by key, each list in document order; {} for a local name, or when jedi knows no definition in
    the user's documents; only the documents done by the deadline. ``each``: as occurrences_elsewhere."""
    if rename.local:
        return {}
    new_re = _word(rename.new)

    def renamed(d: OpenDoc, offs: list[int]) -> list[NextEdit]:
        edits = [NextEdit(o, o + len(rename.old), rename.old, rename.new, "rename", RENAME_CONFIDENCE) for o in offs]
        return edits if parses(apply_all(d.text, edits)) else []

    return occurrences_elsewhere(rename.base, rename.site, rename.old, path, others, renamed, analyser=analyser,
                                 deadline=deadline, keep=lambda d: not new_re.search(d.text), each=each,
                                 more=None if disk is None else lambda: on_disk(others, disk, rename.old, path, deadline),
                                 cancelled=disk.cancelled if disk is not None else lambda: False)


def occurrences_elsewhere(base: str, site: int, name: str, path: str, others: Sequence[OpenDoc],
                          edits_of: EditsOf, *, analyser: Any, deadline: float,
                          keep: Callable[[OpenDoc], bool] = lambda d: True,
                          each: Callable[[OpenDoc, list[NextEdit]], None] | None = None,
                          more: Callable[[], Sequence[OpenDoc]] | None = None,
                          cancelled: Callable[[], bool] = lambda: False, calls_only: bool = False
                          ) -> dict[str, list[NextEdit]]:
    """The edits in ``others`` at the references to the name at ``site`` of ``base`` (the file ``path``): the
    occurrences of ``name`` whose jedi ``goto`` reaches its definition (steps 1-3 of the module docstring),
    made edits by ``edits_of(doc, offsets in document order)``, by key (documents with none left out); {}
    when the definition is not in the user's documents; only the documents done by the deadline. ``keep``:
    which of ``others`` to search (all of them count as the user's). ``each(doc, edits)``: called on the
    caller's thread as each document is done (the first one's are ready long before the last's). ``more()``:
    more documents (the files on disk), found on a thread of their own while jedi searches ``others``, then
    searched after them. ``cancelled()``: true once the answer is for a text the user has left (no more
    documents are searched). ``calls_only``: only the occurrences that are a call's callee are asked (the
    call sites need no other)."""
    old_re = _word(name)
    path = os.path.abspath(path)

    def wanted(docs: Sequence[OpenDoc]) -> list[OpenDoc]:
        return [d for d in docs if os.path.abspath(d.path) != path and len(d.text) <= analyser.max_chars
                and old_re.search(d.text) and keep(d)]

    cands = wanted(others)
    if not cands and more is None:
        return {}
    later: queue.SimpleQueue[list[OpenDoc]] = queue.SimpleQueue()
    done: queue.SimpleQueue[tuple[OpenDoc, list[NextEdit]] | None] = queue.SimpleQueue()
    search = _Search(base, site, name, path, analyser, deadline, edits_of, done, cancelled, calls_only)
    fut = analyser.submit(search.run, cands, {os.path.abspath(d.path) for d in others},
                          later if more is not None else None)  # jedi only ever runs on its worker thread
    fut.add_done_callback(lambda _f: done.put(None))
    if more is not None:
        def find() -> None:
            docs: list[OpenDoc] = []
            try:
                docs = wanted(more())
            finally:
                later.put(docs)
        threading.Thread(target=find, name="flint-disk-search", daemon=True).start()
    out: dict[str, list[NextEdit]] = {}
    end = deadline + GRACE_S  # (a little past the deadline: the document under way comes back, the rest is left)
    while True:
        try:
            item = done.get(timeout=max(0.0, end - time.monotonic()))
        except queue.Empty:
            fut.cancel()
            break
        if item is None:
            break
        out[item[0].key] = item[1]
        if each is not None:
            each(*item)
    return out


@dataclass
class _Search:
    """One search for the references of the name at ``site`` of ``base`` (the file ``path``), on the
    analyser's worker thread: each document's edits (``edits_of``) are put on ``done`` once it is searched.
    They are made on this thread too: ``ast`` is not safe beside jedi on another thread (Python 3.11 keeps
    one recursion depth for every thread's parse, and parso calls ``ast.literal_eval`` on each file it
    reads)."""

    base: str
    site: int
    name: str
    path: str
    analyser: Any
    deadline: float
    edits_of: EditsOf
    done: queue.SimpleQueue
    cancelled: Callable[[], bool]
    calls_only: bool = False

    def run(self, cands: list[OpenDoc], mine: set[str], later: queue.SimpleQueue | None) -> None:
        """``cands`` first, then what arrives on ``later`` (None: nothing more); ``mine``: the files that count
        as the user's (the files on disk found count too)."""
        defs = self._definition(cands)
        if not defs:
            return
        mine = mine | {self.path}
        more: list[OpenDoc] | None = None
        if any(p not in mine for p, _, _ in defs):  # not in the open documents: in a file on disk?
            more = self._later(later)
            if any(p not in mine | {os.path.abspath(d.path) for d in more} for p, _, _ in defs):
                return
        self._search(cands, defs, parsed=True)
        if later is not None:
            self._search(more if more is not None else self._later(later), defs, parsed=False)

    def _later(self, later: queue.SimpleQueue | None) -> list[OpenDoc]:
        try:
            return later.get(timeout=max(0.0, self.deadline - time.monotonic())) if later is not None else []
        except queue.Empty:
            return []

    def _definition(self, cands: list[OpenDoc]) -> set[tuple[str, int, int]]:
        """Where jedi's ``goto`` at the site leads (path, line, column), after parsing the texts it would not
        read from parso's cache or the disk (``jedi_reads``), the renamed document's last (its text is then
        the cached one); an empty set on any failure."""
        from engine.guidance.jedi_analyser import line_col

        try:
            for d in cands:
                if not jedi_reads(d):
                    new_script(self.analyser, d.text, os.path.abspath(d.path))
            here = new_script(self.analyser, self.base, self.path)
            if here is None:
                return set()
            line, col = line_col(self.base, self.site)
            return {(os.path.abspath(str(g.module_path)), g.line, g.column)
                    for g in here.goto(line, col, follow_imports=True) if g.module_path is not None and g.line}
        except Exception as e:  # jedi on arbitrary text: any failure is "no opinion"
            log.debug("jedi goto failed at %s:%d: %r", self.path, self.site, e)
            return set()

    def _search(self, docs: list[OpenDoc], defs: set[tuple[str, int, int]], parsed: bool) -> None:
        """Each document in turn (``parsed``: the texts jedi would not read were parsed already)."""
        if not parsed:
            for d in docs:
                if not jedi_reads(d):
                    _script(self.analyser, d)
        for d in docs:
            if time.monotonic() > self.deadline or self.cancelled():
                return
            occ = occurrences(d.text, self.name, self.calls_only)
            if not occ or len(occ) > MAX_SUGGESTIONS:
                continue  # (none to ask, or too many to ask one by one)
            offs = _references_in(_script(self.analyser, d), d, occ, defs, self.deadline)
            edits = self.edits_of(d, offs) if offs else []
            if edits:
                self.done.put((d, edits))


def jedi_reads(d: OpenDoc) -> bool:
    """Does jedi, following an import into ``d``'s file, read ``d.text``? Yes when the file on disk holds it
    and parso's cache holds no other text of the file (parso takes its cached tree while the file is no
    newer; a file saved since is read again)."""
    try:
        with open(d.path, encoding="utf-8") as f:
            if f.read() != d.text:
                return False
        from parso.cache import parser_cache

        path = Path(os.path.abspath(d.path))  # (jedi's key)
        return all("".join(g[path].lines) == d.text for g in list(parser_cache.values()) if path in g)
    except Exception:  # unreadable, or another parso: parse it first
        return False


def _script(analyser: Any, d: OpenDoc) -> Any:
    """A new jedi Script of ``d``'s text; None when jedi fails on it (worker thread only)."""
    try:
        return new_script(analyser, d.text, os.path.abspath(d.path))
    except Exception as e:  # jedi on arbitrary text: no opinion on this document
        log.debug("jedi failed on %s: %r", d.path, e)
        return None


_CALLED = re.compile(r"\s*\(")


def occurrences(text: str, name: str, calls_only: bool = False) -> list[int]:
    """Where ``name`` is a name token of ``text`` (not in strings or comments); with ``calls_only``, only
    where it is a call's callee (an opening bracket follows)."""
    occ = [t.start for t in tokens(text) if t.kind == NAME and t.text == name]
    return [o for o in occ if _CALLED.match(text, o + len(name))] if calls_only else occ


def _references_in(script: Any, d: OpenDoc, occ: list[int], defs: set[tuple[str, int, int]],
                   deadline: float = float("inf")) -> list[int]:
    """The offsets among ``occ`` (occurrences of the name in ``d``) whose jedi ``goto`` reaches one of
    ``defs`` (those asked before the deadline: a bare name first, then after a dot, which jedi must infer
    the object of); [] when jedi fails (worker thread only)."""
    from engine.guidance.jedi_analyser import line_col

    if script is None:
        return []
    occ = sorted(occ, key=lambda off: d.text[:off].rstrip().endswith("."))
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
