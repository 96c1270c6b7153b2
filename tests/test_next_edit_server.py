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
from tests.fakes import FakeEngine, next_edit_whole, text, until, wait_for
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


def method_with_uses(n: int) -> str:
    return "class A:\n    def run(self, value):\n" + "".join(
        f"        print(value + {i})\n" for i in range(n)) + "        return value\n"


async def apply_all_offered(s: Session, uri: str, res: dict, v: int) -> int:
    """Apply the first offered edit and ask again, as a client does, until nothing is left; the count."""
    n = 0
    while res["edits"]:
        e = res["edits"][0]
        r = e["range"]
        s.did_edit(uri, v, [Change(e["newText"], (r["start"]["line"], r["start"]["character"],
                                                  r["end"]["line"], r["end"]["character"]))])
        res = await s.next_edit(uri, v, r["start"]["line"], r["start"]["character"] + len(e["newText"]))
        assert not res.get("stale")
        v, n = v + 1, n + 1
    return n


async def test_a_rename_with_a_hundred_references_finishes_and_jedi_is_asked_once(session):
    s = session
    s.did_open(URI, method_with_uses(100), 1, "python")
    v = type_over(s, URI, 1, 18, "value", "amount", 2)
    res = await s.next_edit(URI, v - 1, 1, 24)
    assert len(res["edits"]) == 101
    computed = s.next_edits.computed
    # the edit history keeps 16 edits: the plan, not the history, carries the rename to its end
    assert await apply_all_offered(s, URI, res, v) == 101
    assert s.documents.get(URI).text == method_with_uses(100).replace("value", "amount")
    assert s.next_edits.computed == computed  # every next one came from the plan: jedi was not asked again


async def test_a_reference_renamed_by_hand_keeps_the_rest_of_the_plan(session):
    s = session
    s.did_open(URI, method_with_uses(20), 1, "python")
    v = type_over(s, URI, 1, 18, "value", "amount", 2)
    res = await s.next_edit(URI, v - 1, 1, 24)
    assert len(res["edits"]) == 21
    computed = s.next_edits.computed
    v = type_over(s, URI, 7, 14, "value", "amount", v)  # the user types one of them, key by key
    res = await s.next_edit(URI, v - 1, 7, 20)
    assert len(res["edits"]) == 20 and all(e["oldText"] == "value" for e in res["edits"])
    assert [e["range"]["start"]["line"] for e in res["edits"]][:2] == [8, 9]  # nearest after the cursor first
    assert s.next_edits.computed == computed
    # an unrelated edit is no application: next edits are computed again for it
    s.did_edit(URI, v, [Change("\n", (0, 8, 0, 8))])
    res = await s.next_edit(URI, v, 1, 0)
    assert s.next_edits.computed == computed + 1


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
    def computed() -> bool:
        return s.next_edits.computed != before and s.next_edits._jobs[URI].future.done()

    await until(computed, 20)
    assert computed(), "nothing was computed after the edit settled"
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
        # jedi's first questions in a cold server can outlast one computation's budget on a loaded machine (the
        # answer is then empty: nothing rather than something wrong); a client asks again, as this does
        asked: list[dict] = []

        def answered() -> bool:
            asked.append(s.wire.call("flint/nextEdit", {"textDocument": {"uri": uri, "version": v - 1},
                                                        "position": {"line": 0, "character": 15}}, timeout=60))
            return "result" not in asked[-1] or bool(asked[-1]["result"]["edits"])

        wait_for(answered, 60, every=0.5)
        res = asked[-1]
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


LIB = ("def scale(values, factor):\n"
       "    return [v * factor for v in values]\n"
       "\n"
       "\n"
       "def twice(values):\n"
       "    return scale(values, 2)\n")
USE_DISK = ("from lib import scale\n"
            "\n"
            "print(scale([1], 3))\n")
USE_OPEN = USE_DISK + "print(scale([2], 4))\n"  # one more call, not saved


