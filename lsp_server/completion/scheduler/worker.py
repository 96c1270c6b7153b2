"""The scheduler: the event loop posts jobs, one engine thread per backend runs them (runner.py), and every
job's outcome goes into the store once (the llama.cpp server shape). Its rules: docs/architecture.md.
"""

from __future__ import annotations

import itertools
import logging
import threading

from engine.backends import Backend
from engine.cache.typethrough import Entry
from lsp_server.completion.events import Events, Idle
from lsp_server.completion.jobs import (
    WARM,
    Ask,
    EngineUnavailable,
    Job,
    Life,
    Result,
    Stale,
    State,
    Superseded,
    WarmUp,
    Work,
    reason_exc,
    stop_job,
)
from lsp_server.completion.policy import planner
from lsp_server.completion.scheduler.clock import Clock
from lsp_server.completion.scheduler.idle import Watchdog
from lsp_server.completion.scheduler.jobqueue import JobQueue
from lsp_server.completion.scheduler.runner import Loader, Ran, Runner
from lsp_server.completion.store.store import Store

log = logging.getLogger(__name__)

CLOSED = 1 << 62  # the revision of a closed document: every job for it is stale


class Worker:
    def __init__(self, load: Loader, store: Store, events: Events, tier: str = "local",
                 clock: Clock | None = None) -> None:
        self._store = store
        self._events = events
        self.tier = tier
        self.runner = Runner(tier, store, events)
        self._cond = threading.Condition()
        self._clock = clock or Clock()
        self._q = JobQueue(self._clock)
        self._reload: Loader | None = None
        self._stopping = False
        self._seq = itertools.count()
        self._wake_watchdog = threading.Event()
        self._thread = threading.Thread(target=self.runner.serve, args=(load, self), name=f"flint-engine-{tier}",
                                        daemon=True)
        self._watchdog = Watchdog(self._cond, self._q, self._wake_watchdog, lambda: self._stopping)

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

    def submit(self, state: State, work: Work | None = None) -> Job | None:
        """Queue or join work for a state; the job, or None when the store's record of it answers."""
        work = work or Work()
        job = Job(state, work.priority, next(self._seq), work,
                  life=Life.BACKGROUND if work.mode is Ask.SPECULATE else Life.ASKED, not_before=work.not_before)
        with self._cond:
            self._touch()
            self._q.heard(state)
            target = self._place(job)
            if work.mode in (Ask.BACKGROUND, Ask.AWAITED):
                self._leave(target, Life.AWAITED if work.mode is Ask.AWAITED else Life.BACKGROUND)
            return target

    def _place(self, job: Job) -> Job | None:
        """Queue ``job``, or join the same work queued or running (lock held)."""
        if self._stopping or self.runner.load_error is not None and self.runner.engine is None and not self._reload:
            why = "the server is shutting down" if self._stopping else str(self.runner.load_error)
            self._store.queued(self.tier, job)
            self._end(job, None, EngineUnavailable(why))
            return job
        done = None if job.anew else self._store.repeat(self.tier, job)
        if done is not None:  # asked again for what was just computed: the store answers from its record
            return None
        same = self._q.joinable(job.state)
        if same is None:
            for old in self._q.put(job):
                self._drop(old, Superseded("a newer request for this document replaced it"))
            self._preempt(job)
            self._store.queued(self.tier, job)
            self._cond.notify()
            return job
        same.join(job)  # the same work: its request waits for that job
        if same is not self._q.running:
            self._preempt(same)  # now a user's request: it may outrank what is running
        self._store.queued(self.tier, same)
        return same

    def document_changed(self, uri: str, revision: int, current: State | None = None) -> None:
        """Older work stops, except what still serves the user's state ``current``: it moves to ``revision``
        (its waiters hear Stale)."""
        with self._cond:
            self._touch()
            self._q.revisions[uri] = revision
            self._q.follow(uri, current)
            for job in self._q.older(uri, revision):
                running = job is self._q.running
                if current is not None and self.still_serves(job, running, current):
                    self._rebase(job, revision, running)
                elif running:
                    stop_job(job, "stale")
                else:
                    self._q.remove(job)
                    self._drop(job, Stale("the document changed"))

    def moved(self, uri: str, current: State) -> None:
        """What tracking jobs must agree with now (a cursor moved, a request)."""
        with self._cond:
            self._q.follow(uri, current)

    def document_closed(self, uri: str) -> None:
        self.document_changed(uri, CLOSED)

    def leave(self, job: Job | None, seq: int, detach: Life | None = None) -> None:
        """A request stops waiting for ``job`` (Job.leave); one rebased since (``seq`` moved on) is not theirs."""
        with self._cond:
            self._leave(job if job is not None and job.seq == seq else None, detach)

    def warm(self, state: State | None, warm_up: WarmUp) -> None:
        """(after events.Idle) Idle work for ``state``; nothing if the user acted since."""
        with self._cond:
            if self._stopping or not self._q.idle_asked or state is None:
                return
            self._q.warm = Job(state, WARM, next(self._seq), warm_up, life=Life.BACKGROUND)
            self._cond.notify()

    def reload(self, load: Loader) -> None:
        """Swap the model (settings changed). Queued requests wait for the new one."""
        with self._cond:
            self._reload = load
            if self._q.running is not None:
                stop_job(self._q.running, "reload")
            self._cond.notify()

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopping = True
            self._drop_all(EngineUnavailable("the server is shutting down"))
            if self._q.running is not None:
                stop_job(self._q.running, "shutdown")
            self._cond.notify()
        self._wake_watchdog.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def poke(self) -> None:
        """The user acted where this worker has nothing to run (another tier, the store answered): idle work
        is looked for again once it is quiet."""
        with self._cond:
            self._q.touch()
            self._cond.notify()

    def backlog(self) -> int:
        with self._cond:
            return len(self._q)

    def running(self) -> Job | None:
        return self._q.running

    # ---- internals (lock held) ------------------------------------------------------------------
    def _touch(self) -> None:
        warming = self._q.touch()
        if warming is not None:
            stop_job(warming, "superseded")

    def _leave(self, job: Job | None, detach: Life | None) -> None:
        self._q.last_active = self._clock()  # a request's deadline passed, or it went: the user acted
        self._wake_watchdog.set()
        if job is not None and job.leave(detach):
            stop_job(job, "client cancelled")
            if self._q.remove(job):
                self._end(job, None, reason_exc("client cancelled"))

    def _preempt(self, job: Job) -> None:
        reason = self._q.outranked(job)
        if reason is not None and self._q.running is not None:
            stop_job(self._q.running, reason)

    def still_serves(self, job: Job, running: bool, current: State) -> bool:
        """The planner's rule (kept_through_edit), on what the running generation streamed so far."""
        entry = job.handle
        agrees = running and isinstance(entry, Entry) and self._store.typethrough.consistent(entry, current.prefix, current.suffix)
        return planner.kept_through_edit(self.tier, job, current, agrees)

    def _rebase(self, job: Job, revision: int, running: bool) -> None:
        self._store.ended(self.tier, job, None, Stale("the document changed"))  # its requests asked about the old text
        job.rebase(revision, next(self._seq), running)
        self._store.queued(self.tier, job)

    def _end(self, job: Job, result: Result | None, error: BaseException | None) -> None:  # into the store, once
        if job.life is Life.ENDED:
            return
        job.life = Life.ENDED
        job.waiters = 0
        self._store.ended(self.tier, job, result, error)

    def _drop(self, job: Job, error: BaseException) -> None:
        stop_job(job, type(error).__name__.lower())
        self._end(job, None, error)

    def _drop_all(self, error: BaseException) -> None:
        for job in self._q.clear():
            self._drop(job, error)

    def next_work(self) -> tuple[Job | None, Loader | None]:
        """(engine thread) Block until there is a job to run (or a model to load; both None: stop)."""
        with self._cond:
            return self._wait_for_work()

    def _wait_for_work(self) -> tuple[Job | None, Loader | None]:  # (lock held)
        while True:
            if self._stopping:
                return None, None
            if self._reload is not None:
                reload, self._reload = self._reload, None
                return None, reload
            if self.runner.engine is None:
                self._cond.wait()
                continue
            job, wait = self._q.next_job(self._clock())
            if job is None and wait < 0:
                wait, idle = self._q.idle_wait()
                if idle:
                    self._events.put(Idle(self.tier))
            if job is None:
                if self.runner.busy and (wait < 0 or not self._q.waiting()):  # nothing to run before the user acts
                    self.runner.emit("ready")
                self._clock.wait(self._cond, wait if wait > 0 else None)
                continue
            self._q.take(job)
            self._wake_watchdog.set()
            return job, None

    # ---- the engine thread's side (runner.Runner.serve) -------------------------------------------
    def done(self, job: Job, ran: Ran) -> bool:
        """The job ran: its outcome into the store. True when nothing is pending."""
        with self._cond:
            self._end(job, ran.result, ran.error)
            self._q.running = None
            return not self._q.pending

    def load_failed(self, error: str) -> None:
        with self._cond:
            self._drop_all(EngineUnavailable(error))

    def revision(self, uri: str) -> int | None:
        """The document's newest revision this worker heard of (CLOSED once closed)."""
        return self._q.revisions.get(uri)

    def holds(self, job: Job, text: str) -> bool:
        """(engine thread) Does a look-ahead generation wait before its next line (planner.holds_lookahead)?
        Not while other work waits for the engine; never a remote's stream (its server's CPU, not ours)."""
        if self.tier != "local":
            return False
        with self._cond:
            current = self._q.current.get(job.state.uri) if job.life is Life.TRACKING else None
            typed = len(current.prefix) - len(job.state.prefix) if current is not None else 0
            return not self._q.pending and planner.holds_lookahead(job.state.params, text, typed,
                                                                   self._clock() - self._q.last_active)

    def beyond_idle(self, job: Job, need_s: float | None) -> bool:
        """(engine thread) Idle work whose prompt pass needs longer (``need_s``) than is left before the watchdog
        stops it is stopped now: such a pass, cut short, wrote nothing (docs/benchmarks/cpu.md)."""
        with self._cond:
            if need_s is None or not job.idle_work or self._clock() + need_s <= self._q.idle_from():
                return False
            stop_job(job, "beyond idle")
            return True

    def keeps(self, job: Job) -> bool:
        """(engine thread) Does a job kept through an edit still serve where the user is?"""
        if job.life is not Life.TRACKING:
            return True
        with self._cond:
            current = self._q.current.get(job.state.uri)
            return current is not None and self.still_serves(job, True, current)
