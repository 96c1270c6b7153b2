"""The unit of work: a ``State`` (a document's text around a cursor and what to generate there), the
``Job`` the scheduler (worker.py) runs for it (the state plus priority and budget), and how a job can end.

A job's outcome travels one way: the scheduler writes it into the store (store.py, through ``Hooks``):
the tokens as they stream, then how it ended (finished with a result, or dropped: one of the exceptions
below). Requests wait on the store (``Store.wait``), never on the job.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from engine.text.postprocess import Mode
from engine.types import CancelToken, Completion, Doubts, GenParams, Timings

USER = 0  # a request waits for it
SPECULATIVE = 1  # a document's current state, before (or without) the editor asking
WARM = 2  # idle time: the KV cache for the active document


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


# (uri, revision, prefix, suffix, GenParams.key()): work that gives the same result
WorkKey = tuple[str, int, str, str, tuple]


@dataclass(frozen=True)
class State:
    """A document's text around a cursor, as the engine will see it, and what to generate there."""

    uri: str
    revision: int
    offset: int
    prefix: str  # LF line breaks, windowed (engine.policy.speculation.window_start)
    suffix: str
    mode: Mode
    params: GenParams
    skip: str | None = None  # why no automatic work is done here
    route: str = "local"  # local | remote | race (engine/policy/routing.py)

    def key(self) -> WorkKey:
        return self.uri, self.revision, self.prefix, self.suffix, self.params.key()

    def serves(self, other: State) -> bool:
        """Would this state's result answer ``other``? (A generation that may run the quick first window
        does not answer one that asks for the whole window: planner.whole_window.)"""
        return self.key() == other.key() and (other.params.quick_start or not self.params.quick_start)

    def at(self, prefix: str, suffix: str) -> State:
        return replace(self, prefix=prefix, suffix=suffix)


@dataclass(eq=False)
class Job:
    """A state to run, with its priority and budget, and the scheduler's bookkeeping about it."""

    state: State
    priority: int
    seq: int
    budget_s: float | None = None  # the deadline starts when the job starts (queueing or loading is free)
    not_before: float = 0.0  # monotonic time before which the job does not start (a pause, a burst)
    anew: bool = False  # what the store holds for this state was cut off: the model writes it again
    speculative: bool = False  # when its waiting requests leave, it goes on
    admit_context: bool = False  # WARM: put ``context`` (a repository context block, or None) in front of
    context: Any = None  # prompts first
    prefill: bool = True  # WARM: prefill the KV cache for the state (else the context block only)
    cancel: CancelToken = field(default_factory=CancelToken)
    waiters: int = 0  # requests waiting for it (their answers come from the store)
    submitted: float = field(default_factory=time.monotonic)
    released: bool = False  # a waiter let go without stopping it
    awaited: bool = False  # let go by a request that got nothing: the user waits there for its result
    tracking: bool = False  # kept running after its document changed: it serves the new text
    ended: bool = False  # its outcome is in the store
    handle: Any = None  # the hooks' own state for this job (the type-through entry)
    started: float | None = None
    first_line: float | None = None  # when its first complete line streamed

    @property
    def uri(self) -> str:
        return self.state.uri

    @property
    def revision(self) -> int:
        return self.state.revision

    @property
    def prefix(self) -> str:
        return self.state.prefix

    @property
    def suffix(self) -> str:
        return self.state.suffix

    @property
    def params(self) -> GenParams:
        return self.state.params

    @property
    def kind(self) -> str:
        return {USER: "now", SPECULATIVE: "now", WARM: "warm"}[self.priority]

    @property
    def work(self) -> str:
        """What the engine time goes to, for the accounting (stats ``engine_*`` and ``served.*``): the job
        kind, or "variants" for a batch of several."""
        return "variants" if self.params.n > 1 and self.priority != WARM else self.kind

    def serves(self, state: State) -> bool:
        return not self.cancel.cancelled and not self.ended and self.state.serves(state)

    def join(self, other: Job) -> None:
        """``other`` is the same work: its request (if a request's) waits for this job."""
        self.anew = self.anew or other.anew
        if other.priority == USER:
            self.waiters += 1
            self.not_before = min(self.not_before, other.not_before)
        self.priority = min(self.priority, other.priority)

    def rebase(self, revision: int, seq: int) -> None:
        """Kept through an edit: the job serves the document's new revision now, as speculation (its
        requests asked about the old text)."""
        self.state = replace(self.state, revision=revision)
        self.seq, self.waiters, self.speculative = seq, 0, True
        self.priority = max(self.priority, SPECULATIVE)

    def leave(self, release: bool = False, awaited: bool = False) -> bool:
        """A request stops waiting for this job (``release``: without stopping it; ``awaited``: it got
        nothing, the user still waits there). True when the job should stop: nobody waits any more and it
        was only ever a request's (speculation a request had joined, or a job let go, goes on)."""
        if release:
            self.released = True
            self.awaited = self.awaited or awaited
        self.waiters = max(0, self.waiters - 1)
        if self.waiters:
            return False
        if self.speculative or self.released:
            self.priority = max(self.priority, SPECULATIVE)
            return False
        return True


Result = tuple[list[Completion], Timings]
# keep(job, running, current) -> bool: does this job of an older revision still serve the document's new
# state ``current``?
Keep = Callable[[Job, bool, State], bool]


class Hooks(Protocol):
    """What the scheduler writes through (hooks.StoreHooks). ``queued`` and ``ended`` are called with the
    scheduler's lock held; the others on its engine thread."""

    def queued(self, job: Job) -> None: ...

    def repeat(self, job: Job) -> bool: ...

    def answer(self, job: Job) -> Result | None: ...

    def started(self, job: Job) -> None: ...

    def token(self, job: Job, index: int, text: str, doubts: Doubts = ()) -> None: ...

    def finished(self, job: Job, result: Result | None, ms: float) -> None: ...

    def ended(self, job: Job, result: Result | None, error: BaseException | None) -> None: ...

    def keep(self, job: Job, running: bool, current: State) -> bool: ...

    def forget(self) -> None: ...


def stop_job(job: Job, reason: str) -> None:
    """Stop a job; the first reason sticks (a stale job superseded afterwards is still stale)."""
    if not job.cancel.cancelled:
        job.cancel.cancel(reason)


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
