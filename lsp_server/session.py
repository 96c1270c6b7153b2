"""All of the server's mutable state and request logic, with no LSP types (server.py adapts to pygls).

After ruff_server's ``Session``: the event loop mutates documents and settings; each request takes a
read-only snapshot (an immutable ``str`` plus its revision), posts work to the one engine thread and
turns the raw model text into suggestions with engine/postprocess.py.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.postprocess import Mode, decide_mode, postprocess, split_cursor
from engine.types import GenParams

from . import convert
from .documents import DocumentError, DocumentStore
from .settings import Settings
from .stats import Stats
from .worker import SPECULATIVE, USER, EngineLike, Worker

log = logging.getLogger(__name__)

# Text around the cursor handed to the engine. The engine windows its prompt much tighter (see
# engine.EngineConfig.max_prefix_chars); this only bounds the strings copied per keystroke.
WINDOW_PREFIX_CHARS = 32_768
WINDOW_SUFFIX_CHARS = 8_192
# Time budgets (the engine returns what it has at the deadline). Automatic requests are what the user
# waits on while typing; an explicit request or a variants pick can take longer.
AUTOMATIC_BUDGET_S = 2.5
INVOKED_BUDGET_S = 6.0
SINGLE_LINE_TOKENS = 48
TOKENS_PER_LINE = 24
MAX_TOKENS = 256
REMEMBERED_COMPLETIONS = 256  # ids kept for didShow / didAccept


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


@dataclass
class Item:
    index: int
    text: str  # with the document's line breaks
    start: tuple[int, int]  # LSP position (negotiated units)
    end: tuple[int, int]
    ttft_ms: float
    total_ms: float
    source: str
    tokens: int


@dataclass
class Suggestions:
    id: str
    uri: str
    version: int
    items: list[Item]
    mode: str
    total_ms: float = 0.0  # request to response, as the user saw it
    source: str | None = None


@dataclass
class _Record:
    uri: str
    texts: list[str]
    shown: set[int] = field(default_factory=set)
    accepted: bool = False


class Session:
    def __init__(self, load: Callable[[Settings], EngineLike], settings: Settings | None = None,
                 on_status: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.settings = settings or Settings()
        self.encoding = convert.UTF16
        self.documents = DocumentStore()
        self.stats = Stats()
        self._load = load
        self._loaded_key = self.settings.engine_key()
        self._on_status = on_status or (lambda s: None)
        self.status: dict[str, Any] = {"state": "loading", "model": self.settings.model, "lastLatencyMs": None,
                                       "source": None, "message": "loading the model"}
        self.ready = asyncio.Event()  # set once the model is loaded (or failed to); binds to the loop on use
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ids = itertools.count(1)
        self._id_prefix = f"{os.getpid():x}"
        self._records: OrderedDict[str, _Record] = OrderedDict()
        # speculate on didChange once the client has shown it asks for suggestions as the user types
        self.speculate = False
        self.worker = Worker(lambda: load(self.settings), self.documents.revision, self._worker_event)

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Start loading the model now (process start), before the client even says hello."""
        self.worker.start()

    def attach_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def shutdown(self) -> None:
        self.worker.stop()
        self.stats.flush()

    def apply_settings(self, new: Settings) -> bool:
        """Adopt new settings; reload the model when its identity changed. Returns True on reload."""
        old_key = self._loaded_key
        self.settings = new
        if new.engine_key() != old_key:
            self._loaded_key = new.engine_key()
            self.worker.reload(lambda: self._load(self.settings))
            return True
        return False

    def _worker_event(self, state: str, info: dict[str, Any]) -> None:
        """From the engine thread: update the status and hand it to the event loop."""
        st = dict(self.status)
        engine = self.worker.engine
        st["model"] = getattr(engine, "model_id", None) or self.settings.model
        if state == "loading":
            st.update(state="loading", message=f"loading {self.settings.model}")
        elif state == "error":
            st.update(state="error", message=info.get("message", "model failed to load"))
        elif state == "busy":
            st.update(state="busy", message="generating")
        elif state == "ready":
            st.update(state="ready", message=info.get("error") or "ready")
            if info.get("latency_ms") is not None and not info.get("cancelled"):
                st.update(lastLatencyMs=round(info["latency_ms"], 1), source=info.get("source"))
        self.status = st
        if self._loop is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._status_changed, st)
            except RuntimeError:  # loop closed while shutting down
                pass

    def _status_changed(self, st: dict[str, Any]) -> None:
        if st["state"] == "loading":
            self.ready.clear()
        else:
            self.ready.set()
        self._on_status(st)

    # ---- documents ------------------------------------------------------------------------------
    def did_change(self, uri: str, cursor: int | None = None) -> None:
        """After an edit: stop stale work, and when the client completes as the user types, start the
        generation for the spot the edit left the cursor at (``cursor``, a code point offset) now; the
        client's request for that spot joins it instead of starting from zero."""
        rev = self.documents.revision(uri)
        if rev is None:
            return
        self.worker.document_changed(uri, rev)
        if cursor is None or not self.speculate or not self.settings.enable:
            return
        doc = self.documents.get(uri)
        if doc.problem():
            return
        work = self._prepare(doc.text, cursor, invoked=False)
        if work is not None:
            prefix, suffix, _, params, budget = work
            self.worker.submit(uri, rev, prefix, suffix, params, SPECULATIVE, budget_s=budget)

    def did_close(self, uri: str) -> None:
        self.documents.close(uri)
        self.worker.document_closed(uri)

    # ---- completion -----------------------------------------------------------------------------
    async def suggest(self, uri: str, line: int, character: int, *, invoked: bool,
                      n: int | None = None) -> Suggestions:
        """Suggestions at a position. Raises RequestError for anything the client should hear about."""
        t0 = time.perf_counter()
        self.stats.count("requests")
        try:
            doc = self.documents.get(uri)
        except DocumentError as e:
            raise RequestError(RequestError.INVALID_PARAMS, str(e)) from None
        problem = doc.problem()
        if problem:
            raise RequestError(RequestError.REQUEST_FAILED, f"{uri}: {problem}")
        try:
            offset = doc.offset_at(line, character, self.encoding)
        except convert.PositionError as e:
            raise RequestError(RequestError.INVALID_PARAMS, f"{uri}: {e}") from None
        sid = f"{self._id_prefix}-{next(self._ids)}"
        cursor = doc.position_at(offset, self.encoding)
        empty = Suggestions(sid, uri, doc.version, [], "single")
        if not self.settings.enable:
            return empty
        if not invoked:
            self.speculate = True  # this client asks on its own as the user types: worth starting early
        revision, text, version = doc.revision, doc.text, doc.version
        work = self._prepare(text, offset, invoked=invoked, n=n)
        if work is None:
            self.stats.completed(0.0, "skip", 0)
            return empty
        prefix, suffix, mode, params, budget = work
        eol = convert.dominant_eol(text)
        if self.settings.debounce_ms and not invoked:
            await asyncio.sleep(self.settings.debounce_ms / 1000)
            if self.documents.revision(uri) != revision:
                self.stats.count("stale")
                raise RequestError(RequestError.CONTENT_MODIFIED, "the document changed")
        log.debug("suggest %s rev %d %d:%d %s n=%d", uri, revision, line, character, mode, params.n)
        future = self.worker.submit(uri, revision, prefix, suffix, params, USER, budget_s=budget)
        try:
            completions, timings = await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            self.stats.count("cancelled")
            raise
        except Exception as e:
            raise self._map_error(e) from None
        if self.documents.revision(uri) != revision:
            self.stats.count("stale")
            raise RequestError(RequestError.CONTENT_MODIFIED, "the document changed")
        items: list[Item] = []
        seen: set[tuple[str, int]] = set()
        for c in completions:
            truncated = c.finish_reason in ("length", "deadline", "cancelled")
            sug = postprocess(c.text, prefix, suffix, mode=mode, max_lines=self.settings.max_lines,
                              truncated=truncated)
            if sug is None or (sug.text, sug.replace) in seen:
                continue
            seen.add((sug.text, sug.replace))
            end = doc_position_after(text, offset, sug.replace, self.encoding, doc.starts)
            items.append(Item(len(items), sug.text.replace("\n", eol) if eol != "\n" else sug.text,
                              cursor, end, round(c.ttft_ms, 1), round(c.total_ms, 1), c.source,
                              len(c.token_ids)))
        total_ms = (time.perf_counter() - t0) * 1000
        source = items[0].source if items else None
        self.stats.completed(total_ms, source or "model", len(items))
        self._remember(sid, uri, [it.text for it in items])
        res = Suggestions(sid, uri, version, items, mode, round(total_ms, 1), source)
        log.info("%s %s:%d:%d %s -> %d item(s) in %.0f ms (prompt %d tok, reused %d, %d decoded)",
                 "invoked" if invoked else "auto", uri.rsplit("/", 1)[-1], line, character, mode, len(items),
                 total_ms, timings.prompt_tokens, timings.reused_tokens, timings.decode_tokens)
        return res

    def _prepare(self, text: str, offset: int, *, invoked: bool, n: int | None = None
                 ) -> tuple[str, str, Mode, GenParams, float] | None:
        """The engine's work for a cursor: (prefix, suffix, mode, params, budget), or None when an automatic
        request there is not worth a model call. Requests and speculation share it, so a request for the
        spot a didChange already started joins that generation."""
        prefix = convert.normalize_eol(text[max(0, offset - WINDOW_PREFIX_CHARS): offset])
        suffix = convert.normalize_eol(text[offset: offset + WINDOW_SUFFIX_CHARS])
        line_prefix, line_suffix = split_cursor(prefix, suffix)
        if not invoked and (line_suffix[:1].isalnum() or line_suffix[:1] == "_"):
            return None  # the cursor sits inside a word: nothing useful to add while it is being edited
        mode = decide_mode(line_prefix, line_suffix, self.settings.multiline)
        params = self.gen_params(mode, invoked=invoked, n=n)
        return prefix, suffix, mode, params, INVOKED_BUDGET_S if invoked else AUTOMATIC_BUDGET_S

    def gen_params(self, mode: str, *, invoked: bool, n: int | None = None) -> GenParams:
        """Automatic requests take one greedy variant (the fastest path: prompt-lookup drafts); an explicit
        request or a variants pick takes ``maxVariants`` from one batched pass."""
        s = self.settings
        if n is None:
            n = s.max_variants if invoked else 1
        if mode == "single":
            max_tokens, max_lines = SINGLE_LINE_TOKENS, 1
        else:
            max_tokens = min(MAX_TOKENS, TOKENS_PER_LINE * (s.max_lines + 1))
            max_lines = s.max_lines + 1  # +1: a block opened at the cursor starts with a line break
        # no deadline here: the worker starts the time budget when the job starts running
        return GenParams(max_tokens=max_tokens, max_lines=max_lines, n=max(1, min(n, s.max_variants)))

    def _map_error(self, e: BaseException) -> RequestError:
        from .worker import Cancelled, EngineUnavailable, Stale, Superseded

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

    # ---- telemetry (local only) -----------------------------------------------------------------
    def _remember(self, sid: str, uri: str, texts: list[str]) -> None:
        self._records[sid] = _Record(uri, texts)
        while len(self._records) > REMEMBERED_COMPLETIONS:
            self._records.popitem(last=False)

    def did_show(self, sid: str, index: int) -> bool:
        rec = self._records.get(sid)
        if rec is None or not 0 <= index < max(1, len(rec.texts)):
            return False
        if index not in rec.shown:
            rec.shown.add(index)
            self.stats.count("shown")
        return True

    def did_accept(self, sid: str, index: int) -> bool:
        rec = self._records.get(sid)
        if rec is None or rec.accepted:
            return False
        rec.accepted = True
        self.stats.count("accepted")
        if index < len(rec.texts):
            self.stats.count("accepted_units", convert.unit_len(rec.texts[index], self.encoding))
        return True

    def did_partially_accept(self, sid: str, index: int, accepted_length: int) -> bool:
        rec = self._records.get(sid)
        if rec is None:
            return False
        self.stats.count("partial_accepts")
        self.stats.count("accepted_units", max(0, accepted_length))
        return True

    def maybe_flush_stats(self, every_s: float = 30.0) -> None:
        if time.monotonic() - self.stats.last_flush >= every_s:
            self.stats.flush()


def doc_position_after(text: str, offset: int, replace: int, encoding: str,
                       starts: list[int]) -> tuple[int, int]:
    """Position ``replace`` code points right of ``offset`` (on the same line; postprocess guarantees it)."""
    return convert.offset_to_position(text, offset + replace, encoding, starts=starts)
