"""Session, as the user types: memory, type-through, disk, deadlines, a cursor moved, the model loading
(an oracle engine that knows the file being typed; no LSP, no model)."""

from __future__ import annotations

import asyncio
import time

import pytest

from lsp_server.completion.policy import knobs
from lsp_server.documents import Change
from lsp_server.errors import RequestError
from lsp_server.session import Session
from lsp_server.settings import Settings
from tests.fakes import FakeEngine, oracle, until


@pytest.fixture
def oracle_session(start_session, monkeypatch):

    # these tests pin type-through, memory and disk, not when a line still streaming is shown: a stand-in
    # slowed by a loaded machine must not turn their whole answers into partial ones
    monkeypatch.setattr(knobs, "PARTIAL_AFTER_S", 1.0)

    def make(target: str, step_s: float = 0.005, settings: Settings | None = None, statuses=None):
        eng = FakeEngine(oracle(target, step_s))
        s = start_session(eng, settings, on_status=statuses.append if statuses is not None else None)
        return s, eng

    return make


TARGET = "def add(a, b):\n    return a + b\n\n\nprint(add(1, 2))\n"
BODY = "def add(a, b):\n    "


def type_chars(s: Session, uri: str, text: str, line: int, col: int, version: int) -> tuple[int, int]:
    """Type ``text`` one character per didChange, as an editor sends it; returns the new (col, version)."""
    for ch in text:
        version += 1
        s.documents.change(uri, version, [Change(ch, (line, col, line, col))], s.encoding)
        col += 1
        s.did_change(uri, cursor=s.documents.get(uri).offset_at(line, col, s.encoding))
    return col, version


async def settle(s: Session, timeout: float = 5.0) -> None:
    """Wait until the engine thread has nothing left to do."""
    await until(lambda: not s.worker.backlog(), timeout)


async def test_a_repeat_is_answered_from_memory(oracle_session):
    s, eng = oracle_session(TARGET)
    s.documents.open("file:///m.py", BODY + "\n", 1)
    first = await s.suggest("file:///m.py", 1, 4, invoked=False)
    assert [it.text for it in first.items] == ["return a + b"] and first.source == "model"
    again = await s.suggest("file:///m.py", 1, 4, invoked=False)
    assert [it.text for it in again.items] == ["return a + b"] and again.source == "memory"
    assert len([c for c in eng.calls if c[0] == BODY]) == 1


async def test_the_work_accounting_says_what_each_kind_of_engine_work_cost_and_bought(oracle_session):
    """Stats ``work.<kind>.*``: every job the engine ran is counted with its time, by kind (the keystroke's
    own "now", the "future" of a suggestion accepted); a generation is "served" once, when a suggestion
    made from it goes out (asked again: memory, the same generation), and an accept is credited to it."""
    s, eng = oracle_session(TARGET)
    s.speculate = True
    uri = "file:///w.py"
    s.documents.open(uri, BODY + "\n", 1)
    first = await s.suggest(uri, 1, 4, invoked=False)
    assert [it.text for it in first.items] == ["return a + b"]
    again = await s.suggest(uri, 1, 4, invoked=False)
    assert again.source == "memory"
    await settle(s)
    await until(lambda: s.stats.counts["work.future.jobs"] >= 1)  # the suggestion accepted, generated ahead
    assert s.did_accept(again.id, 0)
    c = s.stats.counts
    assert c["work.now.jobs"] == 1 and c["work.now.served"] == 1, dict(c)
    assert c["work.now.wall_ms"] >= 0 and c["work.now.cpu_ms"] >= 0
    assert c["work.now.ended.complete.jobs"] == 1  # it ran to its end, as it ended: counted once by how
    assert c["work.now.accepted"] == 1 and c["work.now.accepted_units"] == len("return a + b")
    assert c["work.future.served"] == 0  # nobody has typed there yet
    kinds = [k for k in c if k.endswith(".jobs") and k.count(".") == 2]  # not the ended.<how>.jobs split
    assert sum(c[k] for k in kinds) == len(eng.calls) + len(eng.prefills)
    assert sum(v for k, v in c.items() if ".ended." in k and k.endswith(".jobs")) == sum(c[k] for k in kinds)


