"""The scheduler's background work (worker.py): idle warm-up, orphaned speculation, the idle watchdog, the
context block, against the shared stand-in engine (tests/fakes.py)."""

from __future__ import annotations

import time

import pytest

from engine.types import GenParams
from lsp_server.completion.jobs import Ask, Superseded, WarmUp, Work
from lsp_server.completion.policy import knobs
from tests.fakes import Clock, Done, FakeEngine, Rig, Step, state, steps, wait_for

STEP = 0.01


def rig(n: int = 20, slow: tuple[str, ...] = (), slow_prefill: tuple[str, ...] = (),
        clock: Clock | None = None) -> Rig:
    return Rig(FakeEngine(steps(n, STEP, slow), slow_prefill=slow_prefill), clock=clock).start()


def text_of(r: Rig, st) -> str:
    return r.result(st)[0][0].text


def prefixes(r: Rig) -> list[str]:
    return [c.prefix for c in r.engine.calls]


def test_a_job_held_back_waits_for_its_time_and_a_newer_keystroke_replaces_it():
    clock = Clock()
    r = rig(2, clock=clock)
    r.worker.submit(state("a", 1, "p1"), Work(Ask.SPECULATE, not_before=clock() + 0.2))
    clock.advance(0.1)
    assert r.engine.calls == []  # (its time has not come: nothing may start it)
    r.worker.document_changed("a", 2)
    r.worker.submit(state("a", 2, "p2"), Work(Ask.SPECULATE, not_before=clock() + 0.2))
    clock.advance(0.15)  # p1's time, but p1 is gone
    assert r.engine.calls == []  # still holding the newest keystroke's work back
    clock.advance(0.1)  # past its time
    assert r.until(lambda: r.engine.calls, 1.0)
    assert prefixes(r) == ["p2"]
    r.stop()


def test_idle_time_warms_once_and_new_work_interrupts_it():
    clock = Clock()
    r = rig(2, clock=clock)
    st = state("a", 1, "p", "s")
    r.worker.submit(st)
    r.result(st)
    r.idle_plan = (state("a", 1, "active prefix", "active suffix"), WarmUp())
    calls = r.idle_calls
    r.worker.document_changed("a", 1)  # activity: the worker says it is idle again after a quiet period
    clock.advance(knobs.IDLE_WARM_S)
    assert r.until(lambda: r.engine.prefills)
    assert r.engine.prefills == [("active prefix", "active suffix")]
    assert r.until(lambda: r.worker.backlog() == 0) and r.engine.held == ("active prefix", "active suffix")
    assert r.until(lambda: any(w.work == "warm" for w in r.worked))
    # the accounting counts the warm-up's prompt tokens as run, and its ending
    assert [(w.prefilled, w.ended) for w in r.worked if w.work == "warm"] == [(len("active prefix"), "complete")]
    clock.advance(knobs.IDLE_WARM_S + 0.2)
    assert not r.until(lambda: r.idle_calls > calls + 1, 0.2)  # once per quiet period, not in a loop
    assert len(r.engine.prefills) == 1
    # activity that wakes the worker starts another quiet period (Worker.poke, as when the store answered a
    # cursor move; document_changed alone only resets the clock: the next submit wakes it), so it warms the
    # new spot; a request arriving while it warms stops the warm-up and runs
    r.engine.slow_prefill = ("other prefix",)  # runs until it is stopped
    r.idle_plan = (state("a", 1, "other prefix", "x"), WarmUp())
    r.worker.poke()
    clock.advance(knobs.IDLE_WARM_S)
    assert r.until(lambda: ("other prefix", "x") in r.engine.prefills)
    assert r.idle_calls == calls + 2
    q = state("a", 1, "q")
    r.worker.submit(q)
    assert text_of(r, q).startswith("q")  # (the warm-up runs until stopped: the request ran, so it was)
    r.stop()


def test_detachable_request_cancelled_by_the_editor_goes_on_as_speculation():
    """VS Code cancels the previous keystroke's request before it sends the next one: the generation must
    survive that long enough for the next didChange to keep it (or stop it)."""
    r = rig(30)
    st = state("a", 1, "p")
    ticket = r.store.submit(st, Work())
    assert r.engine.running.wait(5)
    ticket.detach()  # (planner.Waiting.detachable: an automatic request's job goes on)
    assert r.result(st)[0][0].finish_reason == "length"
    r.stop()


