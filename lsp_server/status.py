"""The status board (``flint/status``): the model's state (loading, ready, busy, error), where the last
suggestion came from and how long it took, the capable tier's own state (``remote``), and what fed the
local model's last prompt (``context``). Written on the event loop only: the schedulers' status arrives
as events (completion/events.py). Every status goes out redacted (``redact_obj``: its messages quote remote
servers, whose error pages may repeat the API key)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from engine.backends import Backend, LocalBackend
from engine.remote.client import RemoteBackend
from lsp_server.completion.events import Status
from lsp_server.completion.jobs import reason_exc
from lsp_server.logs import redact_obj
from lsp_server.settings import Settings

NO_CONTEXT: dict[str, Any] = {"files": [], "chunks": [], "digest": ""}
# a job dropped (the document changed, a newer request, a reload, a cancel) is no failure of the tier
DROPPED = frozenset(str(reason_exc(r)) for r in ("stale", "superseded", "reload", "cancelled"))


class StatusBoard:
    def __init__(self, settings: Callable[[], Settings], engine: Callable[[str], Backend | None],
                 on_status: Callable[[dict[str, Any]], None] | None = None) -> None:
        self._settings = settings
        self._engine = engine  # a tier's backend, or None while none is loaded
        self._on_status = on_status or (lambda s: None)
        self.status: dict[str, Any] = {"state": "loading", "model": settings().model, "lastLatencyMs": None,
                                       "source": None, "message": "loading the model", "backend": None,
                                       "remote": None}
        self.ready = asyncio.Event()  # set once the model is loaded (or failed to); binds to the loop on use
        self._remote: dict[str, Any] | None = None  # kept apart: both schedulers publish the status

    def _publish(self, **changes: Any) -> None:
        st = dict(self.status)
        st.update(changes, remote=self._remote)
        self.status = redact_obj(st)
        self._on_status(self.status)

    def scheduler(self, event: Status) -> None:
        """A scheduler's status (events.Status)."""
        if event.tier == "remote":
            self._remote_event(event.state, event.info)
            return
        state, info = event.state, event.info
        eng = self._engine("local")
        changes: dict[str, Any] = {"model": (eng.model_id if eng is not None else None) or self._settings().model}
        if state == "loading":
            changes.update(state="loading", message=f"loading {self._settings().model}")
        elif state == "error":
            changes.update(state="error", message=info.get("message", "model failed to load"))
        elif state == "busy":
            changes.update(state="busy", message="generating")
        elif state == "ready":
            changes.update(state="ready", message=info.get("error") or "ready")
            if info.get("latency_ms") is not None and not info.get("cancelled"):
                changes.update(lastLatencyMs=round(info["latency_ms"], 1), source=info.get("source"),
                               backend="local")
        if changes.get("state") == "loading":
            self.ready.clear()
        elif "state" in changes:
            self.ready.set()
        self._publish(**changes)

    def _remote_event(self, state: str, info: dict[str, Any]) -> None:
        """The capable tier's part of the status (``remote``)."""
        eng = self._engine("remote")
        s = self._settings()
        model = (eng.model_id if eng is not None else None) or s.remote_url or s.capable_model
        message = {"loading": "connecting", "error": info.get("message", ""), "busy": "generating"}.get(state, "ready")
        if state == "ready" and info.get("error"):
            backoff = eng.backoff if isinstance(eng, RemoteBackend) else None
            # the remote failed only if its backoff says so (its reason is the failure's own, not that of a
            # job that failed fast behind it); a job dropped is no failure
            failed = backoff.failures > 0 if backoff is not None else info["error"] not in DROPPED
            if failed:
                pause = max(0.0, backoff.retry_at - time.monotonic()) if backoff is not None else 0.0
                why = backoff.last_error if backoff is not None and backoff.last_error else info["error"]
                state, message = "error", f"remote failed: {why}; local answers, retry in {pause:.1f} s"
        self.remote({"state": state, "model": model, "message": message})

    def remote(self, remote: dict[str, Any] | None) -> None:
        """The capable tier's state (None: there is none)."""
        self._remote = remote
        self._publish()

    def answered(self, source: str, origin: str, total_ms: float, backend: str = "local", note: str = "") -> None:
        """A suggestion went out: where it came from and how long it took."""
        via = f" ({origin} entry)" if source == "type-through" and origin == "disk" else ""
        tier = f" · {backend}" if backend != "local" else ""
        self._publish(lastLatencyMs=round(total_ms, 1), source=source, backend=backend,
                      message=f"{source}{via} in {total_ms:.0f} ms{tier}{note}",
                      context=self.context() if backend == "local" else NO_CONTEXT,
                      guidance=self.guidance() if backend == "local" and source == "model" else None)

    def context(self) -> dict[str, Any]:
        """What fed the local model's last prompt (``context``)."""
        eng = self._engine("local")
        if eng is None:
            return NO_CONTEXT
        labels = list(eng.context_labels)
        files = list(dict.fromkeys(label.split(":", 1)[0] for label in labels))
        return {"files": files, "chunks": labels, "digest": eng.context_digest}

    def guidance(self) -> dict[str, Any] | None:
        """What the monitor did in the local model's last guided generation (engine/guidance/guide.py
        ``summary``: how many picks it changed, from what to what, and why); None when off or none yet."""
        eng = self._engine("local")
        return eng.guidance_summary() if isinstance(eng, LocalBackend) and self._settings().guidance else None
