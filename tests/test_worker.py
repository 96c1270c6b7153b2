"""The engine worker's scheduling rules, against a stand-in engine that implements the facade
(engine/engine_api.md): one step every STEP seconds, the CancelToken checked before each step, like the
real generation loop. The real engine runs in tests/test_server_e2e.py."""

from __future__ import annotations

import threading
import time
from concurrent.futures import CancelledError

import pytest

from engine.types import CancelToken, Completion, GenParams, Timings
from lsp_server.completion.jobs import SPECULATIVE, USER, EngineUnavailable, Stale, Superseded
from lsp_server.completion.worker import Worker

STEP = 0.01


class StepEngine:
    """Generates ``steps`` tokens of "x", STEP seconds each; stops at cancel or deadline."""

    model_id = "step-engine"

    def __init__(self, steps: int = 20, slow: tuple[str, ...] = ()) -> None:
        self.steps = steps
        self.slow = slow  # prompts that take 1000 steps
        self.calls: list[tuple[str, str, GenParams]] = []
        self.steps_run = 0
        self.running = threading.Event()

    def complete(self, prefix, suffix="", params=None, cancel: CancelToken | None = None, on_token=None):
        params = params or GenParams()
        self.calls.append((prefix, suffix, params))
        self.running.set()
        t = Timings()
        text, reason = "", "length"
        for _ in range(1000 if prefix in self.slow else self.steps):
            if cancel is not None and cancel.cancelled:
                reason = "cancelled"
                break
            if params.deadline is not None and time.monotonic() >= params.deadline:
                reason = "deadline"
                break
            time.sleep(STEP)
            self.steps_run += 1
            text += "x"
        self.running.clear()
        return [Completion(text=prefix[-1:] + text, token_ids=[1] * len(text), finish_reason=reason)], t


class Revisions(dict):
    def __call__(self, uri: str) -> int | None:
        return self.get(uri)


def make(engine=None, load=None, events=None):
    revs = Revisions()
    engine = engine or StepEngine()
    w = Worker(load or (lambda: engine), revs, (lambda s, i: events.append(s)) if events is not None else None)
    w.start()
    assert w.loaded.wait(5)
    return w, engine, revs


def wait_running(engine: StepEngine) -> None:
    assert engine.running.wait(5)


def test_result_delivered_once():
    w, eng, revs = make()
    revs["a"] = 1
    fut = w.submit("a", 1, "p", "s", GenParams())
    comps, timings = fut.result(5)
    assert comps[0].text == "p" + "x" * 20 and isinstance(timings, Timings)
    assert len(eng.calls) == 1
    w.stop()


def test_newer_request_supersedes_running_one_within_a_step():
    w, eng, revs = make(StepEngine(steps=3, slow=("p1",)))
    revs["a"] = 1
    first = w.submit("a", 1, "p1", "", GenParams())
    wait_running(eng)
    t0 = time.monotonic()
    second = w.submit("a", 1, "p2", "", GenParams())
    with pytest.raises(Superseded):
        first.result(5)
    assert time.monotonic() - t0 < 10 * STEP + 0.1
    assert second.result(5)[0][0].text.startswith("2")
    w.stop()


def test_newer_request_supersedes_pending_one_at_once():
    w, eng, revs = make(StepEngine(steps=2, slow=("busy",)))
    revs.update(a=1, b=1)
    w.submit("b", 1, "busy", "", GenParams(), budget_s=0.5)  # keeps the engine busy for 0.5 s
    wait_running(eng)
    older = w.submit("a", 1, "p1", "", GenParams())
    newer = w.submit("a", 1, "p2", "", GenParams())
    with pytest.raises(Superseded):
        older.result(0.2)  # answered without waiting for the engine
    assert newer.result(10)[0][0].text.startswith("2")
    assert [c[0] for c in eng.calls] == ["busy", "p2"]  # the superseded job never ran
    w.stop()