def test_work_in_the_users_document_stops_orphaned_speculation_elsewhere():
    r = rig(500)
    a = state("a", 1, "a-prefix")
    ticket = r.store.submit(a, Work())
    assert r.engine.running.wait(5)
    ticket.detach()  # answered at its deadline; the generation goes on as speculation for a
    t0 = time.monotonic()
    r.worker.submit(state("b", 1, "b-prefix"), Work(Ask.SPECULATE))  # the user now types in b
    assert r.until(lambda: "b-prefix" in prefixes(r))
    assert time.monotonic() - t0 < 20 * STEP + 0.2
    with pytest.raises(Superseded):  # a's stopped within a step
        r.result(a)
    r.stop()


def test_a_request_in_another_document_stops_work_let_go_there():
    # variants still running after their item 1 went out (released, awaited): the user asks elsewhere
    r = rig(500)
    a = state("a", 1, "a-prefix", params=GenParams(n=3))
    ticket = r.store.submit(a, Work())
    assert r.engine.running.wait(5)
    ticket.detach(awaited=True)
    t0 = time.monotonic()
    r.worker.submit(state("b", 1, "b-prefix"))
    assert r.until(lambda: "b-prefix" in prefixes(r))
    assert time.monotonic() - t0 < 20 * STEP + 0.2  # not after a's
    with pytest.raises(Superseded):
        r.result(a)
    r.stop()


def test_a_request_joining_queued_speculation_preempts_other_speculation():
    r = rig(3, slow=("busy",))
    r.worker.submit(state("c", 1, "busy"), Work(Ask.SPECULATE))  # speculation in another document runs
    assert r.engine.running.wait(5)
    st = state("a", 1, "p")
    r.worker.submit(st, Work(Ask.SPECULATE, not_before=time.monotonic() + 5))  # held back
    t0 = time.monotonic()
    r.worker.submit(st)  # the request joins it
    assert text_of(r, st).startswith("p") and time.monotonic() - t0 < 20 * STEP + 0.3
    r.stop()


def test_background_work_stops_soon_after_the_user_goes_idle_but_not_what_a_user_waits_for():
    clock = Clock()
    r = rig(slow=("spec", "asked"), clock=clock)
    try:
        r.worker.submit(state("file:///a.py", 1, "spec"), Work(Ask.SPECULATE))
        assert r.engine.running.wait(2)
        clock.advance(knobs.IDLE_WORK_S - 0.1)
        assert not wait_for(lambda: not r.engine.running.is_set(), 0.2)  # not yet
        clock.advance(0.1)
        assert wait_for(lambda: not r.engine.running.is_set(), 2)  # stopped, not run for its 10 s
        # a request that got nothing at its deadline lets go of its job: the user still waits there
        asked = state("file:///b.py", 1, "asked")
        ticket = r.store.submit(asked, Work())
        assert r.engine.running.wait(2)
        ticket.detach(awaited=True)
        clock.advance(knobs.IDLE_WORK_S + 0.5)
        assert not wait_for(lambda: r.worker.running() is None or r.worker.running().cancel.cancelled, 0.2)
    finally:
        r.stop()


def test_the_idle_warm_up_stops_with_the_rest_of_the_background_work():
    clock = Clock()
    r = rig(2, slow_prefill=("a long window",), clock=clock)
    try:
        r.idle_plan = (state("a", 1, "a long window", "s"), WarmUp())
        r.worker.document_changed("a", 1)  # the user's last action
        clock.advance(knobs.IDLE_WARM_S)
        assert r.until(lambda: r.engine.prefills and r.worker.running() is not None)  # it warms ...
        clock.advance(knobs.IDLE_WORK_S - knobs.IDLE_WARM_S)
        assert r.until(lambda: r.worker.running() is None)  # ... and stops with the rest
        assert r.engine.prefills == [("a long window", "s")]
    finally:
        r.stop()


class Block:
    chunks = ("chunk",)

    def digest(self) -> str:
        return "d1"


def test_a_context_block_comes_with_the_warm_up_and_serves_only_its_document():
    r = Rig(FakeEngine(steps(20, STEP))).start()
    r.idle_plan = (state("a", 1, "pa"), WarmUp(Block()))  # the service gathers the block for the active spot
    assert r.until(lambda: r.engine.context_digest == "d1", knobs.IDLE_WARM_S + 2)  # admitted in idle time
    pa, pb = state("a", 1, "pa-again"), state("b", 1, "pb")
    r.worker.submit(pa)
    r.result(pa)
    assert r.engine.context_digest == "d1"  # its own document keeps it
    r.worker.submit(pb)
    r.result(pb)
    # another document's prompt never carries it: dropped before that generation ran
    assert r.engine.log.index(("context", "")) < r.engine.log.index(("complete", "pb"))
    assert r.engine.context_digest == ""
    r.stop()