async def test_a_rename_reaches_the_other_open_document_and_each_answers_for_itself(session, tmp_path):
    s = session
    (tmp_path / "lib.py").write_text(LIB)
    (tmp_path / "use.py").write_text(USE_DISK)
    s.set_workspace_folders([tmp_path.as_uri()])
    lib, use = (tmp_path / "lib.py").as_uri(), (tmp_path / "use.py").as_uri()
    s.did_open(lib, LIB, 1, "python")
    s.did_open(use, USE_OPEN, 1, "python")
    v = type_over(s, lib, 0, 4, "scale", "times", 2)
    res = await s.next_edit(lib, v - 1, 0, 9)
    # here: the call in twice(), offered as soon as it is found (the other documents' may still be pending)
    assert [(e["range"]["start"]["line"], e["newText"]) for e in res["edits"]] == [(5, "times")]
    assert res["readyMs"] >= 0 and (res.get("pending") or res["completeMs"] >= res["readyMs"])
    # elsewhere: use.py's import and both calls (the unsaved one too)
    res = await next_edit_whole(s, lib, v - 1, 0, 9)
    assert [(e["range"]["start"]["line"], e["newText"]) for e in res["edits"]] == [(5, "times")]
    assert res["completeMs"] >= res["readyMs"]
    assert [(x["uri"], x["version"], x["range"]["start"], x["oldText"], x["newText"], x["source"])
            for x in res["elsewhere"]] == [
        (use, 1, {"line": 0, "character": 16}, "scale", "times", "rename"),
        (use, 1, {"line": 2, "character": 6}, "scale", "times", "rename"),
        (use, 1, {"line": 3, "character": 6}, "scale", "times", "rename")]
    # asked in use.py: its own references are the edits, lib.py's remaining one is elsewhere
    res = await s.next_edit(use, 1, 0, 0)
    assert [e["range"]["start"]["line"] for e in res["edits"]] == [0, 2, 3]
    assert [(x["uri"], x["range"]["start"]["line"]) for x in res["elsewhere"]] == [(lib, 5)]
    # the client applies use.py's edits one by one, asking after each: the rest stays on offer
    text_use, uv = USE_OPEN, 1
    while res["edits"]:
        e = res["edits"][0]
        r = e["range"]
        uv += 1
        s.did_edit(use, uv, [Change(e["newText"], (r["start"]["line"], r["start"]["character"],
                                                   r["end"]["line"], r["end"]["character"]))])
        text_use = apply(text_use, e)
        res = await s.next_edit(use, uv, r["start"]["line"], r["start"]["character"] + 5)
        assert not res.get("stale")
    assert text_use == USE_OPEN.replace("scale", "times") == s.documents.get(use).text
    # nothing left here: lib.py's remaining edit is still elsewhere, and lib.py itself still offers it
    assert [(x["uri"], x["version"], x["range"]["start"]["line"]) for x in res["elsewhere"]] == [(lib, v - 1, 5)]
    res = await s.next_edit(lib, v - 1, 0, 9)
    assert [(e["range"]["start"]["line"], e["newText"]) for e in res["edits"]] == [(5, "times")]
    assert "elsewhere" not in res  # use.py is done


async def test_an_edit_elsewhere_drops_the_plan_and_clients_without_elsewhere_see_edits_only(session, tmp_path):
    s = session
    (tmp_path / "lib.py").write_text(LIB)
    (tmp_path / "use.py").write_text(USE_DISK)
    s.set_workspace_folders([tmp_path.as_uri()])
    lib, use, other = (tmp_path / "lib.py").as_uri(), (tmp_path / "use.py").as_uri(), (tmp_path / "o.py").as_uri()
    s.did_open(lib, LIB, 1, "python")
    s.did_open(use, USE_OPEN, 1, "python")
    s.did_open(other, "x = 1\n", 1, "python")
    v = type_over(s, lib, 0, 4, "scale", "times", 2)
    res = await next_edit_whole(s, lib, v - 1, 0, 9)
    assert len(res["elsewhere"]) == 3 and len(res["edits"]) == 1
    # a change in use.py that is not one of its edits drops its part; lib.py keeps its own edit
    s.did_edit(use, 2, [Change("# note\n", (0, 0, 0, 0))])
    res = await s.next_edit(lib, v - 1, 0, 9)
    assert len(res["edits"]) == 1 and "elsewhere" not in res
    res = await s.next_edit(use, 2, 0, 0)
    assert res["edits"] == []
    # typing in a third document: the user moved on, the plan is gone
    v = type_over(s, lib, 5, 11, "times", "scale", v)  # (lib.py renamed back: a plan again)
    res = await s.next_edit(lib, v - 1, 5, 11)
    assert s.next_edits.plan is not None
    s.did_edit(other, 2, [Change("y", (0, 0, 0, 1))])
    assert s.next_edits.plan is None


