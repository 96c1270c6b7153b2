"""The scheduler's rules (worker.py), against the shared stand-in engine (tests/fakes.py): one step every
STEP seconds, the CancelToken checked before each step, like the real generation loop. Every outcome is
read where requests read it: the store's record of the work. The real engine runs in
tests/test_server_e2e.py."""

from __future__ import annotations

import time

import pytest

from engine.types import Completion, GenParams
from lsp_server.completion.jobs import SPECULATIVE, USER, Cancelled, EngineUnavailable, Stale, Superseded
from lsp_server.completion.planner import IDLE_WORK_S
from lsp_server.completion.worker import IDLE_WARM_S
from tests.fakes import Done, FakeEngine, Rig, Step, state, steps

STEP = 0.01


def rig(n: int = 20, slow: tuple[str, ...] = (), slow_prefill: tuple[str, ...] = ()) -> Rig:
    return Rig(FakeEngine(steps(n, STEP, slow), slow_prefill=slow_prefill)).start()


def text_of(r: Rig, st) -> str:
    return r.result(st)[0][0].text


def prefixes(r: Rig) -> list[str]:
    return [c.prefix for c in r.engine.calls]


def test_result_delivered_once():
    r = rig()
    st = state("a", 1, "p", "s")
    r.worker.submit(st)
    comps, _ = r.result(st)
    assert comps[0].text == "p" + "x" * 20 and len(r.engine.calls) == 1
    r.stop()


def test_newer_request_supersedes_running_one_within_a_step():
    r = rig(3, slow=("p1",))
    first, second = state("a", 1, "p1"), state("a", 1, "p2")
    r.worker.submit(first)
    assert r.engine.running.wait(5)
    t0 = time.monotonic()
    r.worker.submit(second)
    with pytest.raises(Superseded):
        r.result(first)
    assert time.monotonic() - t0 < 10 * STEP + 0.1
    assert text_of(r, second).startswith("2")
    r.stop()


def test_newer_request_supersedes_pending_one_at_once():
    r = rig(2, slow=("busy",))
    r.worker.submit(state("b", 1, "busy"), budget_s=0.5)  # keeps the engine busy for 0.5 s
    assert r.engine.running.wait(5)
    older, newer = state("a", 1, "p1"), state("a", 1, "p2")
    r.worker.submit(older)
    r.worker.submit(newer)
    with pytest.raises(Superseded):
        r.result(older, timeout=0.2)  # answered without waiting for the engine
    assert text_of(r, newer).startswith("2")
    assert prefixes(r) == ["busy", "p2"]  # the superseded job never ran
    r.stop()


def test_document_change_stops_stale_work():
    r = rig(500)
    st = state("a", 1, "p")
    r.worker.submit(st)
    assert r.engine.running.wait(5)
    t0 = time.monotonic()
    r.worker.document_changed("a", 2)
    with pytest.raises(Stale):
        r.result(st)
    assert time.monotonic() - t0 < 10 * STEP + 0.1 and r.engine.steps_run < 100
    r.stop()


def test_work_for_a_closed_document_is_stale():
    r = rig(500)
    st = state("a", 1, "p")
    r.worker.submit(st)
    assert r.engine.running.wait(5)
    r.worker.document_closed("a")
    with pytest.raises(Stale):
        r.result(st)
    r.stop()


def test_identical_work_is_computed_once():
    r = rig(10)
    st = state("a", 1, "p", "s")
    r.worker.submit(st)
    r.worker.submit(state("a", 1, "p", "s"))
    assert text_of(r, st) == "p" + "x" * 10 and len(r.engine.calls) == 1
    r.stop()


def test_client_cancel_stops_the_engine():
    r = rig(500)
    st = state("a", 1, "p")
    r.worker.submit(st)
    assert r.engine.running.wait(5)
    r.worker.abandon(st)
    t0 = time.monotonic()
    assert r.until(lambda: not r.engine.running.is_set())
    assert time.monotonic() - t0 < 10 * STEP + 0.1
    with pytest.raises(Cancelled):
        r.result(st)
    r.stop()


def test_joined_request_survives_the_other_waiter_cancelling():
    r = rig(20)
    st = state("a", 1, "p")
    r.worker.submit(st)
    r.worker.submit(st)
    assert r.engine.running.wait(5)
    r.worker.abandon(st)
    assert text_of(r, st) == "p" + "x" * 20
    r.stop()


