"""The server's state as the protocol sees it, with no LSP types (server.py adapts to pygls).

After ruff_server's ``Session``: the event loop mutates documents and settings; each request takes a
read-only snapshot (an immutable ``str`` plus its revision). The session keeps documents, settings,
the status board, telemetry and item building; what runs when is the completion service's
(lsp_server/completion/service.py: store, schedulers, planner, race; docs/architecture.md).

Where an answer comes from, cheapest first (the ``source`` reported on items and in flint/status):

1. ``memory`` / ``type-through``: a generation already made (or streaming) for this state, or for an
   earlier state whose text the user has typed since (engine/cache/typethrough.py).
2. ``disk``: the on-disk cache shared by every server on the machine (engine/cache/disk.py).
3. ``model``: the engine. Usually already running: ``did_change`` starts the work for the cursor before
   the editor asks, and a request joins it.

Each request has a deadline: at the deadline it gets what exists (possibly a partial suggestion, or
none) and the generation goes on, so the next ask (the next keystroke) is answered from it. After a
suggestion is shown the states the user may reach next are pre-generated (engine/policy/speculation.py), and
idle time warms the KV cache for the active document. The ``speculation`` setting switches all of that
off (every request is then its own model call, with only the exact-repeat memory and the disk cache).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from engine.context.block import ContextBlock
from engine.context.workspace import Workspace
from lsp_server import convert
from lsp_server.completion import planner
from lsp_server.completion.items import Item, Suggestions, build_items, doc_position_after, stamp_latency
from lsp_server.completion.planner import (  # noqa: F401 - re-exported
    AUTOMATIC_BUDGET_S,
    INVOKED_BUDGET_S,
    JOB_BUDGET_S,
    REFRESH_WITHIN_S,
    State,
)
from lsp_server.completion.service import CompletionService
from lsp_server.completion.store import Answer
from lsp_server.completion.worker import EngineLike
from lsp_server.documents import Document, DocumentError, DocumentStore, uri_path
from lsp_server.settings import Settings
from lsp_server.stats import Shown, Stats

log = logging.getLogger(__name__)


__all__ = ["Item", "RequestError", "Session", "Suggestions", "doc_position_after", "load_remote"]


class RequestError(Exception):
    """A request the server refuses; ``code`` is the JSON-RPC / LSP error code."""

    INVALID_PARAMS = -32602
    REQUEST_FAILED = -32803
    SERVER_CANCELLED = -32802
    CONTENT_MODIFIED = -32801
    REQUEST_CANCELLED = -32800

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def load_remote(settings: Settings) -> EngineLike:
    """The capable tier for these settings: the remote server's client (asked for the name of the model
    it serves, best effort) or a second local model (``capableModel``, loaded and warmed)."""
    from engine.backends import LocalBackend, LocalSpec, load_backend
    from engine.remote.client import RemoteBackend

    cfg = settings.remote_config()
    if cfg is not None:
        backend = RemoteBackend(cfg)
        backend.probe()  # the served model's name, for the cache identity
        return backend
    if settings.capable_tier() == "capable":
        local = load_backend(LocalSpec(settings.capable_model, threads=settings.threads, kind="capable"))
        assert isinstance(local, LocalBackend)
        return local
    raise ValueError("no capable tier configured (routing with remoteUrl or capableModel)")


class Session:
    def __init__(self, load: Callable[[Settings], EngineLike], settings: Settings | None = None,
                 on_status: Callable[[dict[str, Any]], None] | None = None,
                 load_remote: Callable[[Settings], EngineLike] = load_remote,
                 on_refresh: Callable[[str, int], None] | None = None) -> None:
        self.settings = settings or Settings()
        self.encoding = convert.UTF16
        self.documents = DocumentStore()
        self.stats = Stats()
        self._loaded_key = self.settings.engine_key()
        self._on_status = on_status or (lambda s: None)
        self.status: dict[str, Any] = {"state": "loading", "model": self.settings.model, "lastLatencyMs": None,
                                       "source": None, "message": "loading the model", "backend": None,
                                       "remote": None}
        self.ready = asyncio.Event()  # set once the model is loaded (or failed to); binds to the loop on use
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ids = itertools.count(1)
        self._id_prefix = f"{os.getpid():x}"
        self.shown = Shown(self.stats)
        # speculate on didChange once the client has shown it asks for suggestions as the user types
        self.speculate = False
        self._remote_st: dict[str, Any] | None = None
        # repository context (engine/context/workspace.py): fed here on the event loop, read on the engine thread in
        # idle time (Workspace snapshots its documents under its own lock)
        self.workspace = Workspace(roots=[])
        self._context_block: ContextBlock | None = None  # the last block handed to the engine (engine thread)
        self._notify_refresh = on_refresh or (lambda uri, version: None)
        # per document: whether the answer being watched for a refresh was an automatic request's, and the
        # last refresh sent (version, when, that) — see planner.reasks_refresh
        self._watch_auto: dict[str, bool] = {}
        self._refreshed: dict[str, tuple[int, float, bool]] = {}
        self.service = CompletionService(lambda: self.settings, load, load_remote, self.documents.revision,
                                         self._engine_event, self._refresh,
                                         lambda uri: self.documents.get(uri).version, context=self._context_for)
        self.service.on_late_win = self._capable_replaced
        self.service.store.open_disk(self.settings.cache_size_mb)

    def _refresh(self, uri: str, version: int) -> None:
        self._refreshed[uri] = (version, time.monotonic(), self._watch_auto.get(uri, True))
        self._notify_refresh(uri, version)

    # ---- lifecycle ------------------------------------------------------------------------------
    @property
    def worker(self):  # the local model's scheduler (tests and the status line look at it)
        return self.service.worker

    @property
    def remote_worker(self):
        return self.service.remote_worker

    @property
    def disk(self):
        return self.service.store.disk

    def start(self) -> None:
        """Start loading the model now (process start), before the client even says hello."""
        self.service.start()

    def attach_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.service.attach_loop(loop)

    def shutdown(self) -> None:
        self.service.shutdown()
        self.stats.flush()

    def apply_settings(self, new: Settings) -> bool:
        """Adopt new settings; reload the model when its identity changed. Returns True on reload."""
        old_key = self._loaded_key
        old_cache = self.settings.cache_size_mb
        self.settings = new
        if new.cache_size_mb != old_cache:
            self.service.store.open_disk(new.cache_size_mb)
        if not self.service.sync_remote():
            self._remote_status(None)
        if new.engine_key() != old_key:
            self._loaded_key = new.engine_key()
            self.service.reload()
            return True
        return False

    def remote_ready(self) -> bool:
        return self.service.remote_ready()

    # ---- the status board -----------------------------------------------------------------------
    def _engine_event(self, tier: str, state: str, info: dict[str, Any]) -> None:
        """(a scheduler's thread) Its status, handed to the event loop."""
        if tier == "remote":
            self._remote_event(state, info)
            return
        st = dict(self.status)
        eng = self.service.engine()
        st["model"] = (eng.model_id if eng is not None else None) or self.settings.model
        if state == "loading":
            st.update(state="loading", message=f"loading {self.settings.model}")
        elif state == "error":
            st.update(state="error", message=info.get("message", "model failed to load"))
        elif state == "busy":
            st.update(state="busy", message="generating")
        elif state == "ready":
            st.update(state="ready", message=info.get("error") or "ready")
            if info.get("latency_ms") is not None and not info.get("cancelled"):
                st.update(lastLatencyMs=round(info["latency_ms"], 1), source=info.get("source"), backend="local")
        st["remote"] = self._remote_st
        self.status = st
        self._call_soon(self._status_changed, st)

    def _remote_event(self, state: str, info: dict[str, Any]) -> None:
        """The capable tier's part of the status (``remote``)."""
        eng = self.service.engine("remote")
        model = (eng.model_id if eng is not None else None) or self.settings.remote_url or self.settings.capable_model
        if state == "loading":
            self._remote_status({"state": "loading", "model": model, "message": "connecting"})
        elif state == "error":
            self._remote_status({"state": "error", "model": model, "message": info.get("message", "")})
        elif state == "busy":
            self._remote_status({"state": "busy", "model": model, "message": "generating"})
        elif state == "ready":
            err = info.get("error")
            backoff = getattr(eng, "backoff", None)
            if err:
                pause = max(0.0, backoff.retry_at - time.monotonic()) if backoff is not None else 0.0
                self._remote_status({"state": "error", "model": model,
                                     "message": f"remote failed: {err}; local answers, retry in {pause:.1f} s"})
            else:
                self._remote_status({"state": "ready", "model": model, "message": "ready"})

    def _remote_status(self, remote: dict[str, Any] | None) -> None:
        self._remote_st = remote  # kept apart: the two schedulers' threads both publish the status
        st = dict(self.status)
        st["remote"] = remote
        self.status = st
        self._call_soon(self._on_status, st)

    def _call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn`` on the event loop (from any thread)."""
        if self._loop is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(fn, *args)
            except RuntimeError:  # loop closed while shutting down
                pass

    def _status_changed(self, st: dict[str, Any]) -> None:
        if st["state"] == "loading":
            self.ready.clear()
        else:
            self.ready.set()
        self._on_status(st)

    def _answered(self, source: str, origin: str, total_ms: float, backend: str = "local",
                  note: str = "") -> None:
        """A suggestion went out: the status says where it came from and how long it took."""
        st = dict(self.status)
        via = f" ({origin} entry)" if source == "type-through" and origin == "disk" else ""
        tier = f" · {backend}" if backend != "local" else ""
        st.update(lastLatencyMs=round(total_ms, 1), source=source, backend=backend,
                  message=f"{source}{via} in {total_ms:.0f} ms{tier}{note}", remote=self._remote_st,
                  context=self.context_status() if backend == "local" else {"files": [], "chunks": [], "digest": ""})
        self.status = st
        self._on_status(st)

    def _capable_replaced(self, uri: str, ms: float) -> None:
        """(event loop) The capable tier's answer (a race's, a pause's) replaced the local one on screen."""
        name = self.service.backend_name("remote")
        st = dict(self.status)
        st.update(source="model", backend=name, remote=self._remote_st,
                  message=f"model in {ms:.0f} ms · {name} ({self.settings.routing}: replaces local)")
        self.status = st
        self._on_status(st)

    # ---- repository context ---------------------------------------------------------------------
    def set_workspace_folders(self, uris: list[str]) -> None:
        """The client's workspace folders (initialize): imports resolve to files under them."""
        roots = [p for p in (uri_path(u) for u in uris) if p is not None]
        self.workspace.set_roots(roots)
        log.debug("workspace folders: %s", [str(r) for r in roots])

    def _context_for(self, state: State | None) -> ContextBlock | None:
        """(engine thread, idle) The newest context block for the spot the user is at, or None."""
        s = self.settings
        if state is None or s.context_budget <= 0 or not s.context_sources:
            self._context_block = None
            return None
        path = uri_path(state.uri)
        text = self.workspace.text(path) if path is not None else None
        if path is None or text is None:
            return self._context_block  # not a file (untitled): keep what the engine has
        self.workspace.sources = s.context_sources
        self.workspace.checkpoint(path)  # the user paused: the edit so far becomes a recent-edit diff
        before, after = self.service.windows()  # the "file" source adds what the local model's window lacks
        block = self.workspace.gather(path, text, min(state.offset, len(text)), budget=s.context_budget,
                                      previous=self._context_block, window_before=before, window_after=after)
        self._context_block = block
        log.debug("context for %s: %s", state.uri.rsplit("/", 1)[-1],
                  ", ".join(block.labels()) if block is not None else "nothing")
        return block

    def context_status(self) -> dict[str, Any]:
        """What fed the local model's last prompt (flint/status ``context``)."""
        eng = self.service.engine()
        labels = list(getattr(eng, "context_labels", ())) if eng is not None else []
        files = list(dict.fromkeys(label.split(":", 1)[0] for label in labels))
        return {"files": files, "chunks": labels, "digest": getattr(eng, "context_digest", "") if eng else ""}

    def _feed_workspace(self, uri: str, typed: bool) -> None:
        path = uri_path(uri)
        if path is None:
            return
        try:
            text = self.documents.get(uri).text
        except DocumentError:
            return
        active = self.service.cursors.active
        if typed and active is not None and active != uri:  # the user left a document: its edit is done
            old = uri_path(active)
            if old is not None:
                self.workspace.checkpoint(old)
        self.workspace.change(path, text)

    # ---- documents ------------------------------------------------------------------------------
    def did_change(self, uri: str, cursor: int | None = None) -> None:
        """After an edit (or didOpen, ``cursor`` None): the service stops stale work and, when the client
        completes as the user types, starts the work for the spot the edit left the cursor at (a code
        point offset) now; the client's request for that spot then joins it."""
        rev = self.documents.revision(uri)
        if rev is None:
            return
        self._feed_workspace(uri, cursor is not None)
        state = None
        if cursor is not None and self.settings.enable:
            doc = self.documents.get(uri)
            if not doc.problem():
                state = self.service.state(uri, rev, doc.text, cursor, invoked=False, language=doc.language_id)
        self.service.did_change(uri, rev, state, speculate=self.speculate)

    def did_move_cursor(self, uri: str, line: int, character: int, version: int | None = None) -> bool:
        """flint/didMoveCursor (a file opened or focused, a click, a jump): the spot's work starts before the
        first keystroke there. False when nothing started (the spot already known, or ``version`` not the
        server's text: an edit is on its way). RequestError: a document not open, a position outside it."""
        doc, offset = self._locate(uri, line, character)
        if version is not None and version != doc.version:
            return False
        known = self.service.cursors.get(uri)
        if known is not None and known.revision == doc.revision and known.offset == offset \
                and self.service.cursors.active == uri:
            return False  # typing put it there (clients also report the moves an edit makes)
        if not self.settings.enable or doc.problem():
            return False
        path = uri_path(uri)
        if path is not None:
            self.workspace.focus(path)  # the context is gathered for the document the user is in
        state = self.service.state(uri, doc.revision, doc.text, offset, invoked=False, language=doc.language_id)
        self.service.did_move(uri, state)
        return True

    def _locate(self, uri: str, line: int, character: int) -> tuple[Document, int]:
        """The open document and the code point offset of a position in it (RequestError: InvalidParams)."""
        try:
            doc = self.documents.get(uri)
        except DocumentError as e:
            raise RequestError(RequestError.INVALID_PARAMS, str(e)) from None
        try:
            return doc, doc.offset_at(line, character, self.encoding)
        except convert.PositionError as e:
            raise RequestError(RequestError.INVALID_PARAMS, f"{uri}: {e}") from None

    def cursor_offset(self, uri: str) -> int | None:
        """The offset of the last cursor known in ``uri`` (a request or an edit put it there)."""
        st = self.service.cursors.get(uri)
        return st.offset if st is not None else None

    def did_close(self, uri: str) -> None:
        self.documents.close(uri)
        self._watch_auto.pop(uri, None)
        self._refreshed.pop(uri, None)
        self.service.did_close(uri)
        path = uri_path(uri)
        if path is not None:
            self.workspace.close(path)

    # ---- completion -----------------------------------------------------------------------------
    async def suggest(self, uri: str, line: int, character: int, *, invoked: bool,
                      n: int | None = None, variants: bool = False) -> Suggestions:
        """Suggestions at a position. Raises RequestError for anything the client should hear about."""
        t0 = time.perf_counter()
        since = time.monotonic()
        self.stats.count("requests")
        doc, offset = self._locate(uri, line, character)
        problem = doc.problem()
        if problem:
            raise RequestError(RequestError.REQUEST_FAILED, f"{uri}: {problem}")
        sid = f"{self._id_prefix}-{next(self._ids)}"
        cursor = doc.position_at(offset, self.encoding)
        empty = Suggestions(sid, uri, doc.version, [], "single")
        if not self.settings.enable:
            return empty
        if invoked and n is None and not variants and \
                planner.reasks_refresh(self._refreshed.pop(uri, None), doc.version, time.monotonic()):
            invoked = False  # the client asking again on flint/refresh: the automatic answer, from the store
        if not invoked:
            self.speculate = True  # this client asks on its own as the user types: worth starting early
        path = uri_path(uri)
        if path is not None:
            self.workspace.focus(path)  # asked here: the context is gathered for this document
        revision, text, version = doc.revision, doc.text, doc.version
        cursors = self.service.cursors
        old = cursors.get(uri)
        if old is not None and old.revision == revision and old.offset == offset and not invoked and n is None \
                and not variants:
            state = old  # the didChange before this request prepared this very state
        else:
            state = self.service.state(uri, revision, text, offset, invoked=invoked, n=n, variants=variants,
                                       language=doc.language_id)
        if not invoked:
            cursors.set(uri, state)
        if state.skip:
            self.stats.completed(0.0, "skip", 0)
            return empty
        eol = convert.dominant_eol(text)
        if self.settings.debounce_ms and not invoked:
            await asyncio.sleep(self.settings.debounce_ms / 1000)
            if self.documents.revision(uri) != revision:
                self.stats.count("stale")
                raise RequestError(RequestError.CONTENT_MODIFIED, "the document changed")
        log.debug("suggest %s rev %d %d:%d %s n=%d", uri, revision, line, character, state.mode, state.params.n)
        answer = await self._answer(state, since, invoked)
        if self.documents.revision(uri) != revision:
            self.stats.count("stale")
            raise RequestError(RequestError.CONTENT_MODIFIED, "the document changed")
        items = build_items(answer.comps, answer.mode, state.prefix, state.suffix, text=text, offset=offset,
                            cursor=cursor, eol=eol, starts=doc.starts, encoding=self.encoding,
                            max_lines=self.settings.max_lines,
                            backend=self.service.backend_name(answer.backend),
                            language=doc.language_id,
                            cut_below=0.0 if invoked else self.settings.confidence_cut) if answer else []
        total_ms = (time.perf_counter() - t0) * 1000
        stamp_latency(items, total_ms)
        source = items[0].source if items else None
        origin = answer.origin if answer else None
        backend = items[0].backend if items else None
        self.stats.completed(total_ms, source or "model", len(items))
        if backend is not None and backend != "local":
            self.stats.count("remote_answers")
        if answer is not None and "local fallback" in answer.note:
            self.stats.count("remote_fallbacks")
        self.shown.remember(sid, uri, [it.text for it in items])
        if items:
            self._answered(items[0].source, origin or "model", total_ms, backend or "local",
                           answer.note if answer else "")
            if self.settings.speculation and self.speculate:
                first = items[0]
                shown = first.text.replace(eol, "\n") if eol != "\n" else first.text
                replace = first.end[1] - first.start[1] if first.end[0] == first.start[0] else 0  # auto-closed
                self.service.plan_futures(state, shown, replace)
            if answer is not None and not answer.complete and self.settings.speculation:
                self._watch_auto[uri] = not invoked
                # an explicit request's other variants may need the whole prompt pass: refreshed when done
                self.service.watch_for_refresh(state, version, within=JOB_BUDGET_S if invoked else REFRESH_WITHIN_S)
        elif answer is not None and answer.quick and self.settings.speculation:
            self._watch_auto[uri] = not invoked
            self.service.follow_whole(state, version)  # nothing from the quick window: the whole one
        elif (answer is None or not answer.complete) and self.settings.speculation:
            # nothing yet at a fresh spot (the prompt is still being read): the generation goes on and
            # the client hears flint/refresh when it has something
            self._watch_auto[uri] = not invoked
            self.service.watch_for_refresh(state, version, within=JOB_BUDGET_S, greedy=invoked)
        if not invoked and self.settings.speculation and self.speculate:
            self.service.plan_pause(state, answer)  # routing "pause": the capable tier, if the user pauses here
        res = Suggestions(sid, uri, version, items, state.mode, round(total_ms, 1), source, origin, backend)
        log.info("%s %s:%d:%d %s -> %d item(s) in %.0f ms [%s%s]", "invoked" if invoked else "auto",
                 uri.rsplit("/", 1)[-1], line, character, state.mode, len(items), total_ms, source or "-",
                 f" {backend}" if backend not in (None, "local") else "")
        return res

    async def _answer(self, state: State, since: float, invoked: bool) -> Answer | None:
        try:
            return await self.service.answer(state, since, invoked)
        except asyncio.CancelledError:
            self.stats.count("cancelled")
            raise
        except RequestError:
            raise
        except Exception as e:
            raise self._map_error(e) from None

    def _map_error(self, e: BaseException) -> RequestError:
        from lsp_server.completion.worker import Cancelled, EngineUnavailable, Stale, Superseded

        if isinstance(e, RequestError):
            return e
        if isinstance(e, Stale):
            self.stats.count("stale")
            return RequestError(RequestError.CONTENT_MODIFIED, str(e))
        if isinstance(e, Superseded):
            self.stats.count("cancelled")
            return RequestError(RequestError.SERVER_CANCELLED, str(e))
        if isinstance(e, Cancelled):
            self.stats.count("cancelled")
            return RequestError(RequestError.REQUEST_CANCELLED, str(e))
        self.stats.count("errors")
        if isinstance(e, EngineUnavailable):
            return RequestError(RequestError.REQUEST_FAILED, f"Flint model unavailable: {e}")
        log.error("completion failed: %r", e)
        return RequestError(RequestError.REQUEST_FAILED, f"completion failed: {type(e).__name__}: {e}")

    # ---- telemetry (local only: stats.py) --------------------------------------------------------
    def did_show(self, sid: str, index: int) -> bool:
        return self.shown.did_show(sid, index)

    def did_accept(self, sid: str, index: int) -> bool:
        return self.shown.did_accept(sid, index, self.encoding)

    def did_partially_accept(self, sid: str, index: int, accepted_length: int) -> bool:
        return self.shown.did_partially_accept(sid, accepted_length)

    def maybe_flush_stats(self, every_s: float = 30.0) -> None:
        if time.monotonic() - self.stats.last_flush >= every_s:
            self.stats.flush()
