"""The engine thread of one scheduler (worker.py decides what runs): it loads the model, runs each job into a
type-through entry the store opened (the job's budget its deadline; a job the typing left stops at its next
token) and saves whole-window results on disk. Status goes up as events; nothing here calls the service.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Protocol

from engine.backends import Backend, as_backend
from engine.cache.entries import Identity
from engine.cache.typethrough import Entry
from engine.remote.wire import RemoteError
from engine.types import Doubts, Timings
from lsp_server.completion.events import Events, Status, Worked
from lsp_server.completion.jobs import Job, JobDropped, Result, Stale, WarmUp, reason_exc, stop_job
from lsp_server.completion.policy import knobs
from lsp_server.completion.scheduler.idle import IdleWork
from lsp_server.completion.store.store import Store

log = logging.getLogger(__name__)

# what a loader returns: a Backend, or a bare engine (a test's stand-in) that as_backend wraps as a local one
Loader = Callable[[], object]


@dataclass
class Ran:
    """How running a job went: its result or the error it raised; ``ms`` is None when no model ran."""

    result: Result | None = None
    error: BaseException | None = None
    ms: float | None = None


class Scheduler(Protocol):
    """What the engine thread asks its scheduler (worker.Worker): the next job, and how one ran."""

    def next_work(self) -> tuple[Job | None, Loader | None]: ...

    def done(self, job: Job, ran: Ran) -> bool: ...

    def load_failed(self, error: str) -> None: ...

    def revision(self, uri: str) -> int | None: ...

    def keeps(self, job: Job) -> bool: ...

    def holds(self, job: Job, text: str) -> bool: ...

    def beyond_idle(self, job: Job, need_s: float | None) -> bool: ...


class Runner:
    def __init__(self, tier: str, store: Store, events: Events) -> None:
        self.tier = tier
        self.store = store
        self._events = events
        self.engine: Backend | None = None
        self.load_error: str | None = None
        self.loaded = threading.Event()  # set once the first load attempt finished (ok or not)
        self.model_calls = 0  # generations (tests count them)
        self.idle = IdleWork(lambda engine: self._safely(self.identify, engine), self._worked)
        self.busy = False  # the last status said "busy" (a "ready" must follow)

    def serve(self, load: Loader, scheduler: Scheduler) -> None:
        """The engine thread: load the model, then run what the scheduler hands over until it says stop."""
        reload: Loader | None = load
        while True:
            if reload is not None and (error := self.load(reload)) is not None:
                scheduler.load_failed(error)
            job, reload = scheduler.next_work()
            if reload is not None:
                self.engine = None
                self.store.forget(self.tier)  # what the old model made is no repeat of the new one's work
                self.identify(None)
                continue
            if job is None:
                return
            ran = self.execute(job, scheduler)
            self.report(ran, job, idle=scheduler.done(job, ran))

    def execute(self, job: Job, scheduler: Scheduler) -> Ran:
        """A warm-up, or a generation unless its document moved on or it was stopped."""
        try:
            if isinstance(job.work, WarmUp):
                assert self.engine is not None
                self.idle.warm(self.engine, job, job.work)
                return Ran()
            if scheduler.revision(job.state.uri) != job.state.revision:
                return Ran(error=Stale("the document changed"))
            if job.cancel.cancelled:
                return Ran(error=reason_exc(job.cancel.reason))
            ran = self.run(job, scheduler)
            if ran.error is None and scheduler.revision(job.state.uri) != job.state.revision:
                return Ran(ran.result, Stale("the document changed"), ran.ms)
            if ran.error is None and job.cancel.cancelled:
                return Ran(ran.result, reason_exc(job.cancel.reason), ran.ms)
            return ran
        except Exception as e:  # never leave a request waiting, whatever happened
            log.exception("job for %s failed", job.state.uri)
            return Ran(error=e)

    def load(self, load: Loader) -> str | None:  # the error message when it failed
        self.emit("loading")
        t0 = time.perf_counter()
        try:
            engine = as_backend(load())
        except Exception as e:
            log.error("model load failed: %s", e)
            self.engine, self.load_error = None, str(e)
            self._safely(self.identify, None)
            self.emit("error", message=str(e))
            self.loaded.set()
            return str(e)
        self.engine, self.load_error = engine, None
        self._safely(self.identify, engine)  # what the disk cache keys this tier's answers by
        log.info("model %s ready in %.1f s", engine.model_id, time.perf_counter() - t0)
        self.emit("ready", model=engine.model_id, load_s=time.perf_counter() - t0)
        self.loaded.set()
        return None

    def run(self, job: Job, scheduler: Scheduler) -> Ran:
        """A generation; at each token the scheduler says whether a job kept through an edit still serves, and
        whether it waits before its next line."""
        engine = self.engine
        assert engine is not None
        if self.idle.context_uri not in (None, job.state.uri) and engine.context_digest:
            self.idle.drop_context(engine, job.state.uri)  # the block was gathered for another document
        if not job.anew:
            cached = self._from_store(job)
            if cached is not None:
                return Ran(cached)
        if job.idle_work and not job.state.params.quick_start and \
                scheduler.beyond_idle(job, engine.prefill_seconds(job.state.prefix, job.state.suffix)):
            self._worked(job, time.perf_counter(), time.process_time())  # (counted: ended "beyond idle")
            return Ran(error=reason_exc(job.cancel.reason))
        self.emit("busy", uri=job.state.uri)
        t0, c0 = time.perf_counter(), time.process_time()
        log.debug("job %d start (%s): %s rev %d, waited %.0f ms", job.seq, job.account, job.state.uri, job.state.revision,
                  (time.monotonic() - job.submitted) * 1000)
        params = job.state.params if job.budget_s is None else \
            replace(job.state.params, deadline=time.monotonic() + job.budget_s)
        self._safely(self.open_entry, job)
        result: Result | None = None
        try:
            result = engine.complete(job.state.prefix, job.state.suffix, params, cancel=job.cancel,
                                     on_token=partial(self._on_token, job, scheduler))
        except Exception as e:
            if isinstance(e, RemoteError):  # expected (a remote server down): one line, no traceback
                log.warning("%s: %s", type(e).__name__, e)
            else:
                log.exception("engine.complete failed")
            return Ran(error=e, ms=(time.perf_counter() - t0) * 1000)
        finally:
            self.model_calls += 1
            self._worked(job, t0, c0, result[1] if result else None, failed=result is None)
            self._safely(self.close_entry, job, result, (time.perf_counter() - t0) * 1000)
        t = result[1]
        log.debug("job %d done in %.0f ms (%s, %s): %s window, %d of %d prompt tokens run in %.0f ms, %d generated",
                  job.seq, (time.perf_counter() - t0) * 1000, job.account, job.cancel.reason or "complete", t.window,
                  t.ran_tokens, t.prompt_tokens, t.prefill_ms, t.decode_tokens)
        if self.tier == "remote":  # a server that did not name its model at load has named it now
            self._safely(self.identify, engine)
        return Ran(result, ms=(time.perf_counter() - t0) * 1000)

    def identify(self, engine: Backend | None) -> None:
        """The disk cache keys this tier's answers by what its engine is now (model, context block)."""
        self.store.disk.identify(self.tier, identity_of(engine))

    def _from_store(self, job: Job) -> Result | None:
        """The store's complete answer, filled since the job was queued (typed through, disk): no model call."""
        try:
            found = self.store.lookup(job.state, since=None, partial=False, backend=self.tier, settings=job.settings)
        except Exception:
            log.exception("looking the job up in the store failed")
            return None
        if found is None or not found.complete:
            return None
        log.debug("job %d answered without the model", job.seq)
        return found.comps, Timings()

    def open_entry(self, job: Job) -> None:
        """The type-through entry the generation streams into (none with speculation off)."""
        if not job.settings.speculation:
            return
        key = (*job.state.params.key(), self.tier)
        job.handle = self.store.open(job.state.prefix, job.state.suffix, job.state.params.n, key, work=job.account)

    def _on_token(self, job: Job, scheduler: Scheduler, index: int, text: str, doubts: Doubts = ()) -> None:
        if job.cancel.cancelled:
            return
        if isinstance(job.handle, Entry):
            self._safely(self.store.stream, job.handle, index, text, doubts)
        while index == 0 and scheduler.holds(job, text) and not job.cancel.wait(knobs.HOLD_POLL_S):
            pass  # (engine thread asleep) a keystroke off the line stops the job before its next line costs
        if not job.cancel.cancelled and not scheduler.keeps(job):
            stop_job(job, "diverged")  # the user typed something else: the text is useless now

    def close_entry(self, job: Job, result: Result | None, ms: float) -> None:
        """Its entry closed (a failed remote stream's dropped: the local fallback answers), a whole-window
        result saved on disk."""
        entry = job.handle
        comps = result[0] if result is not None else None
        if isinstance(entry, Entry):
            if comps is None and self.tier == "remote":
                self.store.discard(entry)
            else:
                self.store.finish(entry, comps, result[1].window if result is not None else "full")
        if comps and result is not None and result[1].window != "quick":  # not what the full window says
            self.store.disk.save(job.state.prefix, job.state.suffix, job.state.params, self.tier, comps, ms)

    @staticmethod
    def _safely(hook: Callable[..., object], *args: Any) -> None:
        try:
            hook(*args)
        except Exception:  # a broken hook must not kill the engine thread
            log.exception("%s hook failed", hook.__name__)

    def _worked(self, job: Job, t0: float, c0: float, t: Timings | None = None, failed: bool = False) -> None:
        """Its wall time and the process's CPU time meanwhile (the engine's threads do nearly all of it), how it
        ended and the tokens it ran (``t``)."""
        t = t or Timings()
        self._events.put(Worked(self.tier, job.account, (time.perf_counter() - t0) * 1000, (time.process_time() - c0)
                                * 1000, job.cancel.reason or ("error" if failed else "complete"),
                                t.ran_tokens, t.decode_tokens))

    def report(self, ran: Ran, job: Job, idle: bool) -> None:
        """The status after a job: an engine error (not a stop) at once; a generation, once nothing is queued."""
        if ran.error is not None and not isinstance(ran.error, JobDropped) and ran.ms is not None:
            self.emit("ready", error=str(ran.error))
        elif ran.ms is not None and idle and ran.result is not None:
            comps = ran.result[0]
            self.emit("ready", latency_ms=ran.ms, source=comps[0].source if comps else None,
                      cancelled=job.cancel.cancelled)

    def emit(self, state: str, **info: Any) -> None:
        self.busy = state == "busy"
        self._events.put(Status(self.tier, state, info))


def identity_of(engine: Backend | None) -> Identity | None:
    """The disk cache's identity of a backend's answers (None: not loaded): another context block or prompt
    window makes other suggestions."""
    if engine is None or not engine.model_id:
        return None
    digest = engine.context_digest
    return (f"{engine.model_id}+context:{digest}" if digest else engine.model_id, *windows_of(engine))


def windows_of(engine: Backend | None) -> tuple[int, int]:
    """A backend's prompt windows (the engine's defaults while none is loaded)."""
    cfg = engine.config if engine is not None else None
    return (cfg.max_prefix_chars, cfg.max_suffix_chars) if cfg is not None else \
        (knobs.MAX_PREFIX_CHARS, knobs.MAX_SUFFIX_CHARS)