def test_document_change_stops_stale_work():
    w, eng, revs = make(StepEngine(steps=500))
    revs["a"] = 1
    fut = w.submit("a", 1, "p", "", GenParams())
    wait_running(eng)
    revs["a"] = 2
    t0 = time.monotonic()
    w.document_changed("a", 2)
    with pytest.raises(Stale):
        fut.result(5)
    assert time.monotonic() - t0 < 10 * STEP + 0.1
    assert eng.steps_run < 100
    w.stop()


def test_result_for_a_revision_that_moved_on_is_dropped():
    w, eng, revs = make(StepEngine(steps=5))
    revs["a"] = 1
    fut = w.submit("a", 1, "p", "", GenParams())
    wait_running(eng)
    revs["a"] = 2  # changed, but nobody told the worker: it still checks before answering
    with pytest.raises(Stale):
        fut.result(5)
    w.stop()


def test_identical_work_is_computed_once():
    w, eng, revs = make(StepEngine(steps=10))
    revs["a"] = 1
    f1 = w.submit("a", 1, "p", "s", GenParams())
    f2 = w.submit("a", 1, "p", "s", GenParams())
    assert f1.result(5) is f2.result(5) or f1.result(5)[0][0].text == f2.result(5)[0][0].text
    assert len(eng.calls) == 1
    w.stop()


def test_client_cancel_stops_the_engine():
    w, eng, revs = make(StepEngine(steps=500))
    revs["a"] = 1
    fut = w.submit("a", 1, "p", "", GenParams())
    wait_running(eng)
    assert fut.cancel()
    t0 = time.monotonic()
    while eng.running.is_set() and time.monotonic() - t0 < 5:
        time.sleep(STEP / 2)
    assert not eng.running.is_set()
    assert time.monotonic() - t0 < 10 * STEP + 0.1
    with pytest.raises(CancelledError):
        fut.result(0)
    w.stop()


def test_joined_request_survives_the_other_waiter_cancelling():
    w, eng, revs = make(StepEngine(steps=20))
    revs["a"] = 1
    f1 = w.submit("a", 1, "p", "", GenParams())
    f2 = w.submit("a", 1, "p", "", GenParams())
    wait_running(eng)
    f1.cancel()
    assert f2.result(5)[0][0].text == "p" + "x" * 20
    w.stop()


def test_other_documents_wait_their_turn():
    w, eng, revs = make(StepEngine(steps=5))
    revs.update(a=1, b=1)
    fa = w.submit("a", 1, "a", "", GenParams())
    fb = w.submit("b", 1, "b", "", GenParams())
    assert fa.result(5)[0][0].text.startswith("a") and fb.result(5)[0][0].text.startswith("b")
    w.stop()


def test_budget_starts_when_the_job_starts():
    w, eng, revs = make(StepEngine(steps=1000))
    revs.update(a=1, b=1)
    w.submit("b", 1, "b", "", GenParams(), budget_s=0.3)  # a 0.3 s generation ahead of a
    wait_running(eng)
    fa = w.submit("a", 1, "a", "", GenParams(), budget_s=0.2)
    comps, _ = fa.result(5)
    # it waited ~0.3 s behind b, yet still got its own 0.2 s of generation
    assert comps[0].finish_reason == "deadline" and len(comps[0].text) > 0.1 / STEP / 2
    w.stop()


def test_burst_of_messages_starts_the_engine_once():
    w, eng, revs = make(StepEngine(steps=3))
    futs = []
    for i in range(1, 101):
        revs["a"] = i
        w.document_changed("a", i)
        futs.append(w.submit("a", i, f"p{i}", "", GenParams(), USER))
    assert futs[-1].result(5)[0][0].text.startswith("0")  # "p100"[-1:]
    dropped = 0
    for f in futs[:-1]:
        with pytest.raises((Superseded, Stale)):
            f.result(1)
        dropped += 1
    assert dropped == 99
    assert len(eng.calls) <= 3  # not one generation per message
    w.stop()


