"""The unit of work: a ``State`` (a cursor's text and what to generate there), the ``Job`` a scheduler runs
for it, and how a job can end. Its outcome goes one way, into the store; requests wait there, never on a job.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Protocol

from engine.text.postprocess import Mode
from engine.types import CancelToken, Completion, GenParams, Timings
from lsp_server.settings import Settings

DEFAULTS = Settings()

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
    prefix: str  # LF line breaks, windowed (engine.text.window.window_start)
    suffix: str
    mode: Mode
    params: GenParams
    skip: str | None = None  # why no automatic work is done here
    route: str = "local"  # local | remote (engine/policy/routing.py)

    def key(self) -> WorkKey:
        return self.uri, self.revision, self.prefix, self.suffix, self.params.key()

    def serves(self, other: State) -> bool:
        """Would this state's result answer ``other``? (A generation that may run the quick first window
        does not answer one that asks for the whole window: planner.whole_window.)"""
        return self.key() == other.key() and (other.params.quick_start or not self.params.quick_start)


class Life(Enum):
    """Where a job is in its life: the one thing the scheduler reads to decide whether it goes on when its
    requests leave, whether it is idle work, and whether it ended."""

    ASKED = "asked"  # requests wait for it: it stops when the last of them leaves (Ticket.release)
    BACKGROUND = "background"  # goes on with nobody waiting (speculation; let go: Ticket.detach); idle work
    AWAITED = "awaited"  # goes on: a request left with nothing and the user waits at its spot (not idle work)
    TRACKING = "tracking"  # kept running through an edit: it serves the new text (background, idle work)
    ENDED = "ended"  # its outcome is in the store


class Ask(Enum):
    """How a submission relates to the job it gets (``Work.mode``)."""

    REQUEST = "request"  # a request waits (Ticket.wait) and then lets go (release or detach)
    SPECULATE = "speculate"  # nobody asked yet: speculation, below any request
    BACKGROUND = "background"  # at a request's priority, then let go at once: it goes on as speculation
    AWAITED = "awaited"  # at a request's priority, let go at once, the user waits there: runs to its end


@dataclass(frozen=True)
class Work:
    """What a submission asks of a tier's scheduler: its time budget once it starts, not before a
    time.monotonic() (a pause, a burst); ``anew``: what the store holds for it was cut off, so the model runs;
    ``settings``: the snapshot it runs under (the engine thread reads no live settings)."""

    mode: Ask = Ask.REQUEST
    budget_s: float | None = None
    not_before: float = 0.0
    anew: bool = False
    tier: str = "local"
    settings: Settings | None = None

    @property
    def priority(self) -> int:
        return SPECULATIVE if self.mode is Ask.SPECULATE else USER


@dataclass(frozen=True)
class WarmUp:
    """Idle work (WARM): put ``context`` (a repository context block, or None) in front of prompts and, with
    ``prefill``, warm the KV cache for the job's state (else the context block only)."""

    context: Any = None
    prefill: bool = True


@dataclass(eq=False)
class Job:
    """A state to run, its priority and budget; one lifecycle value (``life``) says what becomes of it."""

    state: State
    priority: int
    seq: int
    work: Work | WarmUp = field(default_factory=Work)
    life: Life = Life.ASKED
    not_before: float = 0.0  # monotonic time before which the job does not start (a pause, a burst)
    cancel: CancelToken = field(default_factory=CancelToken)
    waiters: int = 0  # requests waiting for it (their answers come from the store)
    submitted: float = field(default_factory=time.monotonic)
    handle: Any = None  # the type-through entry its generation streams into (runner.Runner.open_entry)

    @property
    def anew(self) -> bool:
        return isinstance(self.work, Work) and self.work.anew

    @property
    def settings(self) -> Settings:
        """(the defaults for work submitted without a snapshot: tests)"""
        given = self.work.settings if isinstance(self.work, Work) else None
        return given if given is not None else DEFAULTS

    @property
    def budget_s(self) -> float | None:
        """Time allowed once the job starts (the deadline starts then: queueing or loading is free)."""
        return self.work.budget_s if isinstance(self.work, Work) else None

    @property
    def account(self) -> str:
        """What its engine time is accounted to (stats ``engine_*``, ``served.*``)."""
        return "warm" if self.priority == WARM else "variants" if self.state.params.n > 1 else "now"

    @property
    def idle_work(self) -> bool:
        """Nobody waits for it and the user does not wait at its spot: it stops once the user is idle."""
        return not self.waiters and self.life is not Life.AWAITED

    def serves(self, state: State) -> bool:
        return not self.cancel.cancelled and self.life is not Life.ENDED and self.state.serves(state)

    def join(self, other: Job) -> None:
        """``other`` is the same work: its request (if a request's) waits for this job."""
        if other.anew and isinstance(self.work, Work):
            self.work = replace(self.work, anew=True)
        if other.priority == USER:
            self.waiters += 1
            self.not_before = min(self.not_before, other.not_before)
        self.priority = min(self.priority, other.priority)

    def rebase(self, revision: int, seq: int, running: bool) -> None:
        """Kept through an edit: it serves the new revision as speculation (its requests asked about the old
        text); a running one tracks the typing from here."""
        self.state = replace(self.state, revision=revision)
        self.seq, self.waiters = seq, 0
        self.priority = max(self.priority, SPECULATIVE)
        if running:
            self.life = Life.TRACKING
        elif self.life is Life.ASKED:
            self.life = Life.BACKGROUND

    def leave(self, detach: Life | None = None) -> bool:
        """A request stops waiting; ``detach`` (BACKGROUND, or AWAITED: the user waits there) lets the job go
        on. True when it should stop: nobody waits and it was only ever a request's."""
        if self.life is Life.ENDED:
            return False
        if detach is Life.AWAITED and self.life is not Life.TRACKING:
            self.life = Life.AWAITED
        elif detach is not None and self.life is Life.ASKED:
            self.life = Life.BACKGROUND
        self.waiters = max(0, self.waiters - 1)
        if self.waiters:
            return False
        if self.life is not Life.ASKED:
            self.priority = max(self.priority, SPECULATIVE)
            return False
        return True


Result = tuple[list[Completion], Timings]


class Scheduling(Protocol):
    """What the store asks a tier's scheduler (worker.Worker): run work (None: the store's record answers
    it), and a request leaving the job it got (``seq``: the job's number then)."""

    tier: str

    def submit(self, state: State, work: Work) -> Job | None: ...

    def leave(self, job: Job | None, seq: int, detach: Life | None) -> None: ...


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
