"""The garbage collector held off while a next-edit computation finds its first part (issue 50).

A full collection scans every tracked object with every thread stopped: with jedi's caches of a few large
modules (some 300,000 objects past what ``jedi_analyser.freeze_once`` froze) one takes 150-250 ms, and one
that falls between an edit settling and its first part delays the first offer by as much (seen on the
signature benchmark: first parts at 400-500 ms instead of 200-250 ms). So the automatic collector is off
from a computation's start until its first part is handed over (or it ends); refcounting frees as always,
and cycles wait for the next collection, which then comes soon after, when no one is waiting on it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_holds = 0
_was_enabled = True


class Hold:
    """One computation's hold: ``around(fn)`` holds the collector while ``fn`` runs, ``release()`` ends it
    early (the first part is out); releasing twice is nothing. Holds nest across threads: the collector is
    enabled again when the last is released, if it was enabled before the first."""

    def __init__(self) -> None:
        self._held = False

    def _take(self) -> None:
        global _holds, _was_enabled
        with _lock:
            if self._held:
                return
            self._held = True
            if _holds == 0:
                _was_enabled = gc.isenabled()
                gc.disable()
            _holds += 1

    def release(self) -> None:
        global _holds
        with _lock:
            if not self._held:
                return
            self._held = False
            _holds -= 1
            if _holds == 0 and _was_enabled:
                gc.enable()

    def around(self, fn: Callable[..., T]) -> Callable[..., T]:
        def held(*args: Any) -> T:
            self._take()
            try:
                return fn(*args)
            finally:
                self.release()

        return held
