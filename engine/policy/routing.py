"""Which backend answers a request, and when to retry a remote that failed. Pure functions and one small
state machine (the clock is passed in): no I/O.

Routing modes (setting ``routing``):

- ``local``: the local model answers everything (the default; no remote is contacted).
- ``hybrid``: automatic keystroke requests stay local; the request kinds named in ``remoteFor``
  (``invoked``: an explicit request; ``variants``: a pick among several suggestions; ``multiline``: a
  block) go to the remote, and fall back to the local model when it fails, is slow or is backing off.
- ``remote``: everything goes to the remote (the local model is the fallback).

A single keystroke (an automatic, single-line request) is never routed remote except in ``remote``.
"""

from __future__ import annotations

from dataclasses import dataclass

ROUTING_MODES: tuple[str, ...] = ("local", "hybrid", "remote")
REMOTE_KINDS: tuple[str, ...] = ("invoked", "variants", "multiline")

LOCAL, REMOTE = "local", "remote"


@dataclass(frozen=True)
class RouteConfig:
    mode: str = "local"
    remote_for: frozenset[str] = frozenset(REMOTE_KINDS)


def route(cfg: RouteConfig, *, invoked: bool, variants: bool, multiline: bool, remote_ready: bool) -> str:
    """``local`` | ``remote`` for one request. ``remote_ready``: a remote is configured and not
    backing off after a failure (otherwise everything is local)."""
    if cfg.mode == LOCAL or not remote_ready:
        return LOCAL
    if cfg.mode == REMOTE:
        return REMOTE
    wants = (invoked and "invoked" in cfg.remote_for) or (variants and "variants" in cfg.remote_for) or \
        (multiline and "multiline" in cfg.remote_for)
    return REMOTE if wants else LOCAL


@dataclass
class Backoff:
    """Retry a failed remote after a growing pause: ``base_s``, doubling per consecutive failure, at
    most ``cap_s``. ``ready(now)`` says whether a request may try the remote; a success resets it."""

    base_s: float = 0.5
    cap_s: float = 30.0
    failures: int = 0
    retry_at: float = 0.0
    last_error: str = ""

    def ready(self, now: float) -> bool:
        return now >= self.retry_at

    def failed(self, now: float, error: str) -> float:
        """Record a failure; returns the pause before the next try."""
        self.failures += 1
        pause = min(self.cap_s, self.base_s * 2 ** (self.failures - 1))
        self.retry_at = now + pause
        self.last_error = error
        return pause

    def succeeded(self) -> None:
        self.failures = 0
        self.retry_at = 0.0
        self.last_error = ""
