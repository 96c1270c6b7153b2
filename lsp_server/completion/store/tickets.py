"""A request's one handle on the work it submitted (``Store.submit``): ``wait``, then ``release`` (the job
stops unless it goes on anyway) or ``detach`` (it goes on for the next ask), once; and what it gets, an ``Answer``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from engine.cache.typethrough import Entry
from engine.text.postprocess import Mode
from engine.types import Completion
from lsp_server.completion.jobs import Job, Life, Result, Scheduling, State, Superseded
from lsp_server.completion.policy.planner import Waiting

R = TypeVar("R")
# what wakes a waiter besides the store's changes: a time (time.monotonic()), or something to await
Alarm = float | Awaitable[object] | None


@dataclass
class Answer:
    comps: list[Completion]  # raw text at the state's cursor
    source: str
    mode: Mode
    complete: bool  # nothing more is coming for it
    origin: str = "model"
    backend: str = "local"
    note: str = ""  # said in the status message (a fallback)
    # an empty answer made from the engine's quick first window: the whole window may have a line there
    # (a request that may wait asks again with GenParams.quick_start off: planner.whole_window)
    quick: bool = False
    entry: Entry | None = None  # the generation it was made from (the work accounting: Entry.served)


@dataclass
class Record:
    """One unit of work for one scheduler tier: the job serving it now (``seq``) and how it ended."""

    seq: int
    state: State  # the job's own state (whether it may run the quick window)
    ended: bool = False
    result: Result | None = None
    error: BaseException | None = None
    at: float = 0.0  # when it ended (time.monotonic())
    entry: Entry | None = None  # the type-through entry its job wrote (None: speculation off, remote hidden)


@dataclass
class Waited:
    """What ``Ticket.wait`` came back with, and why: "ended" (the work ended: its answer), "found" (the
    store had one worth showing), "accepted" (the caller's own early answer), "deadline" (nothing)."""

    answer: Answer | None
    why: str


class Reads(Protocol):
    """What a ticket reads of the store (store.Store)."""

    def outcome(self, tier: str, state: State) -> Record | None: ...

    def mode_for(self, state: State, entry: Entry | None) -> Mode: ...

    def lookup(self, state: State, since: float | None, *, partial: bool, disk: bool = True,
               backend: str | None = None) -> Answer | None: ...

    async def wait(self, look: Callable[[float], R | None], deadline: float,
                   alarms: Sequence[Alarm] = ()) -> R | None: ...


class Ticket:
    def __init__(self, store: Reads, state: State, tier: str | None, scheduler: Scheduling | None,
                 job: Job | None) -> None:
        self.state = state
        self.tier = tier  # whose record answers it (None: nothing was submitted, it only reads the store)
        self._store = store
        self._scheduler = scheduler  # None once let go (or never held)
        self._job, self._seq = job, job.seq if job is not None else -1

    @property
    def submitted(self) -> bool:
        return self.tier is not None

    async def wait(self, plan: Waiting, accept: Callable[[], Answer | None] | None = None,
                   stop: asyncio.Event | None = None) -> Waited:
        """The state's answer by ``plan.deadline``: the submitted work's end (or its error raised); with
        ``plan.partial_after``, a complete, typed-through or disk answer at once, what has streamed after it;
        ``accept()``, the caller's own early answer; ``stop`` set (a newer request): Superseded."""
        state, since, tier = self.state, plan.since, self.tier
        backend = "remote" if tier == "remote" else None
        show_at = since + plan.partial_after if plan.partial_after is not None else None

        def look(now: float) -> Waited | None:
            done = self._store.outcome(tier, state) if tier is not None else None
            if done is not None:
                if done.error is not None:
                    raise done.error
                return Waited(self.final(since, done, backend), "ended")
            if show_at is not None:
                late = now >= show_at or now >= plan.deadline
                found = self._store.lookup(state, since, partial=late and now >= since + plan.whole_lines_s,
                                           disk=False, backend=backend)
                if found is not None and (found.complete or found.source in ("type-through", "disk") or late):
                    return Waited(found, "found")
            early = accept() if accept is not None else None
            if early is not None:
                return Waited(early, "accepted")
            if stop is not None and stop.is_set():
                raise Superseded("a newer request for this document replaced it")
            return None

        whole_until = since + plan.whole_lines_s if plan.whole_lines_s else None  # no wake-up when there is no wait
        alarms: list[Alarm] = [show_at, whole_until, stop.wait() if stop is not None else None]
        return await self._store.wait(look, plan.deadline, alarms) or Waited(None, "deadline")

    def final(self, since: float, done: Record, backend: str | None = None) -> Answer:
        """The finished work's answer (made before the request came: memory; empty from the quick window: so
        marked, the whole window may have a line)."""
        state = self.state
        comps, timings = done.result or ([], None)
        if state.params.quick_start and timings is not None and timings.window == "quick":
            again = self._store.lookup(state, since, partial=False, disk=False, backend=backend)
            if again is not None and again.quick:
                return again
        if done.at < since:  # asked again for what was just computed
            comps = [replace(c, source="memory", ttft_ms=0.0, total_ms=0.0) for c in comps]
        source = comps[0].source if comps else "model"
        return Answer(comps, source, self._store.mode_for(state, None), complete=True,
                      origin="disk" if source == "disk" else "model", backend=self.tier or "local", entry=done.entry)

    def release(self) -> None:
        """The request is gone (the client cancelled it): its job stops unless it goes on anyway."""
        self._leave(None)

    def detach(self, awaited: bool = False) -> None:
        """The request leaves, its job goes on (``awaited``: the user still waits there: not idle work)."""
        self._leave(Life.AWAITED if awaited else Life.BACKGROUND)

    def _leave(self, detach: Life | None) -> None:
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            scheduler.leave(self._job, self._seq, detach)
