"""The completion service: the store, one scheduler (worker) per backend, the planner and the race.

One keystroke's path reads top to bottom (docs/architecture.md): the session hands the service a
document's new state (``did_change``); the service asks the store whether an answer exists, else
submits the state to the scheduler, which runs the model and writes what it streams into the store
(``StoreHooks``); a request (``answer``) looks the state up in the store and waits on the store's
changes until its deadline; an explicit request's item 1 (the automatic request's line first) is
explicit.py's. Nothing here calls back into the session except the two sinks it was given (status
events, flint/refresh).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from engine.backends import Backend
from engine.policy import routing, speculation
from engine.text.statements import split_cursor
from engine.types import Completion, GenParams
from lsp_server.completion import explicit, planner
from lsp_server.completion.pause import Pauses
from lsp_server.completion.planner import (
    AUTOMATIC_BUDGET_S,
    FUTURE_BUDGET_S,
    INVOKED_BUDGET_S,
    JOB_BUDGET_S,
    PARTIAL_AFTER_S,
    PAUSE_HOLD_S,
    REFRESH_WITHIN_S,
    Cursors,
    State,
    TypingClock,
)
from lsp_server.completion.race import Races
from lsp_server.completion.refresh import Refresher
from lsp_server.completion.store import Answer, Store, StoreHooks, settle_rule
from lsp_server.completion.worker import SPECULATIVE, USER, EngineLike, Job, JobDropped, Result, Worker
from lsp_server.settings import Settings

log = logging.getLogger(__name__)

# on_event(tier, state, info): a scheduler's status ("loading" | "ready" | "busy" | "error"), any thread
EventSink = Callable[[str, str, dict[str, Any]], None]


class CompletionService:
    def __init__(self, settings: Callable[[], Settings], load: Callable[[Settings], EngineLike],
                 load_remote: Callable[[Settings], EngineLike], revision_of: Callable[[str], int | None],
                 on_event: EventSink, on_refresh: Callable[[str, int], None],
                 version_of: Callable[[str], int],
                 context: Callable[[State | None], Any] | None = None) -> None:
        self._settings = settings
        self._load = load
        self._load_remote = load_remote
        self._revision_of = revision_of
        self._on_event = on_event
        self._on_refresh = on_refresh
        self._version_of = version_of
        self.store = Store(settings, self._identity)
        self.cursors = Cursors()
        self.clock = TypingClock()
        self.races = Races(self.store, self.cursors, revision_of, self._late_win)
        self.pauses = Pauses(self.store, revision_of, self._late_win)
        self.refresher = Refresher(self.store, revision_of, on_refresh)
        self.on_late_win: Callable[[str, float], None] = lambda uri, ms: None  # the session's status line
        self._wstart: dict[str, int] = {}  # each document's prefix window start (kept while it fits)
        self._asked: dict[str, asyncio.Event] = {}  # uri -> set when a newer request for it comes
        self.worker = Worker(lambda: load(settings()), revision_of, lambda st, info: on_event("local", st, info),
                             StoreHooks(self.store, self.cursors, settings, "local"),
                             context=self._context_source(context) if context is not None else None)
        self.remote_worker: Worker | None = None  # the capable tier: its own thread, never holds the local model
        self._remote_key: tuple | None = None
        self._started = False

    def _context_source(self, context: Callable[[State | None], Any]) -> Callable[[], tuple[str | None, Any]]:
        """The worker's context source: (the active document, its newest context block)."""
        def source() -> tuple[str | None, Any]:
            st = self.cursors.active_state()
            return (st.uri if st is not None else None), context(st)
        return source

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self._started = True
        self.worker.start()
        self.sync_remote()

    def attach_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self.store.attach_loop(loop)
        self.races.attach_loop(loop)
        self.pauses.attach_loop(loop)

    def reload(self) -> None:
        self.worker.reload(lambda: self._load(self._settings()))

    def sync_remote(self) -> bool:
        """Start, replace or stop the capable tier to match the settings; False when there is none."""
        s = self._settings()
        key = s.remote_key() if s.capable_tier() is not None else None
        if key == self._remote_key and (key is None) == (self.remote_worker is None):
            return self.remote_worker is not None
        old, self.remote_worker = self.remote_worker, None
        self._remote_key = key
        if old is not None:
            _stop_worker(old)
        if key is None or not self._started:
            return False
        w = Worker(lambda: self._load_remote(self._settings()), self._revision_of,
                   lambda st, info: self._on_event("remote", st, info),
                   StoreHooks(self.store, self.cursors, self._settings, "remote", self._remote_done))
        self.remote_worker = w
        w.start()
        return True

    def _remote_done(self, job: Job, comps: list[Completion], arrived: float) -> None:
        """(engine thread) A capable-tier generation finished: a race's or a pause's."""
        self.races.remote_done(job, comps, arrived)
        self.pauses.remote_done(job, comps, arrived)

    def shutdown(self) -> None:
        self.worker.stop()
        if self.remote_worker is not None:
            _stop_worker(self.remote_worker)
        self.store.close_disk()

    def engine(self, tier: str = "local") -> Backend | None:
        w = self.remote_worker if tier == "remote" else self.worker
        return w.engine if w is not None else None

    def remote_ready(self) -> bool:
        """Is a capable tier configured, loaded and not backing off after a failure?"""
        eng = self.engine("remote")
        return eng is not None and eng.ready()

    def backend_name(self, tier: str) -> str:
        """What an answer's backend is called on items and in the status: ``local`` (the fast model),
        ``remote`` (a server) or ``capable`` (a second local model)."""
        if tier != "remote":
            return "local"
        eng = self.engine("remote")
        return eng.kind if eng is not None else self._settings().capable_tier() or "remote"

    def windows(self, tier: str = "local") -> tuple[int, int]:
        """The backend's prompt windows (its config; the defaults while none is loaded)."""
        eng = self.engine(tier)
        cfg = eng.config if eng is not None else None
        if cfg is None:
            return planner.DEFAULT_MAX_PREFIX_CHARS, planner.DEFAULT_MAX_SUFFIX_CHARS
        return cfg.max_prefix_chars, cfg.max_suffix_chars

    def _identity(self, tier: str) -> tuple[str, int, int] | None:
        eng = self.engine(tier)
        if eng is None or not eng.model_id:
            return None
        digest = eng.context_digest  # a suggestion made with another context block is another entry
        return (f"{eng.model_id}+context:{digest}" if digest else eng.model_id, *self.windows(tier))

    # ---- states ---------------------------------------------------------------------------------
    def state(self, uri: str, revision: int, text: str, offset: int, *, invoked: bool, n: int | None = None,
              variants: bool = False, language: str | None = None) -> State:
        """The engine's work for a cursor. Requests and speculation share it, so a request for the spot a
        didChange already started joins that generation."""
        start, prefix, suffix = planner.window(text, offset, self.windows()[0], self._wstart.get(uri))
        self._wstart[uri] = start
        return planner.state_at(self._settings(), uri, revision, offset, prefix, suffix, invoked=invoked,
                                remote_ready=self.remote_ready(), n=n, variants=variants, language=language)

    # ---- keystrokes -----------------------------------------------------------------------------
    def did_change(self, uri: str, revision: int, state: State | None, *, speculate: bool) -> None:
        """After an edit: stop stale work (but keep a generation the user is typing through), and start
        the newest state's generation now (newest wins, no debounce), unless the store answers it."""
        burst = self.clock.keystroke(uri, time.monotonic())
        self.cursors.set(uri, state)
        spec = self._settings().speculation and state is not None
        for w in self._workers():
            hooks = w.hooks
            w.document_changed(uri, revision, hooks.keep if spec and isinstance(hooks, StoreHooks) else None)
        if not spec or not speculate or state is None or state.skip:
            return
        if not burst and self._in_store(state):
            return  # typed through, or on disk: no model call for this keystroke
        self._speculate(state)

    def did_move(self, uri: str, state: State) -> None:
        """The cursor moved without an edit: what was planned for the old spot goes (its futures; a
        generation there stops as the new one starts), and the new spot's generation starts now, in the
        moment before the user types there, unless the store answers it. Not a keystroke: the typing
        clock is left alone."""
        self.cursors.set(uri, state)
        if not self._settings().speculation or state.skip:
            return
        for w in self._workers():
            w.set_futures(uri, state.revision, [])
        if self._in_store(state):
            self.worker.poke()  # answered already: idle time warms the spot's whole window
            return
        self._speculate(state)

    def _in_store(self, state: State) -> bool:
        """Does the store answer this state without a model call (typed through, memory, disk)?"""
        return self.store.lookup(state, since=None, partial=True,
                                 backend="remote" if state.route == routing.REMOTE else None) is not None

    def _speculate(self, state: State) -> None:
        """Start the state's generation on the tier(s) it is routed to, nobody waiting for it yet."""
        for w, budget in self._speculation_workers(state):
            w.submit(state.uri, state.revision, state.prefix, state.suffix, state.params, SPECULATIVE,
                     budget_s=budget, not_before=state.not_before)

    def did_close(self, uri: str) -> None:
        self.cursors.forget(uri)
        self.pauses.forget(uri)
        self.clock.forget(uri)
        self._wstart.pop(uri, None)
        asked = self._asked.pop(uri, None)
        if asked is not None:
            asked.set()  # a request still waiting there is answered (Superseded) now
        for w in self._workers():
            w.document_closed(uri)

    def _workers(self) -> list[Worker]:
        return [self.worker] if self.remote_worker is None else [self.worker, self.remote_worker]

    def _speculation_workers(self, state: State) -> list[tuple[Worker, float]]:
        """Where a state's speculative generation runs: the local model, the remote (routed there), or
        both (race: the local answer is shown at once, the remote one may replace it)."""
        rw = self.remote_worker
        remote_budget = max(self._settings().remote_timeout_ms / 1000,
                            JOB_BUDGET_S if state.route == routing.REMOTE else 0.0)
        if state.route == routing.REMOTE and rw is not None:
            self.worker.poke()  # the keystrokes after this one are local: warm its KV meanwhile
            return [(rw, remote_budget)]
        if state.route == routing.RACE and rw is not None:
            return [(self.worker, JOB_BUDGET_S), (rw, remote_budget)]
        return [(self.worker, JOB_BUDGET_S)]

    # ---- answers --------------------------------------------------------------------------------
    async def answer(self, state: State, since: float, invoked: bool) -> Answer | None:
        """The best answer for a state within its deadline, from the backend its route names (engine/
        routing.py): the store, else the model (joined or started). A remote that fails, is slow or is
        backing off leaves the answer to the local model; a race shows the local answer unless the remote
        one is there first within the race budget. Raises the workers' exceptions."""
        older = self._asked.pop(state.uri, None)
        if older is not None:
            older.set()  # a request still waiting outside the worker (explicit.greedy_first) is superseded
        self._asked[state.uri] = asyncio.Event()
        route = state.route
        if route != routing.LOCAL and not self.remote_ready():
            route = routing.LOCAL
        if route == routing.REMOTE:
            return await self._answer_remote(state, since, invoked)
        if route == routing.RACE and self.remote_worker is not None:
            s = self._settings()
            return await self.races.answer(state, since, s.race_budget_ms / 1000, self.remote_worker,
                                           s.remote_timeout_ms / 1000,
                                           lambda: self._answer_on(self.worker, state, since, invoked))
        return await self._answer_on(self.worker, state, since, invoked)

    async def _answer_remote(self, state: State, since: float, invoked: bool) -> Answer | None:
        rw = self.remote_worker
        assert rw is not None
        # an explicit request waits for the remote up to remoteTimeoutMs, then asks the local model; one
        # made as the user types has its usual deadline (and the generation goes on for the next ask)
        limit = self._settings().remote_timeout_ms / 1000 if invoked else AUTOMATIC_BUDGET_S
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
        ans = await self._answer_on(self.worker, state, time.monotonic(), invoked)
        if ans is not None:
            ans.note = f" (local fallback: {reason})"
        return ans

    async def _answer_on(self, worker: Worker, state: State, since: float, invoked: bool,
                         budget: float | None = None, backend: str | None = None) -> Answer | None:
        """The answer from one backend's worker: the store (``backend``: only that backend's entries),
        else its model. The request keeps its deadline even while the model (re)loads (issue 14.8)."""
        if budget is None:
            budget = INVOKED_BUDGET_S if invoked else AUTOMATIC_BUDGET_S
        deadline = since + budget
        tier = "remote" if worker is self.remote_worker else "local"
        # an explicit request waits for the whole suggestion; one made as the user types is shown what
        # has streamed after PARTIAL_AFTER_S (the rest of the word or line; type-through extends it), but
        # on a line nothing is typed on yet only whole lines: a part would be a statement cut in its middle
        show_partial_after = budget if invoked else PARTIAL_AFTER_S
        fresh_line = not invoked and not split_cursor(state.prefix, state.suffix)[0].strip()
        found = self.store.lookup(state, since, partial=False, backend=backend)
        if invoked and found is not None and found.quick:
            # the quick window had nothing here: the user asked, so the whole window is worth its wait
            state = planner.whole_window(state)
            found = self.store.lookup(state, since, partial=False, backend=backend)
        if not self._settings().speculation:
            # a plain server: exact repeats, the disk, else one model call within the budget
            if found is not None:
                return found
            fut = worker.submit(state.uri, state.revision, state.prefix, state.suffix, state.params, USER,
                                budget_s=budget)
            afut = asyncio.wrap_future(fut)
            try:
                await asyncio.wait([afut], timeout=max(0.0, deadline - time.monotonic()))
            except asyncio.CancelledError:
                fut.cancel()
                raise
            if not afut.done():
                worker.release(fut)
                return None
            return self._from_result(state, afut.result(), tier)
        if found is not None and found.complete:
            return found
        job_budget = JOB_BUDGET_S if tier == "local" else max(budget, self._settings().remote_timeout_ms / 1000)
        if invoked and state.params.n > 1 and tier == "local" and not self.store.streaming(state):
            # (where the variants' own generation already runs, its item 1 is shown once settled: below)
            first = await explicit.greedy_first(self.store, worker, self._auto_twin(state), since, deadline,
                                                self._asked.setdefault(state.uri, asyncio.Event()),
                                                self._settings, backend)
            if first is not None:
                # an explicit request: the automatic suggestion for this state (made, or made now: one
                # greedy row with its drafts is the fastest line) is item 1; the other variants follow
                # (their job runs to its end on the KV the line left, then flint/refresh)
                fut = worker.submit(state.uri, state.revision, state.prefix, state.suffix, state.params, USER,
                                    budget_s=job_budget, not_before=state.not_before)
                worker.release(fut, awaited=True)
                return first
            if self.store.streaming(self._auto_twin(state)):
                return None  # the line is still coming (prompt pass): flint/refresh when it is there
        fut = worker.submit(state.uri, state.revision, state.prefix, state.suffix, state.params, USER,
                            budget_s=job_budget, not_before=state.not_before, detachable=not invoked)
        if found is not None and found.comps and found.source in ("type-through", "disk"):
            worker.release(fut)  # a start read or typed through answers now; the generation writes the rest
            return found
        afut = asyncio.wrap_future(fut)
        settle = settle_rule(state, self._settings().max_lines) if invoked and state.params.n > 1 else None
        try:
            while True:
                if afut.done():
                    result = afut.result()  # raises the worker's errors
                    if state.params.quick_start and result[1].window == "quick":
                        again = self.store.lookup(state, since, partial=False, disk=False, backend=backend)
                        if again is not None and again.quick:  # nothing from the quick window
                            if not invoked or time.monotonic() >= deadline:
                                return again  # the session follows it with the whole window (follow_whole)
                            state = planner.whole_window(state)  # the user asked: the whole one, now
                            fut = worker.submit(state.uri, state.revision, state.prefix, state.suffix,
                                                state.params, USER, budget_s=job_budget, anew=True,
                                                not_before=state.not_before)
                            afut = asyncio.wrap_future(fut)
                            continue
                    return self._from_result(state, result, tier)
                now = time.monotonic()
                partial = not fresh_line and (now >= deadline or (not invoked and now - since >= show_partial_after))
                found = self.store.lookup(state, since, partial=partial, disk=False, backend=backend)
                # a finished answer goes out at once, and one typed through; one still streaming after
                # PARTIAL_AFTER_S; at the deadline, whatever exists
                if found is not None and (found.complete or found.source in ("type-through", "disk") or
                                          now - since >= show_partial_after or now >= deadline):
                    worker.release(fut)
                    return found
                if settle is not None:
                    # an explicit request shows item 1 once it is settled; the other variants follow
                    early = explicit.settled_first(self.store, state, since, settle, backend)
                    if early is not None:
                        worker.release(fut, awaited=True)  # the variants asked for are finished
                        return early
                if now >= deadline:
                    worker.release(fut, awaited=True)  # keep generating: a refresh / the next ask gets it
                    return None
                wait_s = min(deadline, since + show_partial_after) - now if now - since < show_partial_after \
                    else deadline - now
                await asyncio.wait([afut, self.store.next_change()], timeout=max(0.0, wait_s),
                                   return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            fut.cancel()
            raise

    def _auto_twin(self, state: State) -> State:
        return explicit.auto_twin(self._settings(), state, self.remote_ready())

    def _from_result(self, state: State, result: Result, backend: str = "local") -> Answer:
        comps = result[0]
        source = comps[0].source if comps else "model"
        return Answer(comps, source, self.store.mode_for(state, None), complete=True,
                      origin="disk" if source == "disk" else "model", backend=backend)

    # ---- after an answer went out ---------------------------------------------------------------
    def plan_futures(self, state: State, text: str, replace: int) -> None:
        """A suggestion (LF ``text``, replacing ``replace`` characters) is on screen: pre-generate where
        accepting it leads, unless already covered. Futures wait for a pause (TypingClock.future_delay) and
        run below any work for the current state."""
        plan: list[tuple[str, str, GenParams, float | None]] = []
        remote_plan: list[tuple[str, str, GenParams, float | None]] = []
        s = self._settings()
        for f in speculation.futures(state.prefix, state.suffix, text, replace):
            fs = planner.state_at(s, state.uri, state.revision, state.offset, f.prefix, f.suffix, invoked=False,
                                  remote_ready=self.remote_ready(), language=state.params.language)
            if fs.skip or self.store.covered(fs):
                continue
            # where the state's own generation would run (a race's futures are local: that is what shows)
            (remote_plan if fs.route == routing.REMOTE and self.remote_worker is not None else plan).append(
                (fs.prefix, fs.suffix, fs.params, FUTURE_BUDGET_S))
        if plan:
            log.debug("futures for %s: %d", state.uri, len(plan))
        not_before = time.monotonic() + self.clock.future_delay(state.uri)
        if self._pausing():
            not_before += PAUSE_HOLD_S
        self.worker.set_futures(state.uri, state.revision, plan, not_before=not_before)
        if self.remote_worker is not None:
            self.remote_worker.set_futures(state.uri, state.revision, remote_plan, not_before=not_before)

    def plan_pause(self, state: State, answer: Answer | None) -> None:
        """An automatic answer from the local model went out (routing ``pause``): the capable tier writes
        this spot's suggestion if the user pauses here (pause.py)."""
        rw = self.remote_worker
        if rw is None or not self._pausing() or answer is None or answer.backend != "local":
            return
        self.pauses.plan(state, rw, self.clock.pause_starts(state.uri, time.monotonic()),
                         short_window=self.backend_name("remote") == "capable")

    def _pausing(self) -> bool:
        """Routing ``pause`` with its capable tier ready."""
        return self._settings().routing == routing.PAUSE and self.remote_ready()

    def follow_whole(self, state: State, version: int) -> None:
        """The quick first window had nothing to show at this spot (its lines were dropped: a short window
        misses the code that decides them). The user is here: the whole window runs now, to its end unless
        the user moves on, and the client hears flint/refresh if it has a line (the store then answers the
        automatic state from it, newest first). It waits for a pause, as futures do: a typist who goes on
        makes it stale before its prompt pass holds up the next keystroke."""
        whole = planner.whole_window(state)
        if whole is state or state.route == routing.REMOTE or whole.skip:
            return
        not_before = max(whole.not_before, time.monotonic() + self.clock.future_delay(state.uri))
        fut = self.worker.submit(whole.uri, whole.revision, whole.prefix, whole.suffix, whole.params, USER,
                                 budget_s=JOB_BUDGET_S, not_before=not_before)
        self.worker.release(fut, awaited=True)
        self.watch_for_refresh(whole, version, within=JOB_BUDGET_S)

    def watch_for_refresh(self, state: State, version: int, within: float = REFRESH_WITHIN_S,
                          greedy: bool = False) -> None:
        """A partial answer went out: once its generation has the whole suggestion (the document still at
        that state), the client hears flint/refresh and asks again (the store answers at once).
        ``greedy``: an explicit request got nothing yet; its automatic twin's line is enough (it is item 1
        of the next ask: explicit.greedy_first)."""
        watched = [state] + ([self._auto_twin(state)] if greedy and state.params.n > 1 else [])
        self.refresher.watch(watched, version, within)

    def _late_win(self, uri: str, ms: float) -> None:
        self.on_late_win(uri, ms)
        self._on_refresh(uri, self._version_of(uri))


def _stop_worker(w: Worker) -> None:
    w.stop(timeout=2.0)
    if w.engine is not None:
        w.engine.close()
