"""The race between the local model and the capable tier (routing ``race``, docs/remote.md).

Local and remote generate side by side. The remote answer wins if it arrives within the race budget
while nothing is shown yet, or arrives within the budget after the local one went out and extends or
improves it (routing.race_accepts): then it takes the local one's place in the store (the next ask, or a
keystroke typed through it, gets it) and the client hears flint/refresh (``on_late_win``). The remote
generation keeps running while the user types what agrees with it, so it can still win for the text
typed since, within the budget.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from engine.policy import routing
from engine.types import Completion
from lsp_server.completion.jobs import State, Work
from lsp_server.completion.requests.records import DocRecords
from lsp_server.completion.store.store import Store
from lsp_server.completion.store.tickets import Answer

log = logging.getLogger(__name__)

RACES_KEPT = 16  # races whose remote generation may still finish and win


@dataclass
class Race:
    state: State
    since: float  # when the request came
    budget_s: float
    shown: str | None = None  # the local answer's raw text, once it went out
    local_done: bool = False
    result: list[Completion] | None = None  # the remote generation's, when it finished
    arrived: float | None = None
    decided: bool = False


class Races:
    def __init__(self, store: Store, docs: DocRecords, revision_of: Callable[[str], int | None],
                 on_late_win: Callable[[str, float], None]) -> None:
        self._store = store
        self._docs = docs
        self._revision_of = revision_of
        self._on_late_win = on_late_win  # (uri, ms since the request): the shown suggestion was replaced
        self._races: dict[tuple[str, str, str], Race] = {}  # (uri, prefix, suffix) -> a race under way

    async def answer(self, state: State, since: float, budget_s: float, remote_timeout_s: float,
                     local: Callable[[], Awaitable[Answer | None]]) -> Answer | None:
        found = self._store.lookup(state, since, partial=False)
        if found is not None and found.complete:
            return found  # a repeat, a promoted remote answer, or the disk: nothing to race
        race = Race(state, since, budget_s)
        self._races[(state.uri, state.prefix, state.suffix)] = race
        while len(self._races) > RACES_KEPT:
            self._races.pop(next(iter(self._races)))
        # its outcome comes back as an event (remote_done), whether it generated or the store answered it; the
        # race counts as its waiter until it ends (within remote_timeout_s): never let go, never idle work
        self._store.submit(state, Work(budget_s=remote_timeout_s, tier="remote"))
        local_task = asyncio.ensure_future(local())
        try:
            return await self._run(race, local_task)
        except asyncio.CancelledError:  # the client cancelled the request: the local side stops waiting too
            local_task.cancel()
            raise
        finally:
            # an outcome nobody waits for (Stale, cancelled) is not an unhandled error
            local_task.add_done_callback(lambda t: t.cancelled() or t.exception())

    def remote_done(self, state: State, comps: list[Completion], arrived: float) -> None:
        """(event loop) A remote job ended with text: if it is a race's, decide it."""
        race = self._races.get((state.uri, state.prefix, state.suffix))
        if race is not None:
            self._finished(race, comps, arrived)

    async def _run(self, race: Race, local_task: asyncio.Future) -> Answer | None:
        state = race.state

        def look(now: float) -> Answer | bool | None:  # the remote answer first; False: the local one is there
            return self._remote_first(race, local_task) or (False if local_task.done() else None)

        first = await self._store.wait(look, race.since + race.budget_s, [local_task])
        if isinstance(first, Answer):
            return first
        local = await local_task
        race.shown = local.comps[0].text if local is not None and local.comps else None
        race.local_done = True
        if race.result is not None and not race.decided:
            race.decided = True
            won = self._pick(race, race.shown)
            if won is not None:
                self._store.add(state, won.comps, "remote")
                return won
        return local

    def _remote_first(self, race: Race, local_task: asyncio.Future) -> Answer | None:
        """The remote answer, when it came within the budget before the local one: it wins."""
        if race.result is None or race.decided:
            return None
        race.decided = True
        won = self._pick(race, None)
        if won is not None:
            local_task.cancel()
            self._store.add(race.state, won.comps, "remote")
        return won

    def _pick(self, race: Race, shown: str | None) -> Answer | None:
        """The remote answer if it came within the budget and may replace ``shown`` (None: nothing shown)."""
        comps = race.result
        if not comps or race.arrived is None or race.arrived - race.since > race.budget_s:
            return None
        if not routing.race_accepts(shown, comps[0].text):
            return None
        state = race.state
        mode = self._store.mode_for(state, None)
        if not any(self._store.shows(c, state, mode, False, True) for c in comps):
            return None
        return Answer(comps, "model", mode, complete=True, backend="remote",
                      note=" (race: remote replaced local)" if shown else " (race: remote first)")

    def _finished(self, race: Race, comps: list[Completion], arrived: float) -> None:
        """(event loop) A race's remote generation finished (for its own state, possibly typed past)."""
        if race.result is not None or not comps or not comps[0].text or comps[0].finish_reason == "cancelled":
            return
        race.result, race.arrived = comps, arrived
        self._store.changed()  # a request still waiting for its local answer looks again
        if not race.local_done or race.decided:
            return
        race.decided = True
        won = self._pick(race, race.shown)
        if won is None:
            log.debug("race: remote answer for %s not shown (late or unrelated)", race.state.uri)
            return
        self._store.add(race.state, won.comps, "remote")
        uri = race.state.uri
        rev = self._revision_of(uri)
        cur = race.state if rev == race.state.revision else self._docs.state(uri)  # the spot the user is at
        if cur is None or rev != cur.revision:
            return
        now = self._store.lookup(cur, None, partial=False, disk=False)
        log.debug("race: promoted for %s; at the current spot: %s", uri, now and (now.source, now.backend))
        if now is None or now.backend != "remote":
            return  # typed past it in another direction: nothing to replace
        self._on_late_win(uri, (arrived - race.since) * 1000)