@pytest.mark.e2e
def test_a_two_file_rename_over_the_wire(tmp_path):
    """The real server process: a function renamed in lib.py (the workspace folder's) offers use.py's
    references (its unsaved text) under ``elsewhere``; asked in use.py they are its ``edits``."""
    (tmp_path / "lib.py").write_text(LIB)
    (tmp_path / "use.py").write_text(USE_DISK)
    s = Server("--model", "no-such-model", "-v", "--log-stderr")
    try:
        s.initialize(workspaceFolders=[{"uri": tmp_path.as_uri(), "name": "ws"}])
        lib, use = (tmp_path / "lib.py").as_uri(), (tmp_path / "use.py").as_uri()
        open_doc(s.wire, lib, LIB)
        open_doc(s.wire, use, USE_OPEN)
        s.wire.notify("textDocument/didChange", {"textDocument": {"uri": lib, "version": 2}, "contentChanges": [
            {"range": {"start": {"line": 0, "character": 4}, "end": {"line": 0, "character": 9}}, "text": "times"}]})
        for _ in range(100):  # asked again while the other documents' parts are pending, as a client does
            res = s.wire.call("flint/nextEdit", {"textDocument": {"uri": lib, "version": 2},
                                                 "position": {"line": 0, "character": 9}}, timeout=60)
            assert "result" in res, res
            if not res["result"].get("pending"):
                break
            time.sleep(0.05)
        r = res["result"]
        assert [(e["range"]["start"]["line"], e["newText"]) for e in r["edits"]] == [(5, "times")], r
        assert [(x["uri"], x["version"], x["range"]["start"]["line"], x["range"]["start"]["character"], x["newText"])
                for x in r["elsewhere"]] == [(use, 1, 0, 16, "times"), (use, 1, 2, 6, "times"),
                                             (use, 1, 3, 6, "times")], r
        res = s.wire.call("flint/nextEdit", {"textDocument": {"uri": use, "version": 1},
                                             "position": {"line": 0, "character": 0}}, timeout=60)
        r = res["result"]
        assert [(e["range"]["start"]["line"], e["oldText"], e["newText"]) for e in r["edits"]] == \
            [(0, "scale", "times"), (2, "scale", "times"), (3, "scale", "times")], r
        assert [(x["uri"], x["range"]["start"]["line"]) for x in r["elsewhere"]] == [(lib, 5)], r
        assert s.wire.call("shutdown")["result"] is None
    finally:
        s.close()


CALLS = ("def total(values, factor, scale):\n"  # scale: no longer used
         "    return sum(values) * factor\n"
         "\n"
         "\n"
         "a = total([1], 2, 3)\n"
         "b = total([4], 5, scale=6)\n")


async def test_a_removed_parameter_is_removed_at_each_call_one_by_one(session):
    s = session
    s.did_open(URI, CALLS, 1, "python")
    s.did_edit(URI, 2, [Change("", (0, 24, 0, 31))])  # ", scale" deleted
    res = await s.next_edit(URI, 2, 0, 24)
    assert [(e["range"]["start"]["line"], e["oldText"], e["newText"], e["source"]) for e in res["edits"]] == [
        (4, ", 3", "", "signature"), (5, ", scale=6", "", "signature")]
    assert "jumps" not in res
    computed = s.next_edits.computed
    assert await apply_all_offered(s, URI, res, 3) == 2
    assert s.documents.get(URI).text.endswith("a = total([1], 2)\nb = total([4], 5)\n")
    assert s.next_edits.computed == computed


async def test_an_added_parameter_answers_jump_targets_that_typing_there_consumes(session):
    s = session
    s.did_open(URI, CALLS, 1, "python")
    s.did_edit(URI, 2, [Change(", offset", (0, 31, 0, 31))])
    res = await s.next_edit(URI, 2, 0, 39)
    assert res["edits"] == []  # a client that knows nothing of jump targets sees nothing to apply
    assert res["jumps"] == [{"range": {"start": {"line": ln, "character": ch}, "end": {"line": ln, "character": ch}},
                             "source": "signature", "note": "offset"} for ln, ch in ((4, 19), (5, 25))]
    computed = s.next_edits.computed
    v = 3
    for i, c in enumerate(", 7"):  # the user fills in the first, key by key
        s.did_edit(URI, v, [Change(c, (4, 19 + i, 4, 19 + i))])
        v += 1
    res = await s.next_edit(URI, v - 1, 4, 22)
    assert [j["range"]["start"] for j in res["jumps"]] == [{"line": 5, "character": 25}]
    assert s.next_edits.computed == computed


def test_keystrokes_reach_the_history_in_batches_and_a_document_too_large_drops_out(monkeypatch):
    import lsp_server.documents as documents

    monkeypatch.setattr(documents, "MAX_HISTORY_CHARS", 50)
    st = documents.DocumentStore()
    st.open("file:///a.py", "x = 1\n", 1)
    st.edit("file:///a.py", 2, [Change("2", (0, 4, 0, 5))], "utf-16")
    assert st._unheard and st.history.last("file:///a.py").new_text == "2"  # read: it heard the keystroke
    assert not st._unheard
    for i in range(documents.HISTORY_BATCH):  # a batch is handed over without a read
        st.edit("file:///a.py", 3 + i, [Change("#", (1, 0, 1, 0))], "utf-16")
    assert len(st._unheard) < documents.HISTORY_BATCH
    st.edit("file:///a.py", 99, [Change("y" * 60, (1, 0, 1, 0))], "utf-16")  # past the limit: out of it
    assert all(text is None for uri, _, text, _, _ in st._unheard if uri == "file:///a.py")
    assert "file:///a.py" not in st.history