def test_other_documents_wait_their_turn():
    r = rig(5)
    a, b = state("a", 1, "a"), state("b", 1, "b")
    r.worker.submit(a)
    r.worker.submit(b)
    assert text_of(r, a).startswith("a") and text_of(r, b).startswith("b")
    r.stop()


def test_budget_starts_when_the_job_starts():
    r = rig(1000)
    r.worker.submit(state("b", 1, "b"), budget_s=0.3)  # a 0.3 s generation ahead of a
    assert r.engine.running.wait(5)
    a = state("a", 1, "a")
    r.worker.submit(a, budget_s=0.2)
    comps, _ = r.result(a)
    # it waited ~0.3 s behind b, yet still got its own 0.2 s of generation
    assert comps[0].finish_reason == "deadline" and len(comps[0].text) > 0.1 / STEP / 2
    r.stop()


def test_engine_error_reaches_the_waiter_and_the_worker_lives_on():
    def script(prefix, suffix, params):
        if prefix == "boom":
            raise RuntimeError("kaput")
        yield Step(prefix[-1:] + "xx", STEP)
        return Done("length")

    r = Rig(FakeEngine(script)).start()
    boom, ok = state("a", 1, "boom"), state("a", 1, "ok")
    r.worker.submit(boom)
    with pytest.raises(RuntimeError, match="kaput"):
        r.result(boom)
    r.worker.submit(ok)
    assert text_of(r, ok) == "kxx"
    r.stop()


def test_load_failure_answers_every_request():
    def load():
        raise RuntimeError("model 'nope' is not built: run `flint model build nope`")

    r = Rig(load=load).start()
    st = state("a", 1, "p")
    r.worker.submit(st)
    with pytest.raises(EngineUnavailable, match="flint model build"):
        r.result(st)
    assert r.statuses == ["loading", "error"]
    # a reload with a working model recovers
    eng = FakeEngine(steps(2, STEP))
    r.worker.reload(lambda: eng)
    assert r.until(lambda: r.worker.engine is not None)
    again = state("a", 1, "q")
    r.worker.submit(again)
    assert text_of(r, again) == "qxx"
    r.stop()


def test_requests_wait_for_the_model_to_load():
    import threading

    gate = threading.Event()
    eng = FakeEngine(steps(2, STEP))

    def load():
        gate.wait(5)
        return eng

    r = Rig(load=load)
    r.worker.start()
    st = state("a", 1, "p")
    r.worker.submit(st)
    time.sleep(0.05)
    assert r.store.outcome("local", st) is None
    gate.set()
    assert text_of(r, st) == "pxx"
    r.stop()


def test_stop_answers_pending_requests():
    r = rig(1000)
    a, b = state("a", 1, "a"), state("b", 1, "b")
    r.worker.submit(a)
    assert r.engine.running.wait(5)
    r.worker.submit(b)
    r.worker.stop()
    for st in (a, b):
        with pytest.raises(EngineUnavailable):
            r.result(st, timeout=1)
    late = state("a", 1, "late")
    r.worker.submit(late)
    with pytest.raises(EngineUnavailable):
        r.result(late, timeout=1)


def test_job_nobody_waits_for_is_stopped():
    r = rig(300)
    st = state("a", 1, "p")
    r.worker.submit(st)
    r.worker.submit(st)  # joined
    assert r.engine.running.wait(5)
    r.worker.abandon(st)
    r.worker.abandon(st)
    time.sleep(20 * STEP)
    assert not r.engine.running.is_set() and r.engine.steps_run < 50 and r.worker.backlog() == 0
    r.stop()


def test_speculative_job_is_joined_by_the_request_for_the_same_spot():
    r = rig(20)
    st = state("a", 1, "p", "s")
    r.worker.submit(st, SPECULATIVE)
    assert r.engine.running.wait(5)
    r.worker.submit(st, USER)
    comps, _ = r.result(st)
    assert comps[0].text == "p" + "x" * 20 and comps[0].source == "model" and len(r.engine.calls) == 1
    r.stop()


