"""An explicit request's item 1: the automatic request's greedy line at the same text, shown as soon as it is
there, the variants following (one batch with item 1 in it made item 1 much slower: docs/benchmarks/picks.md).
Where the variants' own batch already runs, its item 1 is shown once settled.
"""

from __future__ import annotations

import asyncio
import time

from engine.text.budget import Budget, settled
from engine.text.postprocess import CUT_OFF_REASONS, budget_for, split_cursor
from engine.types import Completion
from lsp_server.completion.jobs import State, Work
from lsp_server.completion.policy import knobs, planner
from lsp_server.completion.scheduler.worker import Worker
from lsp_server.completion.store.store import Store
from lsp_server.completion.store.tickets import Answer
from lsp_server.settings import Settings

# what the store's complete answer for the automatic state means for item 1: its line; a generation the
# user cut off before its line was whole (write it again), or whose line is longer than a line's budget;
# nothing from the quick window (ask the whole one); nothing
LINE, CUT, LONG, WHOLE, NOTHING = "line", "cut", "long", "whole", "nothing"


def settle_rule(state: State, max_lines: int) -> tuple[str, Budget]:
    """What makes a streaming variant final (engine.postprocess.budget_for), once per request."""
    line_prefix, _ = split_cursor(state.prefix, state.suffix)
    return line_prefix, budget_for(state.prefix, state.suffix, state.params.language, max_lines=max_lines)


def settled_variants(answer: Answer, line_prefix: str, budget: Budget) -> list[Completion]:
    """The variants of a streaming answer that are final (ended, or past what the budget shows)."""
    return [c for c in answer.comps if c.text.strip() and
            settled(c.text, c.finish_reason not in CUT_OFF_REASONS, line_prefix, budget)]


def auto_twin(settings: Settings, state: State, remote_ready: bool) -> State:
    auto = planner.state_at(settings, state.uri, state.revision, state.offset, state.prefix, state.suffix,
                            invoked=False, remote_ready=remote_ready, language=state.params.language)
    return auto if state.params.quick_start else planner.whole_window(auto)


def settled_first(store: Store, state: State, since: float, settle: tuple[str, Budget],
                  backend: str | None) -> Answer | None:
    """The variants' streaming answer once its item 1 is settled, with its finished variants only (the others
    follow with flint/refresh)."""
    early = store.lookup(state, since, partial=True, disk=False, backend=backend)
    done = settled_variants(early, *settle) if early else []
    if early is not None and done and done[0].variant == 0:
        early.comps = done  # only finished variants: never one cut in mid-stream
        return early
    return None


def verdict(found: Answer, auto: State, max_lines: int) -> str:
    """What a complete answer for the automatic state is for item 1 (LINE, CUT, LONG, WHOLE, NOTHING)."""
    if not found.comps:
        return WHOLE if found.quick and auto.params.quick_start else NOTHING
    c = found.comps[0]
    final = c.finish_reason not in CUT_OFF_REASONS or (
        "\n" in c.text.lstrip("\n") if auto.mode == "single" else
        bool(settled_variants(found, *settle_rule(auto, max_lines))))
    if final:
        return LINE
    return LONG if c.finish_reason == "length" else CUT


async def greedy_first(store: Store, worker: Worker, auto: State, plan: planner.Waiting, asked: asyncio.Event,
                       max_lines: int) -> Answer | None:
    """The automatic twin's (``auto``) complete line by ``plan.deadline`` (from the store, else its generation,
    started unless one streams; one the user cut off runs again), as an incomplete answer; None: no line
    (yet). ``asked`` set: a newer request came (Superseded)."""
    worker.poke()  # the user is here: the automatic generation is not idle work
    since, deadline = plan.since, plan.deadline
    waiting = planner.Waiting(deadline, None, since)  # the line whole, or nothing
    ticket = store.reading(auto)
    ended = False

    def complete() -> Answer | None:
        found = store.lookup(auto, since, partial=False)
        return found if found is not None and found.complete else None

    try:
        while True:
            found = complete()
            what = verdict(found, auto, max_lines) if found is not None else None
            if what == LINE and found is not None:
                found.comps, found.complete = found.comps[:1], False
                return found
            if what == WHOLE and time.monotonic() < deadline:
                ticket.detach(awaited=True)
                auto = planner.whole_window(auto)  # the quick window had no line here: the user waits
                ticket, ended = store.submit(auto, Work(budget_s=knobs.JOB_BUDGET_S, anew=True)), False
                continue
            if what in (WHOLE, NOTHING) or (what == LONG and not ticket.submitted) or ended or \
                    time.monotonic() >= deadline:
                return None  # the model has nothing to add here as one line: the variants may
            if not ticket.submitted and (what == CUT or not store.streaming(auto)):
                if auto.skip:
                    return None
                # a cut-off line is written again (until that generation starts, the store holds the cut one)
                ticket = store.submit(auto, Work(budget_s=knobs.JOB_BUDGET_S, anew=what == CUT))
            waited = await ticket.wait(waiting, accept=None if what in (CUT, LONG) else complete, stop=asked)
            ended = waited.why in ("ended", "deadline")
    except asyncio.CancelledError:
        ticket.release()  # the client cancelled the request: the generation it started stops
        raise
    finally:
        ticket.detach(awaited=True)  # the user waits for this line: it runs to its end
