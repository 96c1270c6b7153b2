"""Session, explicit requests: item 1 first, then the variants; the quick window, then the whole one
(a scripted engine; no LSP, no model)."""

from __future__ import annotations

import asyncio
import contextlib
import time

from lsp_server.completion.policy import knobs
from lsp_server.documents import Change
from lsp_server.errors import RequestError
from tests.fakes import Done, FakeEngine, Step, until

LINES = ["total = a + b\n", "total = sum([a, b])\n", "return a + b\n"]  # what the variants write


def variants_late(ended: list[float]):
    """One greedy line has nothing here; a batch streams variant 0's line at once (the next statement
    started: item 1 is settled), the other variants a second later (``ended``: when they were there)."""
    def script(prefix, suffix, params):
        if params.n == 1:  # the explicit request waits on the batch's own item 1
            return Done("stop")
        yield Step(LINES[0] + "    print")
        yield Step(LINES[1], 1.0, variant=1)
        yield Step(LINES[2], variant=2)
        ended.append(time.monotonic())
        return Done("stop", texts=tuple(LINES))
    return script


def variants_slow(line_s: float = 0.0):
    """One greedy line (streamed over ``line_s``); three variants only after a second-long prompt pass."""
    def script(prefix, suffix, params):
        if params.n == 1:
            if line_s:
                yield Step("total = a")
            yield Step(LINES[0], line_s)
            return Done("stop")
        for i, line in enumerate(LINES[: params.n]):
            yield Step(line, 1.0 if i == 0 else 0.0, variant=i)
        return Done("stop")
    return script


def sizes(eng: FakeEngine) -> list[int]:
    """Each generation's number of variants."""
    return [c.params.n for c in eng.calls]


async def test_explicit_request_shows_item_one_before_the_other_variants(variants_session):
    ended: list[float] = []
    eng = FakeEngine(variants_late(ended))
    s, refreshed = variants_session(eng)
    uri = "file:///v.py"
    s.documents.open(uri, "def add(a, b):\n    \n    print(a)\n", 1)
    res = await s.suggest(uri, 1, 4, invoked=True)
    answered = time.monotonic()
    assert [it.text for it in res.items] == ["total = a + b"]
    assert not ended or answered < ended[0]  # before the other variants were done
    await until(lambda: refreshed)
    assert refreshed == [uri]  # the client is told to ask again once all variants are there
    again = await s.suggest(uri, 1, 4, invoked=True)
    assert len(again.items) == 3


async def test_explicit_request_at_a_warm_spot_shows_the_automatic_line_first(variants_session):
    eng = FakeEngine(variants_slow())
    s, refreshed = variants_session(eng)
    uri = "file:///w.py"
    s.documents.open(uri, "def add(a, b):\n    \n    print(a)\n", 1)
    auto = await s.suggest(uri, 1, 4, invoked=False)
    assert [it.text for it in auto.items] == ["total = a + b"]
    t0 = time.monotonic()
    res = await s.suggest(uri, 1, 4, invoked=True)
    assert time.monotonic() - t0 < 0.5  # not after the variants' second-long pass
    assert [it.text for it in res.items] == ["total = a + b"]
    await until(lambda: refreshed)
    assert refreshed == [uri] and sizes(eng)[:2] == [1, 3]  # the variants ran to their end, then a refresh
    again = await s.suggest(uri, 1, 4, invoked=True)
    assert [it.text for it in again.items] == ["total = a + b", "total = sum([a, b])", "return a + b"]


async def test_the_same_text_sent_whole_again_keeps_the_generation_at_the_cursor(variants_session):
    """A client that syncs whole texts sends the text it had (an undo back to it): nothing moved, so the
    line being written at the cursor goes on (lsp_server/protocol/handlers.py: the cursor stays where it was)."""
    eng = FakeEngine(variants_slow(line_s=0.4))  # the line streams over 0.4 s, stops where it is when stopped
    s, _ = variants_session(eng)
    uri = "file:///p.py"
    text = "def add(a, b):\n    \n    print(a)\n"
    s.documents.open(uri, text, 1)
    auto = asyncio.ensure_future(s.suggest(uri, 1, 4, invoked=False))
    await until(lambda: eng.calls)  # the line streams
    s.documents.change(uri, 2, [Change(text)], s.encoding)
    s.did_change(uri, cursor=s.cursor_offset(uri))
    res = await s.suggest(uri, 1, 4, invoked=True)
    assert [it.text for it in res.items] == ["total = a + b"]
    await until(lambda: len(eng.calls) >= 2)
    assert sizes(eng)[:2] == [1, 3]  # the line was written once: not stopped as stale and written again
    with contextlib.suppress(RequestError):
        await auto


