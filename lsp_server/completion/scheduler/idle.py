"""Idle time on one scheduler: the watchdog that stops background work once the user has gone, and the
warm-up (a WARM job: the context block, then the active spot's KV). Neither is on a keystroke's path."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from engine.backends import Backend
from lsp_server.completion.jobs import Job, WarmUp, stop_job
from lsp_server.completion.scheduler.jobqueue import JobQueue

log = logging.getLogger(__name__)


class Watchdog:
    """Stops background work ``knobs.IDLE_WORK_S`` after the user's last action, on its own thread (the engine
    thread is inside the model), so the CPU goes idle soon after the user does."""

    def __init__(self, cond: threading.Condition, queue: JobQueue, wake: threading.Event,
                 stopping: Callable[[], bool]) -> None:
        self._cond, self._q, self._wake, self._stopping = cond, queue, wake, stopping
        self._thread = threading.Thread(target=self._watch, name="flint-idle-watchdog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _watch(self) -> None:
        while True:
            with self._cond:
                if self._stopping():
                    return
                r = self._q.running
                due = self._q.idle_from()
                if r is not None and r.idle_work and not r.cancel.cancelled and self._q.clock() >= due:
                    log.debug("job %d stopped: the user is idle", r.seq)
                    stop_job(r, "idle")
                    r = None
                self._wake.clear()
            if r is None or r.cancel.cancelled or not r.idle_work:  # woken: a job starts, a waiter leaves
                self._q.clock.wait(self._wake, None)
            else:
                self._q.clock.wait(self._wake, max(0.01, due - self._q.clock()))


class IdleWork:
    """(engine thread) A warm-up: its context block first (a new block invalidates the KV), then the spot's
    full window unless the KV holds it already."""

    def __init__(self, identify: Callable[[Backend], None], worked: Callable[..., None]) -> None:
        self._identify = identify
        self._worked = worked
        self.context_uri: str | None = None  # the document the backend's context block was gathered for

    def warm(self, engine: Backend, job: Job, warm_up: WarmUp) -> None:
        try:
            if engine.set_context(warm_up.context):  # (the engine tells a new block from the one it holds)
                log.debug("context block %s admitted", engine.context_digest or "(none)")
                self._identify(engine)  # another block: other disk entries
            self.context_uri = job.state.uri if engine.context_digest else None
        except Exception:
            log.exception("admitting the context block failed")
        if not warm_up.prefill:
            return
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            if (t := engine.prefill(job.state.prefix, job.state.suffix, job.cancel)) is None:
                return  # nothing to warm (a remote server, or the KV holds the window already)
        except Exception:
            log.exception("warm-up failed")
            return
        self._worked(job, t0, c0, t)
        log.debug("warmed %s in %.0f ms%s", job.state.uri, (time.perf_counter() - t0) * 1000,
                  " (interrupted)" if job.cancel.cancelled else "")

    def drop_context(self, engine: Backend, uri: str) -> None:
        """A job for another document than the block's (chosen for that file's code): none until idle time
        gathers one for this one."""
        engine.set_context(None)
        self.context_uri = None
        self._identify(engine)
        log.debug("context block dropped: %s is not the document it was gathered for", uri)