def test_engine_error_reaches_the_waiter_and_the_worker_lives_on():
    class Broken(StepEngine):
        def complete(self, prefix, *a, **k):
            if prefix == "boom":
                raise RuntimeError("kaput")
            return super().complete(prefix, *a, **k)

    w, eng, revs = make(Broken(steps=2))
    revs["a"] = 1
    with pytest.raises(RuntimeError, match="kaput"):
        w.submit("a", 1, "boom", "", GenParams()).result(5)
    assert w.submit("a", 1, "ok", "", GenParams()).result(5)[0][0].text == "kxx"
    w.stop()


def test_load_failure_answers_every_request():
    def load():
        raise RuntimeError("model 'nope' is not built: run `flint model build nope`")

    events: list[str] = []
    w, _, revs = make(load=load, events=events)
    revs["a"] = 1
    with pytest.raises(EngineUnavailable, match="flint model build"):
        w.submit("a", 1, "p", "", GenParams()).result(5)
    assert events == ["loading", "error"]
    # a reload with a working model recovers
    eng = StepEngine(steps=2)
    w.reload(lambda: eng)
    deadline = time.monotonic() + 5
    while w.engine is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert w.submit("a", 1, "p", "", GenParams()).result(5)[0][0].text == "pxx"
    w.stop()


def test_requests_wait_for_the_model_to_load():
    gate = threading.Event()
    eng = StepEngine(steps=2)

    def load():
        gate.wait(5)
        return eng

    revs = Revisions(a=1)
    w = Worker(load, revs)
    w.start()
    fut = w.submit("a", 1, "p", "", GenParams())
    time.sleep(0.05)
    assert not fut.done()
    gate.set()
    assert fut.result(5)[0][0].text == "pxx"
    w.stop()


def test_stop_answers_pending_requests():
    w, eng, revs = make(StepEngine(steps=1000))
    revs.update(a=1, b=1)
    fa = w.submit("a", 1, "a", "", GenParams())
    wait_running(eng)
    fb = w.submit("b", 1, "b", "", GenParams())
    w.stop()
    with pytest.raises(EngineUnavailable):
        fb.result(1)
    with pytest.raises(EngineUnavailable):
        fa.result(1)
    with pytest.raises(EngineUnavailable):
        w.submit("a", 1, "a", "", GenParams()).result(1)


def test_job_nobody_waits_for_is_stopped():
    w, eng, revs = make(StepEngine(steps=300))
    revs["a"] = 1
    f1 = w.submit("a", 1, "p", "", GenParams())
    f2 = w.submit("a", 1, "p", "", GenParams())  # joined
    wait_running(eng)
    f1.cancel()
    f2.cancel()
    time.sleep(20 * STEP)
    assert not eng.running.is_set() and eng.steps_run < 50
    assert w.backlog() == 0
    w.stop()


def test_speculative_job_is_joined_by_the_request_for_the_same_spot():
    w, eng, revs = make(StepEngine(steps=20))
    revs["a"] = 1
    w.submit("a", 1, "p", "s", GenParams(), SPECULATIVE)
    wait_running(eng)
    comps, _ = w.submit("a", 1, "p", "s", GenParams(), USER).result(5)
    assert comps[0].text == "p" + "x" * 20 and comps[0].source == "model"
    assert len(eng.calls) == 1


def test_same_work_again_is_answered_from_memory():
    w, eng, revs = make(StepEngine(steps=5))
    revs["a"] = 1
    w.submit("a", 1, "p", "s", GenParams()).result(5)
    comps, _ = w.submit("a", 1, "p", "s", GenParams()).result(0.05)  # no engine time
    assert comps[0].source == "memory" and comps[0].text == "pxxxxx"
    assert len(eng.calls) == 1
    # a new revision is new work
    revs["a"] = 2
    w.submit("a", 2, "p", "s", GenParams()).result(5)
    assert len(eng.calls) == 2
    # and work asked anew (what the store held was cut off) runs the model again
    comps, _ = w.submit("a", 2, "p", "s", GenParams(), anew=True).result(5)
    assert comps[0].source == "model" and len(eng.calls) == 3
    w.stop()


