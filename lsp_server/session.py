"""All of the server's mutable state and request logic, with no LSP types (server.py adapts to pygls).

After ruff_server's ``Session``: the event loop mutates documents and settings; each request takes a
read-only snapshot (an immutable ``str`` plus its revision), posts work to the one engine thread and
turns the raw model text into suggestions with engine/postprocess.py.

Where an answer comes from, cheapest first (the ``source`` reported on items and in flint/status):

1. ``memory`` / ``type-through``: a generation already made (or streaming) for this state, or for an
   earlier state whose text the user has typed since (engine/typethrough.py).
2. ``disk``: the on-disk cache shared by every server on the machine (engine/cache.py).
3. ``model``: the engine. Usually already running: ``did_change`` starts the work for the cursor before
   the editor asks, and a request joins it.

Each request has a deadline: at the deadline it gets what exists (possibly a partial suggestion, or
none) and the generation goes on, so the next ask (the next keystroke) is answered from it. After a
suggestion is shown the states the user may reach next are pre-generated (engine/speculation.py), and
idle time warms the KV cache for the active document. The ``speculation`` setting switches all of that
off (every request is then its own model call, with only the exact-repeat memory and the disk cache).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine import routing, speculation
from engine.cache import CompletionCache, cache_key, is_complete
from engine.postprocess import CUT_OFF_REASONS, Mode, decide_mode, postprocess, split_cursor
from engine.types import Completion, GenParams, Timings
from engine.typethrough import Entry, TypeThrough, reachable

from . import convert
from .documents import DocumentError, DocumentStore
from .settings import Settings
from .stats import Stats
from .worker import FUTURE, SPECULATIVE, USER, EngineLike, Job, JobDropped, Result, Worker

log = logging.getLogger(__name__)

# Text after the cursor copied per keystroke (the engine windows it much tighter: max_suffix_chars).
WINDOW_SUFFIX_CHARS = 8_192
# The engine's prompt windows when no engine is loaded yet (engine.engine.EngineConfig's defaults).
DEFAULT_MAX_PREFIX_CHARS, DEFAULT_MAX_SUFFIX_CHARS = 6000, 600
# Request deadlines: what the user waits at most, then gets what exists. Automatic requests are what
# the user waits on while typing; an explicit request or a variants pick can take longer.
AUTOMATIC_BUDGET_S = 2.5
INVOKED_BUDGET_S = 6.0
# A generation no request waits for any more goes on this long at most (its result serves the next ask),
# and so does a pre-generated future. Any new work pre-empts them, so this bounds idle CPU only; it is
# long because the engine's deadline counts the prompt pass too, which alone takes 10-20 s for a whole
# window on a slow 2-core machine (a deadline right after it would throw that work away).
JOB_BUDGET_S = 30.0
FUTURE_BUDGET_S = 30.0
# A generation still streaming is shown once the request has waited this long: what it has written so far
# (the rest of the word, of the line) while the user types, typed through and extended as it goes on.
# Before that the request waits for a complete line. A client that handles flint/refresh is told when
# the whole suggestion is there (Session._refresh_when_done).
PARTIAL_AFTER_S = 0.1
# How long after a partial answer its completion still refreshes the suggestion on screen.
REFRESH_WITHIN_S = 4.0
SINGLE_LINE_TOKENS = 48
TOKENS_PER_LINE = 24
# A one-line suggestion at the end of a line (nothing right of the cursor) is generated one line further
# than it is shown: when the user finishes the line by hand and presses Enter, that next line is typed
# through at once instead of waiting for a new generation (after Enter the server otherwise starts from
# nothing: the slowest answers of bench_replay). The request is answered as soon as the shown line is done.
LOOKAHEAD_TOKENS = SINGLE_LINE_TOKENS + TOKENS_PER_LINE
MAX_TOKENS = 256
REMEMBERED_COMPLETIONS = 256  # ids kept for didShow / didAccept
TYPING_HISTORY = 9  # keystroke times kept per document (for the adaptive debounce)
# Edits closer together than this are a burst (a paste replayed, a client catching up), not typing: the
# caches are asked by the request for the state the burst ends in, not on every edit of it.
BURST_GAP_S = 0.015
RACES_KEPT = 16  # races whose remote generation may still finish and win
DISK_MISS_MEMORY = 64  # recent disk misses not asked again (this server fills the entries it misses)


def is_lookahead(max_tokens: int, max_lines: int | None) -> bool:
    """A one-line suggestion's generation with its look-ahead line, from its parameters (entries keep them
    as ``key[:2]``): (72, 2) is no block's (a block of k lines asks for 24 * (k + 1) tokens, k + 1 lines)."""
    return max_lines == 2 and max_tokens == LOOKAHEAD_TOKENS


def shows_one_line(params: GenParams) -> bool:
    return params.max_lines == 1 or is_lookahead(params.max_tokens, params.max_lines)


def _lookahead_for_block(entry: Entry, state: State) -> bool:
    """A look-ahead line serving a state that wants a block (after Enter): shown at once, but it does not
    stand for the block a generation there would write."""
    return state.mode == "multi" and len(entry.key) > 1 and is_lookahead(entry.key[0], entry.key[1])


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
    backend: str = "local"  # which backend wrote it: local | remote


@dataclass
class Suggestions:
    id: str
    uri: str
    version: int
    items: list[Item]
    mode: str
    total_ms: float = 0.0  # request to response, as the user saw it
    source: str | None = None
    origin: str | None = None  # "disk" when a type-through answer came from a disk entry
    backend: str | None = None  # local | remote (the first item's)


@dataclass
class _Record:
    uri: str
    texts: list[str]
    shown: set[int] = field(default_factory=set)
    accepted: bool = False