async def test_on_a_line_nothing_is_typed_on_an_automatic_request_shows_whole_lines_first(variants_session,
                                                                                          monkeypatch):
    """Part of a line there would be a statement cut in its middle (issue 16): the request waits for the
    line until knobs.FRESH_LINE_WHOLE_S, then shows what has streamed (a pause after Enter is not left empty);
    once something is typed on the line, what has streamed is shown after PARTIAL_AFTER_S."""
    from lsp_server.completion.policy import knobs

    monkeypatch.setattr(knobs, "FRESH_LINE_WHOLE_S", 1.0)  # longer than the line takes to stream
    eng = FakeEngine(variants_slow(line_s=0.4))  # the line streams over 0.4 s
    s, _ = variants_session(eng)
    uri = "file:///p.py"
    s.documents.open(uri, "def add(a, b):\n    \n    print(a)\n", 1)
    auto = await s.suggest(uri, 1, 4, invoked=False)
    assert [it.text for it in auto.items] == ["total = a + b"]
    monkeypatch.setattr(knobs, "FRESH_LINE_WHOLE_S", 0.1)  # shorter than the line takes
    fresh = "file:///f.py"  # (not a state the finished line types through)
    s.documents.open(fresh, "def mul(a, b):\n    \n    print(b)\n", 1)
    t0 = time.monotonic()
    part = await s.suggest(fresh, 1, 4, invoked=False)
    assert [it.text for it in part.items] == ["total = a"] and time.monotonic() - t0 < 0.35
    other = "file:///o.py"
    s.documents.open(other, "def sub(a, b):\n    t\n    print(a)\n", 1)
    typed = await s.suggest(other, 1, 5, invoked=False)
    assert [it.text for it in typed.items] == ["total = a"]  # what had streamed


async def test_explicit_request_waits_for_the_streaming_automatic_line_not_for_the_variants(variants_session):
    eng = FakeEngine(variants_slow(line_s=0.4))  # the line streams over 0.4 s
    s, _ = variants_session(eng)
    uri = "file:///p.py"
    s.documents.open(uri, "def add(a, b):\n    \n    print(a)\n", 1)
    auto = asyncio.ensure_future(s.suggest(uri, 1, 4, invoked=False))
    await until(lambda: eng.calls)  # the automatic line streams
    t0 = time.monotonic()
    res = await s.suggest(uri, 1, 4, invoked=True)
    assert time.monotonic() - t0 < 0.8  # the line's end, not the variants' second-long pass after it
    assert [it.text for it in res.items] == ["total = a + b"]
    await until(lambda: len(eng.calls) >= 2)
    assert sizes(eng)[:2] == [1, 3]  # the variants run after the line was there, not instead of it
    with contextlib.suppress(RequestError):
        await auto  # superseded by the explicit request, or answered with the line


async def test_explicit_request_at_a_fresh_spot_gets_the_greedy_line_before_the_variants(variants_session):
    eng = FakeEngine(variants_slow())
    s, refreshed = variants_session(eng)
    uri = "file:///f.py"
    s.documents.open(uri, "def add(a, b):\n    \n    print(a)\n", 1)
    t0 = time.monotonic()
    res = await s.suggest(uri, 1, 4, invoked=True)  # nothing asked here before
    assert time.monotonic() - t0 < 0.5
    assert [it.text for it in res.items] == ["total = a + b"]
    await until(lambda: refreshed)
    assert refreshed == [uri] and sizes(eng)[:2] == [1, 3]  # one greedy line first, then the batch
    again = await s.suggest(uri, 1, 4, invoked=True)
    assert len(again.items) == 3


BLOCK = "if reset:\n        count = 0\n    return count\n"


def block_stopped_first():
    """The first greedy block runs until it is stopped (its text so far is only a start); later ones end."""
    greedy = []

    def script(prefix, suffix, params):
        if params.n > 1:
            for i, text in enumerate((BLOCK, "return 0\n", "pass\n")):
                yield Step(text, variant=i)
            return Done("stop")
        greedy.append(prefix)
        if len(greedy) == 1:
            yield Step("if reset:\n        count")
            yield Step("never", 3600.0)  # until stopped
        yield Step(BLOCK)
        return Done("stop")
    return script


