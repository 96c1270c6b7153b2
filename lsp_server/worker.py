"""One thread owns the engine; the event loop posts jobs to it and awaits futures.

Scheduling rules (the llama.cpp server / ruff_server shape: handlers post tasks, one loop owns the model):

- At most one pending job per document: a newer request for the same document answers the older one
  with ``Superseded`` at once, and stops it if it is running.
- A document change stops every job computed on an older revision (``Stale``), running or pending.
- Identical work (same document revision, text around the cursor and parameters) is computed once:
  the second request joins the first (a speculative job becomes a user job that way).
- User jobs run before speculative ones; among equals, oldest first.
- Stopping means setting the engine's CancelToken: the generation loop checks it every model step.
- A job starts only after ``QUIET_S`` without new document activity (``BURST_QUIET_S`` while messages
  arrive faster than any typist types). Human keystrokes are tens of milliseconds apart, so this costs
  them ~nothing; a burst (a replayed edit, a client catching up) is read to its end before the model
  starts, instead of starting a generation per message that the next message stops (each start costs
  an uninterruptible prompt pass, and the model's threads slow the reading of the rest).
- Every waiter's future is settled exactly once: a result, or one of the exceptions below.

Nothing here imports pygls: the worker sees the engine through the facade in engine/engine_api.md.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Protocol

from engine.types import CancelToken, Completion, GenParams, Timings

log = logging.getLogger(__name__)

USER = 0
SPECULATIVE = 1
QUIET_S = 0.008
BURST_QUIET_S = 0.06
BURST_EVENTS, BURST_WINDOW_S = 12, 0.1  # 12 events within 100 ms (120/s): no human types that fast


class JobDropped(Exception):
    """A job's result will never exist (base class)."""


class Stale(JobDropped):
    """The document changed: a result for the old text is useless."""


class Superseded(JobDropped):
    """A newer request for the same document replaced this one."""


class Cancelled(JobDropped):
    """The client cancelled the request."""


class EngineUnavailable(Exception):
    """The model could not be loaded (or the server is shutting down)."""


class EngineLike(Protocol):
    model_id: str

    def complete(self, prefix: str, suffix: str = "", params: GenParams | None = None,
                 cancel: CancelToken | None = None, on_token: Any = None) -> tuple[list[Completion], Timings]: ...


@dataclass(eq=False)
class Job:
    uri: str
    revision: int
    prefix: str
    suffix: str
    params: GenParams
    priority: int
    seq: int
    cancel: CancelToken = field(default_factory=CancelToken)
    waiters: list[Future] = field(default_factory=list)
    submitted: float = field(default_factory=time.monotonic)
    budget_s: float | None = None  # the deadline starts when the job starts (queueing or loading is free)

    def same_work(self, other: Job) -> bool:
        return (self.uri == other.uri and self.revision == other.revision and self.params.key() == other.params.key()
                and self.prefix == other.prefix and self.suffix == other.suffix)


Result = tuple[list[Completion], Timings]
# on_event(state, info): "loading" | "ready" | "busy" | "error", called from the worker thread
EventSink = Callable[[str, dict[str, Any]], None]


