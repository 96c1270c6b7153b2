"""Running the worker's jobs on its engine: the engine thread's part of ``Worker`` (worker.py decides
which job runs and when).

- ``_load``: the model loads on the engine thread; a failed load answers every queued job
  ``EngineUnavailable``.
- ``_run``: a job whose document moved on, or that was stopped, is answered without the model; so is one
  ``Hooks.answer`` finds in a cache filled since it was queued. Else ``engine.complete`` runs (the job's
  budget becomes its deadline), tokens stream to ``Hooks.token`` (which may stop it) and ``Hooks.finished``
  stores the result; ``kv_prompt`` says which prompt the KV cache holds whole.
- ``_warm_up``: an idle job (WARM) prefills the KV cache for a prompt without generating.
- The repository context block: ``_admit_context`` swaps a newer one in during idle time; a job for
  another document than the one it was gathered for drops it first.
- ``_emit``: status events (loading, ready, busy, error) to the worker's sink.

Nothing here imports pygls: the engine is seen through the facade in engine/engine_api.md.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from engine.backends import Backend, as_backend
from engine.types import Doubts, Timings
from lsp_server.completion.jobs import (
    SPECULATIVE,
    WARM,
    EngineLike,
    EngineUnavailable,
    EventSink,
    Hooks,
    Job,
    Result,
    Stale,
    drop,
    reason_exc,
    settle,
    stop_job,
)

# the worker's log lines keep the worker's name
log = logging.getLogger("lsp_server.completion.worker")

LATENCY_EWMA = 0.3


class Runner:
    """Mixed into ``Worker``, whose ``__init__`` sets up the state declared here."""

    _cond: threading.Condition
    _pending: dict[str, Job]
    _futures: list[Job]
    _idle_asked: bool
    _revision_of: Callable[[str], int | None]
    _on_event: EventSink
    _context: Callable[[], tuple[str | None, Any]] | None
    _context_uri: str | None
    _engine: Backend | None
    _load_error: str | None
    _busy: bool
    _memo: tuple[Job, Result] | None
    hooks: Hooks | None
    loaded: threading.Event
    jobs_run: int
    model_calls: int
    latency_s: float | None
    kv_prompt: tuple[str, str] | None

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
                for job in [*self._pending.values(), *self._futures]:
                    drop(job, EngineUnavailable(str(e)))
                self._pending.clear()
                self._futures.clear()
            self._emit("error", message=str(e))
        else:
            with self._cond:
                self._engine = as_backend(engine)
                self._load_error = None
                self.kv_prompt = None
            model_id = self._engine.model_id
            log.info("model %s ready in %.1f s", model_id, time.perf_counter() - t0)
            self._emit("ready", model=model_id, load_s=time.perf_counter() - t0)
        finally:
            self.loaded.set()

    def _run(self, job: Job) -> None:
        engine = self._engine
        if self._revision_of(job.uri) != job.revision:
            settle(job, exc=Stale("the document changed"))
            return
        if job.cancel.cancelled:
            settle(job, exc=reason_exc(job.cancel.reason))
            return
        if engine is None:
            settle(job, exc=EngineUnavailable(self._load_error or "no model loaded"))
            return
        if self._context_uri is not None and job.uri != self._context_uri and engine.context_digest:
            # the block was gathered for another document (it names that file as the current one, its
            # chunks were chosen for that file's code): none until idle time gathers one for this one
            engine.set_context(None)
            self._context_uri = None
            self.kv_prompt = None
            log.debug("context block dropped: %s is not the document it was gathered for", job.uri)
        if job.priority == WARM:
            self._warm_up(engine, job)
            return
        hooks = self.hooks
        if hooks is not None and not job.anew:
            try:
                cached = hooks.answer(job)
            except Exception:
                log.exception("answer hook failed")
                cached = None
            if cached is not None:  # filled since the job was queued (a generation typed through, disk)
                log.debug("job %d answered without the model", job.seq)
                settle(job, result=cached)
                with self._cond:
                    idle = not self._pending
                if idle and self._busy:  # the generation before this job left the status at "busy"
                    self._emit("ready")
                return
        self._emit("busy", uri=job.uri)
        t0 = time.perf_counter()
        job.started = time.monotonic()
        log.debug("job %d start (%s): %s rev %d, waited %.0f ms", job.seq, job.kind, job.uri, job.revision,
                  (time.monotonic() - job.submitted) * 1000)
        params = job.params
        if job.budget_s is not None:
            params = replace(params, deadline=time.monotonic() + job.budget_s)
        on_token = None
        if hooks is not None:
            try:
                hooks.started(job)
            except Exception:
                log.exception("started hook failed")
            on_token = partial(self._on_token, job)
        result: Result | None = None
        try:
            result = engine.complete(job.prefix, job.suffix, params, cancel=job.cancel, on_token=on_token)
        except Exception as e:
            if getattr(e, "quiet", False):  # an expected failure (a remote server down): one line
                log.warning("%s: %s", type(e).__name__, e)
            else:
                log.exception("engine.complete failed")
            settle(job, exc=e)
            self._emit("ready", error=str(e))
            return
        finally:
            self.jobs_run += 1
            self.model_calls += 1
            # the KV cache holds this prompt's full window only when the engine did not serve it from its
            # quick first window (then idle time warms the full one: hooks.idle)
            full = result is not None and getattr(result[1], "window", "full") == "full"
            self.kv_prompt = (job.prefix, job.suffix) if full and not job.cancel.cancelled else None
            if hooks is not None:
                try:
                    hooks.finished(job, result, (time.perf_counter() - t0) * 1000)
                except Exception:
                    log.exception("finished hook failed")
        ms = (time.perf_counter() - t0) * 1000
        t = result[1] if result is not None else None
        log.debug("job %d done in %.0f ms (%s)%s", job.seq, ms, job.cancel.reason or "complete",
                  f": {t.window} window, {t.prompt_tokens - t.reused_tokens} of {t.prompt_tokens} prompt tokens "
                  f"run in {t.prefill_ms:.0f} ms, {t.decode_tokens} generated" if isinstance(t, Timings) else "")
        if not job.cancel.cancelled and job.priority <= SPECULATIVE:
            first = (job.first_line or time.monotonic()) - job.started
            self.latency_s = first if self.latency_s is None else \
                (1 - LATENCY_EWMA) * self.latency_s + LATENCY_EWMA * first
        if self._revision_of(job.uri) != job.revision:
            settle(job, exc=Stale("the document changed"))
        elif job.cancel.cancelled:
            settle(job, exc=reason_exc(job.cancel.reason))
        else:
            with self._cond:
                self._memo = (job, result)
            settle(job, result=result)
        with self._cond:
            idle = not self._pending
        if idle:
            comps = result[0]
            self._emit("ready", latency_ms=ms, source=comps[0].source if comps else None,
                       cancelled=job.cancel.cancelled)

    def _on_token(self, job: Job, index: int, text: str, doubts: Doubts = ()) -> None:
        if job.first_line is None and "\n" in text.lstrip("\n"):
            job.first_line = time.monotonic()
        hooks = self.hooks
        if hooks is not None and not job.cancel.cancelled:
            try:
                if not hooks.token(job, index, text, doubts):
                    stop_job(job, "diverged")  # the user typed something else: the text is useless now
            except Exception:
                log.exception("token hook failed")

    def _warm_up(self, engine: Backend, job: Job) -> None:
        if self.kv_prompt == (job.prefix, job.suffix):
            return
        t0 = time.perf_counter()
        try:
            if not engine.prefill(job.prefix, job.suffix, job.cancel):
                return  # nothing to warm (a remote server)
        except Exception:
            log.exception("warm-up failed")
            return
        self.jobs_run += 1
        if not job.cancel.cancelled:
            self.kv_prompt = (job.prefix, job.suffix)
        log.debug("warmed %s in %.0f ms%s", job.uri, (time.perf_counter() - t0) * 1000,
                  " (interrupted)" if job.cancel.cancelled else "")

    def _admit_context(self) -> bool:
        """(lock held, idle) Swap in the newest repository context block when it differs from the backend's:
        the warm-up that follows prefills block + window, so a keystroke never pays for the block. The lock
        is let go while the block is gathered (file reads, parsing); False when activity arrived meanwhile."""
        source, engine = self._context, self._engine
        if source is None or engine is None:
            return True
        self._cond.release()
        try:
            uri, block = source()
            if engine.set_context(block):  # (the engine tells a new block from the one it holds)
                self.kv_prompt = None  # the KV holds no prompt with the new block yet: warm it
                log.debug("context block %s admitted", engine.context_digest or "(none)")
            self._context_uri = uri if engine.context_digest else None
        except Exception:
            log.exception("context source failed")
        finally:
            self._cond.acquire()
        return self._idle_asked

    def _emit(self, state: str, **info: Any) -> None:
        self._busy = state == "busy"
        try:
            self._on_event(state, info)
        except Exception:  # a broken sink must not kill the engine thread
            log.exception("status event handler failed")