def test_user_requests_run_before_speculation():
    w, eng, revs = make(StepEngine(steps=3, slow=("busy",)))
    revs.update(a=1, b=1, c=1)
    w.submit("c", 1, "busy", "", GenParams(), budget_s=0.2)
    wait_running(eng)
    w.submit("a", 1, "spec", "", GenParams(), SPECULATIVE)
    user = w.submit("b", 1, "user", "", GenParams(), USER)
    user.result(5)
    time.sleep(10 * STEP)
    assert [c[0] for c in eng.calls][:3] == ["busy", "user", "spec"]
    w.stop()


# ---------------------------------------------------------------------------------------------------------
# speculation: kept jobs, futures, release, hooks, idle warming, debounce
#
# ``Hooks`` below is the session's side of the worker in miniature (the session's own hooks run against
# the real caches in tests/test_session.py); here it only records and answers what each test sets.


class Hooks:
    def __init__(self) -> None:
        self.answers: dict[str, object] = {}  # prefix -> Result to answer without the model
        self.tokens: list[tuple[int, str, int]] = []
        self.finished_jobs: list[tuple[str, object]] = []
        self.stop_on: str | None = None  # token() says stop once a text contains this
        self.idle_plan = None
        self.idle_calls = 0

    def answer(self, job):
        return self.answers.get(job.prefix)

    def started(self, job):
        job.handle = "entry"

    def token(self, job, index, text, doubts=()):
        self.tokens.append((index, text, job.revision))
        return not (self.stop_on and self.stop_on in text)

    def finished(self, job, result, ms):
        self.finished_jobs.append((job.prefix, result))

    def idle(self, kv):
        self.idle_calls += 1
        plan, self.idle_plan = self.idle_plan, None
        return plan


class TokenEngine(StepEngine):
    """StepEngine that also streams each step through on_token, and can prefill."""

    def __init__(self, steps: int = 20, slow: tuple[str, ...] = ()) -> None:
        super().__init__(steps, slow)
        self.prefills: list[tuple[str, str]] = []

    def complete(self, prefix, suffix="", params=None, cancel=None, on_token=None):
        params = params or GenParams()
        self.calls.append((prefix, suffix, params))
        self.running.set()
        text, reason = prefix[-1:], "length"
        for _ in range(1000 if prefix in self.slow else self.steps):
            if cancel is not None and cancel.cancelled:
                reason = "cancelled"
                break
            if params.deadline is not None and time.monotonic() >= params.deadline:
                reason = "deadline"
                break
            time.sleep(STEP)
            self.steps_run += 1
            text += "x"
            if on_token is not None:
                on_token(0, text)
        self.running.clear()
        return [Completion(text=text, token_ids=[1] * len(text), finish_reason=reason)], Timings()

    def prefill(self, prefix, suffix="", cancel=None):
        self.prefills.append((prefix, suffix))
        if prefix in self.slow:  # a long window on a slow CPU: one chunk a step until stopped
            while cancel is None or not cancel.cancelled:
                time.sleep(STEP)
        return Timings()


def make_hooked(engine=None, hooks=None):
    revs = Revisions()
    engine = engine or TokenEngine()
    hooks = hooks or Hooks()
    w = Worker(lambda: engine, revs, None, hooks)
    w.start()
    assert w.loaded.wait(5)
    return w, engine, revs, hooks


