"""An explicit (invoked) request's item 1: the automatic request's greedy line for the same state.

The user asked for suggestions (several variants): the automatic request's suggestion at this very text
is item 1, shown as soon as it is there (made, or made now: one greedy row with its drafts is the fastest
line), and the variants follow. Where the variants' own batch already runs, its item 1 is shown once
settled. The service (service.py) decides when a request is explicit and passes in what these read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from engine.text.budget import Budget
from engine.text.postprocess import CUT_OFF_REASONS
from lsp_server.completion import planner
from lsp_server.completion.planner import JOB_BUDGET_S, State
from lsp_server.completion.store import Answer, Store, settle_rule, settled_variants
from lsp_server.completion.worker import USER, Superseded, Worker
from lsp_server.settings import Settings


def auto_twin(settings: Settings, state: State, remote_ready: bool) -> State:
    """The automatic request's state at the same text (one greedy variant)."""
    auto = planner.state_at(settings, state.uri, state.revision, state.offset, state.prefix, state.suffix,
                            invoked=False, remote_ready=remote_ready, language=state.params.language)
    return auto if state.params.quick_start else planner.whole_window(auto)


def settled_first(store: Store, state: State, since: float, settle: tuple[str, Budget],
                  backend: str | None) -> Answer | None:
    """The variants' streaming answer once its item 1 is settled, with only its finished variants (the
    others follow: flint/refresh when they are done, the client asks again and the store answers)."""
    early = store.lookup(state, since, partial=True, disk=False, backend=backend)
    done = settled_variants(early, *settle) if early else []
    if early is not None and done and done[0].variant == 0:
        early.comps = done  # only finished variants: never one cut in mid-stream
        return early
    return None


async def greedy_first(store: Store, worker: Worker, auto: State, since: float, deadline: float,
                       asked: asyncio.Event, settings: Callable[[], Settings],
                       backend: str | None) -> Answer | None:
    """The automatic request's complete answer for this very state (``auto``: auto_twin; memory, typed
    through, disk; else its generation, started now unless one streams) within the deadline, as an
    incomplete answer: the explicit request's other variants are still to come. A generation the user cut
    off here (went on before its line was whole, came back) runs again on the KV it left. None: no line
    (yet). ``asked`` is set when a newer request for the document comes: then Superseded."""
    newer = asyncio.ensure_future(asked.wait())
    worker.poke()  # the user is here: the automatic generation is not idle work
    fut = None
    afut: asyncio.Future | None = None
    try:
        while True:
            found = store.lookup(auto, since, partial=False, backend=backend)
            if found is not None and found.complete and found.comps:
                # not a generation stopped before its suggestion was whole (the user went on and came
                # back): its line or body must be final
                c = found.comps[0]
                final = c.finish_reason not in CUT_OFF_REASONS or (
                    "\n" in c.text.lstrip("\n") if auto.mode == "single" else
                    bool(settled_variants(found, *settle_rule(auto, settings().max_lines))))
                if final:
                    found.comps, found.complete = found.comps[:1], False
                    return found
                if afut is None:
                    if c.finish_reason == "length":
                        return None  # the model's line is longer than a line's budget: the variants
                    fut = worker.submit(auto.uri, auto.revision, auto.prefix, auto.suffix, auto.params, USER,
                                        budget_s=JOB_BUDGET_S, not_before=auto.not_before, anew=True)
                    afut = asyncio.wrap_future(fut)
                # (until that generation starts, the store still holds the cut one)
            elif found is not None and found.complete:
                if found.quick and auto.params.quick_start and time.monotonic() < deadline:
                    # the quick window had no line here: ask the whole window (the user waits)
                    auto = planner.whole_window(auto)
                    if fut is not None:
                        worker.release(fut, awaited=True)
                    fut = worker.submit(auto.uri, auto.revision, auto.prefix, auto.suffix, auto.params, USER,
                                        budget_s=JOB_BUDGET_S, not_before=auto.not_before, anew=True)
                    afut = asyncio.wrap_future(fut)
                    continue
                return None  # the model has nothing to add here as one line: the variants may
            now = time.monotonic()
            if now >= deadline:
                return None
            if afut is not None and afut.done():
                if not afut.cancelled() and afut.exception() is not None:
                    raise afut.exception()  # type: ignore[misc]  # the model's error, superseded, stale
                return None  # it finished without a whole line (looked up above)
            if afut is None and not store.streaming(auto):
                if auto.skip:
                    return None
                fut = worker.submit(auto.uri, auto.revision, auto.prefix, auto.suffix, auto.params, USER,
                                    budget_s=JOB_BUDGET_S, not_before=auto.not_before)
                afut = asyncio.wrap_future(fut)
            waits: list[asyncio.Future] = [store.next_change(), newer]
            if afut is not None:
                waits.append(afut)
            await asyncio.wait(waits, timeout=deadline - now, return_when=asyncio.FIRST_COMPLETED)
            if newer.done():
                raise Superseded("a newer request for this document replaced it")
    except asyncio.CancelledError:
        if fut is not None:
            fut.cancel()  # the client cancelled the request: the generation it started stops
            fut = None
        raise
    finally:
        newer.cancel()
        if fut is not None:
            worker.release(fut, awaited=True)  # the user waits for this line: it runs to its end
