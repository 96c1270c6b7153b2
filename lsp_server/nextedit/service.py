"""When next edits are computed, where, and how a request gets one (issue 37).

After an edit settles (``QUIET_S`` with no keystroke) the exact next edits of the document's last edit
are computed on one thread of their own (``flint-nextedit``; jedi itself runs on the analyser's worker
thread, which that thread waits on), never on the event loop. A ``flint/nextEdit`` request then finds them
ready, joins the computation under way, or starts it (a request before the edit settled). Work on a
revision the user has left is dropped at its start, and its answer is never given out: results belong to
one revision of one document.

**The plan.** A computation's edits are kept as the workspace's *plan*: per document, the edits and the text
(revision) they belong to, the renamed document's own among them. They join it as they are found, one
document at a time (parts.py): the computation's first part replaces the plan before, and a request answers
once the asked document's own is known, none too (``pending`` while the rest is searched). A rename of a
name not one function's own also finds its references in the other open Python documents
(engine/edits/workspace.py), which join the plan. Asked in a planned document (unchanged since), its part is
the answer's ``edits``; asked anywhere, the plan's other documents are its ``elsewhere``. A change of a
planned document whose text is the part's with some of its edits applied (the client applied one, or the
user typed it) leaves the rest (engine/edits/plan.py ``remaining``): the next one is ready at once, jedi is
not asked again, and a rename of any length finishes (the history's 16 edits would lose the user's own in a
long rename). Any other change of the renamed document computes again, which replaces the plan; any other
change of another planned document makes its part wait (it is matched again on the next change), and an edit
in a document outside the plan drops the plan (the user moved on).

Speculation starts once a client has asked for a next edit. After a settled edit that offers nothing, jedi
parses the Python text (its script cache by path): a rename next asks about nearly it, parsed incrementally.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from engine.edits.callsites import last_signature_change
from engine.edits.common import parse_ahead, parse_on
from engine.edits.exact import NextEdit, OpenDoc, by_cursor, is_python, workspace_next_edits
from engine.edits.history import Edit
from engine.edits.ondisk import DiskSearch
from engine.edits.plan import remaining
from engine.edits.rename import jedi_references, new_script
from lsp_server.documents import DocumentStore, uri_path
from lsp_server.nextedit.collector import Hold
from lsp_server.nextedit.fills import Filler, FillRuns, Signature, untried
from lsp_server.nextedit.parts import elsewhere, part_of, signature_of
from lsp_server.nextedit.records import Elsewhere, Found, Job, Part, Plan
from lsp_server.nextedit.wire import to_json  # noqa: F401  (the session's import)

log = logging.getLogger(__name__)

QUIET_S = 0.15  # an edit is settled after this long without a keystroke (mid-word, a half-typed name)
WAIT_S = 2.0  # a request waits at most this long for a computation under way
JEDI_BUDGET_S = 1.5  # jedi's deadline in one computation (a first question loads its caches: ~0.3 s)


class NextEdits:
    def __init__(self, documents: DocumentStore, enabled: Callable[[], bool], analyser: Any = None,
                 quiet_s: float = QUIET_S, filler: Filler | None = None) -> None:
        self.documents = documents
        self.filler = filler  # the model's arguments at jump targets (fills.py); None: the jumps alone
        self._fills = FillRuns(self)  # the model's arguments, one document at a time
        self._cursors: dict[str, int] = {}  # where each document's last ask put the cursor
        self.enabled = enabled
        self.quiet_s = quiet_s
        self._analyser = analyser
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="flint-nextedit")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._jobs: dict[str, Job] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self.plan: Plan | None = None  # the other documents' edits after the last rename (module docstring)
        self._roots: tuple[str, ...] = ()
        self.asked = False  # a client asked flint/nextEdit: speculate from now on
        self.computed = 0  # computations started (tests, the benchmark)

    def attach_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def analyser(self) -> Any:
        if self._analyser is None:
            from engine.guidance.jedi_analyser import shared_analyser

            self._analyser = shared_analyser()
            for root in self._roots:
                self._analyser.add_root(root)
        parse_on(self._analyser)  # every ast.parse of next edits on jedi's thread (engine/edits/common.py)
        return self._analyser

    def set_roots(self, roots: list[str]) -> None:
        """The workspace folders: jedi's projects (imports between the open documents resolve in them)."""
        self._roots = tuple(roots)
        if self._analyser is not None:
            for root in roots:
                self._analyser.add_root(root)

    # ---- the document's life (event loop) ----
    def changed(self, uri: str) -> None:
        """After an edit: what was computed for the old text is gone; compute again once it settles (not
        when the edit was one of the plan's: the rest of the plan is that document's answer, and the
        computation still finding its other parts goes on)."""
        job = self._jobs.get(uri)
        self._cancel(uri)
        if self._consumed(uri):
            if job is not None and job.done_t is None and job.plan is not None and job.plan is self.plan:
                self._jobs[uri] = job
            return
        if not self.asked or self._loop is None or not self.enabled():
            return
        rev = self.documents.revision(uri)
        if rev is not None and self.documents.history.last(uri) is not None:
            self._timers[uri] = self._loop.call_later(self.quiet_s, self._settled, uri, rev)

    def opened(self, uri: str) -> None:
        """A document opened: a file on disk the plan reaches becomes an open part (its edits at this
        version, when its text is the one they were found in); once next edits are asked for, jedi parses
        a Python file now, in idle time (a rename there later asks about nearly this text)."""
        try:
            doc = self.documents.get(uri)
        except Exception:
            return
        self._adopt(uri, doc)
        if not self.asked or not self.enabled():
            return
        path = uri_path(uri)
        if is_python(str(path) if path else None, doc.language_id or None) and not doc.problem():
            self._warm(doc.text, str(path) if path else None)

    def _adopt(self, uri: str, doc: Any) -> None:
        """``uri`` was opened: the plan's part for its file on disk becomes the document's (its edits left
        in the opened text: ``remaining``, as after an applied edit), and its arguments are asked for."""
        plan, path = self.plan, uri_path(uri)
        if plan is None or path is None:
            return
        key = next((k for k, p in plan.parts.items() if p.on_disk and os.path.abspath(p.path) == os.path.abspath(path)),
                   None)
        if key is None:
            return
        part = plan.parts.pop(key)
        rest = remaining(part.base, part.planned, doc.text)
        if rest is None:
            return  # the file changed on disk since: what was found there is not for this text
        plan.parts[uri] = Part(doc.revision, doc.version, doc.text, rest, part.base, part.planned)
        if any(untried(e) for e in rest):
            self._fills.start(uri)

    def closed(self, uri: str) -> None:
        self._cancel(uri)
        self._fills.stop(uri)
        self._cursors.pop(uri, None)
        if self.plan is not None:
            self.plan.parts.pop(uri, None)

    def part(self, uri: str) -> Part | None:
        return self.plan.parts.get(uri) if self.plan is not None else None

    def cursor(self, uri: str) -> int:
        return self._cursors.get(uri, 0)

    def _consumed(self, uri: str) -> bool:
        """Keep the plan in step with an edit of ``uri``: a text that is the part's with some of its edits
        applied (by the client or by hand) leaves the rest, moved (no new computation: jedi is not asked
        again, and the history's bound does not matter); any other change of a document the plan reaches
        makes its part wait (stale, kept only while the text may still come back to it: it is matched
        again on the next change); an edit outside the plan drops the plan."""
        plan = self.plan
        if plan is None:
            return False
        part = plan.parts.get(uri)
        if part is None:
            if uri != plan.origin:
                self.plan = None
                self._fills.stop_all()
            return False
        doc = self.documents.get(uri)
        rest = remaining(part.base, part.planned, doc.text)
        if rest is None:
            return False
        plan.parts[uri] = Part(doc.revision, doc.version, doc.text, rest, part.base, part.planned)
        return True

    def shutdown(self) -> None:
        for uri in list(self._timers):
            self._cancel(uri)
        self._fills.stop_all()
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
        """Compute the next edits of ``uri`` as it stands, off the loop (snapshots taken here, on it); each
        part found reaches the plan at once (``_found``)."""
        loop = self._loop
        assert loop is not None
        doc = self.documents.get(uri)
        edits_of = self.documents.history.edits
        edits = edits_of(uri)
        last_t = edits[-1].t_last if edits else time.monotonic()
        others = self._others(uri)
        job = Job(uri, doc.revision, doc.version, last_t, text=doc.text,
                  others={u: (r, v, t) for u, (r, v, t, _p) in others.items()})
        if not edits or doc.problem():
            job.future = loop.create_future()
            job.future.set_result(([], {}))
        else:
            path = uri_path(uri)
            self.computed += 1
            # the workspace's files on disk (not the open ones: their unsaved text counts); the search stops once
            # the computation is left behind (the document edited other than by applying its edits)
            disk = DiskSearch(self._roots, frozenset(os.path.abspath(p) for *_, p in others.values()),
                              lambda: self._jobs.get(uri) is not job) if self._roots else None

            hold = Hold()  # no full collection of the garbage collector before the first part (collector.py)

            def emit(d: OpenDoc | None, found: list[NextEdit], sig: Signature | None) -> None:
                hold.release()
                with contextlib.suppress(RuntimeError):  # the loop closed: the server is going
                    loop.call_soon_threadsafe(self._found, job, d, found, sig)

            docs = [OpenDoc(u, p, t, tuple(edits_of(u))) for u, (_r, _v, t, p) in others.items()]
            job.future = loop.run_in_executor(self._pool, hold.around(self._compute), uri, doc.revision, doc.text,
                                              edits, str(path) if path else None, doc.language_id or None, docs,
                                              disk, emit)
        self._jobs[uri] = job
        job.future.add_done_callback(lambda f: self._done(job, f))
        return job

    def _others(self, uri: str) -> dict[str, tuple[int, int, str, str]]:
        """The other open Python documents with a file: uri -> (revision, version, text, path)."""
        out = {}
        for d in self.documents.documents():
            path = uri_path(d.uri)
            if d.uri != uri and path is not None and not d.problem() and is_python(str(path), d.language_id or None):
                out[d.uri] = (d.revision, d.version, d.text, str(path))
        return out

    def _found(self, job: Job, doc: OpenDoc | None, edits: list[NextEdit], sig: Signature | None) -> None:
        """A part of ``job``'s (event loop): it joins the job's plan, the first one replacing the plan
        before; the request waiting for it answers."""
        if self._jobs.get(job.uri) is not job or (job.plan is not None and self.plan is not job.plan):
            return  # left behind, or the plan was dropped since (the user moved on)
        open_paths = {os.path.abspath(p) for p in (uri_path(d.uri) for d in self.documents.documents()) if p}
        got = part_of(job, doc, edits, self.documents.revision, open_paths)
        if got is None:
            if doc is None:
                job.ready.set()  # the asked document has none: a request answers now, pending (no readyMs)
            return
        if job.plan is None:
            self._fills.stop_all()  # a run for the plan this one replaces
            job.plan = self.plan = Plan(job.uri, {}, complete=False)
        if sig is not None and job.plan.sig is None:
            job.plan.sig = sig
            self._cursors[job.uri] = self._cursors.get(job.uri, sig.def_at)
        job.plan.parts[got[0]] = got[1]
        if doc is None and self.documents.revision(job.uri) != job.revision:
            self._consumed(job.uri)  # a later part of this document, after the user applied an earlier one's edit
        if job.ready_t is None:
            job.ready_t = time.monotonic()
        job.ready.set()

    def _done(self, job: Job, fut: asyncio.Future) -> None:
        """A computation ended (event loop): its plan is complete (the model writes its arguments now); one
        that found nothing drops the plan of an earlier computation of the same document."""
        job.done_t = time.monotonic()
        job.ready_t = job.ready_t or job.done_t
        job.ready.set()
        if job.plan is not None:
            job.plan.complete = True
            if self.plan is job.plan and self._jobs.get(job.uri) is job:  # (not for a text the user left)
                self._fills.next()
            return
        if fut.cancelled() or fut.exception() is not None or self._jobs.get(job.uri) is not job:
            return
        if self.plan is not None and self.plan.origin == job.uri:
            self._fills.stop_all()
            self.plan = None

    # ---- the computation (its own thread) ----
    def _compute(self, uri: str, revision: int, text: str, edits: list[Edit], path: str | None,
                 language: str | None, others: list[OpenDoc], disk: DiskSearch | None = None,
                 emit: Callable[[OpenDoc | None, list[NextEdit], Signature | None], None] = lambda *a: None
                 ) -> tuple[list[NextEdit], dict[str, list[NextEdit]]]:
        """(edits here, edits elsewhere by URI), each part handed to ``emit`` as it is found, with the edited
        signature when there are jump targets."""
        if self.documents.revision(uri) != revision:
            log.debug("next edits of %s rev %d: left behind", uri, revision)
            return [], {}  # left behind while it waited: nobody can use it
        python, t0, c0 = is_python(path, language), time.monotonic(), time.thread_time()
        try:
            analyser = self.analyser() if python else None  # (its thread parses: engine/edits/common.py)
            change = last_signature_change(text, edits) if python else None
            sig = signature_of(text, change)

            def found(d: OpenDoc | None, part: list[NextEdit]) -> None:
                emit(d, part, sig if any(untried(e) for e in part) else None)

            here, elsewhere = workspace_next_edits(text, edits, path=path, language=language,
                                                   analyser=analyser,
                                                   deadline=time.monotonic() + JEDI_BUDGET_S,
                                                   others=others if python else (),
                                                   disk=disk if python else None, change=change, emit=found)
        except Exception as e:  # a bug here must not cost the user their completions
            log.warning("next edits failed on %s: %r", uri, e)
            return [], {}
        log.debug("next edits of %s rev %d: %d here, %d elsewhere (disk: %s) in %.0f ms (CPU %.0f ms)", uri, revision,
                  len(here), sum(len(v) for v in elsewhere.values()), disk.scan if disk is not None else None,
                  (time.monotonic() - t0) * 1000, (time.thread_time() - c0) * 1000)
        if not here and not elsewhere and python:
            self._warm(text, path)
        return here, elsewhere

    def _warm(self, text: str, path: str | None) -> None:
        """jedi and ``ast`` parse ``text`` now, in idle time: a rename next asks about nearly it (common.parse)."""
        a = self.analyser()
        if len(text) <= a.max_chars:
            a.submit(new_script, a, text, os.path.abspath(path) if path else os.path.abspath("untitled.py"))
            a.submit(parse_ahead, text)

    def _warm_up(self, uri: str) -> None:
        """The first ask: jedi's first question loads its caches (~0.3 s+): a tiny one now, and the parse."""
        a = self.analyser()
        self._pool.submit(jedi_references, "value = 1\nprint(value)\n", 0, analyser=a, deadline=time.monotonic() + 10)
        self.opened(uri)

    # ---- the request (event loop) ----
    async def ask(self, uri: str, version: int | None, offset: int) -> Found:
        """The next edits at this version of ``uri``, nearest after ``offset`` first, as far as found (``pending``:
        more may come, or the model still writes the first jump target's argument). DocumentError: not open."""
        if not self.asked:
            self.asked = True
            self._warm_up(uri)
        doc = self.documents.get(uri)
        if version is not None and version != doc.version:
            return Found(uri, doc.version, [], stale=True)
        if not self.enabled():
            return Found(uri, doc.version, [])
        self._cursors[uri] = offset
        found = self._planned(uri, doc.revision, doc.version, offset)
        if found is None:
            job = self._jobs.get(uri)
            if job is None or job.revision != doc.revision:
                t = self._timers.pop(uri, None)
                if t is not None:
                    t.cancel()
                job = self._start(uri)
            try:
                await asyncio.wait_for(job.ready.wait(), WAIT_S)  # the first part, or the end
            except TimeoutError:
                log.info("next edits for %s not ready after %.1f s", uri, WAIT_S)
                return Found(uri, job.version, [], pending=job.done_t is None)  # (asking again joins it)
            if self.documents.revision(uri) != job.revision:
                return Found(uri, job.version, [], stale=True)
            found = self._planned(uri, job.revision, job.version, offset)
            if found is None:  # nothing here became the plan
                searching = job.done_t is None and job.plan is None  # (the other documents' parts to come)
                old = searching and self.plan is not None and self.plan.origin == uri  # an earlier text's plan
                return Found(uri, job.version, [], job.ms(job.ready_t), elsewhere=[] if old else self._elsewhere(uri),
                             **({"pending": True} if searching else self._progress()))
        if found.edits and untried(found.edits[0]):
            self._fills.start(uri)  # the user is here: this document's arguments first
            run = self._fills.runs.get(uri)
            if run is not None and not run.over:
                # the jump is offered now, its argument when the model has written it (a prompt pass of a
                # second or more): asking again gets it
                found = replace(found, pending=True, complete_ms=None)
        return found

    def _planned(self, uri: str, revision: int, version: int, offset: int) -> Found | None:
        """The plan's part for this very text (or one that only applying its edits changed), if any."""
        part = self.part(uri)
        if part is None or part.revision != revision:
            return None
        job, ready = self._jobs.get(uri), None
        if job is not None and job.revision == revision:
            ready = job.ms(job.ready_t)
        return Found(uri, version, by_cursor(list(part.edits), offset), ready, elsewhere=self._elsewhere(uri),
                     **self._progress())

    def _progress(self) -> dict[str, Any]:
        """Whether the plan's computation is still finding parts, else when it found its last (ms)."""
        plan = self.plan
        job = self._jobs.get(plan.origin) if plan is not None else None
        if plan is None or not plan.complete:
            return {"pending": plan is not None}
        return {"complete_ms": job.ms(job.done_t) if job is not None and job.plan is plan else None}

    def _elsewhere(self, uri: str) -> list[Elsewhere]:  # the plan's edits outside ``uri`` still valid (parts.py)
        return elsewhere(self.plan, uri, self.documents.revision)