def test_a_kept_job_runs_on_for_the_new_revision():
    w, eng, revs, hooks = make_hooked(TokenEngine(steps=30))
    revs["a"] = 1
    w.submit("a", 1, "p", "", GenParams(), SPECULATIVE)
    wait_running(eng)
    while not hooks.tokens:
        time.sleep(STEP / 2)
    revs["a"] = 2
    w.document_changed("a", 2, keep=lambda job, running: running)  # "the user typed what it streams"
    deadline = time.monotonic() + 5
    while not hooks.finished_jobs and time.monotonic() < deadline:
        time.sleep(STEP)
    prefix, (comps, _) = hooks.finished_jobs[0]
    assert prefix == "p" and comps[0].finish_reason == "length" and len(comps[0].text) == 31  # not cut
    assert {rev for _, _, rev in hooks.tokens} == {1, 2}  # streamed on, now for revision 2
    assert len(eng.calls) == 1
    w.stop()


def test_a_job_not_kept_stops_and_its_waiters_hear_stale():
    w, eng, revs, hooks = make_hooked(TokenEngine(steps=500))
    revs["a"] = 1
    fut = w.submit("a", 1, "p", "", GenParams())
    wait_running(eng)
    revs["a"] = 2
    w.document_changed("a", 2, keep=lambda job, running: False)
    with pytest.raises(Stale):
        fut.result(5)
    assert eng.steps_run < 100
    w.stop()


def test_kept_running_job_is_not_superseded_by_the_new_states_speculation():
    w, eng, revs, hooks = make_hooked(TokenEngine(steps=30))
    revs["a"] = 1
    w.submit("a", 1, "p", "", GenParams(), SPECULATIVE)
    wait_running(eng)
    revs["a"] = 2
    w.document_changed("a", 2, keep=lambda job, running: running)
    hooks.answers["q"] = ([Completion("from the stream", [1], "eos", source="type-through")], Timings())
    user = w.submit("a", 2, "q", "", GenParams(), USER)  # queued behind the kept job, not stopping it
    comps, _ = user.result(5)
    assert comps[0].source == "type-through"  # by the time it ran, the caches answered it
    assert [c[0] for c in eng.calls] == ["p"]  # the kept job ran to its end, the request cost no model call
    assert hooks.finished_jobs[0][1][0][0].finish_reason == "length"
    w.stop()


def test_token_hook_stops_a_diverged_generation():
    w, eng, revs, hooks = make_hooked(TokenEngine(steps=500))
    hooks.stop_on = "xxxxx"
    revs["a"] = 1
    w.submit("a", 1, "p", "", GenParams(), SPECULATIVE)
    wait_running(eng)
    deadline = time.monotonic() + 5
    while not hooks.finished_jobs and time.monotonic() < deadline:
        time.sleep(STEP)
    comps, _ = hooks.finished_jobs[0][1]
    assert comps[0].finish_reason == "cancelled" and eng.steps_run < 10
    w.stop()


def test_answer_hook_saves_the_model_call():
    w, eng, revs, hooks = make_hooked()
    revs["a"] = 1
    hooks.answers["p"] = ([Completion("cached", [1], "eos", source="disk")], Timings())
    comps, _ = w.submit("a", 1, "p", "", GenParams()).result(5)
    assert comps[0].text == "cached" and eng.calls == []
    w.stop()


def test_released_request_lets_the_generation_finish_for_the_next_ask():
    w, eng, revs, hooks = make_hooked(TokenEngine(steps=30))
    revs["a"] = 1
    fut = w.submit("a", 1, "p", "", GenParams(), USER, budget_s=5)
    wait_running(eng)
    w.release(fut)  # the request's deadline passed: it answered with what existed
    deadline = time.monotonic() + 5
    while not hooks.finished_jobs and time.monotonic() < deadline:
        time.sleep(STEP)
    assert hooks.finished_jobs[0][1][0][0].finish_reason == "length"
    again = w.submit("a", 1, "p", "", GenParams(), USER).result(0.5)  # the next ask: from memory
    assert again[0][0].source == "memory" and len(eng.calls) == 1
    w.stop()


