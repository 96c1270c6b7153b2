"""The scheduler's time: what it reads (``clock()``) and how its threads sleep. Tests hand the worker a fake
clock (tests/fakes.py Clock) where time is the subject, so a timing rule is checked without waiting for it."""

from __future__ import annotations

import threading
import time


class Clock:
    def __call__(self) -> float:
        return time.monotonic()

    def wait(self, waiter: threading.Condition | threading.Event, timeout: float | None) -> None:
        """Sleep until ``waiter`` is woken or ``timeout`` seconds pass (a Condition: its lock held)."""
        waiter.wait(timeout)
