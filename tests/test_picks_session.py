"""Pick Variant through the session (issue 34), on a scripted engine: item 1 (the automatic line) first, the
alternatives from one batch after it with flint/refresh, and a list whose variants agree says so instead of
leaving the picker waiting."""

from __future__ import annotations

import time

from lsp_server import items as picks
from tests.fakes import Done, FakeEngine, Step, until

TEXT = "def add(a, b):\n    \n    print(a)\n"


def batch(texts: list[str], ended: list[float]):
    """Variant 0's line at once (the next statement started: settled), the others 0.6 s later. A one-row
    greedy generation writes the same line."""
    def script(prefix, suffix, params):
        if params.n == 1:
            yield Step(texts[0])
            return Done("stop")
        yield Step(texts[0] + "    print")
        for i, t in enumerate(texts[1:], 1):
            yield Step(t, 0.6 if i == 1 else 0.0, variant=i)
        ended.append(time.monotonic())
        return Done("stop", texts=tuple(texts))
    return script


async def test_a_fresh_spot_shows_the_greedy_line_then_the_alternatives_from_one_batch(variants_session):
    ended: list[float] = []
    eng = FakeEngine(batch(["total = a + b\n", "return a + b\n", "return sum((a, b))\n"], ended))
    s, refreshed = variants_session(eng)
    uri = "file:///fresh.py"
    s.documents.open(uri, TEXT, 1)
    res = await s.suggest(uri, 1, 4, invoked=True, variants=True)  # nothing asked or started here
    answered = time.monotonic()
    assert [it.text for it in res.items] == ["total = a + b"] and not res.complete
    assert picks.note(len(res.items), res.asked, res.complete) == picks.PENDING
    assert not ended or answered < ended[0]  # item 1 before the alternatives were done
    await until(lambda: refreshed)
    assert refreshed == [uri]
    calls = [c.params for c in eng.calls]
    assert [p.n for p in calls] == [1, 3]  # the greedy line, then one batched pass for the alternatives
    assert calls[1].variant_temperature == 0.0  # branches, not samples
    again = await s.suggest(uri, 1, 4, invoked=True, variants=True)
    assert [it.text for it in again.items] == ["total = a + b", "return a + b", "return sum((a, b))"]
    assert again.complete and picks.note(len(again.items), again.asked, again.complete) == ""


async def test_variants_that_agree_in_substance_are_one_item_and_the_picker_hears_so(variants_session):
    ended: list[float] = []
    eng = FakeEngine(batch(["total = a + b\n", "total  =  a + b\n", "# the sum\n    total = a + b\n"], ended))
    s, refreshed = variants_session(eng)
    uri = "file:///agree.py"
    s.documents.open(uri, TEXT, 1)
    first = await s.suggest(uri, 1, 4, invoked=True, variants=True)
    assert [it.text for it in first.items] == ["total = a + b"]
    await until(lambda: refreshed)
    again = await s.suggest(uri, 1, 4, invoked=True, variants=True)
    assert [it.text for it in again.items] == ["total = a + b"] and again.complete
    assert picks.note(len(again.items), again.asked, again.complete) == picks.AGREE


async def test_a_spot_with_the_automatic_line_shows_it_at_once_then_the_batch(variants_session):
    ended: list[float] = []
    eng = FakeEngine(batch(["total = a + b\n", "return a + b\n", "return sum((a, b))\n"], ended))
    s, refreshed = variants_session(eng)
    uri = "file:///warm.py"
    s.documents.open(uri, TEXT, 1)
    auto = await s.suggest(uri, 1, 4, invoked=False)
    assert [it.text for it in auto.items] == ["total = a + b"]
    t0 = time.monotonic()
    res = await s.suggest(uri, 1, 4, invoked=True, variants=True)
    assert time.monotonic() - t0 < 0.5 and [it.text for it in res.items] == ["total = a + b"]
    await until(lambda: refreshed)
    assert [c.params.n for c in eng.calls][:2] == [1, 3]
    again = await s.suggest(uri, 1, 4, invoked=True, variants=True)
    assert len(again.items) == 3 and again.complete