def test_same_work_again_is_answered_from_the_store_not_the_model():
    r = rig(5)
    st = state("a", 1, "p", "s")
    r.worker.submit(st)
    r.result(st)
    asked = time.monotonic()
    r.worker.submit(st)  # no job: the store's record of this very work answers it
    answer = r.store.final(st, asked, r.outcome(st), "local", None)
    assert answer.source == "memory" and answer.comps[0].text == "pxxxxx" and len(r.engine.calls) == 1
    newer = state("a", 2, "p", "s")  # a new revision is new work: the store's entry for its text answers
    r.worker.submit(newer)
    assert r.result(newer)[0][0].text == "pxxxxx" and len(r.engine.calls) == 1
    r.worker.submit(newer, anew=True)  # work asked anew (what the store held was cut off) runs the model
    assert r.until(lambda: len(r.engine.calls) == 2)
    r.stop()


def test_user_requests_run_before_speculation():
    r = rig(3, slow=("busy",))
    r.worker.submit(state("c", 1, "busy"), budget_s=0.2)
    assert r.engine.running.wait(5)
    r.worker.submit(state("a", 1, "spec"), SPECULATIVE)
    user = state("b", 1, "user")
    r.worker.submit(user, USER)
    r.result(user)
    time.sleep(10 * STEP)
    assert prefixes(r)[:3] == ["busy", "user", "spec"]
    r.stop()


# ---------------------------------------------------------------------------------------------------------
# speculation: kept jobs, futures, release, the store's hooks, idle warming


def test_a_kept_job_runs_on_for_the_new_revision():
    r = rig(30)
    st = state("a", 1, "p")
    r.worker.submit(st, SPECULATIVE)
    assert r.until(lambda: r.engine.steps_run > 1)
    r.worker.document_changed("a", 2, state("a", 2, "pp"))  # the user typed what it streams
    comps, _ = r.result(state("a", 2, "p"))  # the job now serves revision 2
    assert comps[0].finish_reason == "length" and len(comps[0].text) == 31 and len(r.engine.calls) == 1
    with pytest.raises(Stale):  # what was asked about revision 1 is stale
        r.result(st)
    r.stop()


def test_a_job_not_kept_stops_and_its_waiters_hear_stale():
    r = rig(500)
    st = state("a", 1, "p")
    r.worker.submit(st)
    assert r.until(lambda: r.engine.steps_run > 1)
    r.worker.document_changed("a", 2, state("a", 2, "pz"))  # not what it writes
    with pytest.raises(Stale):
        r.result(st)
    assert r.engine.steps_run < 100
    r.stop()


def test_kept_running_job_is_not_superseded_and_the_store_answers_the_request_after_it():
    r = rig(30)
    r.worker.submit(state("a", 1, "p"), SPECULATIVE)
    assert r.until(lambda: r.engine.steps_run > 1)
    typed = state("a", 2, "pp")
    r.worker.document_changed("a", 2, typed)
    r.worker.submit(typed, USER)  # queued behind the kept job, not stopping it
    comps, _ = r.result(typed)
    assert comps[0].source == "type-through"  # by the time it ran, the store answered it
    assert prefixes(r) == ["p"]  # the kept job ran to its end, the request cost no model call
    r.stop()


def test_a_kept_job_stops_once_the_user_is_somewhere_it_does_not_lead():
    r = rig(500)
    r.worker.submit(state("a", 1, "p"), SPECULATIVE)
    assert r.until(lambda: r.engine.steps_run > 1)
    r.worker.document_changed("a", 2, state("a", 2, "pp"))  # kept: it is tracking the typing
    steps_then = r.engine.steps_run
    r.worker.moved("a", state("a", 2, "pz"))  # the cursor went elsewhere
    with pytest.raises(Superseded):
        r.result(state("a", 2, "p"))
    assert r.engine.steps_run - steps_then < 10
    r.stop()


def test_the_store_answers_a_job_filled_since_it_was_queued():
    r = rig()
    st = state("a", 1, "p", "\n")
    r.store.add(st, [Completion("cached", [1], "eos", source="disk")], "local")
    r.worker.submit(st)
    comps, _ = r.result(st)
    assert comps[0].text == "cached" and r.engine.calls == []
    r.stop()


def test_released_request_lets_the_generation_finish_for_the_next_ask():
    r = rig(30)
    st = state("a", 1, "p")
    r.worker.submit(st, USER, budget_s=5)
    assert r.engine.running.wait(5)
    r.worker.release(st)  # the request's deadline passed: it answered with what existed
    assert r.result(st)[0][0].finish_reason == "length"
    asked = time.monotonic()
    r.worker.submit(st, USER)  # the next ask: from the store
    assert r.store.final(st, asked, r.outcome(st), "local", None).source == "memory"
    assert len(r.engine.calls) == 1
    r.stop()


