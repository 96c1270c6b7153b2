"""The planner's pure parts: states, generation parameters, the typing rhythm (no model, no threads), and the
one record per document the service keeps."""

from __future__ import annotations

import asyncio

from lsp_server.completion.policy import knobs, planner
from lsp_server.completion.requests.service import CompletionService
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


def test_the_typing_rhythm_tells_a_burst_from_typing_and_how_long_until_a_pause():
    assert planner.pause_delay([]) == knobs.PAUSE_DELAY_S  # nothing known yet
    assert not planner.burst([], 10.0) and not planner.burst([10.0], 10.3)
    assert abs(planner.pause_delay([10.0, 10.3, 10.6]) - 2 * 0.3) < 1e-9  # twice the usual interval
    assert planner.burst([10.0, 10.3, 10.6], 10.605)  # 5 ms later: a replayed paste, not a typist
    assert planner.pause_delay([10.0]) == knobs.PAUSE_DELAY_S  # one keystroke: no interval yet


async def test_one_record_per_document_follows_the_document_typed_in_and_goes_in_one_close():
    settings = Settings()
    service = CompletionService(lambda: settings, lambda s: None, lambda s: None, lambda uri: 3, lambda e: None,
                                lambda uri, v: None)  # (its workers never started)
    docs = service.docs
    st = planner.state_at(settings, "file:///b.py", 3, 2, "x ", "", invoked=False, remote_ready=False)
    service.at("file:///b.py", st)
    assert docs.active == "file:///b.py" and docs.active_state() is st
    service.did_change("file:///c.py", 1, None, speculate=False)  # a didOpen without a cursor does not move the user
    assert docs.active == "file:///b.py"
    record = docs["file:///b.py"]
    record.asked = asyncio.Event()
    record.keystrokes.append(1.0)
    docs.close("file:///b.py")
    assert docs.active is None and docs.active_state() is None and docs.get("file:///b.py") is None
    assert record.asked.is_set()  # a request still waiting there hears Superseded
    assert not docs["file:///b.py"].keystrokes  # opened again: a fresh record


def test_an_explicit_ask_right_after_a_refresh_of_an_automatic_answer_is_that_answer_again():
    mark = (4, 100.0, True)
    assert planner.reasks_refresh(mark, 4, 100.5)
    assert not planner.reasks_refresh(mark, 5, 100.5)  # the document moved on
    assert not planner.reasks_refresh(mark, 4, 100.0 + knobs.REFRESH_ASK_S + 0.1)  # the user, later
    assert not planner.reasks_refresh((4, 100.0, False), 4, 100.5)  # an explicit answer's refresh stays explicit
    assert not planner.reasks_refresh(None, 4, 100.5)


def _state(prefix: str, suffix: str = "\n", invoked: bool = False, settings: Settings | None = None):
    return planner.state_at(settings or Settings(), "file:///a.py", 1, len(prefix), prefix, suffix,
                            invoked=invoked, remote_ready=False)


def test_a_request_waits_by_the_planners_plan():
    s = Settings()
    typing = planner.waiting(s, _state("total = a"), 100.0, invoked=False)
    assert typing.deadline == 100.0 + knobs.AUTOMATIC_BUDGET_S and typing.partial_after == knobs.PARTIAL_AFTER_S
    assert typing.whole_lines_s == 0.0 and typing.detachable and not typing.item_one
    fresh = planner.waiting(s, _state("def f():\n    "), 100.0, invoked=False)
    assert fresh.whole_lines_s == knobs.FRESH_LINE_WHOLE_S > 0  # nothing typed on the line yet: at first only
    # whole lines (a part would end mid-statement), then what has streamed
    asked = planner.waiting(s, _state("total = a", invoked=True), 100.0, invoked=True)
    assert asked.partial_after == knobs.INVOKED_BUDGET_S and asked.item_one and not asked.detachable
    remote = planner.waiting(s, _state("total = a", invoked=True), 100.0, invoked=True, remote=True, budget_s=9.0)
    assert remote.deadline == 109.0 and not remote.item_one and remote.job_budget >= 9.0
    plain = planner.waiting(Settings(speculation=False), _state("total = a"), 100.0, invoked=False)
    assert plain.partial_after is None and plain.job_budget == knobs.AUTOMATIC_BUDGET_S  # the model or nothing


def test_what_follows_an_answer_is_the_planners_plan():
    s = Settings()
    shown = planner.follow_ups(s, invoked=False, shown=True, complete=False, quick=False)
    assert shown.watch_s == knobs.REFRESH_WITHIN_S and not shown.whole
    assert planner.follow_ups(s, invoked=False, shown=True, complete=True, quick=False) == \
        planner.FollowUps()  # a whole suggestion shown: nothing follows
    picked = planner.follow_ups(s, invoked=True, shown=True, complete=True, quick=False)
    assert picked == planner.FollowUps() and picked.watch_s is None  # an explicit request's answer
    quick = planner.follow_ups(s, invoked=False, shown=False, complete=True, quick=True)
    assert quick.whole and quick.watch_s is None
    waiting = planner.follow_ups(s, invoked=True, shown=False, complete=False, quick=False)
    assert waiting.watch_s == knobs.JOB_BUDGET_S and waiting.greedy
    assert planner.follow_ups(Settings(speculation=False), invoked=False, shown=True,
                              complete=False, quick=False) == planner.FollowUps()


def test_a_keystroke_starts_its_work_at_once_unless_it_is_part_of_a_burst():
    s, st = Settings(), _state("x = ")
    now = planner.keystroke(s, st, speculate=True, burst=False, now=10.0)
    assert now.current is st and now.start and now.ask_store and now.not_before == 0.0
    burst = planner.keystroke(s, st, speculate=True, burst=True, now=10.0)
    assert burst.start and not burst.ask_store and burst.not_before == 10.0 + knobs.BURST_HOLD_S
    assert not planner.keystroke(s, st, speculate=False, burst=False, now=10.0).start  # the client never asked
    assert planner.keystroke(Settings(speculation=False), st, speculate=True, burst=False, now=10.0).current is None
    assert planner.moved(s, st).start and not planner.moved(Settings(speculation=False), st).start


def test_a_look_ahead_line_waits_until_the_typist_nears_the_line_end_or_pauses():
    s = Settings()
    ahead = planner.state_at(s, "file:///a.py", 1, 8, "value = ", "\n", invoked=False, remote_ready=False).params
    line = planner.gen_params(s, "single", invoked=False, lookahead=False)
    text = "compute(first_argument, second)\n    retu"  # its first line has 31 characters
    near, quiet = knobs.LOOKAHEAD_NEAR_CHARS, knobs.LOOKAHEAD_QUIET_S
    assert planner.holds_lookahead(ahead, text, 0, 0.0)  # the first line written, the typist far from its end
    assert planner.holds_lookahead(ahead, text, 31 - near - 1, quiet / 2)
    assert not planner.holds_lookahead(ahead, text, 31 - near, 0.0)  # near the end: the next line now
    assert not planner.holds_lookahead(ahead, text, 40, 0.0)  # typed past it (Enter)
    assert not planner.holds_lookahead(ahead, text, 0, quiet)  # a pause: the user may take it and go on
    assert not planner.holds_lookahead(ahead, "compute(first_argument", 0, 0.0)  # the first line still coming
    assert not planner.holds_lookahead(line, text, 0, 0.0)  # no look-ahead line asked for
