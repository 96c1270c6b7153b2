"""The completion service: the store, one scheduler per backend tier, the planner's plans carried out. A
keystroke's path reads top to bottom (docs/architecture.md); the engine threads reach it only through events.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from engine.backends import Backend
from engine.policy import routing
from engine.types import DocRef
from lsp_server.completion.events import Events, Idle, Status
from lsp_server.completion.jobs import Ask, JobDropped, State, Work
from lsp_server.completion.policy import knobs, planner
from lsp_server.completion.requests import explicit
from lsp_server.completion.requests.followups import FollowUps
from lsp_server.completion.requests.records import DocRecords
from lsp_server.completion.requests.tiers import Load, Tiers
from lsp_server.completion.scheduler.runner import windows_of
from lsp_server.completion.scheduler.worker import Worker
from lsp_server.completion.store.store import Store
from lsp_server.completion.store.tickets import Answer, Ticket
from lsp_server.documents import uri_path
from lsp_server.settings import Settings

log = logging.getLogger(__name__)

class CompletionService:
    def __init__(self, settings: Callable[[], Settings], load: Load, load_remote: Load,
                 revision_of: Callable[[str], int | None], on_status: Callable[[Status], None],
                 on_refresh: Callable[[str, int], None], context: Callable[[State], Any] | None = None) -> None:
        self._settings = settings
        self._revision_of = revision_of
        self.events = Events()
        self.events.on(Status, on_status)
        self.store = Store(settings, self.events)
        self.tiers = Tiers(self.store, settings, self.events, load, load_remote)
        self.docs = DocRecords()  # one record per open document: everything kept about it here
        self.follow = FollowUps(self.store, self.tiers, self.docs, settings, on_refresh, revision_of, context)
        self.events.on(Idle, self.follow.idle)

    # ---- the tiers (tiers.py starts, replaces and stops them) ---------------------------------------
    def engine(self, tier: str = "local") -> Backend | None:
        w = self.tiers.remote if tier == "remote" else self.tiers.local
        return w.engine if w is not None else None

    def backend_name(self, tier: str) -> str:
        """What an answer's backend is called: ``local`` (the fast model), or the capable tier's name."""
        return "local" if tier != "remote" else self.tiers.remote_name()

    def windows(self) -> tuple[int, int]:
        return windows_of(self.tiers.local.engine)  # the local model's

    # ---- states ---------------------------------------------------------------------------------
    def state(self, uri: str, revision: int, text: str, offset: int, *, invoked: bool, n: int | None = None,
              variants: bool = False, language: str | None = None) -> State:
        """The engine's work for a cursor, shared by requests and speculation (a request joins the work a
        didChange started)."""
        record = self.docs[uri]
        kept = record.window
        start, prefix, suffix = planner.window(text, offset, self.windows()[0], kept[0] if kept else None)
        if kept is None or kept[0] != start:
            record.window = (start, time.monotonic())
        path = uri_path(uri)  # the monitor's analyser reads the whole document, not the window
        doc = DocRef(str(path) if path is not None else None, revision, text, start)
        return planner.state_at(self._settings(), uri, revision, offset, prefix, suffix, invoked=invoked,
                                remote_ready=self.tiers.remote_ready(), n=n, variants=variants, language=language,
                                doc=doc)

    def request_state(self, uri: str, revision: int, text: str, offset: int, *, invoked: bool, n: int | None,
                      variants: bool, language: str | None) -> State:
        """A request's state: an automatic one at the spot the didChange prepared is that very state."""
        old = self.docs[uri].state
        auto = not invoked and n is None and not variants
        if auto and old is not None and old.revision == revision and old.offset == offset:
            state = old
        else:
            state = self.state(uri, revision, text, offset, invoked=invoked, n=n, variants=variants,
                               language=language)
        if not invoked:
            self.at(uri, state)
        return state

    def at(self, uri: str, state: State) -> None:
        """The user is at ``state``: what a generation kept through typing must agree with."""
        self._here(uri, state)
        for w in self.tiers.workers:
            w.moved(uri, state)

    def _here(self, uri: str, state: State | None) -> None:
        """The user is at ``state`` in ``uri`` (None: a didOpen without a cursor; it does not move them)."""
        self.docs[uri].state = state
        if state is not None:
            self.docs.active = uri

    # ---- keystrokes -----------------------------------------------------------------------------
    def did_change(self, uri: str, revision: int, state: State | None, *, speculate: bool) -> None:
        """After an edit: stale work stops (a generation typed through goes on) and the newest state's starts
        now, unless the store answers it."""
        now, record = time.monotonic(), self.docs[uri]
        burst = planner.burst(record.keystrokes, now)
        record.keystrokes.append(now)
        plan = planner.keystroke(self._settings(), state, speculate=speculate, burst=burst, now=now)
        self._here(uri, state)
        for w in self.tiers.workers:
            w.document_changed(uri, revision, plan.current)
        if plan.start and plan.current is not None and not (plan.ask_store and self._in_store(plan.current)):
            self._speculate(plan.current, plan.not_before)  # (typed through, or on disk: no model call)

    def did_move(self, uri: str, state: State) -> None:
        """The cursor moved without an edit: the new spot's generation starts now, before the user types there,
        unless the store answers it (not a keystroke: the typing clock is left alone)."""
        self.at(uri, state)
        if not planner.moved(self._settings(), state).start:
            return
        if self._in_store(state):
            self.tiers.local.poke()  # answered already: idle time warms the spot's whole window
            return
        self._speculate(state)

    def _in_store(self, state: State) -> bool:
        return self.store.lookup(state, since=None, partial=True,
                                 backend="remote" if state.route == routing.REMOTE else None) is not None

    def _speculate(self, state: State, not_before: float = 0.0) -> None:
        """Start the state's generation on the tier it is routed to, nobody waiting for it yet."""
        remote = self.tiers.remote is not None
        if state.route == routing.REMOTE and remote:
            self.tiers.local.poke()  # the keystrokes after this one are local: warm its KV meanwhile
        tier, budget = planner.speculation_tier(self._settings(), state, remote=remote)
        self.store.submit(state, Work(Ask.SPECULATE, budget, not_before, tier=tier))

    def did_close(self, uri: str) -> None:
        self.docs.close(uri)  # (a request still waiting there hears Superseded now)
        for w in self.tiers.workers:
            w.document_closed(uri)

    # ---- answers --------------------------------------------------------------------------------
    async def answer(self, state: State, since: float, invoked: bool) -> Answer | None:
        """The best answer for a state within its deadline, from the backend its route names (engine/
        routing.py): the store, else the model (joined or started). A remote that fails, is slow or is
        backing off leaves the answer to the local model. Raises the workers' exceptions."""
        record = self.docs[state.uri]
        if record.asked is not None:
            record.asked.set()  # a request still waiting outside the worker (explicit.greedy_first) is superseded
        record.asked = asyncio.Event()
        if state.route == routing.REMOTE and self.tiers.remote_ready():
            return await self._answer_remote(state, since, invoked)
        return await self._answer_on(self.tiers.local, state, since, invoked)

    async def _answer_remote(self, state: State, since: float, invoked: bool) -> Answer | None:
        rw = self.tiers.remote
        assert rw is not None
        # an explicit request waits for the remote up to remoteTimeoutMs, then asks the local model; one
        # made as the user types has its usual deadline (and the generation goes on for the next ask)
        limit = self._settings().remote_timeout_ms / 1000 if invoked else knobs.AUTOMATIC_BUDGET_S
        self.tiers.local.poke()  # the local model warms its KV for this spot meanwhile (the next keystrokes)
        try:
            ans = await self._answer_on(rw, state, since, invoked, budget=limit)
        except (JobDropped, asyncio.CancelledError):
            raise  # the document changed, a newer request came: the same for any backend
        except Exception as e:
            reason = f"remote failed ({e})"
        else:
            if ans is not None and (ans.comps or ans.complete) or not invoked:
                return ans
            reason = f"no remote answer within {limit * 1000:.0f} ms"
        log.info("remote answer unavailable for %s: %s; asking the local model", state.uri, reason)
        ans = await self._answer_on(self.tiers.local, state, time.monotonic(), invoked)
        if ans is not None:
            ans.note = f" (local fallback: {reason})"
        return ans

    async def _answer_on(self, worker: Worker, state: State, since: float, invoked: bool,
                         budget: float | None = None) -> Answer | None:
        """From one backend: the store (a remote worker: only its own entries), else its model, within the
        request's deadline even while the model (re)loads (issue 14.8)."""
        backend = "remote" if worker.tier == "remote" else None
        plan = planner.waiting(self._settings(), state, since, invoked=invoked, remote=backend is not None,
                               budget_s=budget)
        found = self.store.lookup(state, since, partial=False, backend=backend)
        if invoked and found is not None and found.quick:
            # the quick window had nothing here: the user asked, so the whole window is worth its wait
            state = planner.whole_window(state)
            found = self.store.lookup(state, since, partial=False, backend=backend)
        if found is not None and (found.complete or plan.partial_after is None):
            self.tiers.local.poke()  # the user acts here with nothing to run: idle time looks for work again
            return found
        if plan.item_one and not self.store.streaming(state):
            # an explicit request: the automatic suggestion here (made, or made now: one greedy row with its
            # drafts is the fastest line) is item 1; the variants' job runs on the KV it left, to its end
            # (then flint/refresh). Where the variants' own generation already runs: its settled item 1
            first = await explicit.greedy_first(self.store, self.tiers.local, self._auto_twin(state), plan,
                                                self.docs[state.uri].asked or asyncio.Event(), self._settings().max_lines)
            if first is not None:
                self.store.submit(state, Work(Ask.AWAITED, plan.job_budget))
            if first is not None or self.store.streaming(self._auto_twin(state)):
                return first  # (None: the line is still coming: flint/refresh when it is there)
        work = Work(budget_s=plan.job_budget, tier=worker.tier)
        if found is not None and found.comps and found.source in ("type-through", "disk"):
            # a start read or typed through answers now; the generation writes the rest
            self.store.submit(state, replace(work, mode=Ask.BACKGROUND))
            return found
        return await self._wait(self.store.submit(state, work), invoked, plan)

    async def _wait(self, ticket: Ticket, invoked: bool, plan: planner.Waiting) -> Answer | None:
        """Wait in the store for the job just submitted (or joined); let it go when the answer is there."""
        state = ticket.state
        backend = "remote" if ticket.tier == "remote" else None
        settle = explicit.settle_rule(state, self._settings().max_lines) if invoked and state.params.n > 1 else None
        accept = (lambda: explicit.settled_first(self.store, state, plan.since, settle, backend)) if settle else None
        try:
            while True:
                waited = await ticket.wait(plan, accept)
                ans = waited.answer
                if waited.why == "ended" and ans is not None and ans.quick and invoked and \
                        time.monotonic() < plan.deadline:
                    state = planner.whole_window(state)  # nothing from the quick window: the user asked
                    ticket = self.store.submit(state, Work(budget_s=plan.job_budget, anew=True,
                                                            tier=ticket.tier or "local"))
                    continue
                if waited.why != "ended":
                    # at the deadline, or the variants' item 1: keep generating (a refresh, the next ask)
                    ticket.detach(awaited=waited.why in ("accepted", "deadline"))
                return ans
        except asyncio.CancelledError:
            # an automatic request's generation goes on (the editor cancels the previous keystroke's request
            # before it sends the next, which may type through it); an explicit one's stops
            ticket.detach() if plan.detachable else ticket.release()
            raise

    def _auto_twin(self, state: State) -> State:
        return explicit.auto_twin(self._settings(), state, self.tiers.remote_ready())