class Worker:
    def __init__(self, load: Callable[[], EngineLike], revision_of: Callable[[str], int | None],
                 on_event: EventSink | None = None) -> None:
        self._load_fn = load
        self._revision_of = revision_of
        self._on_event = on_event or (lambda state, info: None)
        self._cond = threading.Condition()
        self._pending: dict[str, Job] = {}
        self._running: Job | None = None
        self._engine: EngineLike | None = None
        self._load_error: str | None = None
        self._reload: Callable[[], EngineLike] | None = None
        self._stopping = False
        self._seq = itertools.count()
        self._activity: deque[float] = deque(maxlen=BURST_EVENTS)  # times of recent submits / changes
        self._memo: tuple[Job, Result] | None = None  # the last finished job (same work = same answer)
        self._thread = threading.Thread(target=self._main, name="flint-engine", daemon=True)
        self.loaded = threading.Event()  # set once the first load attempt finished (ok or not)
        self.jobs_run = 0

    # ---- event loop side ------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    @property
    def engine(self) -> EngineLike | None:
        return self._engine

    @property
    def load_error(self) -> str | None:
        return self._load_error

    def submit(self, uri: str, revision: int, prefix: str, suffix: str, params: GenParams,
               priority: int = USER, budget_s: float | None = None) -> Future:
        """Queue work; the returned future resolves to (completions, timings) or raises JobDropped /
        EngineUnavailable / the engine's own exception. Cancelling the future abandons the request.

        ``budget_s``: time allowed once the job starts; the engine returns what it has by then."""
        fut: Future = Future()
        job = Job(uri, revision, prefix, suffix, params, priority, next(self._seq), budget_s=budget_s)
        with self._cond:
            self._activity.append(time.monotonic())
            if self._stopping:
                fut.set_exception(EngineUnavailable("the server is shutting down"))
                return fut
            if self._load_error is not None and self._engine is None and self._reload is None:
                fut.set_exception(EngineUnavailable(self._load_error))
                return fut
            if self._memo is not None and self._memo[0].same_work(job):
                if priority == USER:  # asked again for what was just computed: answer from memory
                    fut.set_result(_from_memory(self._memo[1]))
                return fut
            for j in (self._running, self._pending.get(uri)):
                if j is not None and not j.cancel.cancelled and j.same_work(job):
                    if priority == USER:
                        j.waiters.append(fut)
                        fut.add_done_callback(partial(self._waiter_done, j))
                    j.priority = min(j.priority, priority)
                    return fut
            old = self._pending.pop(uri, None)
            if old is not None:
                self._drop(old, Superseded("a newer request for this document replaced it"))
            if self._running is not None and self._running.uri == uri:
                _stop(self._running, "superseded")
            if priority == USER:
                job.waiters.append(fut)
            self._pending[uri] = job
            self._cond.notify()
        fut.add_done_callback(partial(self._waiter_done, job))
        return fut

    def document_changed(self, uri: str, revision: int) -> None:
        """Stop work on older revisions of ``uri``."""
        with self._cond:
            self._activity.append(time.monotonic())
            job = self._pending.get(uri)
            if job is not None and job.revision < revision:
                del self._pending[uri]
                self._drop(job, Stale("the document changed"))
            if self._running is not None and self._running.uri == uri and self._running.revision < revision:
                _stop(self._running, "stale")

    def document_closed(self, uri: str) -> None:
        self.document_changed(uri, 1 << 62)

    def reload(self, load: Callable[[], EngineLike]) -> None:
        """Swap the model (settings changed). Queued requests wait for the new one."""
        with self._cond:
            self._reload = load
            if self._running is not None:
                _stop(self._running, "reload")
            self._cond.notify()

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopping = True
            for job in list(self._pending.values()):
                self._drop(job, EngineUnavailable("the server is shutting down"))
            self._pending.clear()
            if self._running is not None:
                _stop(self._running, "shutdown")
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def backlog(self) -> int:
        """Jobs waiting or running (for tests and the status line)."""
        with self._cond:
            return len(self._pending) + (self._running is not None)

    # ---- internals ------------------------------------------------------------------------------
    def _quiet_left(self) -> float:
        """Seconds to wait before starting the model (called under the lock)."""
        if not self._activity:
            return 0.0
        last = self._activity[-1]
        burst = len(self._activity) == BURST_EVENTS and last - self._activity[0] < BURST_WINDOW_S
        return last + (BURST_QUIET_S if burst else QUIET_S) - time.monotonic()

    def _waiter_done(self, job: Job, fut: Future) -> None:
        """A waiter's future finished; if it was cancelled by the client, maybe stop the job."""
        if not fut.cancelled():
            return
        with self._cond:
            if fut in job.waiters:
                job.waiters.remove(fut)
            if not job.waiters:
                _stop(job, "client cancelled")
                if self._pending.get(job.uri) is job:
                    del self._pending[job.uri]

    @staticmethod
    def _settle(job: Job, result: Result | None = None, exc: BaseException | None = None) -> None:
        waiters, job.waiters = job.waiters, []
        for fut in waiters:
            if fut.done():
                continue
            try:
                if exc is not None:
                    fut.set_exception(exc)
                else:
                    fut.set_result(result)
            except InvalidStateError:  # cancelled between the check and the set
                pass

    def _drop(self, job: Job, exc: BaseException) -> None:
        _stop(job, type(exc).__name__.lower())
        self._settle(job, exc=exc)

    def _emit(self, state: str, **info: Any) -> None:
        try:
            self._on_event(state, info)
        except Exception:  # a broken sink must not kill the engine thread
            log.exception("status event handler failed")

    def _load(self, load: Callable[[], EngineLike]) -> None:
        self._emit("loading")
        t0 = time.perf_counter()
        try:
            engine = load()
        except Exception as e:
            log.error("model load failed: %s", e)
            with self._cond:
                self._engine = None
                self._load_error = str(e)
                for job in list(self._pending.values()):
                    self._drop(job, EngineUnavailable(str(e)))
                self._pending.clear()
            self._emit("error", message=str(e))
        else:
            with self._cond:
                self._engine = engine
                self._load_error = None
            log.info("model %s ready in %.1f s", getattr(engine, "model_id", "?"), time.perf_counter() - t0)
            self._emit("ready", model=getattr(engine, "model_id", ""), load_s=time.perf_counter() - t0)
        finally:
            self.loaded.set()

    def _main(self) -> None:
        self._load(self._load_fn)
        while True:
            with self._cond:
                while True:
                    while not self._stopping and self._reload is None and not (self._pending and self._engine):
                        self._cond.wait()
                    quiet = self._quiet_left()
                    if self._stopping or self._reload is not None or quiet <= 0:
                        break
                    self._cond.wait(quiet)  # messages are still arriving: let them land first
                if self._stopping:
                    return
                reload, self._reload = self._reload, None
                if reload is None:
                    job = min(self._pending.values(), key=lambda j: (j.priority, j.seq))
                    del self._pending[job.uri]
                    self._running = job
            if reload is not None:
                self._engine = None
                self._memo = None
                self._load(reload)
                continue
            try:
                self._run(job)
            except BaseException as e:  # never leave a waiter hanging, whatever happened
                log.exception("job for %s failed", job.uri)
                self._settle(job, exc=e if isinstance(e, Exception) else RuntimeError(str(e)))
            finally:
                with self._cond:
                    self._running = None

    def _run(self, job: Job) -> None:
        engine = self._engine
        if self._revision_of(job.uri) != job.revision:
            self._settle(job, exc=Stale("the document changed"))
            return
        if job.cancel.cancelled:
            self._settle(job, exc=_reason_exc(job.cancel.reason))
            return
        if engine is None:
            self._settle(job, exc=EngineUnavailable(self._load_error or "no model loaded"))
            return
        self._emit("busy", uri=job.uri)
        t0 = time.perf_counter()
        log.debug("job %d start: %s rev %d, waited %.0f ms", job.seq, job.uri, job.revision,
                  (time.monotonic() - job.submitted) * 1000)
        params = job.params
        if job.budget_s is not None:
            params = replace(params, deadline=time.monotonic() + job.budget_s)
        try:
            result = engine.complete(job.prefix, job.suffix, params, cancel=job.cancel)
        except Exception as e:
            log.exception("engine.complete failed")
            self._settle(job, exc=e)
            self._emit("ready", error=str(e))
            return
        finally:
            self.jobs_run += 1
        ms = (time.perf_counter() - t0) * 1000
        log.debug("job %d done in %.0f ms (%s)", job.seq, ms, job.cancel.reason or "complete")
        if self._revision_of(job.uri) != job.revision:
            self._settle(job, exc=Stale("the document changed"))
        elif job.cancel.cancelled:
            self._settle(job, exc=_reason_exc(job.cancel.reason))
        else:
            with self._cond:
                self._memo = (job, result)
            self._settle(job, result=result)
        with self._cond:
            idle = not self._pending
        if idle:
            comps = result[0]
            self._emit("ready", latency_ms=ms, source=comps[0].source if comps else None,
                       cancelled=job.cancel.cancelled)


def _stop(job: Job, reason: str) -> None:
    """Stop a job; the first reason sticks (a stale job superseded afterwards is still stale)."""
    if not job.cancel.cancelled:
        job.cancel.cancel(reason)


def _from_memory(result: Result) -> Result:
    comps, timings = result
    return [replace(c, source="memory", ttft_ms=0.0, total_ms=0.0) for c in comps], timings


def _reason_exc(reason: str) -> BaseException:
    if reason == "stale":
        return Stale("the document changed")
    if reason in ("superseded",):
        return Superseded("a newer request for this document replaced it")
    if reason in ("shutdown",):
        return EngineUnavailable("the server is shutting down")
    if reason == "reload":
        return Superseded("the model is being reloaded")
    return Cancelled(reason or "cancelled")