def test_the_status_says_ready_when_what_is_left_waits_for_a_user_who_has_gone():
    """A generation ends with held-back speculation queued (so it says no "ready" yet); the user goes idle, so
    that job will not run: the status must not stay at "busy" (editors show "generating" until a keystroke)."""
    clock = Clock()
    r = rig(30, clock=clock)
    try:
        asked = state("a", 1, "asked")
        r.worker.submit(asked)
        assert r.engine.running.wait(2)
        r.worker.submit(state("b", 1, "spec"), Work(Ask.SPECULATE, not_before=clock() + 1.0))
        r.result(asked)  # (its "busy" said; nothing after: speculation is queued)
        assert r.until(lambda: r.worker.running() is None)
        assert r.statuses[-1] == "busy"
        clock.advance(knobs.IDLE_WORK_S + 1.0)  # the speculation's time, but the user has gone
        assert r.until(lambda: r.statuses[-1] == "ready", 2), r.statuses
        assert "spec" not in prefixes(r)
    finally:
        r.stop()


def test_a_generation_stopped_because_the_user_went_idle_ends_at_ready_with_no_error():
    """The watchdog stops work nobody waits for once the user has gone: that is no engine error, so the status
    says "ready" (editors showed the stop's reason, "idle", as the status message)."""
    from lsp_server.completion.events import Status
    clock = Clock()
    r = rig(slow=("spec",), clock=clock)
    said: list[Status] = []
    r.events.on(Status, said.append)
    try:
        r.worker.submit(state("a", 1, "spec"), Work(Ask.SPECULATE))
        assert r.engine.running.wait(2)
        assert r.until(lambda: said and said[-1].state == "busy")
        clock.advance(knobs.IDLE_WORK_S + 0.1)
        assert r.until(lambda: said[-1].state == "ready", 3), said
        assert "error" not in said[-1].info, said[-1]
    finally:
        r.stop()


def test_a_look_ahead_line_waits_for_the_typist_so_typing_off_the_line_costs_none_of_it():
    clock = Clock()
    first = "compute(first_argument, second)"  # the first line, far longer than knobs.LOOKAHEAD_NEAR_CHARS

    def script(prefix, suffix, params):
        yield Step(first + "\n", STEP)
        for i in range(1, 6):
            yield Step(first + "\n" + "y" * i, STEP)
        return Done("length")

    ahead = GenParams(max_tokens=knobs.LOOKAHEAD_TOKENS, max_lines=2)
    r = Rig(FakeEngine(script), clock=clock).start()
    for uri in "abc":
        before, ended = r.engine.steps_run, len(r.engine.ended)
        r.worker.submit(state(uri, 1, f"{uri} = ", params=ahead), Work(Ask.SPECULATE))  # (not one the store has)
        assert r.until(lambda before=before: r.engine.steps_run == before + 1, 30), (uri, r.engine.steps_run)
        time.sleep(0.2)  # (the clock stands still: the user typed nothing and did not pause)
        assert r.engine.steps_run == before + 1 and r.worker.backlog() == 1
        if uri == "a":  # typed off the line: stopped with nothing written after its first line
            r.worker.document_changed(uri, 2, state(uri, 2, f"{uri} = q", params=ahead))
            assert r.until(lambda ended=ended: len(r.engine.ended) > ended, 30) and r.engine.ended[-1] == "cancelled"
            assert r.engine.steps_run == before + 1
            continue
        if uri == "b":  # typed through to near the line's end: the next line now
            near = f"{uri} = " + first[:len(first) - knobs.LOOKAHEAD_NEAR_CHARS]
            r.worker.document_changed(uri, 2, state(uri, 2, near, params=ahead))
        else:  # a pause: the user may take it and press Enter
            clock.advance(knobs.LOOKAHEAD_QUIET_S + 0.01)
        assert r.until(lambda ended=ended: len(r.engine.ended) > ended, 30)
        assert r.engine.ended[-1] == "length" and r.engine.steps_run == before + 6
    r.stop()
