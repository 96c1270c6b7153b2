"""The store alone (no model, no scheduler thread): the records of units of work, the ticket's ``wait``
every request uses (on the store's one ``wait`` loop), what the engine thread writes into it (runner.Runner),
and the scheduler's rule for which running generation outlives an edit (Worker.still_serves)."""

from __future__ import annotations

import asyncio
import time

import pytest

from engine.text.postprocess import postprocess
from engine.types import Completion, GenParams, Timings
from lsp_server.completion.events import Events
from lsp_server.completion.jobs import SPECULATIVE, USER, Job, Stale, State, Superseded
from lsp_server.completion.policy import knobs, planner
from lsp_server.completion.scheduler.runner import Runner
from lsp_server.completion.scheduler.worker import Worker
from lsp_server.completion.store.store import Store
from lsp_server.completion.store.tickets import Ticket
from lsp_server.settings import Settings

URI = "file:///a.py"


def _store() -> tuple[Store, Runner, Events]:
    """A store and the local tier's engine-thread side writing into it (no thread, no engine)."""
    settings = Settings()
    events = Events()
    store = Store(lambda: settings, events)
    return store, Runner("local", store, events), events


def _worker(store: Store, tier: str = "local") -> Worker:
    return Worker(lambda: None, store, Events(), tier)  # (never started: only its rules are asked)


def _state(revision: int, prefix: str, suffix: str = "\n", invoked: bool = False,
           language: str | None = None) -> State:
    return planner.state_at(Settings(), URI, revision, len(prefix), prefix, suffix, invoked=invoked,
                            remote_ready=False, language=language)


def _ticket(store: Store, st: State) -> Ticket:
    """A request's ticket for the local tier's work on ``st`` (the jobs here are the test's own)."""
    return Ticket(store, st, "local", None, None)


def _waiting(deadline: float, partial_after: float | None = None, since: float | None = None) -> planner.Waiting:
    return planner.Waiting(deadline, partial_after, time.monotonic() if since is None else since)


def _job(st: State, seq: int = 1, priority: int = SPECULATIVE) -> Job:
    return Job(st, priority, seq)


def test_a_generation_still_reading_its_prompt_is_not_kept_through_typing():
    store, runner, _ = _store()
    local = _worker(store)
    job = _job(_state(1, "def add(a, b):\n    ret"))
    runner.open_entry(job)
    assert local.still_serves(job, True, _state(1, job.state.prefix))  # the same text: it still serves it
    # nothing streamed: the newest state starts
    assert not local.still_serves(job, True, _state(2, job.state.prefix + "u"))
    Runner("remote", store, Events()).open_entry(job)
    assert _worker(store, "remote").still_serves(job, True, _state(2, job.state.prefix + "u"))  # a round trip: kept


def test_a_streaming_generation_is_kept_while_the_typing_agrees_with_it():
    store, runner, _ = _store()
    local = _worker(store)
    job = _job(_state(1, "def add(a, b):\n    ret"))
    runner.open_entry(job)
    store.stream(job.handle, 0, "urn a + b")
    assert local.still_serves(job, True, _state(2, job.state.prefix + "ur"))
    assert not local.still_serves(job, True, _state(3, job.state.prefix + "ux"))


def test_nothing_from_the_quick_window_is_not_the_whole_windows_answer():
    """A quick first window whose line was dropped answers "nothing" to a request that cannot wait, not
    to one asking for the whole window (an explicit request asks that next: planner.whole_window)."""
    store, runner, _ = _store()
    prefix, suffix = "def f(xs):\n    ", "\n        return xs[0]\n"
    state = _state(1, prefix, suffix, invoked=True)
    assert state.params.quick_start
    nothing = [Completion(text="", token_ids=[], finish_reason="eos")]
    for window, whole_answers in (("quick", False), ("full", True)):
        job = _job(state)
        runner.open_entry(job)
        runner.close_entry(job, (nothing, Timings(window=window)), 10.0)
        found = store.lookup(state, None, partial=False, disk=False)
        assert found is not None and found.complete and not found.comps
        assert found.quick == (window == "quick")
        whole = store.lookup(planner.whole_window(state), None, partial=False, disk=False)
        assert (whole is not None) == whole_answers
    whole = planner.whole_window(state)
    assert not whole.params.quick_start and whole.params.key() == state.params.key()
    # a job that may run the quick window does not answer the whole window's request; the other way it does
    assert not state.serves(whole) and whole.serves(state)


def test_a_unit_of_work_ends_once_for_the_job_serving_it_and_a_repeat_needs_no_job():
    store, _, _ = _store()
    st = _state(1, "x = ")
    first, second = _job(st, 1, USER), _job(st, 2, USER)
    store.queued("local", first)
    assert store.outcome("local", st) is None
    store.queued("local", second)  # a newer job serves the same work: the old one's end is nobody's answer now
    store.ended("local", first, None, Superseded("replaced"))
    assert store.outcome("local", st) is None
    store.forget("local")  # a model swapped meanwhile: work still queued waits for the new one, its record stays
    result = ([Completion("1", [1], "eos")], Timings())
    store.ended("local", second, result, None)
    done = store.outcome("local", st)
    assert done is not None and done.result == result and done.error is None
    assert store.repeat("local", _job(st, 3, USER))  # the same work asked again: its record answers
    assert not store.repeat("local", _job(_state(2, "x = "), 4, USER))  # another revision is other work
    assert store.outcome("remote", st) is None  # each tier keeps its own records
    store.forget("local")  # a new model: nothing it made is a repeat
    assert store.outcome("local", st) is None


