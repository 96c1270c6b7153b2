"""The store's hooks into the scheduler (no model, no threads): which running generation outlives an edit."""

from __future__ import annotations

from engine.types import GenParams
from lsp_server.completion import planner
from lsp_server.completion.jobs import SPECULATIVE, Job
from lsp_server.completion.store import Store, StoreHooks
from lsp_server.settings import Settings

URI = "file:///a.py"


def _hooks(tier: str = "local") -> tuple[StoreHooks, planner.Cursors]:
    settings = Settings()
    store = Store(lambda: settings, lambda tier: None)
    cursors = planner.Cursors()
    return StoreHooks(store, cursors, lambda: settings, tier=tier), cursors


def _move_to(cursors: planner.Cursors, revision: int, prefix: str) -> None:
    cursors.set(URI, planner.state_at(Settings(), URI, revision, len(prefix), prefix, "\n", invoked=False,
                                      remote_ready=False))


def test_a_generation_still_reading_its_prompt_is_not_kept_through_typing():
    hooks, cursors = _hooks()
    job = Job(URI, 1, "def add(a, b):\n    ret", "\n", GenParams(), SPECULATIVE, 1)
    hooks.started(job)
    _move_to(cursors, 1, job.prefix)
    assert hooks.keep(job, True)  # the same text: it still serves it
    _move_to(cursors, 2, job.prefix + "u")
    assert not hooks.keep(job, True)  # nothing streamed: the newest state starts instead
    remote, cursors = _hooks("remote")  # a remote generation is kept: starting again costs a round trip
    remote.started(job)
    _move_to(cursors, 2, job.prefix + "u")
    assert remote.keep(job, True)


def test_a_streaming_generation_is_kept_while_the_typing_agrees_with_it():
    hooks, cursors = _hooks()
    job = Job(URI, 1, "def add(a, b):\n    ret", "\n", GenParams(), SPECULATIVE, 1)
    hooks.started(job)
    hooks.store.stream(job.handle, 0, "urn a + b")
    _move_to(cursors, 2, job.prefix + "ur")
    assert hooks.keep(job, True)
    _move_to(cursors, 3, job.prefix + "ux")
    assert not hooks.keep(job, True)


def test_nothing_from_the_quick_window_is_not_the_whole_windows_answer():
    """A quick first window whose line was dropped answers "nothing" to a request that cannot wait, not
    to one asking for the whole window (an explicit request asks that next: planner.whole_window)."""
    from engine.types import Completion, Timings

    hooks, _ = _hooks()
    prefix, suffix = "def f(xs):\n    ", "\n        return xs[0]\n"
    state = planner.state_at(Settings(), URI, 1, len(prefix), prefix, suffix, invoked=True, remote_ready=False)
    assert state.params.quick_start
    nothing = [Completion(text="", token_ids=[], finish_reason="eos")]
    for window, whole_answers in (("quick", False), ("full", True)):
        job = Job(URI, 1, prefix, suffix, state.params, SPECULATIVE, 1)
        hooks.started(job)
        hooks.finished(job, (nothing, Timings(window=window)), 10.0)
        found = hooks.store.lookup(state, None, partial=False, disk=False)
        assert found is not None and found.complete and not found.comps
        assert found.quick == (window == "quick")
        whole = hooks.store.lookup(planner.whole_window(state), None, partial=False, disk=False)
        assert (whole is not None) == whole_answers
    whole = planner.whole_window(state)
    assert not whole.params.quick_start and whole.params.key() == state.params.key()
    # a job that may run the quick window does not answer the whole window's request; the other way it does
    quick_job, whole_job = (Job(URI, 1, prefix, suffix, s.params, SPECULATIVE, i) for i, s in enumerate((state, whole)))
    assert not quick_job.same_work(whole_job) and whole_job.same_work(quick_job)
