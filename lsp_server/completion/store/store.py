"""The store: every answer that exists (type-through entries, finished or streaming; the disk cache's front),
one ``Record`` per unit of work (the job serving it, how it ended), and the one way a result travels from a
scheduler to its requests: they ``submit`` here, hold a tickets.Ticket and ``wait`` or ``lookup`` on the loop.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar

from engine.cache.disk import CompletionCache
from engine.cache.entries import DiskAnswers, is_complete
from engine.cache.typethrough import Entry, Hit, TypeThrough
from engine.policy import routing
from engine.text.postprocess import CUT_OFF_REASONS, Mode, open_line_shown, postprocess, split_cursor
from engine.types import Completion, Doubts
from lsp_server.completion.events import Changed, Events
from lsp_server.completion.jobs import Ask, Job, Result, Scheduling, State, Work, WorkKey
from lsp_server.completion.policy import knobs
from lsp_server.completion.policy.planner import is_lookahead, lookahead_for_block, on_fresh_line
from lsp_server.completion.store.tickets import Alarm, Answer, Record, Ticket
from lsp_server.settings import Settings

WORK_KEPT = 512  # records of units of work kept (a request waits on the newest few)


R = TypeVar("R")


class Store:
    def __init__(self, settings: Callable[[], Settings], events: Events | None = None) -> None:
        self._settings = settings  # (event loop) the live settings; a job's lookups use its own snapshot
        self.typethrough = TypeThrough()
        self.disk = DiskAnswers(lambda size_mb: CompletionCache(size_mb=size_mb))
        self._work: OrderedDict[tuple[str, WorkKey], Record] = OrderedDict()
        self._schedulers: dict[str, Scheduling] = {}  # tier -> its scheduler (Tiers attaches them)
        self._lock = threading.Lock()  # the records: written under a scheduler's lock, read on the loop
        self._events = events or Events()
        self._events.on(Changed, self._pulse)
        self._tick: asyncio.Future | None = None

    # ---- waiting --------------------------------------------------------------------------------
    def next_change(self) -> asyncio.Future:
        if self._tick is None or self._tick.done():
            self._tick = asyncio.get_running_loop().create_future()
        return self._tick

    def changed(self) -> None:  # (any thread) waiters look again
        self._events.put(Changed())

    def _pulse(self, _: Changed) -> None:
        tick, self._tick = self._tick, None
        if tick is not None and not tick.done():
            tick.set_result(None)

    async def wait(self, look: Callable[[float], R | None], deadline: float, alarms: Sequence[Alarm] = ()) -> R | None:
        """(event loop) ``look(now)`` at once, then at every change of the store and at each alarm (a time,
        or an awaitable done), until it gives something; None at ``deadline``. One loop for every waiter."""
        owned = [asyncio.ensure_future(a) for a in alarms if inspect.iscoroutine(a)]
        times = [a for a in alarms if isinstance(a, float)]
        try:
            while True:
                now = time.monotonic()
                found = look(now)
                if found is not None:
                    return found
                if now >= deadline:
                    return None
                wake = min([deadline, *(t for t in times if t > now)])
                await asyncio.wait([self.next_change(), *owned], timeout=max(0.0, wake - now),
                                   return_when=asyncio.FIRST_COMPLETED)
        finally:
            for f in owned:
                f.cancel()

    # ---- submitting (event loop) ----------------------------------------------------------------
    def attach(self, scheduler: Scheduling) -> None:
        self._schedulers[scheduler.tier] = scheduler

    def submit(self, state: State, work: Work) -> Ticket:
        """Ask ``work.tier``'s scheduler for ``state``'s work (a background mode lets go at once: its ticket
        only reads)."""
        scheduler = self._schedulers[work.tier]
        if work.settings is None:
            work = replace(work, settings=self._settings())  # the job runs under the settings of now
        job = scheduler.submit(state, work)
        waits = work.mode is Ask.REQUEST
        return Ticket(self, state, work.tier, scheduler if waits else None, job)

    def reading(self, state: State) -> Ticket:
        """A ticket for work nobody submitted here: it waits for what the store gets for ``state``."""
        return Ticket(self, state, None, None, None)

    # ---- units of work (a scheduler's lock held) ------------------------------------------------
    def queued(self, tier: str, job: Job) -> None:
        """``job`` serves its state's work now (a new job, or one a request joined)."""
        key = (tier, job.state.key())
        with self._lock:
            work = self._work.get(key)
            if work is None or work.seq != job.seq:
                self._work[key] = Record(job.seq, job.state)
            self._work.move_to_end(key)
            while len(self._work) > WORK_KEPT:
                self._work.popitem(last=False)

    def repeat(self, tier: str, job: Job) -> Record | None:
        """This very work's record, if it was just done: its result answers again, no job needed."""
        with self._lock:
            work = self._work.get((tier, job.state.key()))
        ok = work is not None and work.ended and work.error is None and work.state.serves(job.state)
        return work if ok else None

    def ended(self, tier: str, job: Job, result: Result | None, error: BaseException | None) -> None:
        """How ``job`` ended for its state: a result, or the error its requests hear."""
        with self._lock:
            work = self._work.get((tier, job.state.key()))
            if work is None or work.seq != job.seq:
                return  # a newer job serves that work: its requests wait for that one
            work.ended, work.result, work.error, work.at = True, result, error, time.monotonic()
            work.entry = job.handle if isinstance(job.handle, Entry) else None
        self.changed()

    def outcome(self, tier: str, state: State) -> Record | None:
        with self._lock:
            work = self._work.get((tier, state.key()))
        return work if work is not None and work.ended and work.state.serves(state) else None

    def forget(self, tier: str) -> None:
        """A model was swapped: what the old one made is no repeat of the new one's (queued work keeps its
        record: its requests wait for the new model)."""
        with self._lock:
            for key in [k for k, w in self._work.items() if k[0] == tier and w.ended]:
                del self._work[key]

    # ---- entries (engine threads) ----------------------------------------------------------------
    def open(self, prefix: str, suffix: str, n: int, key: tuple, work: str = "") -> Entry:
        entry = self.typethrough.open(prefix, suffix, n=n, key=key, work=work)
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

    # ---- reading --------------------------------------------------------------------------------
    def lookup(self, state: State, since: float | None, *, partial: bool, disk: bool = True,
               backend: str | None = None, settings: Settings | None = None) -> Answer | None:
        """An answer for ``state`` without a model call: type-through / memory, then the disk. ``partial``:
        what has streamed, even with no line complete; ``since``: when the request came (finished before:
        "memory"); ``backend``: only that backend's; ``settings``: a job's snapshot (engine thread)."""
        s = settings or self._settings()
        hits = self.typethrough.lookup(state.prefix, state.suffix, n=state.params.n) if s.speculation else []
        if disk and hits and not any(h.exact for h in hits):
            # the exact state beats typing through another state's generation, on disk as in memory: a
            # complete entry stored for this very state (a restart revisiting it) answers whole at once,
            # where a generation typed through may still be streaming toward it
            stored = self._disk_answer(state, backend, s.speculation, complete_only=True)
            if stored is not None:
                return stored
        for hit in hits:
            if backend is not None and entry_backend(hit.entry) != backend:
                continue
            found = self._hit_answer(hit, state, since, partial, s)
            if found is not None:
                return found
        return self._disk_answer(state, backend, s.speculation) if disk else None

    def _hit_answer(self, hit: Hit, state: State, since: float | None, partial: bool,
                    settings: Settings) -> Answer | None:
        """What one type-through hit answers ``state`` (None: ask the next hit)."""
        entry = hit.entry
        tier = entry_backend(entry)
        quick = entry.window == "quick"
        # nothing to add here; but nothing from the quick window is no answer for a state wanting the whole
        nothing = None if quick and not state.params.quick_start else \
            Answer([], "memory", state.mode, complete=True, origin=entry.origin, backend=tier, quick=quick)
        if hit.known_empty:  # the model finished here with nothing to add: do not ask again
            return nothing
        if not hit.variants:
            return None
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
        usable = [c for c in comps if self.shows(c, state, mode, live, partial, settings)]
        if hit.typed and mode == "single" and comps and comps[0].text.startswith("\n") and not usable and not live:
            # typed up to where the model ended the line, and its look-ahead line is not one to offer at the
            # end of this line (postprocess: offer_next_line): nothing to add here, as a generation would say
            return Answer([], source, mode, complete=True, origin=entry.origin, backend=tier)
        if usable:
            # one line shown: done once that line is (the generation goes on with its look-ahead); a
            # look-ahead line typed into after Enter is shown at once, while a block is generated; a batch
            # cut off (or a disk start) is the whole answer only when it has as many variants as asked
            whole = entry.complete or entry.origin != "disk" and len(usable) >= state.params.n
            done = (not live or (mode == "single" and "\n" in usable[0].text.lstrip("\n"))) and \
                not lookahead_for_block(entry, state) and whole
            return Answer(usable, source, mode, complete=done, origin=entry.origin, backend=tier, entry=entry)
        if hit.exact and entry.complete:  # what it wrote repeats the text around: nothing to show
            return nothing
        return None

    def _disk_answer(self, state: State, backend: str | None, speculating: bool,
                     complete_only: bool = False) -> Answer | None:
        """The disk entry stored for this very state, as an answer (it joins the type-through entries)."""
        tier = backend or ("remote" if state.route == routing.REMOTE else "local")
        comps = self.disk.get(state.prefix, state.suffix, state.params, tier)
        if comps is None or (complete_only and not is_complete(comps)):
            return None
        if speculating:
            self.typethrough.add(state.prefix, state.suffix, comps, n=state.params.n,
                                 key=(*state.params.key(), tier), origin="disk")
        # a stored start of a generation answers now; a generation here still writes the rest
        return Answer(comps[: state.params.n], "disk", state.mode, complete=is_complete(comps), origin="disk",
                      backend=tier)

    def streaming(self, state: State) -> bool:
        """A generation still running serves ``state`` (what it wrote so far agrees with it)."""
        return any(hit.live and not lookahead_for_block(hit.entry, state)
                   for hit in self.typethrough.lookup(state.prefix, state.suffix, n=state.params.n))

    def shows(self, c: Completion, state: State, mode: Mode, live: bool, partial: bool,
              settings: Settings | None = None) -> bool:
        """Would this (raw, possibly still streaming) text give a suggestion worth showing now?"""
        if live and not partial and "\n" not in c.text.lstrip("\n"):
            return False  # its first line is still being written
        truncated = live or c.finish_reason in CUT_OFF_REASONS
        max_lines = (settings or self._settings()).max_lines
        # knobs.FRESH_LINE_HEAD's languages read a fresh line as items.py shows it: a streaming head answers a pause
        # after Enter; the others stay as they were measured (the language guessed from the text, whole statements)
        language = state.params.language if state.params.language in knobs.FRESH_LINE_HEAD else None
        fresh = language is not None and on_fresh_line(state)
        return postprocess(c.text, state.prefix, state.suffix, mode=mode, max_lines=max_lines, truncated=truncated,
                           language=language, open_line=fresh and open_line_shown(c.finish_reason, language=language)) is not None

    def mode_for(self, state: State, entry: Entry | None) -> Mode:
        """A block being typed through stays a block, though its first line is no longer empty (a fresh
        request there would ask for one line)."""
        if entry is not None and state.mode == "single" and (entry.key[1] or 2) > 1 and \
                not is_lookahead(entry.key[0], entry.key[1]):
            _, line_suffix = split_cursor(state.prefix, state.suffix)
            if not line_suffix.strip():
                return "multi"
        return state.mode


def entry_backend(entry: Entry) -> str:
    """Which backend wrote a type-through entry (its key ends with the backend's tier)."""
    tail = entry.key[-1] if entry.key else None
    return tail if tail in ("local", "remote") else "local"