async def test_a_cursor_put_somewhere_without_typing_starts_that_spot_s_work(oracle_session):
    """flint/didMoveCursor (a file opened or focused, a click): the spot's generation starts before any
    request, and the request there is answered from it; where typing already put the cursor, a stale
    version, and a bad position or document start nothing."""
    s, eng = oracle_session(TARGET)
    uri = "file:///m.py"
    s.documents.open(uri, BODY + "\n", 1)
    s.did_change(uri)  # didOpen: where the cursor is is not known yet
    await settle(s)
    assert eng.calls == []
    assert s.did_move_cursor(uri, 1, 4, version=1)
    await until(lambda: len(eng.calls) > 0)
    assert eng.calls[0][0] == BODY  # no request asked for it
    await settle(s)
    res = await s.suggest(uri, 1, 4, invoked=False)
    assert [it.text for it in res.items] == ["return a + b"] and res.source != "model", res
    assert len([c for c in eng.calls if c[0] == BODY]) == 1
    assert not s.did_move_cursor(uri, 1, 4)  # known there already (a client reports typing's moves too)
    assert not s.did_move_cursor(uri, 0, 0, version=2)  # the client's text is newer: its edit is on its way
    for bad_uri, line in ((uri, 9), ("file:///not-open.py", 0)):
        with pytest.raises(RequestError) as e:
            s.did_move_cursor(bad_uri, line, 0)
        assert e.value.code == RequestError.INVALID_PARAMS


async def test_typing_through_a_suggestion_needs_no_model_call(oracle_session):
    statuses: list[dict] = []
    s, eng = oracle_session(TARGET, statuses=statuses)
    uri = "file:///t.py"
    s.documents.open(uri, BODY + "\n", 1)
    await s.suggest(uri, 1, 4, invoked=False)
    await settle(s)
    calls = len(eng.calls)
    col, version = 4, 1
    for ch in "return a":
        col, version = type_chars(s, uri, ch, 1, col, version)
        res = await s.suggest(uri, 1, col, invoked=False)
        assert res.source == "type-through", (ch, res)
        assert BODY + "return a"[: col - 4] + res.items[0].text == BODY + "return a + b"
    assert statuses[-1]["source"] == "type-through"
    await settle(s)
    typed_states = [c for c in eng.calls[calls:] if c[0].startswith(BODY + "r")]
    assert typed_states == []  # no keystroke inside the suggestion reached the engine


async def test_enter_after_a_line_typed_by_hand_is_typed_through(oracle_session):
    """At the end of a line the one-line suggestion is generated a line further than it is shown: the
    user who finishes the line by hand and presses Enter gets the next line without a model call."""
    target = "def add(a, b):\n    total = a + b\n    return total\n"
    s, eng = oracle_session(target)
    s.speculate = True
    uri = "file:///e.py"
    s.documents.open(uri, "def add(a, b):\n    total = a\n", 1)
    s.did_change(uri, cursor=s.documents.get(uri).offset_at(1, 13, s.encoding))  # the cursor arrives: speculation
    await settle(s)
    (prefix, _, params), = eng.calls
    assert params.max_lines == 2 and prefix.endswith("total = a")  # one line, and a look-ahead line
    col, version = type_chars(s, uri, " + b", 1, 13, 1)
    version += 1
    s.documents.change(uri, version, [Change("\n    ", (1, col, 1, col))], s.encoding)  # Enter, auto-indent
    s.did_change(uri, cursor=s.documents.get(uri).offset_at(2, 4, s.encoding))
    res = await s.suggest(uri, 2, 4, invoked=False)
    assert [it.text for it in res.items] == ["return total"] and res.source == "type-through", res


async def test_at_the_end_of_a_line_typed_through_the_model_s_next_line_is_offered(oracle_session):
    """Typed to where the model ended the line: its look-ahead line is offered (starting with the line break),
    as a fresh request at the end of a finished line would offer it, without a model call."""
    target = "def add(a, b):\n    total = a + b\n    return total\n"
    s, eng = oracle_session(target)
    s.speculate = True
    uri = "file:///n.py"
    s.documents.open(uri, "def add(a, b):\n    total = a\n", 1)
    s.did_change(uri, cursor=s.documents.get(uri).offset_at(1, 13, s.encoding))
    await settle(s)
    calls = len(eng.calls)
    col, _ = type_chars(s, uri, " + b", 1, 13, 1)
    res = await s.suggest(uri, 1, col, invoked=False)
    assert [it.text for it in res.items] == ["\n    return total"] and res.source == "type-through", res
    assert len(eng.calls) == calls