def test_cancelled_user_request_stops_its_own_job_but_not_joined_speculation():
    w, eng, revs, hooks = make_hooked(TokenEngine(steps=40))
    revs["a"] = 1
    w.submit("a", 1, "p", "", GenParams(), SPECULATIVE)
    user = w.submit("a", 1, "p", "", GenParams(), USER)  # joins it
    wait_running(eng)
    user.cancel()
    deadline = time.monotonic() + 5
    while not hooks.finished_jobs and time.monotonic() < deadline:
        time.sleep(STEP)
    assert hooks.finished_jobs[0][1][0][0].finish_reason == "length"  # the speculation went on


def test_user_request_preempts_futures_and_futures_run_when_idle():
    w, eng, revs, hooks = make_hooked(TokenEngine(steps=5, slow=("future-1",)))
    revs.update(a=1, b=1)
    assert w.set_futures("a", 1, [("future-1", "", GenParams(), None), ("future-2", "", GenParams(), None)]) == 2
    wait_running(eng)
    t0 = time.monotonic()
    comps, _ = w.submit("b", 1, "user", "", GenParams(), USER).result(5)
    assert time.monotonic() - t0 < 20 * STEP + 0.3  # did not wait for the 1000-step future
    time.sleep(20 * STEP)
    assert [c[0] for c in eng.calls] == ["future-1", "user", "future-2"]
    w.stop()


def test_new_futures_replace_old_ones_but_keep_the_same_state():
    w, eng, revs, hooks = make_hooked(TokenEngine(steps=3, slow=("busy",)))
    revs.update(a=1, c=1)
    w.submit("c", 1, "busy", "", GenParams(), SPECULATIVE, budget_s=0.3)
    wait_running(eng)
    w.set_futures("a", 1, [("f1", "", GenParams(), None), ("f2", "", GenParams(), None)])
    assert w.set_futures("a", 1, [("f2", "", GenParams(), None), ("f3", "", GenParams(), None)]) == 1
    assert w.backlog() == 3  # busy + f2 + f3
    time.sleep(0.3 + 20 * STEP)
    assert [c[0] for c in eng.calls] == ["busy", "f2", "f3"]
    w.stop()


def test_futures_the_user_does_not_head_for_are_dropped_on_change():
    w, eng, revs, hooks = make_hooked(TokenEngine(steps=3, slow=("busy",)))
    revs.update(a=1, c=1)
    w.submit("c", 1, "busy", "", GenParams(), SPECULATIVE, budget_s=0.3)
    wait_running(eng)
    w.set_futures("a", 1, [("def f(): return 1", "", GenParams(), None), ("other", "", GenParams(), None)])
    revs["a"] = 2
    w.document_changed("a", 2, keep=lambda job, running: job.prefix.startswith("def f"))
    time.sleep(0.3 + 20 * STEP)
    assert [c[0] for c in eng.calls] == ["busy", "def f(): return 1"]
    w.stop()


def test_debounced_job_waits_for_its_time_and_a_newer_keystroke_replaces_it():
    w, eng, revs, hooks = make_hooked(TokenEngine(steps=2))
    revs["a"] = 1
    t0 = time.monotonic()
    w.submit("a", 1, "p1", "", GenParams(), SPECULATIVE, not_before=t0 + 0.2)
    time.sleep(0.1)
    assert eng.calls == []
    revs["a"] = 2
    w.document_changed("a", 2)
    w.submit("a", 2, "p2", "", GenParams(), SPECULATIVE, not_before=time.monotonic() + 0.2)
    time.sleep(0.15)
    assert eng.calls == []  # still debouncing the newest keystroke
    time.sleep(0.2)
    assert [c[0] for c in eng.calls] == ["p2"]
    w.stop()


