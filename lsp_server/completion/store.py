"""The store: every answer that exists without a model call, and the only writer of them.

It owns the type-through store (generations finished or still streaming, engine/cache/typethrough.py), the
exact-repeat memory that store gives, the on-disk cache shared by every server on the machine
(engine/cache/disk.py) and its keys. Readers (requests, on the event loop) ``lookup`` a state and ``wait``
for the next change instead of polling; writers (the engine threads, through ``StoreHooks``) ``open`` an
entry when a generation starts, ``stream`` its text, and ``finish`` or ``discard`` it. A generation
cancelled or crashed is finished with what it had as a cut-off entry (never one that reads as complete)
or discarded.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from engine.cache.disk import CompletionCache
from engine.cache.entries import cache_key, is_complete
from engine.cache.typethrough import Entry, TypeThrough, anchor_of, reachable
from engine.policy import routing
from engine.text.budget import Budget, Mode, budget_for, settled
from engine.text.postprocess import CUT_OFF_REASONS, postprocess
from engine.text.statements import split_cursor
from engine.types import Completion, Doubts, GenParams, Timings
from lsp_server.completion.planner import Cursors, State, is_lookahead, lookahead_for_block, shows_one_line
from lsp_server.completion.worker import FUTURE, Job, Result
from lsp_server.settings import Settings

DISK_MISS_MEMORY = 64  # recent disk misses not asked again (this server fills the entries it misses)

# (model id, max prefix chars, max suffix chars) of a backend tier, or None while it is not loaded
Identity = Callable[[str], "tuple[str, int, int] | None"]


def post(loop: asyncio.AbstractEventLoop | None, fn: Callable[..., object], *args: object) -> None:
    """(any thread) Run ``fn(*args)`` on the event loop soon; nothing once it is closed (shutting down)."""
    if loop is not None and not loop.is_closed():
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # closed meanwhile
            pass


@dataclass
class Answer:
    comps: list[Completion]  # raw text at the state's cursor
    source: str
    mode: Mode
    complete: bool  # nothing more is coming for it
    origin: str = "model"
    backend: str = "local"
    note: str = ""  # said in the status message (a fallback, a race outcome)
    # an empty answer made from the engine's quick first window: the whole window may have a line there
    # (a request that may wait asks again with GenParams.quick_start off: whole_window)
    quick: bool = False


def entry_backend(entry: Entry) -> str:
    """Which backend wrote a type-through entry (its key ends with the backend's tier)."""
    tail = entry.key[-1] if entry.key else None
    return tail if tail in ("local", "remote") else "local"


def settle_rule(state: State, max_lines: int) -> tuple[str, Budget]:
    """The cursor's line prefix and the context's budget (engine.postprocess.budget_for): what makes a
    streaming variant final. Computed once per request, not per streamed token."""
    line_prefix, _ = split_cursor(state.prefix, state.suffix)
    return line_prefix, budget_for(state.prefix, state.suffix, state.params.language, max_lines=max_lines)


def settled_variants(answer: Answer, line_prefix: str, budget: Budget) -> list[Completion]:
    """The variants of a (still streaming) answer that are final: their generation ended them, or they
    went past what the budget shows (engine.postprocess.settled)."""
    return [c for c in answer.comps if c.text.strip() and
            settled(c.text, c.finish_reason not in CUT_OFF_REASONS, line_prefix, budget)]


def hidden_entry(prefix: str, suffix: str, n: int, key: tuple) -> Entry:
    """A type-through entry outside the store: it answers nothing, but says whether typing agrees with
    the generation streaming into it (TypeThrough.consistent)."""
    anchor, at_start = anchor_of(prefix)
    return Entry(anchor, at_start, suffix, split_cursor(prefix, "")[0], n, key)


class Store:
    def __init__(self, settings: Callable[[], Settings], identity: Identity) -> None:
        self._settings = settings
        self._identity = identity
        self.typethrough = TypeThrough()
        self.disk: CompletionCache | None = None
        self._misses: OrderedDict[str, None] = OrderedDict()  # keys just looked up in vain
        self._misses_lock = threading.Lock()  # the engine threads look up and fill entries too
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tick: asyncio.Future | None = None

    # ---- lifecycle ------------------------------------------------------------------------------
    def attach_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def open_disk(self, size_mb: int) -> None:
        self.close_disk()
        self.disk = CompletionCache(size_mb=size_mb) if size_mb > 0 else None

    def close_disk(self) -> None:
        if self.disk is not None:
            self.disk.close()
            self.disk = None

    @property
    def speculating(self) -> bool:
        return self._settings().speculation

    # ---- waiting --------------------------------------------------------------------------------
    def next_change(self) -> asyncio.Future:
        """(event loop) A future resolved at the store's next change."""
        if self._tick is None or self._tick.done():
            self._tick = asyncio.get_running_loop().create_future()
        return self._tick

    async def wait(self, deadline: float) -> None:
        """(event loop) Until the store changes or ``deadline`` (time.monotonic()) passes."""
        left = deadline - time.monotonic()
        if left > 0:
            await asyncio.wait([self.next_change()], timeout=left)

    def changed(self) -> None:
        """(any thread) Wake whoever waits for a change."""
        post(self._loop, self._pulse)

    def _pulse(self) -> None:
        tick, self._tick = self._tick, None
        if tick is not None and not tick.done():
            tick.set_result(None)

    # ---- writing (engine threads, and a race's winner) -------------------------------------------
    def open(self, prefix: str, suffix: str, n: int, key: tuple) -> Entry:
        entry = self.typethrough.open(prefix, suffix, n=n, key=key)
        self.changed()
        return entry

    def stream(self, entry: Entry, index: int, text: str, doubts: Doubts = ()) -> None:
        self.typethrough.update(entry, index, text, doubts)
        self.changed()

    def finish(self, entry: Entry, comps: list[Completion] | None, window: str = "full") -> None:
        entry.window = window
        self.typethrough.close(entry, comps)
        self.changed()

    def discard(self, entry: Entry) -> None:
        self.typethrough.discard(entry)
        self.changed()

    def add(self, state: State, comps: list[Completion], tier: str, origin: str = "model") -> None:
        """A whole answer for ``state`` (a race's winner, a disk entry read): the newest for it."""
        if self.speculating:
            self.typethrough.add(state.prefix, state.suffix, comps, n=state.params.n,
                                 key=(*state.params.key(), tier), origin=origin)
            self.changed()

    def save(self, prefix: str, suffix: str, params: GenParams, tier: str, comps: list[Completion],
             ms: float) -> None:
        """A finished generation onto disk (a greedy one cut off too, as a start: cache.put_partial)."""
        if not comps or self.disk is None or not (is_complete(comps) or params.temperature == 0):
            return
        key = self.disk_key(prefix, suffix, params, tier)
        put = self.disk.put if is_complete(comps) else self.disk.put_partial
        if key is not None and put(key, comps, ms):
            with self._misses_lock:
                self._misses.pop(key, None)

    def consistent(self, entry: Entry, prefix: str, suffix: str) -> bool:
        return self.typethrough.consistent(entry, prefix, suffix)

    # ---- disk -----------------------------------------------------------------------------------
    def disk_key(self, prefix: str, suffix: str, params: GenParams, tier: str = "local") -> str | None:
        """The disk entry's key: the backend's model id is part of it (local and remote never mix)."""
        ident = self._identity(tier)
        if self.disk is None or ident is None or not ident[0]:
            return None
        model_id, max_p, max_s = ident
        return cache_key(model_id, params, prefix, suffix, max_p, max_s)

    def disk_get(self, prefix: str, suffix: str, params: GenParams, tier: str = "local") -> list[Completion] | None:
        key = self.disk_key(prefix, suffix, params, tier)
        disk = self.disk
        if key is None or disk is None:
            return None
        with self._misses_lock:
            if key in self._misses:
                return None
        found = disk.get(key)
        if found is None:  # the didChange and the request for one keystroke ask for the same key
            with self._misses_lock:
                self._misses[key] = None
                if len(self._misses) > DISK_MISS_MEMORY:
                    self._misses.popitem(last=False)
        return found

    def _disk_answer(self, state: State, backend: str | None, complete_only: bool = False) -> Answer | None:
        """The disk entry stored for this very state, as an answer (it joins the type-through entries)."""
        tier = backend or ("remote" if state.route == routing.REMOTE else "local")
        comps = self.disk_get(state.prefix, state.suffix, state.params, tier)
        if comps is None or (complete_only and not is_complete(comps)):
            return None
        if self.speculating:
            self.typethrough.add(state.prefix, state.suffix, comps, n=state.params.n,
                                 key=(*state.params.key(), tier), origin="disk")
        # a stored start of a generation answers now; a generation here still writes the rest
        return Answer(comps[: state.params.n], "disk", state.mode, complete=is_complete(comps), origin="disk",
                      backend=tier)

    # ---- reading --------------------------------------------------------------------------------
    def lookup(self, state: State, since: float | None, *, partial: bool, disk: bool = True,
               backend: str | None = None) -> Answer | None:
        """An answer for ``state`` without a model call: type-through / memory, then the disk.

        ``partial``: accept what a generation has streamed so far even if no line of it is complete.
        ``since``: when the request arrived (a generation finished before it is "memory", one finished
        while it waited is the "model" it waited for). ``backend``: only that backend's generations and
        disk entries (None: any generation; the disk of the state's route). A state that asks for the whole
        window (``params.quick_start`` off) is not answered "nothing" by a quick window's generation."""
        whole = not state.params.quick_start
        speculating = self.speculating
        hits = self.typethrough.lookup(state.prefix, state.suffix, n=state.params.n) if speculating else []
        if disk and hits and not any(h.exact for h in hits):
            # the exact state beats typing through another state's generation, on disk as in memory: a
            # complete entry stored for this very state (a restart revisiting it) answers whole at once,
            # where a generation typed through may still be streaming toward it
            stored = self._disk_answer(state, backend, complete_only=True)
            if stored is not None:
                return stored
        for hit in hits:
            entry = hit.entry
            tier = entry_backend(entry)
            if backend is not None and tier != backend:
                continue
            quick = entry.window == "quick"
            if hit.known_empty:  # the model finished here with nothing to add: do not ask again
                if whole and quick:
                    continue
                return Answer([], "memory", state.mode, complete=True, origin=entry.origin, backend=tier,
                              quick=quick)
            if not hit.variants:
                continue
            mode = self.mode_for(state, entry)
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
            usable = [c for c in comps if self.shows(c, state, mode, live, partial)]
            if hit.typed and mode == "single" and comps and comps[0].text.startswith("\n") and not usable \
                    and not live:
                # typed up to where the model ended the line, and its look-ahead line is not one to offer
                # at the end of this line (postprocess: offer_next_line): nothing to add here, as a
                # generation from here would say
                return Answer([], source, mode, complete=True, origin=entry.origin, backend=tier)
            if usable:
                # one line shown: done once that line is (the generation goes on with its look-ahead);
                # a look-ahead line typed into after Enter is shown at once, while a block is generated
                done = (not live or (mode == "single" and "\n" in usable[0].text.lstrip("\n"))) and \
                    not lookahead_for_block(entry, state) and (entry.origin != "disk" or entry.complete)
                return Answer(usable, source, mode, complete=done, origin=entry.origin, backend=tier)
            if hit.exact and entry.complete:  # what it wrote repeats the text around: nothing to show
                if whole and quick:
                    continue
                return Answer([], "memory", state.mode, complete=True, origin=entry.origin, backend=tier,
                              quick=quick)
        if not disk:
            return None
        return self._disk_answer(state, backend)

    def streaming(self, state: State) -> bool:
        """A generation still running serves ``state`` (what it wrote so far agrees with it)."""
        return any(hit.live and not lookahead_for_block(hit.entry, state)
                   for hit in self.typethrough.lookup(state.prefix, state.suffix, n=state.params.n))

    def covered(self, state: State) -> bool:
        """A generation (finished or still streaming, agreeing so far) or a disk entry serves ``state``."""
        for hit in self.typethrough.lookup(state.prefix, state.suffix, n=state.params.n):
            if (hit.live or hit.variants) and not lookahead_for_block(hit.entry, state):
                return True
        tier = "remote" if state.route == routing.REMOTE else "local"
        return self.disk_get(state.prefix, state.suffix, state.params, tier) is not None

    def shows(self, c: Completion, state: State, mode: Mode, live: bool, partial: bool) -> bool:
        """Would this (raw, possibly still streaming) text give a suggestion worth showing now?"""
        if live and not partial and "\n" not in c.text.lstrip("\n"):
            return False  # its first line is still being written
        truncated = live or c.finish_reason in CUT_OFF_REASONS
        return postprocess(c.text, state.prefix, state.suffix, mode=mode, max_lines=self._settings().max_lines,
                           truncated=truncated) is not None

    def mode_for(self, state: State, entry: Entry | None) -> Mode:
        """A block being typed through stays a block: once the user types into its first line, that line
        is no longer empty (a fresh request there would ask for one line), but the rest of the block is
        what they were shown."""
        if entry is not None and state.mode == "single" and (entry.key[1] or 2) > 1 and \
                not is_lookahead(entry.key[0], entry.key[1]):
            _, line_suffix = split_cursor(state.prefix, state.suffix)
            if not line_suffix.strip():
                return "multi"
        return state.mode


# a race's remote generation finished: (job, completions, when) -> None, called on the engine thread
RemoteDone = Callable[[Job, list[Completion], float], None]


class StoreHooks:
    """What one backend's scheduler (worker.Worker) writes through (worker.Hooks), on its engine thread. It
    reads only thread-safe things: the store, the cursors board, the settings; it never calls back into
    the session."""

    def __init__(self, store: Store, cursors: Cursors, settings: Callable[[], Settings], tier: str = "local",
                 on_remote_done: RemoteDone | None = None) -> None:
        self.store = store
        self.cursors = cursors
        self._settings = settings
        self.tier = tier  # whose worker these hooks serve: local | remote
        self._on_remote_done = on_remote_done

    def answer(self, job: Job) -> Result | None:
        mode: Mode = "single" if shows_one_line(job.params) else "multi"
        st = State(job.uri, job.revision, 0, job.prefix, job.suffix, mode, job.params, route=self.tier)
        found = self.store.lookup(st, since=None, partial=False, backend=self.tier)
        if found is None or not found.complete:
            return None
        return found.comps, Timings()

    def started(self, job: Job) -> None:
        settings = self._settings()
        if not settings.speculation:
            return
        key = (*job.params.key(), self.tier)
        if self.tier == "remote" and settings.routing in (routing.RACE, routing.PAUSE):
            # a race's (or a pause's) remote generation stays out of sight until it wins (race.py,
            # pause.py); its entry is kept aside only to tell whether the user's typing agrees with it
            job.handle = hidden_entry(job.prefix, job.suffix, job.params.n, key)
            return
        job.handle = self.store.open(job.prefix, job.suffix, job.params.n, key)

    def token(self, job: Job, index: int, text: str, doubts: Doubts = ()) -> bool:
        entry = job.handle
        if not isinstance(entry, Entry):
            return True
        self.store.stream(entry, index, text, doubts)
        if job.tracking or job.priority == FUTURE:
            # the document moved on since the job started: stop as soon as its text stops matching
            return self.keep(job, True)
        return True

    def finished(self, job: Job, result: Result | None, ms: float) -> None:
        entry = job.handle
        comps = result[0] if result is not None else None
        if isinstance(entry, Entry):
            if comps is None and self.tier == "remote":
                self.store.discard(entry)  # a failed remote stream: the local fallback answers instead
            else:
                self.store.finish(entry, comps, result[1].window if result is not None else "full")
        if self.tier == "remote" and comps and any(c.text for c in comps) and self._on_remote_done is not None:
            self._on_remote_done(job, comps, time.monotonic())
        if comps and result is not None and result[1].window != "quick":  # not what the full window says
            self.store.save(job.prefix, job.suffix, job.params, self.tier, comps, ms)

    def keep(self, job: Job, running: bool) -> bool:
        """(worker lock held) Does a job made for an older revision still serve the new text? A running
        generation the user typed through so far does (once it has streamed text); a future the user is
        typing toward (or has reached by accepting the suggestion) does."""
        st = self.cursors.get(job.uri)
        if st is None:
            return False
        if self.tier == "remote" and self._settings().routing == routing.PAUSE:
            return False  # the pause is over: the capable model leaves both cores to the keystrokes
        entry = job.handle
        if running and isinstance(entry, Entry) and self.store.consistent(entry, st.prefix, st.suffix):
            # a local one still in its prompt pass has written nothing the typing could agree with: the
            # newest state starts instead, on the KV this one computed (a keystroke appends to it). A remote
            # one is kept: starting again there costs a whole round trip
            return self.tier != "local" or entry.max_len > 0 or (st.prefix, st.suffix) == (job.prefix, job.suffix)
        return job.priority == FUTURE and reachable(job.prefix, job.suffix, st.prefix, st.suffix)

    def idle(self, kv: tuple[str, str] | None) -> tuple[str, int, str, str] | None:
        """Idle work: warm the KV cache for the spot the user is at (its full window)."""
        from engine.policy import speculation

        if not self._settings().speculation or self.tier != "local":
            return None
        st = self.cursors.active_state()
        if st is None:
            return None
        if speculation.should_warm((st.prefix, st.suffix), kv, idle_s=float("inf")):
            return st.uri, st.revision, st.prefix, st.suffix
        return None