async def test_a_streaming_generation_is_read_not_restarted(oracle_session):
    line = "    total = sum(value * weight for value, weight in zip(values, weights))\n"
    target = "def score(values, weights):\n" + line
    s, eng = oracle_session(target, step_s=0.04)  # ~1.5 s for the line: the user types meanwhile
    s.speculate = True
    uri = "file:///s.py"
    s.documents.open(uri, "def score(values, weights):\n\n", 1)
    s.documents.change(uri, 2, [Change("    ", (1, 0, 1, 0))], s.encoding)
    s.did_change(uri, cursor=len("def score(values, weights):\n    "))
    col, version = 4, 2
    answers = []
    for i, ch in enumerate("total = su"):
        # the typist stays behind the stream (two characters a step): the i-th key once 3 + i steps are out
        await until(lambda i=i: eng.steps_run >= 3 + i)
        col, version = type_chars(s, uri, ch, 1, col, version)
        res = await s.suggest(uri, 1, col, invoked=False)
        answers.append(res.source)
    # one generation served every keystroke (later calls are futures: states after the whole line)
    here = [c[0] for c in eng.calls if len(c[0]) <= len("def score(values, weights):\n    total = su")]
    assert here == ["def score(values, weights):\n    "], here
    assert answers[-1] == "type-through"
    res = await s.suggest(uri, 1, col, invoked=False)
    assert res.items and ("    total = su" + res.items[0].text) == line.rstrip("\n")


async def test_a_burst_of_edits_starts_the_engine_for_where_it_ends(oracle_session):
    """A paste replayed as a hundred edits, faster than any typist: the work for each edit of the burst
    waits a moment (knobs.BURST_HOLD_S) and the next edit replaces it, so the model starts once for
    where the burst ends (and perhaps for its first edit), not once per edit."""
    s, eng = oracle_session("x = " + "y" * 200 + "\n")
    s.speculate = True
    uri = "file:///burst.py"
    s.documents.open(uri, "x = \n", 1)
    type_chars(s, uri, "y" * 100, 0, 4, 1)
    await settle(s)
    assert 1 <= len(eng.calls) <= 3 and eng.calls[-1][0] == "x = " + "y" * 100, [c[0] for c in eng.calls]


async def test_typing_something_else_stops_the_generation(oracle_session):
    target = "x = " + "compute_something_long(1, 2, 3) " * 4 + "\n"
    s, eng = oracle_session(target, step_s=0.03)
    s.speculate = True
    uri = "file:///d.py"
    s.documents.open(uri, "\n", 1)
    s.documents.change(uri, 2, [Change("x = ", (0, 0, 0, 0))], s.encoding)
    s.did_change(uri, cursor=4)
    await until(lambda: eng.steps_run >= 3)  # streaming now
    assert len(eng.calls) == 1
    type_chars(s, uri, "None", 0, 4, 2)  # not what the model writes
    await until(lambda: len(eng.calls) >= 2)
    assert s.worker.running() is None or s.worker.running().state.prefix.endswith("None")
    assert len(eng.calls) == 2 and eng.calls[-1][0] == "x = None"


async def test_restart_answers_from_disk(oracle_session, tmp_path):
    s1, eng1 = oracle_session(TARGET)
    s1.documents.open("file:///r.py", BODY + "\n", 1)
    assert (await s1.suggest("file:///r.py", 1, 4, invoked=False)).source == "model"
    await settle(s1)
    s1.shutdown()
    s2, eng2 = oracle_session(TARGET)  # a new server process would see the same FLINT_HOME
    s2.documents.open("file:///r.py", BODY + "\n", 1)
    res = await s2.suggest("file:///r.py", 1, 4, invoked=False)
    assert res.source == "disk" and [it.text for it in res.items] == ["return a + b"]
    assert eng2.calls == []
    # and typing through the disk entry answers without the model too
    col, _ = type_chars(s2, "file:///r.py", "re", 1, 4, 1)
    res = await s2.suggest("file:///r.py", 1, col, invoked=False)
    assert res.source == "type-through" and res.origin == "disk" and eng2.calls == []


async def test_after_a_restart_the_exact_state_on_disk_beats_typing_through(oracle_session):
    """A restarted server could type through a generation it started itself toward a state the first
    server had answered: the complete entry stored for that very state answers instead (the exact state
    first, on disk as in memory; a stream typed through may still be writing toward it)."""
    s1, _ = oracle_session(TARGET)
    s1.documents.open("file:///x.py", BODY + "re\n", 1)
    assert (await s1.suggest("file:///x.py", 1, 6, invoked=False)).source == "model"  # stored for BODY + "re"
    await settle(s1)
    s1.shutdown()
    s2, eng2 = oracle_session(TARGET)
    s2.speculate = True
    s2.documents.open("file:///x.py", BODY + "\n", 1)
    s2.did_change("file:///x.py", cursor=len(BODY))  # the cursor arrives: a generation starts here
    await settle(s2)
    col, _ = type_chars(s2, "file:///x.py", "re", 1, 4, 1)
    res = await s2.suggest("file:///x.py", 1, col, invoked=False)
    assert res.source == "disk" and [it.text for it in res.items] == ["turn a + b"], res
    assert [c[0] for c in eng2.calls] == [BODY]  # nothing generated for the state the disk answered


