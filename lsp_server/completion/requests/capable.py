"""The capable tier's answers that take the local one's place (docs/remote.md): it becomes the newest answer
for the spot in the store (the next ask, or a keystroke typed through it, gets it) and the client hears
flint/refresh (``on_replace``) when it replaced a suggestion on screen.

- routing ``race`` (``Races``): local and capable generate side by side. The capable answer wins if it
  arrives within the race budget while nothing is shown yet, or within the budget after the local one went
  out and extends or improves it (routing.race_accepts). Its generation keeps running while the user types
  what agrees with it, so it can still win for the text typed since.
- routing ``pause`` (``Pauses``): the fast local model answers every keystroke; after an automatic answer
  went out, the capable tier is asked for the same spot once the user pauses (planner.pause_starts), from
  its own short window. A keystroke stops it (planner.kept_through_edit), so it never takes the CPU from
  the keystrokes. Finished at that spot with a suggestion that differs from the one shown
  (routing.pause_accepts), it replaces it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from engine.policy import routing
from engine.text.window import clip_window, window_start
from engine.types import Completion
from lsp_server.completion.jobs import Ask, State, Work
from lsp_server.completion.policy import knobs
from lsp_server.completion.policy.planner import whole_window
from lsp_server.completion.requests.records import DocRecords
from lsp_server.completion.store.store import Store
from lsp_server.completion.store.tickets import Answer

log = logging.getLogger(__name__)

RACES_KEPT = 16  # races whose remote generation may still finish and win
PAUSES_KEPT = 4  # planned pause jobs remembered per document (one, in practice)


def shows(store: Store, state: State, comps: list[Completion]) -> bool:
    """Does any of the capable tier's (finished) texts give a suggestion worth showing at ``state``?"""
    mode = store.mode_for(state, None)
    return any(store.shows(c, state, mode, False, True) for c in comps)


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
        if not shows(self._store, state, comps):
            return None
        return Answer(comps, "model", self._store.mode_for(state, None), complete=True, backend="remote",
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


class Pauses:
    def __init__(self, store: Store, docs: DocRecords, revision_of: Callable[[str], int | None],
                 on_replace: Callable[[str, float], None]) -> None:
        self._store = store
        self._docs = docs  # each document's capable window start and planned jobs (DocRecord.pauses)
        self._revision_of = revision_of
        self._on_replace = on_replace  # (uri, ms from the pause job's plan): the shown suggestion was replaced

    def plan(self, state: State, not_before: float, own_window: bool = True) -> None:
        """An automatic answer for ``state`` went out: the capable tier writes this spot's suggestion once
        the user has paused (``not_before``, time.monotonic()); ``own_window``: from its own window (a
        model on this machine's CPU; a remote server reads the whole one). The same work planned again
        joins the job already queued or running (Worker.submit)."""
        if state.skip:
            return
        whole = whole_window(state)
        record = self._docs[state.uri]
        st = whole
        if own_window:
            st, record.pause_start = short_window(whole, record.pause_start)
        planned = record.pauses
        planned.pop((st.prefix, st.suffix), None)
        planned[(st.prefix, st.suffix)] = (whole, time.monotonic())
        while len(planned) > PAUSES_KEPT:
            planned.pop(next(iter(planned)))
        # nobody waits on it (its outcome comes back as an event: remote_done): it stops at a keystroke, and
        # as idle work once the user has gone (knobs.IDLE_WORK_S); a prompt pass cut short keeps its KV for the
        # next pause
        self._store.submit(st, Work(Ask.BACKGROUND, knobs.JOB_BUDGET_S, not_before, tier="remote"))

    def remote_done(self, state: State, comps: list[Completion], arrived: float) -> None:
        """(event loop) A capable-tier job ended with text: if a pause planned it, decide."""
        record = self._docs.get(state.uri)
        planned = record.pauses.pop((state.prefix, state.suffix), None) if record is not None else None
        if planned is not None:
            self._finished(planned, comps)

    def _finished(self, planned: tuple[State, float], comps: list[Completion]) -> None:
        """(event loop) The pause's generation finished: promote it if the user is still at its spot."""
        if not comps or comps[0].finish_reason == "cancelled":
            return
        state, at = planned
        if self._revision_of(state.uri) != state.revision:
            log.debug("pause: %s moved on before the capable line came", state.uri)
            return  # the user went on (the job was stopped; a cut-off text is never shown)
        if not shows(self._store, state, comps):
            log.debug("pause: the capable line for %s has nothing to show (%r)", state.uri, comps[0].text[:40])
            return
        before = self._store.lookup(state, None, partial=False, disk=False)
        shown = before.comps[0].text if before is not None and before.comps else None
        if not routing.pause_accepts(shown, comps[0].text):
            log.debug("pause: the capable line for %s is the one shown", state.uri)
            return
        self._store.add(state, comps, "remote")
        log.debug("pause: the capable tier's line replaces the local one for %s", state.uri)
        self._on_replace(state.uri, (time.monotonic() - at) * 1000)


def short_window(state: State, previous: int | None) -> tuple[State, int]:
    """The state cut to the capable model's window (knobs.PAUSE_PREFIX_CHARS before the cursor, knobs.PAUSE_SUFFIX_CHARS after, at
    line bounds), and the start in ``state.prefix`` it kept: ``previous`` while it is still valid, so a
    keystroke appends to the capable model's KV instead of moving its window."""
    start = window_start(state.prefix, len(state.prefix), knobs.PAUSE_PREFIX_CHARS, previous=previous)
    _, suffix = clip_window("", state.suffix, 0, knobs.PAUSE_SUFFIX_CHARS)
    return replace(state, prefix=state.prefix[start:], suffix=suffix), start
