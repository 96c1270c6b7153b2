"""Next edits in the server (issue 37): the edit history fed by didChange, speculation after a settled
edit, flint/nextEdit's answers (versions, positions, staleness), over the session and over the wire.
jedi is real here (the engine is the scripted FakeEngine, or no model at all: next edits need none)."""

from __future__ import annotations

import asyncio
import time

import pytest

from lsp_server.documents import Change
from lsp_server.session import Session
from lsp_server.settings import Settings
from tests.fakes import FakeEngine, text
from tests.test_reliability_server import Server, open_doc

SRC = ("def total(values, factor):\n"
       "    out = 0\n"
       "    for v in values:\n"
       "        out += v * factor\n"
       "    return out / len(values)\n")
URI = "file:///tmp/ne/calc.py"


@pytest.fixture
async def session(tmp_path, monkeypatch):
    monkeypatch.setenv("FLINT_HOME", str(tmp_path))
    eng = FakeEngine(text("pass"))
    s = Session(lambda _settings: eng, Settings())
    s.attach_loop(asyncio.get_running_loop())
    s.next_edits.quiet_s = 0.05
    yield s
    s.shutdown()


def type_over(s: Session, uri: str, line: int, col: int, old: str, new: str, version: int) -> int:
    """Delete ``old`` at (line, col) with backspaces and type ``new``, one didChange a keystroke."""
    for i in range(len(old), 0, -1):
        s.did_edit(uri, version, [Change("", (line, col + i - 1, line, col + i))])
        version += 1
    for i, ch in enumerate(new):
        s.did_edit(uri, version, [Change(ch, (line, col + i, line, col + i))])
        version += 1
    return version


def apply(text_: str, edit: dict) -> str:
    lines = text_.split("\n")
    r = edit["range"]
    assert r["start"]["line"] == r["end"]["line"]
    ln = lines[r["start"]["line"]]
    lines[r["start"]["line"]] = ln[:r["start"]["character"]] + edit["newText"] + ln[r["end"]["character"]:]
    return "\n".join(lines)


async def test_a_rename_offers_every_remaining_reference_then_none(session):
    s = session
    s.did_open(URI, SRC, 1, "python")
    v = type_over(s, URI, 0, 10, "values", "items", 2)
    last = s.documents.history.last(URI)  # the keystrokes are one edit (their common tail "s" trimmed)
    assert last is not None and (last.old_text, last.new_text) == ("value", "item")
    res = await s.next_edit(URI, v - 1, 0, 15)
    assert res["version"] == v - 1 and not res.get("stale")
    assert [(e["oldText"], e["newText"], e["source"]) for e in res["edits"]] == [("values", "items", "rename")] * 2
    assert [e["range"]["start"] for e in res["edits"]] == [{"line": 2, "character": 13}, {"line": 4, "character": 21}]
    # apply them one by one, as a client does (asking again after each)
    doc_text = s.documents.get(URI).text
    while res["edits"]:
        e = res["edits"][0]
        r = e["range"]
        s.did_edit(URI, v, [Change(e["newText"], (r["start"]["line"], r["start"]["character"],
                                                  r["end"]["line"], r["end"]["character"]))])
        doc_text = apply(doc_text, e)
        res = await s.next_edit(URI, v, r["start"]["line"], r["start"]["character"] + len(e["newText"]))
        v += 1
    assert s.documents.get(URI).text == doc_text == SRC.replace("values", "items")


async def test_a_stale_version_gets_nothing(session):
    s = session
    s.did_open(URI, SRC, 1, "python")
    v = type_over(s, URI, 0, 18, "factor", "scale", 2)
    res = await s.next_edit(URI, v - 2, 0, 10)
    assert res == {"version": v - 1, "edits": [], "stale": True}
    res = await s.next_edit(URI, v - 1, 0, 10)
    assert [e["newText"] for e in res["edits"]] == ["scale"]
    # a stale request's position may lie past the end of the current text: still stale, not an error
    assert (await s.next_edit(URI, 1, 40, 0))["stale"] is True


def test_a_client_syncing_whole_texts_feeds_the_history_too():
    from lsp_server.documents import DocumentStore

    st = DocumentStore()
    st.open(URI, SRC, 1)
    st.edit(URI, 2, [Change(SRC.replace("def total(values", "def total(items"))], "utf-16")
    last = st.history.last(URI)
    assert last is not None and (last.start, last.old_text, last.new_text) == (10, "value", "item")
    st.lose(URI, "test")
    assert URI not in st.history


