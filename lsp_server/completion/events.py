"""The one way up from the engine threads: events on one queue, drained in order on the event loop. Nothing
on an engine thread calls into the session or the service.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Changed:
    """The store changed (a token streamed, a generation ended): waiters look again."""


@dataclass(frozen=True)
class Status:
    """A scheduler's status: "loading" | "ready" | "busy" | "error", with details."""

    tier: str
    state: str
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Idle:
    """A scheduler has been idle a while: the service may give it a warm-up."""

    tier: str


@dataclass(frozen=True)
class Worked:
    """A scheduler ran a job (Job.account) at this cost, ms: the stats' work accounting."""

    tier: str
    work: str
    wall_ms: float
    cpu_ms: float
    ended: str = "complete"  # or why it stopped first (stale, idle, diverged, superseded, ..., an error's name)
    prefilled: int = 0  # prompt tokens a forward ran (the rest were in the KV cache, or it stopped first)
    generated: int = 0


Event = Changed | Status | Idle | Worked


class Events:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handlers: dict[type, list[Callable[[Any], None]]] = {}
        self._lock = threading.Lock()
        self._scheduled = False  # a drain is on its way to the loop

    def attach_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._schedule()  # what came before the loop was known

    def on(self, kind: type, handler: Callable[[Any], None]) -> None:
        """(setup) Call ``handler(event)`` on the event loop for every event of this type."""
        self._handlers.setdefault(kind, []).append(handler)

    def put(self, event: Event) -> None:
        """(any thread) Queue an event; the event loop handles it soon."""
        self._queue.put(event)
        self._schedule()

    def _schedule(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with self._lock:
            if self._scheduled:
                return
            self._scheduled = True
        try:
            loop.call_soon_threadsafe(self.drain)
        except RuntimeError:  # closed meanwhile (shutting down)
            pass

    def drain(self) -> None:
        with self._lock:
            self._scheduled = False
        changed = False
        while True:
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(event, Changed):  # many tokens between two drains wake the waiters once
                changed = True
                continue
            self._dispatch(event)
        if changed:
            self._dispatch(Changed())

    def _dispatch(self, event: Event) -> None:
        for handler in self._handlers.get(type(event), ()):
            try:
                handler(event)
            except Exception:  # one broken handler must not stop the others
                log.exception("%s handler failed", type(event).__name__)