def test_cancelled_user_request_stops_its_own_job_but_not_joined_speculation():
    r = rig(40)
    st = state("a", 1, "p")
    r.worker.submit(st, SPECULATIVE)
    r.worker.submit(st, USER)  # joins it
    assert r.engine.running.wait(5)
    r.worker.abandon(st)
    assert r.result(st)[0][0].finish_reason == "length"  # the speculation went on
    r.stop()


def test_user_request_preempts_futures_and_futures_run_when_idle():
    r = rig(5, slow=("future-1",))
    assert r.worker.set_futures([state("a", 1, "future-1"), state("a", 1, "future-2")]) == 2
    assert r.engine.running.wait(5)
    t0 = time.monotonic()
    user = state("b", 1, "user")
    r.worker.submit(user, USER)
    r.result(user)
    assert time.monotonic() - t0 < 20 * STEP + 0.3  # did not wait for the 1000-step future
    time.sleep(20 * STEP)
    assert prefixes(r) == ["future-1", "user", "future-2"]
    r.stop()


def test_new_futures_replace_old_ones_but_keep_the_same_state():
    r = rig(3, slow=("busy",))
    r.worker.submit(state("c", 1, "busy"), SPECULATIVE, budget_s=0.3)
    assert r.engine.running.wait(5)
    r.worker.set_futures([state("a", 1, "f1"), state("a", 1, "f2")])
    assert r.worker.set_futures([state("a", 1, "f2"), state("a", 1, "f3")]) == 1
    assert r.worker.backlog() == 3  # busy + f2 + f3
    time.sleep(0.3 + 20 * STEP)
    assert prefixes(r) == ["busy", "f2", "f3"]
    r.stop()


def test_futures_the_user_does_not_head_for_are_dropped_on_change():
    r = rig(3, slow=("busy",))
    r.worker.submit(state("c", 1, "busy"), SPECULATIVE, budget_s=0.3)
    assert r.engine.running.wait(5)
    r.worker.set_futures([state("a", 1, "def f(): return 1"), state("a", 1, "other")])
    r.worker.document_changed("a", 2, state("a", 2, "def f"))  # typing toward the first one
    time.sleep(0.3 + 20 * STEP)
    assert prefixes(r) == ["busy", "def f(): return 1"]
    r.stop()


def test_a_job_held_back_waits_for_its_time_and_a_newer_keystroke_replaces_it():
    r = rig(2)
    r.worker.submit(state("a", 1, "p1"), SPECULATIVE, not_before=time.monotonic() + 0.2)
    time.sleep(0.1)
    assert r.engine.calls == []
    r.worker.document_changed("a", 2)
    r.worker.submit(state("a", 2, "p2"), SPECULATIVE, not_before=time.monotonic() + 0.2)
    time.sleep(0.15)
    assert r.engine.calls == []  # still holding the newest keystroke's work back
    time.sleep(0.2)
    assert prefixes(r) == ["p2"]
    r.stop()


def test_idle_time_warms_once_and_new_work_interrupts_it():
    r = rig(2)
    st = state("a", 1, "p", "s")
    r.worker.submit(st)
    r.result(st)
    r.idle_plan = (state("a", 1, "active prefix", "active suffix"), None)
    calls = r.idle_calls
    r.worker.document_changed("a", 1)  # activity: the worker says it is idle again after a quiet period
    assert r.until(lambda: r.engine.prefills, IDLE_WARM_S + 1)
    assert r.engine.prefills == [("active prefix", "active suffix")]
    assert r.until(lambda: r.worker.backlog() == 0) and r.engine.held == ("active prefix", "active suffix")
    time.sleep(IDLE_WARM_S + 0.2)
    r.pump()
    assert r.idle_calls == calls + 1 and len(r.engine.prefills) == 1  # once per quiet period, not in a loop
    # new work arrives while warming: the warm-up is dropped, the request runs
    r.idle_plan = (state("a", 1, "other prefix", "x"), None)
    r.worker.document_changed("a", 1)
    time.sleep(IDLE_WARM_S + 0.05)
    q = state("a", 1, "q")
    r.worker.submit(q)
    assert text_of(r, q).startswith("q")
    r.stop()