async def test_restart_answers_from_the_start_a_cut_off_generation_left_on_disk(oracle_session):
    target = "value = " + "part_one + " * 8 + "end\n"
    s1, eng1 = oracle_session(target, step_s=0.03)  # ~1.4 s for the line
    s1.speculate = True
    uri = "file:///p.py"
    s1.documents.open(uri, "value = \n", 1)
    s1.did_change(uri, cursor=8)  # the cursor arrives: a generation starts
    await until(lambda: eng1.steps_run >= 12)  # some of the line written (about 0.4 s of it)
    type_chars(s1, uri, "z", 0, 8, 1)  # the user types something else: the generation stops, cut off
    await settle(s1)
    s1.shutdown()
    s2, eng2 = oracle_session(target, step_s=0.03)
    s2.documents.open(uri, "value = \n", 1)
    t0 = time.monotonic()
    res = await s2.suggest(uri, 0, 8, invoked=False)
    assert res.source == "disk" and time.monotonic() - t0 < 0.2, res
    shown = res.items[0].text
    assert shown and target.startswith("value = " + shown) and len(shown) < len(target) - 9  # the start
    await settle(s2)
    assert [c[0] for c in eng2.calls].count("value = ") == 1  # a generation there writes the rest
    res = await s2.suggest(uri, 0, 8, invoked=False)
    assert "value = " + res.items[0].text == target.rstrip("\n")


async def test_deadline_answers_with_what_exists_and_the_next_ask_gets_the_rest(oracle_session, monkeypatch):

    monkeypatch.setattr(knobs, "AUTOMATIC_BUDGET_S", 0.3)
    target = "value = " + "a_long_expression_part + " * 6 + "end\n"
    s, eng = oracle_session(target, step_s=0.02)  # ~1.7 s for the whole line
    uri = "file:///dl.py"
    s.documents.open(uri, "value = \n", 1)
    t0 = time.monotonic()
    res = await s.suggest(uri, 0, 8, invoked=False)
    assert time.monotonic() - t0 < 0.6  # the deadline, not the generation
    assert not res.items or target.startswith("value = " + res.items[0].text)  # partial, never wrong
    await settle(s)
    res = await s.suggest(uri, 0, 8, invoked=False)
    assert res.source == "memory" and "value = " + res.items[0].text == target.rstrip("\n")
    # the first generation went on after its request had its answer (later calls pre-generate elsewhere)
    assert [c[0] for c in eng.calls].count("value = ") == 1


@pytest.mark.parametrize("enter", ["\n    ", "\n\n    "], ids=["enter", "enter-twice"])
async def test_accepting_a_suggestion_is_answered_from_its_look_ahead_line(oracle_session, enter):
    """Tab, then Enter (or Enter twice: an empty line the model did not write, typethrough.past_blank_lines):
    the line after it is the look-ahead line, without waiting for the model."""
    target = "def f(a, b):\n    total = a + b\n    return total\n"
    s, eng = oracle_session(target)
    uri = "file:///f.py"
    head = "def f(a, b):\n    total = "
    s.documents.open(uri, head + "\n", 1)
    res = await s.suggest(uri, 1, 12, invoked=False)
    assert res.items[0].text == "a + b" and res.mode == "single"
    # the generation looks one line past the line it shows (the line after Enter)
    assert eng.calls[0][2].max_lines == 2
    await asyncio.sleep(0.3)
    await settle(s)
    # no futures after an automatic answer: the look-ahead line covers accepting it (planner.follow_ups)
    assert len(eng.calls) == 1, eng.calls
    # Tab, then Enter (the editor indents the new line): answered without waiting for the model
    s.documents.change(uri, 2, [Change("a + b", (1, 12, 1, 12))], s.encoding)
    s.did_change(uri, cursor=len(head + "a + b"))
    s.documents.change(uri, 3, [Change(enter, (1, 17, 1, 17))], s.encoding)
    s.did_change(uri, cursor=len(head + "a + b" + enter))
    res = await s.suggest(uri, 1 + enter.count("\n"), 4, invoked=False)
    assert res.source in ("memory", "type-through") and res.items[0].text == "return total"
    await settle(s)
    # the one new call is the block the user's state after Enter asks for (a look-ahead line does not
    # stand for it: planner.lookahead_for_block); nothing for the accepted line's end
    assert [(c[0], c[2].max_lines) for c in eng.calls[1:]] == [(head + "a + b" + enter, 9)], eng.calls[1:]