async def test_after_a_first_ask_the_next_edit_is_computed_before_the_request(session):
    s = session
    s.did_open(URI, SRC, 1, "python")
    await s.next_edit(URI, 1, 0, 0)  # the client shows it asks: speculate from now on
    before = s.next_edits.computed
    v = type_over(s, URI, 1, 4, "out", "acc", 2)
    t_edit = time.monotonic()
    deadline = time.monotonic() + 20
    while s.next_edits.computed == before or not s.next_edits._jobs[URI].future.done():
        assert time.monotonic() < deadline, "nothing was computed after the edit settled"
        await asyncio.sleep(0.01)
    assert s.next_edits.computed == before + 1  # once, after the burst settled (not per keystroke)
    assert s.next_edits._jobs[URI].ready_t is not None and s.next_edits._jobs[URI].ready_t >= t_edit
    t0 = time.monotonic()
    res = await s.next_edit(URI, v - 1, 1, 7)
    assert time.monotonic() - t0 < 0.05  # ready: the request waits for nothing
    assert [e["range"]["start"]["line"] for e in res["edits"]] == [3, 4]
    assert res["readyMs"] >= 0


async def test_a_literal_repeat_and_nothing_for_plain_typing(session):
    s = session
    src = 'def f(a):\n    x = a.get("utf-8")\n    y = a.get("utf-8")\n    return x, y\n'
    s.did_open(URI, src, 1, "python")
    v = type_over(s, URI, 1, 15, "utf-8", "latin-1", 2)
    res = await s.next_edit(URI, v - 1, 1, 22)
    assert [(e["oldText"], e["newText"], e["source"]) for e in res["edits"]] == [('"utf-8"', '"latin-1"', "repeat")]
    s.did_edit(URI, v, [Change("\n    z = 1", (3, 15, 3, 15))])
    res = await s.next_edit(URI, v, 4, 9)
    assert res["edits"] == []


async def test_close_forgets_the_history_and_unknown_documents_are_errors(session):
    from lsp_server.errors import RequestError

    s = session
    s.did_open(URI, SRC, 1, "python")
    type_over(s, URI, 0, 10, "values", "items", 2)
    assert URI in s.documents.history
    s.did_close(URI)
    assert URI not in s.documents.history
    with pytest.raises(RequestError) as e:
        await s.next_edit(URI, None, 0, 0)
    assert e.value.code == RequestError.INVALID_PARAMS


def test_a_long_session_keeps_a_bounded_history():
    from lsp_server.documents import DocumentStore

    st = DocumentStore()
    st.open("file:///a.py", "x = 1\n" * 200, 1)
    for i in range(100):
        st.edit("file:///a.py", i + 2, [Change("y", (i * 2 % 200, 0, i * 2 % 200, 1))], "utf-16")
    assert 0 < len(st.history.edits("file:///a.py")) <= st.history.max_edits
    assert st.history.text("file:///a.py") == st.get("file:///a.py").text


@pytest.mark.e2e
def test_flint_next_edit_over_the_wire_without_a_model(tmp_path):
    """The real server process (no model: next edits need none): a rename typed as keystrokes, then
    flint/nextEdit; bad params are a clear error and the server stays up."""
    s = Server("--model", "no-such-model", "-v", "--log-stderr")
    try:
        s.initialize()
        uri = (tmp_path / "calc.py").as_uri()
        open_doc(s.wire, uri, SRC)
        v = 2
        for i in range(6, 0, -1):  # "values" -> "items", keystroke by keystroke
            s.wire.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": v}, "contentChanges": [
                {"range": {"start": {"line": 0, "character": 10 + i - 1}, "end": {"line": 0, "character": 10 + i}},
                 "text": ""}]})
            v += 1
        for i, ch in enumerate("items"):
            s.wire.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": v}, "contentChanges": [
                {"range": {"start": {"line": 0, "character": 10 + i}, "end": {"line": 0, "character": 10 + i}},
                 "text": ch}]})
            v += 1
        res = s.wire.call("flint/nextEdit", {"textDocument": {"uri": uri, "version": v - 1},
                                             "position": {"line": 0, "character": 15}}, timeout=60)
        assert "result" in res, res
        edits = res["result"]["edits"]
        assert res["result"]["version"] == v - 1
        assert [(e["range"]["start"]["line"], e["newText"], e["source"]) for e in edits] == \
            [(2, "items", "rename"), (4, "items", "rename")], res
        bad = s.wire.call("flint/nextEdit", {"textDocument": {"uri": uri, "version": "x"},
                                             "position": {"line": 0, "character": 0}})
        assert bad["error"]["code"] == -32602, bad
        gone = s.wire.call("flint/nextEdit", {"textDocument": {"uri": "file:///nope.py"},
                                              "position": {"line": 0, "character": 0}})
        assert "error" in gone and "not opened" in gone["error"]["message"], gone
        assert s.wire.call("shutdown")["result"] is None  # still up and answering
    finally:
        s.close()
