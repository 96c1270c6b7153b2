"""The model's argument at jump targets in the server (issue 50, lsp_server/nextedit/fills.py): the prompt goes
through the completion worker (the scripted FakeEngine on its own engine thread), the answer's jumps carry
it as newText, applying one leaves the next offered with its own, and nothing is computed again. jedi is
real. The real model: tests/test_edits_fill_model.py."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Generator

import pytest

from engine.types import GenParams
from lsp_server.documents import Change
from lsp_server.nextedit.fills import FILL_BUDGET_S
from lsp_server.session import Session
from lsp_server.settings import Settings
from tests.fakes import Done, FakeEngine, Step, next_edit_whole

URI = "file:///tmp/ne/fill.py"
CALLS = ("def total(values, factor, scale):\n"
         "    return sum(values) * factor * scale\n"
         "\n"
         "\n"
         "a = total([1], 2, 3)\n"
         "b = total([4], 5, scale=6)\n")


def arguments(prefix: str, suffix: str, params: GenParams) -> Generator[Step, None, Done]:
    """An argument for the fill prompts (they end in ", " or "offset="; bound at module level: fill.answer
    drops an argument reading an unbound name), "pass" for anything else."""
    if prefix.endswith("offset="):
        yield Step("0.5)\n")
    elif prefix.endswith(", "):
        yield Step("len(__name__)")
    else:
        yield Step("pass")
    return Done("eos")


@contextlib.asynccontextmanager
async def running(make: Callable[[Settings], object]) -> AsyncIterator[Session]:
    """A session on the engine ``make`` gives (or fails to give), its model loaded (or given up on)."""
    s = Session(make, Settings(cache_size_mb=0))
    s.attach_loop(asyncio.get_running_loop())
    s.start()
    s.next_edits.quiet_s = 0.05
    try:
        assert s.worker.loaded.wait(5)
        yield s
    finally:
        s.shutdown()


@pytest.fixture
async def started(tmp_path, monkeypatch):
    monkeypatch.setenv("FLINT_HOME", str(tmp_path))
    eng = FakeEngine(arguments)
    async with running(lambda _settings: eng) as s:
        yield s, eng


async def test_each_jump_carries_the_models_argument_and_applying_it_offers_the_next(started):
    s, eng = started
    s.did_open(URI, CALLS, 1, "python")
    s.did_edit(URI, 2, [Change(", offset", (0, 31, 0, 31))])
    res = await next_edit_whole(s, URI, 2, 0, 39)
    assert res["edits"] == []
    first = res["jumps"][0]
    assert first["range"]["start"] == {"line": 4, "character": 19} and first["note"] == "offset"
    assert (first["newText"], first["confidence"]) == (", len(__name__)", 1.0)
    fills = [c for c in eng.calls if c.prefix.endswith("a = total([1], 2, 3, ")]
    assert len(fills) == 1 and "def total(values, factor, scale, offset):" in fills[0].prefix
    assert fills[0].suffix.startswith(")\nb = total(")
    computed = s.next_edits.computed
    # the client applies it (Tab): the next jump is offered at once, with its own argument, by keyword
    s.did_edit(URI, 3, [Change(first["newText"], (4, 19, 4, 19))])
    res = await next_edit_whole(s, URI, 3, 4, 32)
    assert [(j["range"]["start"], j["newText"]) for j in res["jumps"]] == [
        ({"line": 5, "character": 25}, ", offset=0.5")]
    s.did_edit(URI, 4, [Change(res["jumps"][0]["newText"], (5, 25, 5, 25))])
    res = await s.next_edit(URI, 4, 5, 37)
    assert "jumps" not in res and res["edits"] == []
    assert s.documents.get(URI).text.endswith("a = total([1], 2, 3, len(__name__))\n"
                                              "b = total([4], 5, scale=6, offset=0.5)\n")
    assert s.next_edits.computed == computed  # the plan carried both, arguments and all


async def test_the_jump_comes_at_once_and_its_argument_when_the_model_has_written_it(tmp_path, monkeypatch):
    monkeypatch.setenv("FLINT_HOME", str(tmp_path))

    def slow(prefix: str, suffix: str, params: GenParams) -> Generator[Step, None, Done]:
        if prefix.endswith(", "):
            time.sleep(0.8)  # (the engine's thread) a prompt pass that takes a while
        yield from arguments(prefix, suffix, params)
        return Done("eos")

    async with running(lambda _settings: FakeEngine(slow)) as s:
        s.did_open(URI, CALLS, 1, "python")
        s.did_edit(URI, 2, [Change(", offset", (0, 31, 0, 31))])
        t0 = time.monotonic()
        res = await s.next_edit(URI, 2, 0, 39)
        assert time.monotonic() - t0 < 0.6  # not the model's time: the jump is known without it
        assert res["jumps"][0]["note"] == "offset" and "newText" not in res["jumps"][0] and res["pending"] is True
        res = await next_edit_whole(s, URI, 2, 0, 39)  # asked again, as the clients do while pending
        assert res["jumps"][0]["newText"] == ", len(__name__)" and "pending" not in res


async def test_what_is_no_single_argument_leaves_the_jump_alone(started):
    s, eng = started
    s.did_open(URI, CALLS.replace("a = total([1], 2, 3)\n", ""), 1, "python")
    s.did_edit(URI, 2, [Change(", *, ok", (0, 31, 0, 31))])  # keyword-only: the prompt ends in "ok="
    res = await next_edit_whole(s, URI, 2, 0, 38)
    assert [j["note"] for j in res["jumps"]] == ["ok"]
    assert "newText" not in res["jumps"][0]  # "pass" is no expression: the jump alone
    assert any(c.prefix.endswith("scale=6, ok=") for c in eng.calls)


async def test_without_a_model_the_jumps_come_alone_and_at_once(tmp_path, monkeypatch):
    monkeypatch.setenv("FLINT_HOME", str(tmp_path))
    async with running(lambda _settings: (_ for _ in ()).throw(RuntimeError("no model"))) as s:
        s.did_open(URI, CALLS, 1, "python")
        s.did_edit(URI, 2, [Change(", offset", (0, 31, 0, 31))])
        t0 = asyncio.get_running_loop().time()
        first = await s.next_edit(URI, 2, 0, 39)
        assert [j["note"] for j in first["jumps"]] == ["offset", "offset"]
        # asked again while pending (the plan's search of the files around may still run on a loaded machine):
        # the whole answer holds the jumps alone, and came without the wait of an argument that cannot come (a
        # bound of that wait, not of jedi's speed: a loaded machine made a tighter one fail)
        res = await next_edit_whole(s, URI, 2, 0, 39)
        assert [j["note"] for j in res["jumps"]] == ["offset", "offset"]
        assert all("newText" not in j for j in first["jumps"] + res["jumps"])
        assert asyncio.get_running_loop().time() - t0 < FILL_BUDGET_S


def test_an_argument_another_job_cut_off_is_written_again_by_the_model():
    """The store holds this very prompt's generation, stopped after its first token by other work for the
    document (a cursor move's speculation replaced it): that is not the model's answer, the model writes it."""
    from engine.edits.fill import FILL_PARAMS
    from engine.types import Completion
    from lsp_server.nextedit.fills import WorkerFiller
    from tests.fakes import Rig, text

    r = Rig(FakeEngine(text("unit)"))).start()
    prefix, suffix = "print(area(2, 3, ", ")\n"
    entry = r.store.open(prefix, suffix, FILL_PARAMS.n, (*FILL_PARAMS.key(), "local"))
    r.store.stream(entry, 0, "un")
    r.store.finish(entry, [Completion(text="un", token_ids=[1], finish_reason="cancelled")])
    service = type("Service", (), {"store": r.store})()

    async def fill() -> tuple | None:
        r.events.attach_loop(asyncio.get_running_loop())
        return await WorkerFiller(service)(URI, 1, prefix, suffix)

    try:
        got = asyncio.run(fill())
    finally:
        r.stop()
    assert got is not None and (got[0], got[2]) == ("unit)", "eos"), got
    assert [c.prefix for c in r.engine.calls] == [prefix]
