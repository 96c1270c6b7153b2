"""When next edits are computed, where, and how a request gets one (issue 37).

After an edit settles (``QUIET_S`` with no keystroke) the exact next edits of the document's last edit
are computed on one thread of their own (``flint-nextedit``; jedi itself runs on the analyser's worker
thread, which that thread waits on), never on the event loop. A ``flint/nextEdit`` request then finds them
ready, joins the computation under way, or starts it (a request before the edit settled). Work on a
revision the user has left is dropped at its start, and its answer is never given out: results belong to
one revision of one document.

Speculation starts once a client has asked for a next edit at least once (a client that never asks costs
nothing). After a settled edit that offers nothing, the Python text is handed to jedi to parse (its script
cache by path): if the next edit is a rename, jedi's question is about nearly that text, parsed
incrementally then.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from engine.edits.exact import NextEdit, by_cursor, exact_next_edits, is_python
from engine.edits.history import Edit
from lsp_server.documents import DocumentStore, uri_path

log = logging.getLogger(__name__)

QUIET_S = 0.15  # an edit is settled after this long without a keystroke (mid-word, a half-typed name)
WAIT_S = 2.0  # a request waits at most this long for a computation under way
JEDI_BUDGET_S = 1.5  # jedi's deadline in one computation (a first question loads its caches: ~0.3 s)


@dataclass
class Job:
    uri: str
    revision: int
    version: int
    last_edit_t: float  # time.monotonic() of the last keystroke of the edit it answers
    future: asyncio.Future = field(repr=False)
    ready_t: float | None = None


@dataclass(frozen=True)
class Found:
    """The next edits for one version of a document (``stale``: it changed while they were computed, or
    the request named another version; nothing to apply then)."""

    uri: str
    version: int
    edits: list[NextEdit]
    ready_ms: float | None = None  # from the last keystroke to the edits being ready
    stale: bool = False


class NextEdits:
    def __init__(self, documents: DocumentStore, enabled: Callable[[], bool], analyser: Any = None,
                 quiet_s: float = QUIET_S) -> None:
        self.documents = documents
        self.enabled = enabled
        self.quiet_s = quiet_s
        self._analyser = analyser
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="flint-nextedit")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._jobs: dict[str, Job] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self.asked = False  # a client asked flint/nextEdit: speculate from now on
        self.computed = 0  # computations started (tests, the benchmark)

    def attach_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def analyser(self) -> Any:
        if self._analyser is None:
            from engine.edits.rename import default_analyser

            self._analyser = default_analyser()
        return self._analyser

    # ---- the document's life (event loop) ----
    def changed(self, uri: str) -> None:
        """After an edit: what was computed for the old text is gone; compute again once it settles."""
        self._cancel(uri)
        if not self.asked or self._loop is None or not self.enabled():
            return
        rev = self.documents.revision(uri)
        if rev is not None and self.documents.history.last(uri) is not None:
            self._timers[uri] = self._loop.call_later(self.quiet_s, self._settled, uri, rev)

    def opened(self, uri: str) -> None:
        """A document opened: once next edits are asked for, jedi parses a Python file now, in idle time
        (a rename there later asks about nearly this text)."""
        if not self.asked or not self.enabled():
            return
        try:
            doc = self.documents.get(uri)
        except Exception:
            return
        path = uri_path(uri)
        if is_python(str(path) if path else None, doc.language_id or None) and not doc.problem():
            self._warm(doc.text, str(path) if path else None)

    def closed(self, uri: str) -> None:
        self._cancel(uri)

    def shutdown(self) -> None:
        for uri in list(self._timers):
            self._cancel(uri)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _cancel(self, uri: str) -> None:
        t = self._timers.pop(uri, None)
        if t is not None:
            t.cancel()
        self._jobs.pop(uri, None)

    def _settled(self, uri: str, revision: int) -> None:
        self._timers.pop(uri, None)
        if self.documents.revision(uri) == revision:
            self._start(uri)

    def _start(self, uri: str) -> Job:
        """Compute the next edits of ``uri`` as it stands, off the loop (snapshots taken here, on it)."""
        assert self._loop is not None
        doc = self.documents.get(uri)
        edits = self.documents.history.edits(uri)
        last_t = edits[-1].t_last if edits else time.monotonic()
        fut: asyncio.Future
        if not edits or doc.problem():
            fut = self._loop.create_future()
            fut.set_result([])
        else:
            path = uri_path(uri)
            self.computed += 1
            fut = self._loop.run_in_executor(self._pool, self._compute, uri, doc.revision, doc.text, edits,
                                             str(path) if path else None, doc.language_id or None)
        job = Job(uri, doc.revision, doc.version, last_t, fut)
        fut.add_done_callback(lambda _f: setattr(job, "ready_t", time.monotonic()))
        self._jobs[uri] = job
        return job

    # ---- the computation (its own thread) ----
    def _compute(self, uri: str, revision: int, text: str, edits: list[Edit], path: str | None,
                 language: str | None) -> list[NextEdit]:
        if self.documents.revision(uri) != revision:
            log.debug("next edits of %s rev %d: left behind", uri, revision)
            return []  # left behind while it waited: nobody can use it
        python = is_python(path, language)
        try:
            found = exact_next_edits(text, edits, path=path, language=language,
                                     analyser=self.analyser() if python else None,
                                     deadline=time.monotonic() + JEDI_BUDGET_S)
        except Exception as e:  # a bug here must not cost the user their completions
            log.warning("next edits failed on %s: %r", uri, e)
            return []
        log.debug("next edits of %s rev %d: %d", uri, revision, len(found))
        if not found and python:
            self._warm(text, path)
        return found

    def _warm(self, text: str, path: str | None) -> None:
        """Have jedi parse ``text`` now, in idle time: a rename that comes next asks about nearly this text,
        and parso's cache of the file then makes its parse incremental."""
        import os

        from engine.edits.rename import new_script

        a = self.analyser()
        if len(text) <= a.max_chars:
            a._pool.submit(new_script, a, text, os.path.abspath(path) if path else os.path.abspath("untitled.py"))

    def _warm_up(self, uri: str) -> None:
        """The first ask: jedi's first question in a process loads its caches (builtins, typeshed: ~0.3 s
        and more on a busy machine); ask a tiny one now, and parse the document, so a rename does not."""
        from engine.edits.rename import jedi_references

        a = self.analyser()
        self._pool.submit(jedi_references, "value = 1\nprint(value)\n", 0, analyser=a, deadline=time.monotonic() + 10)
        self.opened(uri)

    # ---- the request (event loop) ----
    async def ask(self, uri: str, version: int | None, offset: int) -> Found:
        """The next edits at this version of ``uri``, nearest after ``offset`` first. DocumentError: the
        document is not open."""
        if not self.asked:
            self.asked = True
            self._warm_up(uri)
        doc = self.documents.get(uri)
        if version is not None and version != doc.version:
            return Found(uri, doc.version, [], stale=True)
        if not self.enabled():
            return Found(uri, doc.version, [])
        job = self._jobs.get(uri)
        if job is None or job.revision != doc.revision:
            t = self._timers.pop(uri, None)
            if t is not None:
                t.cancel()
            job = self._start(uri)
        try:
            edits = await asyncio.wait_for(asyncio.shield(job.future), WAIT_S)
        except TimeoutError:
            log.info("next edits for %s not ready after %.1f s", uri, WAIT_S)
            return Found(uri, job.version, [])
        if self.documents.revision(uri) != job.revision:
            return Found(uri, job.version, [], stale=True)
        ready = (job.ready_t or time.monotonic()) - job.last_edit_t
        return Found(uri, job.version, by_cursor(list(edits), offset), round(ready * 1000, 1))


def to_json(found: Found, position_at: Callable[[int], tuple[int, int]]) -> dict[str, Any]:
    """The ``flint/nextEdit`` result (docs/protocol.md); ``position_at``: offset -> (line, character) in
    the client's encoding, in the text the edits belong to."""
    def pos(off: int) -> dict[str, int]:
        line, ch = position_at(off)
        return {"line": line, "character": ch}

    out: dict[str, Any] = {"version": found.version, "edits": [
        {"range": {"start": pos(e.range_start), "end": pos(e.range_end)}, "newText": e.new_text,
         "oldText": e.old_text, "source": e.source, "confidence": e.confidence}
        for e in found.edits]}
    if found.ready_ms is not None:
        out["readyMs"] = found.ready_ms
    if found.stale:
        out["stale"] = True
    return out

