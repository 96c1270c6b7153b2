"""The scheduler: one thread per backend owns its engine; the event loop posts jobs to it, and every job's
outcome goes into the store (the llama.cpp server / ruff_server shape: handlers post tasks, one loop owns
the model, results travel one way).

Scheduling rules:

- At most one pending job per document for its current state: a newer request for the same document
  answers the older one with ``Superseded`` at once, and stops it if it is running.
- A document change stops every job computed on an older revision (``Stale``), running or pending,
  unless ``Hooks.keep`` says the job still serves the new state: a running generation the user is typing
  through (its text so far agrees with what was typed) keeps running for the new revision (*tracking*),
  and a pre-generated future the user is typing toward (or has accepted) is kept.
- Identical work (same document revision, text around the cursor and parameters) is computed once: the
  second request joins the first (a speculative job becomes a user job that way); work just done is not
  done again (``Hooks.repeat``: the store holds its result).
- Priorities: user requests, then speculation for a document's current state, then futures (states the
  user may reach next), then idle KV warming; among equals, oldest first. A job of a better class
  pre-empts a running job of a worse one (a user request stops speculative work for other documents),
  and work for the document the user is typing in stops speculation nobody waits for in another one.
- Stopping means setting the engine's CancelToken: the generation loop checks it every model step.
- Generations no request waits for (speculation, futures) run only until ``IDLE_WORK_S`` after the
  user's last action (a submit, a document change, a request let go); a watchdog thread stops them
  then, so the CPU goes idle soon after the user does; so does the idle warm-up (one per quiet period),
  whose prefilled chunks stay for the next pause.
- No quiet period for typing: a job starts at once (newest wins; a keystroke appends a token or two to
  the KV cache, so starting costs little), not before its own ``not_before`` (the planner's: a pause,
  a burst of edits).
- Every job ends exactly once in the store (``Hooks.ended``): a result, or one of jobs.py's exceptions.
  A request can also *release* its job (answered from elsewhere, or its deadline passed): the job then
  goes on as speculation, so its result is ready for the next ask.
- Idle: once nothing happened for ``IDLE_WARM_S`` the worker says so (events.Idle); the service may hand
  it one warm-up (``warm``: the active spot and its context block).

Data comes down with each call (the document's revision and current state, the job's context block);
the engine thread calls nothing above the store. Running a job on the engine is ``Runner``'s (runner.py).
Nothing here imports pygls: the worker sees the engine through the facade in engine/engine_api.md.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from engine.backends import Backend
from lsp_server.completion.events import Events, Idle
from lsp_server.completion.jobs import (
    FUTURE,
    SPECULATIVE,
    USER,
    WARM,
    EngineUnavailable,
    Hooks,
    Job,
    Result,
    Stale,
    State,
    Superseded,
    reason_exc,
    stop_job,
)
from lsp_server.completion.planner import IDLE_WORK_S
from lsp_server.completion.runner import Loader, Ran, Runner

log = logging.getLogger(__name__)

IDLE_WARM_S = 0.5  # engine idle this long (and nothing new happened): say so once
CLOSED = 1 << 62  # the revision of a closed document: every job for it is stale


class Worker:
    def __init__(self, load: Loader, hooks: Hooks, events: Events, tier: str = "local") -> None:
        self._load_fn = load
        self.hooks = hooks
        self._events = events
        self.tier = tier
        self.runner = Runner(tier, hooks, events)
        self._cond = threading.Condition()
        self._pending: dict[str, Job] = {}  # the current state's job, per document
        self._futures: list[Job] = []  # pre-generation for states the user may reach next
        self._warm: Job | None = None
        self._running: Job | None = None
        self._revisions: dict[str, int] = {}  # each document's newest revision, as the loop said
        self._current: dict[str, State] = {}  # where the user is in each document (keeps tracking jobs)
        self._reload: Loader | None = None
        self._stopping = False
        self._seq = itertools.count()
        self._idle_asked = False  # idle work is asked for once per quiet period
        self._last_active = time.monotonic()  # the user's last action this worker heard of
        self._wake_watchdog = threading.Event()
        self._thread = threading.Thread(target=self._main, name=f"flint-engine-{tier}", daemon=True)
        self._watchdog = threading.Thread(target=self._watch, name="flint-idle-watchdog", daemon=True)

    # ---- event loop side ------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()
        self._watchdog.start()

    @property
    def engine(self) -> Backend | None:
        return self.runner.engine

    @property
    def loaded(self) -> threading.Event:
        return self.runner.loaded

    def submit(self, state: State, priority: int = USER, *, budget_s: float | None = None,
               not_before: float = 0.0, detachable: bool = False, anew: bool = False) -> None:
        """Queue work for a document's state; its outcome goes into the store (``Store.wait``). A USER job
        counts one more request waiting for it, until ``release`` or ``abandon``.

        ``budget_s``: time allowed once the job starts; the engine returns what it has by then.
        ``not_before``: a time.monotonic() before which the job does not start.
        ``detachable``: when its requests leave, the job goes on as speculation (an editor cancels the
        request of the previous keystroke before it sends the next one, which may type through it).
        ``anew``: what the store holds for this state was cut off (the user went on before it was whole
        and came back): the model runs, neither the store nor the last job's result answers."""
        job = Job(state, priority, next(self._seq), budget_s=budget_s, not_before=not_before, anew=anew,
                  speculative=priority != USER or detachable)
        with self._cond:
            self._touch()
            self._heard(state)
            refused = self._refusal()
            if refused is not None:
                self.hooks.queued(job)
                self._end(job, None, refused)
                return
            if not anew and self.hooks.repeat(job):
                return  # asked again for what was just computed: the store answers from its record
            for j in (self._running, self._pending.get(state.uri), *self._futures):
                if j is not None and j.serves(state):
                    self._join(j, job)
                    return
            self._queue(job)

    def _refusal(self) -> EngineUnavailable | None:
        if self._stopping:
            return EngineUnavailable("the server is shutting down")
        if self.runner.load_error is not None and self.runner.engine is None and self._reload is None:
            return EngineUnavailable(self.runner.load_error)
        return None

    def _join(self, j: Job, job: Job) -> None:
        """(lock held) ``job`` is the same work as ``j``: its request waits for ``j``."""
        j.anew = j.anew or job.anew
        if job.priority == USER:
            j.waiters += 1
            j.not_before = min(j.not_before, job.not_before)
        j.priority = min(j.priority, job.priority)
        if j is not self._running:
            self._preempt(j)  # now a user's request: it may outrank what is running
        self.hooks.queued(j)

    def _queue(self, job: Job) -> None:
        uri = job.uri
        old = self._pending.pop(uri, None)
        if old is not None:
            self._drop(old, Superseded("a newer request for this document replaced it"))
        r = self._running
        if job.priority == USER and r is not None and r.uri == uri and r.waiters and not r.cancel.cancelled:
            # a newer request for this document replaces the one running (an explicit request, then the
            # editor asks again at once): its waiters hear Superseded, the model moves on at once
            self._drop(r, Superseded("a newer request for this document replaced it"))
        self._preempt(job)
        if job.priority == USER:
            job.waiters = 1
        self._pending[uri] = job
        self.hooks.queued(job)
        self._cond.notify()

    def set_futures(self, states: Sequence[State], budget_s: float | None = None, not_before: float = 0.0) -> int:
        """Pre-generate these states, best first, replacing the futures planned before (in any document),
        starting no earlier than ``not_before``. A future already queued or running for the same state is kept.
        Returns how many new jobs were queued."""
        added = 0
        with self._cond:
            if self._stopping:
                return 0
            keep: list[Job] = []
            for st in states:
                self._heard(st)
                same = next((j for j in (self._running, *self._futures) if j is not None and j.serves(st)), None)
                if same is not None:
                    if same is not self._running:
                        same.not_before = max(same.not_before, not_before)  # still waiting for a pause
                        keep.append(same)
                    continue
                job = Job(st, FUTURE, next(self._seq), budget_s=budget_s, not_before=not_before, speculative=True)
                self.hooks.queued(job)
                keep.append(job)
                added += 1
            for j in self._futures:
                if j not in keep:
                    self._drop(j, Superseded("newer futures were planned"))
            r = self._running
            if r is not None and r.priority == FUTURE and not r.tracking and \
                    not any(r.serves(st) for st in states):
                stop_job(r, "superseded")
            self._futures = keep
            if added:
                self._cond.notify()
        return added

    def document_changed(self, uri: str, revision: int, current: State | None = None) -> None:
        """The document is at ``revision`` now, the user at ``current`` in it (None: not known, or nothing
        is kept). Work on older revisions stops, except what ``Hooks.keep`` says still serves ``current``:
        such a job moves to ``revision`` (its waiters, who asked about the old text, hear ``Stale``; the work
        goes on)."""
        with self._cond:
            self._touch()
            self._revisions[uri] = revision
            self._follow(uri, current)

            def keep(j: Job, running: bool) -> bool:
                return current is not None and self.hooks.keep(j, running, current)

            job = self._pending.get(uri)
            if job is not None and job.revision < revision:
                if keep(job, False):
                    self._rebase(job, revision)
                else:
                    del self._pending[uri]
                    self._drop(job, Stale("the document changed"))
            for j in [j for j in self._futures if j.uri == uri and j.revision < revision]:
                if keep(j, False):
                    self._rebase(j, revision)
                else:
                    self._futures.remove(j)
                    self._drop(j, Stale("the document changed"))
            r = self._running
            if r is not None and r.uri == uri and r.revision < revision and not r.cancel.cancelled:
                if keep(r, True):
                    self._rebase(r, revision)
                    r.tracking = True
                else:
                    stop_job(r, "stale")

    def moved(self, uri: str, current: State) -> None:
        """The user is at ``current`` now (a cursor moved, a request): what tracking jobs must agree with."""
        with self._cond:
            self._follow(uri, current)

    def document_closed(self, uri: str) -> None:
        self.document_changed(uri, CLOSED)
        with self._cond:
            self._revisions.pop(uri, None)

    def release(self, state: State, awaited: bool = False) -> None:
        """A request stops waiting for ``state``'s job without stopping it: the job goes on as speculation
        (its result lands in the store for the next ask). ``awaited``: the request got nothing, so the user
        still waits at that spot: the job is not idle work (it runs to its end; the client hears a refresh)."""
        with self._cond:
            job = self._job_for(state)
            if job is not None:
                job.released = True
                job.awaited = job.awaited or awaited
            self._leave(job)

    def abandon(self, state: State) -> None:
        """A request for ``state`` was cancelled by the client: its job stops unless it goes on anyway
        (speculation a request had joined, a job let go before)."""
        with self._cond:
            self._leave(self._job_for(state))

    def warm(self, state: State | None, context: Any, prefill: bool = True) -> None:
        """(after events.Idle) Idle work: put ``context`` (a repository context block, or None) in front of
        prompts and, with ``prefill``, warm the KV cache for ``state``. Nothing if the user acted since."""
        with self._cond:
            if self._stopping or not self._idle_asked or state is None:
                return
            self._warm = Job(state, WARM, next(self._seq), speculative=True, admit_context=True, context=context,
                             prefill=prefill)
            self._cond.notify()

    def reload(self, load: Loader) -> None:
        """Swap the model (settings changed). Queued requests wait for the new one."""
        with self._cond:
            self._reload = load
            if self._running is not None:
                stop_job(self._running, "reload")
            self._cond.notify()

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopping = True
            self._drop_all(EngineUnavailable("the server is shutting down"))
            if self._running is not None:
                stop_job(self._running, "shutdown")
            self._cond.notify()
        self._wake_watchdog.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def poke(self) -> None:
        """Look for idle work again (KV warming) once it is quiet: the caller routed work elsewhere (the
        capable tier) and the next keystrokes will be this worker's."""
        with self._cond:
            self._idle_asked = False
            self._last_active = time.monotonic()  # the user just acted (asked another tier)
            self._cond.notify()

    def backlog(self) -> int:
        """Jobs waiting or running (for tests and the status line)."""
        with self._cond:
            return len(self._pending) + len(self._futures) + (self._warm is not None) + (self._running is not None)

    def running(self) -> Job | None:
        return self._running

    # ---- internals (lock held) ------------------------------------------------------------------
    def _touch(self) -> None:
        """New activity: a pending warm-up is pointless now."""
        self._last_active = time.monotonic()
        self._idle_asked = False
        self._warm = None
        if self._running is not None and self._running.priority == WARM:
            stop_job(self._running, "superseded")

    def _heard(self, state: State) -> None:
        """Work for ``state``: its document is at its revision at least."""
        self._revisions[state.uri] = max(self._revisions.get(state.uri, 0), state.revision)

    def _follow(self, uri: str, current: State | None) -> None:
        if current is None:
            self._current.pop(uri, None)
        else:
            self._current[uri] = current

    def _job_for(self, state: State) -> Job | None:
        return next((j for j in (self._running, *self._pending.values(), *self._futures)
                     if j is not None and not j.ended and j.state.serves(state)), None)

    def _leave(self, job: Job | None) -> None:
        """A request stopped waiting for ``job``."""
        self._last_active = time.monotonic()  # a request's deadline passed, or it went: the user acted
        self._wake_watchdog.set()
        if job is None:
            return
        job.waiters = max(0, job.waiters - 1)
        if job.waiters:
            return
        if job.speculative or job.released:  # speculation a request had joined: it goes on
            job.priority = max(job.priority, SPECULATIVE)
            return
        stop_job(job, "client cancelled")
        if self._pending.get(job.uri) is job:
            del self._pending[job.uri]
            self._end(job, None, reason_exc("client cancelled"))

    def _keeps(self, job: Job) -> bool:
        """(engine thread) Does a job kept through an edit, or a future, still serve where the user is?"""
        if not job.tracking and job.priority != FUTURE:
            return True
        with self._cond:
            current = self._current.get(job.uri)
            return current is not None and self.hooks.keep(job, True, current)

    def _preempt(self, job: Job) -> None:
        """Stop the running job if ``job`` replaces or outranks it."""
        r = self._running
        if r is None or r.cancel.cancelled:
            return
        if r.uri == job.uri and r.tracking and r.revision == job.revision:
            return  # kept through the last edit: it serves this very text
        if r.uri == job.uri and r.priority <= SPECULATIVE:
            stop_job(r, "superseded")
        elif r.priority != USER and (job.priority < r.priority or
                                     (job.priority <= SPECULATIVE and not r.waiters)):
            # outranked, or speculation nobody waits for in another document while the user works in this
            # one (a generation let go by its request, say): the document the user is in comes first
            stop_job(r, "preempted")

    def _rebase(self, job: Job, revision: int) -> None:
        self.hooks.ended(job, None, Stale("the document changed"))  # its requests asked about the old text
        job.state = replace(job.state, revision=revision)
        job.seq = next(self._seq)
        job.waiters = 0
        job.speculative = True
        if job.priority == USER:
            job.priority = SPECULATIVE
        self.hooks.queued(job)

    def _end(self, job: Job, result: Result | None, error: BaseException | None) -> None:
        """The job's outcome into the store, once."""
        if job.ended:
            return
        job.ended = True
        job.waiters = 0
        self.hooks.ended(job, result, error)

    def _drop(self, job: Job, error: BaseException) -> None:
        stop_job(job, type(error).__name__.lower())
        self._end(job, None, error)

    def _drop_all(self, error: BaseException) -> None:
        for job in [*self._pending.values(), *self._futures, *([self._warm] if self._warm else [])]:
            self._drop(job, error)
        self._pending.clear()
        self._futures.clear()
        self._warm = None

    def _next_job(self) -> tuple[Job | None, float]:
        """The job to run now, or None and how long until one may start."""
        now = time.monotonic()
        jobs = [*self._pending.values(), *self._futures, *([self._warm] if self._warm else [])]
        if now >= self._last_active + IDLE_WORK_S:  # the user went away: only what a request waits for
            jobs = [j for j in jobs if j.waiters or j.awaited]
        ready = [j for j in jobs if j.not_before <= now]
        if ready:
            return min(ready, key=lambda j: (j.priority, j.seq)), 0.0
        if jobs:
            return None, min(j.not_before for j in jobs) - now
        return None, -1.0

    def _take(self, job: Job) -> None:
        if self._pending.get(job.uri) is job:
            del self._pending[job.uri]
        elif job in self._futures:
            self._futures.remove(job)
        elif job is self._warm:
            self._warm = None

    def _wait_for_work(self) -> tuple[Job | None, Loader | None]:
        """Block until there is a job to run (or a reload, or stop)."""
        while True:
            if self._stopping:
                return None, None
            if self._reload is not None:
                reload, self._reload = self._reload, None
                return None, reload
            if self.runner.engine is None:
                self._cond.wait()
                continue
            job, wait = self._next_job()
            if job is None and wait < 0:
                wait = self._maybe_idle()
            if job is None:
                self._cond.wait(wait if wait > 0 else None)
                continue
            self._take(job)
            self._running = job
            job.started = time.monotonic()
            self._wake_watchdog.set()
            return job, None

    def _maybe_idle(self) -> float:
        """Nothing queued: say so once per quiet period. How long to sleep (negative: until woken)."""
        if self._idle_asked:
            return -1.0
        left = self._last_active + IDLE_WARM_S - time.monotonic()
        if left > 0:
            return left
        self._idle_asked = True
        self._events.put(Idle(self.tier))
        return -1.0

    # ---- threads --------------------------------------------------------------------------------
    def _watch(self) -> None:
        """Stop background work ``IDLE_WORK_S`` after the user's last action (its own thread: the engine
        thread is inside the model then). Sleeps while nothing runs."""
        while True:
            with self._cond:
                if self._stopping:
                    return
                r = self._running
                due = self._last_active + IDLE_WORK_S
                if r is not None and not r.waiters and not r.awaited and not r.cancel.cancelled and \
                        time.monotonic() >= due:
                    log.debug("job %d stopped: the user is idle", r.seq)
                    stop_job(r, "idle")
                    r = None
                self._wake_watchdog.clear()
            if r is None or r.cancel.cancelled or r.waiters or r.awaited:  # woken: a job starts, a waiter leaves
                self._wake_watchdog.wait()
            else:
                self._wake_watchdog.wait(max(0.01, due - time.monotonic()))

    def _main(self) -> None:
        self._loaded(self.runner.load(self._load_fn))
        while True:
            with self._cond:
                job, reload = self._wait_for_work()
                if job is None and reload is None:
                    return
            if reload is not None:
                self.runner.unload()
                self.hooks.forget()
                self._loaded(self.runner.load(reload))
                continue
            assert job is not None
            ran = self._run(job)
            with self._cond:
                self._running = None
                idle = not self._pending
            self.runner.report(ran, job, idle)

    def _loaded(self, error: str | None) -> None:
        if error is not None:
            with self._cond:
                self._drop_all(EngineUnavailable(error))

    def _run(self, job: Job) -> Ran:
        """Run one job; its outcome into the store."""
        ran = Ran()
        try:
            if job.priority == WARM:
                self.runner.warm(job)
            elif self._revisions.get(job.uri) != job.revision:
                ran.error = Stale("the document changed")
            elif job.cancel.cancelled:
                ran.error = reason_exc(job.cancel.reason)
            else:
                ran = self.runner.run(job, self._keeps)
                if ran.error is None and self._revisions.get(job.uri) != job.revision:
                    ran = Ran(ran.result, Stale("the document changed"), ran.ms)
                elif ran.error is None and job.cancel.cancelled:
                    ran = Ran(ran.result, reason_exc(job.cancel.reason), ran.ms)
        except Exception as e:  # never leave a request waiting, whatever happened
            log.exception("job for %s failed", job.uri)
            ran = Ran(error=e)
        with self._cond:
            self._end(job, ran.result, ran.error)
        return ran