async def test_wait_answers_a_finished_line_at_once_and_what_streamed_after_partial_after():
    store, runner, events = _store()
    events.attach_loop(asyncio.get_running_loop())
    st = _state(1, "total = a")
    job = _job(st, 1, USER)
    store.queued("local", job)
    runner.open_entry(job)
    store.stream(job.handle, 0, " + b")  # the line, still being written
    since = time.monotonic()
    waited = await _ticket(store, st).wait(_waiting(since + 1.0, 0.05, since))
    assert waited.why == "found" and waited.answer.comps[0].text == " + b" and not waited.answer.complete
    assert time.monotonic() - since >= 0.05  # not before partial_after
    store.stream(job.handle, 0, " + b\n    ")
    waited = await _ticket(store, st).wait(_waiting(time.monotonic() + 1.0, 0.5))
    assert waited.why == "found" and waited.answer.complete  # a whole line: at once


async def test_wait_hears_how_the_work_ended_and_stops_at_its_deadline_or_a_newer_request():
    store, _, events = _store()
    events.attach_loop(asyncio.get_running_loop())
    st = _state(1, "x = ")
    job = _job(st, 1, USER)
    store.queued("local", job)
    since = time.monotonic()
    waited = await _ticket(store, st).wait(_waiting(since + 0.05, None, since))  # nothing before the work ends
    assert waited.why == "deadline" and waited.answer is None
    asyncio.get_running_loop().call_later(0.02, store.ended, "local", job, None, Stale("the document changed"))
    with pytest.raises(Stale):
        await _ticket(store, st).wait(_waiting(time.monotonic() + 1.0))
    newer = asyncio.Event()
    asyncio.get_running_loop().call_later(0.02, newer.set)
    with pytest.raises(Superseded):
        await store.reading(_state(1, "y = ")).wait(_waiting(time.monotonic() + 1.0), stop=newer)
    ended = _job(_state(1, "z = "), 2, USER)
    store.queued("local", ended)
    store.ended("local", ended, ([Completion("0", [1], "eos")], Timings()), None)
    waited = await _ticket(store, ended.state).wait(_waiting(time.monotonic() + 1.0))
    assert waited.why == "ended" and waited.answer.comps[0].text == "0" and waited.answer.source == "memory"
    early = await store.reading(_state(1, "w = ")).wait(_waiting(time.monotonic() + 1.0), accept=lambda: waited.answer)
    assert early.why == "accepted"


def test_gen_params_fix_the_work_a_state_asks():
    st = _state(1, "x = ")
    assert st.key() == (URI, 1, "x = ", "\n", st.params.key()) and st.serves(st)
    assert not st.serves(_state(1, "x = ", suffix="")) and isinstance(st.params, GenParams)


def test_a_variants_batch_cut_off_is_not_the_whole_answer_to_a_request_for_variants():
    """The batch a newer request superseded kept item 1 (the automatic suggestion) and the first tokens of
    the others: asked for variants again, it shows item 1 but is not the answer "the variants agree"."""
    store, runner, _ = _store()
    prefix, suffix = "def greet(name):\n    ", "\n"
    st = planner.state_at(Settings(), URI, 1, len(prefix), prefix, suffix, invoked=True, remote_ready=False, n=3)
    assert st.params.n == 3
    job = _job(st, 1, USER)
    runner.open_entry(job)
    cut = [Completion('return f"Hello, {name}!"', [1] * 11, "eos"), Completion("print", [1, 2], "cancelled")]
    runner.close_entry(job, (cut, Timings()), 10.0)
    found = store.lookup(st, None, partial=False, disk=False)
    assert found is not None and [c.text for c in found.comps] == ['return f"Hello, {name}!"']
    assert not found.complete
    # the same batch ended on the model's terms: one variant is all there is (they agreed)
    agreed = _job(st, 2, USER)
    runner.open_entry(agreed)
    runner.close_entry(agreed, (cut[:1], Timings()), 10.0)
    found = store.lookup(st, None, partial=False, disk=False)
    assert found is not None and len(found.comps) == 1 and found.complete


def test_a_streaming_line_on_a_fresh_line_answers_with_its_head_as_items_shows_it():
    """After Enter a request waits for what streams; in Python the head of a statement the model is still
    writing is shown open (items.open_line_shown), so it answers then, not once a whole statement has streamed;
    a language outside knobs.FRESH_LINE_HEAD reads it as before (no language given: guessed from the text)."""
    store, _, _ = _store()
    st = _state(1, "def f(self, x):\n    ", language="python")
    other = _state(2, "function f(x) {\n    ", "\n}\n", language="typescript")
    assert st.mode == "multi" and "typescript" not in knobs.FRESH_LINE_HEAD
    for head in ("if x", "for i in", "self.a = "):
        assert store.shows(Completion(head, [1], "partial"), st, st.mode, live=True, partial=True), head
        before = postprocess(head, other.prefix, other.suffix, mode=other.mode, max_lines=Settings().max_lines,
                             truncated=True) is not None
        assert store.shows(Completion(head, [1], "partial"), other, other.mode, live=True, partial=True) == before
        # a text a limit cut off (not streaming any more) is still cut back to a complete statement: nothing
        assert not store.shows(Completion(head, [1], "length"), st, st.mode, live=False, partial=True), head
    assert store.shows(Completion("return x\n", [1, 2], "stop"), st, st.mode, live=False, partial=True)
