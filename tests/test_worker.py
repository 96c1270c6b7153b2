"""The scheduler's rules (worker.py), against the shared stand-in engine (tests/fakes.py): one step every
STEP seconds, the CancelToken checked before each step, like the real generation loop. Every outcome is
read where requests read it: the store's record of the work. The real engine runs in
tests/test_server_e2e.py."""

from __future__ import annotations

import time

import pytest

from engine.types import Completion
from lsp_server.completion.jobs import Ask, Cancelled, EngineUnavailable, Stale, Superseded, Work
from lsp_server.completion.store.tickets import Ticket
from tests.fakes import Done, FakeEngine, Rig, Step, state, steps, wait_for

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
    r.worker.submit(state("b", 1, "busy"), Work(budget_s=0.5))  # keeps the engine busy for 0.5 s
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
    ticket = r.store.submit(st, Work())
    assert r.engine.running.wait(5)
    ticket.release()
    t0 = time.monotonic()
    assert r.until(lambda: not r.engine.running.is_set())
    assert time.monotonic() - t0 < 10 * STEP + 0.1
    with pytest.raises(Cancelled):
        r.result(st)
    r.stop()


def test_joined_request_survives_the_other_waiter_cancelling():
    r = rig(20)
    st = state("a", 1, "p")
    first = r.store.submit(st, Work())
    r.store.submit(st, Work())
    assert r.engine.running.wait(5)
    first.release()
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
    r.worker.submit(state("b", 1, "b"), Work(budget_s=0.3))  # a 0.3 s generation ahead of a
    assert r.engine.running.wait(5)
    a = state("a", 1, "a")
    r.worker.submit(a, Work(budget_s=0.2))
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
    assert wait_for(lambda: r.worker.backlog() == 1)  # queued while the model loads
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
    tickets = [r.store.submit(st, Work()), r.store.submit(st, Work())]  # the second joined
    assert r.engine.running.wait(5)
    for t in tickets:
        t.release()
    wait_for(lambda: not r.engine.running.is_set() and r.worker.backlog() == 0, 20 * STEP)
    assert not r.engine.running.is_set() and r.engine.steps_run < 50 and r.worker.backlog() == 0
    r.stop()


def test_speculative_job_is_joined_by_the_request_for_the_same_spot():
    r = rig(20)
    st = state("a", 1, "p", "s")
    r.worker.submit(st, Work(Ask.SPECULATE))
    assert r.engine.running.wait(5)
    r.worker.submit(st)
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
    answer = Ticket(r.store, st, "local", None, None).final(asked, r.outcome(st))
    assert answer.source == "memory" and answer.comps[0].text == "pxxxxx" and len(r.engine.calls) == 1
    newer = state("a", 2, "p", "s")  # a new revision is new work: the store's entry for its text answers
    r.worker.submit(newer)
    assert r.result(newer)[0][0].text == "pxxxxx" and len(r.engine.calls) == 1
    r.worker.submit(newer, Work(anew=True))  # work asked anew (what the store held was cut off) runs the model
    assert r.until(lambda: len(r.engine.calls) == 2)
    r.stop()


def test_user_requests_run_before_speculation():
    r = rig(3, slow=("busy",))
    r.worker.submit(state("c", 1, "busy"), Work(budget_s=0.2))
    assert r.engine.running.wait(5)
    r.worker.submit(state("a", 1, "spec"), Work(Ask.SPECULATE))
    user = state("b", 1, "user")
    r.worker.submit(user)
    r.result(user)
    wait_for(lambda: len(prefixes(r)) >= 3, 10 * STEP)
    assert prefixes(r)[:3] == ["busy", "user", "spec"]
    r.stop()


# ---------------------------------------------------------------------------------------------------------
# speculation: kept jobs, futures, release, the store's hooks, idle warming


def test_a_kept_job_runs_on_for_the_new_revision():
    r = rig(30)
    st = state("a", 1, "p")
    r.worker.submit(st, Work(Ask.SPECULATE))
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
    r.worker.submit(state("a", 1, "p"), Work(Ask.SPECULATE))
    assert r.until(lambda: r.engine.steps_run > 1)
    typed = state("a", 2, "pp")
    r.worker.document_changed("a", 2, typed)
    r.worker.submit(typed)  # queued behind the kept job, not stopping it
    comps, _ = r.result(typed)
    assert comps[0].source == "type-through"  # by the time it ran, the store answered it
    assert prefixes(r) == ["p"]  # the kept job ran to its end, the request cost no model call
    r.stop()


def test_a_kept_job_stops_once_the_user_is_somewhere_it_does_not_lead():
    r = rig(500)
    r.worker.submit(state("a", 1, "p"), Work(Ask.SPECULATE))
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
    r.store.typethrough.add(st.prefix, st.suffix, [Completion("cached", [1], "eos", source="disk")], n=st.params.n,
                            key=(*st.params.key(), "local"), origin="model")
    r.worker.submit(st)
    comps, _ = r.result(st)
    assert comps[0].text == "cached" and r.engine.calls == []
    r.stop()


def test_released_request_lets_the_generation_finish_for_the_next_ask():
    r = rig(30)
    st = state("a", 1, "p")
    ticket = r.store.submit(st, Work(budget_s=5))
    assert r.engine.running.wait(5)
    ticket.detach()  # the request's deadline passed: it answered with what existed
    assert r.result(st)[0][0].finish_reason == "length"
    asked = time.monotonic()
    r.worker.submit(st)  # the next ask: from the store
    assert Ticket(r.store, st, "local", None, None).final(asked, r.outcome(st)).source == "memory"
    assert len(r.engine.calls) == 1
    r.stop()


def test_cancelled_user_request_stops_its_own_job_but_not_joined_speculation():
    r = rig(40)
    st = state("a", 1, "p")
    r.worker.submit(st, Work(Ask.SPECULATE))
    ticket = r.store.submit(st, Work())  # joins it
    assert r.engine.running.wait(5)
    ticket.release()
    assert r.result(st)[0][0].finish_reason == "length"  # the speculation went on
    r.stop()
