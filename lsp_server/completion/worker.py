"""One thread owns the engine; the event loop posts jobs to it and awaits futures.

Scheduling rules (the llama.cpp server / ruff_server shape: handlers post tasks, one loop owns the model):

- At most one pending job per document for its current state: a newer request for the same document
  answers the older one with ``Superseded`` at once, and stops it if it is running.
- A document change stops every job computed on an older revision (``Stale``), running or pending,
  unless the caller's ``keep`` says the job still serves the new text: a running generation the user is
  typing through (its text so far agrees with what was typed) keeps running for the new revision
  (*tracking*), and a pre-generated future the user is typing toward (or has accepted) is kept.
- Identical work (same document revision, text around the cursor and parameters) is computed once:
  the second request joins the first (a speculative job becomes a user job that way).
- Priorities: user requests, then speculation for a document's current state, then futures (states the
  user may reach next), then idle KV warming; among equals, oldest first. A job of a better class
  pre-empts a running job of a worse one (a user request stops speculative work for other documents),
  and work for the document the user is typing in stops speculation nobody waits for in another one.
- Stopping means setting the engine's CancelToken: the generation loop checks it every model step.
- Generations no request waits for (speculation, futures) run only until ``IDLE_WORK_S`` after the
  user's last action (a submit, a document change, a request let go); a watchdog thread stops them
  then, so the CPU goes idle soon after the user does; so does the idle warm-up (one per quiet period:
  the active spot's KV, behind the context block), whose prefilled chunks stay for the next pause.
- No quiet period for typing: a job starts at once (newest wins; a keystroke appends a token or two to
  the KV cache, so starting costs little), not before its own ``not_before`` if it has one. Only a burst
  of messages faster than any typist types (a replayed edit, a client catching up) is read to its end
  first (``BURST_QUIET_S``), instead of starting a generation per message that the next one stops.
- Every waiter's future is settled exactly once: a result, or one of the exceptions below. A waiter can
  also be *released* (its request answered from elsewhere, or its deadline passed): the job then goes
  on as speculation, so its result is ready for the next ask.
- ``Hooks`` connect the caches without the worker knowing them: before a job runs, ``answer`` may
  settle it without the model (a cache filled since it was queued); tokens stream to ``token`` (which
  may stop a generation that no longer matches the text); ``finished`` stores results; ``idle`` names
  a prompt to warm.

This module schedules; running a job on the engine (loading the model, the hooks around
``engine.complete``, the idle warm-up, the context block) is ``Runner``'s (runner.py), mixed into ``Worker``.

Nothing here imports pygls: the worker sees the engine through the facade in engine/engine_api.md.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from functools import partial
from typing import Any

from engine.backends import Backend
from engine.types import GenParams
from lsp_server.completion.jobs import (
    FUTURE,
    SPECULATIVE,
    USER,
    WARM,
    EngineLike,
    EngineUnavailable,
    EventSink,
    Hooks,
    Job,
    Keep,
    Result,
    Stale,
    Superseded,
    drop,
    from_memory,
    settle,
    stop_job,
)
from lsp_server.completion.planner import IDLE_WORK_S
from lsp_server.completion.runner import Runner

log = logging.getLogger(__name__)

BURST_QUIET_S = 0.06
BURST_EVENTS, BURST_WINDOW_S = 12, 0.1  # 12 events within 100 ms (120/s): no human types that fast
IDLE_WARM_S = 0.5  # engine idle this long (and nothing new happened): ask for idle work once


class Worker(Runner):
    def __init__(self, load: Callable[[], EngineLike], revision_of: Callable[[str], int | None],
                 on_event: EventSink | None = None, hooks: Hooks | None = None,
                 context: Callable[[], tuple[str | None, Any]] | None = None) -> None:
        self._load_fn = load
        # (uri, the newest repository context block for it (engine/context/workspace.py)), asked in idle time
        self._context = context
        self._context_uri: str | None = None  # the document the backend's block was gathered for
        self._revision_of = revision_of
        self._on_event = on_event or (lambda state, info: None)
        self.hooks = hooks
        self._cond = threading.Condition()
        self._pending: dict[str, Job] = {}  # the current state's job, per document
        self._futures: list[Job] = []  # pre-generation for states the user may reach next
        self._warm: Job | None = None
        self._running: Job | None = None
        self._engine: Backend | None = None
        self._load_error: str | None = None
        self._reload: Callable[[], EngineLike] | None = None
        self._stopping = False
        self._seq = itertools.count()
        self._activity: deque[float] = deque(maxlen=BURST_EVENTS)  # times of recent submits / changes
        self._idle_asked = False  # idle work is asked for once per quiet period
        self._busy = False  # the last status event said "busy" (a "ready" must follow)
        self._memo: tuple[Job, Result] | None = None  # the last finished job (same work = same answer)
        self._last_active = time.monotonic()  # the user's last action this worker heard of
        self._wake_watchdog = threading.Event()
        self._thread = threading.Thread(target=self._main, name="flint-engine", daemon=True)
        self._watchdog = threading.Thread(target=self._watch, name="flint-idle-watchdog", daemon=True)
        self.loaded = threading.Event()  # set once the first load attempt finished (ok or not)
        self.jobs_run = 0  # engine calls (generations and warm-ups)
        self.model_calls = 0  # generations only
        self.latency_s: float | None = None  # EWMA: job start to its first complete line (or its end)
        self.kv_prompt: tuple[str, str] | None = None  # the prompt the engine's KV cache holds

    # ---- event loop side ------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()
        self._watchdog.start()

    @property
    def engine(self) -> Backend | None:
        return self._engine

    def submit(self, uri: str, revision: int, prefix: str, suffix: str, params: GenParams,
               priority: int = USER, budget_s: float | None = None, not_before: float = 0.0,
               detachable: bool = False, anew: bool = False) -> Future:
        """Queue work for a document's current state; the returned future resolves to (completions,
        timings) or raises JobDropped / EngineUnavailable / the engine's own exception. Cancelling the
        future abandons the request (``release`` lets go without stopping the work).

        ``budget_s``: time allowed once the job starts; the engine returns what it has by then.
        ``not_before``: a time.monotonic() before which the job does not start (debounce).
        ``detachable``: when its requests are cancelled the job goes on as speculation (an editor cancels
        the request of the previous keystroke before it sends the next one, which may type through it).
        ``anew``: the store's entry for this state was cut off (the user went on before it was whole and came
        back): the model runs, neither the store nor the last job's memory answers."""
        fut: Future = Future()
        job = Job(uri, revision, prefix, suffix, params, priority, next(self._seq), budget_s=budget_s,
                  not_before=not_before, speculative=priority != USER or detachable, anew=anew)
        with self._cond:
            self._touch()
            if self._stopping:
                fut.set_exception(EngineUnavailable("the server is shutting down"))
                return fut
            if self._load_error is not None and self._engine is None and self._reload is None:
                fut.set_exception(EngineUnavailable(self._load_error))
                return fut
            if self._memo is not None and self._memo[0].same_work(job) and not anew:
                if priority == USER:  # asked again for what was just computed: answer from memory
                    fut.set_result(from_memory(self._memo[1]))
                return fut
            for j in (self._running, self._pending.get(uri), *self._futures):
                if j is not None and not j.cancel.cancelled and j.same_work(job):
                    j.anew = j.anew or anew
                    if priority == USER:
                        j.waiters.append(fut)
                        fut.add_done_callback(partial(self._waiter_done, j))
                        j.not_before = min(j.not_before, not_before)
                    j.priority = min(j.priority, priority)
                    if j is not self._running:
                        self._preempt(j)  # now a user's request: it may outrank what is running
                    return fut
            old = self._pending.pop(uri, None)
            if old is not None:
                drop(old, Superseded("a newer request for this document replaced it"))
            r = self._running
            if priority == USER and r is not None and r.uri == uri and r.waiters and not r.cancel.cancelled:
                # a newer request for this document replaces the one running (an explicit request, then
                # the editor asks again at once): its waiters hear Superseded, the model moves on at once
                drop(r, Superseded("a newer request for this document replaced it"))
            self._preempt(job)
            if priority == USER:
                job.waiters.append(fut)
            self._pending[uri] = job
            self._cond.notify()
        fut.add_done_callback(partial(self._waiter_done, job))
        return fut

    def set_futures(self, uri: str, revision: int, states: Sequence[tuple[str, str, GenParams, float | None]],
                    not_before: float = 0.0) -> int:
        """Pre-generate these states of ``uri`` (prefix, suffix, params, budget), best first, replacing
        the futures planned before, starting no earlier than ``not_before``. A future already queued or
        running for the same state is kept. Returns how many new jobs were queued."""
        added = 0
        with self._cond:
            if self._stopping:
                return 0
            keep: list[Job] = []
            for prefix, suffix, params, budget in states:
                probe = Job(uri, revision, prefix, suffix, params, FUTURE, -1)
                same = next((j for j in (self._running, *self._futures) if j is not None and not j.cancel.cancelled
                             and j.same_work(probe)), None)
                if same is not None:
                    if same is not self._running:
                        same.not_before = max(same.not_before, not_before)  # still waiting for a pause
                        keep.append(same)
                    continue
                keep.append(Job(uri, revision, prefix, suffix, params, FUTURE, next(self._seq), budget_s=budget,
                                not_before=not_before, speculative=True))
                added += 1
            for j in self._futures:
                if j not in keep:
                    drop(j, Superseded("newer futures were planned"))
            r = self._running
            if r is not None and r.priority == FUTURE and not r.tracking and \
                    not any(r.same_work(Job(uri, revision, p, s, pa, FUTURE, -1)) for p, s, pa, _ in states):
                stop_job(r, "superseded")
            self._futures = keep
            if added:
                self._cond.notify()
        return added

    def document_changed(self, uri: str, revision: int, keep: Keep | None = None) -> None:
        """Stop work on older revisions of ``uri``, except what ``keep(job, running)`` says still serves
        the new text: such a job moves to ``revision`` (its waiters, who asked about the old text, get
        ``Stale``; the work goes on)."""
        with self._cond:
            self._touch()
            job = self._pending.get(uri)
            if job is not None and job.revision < revision:
                if keep is not None and keep(job, False):
                    self._rebase(job, revision)
                else:
                    del self._pending[uri]
                    drop(job, Stale("the document changed"))
            for j in [j for j in self._futures if j.uri == uri and j.revision < revision]:
                if keep is not None and keep(j, False):
                    self._rebase(j, revision)
                else:
                    self._futures.remove(j)
                    drop(j, Stale("the document changed"))
            r = self._running
            if r is not None and r.uri == uri and r.revision < revision and not r.cancel.cancelled:
                if keep is not None and keep(r, True):
                    self._rebase(r, revision)
                    r.tracking = True
                else:
                    stop_job(r, "stale")

    def document_closed(self, uri: str) -> None:
        self.document_changed(uri, 1 << 62)

    def release(self, fut: Future, awaited: bool = False) -> None:
        """Stop waiting on ``fut`` without stopping its job: the job goes on as speculation (its result
        lands in the caches for the next ask). ``awaited``: the request got nothing, so the user still
        waits at that spot: the job is not idle work (it runs to its end; the client hears a refresh)."""
        with self._cond:
            self._last_active = time.monotonic()  # a request's deadline passed: the user is still there
            for j in (self._running, *self._pending.values(), *self._futures):
                if j is not None and fut in j.waiters:
                    j.released = True
                    j.awaited = j.awaited or awaited
        fut.cancel()

    def reload(self, load: Callable[[], EngineLike]) -> None:
        """Swap the model (settings changed). Queued requests wait for the new one."""
        with self._cond:
            self._reload = load
            if self._running is not None:
                stop_job(self._running, "reload")
            self._cond.notify()

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopping = True
            for job in [*self._pending.values(), *self._futures, *([self._warm] if self._warm else [])]:
                drop(job, EngineUnavailable("the server is shutting down"))
            self._pending.clear()
            self._futures.clear()
            self._warm = None
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

    # ---- internals ------------------------------------------------------------------------------
    def _touch(self) -> None:
        """New activity (called under the lock): a pending warm-up is pointless now."""
        self._activity.append(time.monotonic())
        self._last_active = self._activity[-1]
        self._idle_asked = False
        if self._warm is not None:
            self._warm = None
        if self._running is not None and self._running.priority == WARM:
            stop_job(self._running, "superseded")

    def _preempt(self, job: Job) -> None:
        """(lock held) Stop the running job if ``job`` replaces or outranks it."""
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
        job.revision = revision
        settle(job, exc=Stale("the document changed"))
        job.speculative = True
        if job.priority == USER:
            job.priority = SPECULATIVE

    def _quiet_left(self) -> float:
        """Seconds to wait before starting the model (called under the lock)."""
        if not self._activity:
            return 0.0
        last = self._activity[-1]
        burst = len(self._activity) == BURST_EVENTS and last - self._activity[0] < BURST_WINDOW_S
        return last + BURST_QUIET_S - time.monotonic() if burst else 0.0

    def _next_job(self) -> tuple[Job | None, float]:
        """(lock held) The job to run now, or None and how long until one may start."""
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

    def _waiter_done(self, job: Job, fut: Future) -> None:
        """A waiter's future finished; if it was cancelled by the client, maybe stop the job."""
        if not fut.cancelled():
            return
        with self._cond:
            if fut in job.waiters:
                job.waiters.remove(fut)
            self._last_active = time.monotonic()
            self._wake_watchdog.set()
            if job.waiters:
                return
            if job.speculative or job.released:  # speculation a request had joined: it goes on
                job.priority = max(job.priority, SPECULATIVE)
                return
            stop_job(job, "client cancelled")
            if self._pending.get(job.uri) is job:
                del self._pending[job.uri]

    def _wait_for_work(self) -> tuple[Job | None, Callable[[], EngineLike] | None]:
        """(lock held) Block until there is a job to run (or a reload, or stop)."""
        while True:
            if self._stopping:
                return None, None
            if self._reload is not None:
                reload, self._reload = self._reload, None
                return None, reload
            if self._engine is None:
                self._cond.wait()
                continue
            job, wait = self._next_job()
            if job is None and wait < 0:
                wait = self._maybe_idle_work()
                if wait == 0:
                    continue
            if job is None:
                self._cond.wait(wait if wait > 0 else None)
                continue
            quiet = self._quiet_left()
            if quiet > 0:
                self._cond.wait(quiet)  # messages are still arriving: let them land first
                continue
            self._take(job)
            self._running = job
            job.started = time.monotonic()
            self._wake_watchdog.set()
            return job, None

    def _maybe_idle_work(self) -> float:
        """(lock held, nothing queued) Ask the hooks for idle work once per quiet period. Returns 0 when a
        job was queued, else how long to sleep (negative: until something happens)."""
        if self.hooks is None or self._idle_asked:
            return -1.0
        left = self._last_active + IDLE_WARM_S - time.monotonic()
        if left > 0:
            return left
        self._idle_asked = True
        if not self._admit_context():
            return 0.0  # something happened while the block was gathered: look at it first
        try:
            plan = self.hooks.idle(self.kv_prompt)
        except Exception:
            log.exception("idle hook failed")
            return -1.0
        if plan is None:
            return -1.0
        uri, revision, prefix, suffix = plan
        self._warm = Job(uri, revision, prefix, suffix, GenParams(), WARM, next(self._seq), speculative=True)
        return 0.0

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
        self._load(self._load_fn)
        while True:
            with self._cond:
                job, reload = self._wait_for_work()
                if job is None and reload is None:
                    return
            if reload is not None:
                self._engine = None
                self._memo = None
                self._load(reload)
                continue
            assert job is not None
            try:
                self._run(job)
            except BaseException as e:  # never leave a waiter hanging, whatever happened
                log.exception("job for %s failed", job.uri)
                settle(job, exc=e if isinstance(e, Exception) else RuntimeError(str(e)))
            finally:
                with self._cond:
                    self._running = None