def test_idle_time_warms_once_and_new_work_interrupts_it():
    w, eng, revs, hooks = make_hooked(TokenEngine(steps=2))
    revs["a"] = 1
    w.submit("a", 1, "p", "s", GenParams()).result(5)
    hooks.idle_plan = ("a", 1, "active prefix", "active suffix")
    calls = hooks.idle_calls
    w.document_changed("a", 1)  # activity: idle work is asked for again after a quiet period
    time.sleep(IDLE + 0.3)
    assert eng.prefills == [("active prefix", "active suffix")]
    assert w.kv_prompt == ("active prefix", "active suffix")
    time.sleep(IDLE + 0.2)
    assert hooks.idle_calls == calls + 1 and len(eng.prefills) == 1  # once per quiet period, not in a loop
    # new work arrives while warming: the warm-up is dropped, the request runs
    hooks.idle_plan = ("a", 1, "other prefix", "x")
    w.document_changed("a", 1)
    time.sleep(IDLE + 0.05)
    assert w.submit("a", 1, "q", "", GenParams()).result(5)[0][0].text.startswith("q")
    w.stop()


IDLE = 0.5  # worker.IDLE_WARM_S


def test_detachable_request_cancelled_by_the_editor_goes_on_as_speculation():
    """VS Code cancels the previous keystroke's request before it sends the next one: the generation must
    survive that long enough for the next didChange to keep it (or stop it)."""
    w, eng, revs, hooks = make_hooked(TokenEngine(steps=30))
    revs["a"] = 1
    fut = w.submit("a", 1, "p", "", GenParams(), USER, detachable=True)
    wait_running(eng)
    fut.cancel()
    deadline = time.monotonic() + 5
    while not hooks.finished_jobs and time.monotonic() < deadline:
        time.sleep(STEP)
    assert hooks.finished_jobs[0][1][0][0].finish_reason == "length"
    w.stop()


def test_work_in_the_users_document_stops_orphaned_speculation_elsewhere():
    w, eng, revs, hooks = make_hooked(TokenEngine(steps=500))
    revs.update(a=1, b=1)
    fut = w.submit("a", 1, "a-prefix", "", GenParams(), USER, detachable=True)
    wait_running(eng)
    w.release(fut)  # answered at its deadline; the generation goes on as speculation for a
    t0 = time.monotonic()
    w.submit("b", 1, "b-prefix", "", GenParams(), SPECULATIVE)  # the user now types in b
    deadline = time.monotonic() + 5
    while not any(c[0] == "b-prefix" for c in eng.calls) and time.monotonic() < deadline:
        time.sleep(STEP)
    assert any(c[0] == "b-prefix" for c in eng.calls) and time.monotonic() - t0 < 20 * STEP + 0.2
    assert hooks.finished_jobs[0][1][0][0].finish_reason == "cancelled"  # a's stopped within a step
    w.stop()


def test_a_request_in_another_document_stops_work_let_go_there():
    # variants still running after their item 1 went out (released, awaited): the user asks elsewhere
    w, eng, revs, hooks = make_hooked(TokenEngine(steps=500))
    revs.update(a=1, b=1)
    fut = w.submit("a", 1, "a-prefix", "", GenParams(n=3), USER)
    wait_running(eng)
    w.release(fut, awaited=True)
    t0 = time.monotonic()
    w.submit("b", 1, "b-prefix", "", GenParams(), USER)
    deadline = time.monotonic() + 5
    while not any(c[0] == "b-prefix" for c in eng.calls) and time.monotonic() < deadline:
        time.sleep(STEP)
    assert any(c[0] == "b-prefix" for c in eng.calls) and time.monotonic() - t0 < 20 * STEP + 0.2  # not after a's
    assert hooks.finished_jobs[0][1][0][0].finish_reason == "cancelled"
    w.stop()


def test_a_request_joining_queued_speculation_preempts_other_speculation():
    w, eng, revs, hooks = make_hooked(TokenEngine(steps=3, slow=("busy",)))
    revs.update(a=1, c=1)
    w.set_futures("c", 1, [("busy", "", GenParams(), None)])  # a future runs
    wait_running(eng)
    w.submit("a", 1, "p", "", GenParams(), SPECULATIVE, not_before=time.monotonic() + 5)  # debounced
    t0 = time.monotonic()
    comps, _ = w.submit("a", 1, "p", "", GenParams(), USER).result(5)  # the request joins it
    assert time.monotonic() - t0 < 20 * STEP + 0.3 and comps[0].text.startswith("p")
    w.stop()