async def test_a_stopped_automatic_block_is_written_again_for_an_explicit_requests_item_one(variants_session):
    eng = FakeEngine(block_stopped_first())
    s, _ = variants_session(eng)
    uri = "file:///b.py"
    s.documents.open(uri, "def f(reset, count):\n    \n", 1)
    auto = await s.suggest(uri, 1, 4, invoked=False)
    assert auto.items and auto.items[0].text.startswith("if reset:")  # its complete lines, streaming
    s.documents.change(uri, 2, [Change("z", (1, 4, 1, 4))], s.encoding)  # typed elsewhere: stopped
    s.did_change(uri, cursor=len("def f(reset, count):\n    z"))
    # (the worker stops it once it sees the typed text: undone before that, it would rightly go on)
    await until(lambda: eng.ended)
    assert eng.ended[0] == "cancelled"  # the first block saw its stop
    s.documents.change(uri, 3, [Change("", (1, 4, 1, 5))], s.encoding)  # and undone
    s.did_change(uri, cursor=len("def f(reset, count):\n    "))
    res = await s.suggest(uri, 1, 4, invoked=True)
    assert res.items and res.items[0].text != "if reset:"  # never the block cut where it was stopped
    # the one greedy generation ran again (its KV is warm) before the variants' batch, and wrote item 1
    assert sizes(eng)[:2] == [1, 1]
    assert res.items[0].text == "if reset:\n        count = 0\n    return count"


def quick_empty(prefix, suffix, params):
    """The quick first window has no line here; the whole window has one (after its longer prompt pass)."""
    if params.quick_start:
        return Done("eos", window="quick")
    yield Step(LINES[0], 0.2)
    return Done("stop")


def windows(eng: FakeEngine) -> list[str]:
    return ["quick" if c.params.quick_start else "whole" for c in eng.calls]


async def test_nothing_from_the_quick_window_is_followed_by_the_whole_window_and_a_refresh(variants_session):
    """An automatic request at a fresh spot gets "nothing" from the quick window at once (it does not wait
    for the whole prompt pass); the whole window then runs and the client hears flint/refresh; asking
    again shows its line. A second ask before that stays answered at once."""
    eng = FakeEngine(quick_empty)
    s, refreshed = variants_session(eng)
    uri = "file:///q.py"
    s.documents.open(uri, "def add(a, b):\n    \n    print(a)\n", 1)
    first = await s.suggest(uri, 1, 4, invoked=False)
    assert first.items == [] and windows(eng) == ["quick"]
    await until(lambda: refreshed)
    assert refreshed == [uri] and windows(eng) == ["quick", "whole"]
    again = await s.suggest(uri, 1, 4, invoked=False)
    assert [it.text for it in again.items] == ["total = a + b"] and windows(eng) == ["quick", "whole"]


async def test_a_whole_window_whose_prompt_pass_outlasts_the_idle_time_is_not_begun(variants_session):
    """The engine says the whole window's prompt pass needs longer than is left before the user counts as gone
    (knobs.IDLE_WORK_S): the follow-up is not run (the watchdog would stop it before it wrote anything), no
    refresh comes; the user asking there still waits for the whole window (a request is not idle work)."""
    eng = FakeEngine(quick_empty, prompt_pass_s=knobs.IDLE_WORK_S + 1.0)
    s, refreshed = variants_session(eng)
    uri = "file:///q.py"
    s.documents.open(uri, "def add(a, b):\n    \n    print(a)\n", 1)
    assert (await s.suggest(uri, 1, 4, invoked=False)).items == []
    await until(lambda: s.stats.counts["work.now.ended.beyond-idle.jobs"] == 1, 5)
    assert windows(eng) == ["quick"] and refreshed == []
    asked = await s.suggest(uri, 1, 4, invoked=True)
    # (only the whole window has a line here; the automatic twin's quick window may run after it)
    assert [it.text for it in asked.items][:1] == ["total = a + b"] and "whole" in windows(eng)


def quick_empty_slow_whole(prefix, suffix, params):
    """The quick first window has no line here; the whole window's prompt pass outlasts the user's pause."""
    if params.quick_start:
        return Done("eos", window="quick")
    yield Step(LINES[0], 30.0)
    return Done("stop")


async def test_the_whole_window_after_nothing_stops_once_the_user_is_idle(variants_session, monkeypatch):
    """The whole window that follows "nothing" from the quick one is background work: once the user has done
    nothing for knobs.IDLE_WORK_S it stops (the CPU goes idle with the user: at a block's end on a slow CPU it
    had kept both cores busy for seconds), and no refresh comes."""
    monkeypatch.setattr(knobs, "IDLE_WORK_S", 0.5)
    eng = FakeEngine(quick_empty_slow_whole)
    s, refreshed = variants_session(eng)
    uri = "file:///q.py"
    s.documents.open(uri, "def add(a, b):\n    \n    print(a)\n", 1)
    assert (await s.suggest(uri, 1, 4, invoked=False)).items == []
    await until(lambda: len(eng.ended) == 2, 10)
    assert windows(eng) == ["quick", "whole"] and eng.ended == ["eos", "cancelled"] and refreshed == []
