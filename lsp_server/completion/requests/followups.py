"""What follows an answer (planner.follow_ups): flint/refresh once the whole suggestion is there (one watch per
document, on the store's changes), the whole window where the quick one had nothing; and once the local model
is idle (events.Idle), the warm-up of the spot the user is at."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from engine.policy import routing
from lsp_server.completion.events import Idle
from lsp_server.completion.jobs import Ask, State, WarmUp, Work
from lsp_server.completion.policy import knobs, planner
from lsp_server.completion.requests import explicit
from lsp_server.completion.requests.records import DocRecords
from lsp_server.completion.requests.tiers import Tiers
from lsp_server.completion.store.store import Store
from lsp_server.completion.store.tickets import Answer
from lsp_server.settings import Settings

log = logging.getLogger(__name__)


class FollowUps:
    def __init__(self, store: Store, tiers: Tiers, docs: DocRecords, settings: Callable[[], Settings],
                 on_refresh: Callable[[str, int], None], revision_of: Callable[[str], int | None],
                 context: Callable[[State], Any] | None = None) -> None:
        self._store = store
        self._tiers = tiers
        self._docs = docs  # each document's typing rhythm, refresh watch and last refresh (DocRecord)
        self._settings = settings
        self._on_refresh = on_refresh
        self._revision_of = revision_of
        self._context = context  # (a worker thread) the repository context block for a spot
        self._warming: asyncio.Task | None = None

    def carry_out(self, plan: planner.FollowUps, state: State, version: int, *, invoked: bool) -> None:
        if plan.watch_s is not None or plan.whole:
            self._docs[state.uri].watch_auto = not invoked
        if plan.whole:
            self.whole(state, version)
        elif plan.watch_s is not None:
            self.watch(state, version, within=plan.watch_s, greedy=plan.greedy)

    def refreshed(self, uri: str, version: int) -> None:
        """A whole suggestion is there (``watch``): the client asks again."""
        record = self._docs.get(uri)
        if record is not None:
            record.refreshed = (version, time.monotonic(), record.watch_auto)
        self._on_refresh(uri, version)

    def reasked(self, uri: str, version: int) -> bool:
        """Is an explicit request at ``version`` the client asking again on the refresh it heard?"""
        record = self._docs.get(uri)
        if record is None:
            return False
        mark, record.refreshed = record.refreshed, None
        return planner.reasks_refresh(mark, version, time.monotonic())

    def whole(self, state: State, version: int) -> None:
        """The quick first window had nothing here: the whole window runs (flint/refresh if it has a line) after a
        pause (planner.pause_delay: a typist who goes on makes it stale before its prompt pass holds up a key),
        as idle work: stopped knobs.IDLE_WORK_S after the user's last action (its prompt pass kept in the KV)."""
        whole = planner.whole_window(state)
        if whole is state or state.route == routing.REMOTE or whole.skip:
            return
        not_before = time.monotonic() + planner.pause_delay(self._docs[state.uri].keystrokes)
        self._store.submit(whole, Work(Ask.BACKGROUND, knobs.JOB_BUDGET_S, not_before))
        self.watch(whole, version, within=knobs.JOB_BUDGET_S)

    def watch(self, state: State, version: int, within: float = knobs.REFRESH_WITHIN_S, greedy: bool = False) -> None:
        """A partial answer went out: flint/refresh once its generation has the whole suggestion (``greedy``:
        or the automatic twin's line, item 1 of the next ask: explicit.greedy_first). A newer watch replaces it."""
        twin = explicit.auto_twin(self._settings(), state, self._tiers.remote_ready())
        watched = [state] + ([twin] if greedy and state.params.n > 1 else [])
        record = self._docs[state.uri]
        if record.watcher is not None:
            record.watcher.cancel()
        record.watcher = asyncio.get_running_loop().create_task(self._when_done(watched, version, within))

    async def _when_done(self, watched: list[State], version: int, within: float) -> None:
        """Refresh when any of ``watched`` has a whole suggestion in time; stop when all finished with nothing,
        or the document moved on."""
        state = watched[0]
        gone = Answer([], "memory", state.mode, complete=True)  # moved on, or finished with nothing to show

        def done() -> Answer | None:
            if self._revision_of(state.uri) != state.revision:
                return gone
            found = [self._store.lookup(st, None, partial=False, disk=False) for st in watched]
            whole = next((f for f in found if f is not None and f.complete and f.comps), None)
            if whole is not None:
                return whole
            return gone if all(f is not None and f.complete for f in found) else None

        found = await self._store.wait(lambda now: done(), time.monotonic() + within)
        if found is not None and found is not gone:
            self.refreshed(state.uri, version)

    def idle(self, event: Idle) -> None:
        """The local worker went idle: warm the user's spot, its context block gathered first (on a thread:
        file reads and parsing)."""
        st = self._docs.active_state()
        if event.tier != "local" or st is None or (self._warming is not None and not self._warming.done()):
            return
        self._warming = asyncio.get_running_loop().create_task(self._warm(st))

    async def _warm(self, st: State) -> None:
        block = await asyncio.to_thread(self._context, st) if self._context is not None else None
        now = time.monotonic()
        window = self._docs[st.uri].window
        stayed = now - (window[1] if window is not None else now)
        self._tiers.local.warm(st, WarmUp(block, prefill=planner.warms(self._settings(), stayed)))
