"""Which backend answers a request, when a capable answer may replace a local one, and when to retry a
remote that failed. Pure functions and one small state machine (the clock is passed in): no I/O.

Routing modes (setting ``routing``):

- ``local``: the local model answers everything (the default; no remote is contacted).
- ``hybrid``: automatic keystroke requests stay local; the request kinds named in ``remoteFor``
  (``invoked``: an explicit request; ``variants``: a pick among several suggestions; ``multiline``: a
  block) go to the remote, and fall back to the local model when it fails, is slow or is backing off.
- ``remote``: everything goes to the remote (the local model is the fallback).
- ``pause``: the local model answers every request; where the user pauses (about twice their usual
  keystroke interval after an automatic answer went out), the capable tier writes the suggestion for
  that spot, and it takes the local one's place when it has something to show (``pause_accepts``). A
  keystroke stops that work: the capable model never runs while the user types.

A single keystroke (an automatic, single-line request) is never routed remote except in ``remote``.
"""

from __future__ import annotations

from dataclasses import dataclass

ROUTING_MODES: tuple[str, ...] = ("local", "hybrid", "remote", "pause")
REMOTE_KINDS: tuple[str, ...] = ("invoked", "variants", "multiline")

LOCAL, REMOTE, PAUSE = "local", "remote", "pause"


@dataclass(frozen=True)
class RouteConfig:
    mode: str = "local"
    remote_for: frozenset[str] = frozenset(REMOTE_KINDS)


def route(cfg: RouteConfig, *, invoked: bool, variants: bool, multiline: bool, remote_ready: bool) -> str:
    """``local`` | ``remote`` for one request. ``remote_ready``: a remote is configured and not
    backing off after a failure (otherwise everything is local)."""
    if cfg.mode in (LOCAL, PAUSE) or not remote_ready:
        return LOCAL  # (pause: the capable tier works after the answer, lsp_server/completion/requests/capable.py)
    if cfg.mode == REMOTE:
        return REMOTE
    wants = (invoked and "invoked" in cfg.remote_for) or (variants and "variants" in cfg.remote_for) or \
        (multiline and "multiline" in cfg.remote_for)
    return REMOTE if wants else LOCAL


def pause_accepts(shown: str | None, capable: str | None) -> bool:
    """May the capable tier's suggestion, written at a pause, replace the one on screen?

    Yes also when it says something else: the user has stopped, the capable model is the better judge of
    what comes next, and the pause is where a suggestion is read.
    No when it has nothing to show, or when it is what the user already sees."""
    if not capable or not capable.strip():
        return False
    return shown is None or capable.rstrip() != shown.rstrip()


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