@dataclass
class State:
    """A document's text around a cursor, as the engine will see it, and what to generate there."""

    uri: str
    revision: int
    offset: int
    prefix: str  # LF line breaks, windowed (engine.speculation.window_start)
    suffix: str
    mode: Mode
    params: GenParams
    skip: str | None = None  # why no automatic work is done here
    not_before: float = 0.0  # adaptive debounce for generations started for this state
    route: str = "local"  # local | remote | race (engine/routing.py)


@dataclass
class _Race:
    """A race between the local model and the capable tier for one state (Session._answer_race)."""

    state: State
    since: float  # when the request came
    budget_s: float
    shown: str | None = None  # the local answer's raw text, once it went out
    local_done: bool = False
    result: list[Completion] | None = None  # the remote generation's, when it finished
    arrived: float | None = None
    decided: bool = False


@dataclass
class _Answer:
    comps: list[Completion]  # raw text at the state's cursor
    source: str
    mode: Mode
    complete: bool  # nothing more is coming for it
    origin: str = "model"
    backend: str = "local"
    note: str = ""  # said in the status message (a fallback, a race outcome)


def load_remote(settings: Settings) -> EngineLike:
    """The capable tier for these settings: the remote server's client (asked for the name of the model
    it serves, best effort) or a second local model (``capableModel``, loaded and warmed)."""
    from engine.backends import LocalBackend, LocalSpec, load_backend
    from engine.remote import RemoteBackend

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
        self._load = load
        self._loaded_key = self.settings.engine_key()
        self._on_status = on_status or (lambda s: None)
        self.status: dict[str, Any] = {"state": "loading", "model": self.settings.model, "lastLatencyMs": None,
                                       "source": None, "message": "loading the model", "backend": None,
                                       "remote": None}
        self.ready = asyncio.Event()  # set once the model is loaded (or failed to); binds to the loop on use
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ids = itertools.count(1)
        self._id_prefix = f"{os.getpid():x}"
        self._records: OrderedDict[str, _Record] = OrderedDict()
        # speculate on didChange once the client has shown it asks for suggestions as the user types
        self.speculate = False
        self.typethrough = TypeThrough()
        self.disk: CompletionCache | None = None
        self._disk_misses: OrderedDict[str, None] = OrderedDict()  # keys just looked up in vain
        self._misses_lock = threading.Lock()  # the engine thread looks up and fills entries too
        self._open_disk()
        self._states: dict[str, State | None] = {}  # each document's current cursor state (if known)
        self._typing: dict[str, deque[float]] = {}
        self._wstart: dict[str, int] = {}  # each document's prefix window start (kept while it fits)
        self._active: str | None = None  # the document the user works in
        self._tick: asyncio.Future | None = None  # resolved when a generation streams something
        self.hooks = _Hooks(self, "local")
        self.worker = Worker(lambda: load(self.settings), self.documents.revision, self._worker_event, self.hooks)
        # the remote tier (hybrid routing): its own worker thread, so a slow server never holds the local model
        self._load_remote = load_remote
        self._on_refresh = on_refresh or (lambda uri, version: None)
        self.remote_hooks = _Hooks(self, "remote")
        self.remote_worker: Worker | None = None
        self._remote_st: dict[str, Any] | None = None
        self._remote_key: tuple | None = None
        self._started = False
        self._races: dict[tuple[str, str, str], _Race] = {}  # (uri, prefix, suffix) -> a race under way
        self._refreshing: dict[str, asyncio.Task] = {}  # uri -> waiting to refresh a partial answer

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Start loading the model now (process start), before the client even says hello."""
        self._started = True
        self.worker.start()
        self._sync_remote()

    def _sync_remote(self) -> None:
        """Start, replace or stop the remote tier to match the settings."""
        key = self.settings.remote_key() if self.settings.capable_tier() is not None else None
        if key == self._remote_key and (key is None) == (self.remote_worker is None):
            return
        old, self.remote_worker = self.remote_worker, None
        self._remote_key = key
        if old is not None:
            old.stop(timeout=2.0)
            close = getattr(old.engine, "close", None)
            if close is not None:
                close()
        if key is None or not self._started:
            self._remote_status(None)
            return
        w = Worker(lambda: self._load_remote(self.settings), self.documents.revision, self._remote_event,
                   self.remote_hooks)
        self.remote_worker = w
        w.start()

    def remote_ready(self) -> bool:
        """Is a remote configured, loaded and not backing off after a failure?"""
        w = self.remote_worker
        eng = w.engine if w is not None else None
        ready = getattr(eng, "ready", None)
        return eng is not None and (ready is None or bool(ready()))

    def attach_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def shutdown(self) -> None:
        self.worker.stop()
        if self.remote_worker is not None:
            self.remote_worker.stop(timeout=2.0)
            close = getattr(self.remote_worker.engine, "close", None)
            if close is not None:
                close()
        self.stats.flush()
        if self.disk is not None:
            self.disk.close()

    def apply_settings(self, new: Settings) -> bool:
        """Adopt new settings; reload the model when its identity changed. Returns True on reload."""
        old_key = self._loaded_key
        old_cache = self.settings.cache_size_mb
        self.settings = new
        if new.cache_size_mb != old_cache:
            self._open_disk()
        self._sync_remote()
        if new.engine_key() != old_key:
            self._loaded_key = new.engine_key()
            self.worker.reload(lambda: self._load(self.settings))
            return True
        return False

    def _open_disk(self) -> None:
        if self.disk is not None:
            self.disk.close()
        self.disk = CompletionCache(size_mb=self.settings.cache_size_mb) if self.settings.cache_size_mb > 0 else None

    @property
    def speculating(self) -> bool:
        return self.settings.speculation

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
                st.update(lastLatencyMs=round(info["latency_ms"], 1), source=info.get("source"), backend="local")
        st["remote"] = self._remote_st
        self.status = st
        self._call_soon(self._status_changed, st)

    def _remote_event(self, state: str, info: dict[str, Any]) -> None:
        """From the remote worker's thread: the remote tier's part of the status (``remote``)."""
        w = self.remote_worker
        eng = w.engine if w is not None else None
        model = getattr(eng, "model_id", None) or self.settings.remote_url or self.settings.capable_model
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
        self._remote_st = remote  # kept apart: the two workers' threads both publish the status
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
                  message=f"{source}{via} in {total_ms:.0f} ms{tier}{note}", remote=self._remote_st)
        self.status = st
        self._on_status(st)

    # ---- documents ------------------------------------------------------------------------------
    def did_change(self, uri: str, cursor: int | None = None) -> None:
        """After an edit: stop stale work (but keep a generation the user is typing through), and when
        the client completes as the user types, start the generation for the spot the edit left the
        cursor at (``cursor``, a code point offset) now, unless a cache answers it already; the client's
        request for that spot then joins it instead of starting from zero."""
        rev = self.documents.revision(uri)
        if rev is None:
            return
        now = time.monotonic()
        times = self._typing.setdefault(uri, deque(maxlen=TYPING_HISTORY))
        times.append(now)
        state = None
        if cursor is not None and self.settings.enable:
            doc = self.documents.get(uri)
            if not doc.problem():
                # no debounce: the newest state starts at once (newest wins; a keystroke appends to the KV)
                state = self._state(uri, rev, doc.text, cursor, invoked=False)
        self._states[uri] = state
        if state is not None:
            self._active = uri
        spec = self.speculating and state is not None
        for w in self._workers():
            w.document_changed(uri, rev, self._keep if spec else None)
        if not spec or not self.speculate or state is None or state.skip:
            return
        burst = len(times) > 1 and now - times[-2] < BURST_GAP_S
        if not burst and self._lookup(state, since=None, partial=True,
                                      backend="remote" if state.route == routing.REMOTE else None) is not None:
            return  # typed through, or on disk: no model call for this keystroke
        for w, budget in self._speculation_workers(state):
            w.submit(uri, rev, state.prefix, state.suffix, state.params, SPECULATIVE,
                     budget_s=budget, not_before=state.not_before)

    def _workers(self) -> list[Worker]:
        return [self.worker] if self.remote_worker is None else [self.worker, self.remote_worker]

    def _speculation_workers(self, state: State) -> list[tuple[Worker, float]]:
        """Where a state's speculative generation runs: the local model, the remote (routed there), or
        both (race: the local answer is shown at once, the remote one may replace it)."""
        rw = self.remote_worker
        remote_budget = max(self.settings.remote_timeout_ms / 1000, JOB_BUDGET_S if state.route == routing.REMOTE
                            else 0.0)
        if state.route == routing.REMOTE and rw is not None:
            self.worker.poke()  # the keystrokes after this one are local: warm its KV meanwhile
            return [(rw, remote_budget)]
        if state.route == routing.RACE and rw is not None:
            return [(self.worker, JOB_BUDGET_S), (rw, remote_budget)]
        return [(self.worker, JOB_BUDGET_S)]

    def did_close(self, uri: str) -> None:
        self.documents.close(uri)
        self._states.pop(uri, None)
        self._typing.pop(uri, None)
        self._wstart.pop(uri, None)
        if self._active == uri:
            self._active = None
        for w in self._workers():
            w.document_closed(uri)

    def _keep(self, job: Job, running: bool) -> bool:
        """(worker lock held) Does a job made for an older revision still serve the new text? A running
        generation the user typed through so far does; a future the user is typing toward (or has
        reached by accepting the suggestion) does."""
        st = self._states.get(job.uri)
        if st is None:
            return False
        entry = job.handle
        if running and isinstance(entry, Entry) and self.typethrough.consistent(entry, st.prefix, st.suffix):
            return True
        return job.priority == FUTURE and reachable(job.prefix, job.suffix, st.prefix, st.suffix)

    # ---- completion -----------------------------------------------------------------------------
    async def suggest(self, uri: str, line: int, character: int, *, invoked: bool,
                      n: int | None = None, variants: bool = False) -> Suggestions:
        """Suggestions at a position. Raises RequestError for anything the client should hear about."""
        t0 = time.perf_counter()
        since = time.monotonic()
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
        old = self._states.get(uri)
        if old is not None and old.revision == revision and old.offset == offset and not invoked and n is None \
                and not variants:
            state = old  # the didChange before this request prepared this very state (and chose its debounce)
        else:
            state = self._state(uri, revision, text, offset, invoked=invoked, n=n, variants=variants)
        if not invoked:
            self._states[uri] = state
            self._active = uri
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
        items = self._items(state, text, offset, cursor, eol, answer, doc.starts) if answer else []
        total_ms = (time.perf_counter() - t0) * 1000
        for it in items:  # each item's latency is the request's (its source says where it came from)
            it.total_ms = round(total_ms, 1)
            if it.source != "model" or not 0 < it.ttft_ms <= total_ms:
                it.ttft_ms = it.total_ms
        source = items[0].source if items else None
        origin = answer.origin if answer else None
        backend = items[0].backend if items else None
        self.stats.completed(total_ms, source or "model", len(items))
        if backend is not None and backend != "local":
            self.stats.count("remote_answers")
        self._remember(sid, uri, [it.text for it in items])
        if items:
            self._answered(items[0].source, origin or "model", total_ms, backend or "local",
                           answer.note if answer else "")
            if self.speculating and self.speculate:
                self._plan_futures(state, items[0], eol)
            if answer is not None and not answer.complete and self.speculating:
                self._watch_for_refresh(state, version)
        res = Suggestions(sid, uri, version, items, state.mode, round(total_ms, 1), source, origin, backend)
        log.info("%s %s:%d:%d %s -> %d item(s) in %.0f ms [%s%s]", "invoked" if invoked else "auto",
                 uri.rsplit("/", 1)[-1], line, character, state.mode, len(items), total_ms, source or "-",
                 f" {backend}" if backend not in (None, "local") else "")
        return res

    def _watch_for_refresh(self, state: State, version: int) -> None:
        old = self._refreshing.pop(state.uri, None)
        if old is not None:
            old.cancel()
        task = asyncio.get_running_loop().create_task(self._refresh_when_done(state, version))
        self._refreshing[state.uri] = task
        task.add_done_callback(lambda t: self._refreshing.pop(state.uri, None) if
                               self._refreshing.get(state.uri) is t else None)

    async def _refresh_when_done(self, state: State, version: int) -> None:
        """A partial answer went out: once its generation has the whole suggestion (the document still at
        that state), the client hears flint/refresh and asks again (memory answers at once)."""
        end = time.monotonic() + REFRESH_WITHIN_S
        while (left := end - time.monotonic()) > 0:
            await asyncio.wait([self._next_tick()], timeout=left)
            if self.documents.revision(state.uri) != state.revision:
                return
            found = self._lookup(state, None, partial=False, disk=False)
            if found is not None and found.complete:
                if found.comps:
                    self._on_refresh(state.uri, version)
                return

    async def _answer(self, state: State, since: float, invoked: bool) -> _Answer | None:
        """The best answer for a state within its deadline, from the backend its route names (engine/
        routing.py): caches, else the model (joined or started). A remote that fails, is slow or is backing
        off leaves the answer to the local model; a race shows the local answer unless the remote one is
        there first within the race budget (and may replace it afterwards, still within the budget)."""
        try:
            route = state.route
            if route != routing.LOCAL and not self.remote_ready():
                route = routing.LOCAL
            if route == routing.REMOTE:
                return await self._answer_remote(state, since, invoked)
            if route == routing.RACE:
                return await self._answer_race(state, since, invoked)
            return await self._answer_on(self.worker, state, since, invoked)
        except (RequestError, asyncio.CancelledError):
            raise
        except Exception as e:
            raise self._map_error(e) from None

    async def _answer_remote(self, state: State, since: float, invoked: bool) -> _Answer | None:
        rw = self.remote_worker
        assert rw is not None
        # an explicit request waits for the remote up to remoteTimeoutMs, then asks the local model; one
        # made as the user types has its usual deadline (and the generation goes on for the next ask)
        limit = self.settings.remote_timeout_ms / 1000 if invoked else AUTOMATIC_BUDGET_S
        self.worker.poke()  # the local model warms its KV for this spot meanwhile (the next keystrokes)
        try:
            ans = await self._answer_on(rw, state, since, invoked, budget=limit, backend="remote")
        except (JobDropped, asyncio.CancelledError):
            raise  # the document changed, a newer request came: the same for any backend
        except Exception as e:
            reason = f"remote failed ({e})"
        else:
            if ans is not None and (ans.comps or ans.complete):
                return ans
            if not invoked:
                return ans
            reason = f"no remote answer within {limit * 1000:.0f} ms"
        log.info("remote answer unavailable for %s: %s; asking the local model", state.uri, reason)
        self.stats.count("remote_fallbacks")
        ans = await self._answer_on(self.worker, state, time.monotonic(), invoked)
        if ans is not None:
            ans.note = f" (local fallback: {reason})"
        return ans

    async def _answer_race(self, state: State, since: float, invoked: bool) -> _Answer | None:
        """Local and remote side by side. The remote answer wins if it arrives within the race budget
        while nothing is shown yet, or arrives within the budget after the local one went out and extends
        or improves it (routing.race_accepts): then it takes the local one's place in the type-through
        store (the next ask, or a keystroke typed through it, gets it) and the client hears flint/refresh.
        The remote generation keeps running while the user types what agrees with it (as a local one
        does), so it can still win for the text typed since, within the budget."""
        rw = self.remote_worker
        assert rw is not None
        found = self._lookup(state, since, partial=False)
        if found is not None and found.complete:
            return found  # a repeat, a promoted remote answer, or the disk: nothing to race
        race = _Race(state, since, self.settings.race_budget_ms / 1000)
        self._races[(state.uri, state.prefix, state.suffix)] = race
        while len(self._races) > RACES_KEPT:
            self._races.pop(next(iter(self._races)))
        rfut = rw.submit(state.uri, state.revision, state.prefix, state.suffix, state.params, USER,
                         budget_s=self.settings.remote_timeout_ms / 1000, detachable=True)
        # answered at once from the remote's memory or caches (no generation, so no finished hook)
        rfut.add_done_callback(lambda f: None if f.cancelled() or f.exception() is not None else
                               self._call_soon(self._race_finished, race, f.result()[0], time.monotonic()))
        local_task = asyncio.ensure_future(self._answer_on(self.worker, state, since, invoked))
        try:
            return await self._race(race, local_task)
        except asyncio.CancelledError:  # the client cancelled the request: the local side stops waiting too
            local_task.cancel()
            raise
        finally:
            # an outcome nobody waits for (Stale, cancelled) is not an unhandled error
            local_task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _race(self, race: _Race, local_task: asyncio.Future) -> _Answer | None:
        state, since = race.state, race.since
        while not local_task.done():
            if race.result is not None and not race.decided:  # the remote came first, within the budget
                race.decided = True
                won = self._race_pick(race, None)
                if won is not None:
                    local_task.cancel()
                    self._promote(state, won)
                    return won
            left = since + race.budget_s - time.monotonic()
            if left <= 0 or race.decided:
                break
            await asyncio.wait([local_task, self._next_tick()], timeout=left, return_when=asyncio.FIRST_COMPLETED)
        local = await local_task
        race.shown = local.comps[0].text if local is not None and local.comps else None
        race.local_done = True
        if race.result is not None and not race.decided:
            race.decided = True
            won = self._race_pick(race, race.shown)
            if won is not None:
                self._promote(state, won)
                return won
        return local

    def _race_pick(self, race: _Race, shown: str | None) -> _Answer | None:
        """The remote answer if it came within the budget and may replace ``shown`` (None: nothing shown)."""
        comps = race.result
        if not comps or race.arrived is None or race.arrived - race.since > race.budget_s:
            return None
        if not routing.race_accepts(shown, comps[0].text):
            return None
        state = race.state
        mode = self._mode_for(state, None)
        if not any(self._shows(c, state, mode, False, True) for c in comps):
            return None
        return _Answer(comps, "model", mode, complete=True, backend="remote",
                       note=" (race: remote replaced local)" if shown else " (race: remote first)")

    def _race_finished(self, race: _Race, comps: list[Completion], arrived: float) -> None:
        """(event loop) A race's remote generation finished (for its own state, possibly typed past)."""
        if race.result is not None or not comps or not comps[0].text or comps[0].finish_reason == "cancelled":
            return
        race.result, race.arrived = comps, arrived
        self._pulse()  # a request still waiting for its local answer looks again
        if not race.local_done or race.decided:
            return
        race.decided = True
        won = self._race_pick(race, race.shown)
        if won is None:
            log.debug("race: remote answer for %s not shown (late or unrelated)", race.state.uri)
            return
        self._promote(race.state, won)
        uri = race.state.uri
        rev = self.documents.revision(uri)
        cur = race.state if rev == race.state.revision else self._states.get(uri)  # the spot the user is at
        if cur is None or rev != cur.revision:
            return
        now = self._lookup(cur, None, partial=False, disk=False)
        log.debug("race: promoted for %s; at the current spot: %s", uri, now and (now.source, now.backend))
        if now is None or now.backend != "remote":
            return  # typed past it in another direction: nothing to replace
        name = self._backend_name("remote")
        st = dict(self.status)
        st.update(source="model", backend=name, remote=self._remote_st,
                  message=f"model in {(arrived - race.since) * 1000:.0f} ms · {name} (race: replaces local)")
        self.status = st
        self._on_status(st)
        self._on_refresh(uri, self.documents.get(uri).version)

    def _promote(self, state: State, ans: _Answer) -> None:
        """A race's remote answer becomes the newest generation for its state (type-through serves it)."""
        if self.speculating:
            self.typethrough.add(state.prefix, state.suffix, ans.comps, n=state.params.n,
                                 key=(*state.params.key(), "remote"), origin="model")
            self._pulse()

    async def _answer_on(self, worker: Worker, state: State, since: float, invoked: bool,
                         budget: float | None = None, backend: str | None = None) -> _Answer | None:
        """The answer from one backend's worker: caches (``backend``: only that backend's entries), else
        its model. Raises the worker's exceptions."""
        if budget is None:
            budget = INVOKED_BUDGET_S if invoked else AUTOMATIC_BUDGET_S
        deadline = since + budget
        tier = "remote" if worker is self.remote_worker and worker is not None else "local"
        # an explicit request waits for the whole suggestion; one made as the user types shows the
        # complete lines of a block still streaming after PARTIAL_AFTER_S
        show_partial_after = budget if invoked else PARTIAL_AFTER_S
        if not self.speculating:
            # a plain server: exact repeats (worker memory), the disk, else one model call within the budget
            found = self._lookup(state, since, partial=False, backend=backend)
            if found is not None:
                return found
            fut = worker.submit(state.uri, state.revision, state.prefix, state.suffix, state.params, USER,
                                budget_s=budget)
            # the budget starts when the job does; the request keeps its own deadline (a model loading)
            afut = asyncio.wrap_future(fut)
            try:
                await asyncio.wait([afut], timeout=max(0.0, deadline - time.monotonic()))
            except asyncio.CancelledError:
                self.stats.count("cancelled")
                fut.cancel()
                raise
            if not afut.done():
                worker.release(fut)
                return None
            return self._from_result(state, afut.result(), tier)
        found = self._lookup(state, since, partial=False, backend=backend)
        if found is not None and found.complete:
            return found
        job_budget = JOB_BUDGET_S if tier == "local" else max(budget, self.settings.remote_timeout_ms / 1000)
        fut = worker.submit(state.uri, state.revision, state.prefix, state.suffix, state.params, USER,
                            budget_s=job_budget, not_before=state.not_before, detachable=not invoked)
        afut = asyncio.wrap_future(fut)
        try:
            while True:
                if afut.done():
                    return self._from_result(state, afut.result(), tier)  # raises the worker's errors
                now = time.monotonic()
                # while the model (re)loads the request keeps its deadline: it gets what exists then
                partial = now >= deadline or (not invoked and now - since >= show_partial_after)
                found = self._lookup(state, since, partial=partial, disk=False, backend=backend)
                # a finished answer goes out at once; one still streaming once a line of it is complete
                # (at once when typed through, after PARTIAL_AFTER_S for the request's own generation, so
                # a block that is nearly done is shown whole); at the deadline, whatever exists
                if found is not None and (found.complete or found.source in ("type-through", "disk") or
                                          now - since >= show_partial_after or now >= deadline):
                    worker.release(fut)
                    return found
                if now >= deadline:
                    worker.release(fut)  # keep generating: the next ask gets it
                    return None
                tick = self._next_tick()
                wait_s = min(deadline, since + show_partial_after) - now if now - since < show_partial_after \
                    else deadline - now
                await asyncio.wait([afut, tick], timeout=max(0.0, wait_s), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            self.stats.count("cancelled")
            fut.cancel()
            raise

    def _from_result(self, state: State, result: Result, backend: str = "local") -> _Answer:
        comps = result[0]
        source = comps[0].source if comps else "model"
        return _Answer(comps, source, self._mode_for(state, None), complete=True,
                       origin="disk" if source == "disk" else "model", backend=backend)

    def _next_tick(self) -> asyncio.Future:
        if self._tick is None or self._tick.done():
            self._tick = asyncio.get_running_loop().create_future()
        return self._tick

    def _pulse(self) -> None:
        """(event loop) A generation streamed or finished: wake the requests watching the caches."""
        tick, self._tick = self._tick, None
        if tick is not None and not tick.done():
            tick.set_result(None)

    # ---- caches ---------------------------------------------------------------------------------
    def _lookup(self, state: State, since: float | None, *, partial: bool, disk: bool = True,
                backend: str | None = None) -> _Answer | None:
        """An answer for ``state`` without a model call: type-through / memory, then the disk.

        ``partial``: accept what a generation has streamed so far even if no line of it is complete
        (at a deadline). ``since``: when the request arrived (a generation finished before it is
        "memory", one finished while it waited is the "model" it waited for). ``backend``: only that
        backend's generations and disk entries (None: any generation; the disk of the state's route)."""
        hits = self.typethrough.lookup(state.prefix, state.suffix, n=state.params.n) if self.speculating else []
        if disk and hits and not any(h.exact for h in hits):
            # the exact state beats typing through another state's generation, on disk as in memory: a
            # complete entry stored for this very state (a restart revisiting it) answers whole at once,
            # where a generation typed through may still be streaming toward it
            stored = self._disk_answer(state, backend, complete_only=True)
            if stored is not None:
                return stored
        if self.speculating:
            for hit in hits:
                entry = hit.entry
                tier = entry_backend(entry)
                if backend is not None and tier != backend:
                    continue
                if hit.known_empty:  # the model finished here with nothing to add: do not ask again
                    return _Answer([], "memory", state.mode, complete=True, origin=entry.origin, backend=tier)
                if not hit.variants:
                    continue
                mode = self._mode_for(state, entry)
                live = entry.live
                if hit.typed:
                    source = "type-through"
                elif entry.origin == "disk":
                    source = "disk"  # read from disk for this very state (by the didChange before the request)
                elif live or since is None or (entry.finished_at or 0.0) >= since:
                    source = "model"
                else:
                    source = "memory"
                comps = hit.completions(source, state.params.n)
                if hit.typed and mode == "single" and comps and comps[0].text.startswith("\n"):
                    # typed up to where the model ended the line (a one-line suggestion's look-ahead goes
                    # on past it): nothing to add on this line, as a generation from here would say
                    return _Answer([], source, mode, complete=True, origin=entry.origin, backend=tier)
                usable = [c for c in comps if self._shows(c, state, mode, live, partial)]
                if usable:
                    # one line shown: done once that line is (the generation goes on with its look-ahead);
                    # a look-ahead line typed into after Enter is shown at once, while a block is generated
                    done = (not live or (mode == "single" and "\n" in usable[0].text.lstrip("\n"))) and \
                        not _lookahead_for_block(entry, state) and (entry.origin != "disk" or entry.complete)
                    return _Answer(usable, source, mode, complete=done, origin=entry.origin, backend=tier)
                if hit.exact and entry.complete:  # what it wrote repeats the text around: nothing to show
                    return _Answer([], "memory", state.mode, complete=True, origin=entry.origin, backend=tier)
        if not disk:
            return None
        return self._disk_answer(state, backend)

    def _disk_answer(self, state: State, backend: str | None, complete_only: bool = False) -> _Answer | None:
        """The disk entry stored for this very state, as an answer (it joins the type-through entries)."""
        tier = backend or ("remote" if state.route == routing.REMOTE else "local")
        comps = self._disk_get(state.prefix, state.suffix, state.params, tier)
        if comps is None or (complete_only and not is_complete(comps)):
            return None
        if self.speculating:
            self.typethrough.add(state.prefix, state.suffix, comps, n=state.params.n,
                                 key=(*state.params.key(), tier), origin="disk")
        # a stored start of a generation answers now; a generation here still writes the rest
        return _Answer(comps[: state.params.n], "disk", state.mode, complete=is_complete(comps), origin="disk",
                       backend=tier)

    def _shows(self, c: Completion, state: State, mode: Mode, live: bool, partial: bool) -> bool:
        """Would this (raw, possibly still streaming) text give a suggestion worth showing now?"""
        if live and not partial and "\n" not in c.text.lstrip("\n"):
            return False  # its first line is still being written
        truncated = live or c.finish_reason in CUT_OFF_REASONS
        return postprocess(c.text, state.prefix, state.suffix, mode=mode, max_lines=self.settings.max_lines,
                           truncated=truncated) is not None

    def _mode_for(self, state: State, entry: Entry | None) -> Mode:
        """A block being typed through stays a block: once the user types into its first line, that line
        is no longer empty (a fresh request there would ask for one line), but the rest of the block is
        what they were shown."""
        if entry is not None and state.mode == "single" and (entry.key[1] or 2) > 1 and \
                not is_lookahead(entry.key[0], entry.key[1]):
            _, line_suffix = split_cursor(state.prefix, state.suffix)
            if not line_suffix.strip():
                return "multi"
        return state.mode

    def _backend_name(self, tier: str) -> str:
        """What an answer's backend is called on items and in the status: ``local`` (the fast model),
        ``remote`` (a server) or ``capable`` (a second local model)."""
        if tier != "remote":
            return "local"
        return getattr(self._engine("remote"), "kind", None) or self.settings.capable_tier() or "remote"

    def _engine(self, tier: str = "local") -> EngineLike | None:
        w = self.remote_worker if tier == "remote" else self.worker
        return w.engine if w is not None else None

    def _disk_key(self, prefix: str, suffix: str, params: GenParams, tier: str = "local") -> str | None:
        """The disk entry's key: the backend's model id is part of it (local and remote never mix)."""
        engine = self._engine(tier)
        model_id = getattr(engine, "model_id", None)
        if self.disk is None or not model_id:
            return None
        max_p, max_s = self._windows(tier)
        return cache_key(model_id, params, prefix, suffix, max_p, max_s)

    def _disk_get(self, prefix: str, suffix: str, params: GenParams, tier: str = "local") -> list[Completion] | None:
        key = self._disk_key(prefix, suffix, params, tier)
        if key is None or self.disk is None:
            return None
        with self._misses_lock:
            if key in self._disk_misses:
                return None
        found = self.disk.get(key)
        if found is None:  # the didChange and the request for one keystroke ask for the same key
            with self._misses_lock:
                self._disk_misses[key] = None
                if len(self._disk_misses) > DISK_MISS_MEMORY:
                    self._disk_misses.popitem(last=False)
        return found

    def _windows(self, tier: str = "local") -> tuple[int, int]:
        cfg = getattr(self._engine(tier), "config", None)
        return (getattr(cfg, "max_prefix_chars", DEFAULT_MAX_PREFIX_CHARS),
                getattr(cfg, "max_suffix_chars", DEFAULT_MAX_SUFFIX_CHARS))

    # ---- building suggestions -------------------------------------------------------------------
    def _state(self, uri: str, revision: int, text: str, offset: int, *, invoked: bool,
               n: int | None = None, variants: bool = False) -> State:
        """The engine's work for a cursor. Requests and speculation share it, so a request for the spot a
        didChange already started joins that generation."""
        max_prefix, _ = self._windows()
        start = speculation.window_start(text, offset, max_prefix, previous=self._wstart.get(uri))
        self._wstart[uri] = start
        prefix = convert.normalize_eol(text[start: offset])
        suffix = convert.normalize_eol(text[offset: offset + WINDOW_SUFFIX_CHARS])
        return self._state_at(uri, revision, offset, prefix, suffix, invoked=invoked, n=n, variants=variants)

    def _state_at(self, uri: str, revision: int, offset: int, prefix: str, suffix: str, *, invoked: bool,
                  n: int | None = None, variants: bool = False) -> State:
        line_prefix, line_suffix = split_cursor(prefix, suffix)
        mode = decide_mode(line_prefix, line_suffix, self.settings.multiline)
        params = self.gen_params(mode, invoked=invoked, n=n, lookahead=not line_suffix.strip())
        skip = speculation.skip_reason(line_prefix, line_suffix, invoked=invoked)
        route = routing.route(self.settings.route_config(), invoked=invoked, variants=variants,
                              multiline=mode == "multi", remote_ready=self.remote_ready())
        return State(uri, revision, offset, prefix, suffix, mode, params, skip, route=route)

    def gen_params(self, mode: str, *, invoked: bool, n: int | None = None, lookahead: bool = False) -> GenParams:
        """Automatic requests take one greedy variant (the fastest path: prompt-lookup drafts); an explicit
        request or a variants pick takes ``maxVariants`` from one batched pass."""
        s = self.settings
        if n is None:
            n = s.max_variants if invoked else 1
        if mode == "single":
            max_tokens, max_lines = SINGLE_LINE_TOKENS, 1
            if lookahead and self.speculating:  # the next line too, for type-through after Enter
                max_tokens, max_lines = LOOKAHEAD_TOKENS, 2
        else:
            max_tokens = min(MAX_TOKENS, TOKENS_PER_LINE * (s.max_lines + 1))
            max_lines = s.max_lines + 1  # +1: a block opened at the cursor starts with a line break
        # no deadline here: the worker starts the time budget when the job starts running
        return GenParams(max_tokens=max_tokens, max_lines=max_lines, n=max(1, min(n, s.max_variants)))

    def _items(self, state: State, text: str, offset: int, cursor: tuple[int, int], eol: str, answer: _Answer,
               starts: list[int]) -> list[Item]:
        items: list[Item] = []
        seen: set[tuple[str, int]] = set()
        for c in answer.comps:
            truncated = c.finish_reason in CUT_OFF_REASONS
            sug = postprocess(c.text, state.prefix, state.suffix, mode=answer.mode,
                              max_lines=self.settings.max_lines, truncated=truncated)
            if sug is None or (sug.text, sug.replace) in seen:
                continue
            seen.add((sug.text, sug.replace))
            end = doc_position_after(text, offset, sug.replace, self.encoding, starts)
            items.append(Item(len(items), sug.text.replace("\n", eol) if eol != "\n" else sug.text,
                              cursor, end, round(c.ttft_ms, 1), round(c.total_ms, 1), c.source,
                              len(c.token_ids), self._backend_name(answer.backend)))
        return items

    # ---- speculation ----------------------------------------------------------------------------
    def _plan_futures(self, state: State, item: Item, eol: str) -> None:
        """The suggestion is on screen: pre-generate where accepting it leads (unless already covered)."""
        text = item.text.replace(eol, "\n") if eol != "\n" else item.text
        replace = item.end[1] - item.start[1] if item.end[0] == item.start[0] else 0  # auto-closed characters
        plan: list[tuple[str, str, GenParams, float | None]] = []
        remote_plan: list[tuple[str, str, GenParams, float | None]] = []
        for f in speculation.futures(state.prefix, state.suffix, text, replace):
            fs = self._state_at(state.uri, state.revision, state.offset, f.prefix, f.suffix, invoked=False)
            if fs.skip or self._covered(fs):
                continue
            # where the state's own generation would run (a race's futures are local: that is what shows)
            (remote_plan if fs.route == routing.REMOTE and self.remote_worker is not None else plan).append(
                (fs.prefix, fs.suffix, fs.params, FUTURE_BUDGET_S))
        if plan:
            log.debug("futures for %s: %d", state.uri, len(plan))
        # futures start at once, below any work for the current state: a keystroke pre-empts them at the
        # next model step, and their prompts extend the current one (the KV cache keeps it)
        self.worker.set_futures(state.uri, state.revision, plan)
        if self.remote_worker is not None:
            self.remote_worker.set_futures(state.uri, state.revision, remote_plan)

    def _covered(self, state: State) -> bool:
        """A generation (finished or still streaming, agreeing so far) or a disk entry serves ``state``."""
        for hit in self.typethrough.lookup(state.prefix, state.suffix, n=state.params.n):
            if (hit.live or hit.variants) and not _lookahead_for_block(hit.entry, state):
                return True
        tier = "remote" if state.route == routing.REMOTE else "local"
        return self._disk_get(state.prefix, state.suffix, state.params, tier) is not None

    def _map_error(self, e: BaseException) -> RequestError:
        from .worker import Cancelled, EngineUnavailable, Stale, Superseded

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


class _Hooks:
    """The worker's view of the session's caches (worker.Hooks). Runs on the engine thread: it touches
    only thread-safe things (the type-through store, the disk cache, immutable states)."""

    def __init__(self, session: Session, tier: str = "local") -> None:
        self.s = session
        self.tier = tier  # whose worker these hooks serve: local | remote

    def answer(self, job: Job) -> Result | None:
        s = self.s
        mode: Mode = "single" if shows_one_line(job.params) else "multi"
        st = State(job.uri, job.revision, 0, job.prefix, job.suffix, mode, job.params, route=self.tier)
        found = s._lookup(st, since=None, partial=False, backend=self.tier)
        if found is None or not found.complete:
            return None
        return found.comps, Timings()

    def started(self, job: Job) -> None:
        s = self.s
        if not s.speculating:
            return
        key = (*job.params.key(), self.tier)
        if self.tier == "remote" and s.settings.routing == routing.RACE:
            # a race's remote generation stays out of sight until it wins (Session._promote); its entry
            # is kept aside only to tell whether the user's typing still agrees with it
            job.handle = hidden_entry(job.prefix, job.suffix, job.params.n, key)
            return
        job.handle = s.typethrough.open(job.prefix, job.suffix, n=job.params.n, key=key)
        s._call_soon(s._pulse)

    def token(self, job: Job, index: int, text: str) -> bool:
        s = self.s
        entry = job.handle
        if not isinstance(entry, Entry):
            return True
        s.typethrough.update(entry, index, text)
        s._call_soon(s._pulse)
        if job.tracking or job.priority == FUTURE:
            # the document moved on since the job started: stop as soon as its text stops matching
            return s._keep(job, True)
        return True

    def finished(self, job: Job, result: Result | None, ms: float) -> None:
        s = self.s
        entry = job.handle
        comps = result[0] if result is not None else None
        if isinstance(entry, Entry):
            if comps is None and self.tier == "remote":
                s.typethrough.discard(entry)  # a failed remote stream: the local fallback answers instead
            else:
                s.typethrough.close(entry, comps)
            s._call_soon(s._pulse)
        if self.tier == "remote" and comps and any(c.text for c in comps):
            race = s._races.get((job.uri, job.prefix, job.suffix))
            if race is not None:
                s._call_soon(s._race_finished, race, comps, time.monotonic())
        quick = result is not None and result[1].window == "quick"  # not what the full window would say
        if comps and s.disk is not None and not quick and (is_complete(comps) or job.params.temperature == 0):
            key = s._disk_key(job.prefix, job.suffix, job.params, self.tier)
            # a greedy generation cut off is kept too (as a start: cache.put_partial), for after a restart
            put = s.disk.put if is_complete(comps) else s.disk.put_partial
            if key is not None and put(key, comps, ms):
                with s._misses_lock:
                    s._disk_misses.pop(key, None)

    def idle(self, kv: tuple[str, str] | None) -> tuple[str, int, str, str] | None:
        s = self.s
        uri = s._active
        if not s.speculating or uri is None or self.tier != "local":
            return None
        st = s._states.get(uri)
        if st is None or s.documents.revision(uri) != st.revision:
            return None
        if speculation.should_warm((st.prefix, st.suffix), kv, idle_s=float("inf")):
            return uri, st.revision, st.prefix, st.suffix
        return None


def hidden_entry(prefix: str, suffix: str, n: int, key: tuple) -> Entry:
    """A type-through entry outside the store: it answers nothing, but says whether typing agrees with
    the generation streaming into it (TypeThrough.consistent)."""
    from engine.typethrough import anchor_of

    anchor, at_start = anchor_of(prefix)
    return Entry(anchor, at_start, suffix, split_cursor(prefix, "")[0], n, key)


def entry_backend(entry: Entry) -> str:
    """Which backend wrote a type-through entry (its key ends with the backend's tier)."""
    tail = entry.key[-1] if entry.key else None
    return tail if tail in ("local", "remote") else "local"


def doc_position_after(text: str, offset: int, replace: int, encoding: str,
                       starts: list[int]) -> tuple[int, int]:
    """Position ``replace`` code points right of ``offset`` (on the same line; postprocess guarantees it)."""
    return convert.offset_to_position(text, offset + replace, encoding, starts=starts)