async def test_speculation_off_is_a_plain_server(oracle_session):
    s, eng = oracle_session(TARGET, settings=Settings(speculation=False, cache_size_mb=0))
    uri = "file:///o.py"
    s.documents.open(uri, BODY + "\n", 1)
    assert (await s.suggest(uri, 1, 4, invoked=False)).source == "model"
    await asyncio.sleep(0.3)
    assert len(eng.calls) == 1  # no futures
    col, _ = type_chars(s, uri, "re", 1, 4, 1)
    res = await s.suggest(uri, 1, col, invoked=False)
    assert res.source == "model" and res.items[0].text == "turn a + b"
    assert len(eng.calls) == 2
    assert s.disk is None


async def test_text_right_of_the_cursor_is_not_worth_a_model_call(oracle_session):
    s, eng = oracle_session("x = foo(" + "\n")
    uri = "file:///k.py"
    s.documents.open(uri, "x =  + compute_offset(value)\n", 1)
    s.speculate = True
    s.did_change(uri, cursor=4)
    res = await s.suggest(uri, 0, 4, invoked=False)
    assert res.items == [] and eng.calls == []



async def test_a_slow_line_is_shown_as_it_streams_and_refreshed_when_whole(tmp_path, monkeypatch):
    """While the user types, a request is shown what has streamed after PARTIAL_AFTER_S (the rest of the
    word); once the generation has the whole line the client hears flint/refresh, and asking again gets
    it from memory. Every item reports the request's own latency."""
    monkeypatch.setenv("FLINT_HOME", str(tmp_path))
    refreshed: list[tuple[str, int]] = []
    eng = FakeEngine(oracle(TARGET, step_s=0.06))  # ~0.4 s for "return a + b"
    s = Session(lambda _settings: eng, Settings(cache_size_mb=0), on_refresh=lambda u, v: refreshed.append((u, v)))
    s.attach_loop(asyncio.get_running_loop())
    s.start()
    try:
        assert s.worker.loaded.wait(5)
        uri = "file:///p.py"
        s.documents.open(uri, "def add(a, b):\n    return \n", 1)
        t0 = time.monotonic()
        first = await s.suggest(uri, 1, 11, invoked=False)
        assert time.monotonic() - t0 < 0.35  # not the whole line's time
        assert first.items and "a + b".startswith(first.items[0].text) and first.items[0].text != "a + b"
        assert first.items[0].total_ms > 0 and first.items[0].ttft_ms > 0
        await until(lambda: refreshed, 3)
        assert refreshed == [(uri, 1)]
        calls = len(eng.calls)
        # VS Code asks again with an explicit trigger: still the automatic answer, from the store
        again = await s.suggest(uri, 1, 11, invoked=True)
        assert [it.text for it in again.items] == ["a + b"] and again.source in ("memory", "model")
        assert len(eng.calls) == calls  # no new (three-variant, whole-window) generation
        assert again.items[0].total_ms == again.total_ms and again.items[0].ttft_ms == again.total_ms
    finally:
        s.shutdown()


async def test_a_request_keeps_its_deadline_while_the_model_loads(tmp_path, monkeypatch):

    monkeypatch.setenv("FLINT_HOME", str(tmp_path))
    monkeypatch.setattr(knobs, "AUTOMATIC_BUDGET_S", 0.3)
    eng = FakeEngine(oracle(TARGET))

    def slow_load(_settings):
        time.sleep(1.5)
        return eng

    s = Session(slow_load, Settings(cache_size_mb=0))
    s.attach_loop(asyncio.get_running_loop())
    s.start()
    try:
        s.documents.open("file:///l.py", BODY + "\n", 1)
        t0 = time.monotonic()
        res = await s.suggest("file:///l.py", 1, 4, invoked=False)
        assert time.monotonic() - t0 < 1.0 and res.items == []  # answered (empty) at its deadline
        assert s.worker.loaded.wait(5)
        await settle(s)
        res = await s.suggest("file:///l.py", 1, 4, invoked=False)
        assert [it.text for it in res.items] == ["return a + b"]  # the generation went on after loading
    finally:
        s.shutdown()
