"""The planner's pure parts: states, generation parameters, the typing clock (no model, no threads)."""

from __future__ import annotations

from lsp_server.completion import planner
from lsp_server.settings import Settings


def test_automatic_and_explicit_requests_may_start_from_the_quick_window():
    s = Settings()
    auto = planner.state_at(s, "file:///a.py", 1, 8, "value = ", "\n", invoked=False, remote_ready=False)
    asked = planner.state_at(s, "file:///a.py", 1, 8, "value = ", "\n", invoked=True, remote_ready=False)
    assert auto.mode == "single" and auto.params.quick_start and auto.params.n == 1
    assert planner.is_lookahead(auto.params.max_tokens, auto.params.max_lines)  # end of line: one line more
    assert asked.params.quick_start and asked.params.n == s.max_variants
    assert auto.params.key() == planner.gen_params(s, "single", invoked=False, lookahead=True).key()
    off = Settings(speculation=False)
    assert not planner.gen_params(off, "single", invoked=False).quick_start


def test_typing_clock_tells_a_burst_from_typing_and_holds_futures_for_a_pause():
    clock = planner.TypingClock()
    assert clock.future_delay("u") == planner.FUTURE_DELAY_S  # nothing known yet
    assert not clock.keystroke("u", 10.0)
    assert not clock.keystroke("u", 10.3)
    assert not clock.keystroke("u", 10.6)
    assert abs(clock.future_delay("u") - 2 * 0.3) < 1e-9  # twice the usual interval
    assert clock.keystroke("u", 10.605)  # 5 ms later: a replayed paste, not a typist
    clock.forget("u")
    assert clock.future_delay("u") == planner.FUTURE_DELAY_S


def test_a_pause_starts_a_rhythm_after_the_last_keystroke_never_in_the_past():
    clock = planner.TypingClock()
    assert clock.pause_starts("u", 5.0) == 5.0 + planner.FUTURE_DELAY_S  # nothing typed: the default delay
    for t in (10.0, 10.2, 10.4):
        clock.keystroke("u", t)
    assert abs(clock.pause_starts("u", 10.45) - (10.4 + 2 * 0.2)) < 1e-9  # twice the usual interval after it
    assert clock.pause_starts("u", 11.5) == 11.5  # already paused longer than that: at once


def test_cursors_board_follows_the_document_typed_in():
    board = planner.Cursors()
    st = planner.state_at(Settings(), "file:///b.py", 3, 2, "x ", "", invoked=False, remote_ready=False)
    board.set("file:///b.py", st)
    assert board.active == "file:///b.py" and board.active_state() is st
    board.set("file:///c.py", None)  # a didOpen without a cursor does not move the user
    assert board.active == "file:///b.py"
    board.forget("file:///b.py")
    assert board.active is None and board.active_state() is None


def test_an_explicit_ask_right_after_a_refresh_of_an_automatic_answer_is_that_answer_again():
    mark = (4, 100.0, True)
    assert planner.reasks_refresh(mark, 4, 100.5)
    assert not planner.reasks_refresh(mark, 5, 100.5)  # the document moved on
    assert not planner.reasks_refresh(mark, 4, 100.0 + planner.REFRESH_ASK_S + 0.1)  # the user, later
    assert not planner.reasks_refresh((4, 100.0, False), 4, 100.5)  # an explicit answer's refresh stays explicit
    assert not planner.reasks_refresh(None, 4, 100.5)