def test_detachable_request_cancelled_by_the_editor_goes_on_as_speculation():
    """VS Code cancels the previous keystroke's request before it sends the next one: the generation must
    survive that long enough for the next didChange to keep it (or stop it)."""
    r = rig(30)
    st = state("a", 1, "p")
    r.worker.submit(st, USER, detachable=True)
    assert r.engine.running.wait(5)
    r.worker.abandon(st)
    assert r.result(st)[0][0].finish_reason == "length"
    r.stop()


def test_work_in_the_users_document_stops_orphaned_speculation_elsewhere():
    r = rig(500)
    a = state("a", 1, "a-prefix")
    r.worker.submit(a, USER, detachable=True)
    assert r.engine.running.wait(5)
    r.worker.release(a)  # answered at its deadline; the generation goes on as speculation for a
    t0 = time.monotonic()
    r.worker.submit(state("b", 1, "b-prefix"), SPECULATIVE)  # the user now types in b
    assert r.until(lambda: "b-prefix" in prefixes(r))
    assert time.monotonic() - t0 < 20 * STEP + 0.2
    with pytest.raises(Superseded):  # a's stopped within a step
        r.result(a)
    r.stop()


def test_a_request_in_another_document_stops_work_let_go_there():
    # variants still running after their item 1 went out (released, awaited): the user asks elsewhere
    r = rig(500)
    a = state("a", 1, "a-prefix", params=GenParams(n=3))
    r.worker.submit(a, USER)
    assert r.engine.running.wait(5)
    r.worker.release(a, awaited=True)
    t0 = time.monotonic()
    r.worker.submit(state("b", 1, "b-prefix"), USER)
    assert r.until(lambda: "b-prefix" in prefixes(r))
    assert time.monotonic() - t0 < 20 * STEP + 0.2  # not after a's
    with pytest.raises(Superseded):
        r.result(a)
    r.stop()


def test_a_request_joining_queued_speculation_preempts_other_speculation():
    r = rig(3, slow=("busy",))
    r.worker.set_futures([state("c", 1, "busy")])  # a future runs
    assert r.engine.running.wait(5)
    st = state("a", 1, "p")
    r.worker.submit(st, SPECULATIVE, not_before=time.monotonic() + 5)  # held back
    t0 = time.monotonic()
    r.worker.submit(st, USER)  # the request joins it
    assert text_of(r, st).startswith("p") and time.monotonic() - t0 < 20 * STEP + 0.3
    r.stop()


def test_background_work_stops_soon_after_the_user_goes_idle_but_not_what_a_user_waits_for():
    r = rig(slow=("spec", "asked"))
    try:
        t0 = time.monotonic()
        r.worker.submit(state("file:///a.py", 1, "spec"), SPECULATIVE)
        assert r.engine.running.wait(2)
        while r.engine.running.is_set() and time.monotonic() - t0 < IDLE_WORK_S + 2:
            time.sleep(0.01)
        # stopped, not run for its 10 s
        assert IDLE_WORK_S <= time.monotonic() - t0 < IDLE_WORK_S + 1.0 and not r.engine.running.is_set()
        # a request that got nothing at its deadline lets go of its job: the user still waits there
        asked = state("file:///b.py", 1, "asked")
        r.worker.submit(asked, USER)
        assert r.engine.running.wait(2)
        r.worker.release(asked, awaited=True)
        time.sleep(IDLE_WORK_S + 0.5)
        assert r.worker.running() is not None and not r.worker.running().cancel.cancelled
    finally:
        r.stop()


def test_the_idle_warm_up_stops_with_the_rest_of_the_background_work():
    r = rig(2, slow_prefill=("a long window",))
    try:
        r.idle_plan = (state("a", 1, "a long window", "s"), None)
        t0 = time.monotonic()
        r.worker.document_changed("a", 1)  # the user's last action
        assert r.until(lambda: r.engine.prefills and r.worker.running() is None, IDLE_WORK_S + 3)
        assert r.engine.prefills == [("a long window", "s")]  # it warmed ...
        assert time.monotonic() - t0 < IDLE_WORK_S + 1.0  # ... and stopped with the rest
    finally:
        r.stop()


class Block:
    chunks = ("chunk",)

    def digest(self) -> str:
        return "d1"


def test_a_context_block_comes_with_the_warm_up_and_serves_only_its_document():
    r = Rig(FakeEngine(steps(20, STEP))).start()
    r.idle_plan = (state("a", 1, "pa"), Block())  # the service gathers the block for the active spot
    assert r.until(lambda: r.engine.context_digest == "d1", IDLE_WARM_S + 2)  # admitted in idle time
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
