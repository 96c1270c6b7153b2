"""Routing ``pause`` (docs/remote.md): the fast local model answers every keystroke; after an automatic answer
went out, the capable tier writes the same spot once the user pauses (planner.pause_starts), from its own short
window. A keystroke stops it (planner.kept_through_edit), so it never takes the CPU from the keystrokes. Its
suggestion, if it differs from the one shown (routing.pause_accepts), becomes the spot's newest answer in the
store and the client hears flint/refresh (``on_replace``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from engine.policy import routing
from engine.text.window import clip_window, window_start
from engine.types import Completion
from lsp_server.completion.jobs import Ask, State, Work
from lsp_server.completion.policy import knobs
from lsp_server.completion.policy.planner import whole_window
from lsp_server.completion.requests.records import DocRecords
from lsp_server.completion.store.store import Store

log = logging.getLogger(__name__)

PAUSES_KEPT = 4  # planned pause jobs remembered per document (one, in practice)


class Pauses:
    def __init__(self, store: Store, docs: DocRecords, revision_of: Callable[[str], int | None],
                 on_replace: Callable[[str, float], None]) -> None:
        self._store = store
        self._docs = docs  # each document's capable window start and planned jobs (DocRecord.pauses)
        self._revision_of = revision_of
        self._on_replace = on_replace  # (uri, ms from the pause job's plan): the shown suggestion was replaced

    def plan(self, state: State, not_before: float, own_window: bool = True) -> None:
        """The capable tier writes ``state``'s spot once the user has paused (``not_before``); ``own_window``: a
        model on this CPU reads its own short window (a remote server the whole one)."""
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

    def remote_done(self, state: State, comps: list[Completion]) -> None:
        """(event loop) A capable-tier job ended with text: if a pause planned it and the user is still at its
        spot, it replaces the suggestion shown."""
        record = self._docs.get(state.uri)
        planned = record.pauses.pop((state.prefix, state.suffix), None) if record is not None else None
        if planned is None or not comps or comps[0].finish_reason == "cancelled":
            return
        state, at = planned
        if self._revision_of(state.uri) != state.revision:
            return  # the user went on (the job was stopped; a cut-off text is never shown)
        mode = self._store.mode_for(state, None)
        if not any(self._store.shows(c, state, mode, False, True) for c in comps):
            return
        before = self._store.lookup(state, None, partial=False, disk=False)
        if not routing.pause_accepts(before.comps[0].text if before is not None and before.comps else None,
                                     comps[0].text):
            return  # what the user already sees
        self._store.add(state, comps, "remote")
        self._on_replace(state.uri, (time.monotonic() - at) * 1000)


def short_window(state: State, previous: int | None) -> tuple[State, int]:
    """The state cut to the capable model's window at line bounds, and its start in ``state.prefix``:
    ``previous`` while valid, so a keystroke appends to that model's KV instead of moving its window."""
    start = window_start(state.prefix, len(state.prefix), knobs.PAUSE_PREFIX_CHARS, previous=previous)
    _, suffix = clip_window("", state.suffix, 0, knobs.PAUSE_SUFFIX_CHARS)
    return replace(state, prefix=state.prefix[start:], suffix=suffix), start
