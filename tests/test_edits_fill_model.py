"""The argument at a jump target on the real model (issue 50): for a parameter added to a simple function,
what is offered at its calls is one plausible argument (non-empty, one line, balanced: the call with it
parses) at or above the confidence floor, or nothing (the jump alone) below it; the same through the
server's completion worker."""

from __future__ import annotations

import ast
import asyncio

import pytest

from engine.edits.fill import FLOOR, engine_fill, header
from engine.edits.signature import call_edits, calls, signature_change
from lsp_server.documents import Change
from lsp_server.session import Session
from lsp_server.settings import Settings
from tests.fakes import next_edit_whole

pytestmark = pytest.mark.model

BEFORE = '''def area(w, h):
    """The area of a w by h rectangle."""
    return w * h


def main():
    print(area(2, 3))
    rooms = [area(4, 5), area(6, 2)]
    return sum(rooms)
'''
AFTER = BEFORE.replace("def area(w, h):", "def area(w, h, unit):")


def _jumps():
    at = BEFORE.index("h):") + 1
    ch = signature_change(BEFORE, AFTER, at, at, at + len(", unit"))
    assert ch is not None and ch.kind == "added"
    offs = [i for i in range(len(AFTER)) if AFTER.startswith("area(", i) and AFTER[i - 4:i] != "def "]
    return ch, call_edits(AFTER, ch, calls(AFTER, offs))


def _plausible(text: str, at: int, insert: str) -> None:
    arg = insert.removeprefix(", ")
    assert arg.strip() and "\n" not in arg
    ast.parse(text[:at] + insert + text[at:])  # balanced: the file with it parses


def test_the_argument_is_one_plausible_expression_or_absent_below_the_floor(engine):
    ch, jumps = _jumps()
    assert len(jumps) == 3
    sig = header(AFTER, ch.name_at)
    for j in jumps:
        done, raw = engine_fill(engine, AFTER, j, sig, def_at=0)
        f = done.fill
        assert f is not None and f.confidence is not None, raw
        if f.text:
            assert f.confidence >= FLOOR
            _plausible(AFTER, j.range_start, f.insert)
        else:
            assert f.insert == ""


async def test_the_server_offers_the_jump_with_the_argument_or_alone(engine, tmp_path, monkeypatch):
    monkeypatch.setenv("FLINT_HOME", str(tmp_path))
    s = Session(lambda _settings: engine, Settings(cache_size_mb=0))
    s.attach_loop(asyncio.get_running_loop())
    s.start()
    s.next_edits.quiet_s = 0.05
    uri = tmp_path.joinpath("rooms.py").as_uri()
    try:
        assert s.worker.loaded.wait(60)
        s.did_open(uri, BEFORE, 1, "python")
        s.did_edit(uri, 2, [Change(", unit", (0, 13, 0, 13))])
        res = await next_edit_whole(s, uri, 2, 0, 19, timeout=30)  # (asked again while the model writes)
        first = res["jumps"][0]
        assert first["note"] == "unit" and first["range"]["start"] == {"line": 6, "character": 19}
        if "newText" in first:
            assert first["confidence"] >= FLOOR
            at = sum(len(line) + 1 for line in AFTER.split("\n")[:6]) + 19
            _plausible(AFTER, at, first["newText"])
    finally:
        s.shutdown()