def test_background_work_stops_soon_after_the_user_goes_idle_but_not_what_a_user_waits_for():
    from lsp_server.completion.planner import IDLE_WORK_S

    eng = StepEngine(slow=("spec", "asked"))
    w, _, revs = make(eng)
    try:
        revs["file:///a.py"] = 1
        t0 = time.monotonic()
        w.submit("file:///a.py", 1, "spec", "", GenParams(), SPECULATIVE)
        assert eng.running.wait(2)
        while eng.running.is_set() and time.monotonic() - t0 < IDLE_WORK_S + 2:
            time.sleep(0.01)
        # stopped, not run for its 10 s
        assert IDLE_WORK_S <= time.monotonic() - t0 < IDLE_WORK_S + 1.0 and not eng.running.is_set()
        # a request that got nothing at its deadline lets go of its job: the user still waits there
        revs["file:///b.py"] = 1
        asked = w.submit("file:///b.py", 1, "asked", "", GenParams(), USER)
        assert eng.running.wait(2)
        w.release(asked, awaited=True)
        time.sleep(IDLE_WORK_S + 0.5)
        assert w.running() is not None and not w.running().cancel.cancelled
    finally:
        w.stop()


def test_the_idle_warm_up_stops_with_the_rest_of_the_background_work():
    from lsp_server.completion.planner import IDLE_WORK_S

    w, eng, revs, hooks = make_hooked(TokenEngine(steps=2, slow=("a long window",)))
    try:
        revs["a"] = 1
        hooks.idle_plan = ("a", 1, "a long window", "s")
        t0 = time.monotonic()
        w.document_changed("a", 1)  # the user's last action
        deadline = t0 + IDLE_WORK_S + 3
        while time.monotonic() < deadline and not (eng.prefills and w.running() is None):
            time.sleep(0.02)
        assert eng.prefills == [("a long window", "s")]  # it warmed ...
        assert w.running() is None and time.monotonic() - t0 < IDLE_WORK_S + 1.0  # ... and stopped with the rest
    finally:
        w.stop()


class ContextEngine(TokenEngine):
    """TokenEngine that takes a repository context block (only its digest matters here)."""

    def __init__(self) -> None:
        super().__init__()
        self.context_digest = ""
        self.log: list[tuple[str, str]] = []  # ("context", digest) / ("complete", prefix), in order

    def set_context(self, block) -> bool:
        digest = block.digest() if block is not None and block.chunks else ""
        changed, self.context_digest = digest != self.context_digest, digest
        self.log.append(("context", digest))
        return changed

    def complete(self, prefix, suffix="", params=None, cancel=None, on_token=None):
        self.log.append(("complete", prefix))
        return super().complete(prefix, suffix, params, cancel, on_token)


class Block:
    chunks = ("chunk",)

    def digest(self) -> str:
        return "d1"


def test_a_context_block_serves_only_the_document_it_was_gathered_for():
    eng = ContextEngine()
    revs = Revisions()
    w = Worker(lambda: eng, revs, None, Hooks(), context=lambda: ("a", Block()))
    w.start()
    assert w.loaded.wait(5)
    deadline = time.monotonic() + 5
    while eng.context_digest != "d1" and time.monotonic() < deadline:  # admitted in idle time
        time.sleep(STEP)
    assert eng.context_digest == "d1"
    revs["a"], revs["b"] = 1, 1
    w.submit("a", 1, "pa", "", GenParams()).result(5)
    assert eng.context_digest == "d1"  # its own document keeps it
    w.submit("b", 1, "pb", "", GenParams()).result(5)
    # another document's prompt never carries it: dropped before that generation ran
    assert eng.log.index(("context", "")) < eng.log.index(("complete", "pb"))
    assert eng.context_digest == ""
    w.stop()
