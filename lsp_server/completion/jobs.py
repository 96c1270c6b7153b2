"""Jobs: the unit of work the scheduler (worker.py) runs, its priorities, and how it can end.

A job is one generation (or an idle warm-up) for one document state. Its waiters' futures are settled
exactly once (``settle``): a result, or one of the exceptions below.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from engine.types import CancelToken, Completion, Doubts, GenParams, Timings

USER = 0
SPECULATIVE = 1  # a document's current state, before (or without) the editor asking
FUTURE = 2  # a state the user may reach next (a suggestion accepted)
WARM = 3  # idle time: the KV cache for the active document


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


# what a loader may return: a Backend, or a bare engine that as_backend wraps as a local one
EngineLike = Any


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
    not_before: float = 0.0  # monotonic time before which the job does not start (debounce)
    speculative: bool = False  # created as speculation: when its user waiters leave, it goes on
    released: bool = False  # a waiter let go without stopping it
    awaited: bool = False  # let go by a request that got nothing: the user waits there for its result
    tracking: bool = False  # kept running after its document changed: it serves the new text
    anew: bool = False  # what the store holds for this state was cut off: the model writes it again
    handle: Any = None  # the hooks' own state for this job (the type-through entry)
    started: float | None = None
    first_line: float | None = None  # when its first complete line streamed

    def same_work(self, other: Job) -> bool:
        """Would this job's result answer ``other``? (A job that may run the quick first window does not
        answer one that asks for the whole window: planner.whole_window.)"""
        return (self.uri == other.uri and self.revision == other.revision and self.params.key() == other.params.key()
                and self.prefix == other.prefix and self.suffix == other.suffix
                and (other.params.quick_start or not self.params.quick_start))

    @property
    def kind(self) -> str:
        return {USER: "now", SPECULATIVE: "now", FUTURE: "future", WARM: "warm"}[self.priority]


Result = tuple[list[Completion], Timings]
# on_event(state, info): "loading" | "ready" | "busy" | "error", called from the worker thread
EventSink = Callable[[str, dict[str, Any]], None]
# keep(job, running) -> bool: does this job of an older revision still serve the document's new text?
Keep = Callable[[Job, bool], bool]


class Hooks(Protocol):
    """What the session plugs into the worker (all called on the engine thread)."""

    def answer(self, job: Job) -> Result | None: ...

    def started(self, job: Job) -> None: ...

    def token(self, job: Job, index: int, text: str, doubts: Doubts = ()) -> bool: ...

    def finished(self, job: Job, result: Result | None, ms: float) -> None: ...

    def idle(self, kv: tuple[str, str] | None) -> tuple[str, int, str, str] | None: ...


def stop_job(job: Job, reason: str) -> None:
    """Stop a job; the first reason sticks (a stale job superseded afterwards is still stale)."""
    if not job.cancel.cancelled:
        job.cancel.cancel(reason)


def settle(job: Job, result: Result | None = None, exc: BaseException | None = None) -> None:
    """Answer the job's waiters (its result, or ``exc``); they leave it, so none is answered twice."""
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


def drop(job: Job, exc: BaseException) -> None:
    """Stop a job and answer its waiters with ``exc``."""
    stop_job(job, type(exc).__name__.lower())
    settle(job, exc=exc)


def from_memory(result: Result) -> Result:
    comps, timings = result
    return [replace(c, source="memory", ttft_ms=0.0, total_ms=0.0) for c in comps], timings


def reason_exc(reason: str) -> BaseException:
    if reason == "stale":
        return Stale("the document changed")
    if reason in ("superseded", "preempted", "diverged"):
        return Superseded("a newer request for this document replaced it")
    if reason in ("shutdown",):
        return EngineUnavailable("the server is shutting down")
    if reason == "reload":
        return Superseded("the model is being reloaded")
    return Cancelled(reason or "cancelled")
