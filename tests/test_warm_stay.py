"""Idle time prefills a spot's whole window only once the user has stayed in that window a while
(knobs.WARM_AFTER_STAY_S): a short visit is served by the quick window and costs no warm-up."""

from __future__ import annotations

import asyncio

from lsp_server.completion.policy import knobs, planner
from lsp_server.settings import Settings
from tests.fakes import Done, FakeEngine, Step, until

STAY_S = 1.5


def quick(prefix, suffix, params):
    """One short line from the quick window (the KV does not hold the whole one afterwards)."""
    yield Step("x = 1", 0.0)
    return Done("eos", window="quick")


def test_a_window_is_warmed_only_after_a_stay():
    assert not planner.warms(Settings(), 0.0)
    assert not planner.warms(Settings(), knobs.WARM_AFTER_STAY_S - 0.1)
    assert planner.warms(Settings(), knobs.WARM_AFTER_STAY_S)
    assert not planner.warms(Settings(speculation=False), 10 * knobs.WARM_AFTER_STAY_S)
    assert planner.warms(Settings(context_budget=256), 0.0)  # a context block is used only once prefilled


async def test_idle_time_warms_the_spot_once_the_user_stayed_and_a_far_move_starts_the_stay_again(
        start_session, monkeypatch):
    monkeypatch.setattr(knobs, "WARM_AFTER_STAY_S", STAY_S)
    eng = FakeEngine(quick)
    s = start_session(eng)
    body = "".join(f"value_{i} = compute({i})\n" for i in range(1200))  # far longer than the prefix window
    uri = "file:///long.py"
    s.documents.open(uri, body, 1)
    end_line = body.count("\n")

    await s.suggest(uri, end_line, 0, invoked=False)  # the user arrives at the file's end
    await asyncio.sleep(knobs.IDLE_WARM_S * 3)  # idle, but not stayed long enough
    assert eng.prefills == []

    # the user stays and types on in the same window: once the stay is long enough, the next quiet moment
    # warms it (idle work only follows the user's actions: knobs.IDLE_WORK_S)
    await asyncio.sleep(STAY_S)
    assert eng.prefills == []
    await s.suggest(uri, end_line - 1, len("value_1199 = compute(1199)"), invoked=False)
    await until(lambda: eng.prefills, knobs.IDLE_WARM_S * 6)
    assert len(eng.prefills) == 1 and eng.prefills[0][0].endswith("compute(1199)"), eng.prefills[0][0][-30:]

    await s.suggest(uri, 100, len("value_100 = compute(100)"), invoked=False)  # far up: another window, a new stay
    await asyncio.sleep(knobs.IDLE_WARM_S * 3)
    assert len(eng.prefills) == 1, [p[0][-30:] for p in eng.prefills]
    await asyncio.sleep(STAY_S)
    await s.suggest(uri, 99, len("value_99 = compute(99)"), invoked=False)
    await until(lambda: len(eng.prefills) > 1, knobs.IDLE_WARM_S * 6)
    assert len(eng.prefills) == 2 and eng.prefills[1][0].endswith("compute(99)"), eng.prefills[1][0][-30:]


async def test_asking_again_where_memory_answers_is_the_user_acting_so_idle_time_warms_again(start_session):
    """The first quiet period's idle work can be missed (the model loaded through it, or the user went):
    the editor asking again at the same spot, answered from memory, starts another quiet period, whose
    warm-up admits the context block then (each warm-up puts its block on the engine first)."""
    eng = FakeEngine(quick)
    s = start_session(eng)
    uri = "file:///a.py"
    s.documents.open(uri, "def f():\n    ", 1)

    def warm_ups() -> int:
        return sum(1 for entry in eng.log if entry[0] == "context")

    assert (await s.suggest(uri, 1, 4, invoked=False)).items
    await until(lambda: warm_ups(), 20)
    await asyncio.sleep(knobs.IDLE_WORK_S * 2)  # the quiet period and its idle work are over
    assert warm_ups() == 1, eng.log
    again = await s.suggest(uri, 1, 4, invoked=False)  # the same spot
    assert again.items and again.source == "memory", again
    await until(lambda: warm_ups() > 1, 20)
    assert warm_ups() == 2, eng.log
