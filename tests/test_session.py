"""Session: documents + worker + post-processing, without LSP and without the model.

A scripted engine (the facade of engine/engine_api.md) returns fixed raw text, so what is checked is the
server's own work: positions in each encoding, line breaks, replacement ranges, errors, speculation.
"""

from __future__ import annotations

import pytest

from lsp_server import convert
from lsp_server.documents import Change
from lsp_server.errors import RequestError
from lsp_server.session import Session
from lsp_server.settings import Settings
from tests.fakes import FakeEngine, text, until


@pytest.fixture
def make_session(start_session):
    def make(raw: str, delay: float = 0.0, settings: Settings | None = None) -> tuple[Session, FakeEngine]:
        eng = FakeEngine(text(raw, delay))
        return start_session(eng, settings), eng

    return make


async def test_crlf_document_gets_crlf_text_and_lf_prompt(make_session):
    s, eng = make_session("\n    return a + b")
    s.documents.open("file:///a.py", "def add(a, b):\r\n\r\nprint(add(1, 2))\r\n", 1)
    res = await s.suggest("file:///a.py", 0, 14, invoked=False)
    assert [it.text for it in res.items] == ["\r\n    return a + b"]
    assert res.items[0].start == (0, 14) == res.items[0].end
    prefix, suffix, params = eng.calls[0]
    assert "\r" not in prefix + suffix  # the model sees LF text
    assert params.n == 1 and params.max_lines == 9  # automatic: one greedy variant, a block


async def test_replacing_auto_closed_paren_after_an_emoji_in_utf16_and_utf8(make_session):
    s, _ = make_session("x):")
    text = 'if check("😀", )\n    pass\n'
    s.documents.open("file:///b.py", text, 1)
    col16 = convert.unit_len('if check("😀", ', convert.UTF16)
    res = await s.suggest("file:///b.py", 0, col16, invoked=True)
    it = res.items[0]
    assert it.text == "x):" and it.start == (0, col16) and it.end == (0, col16 + 1)
    s.encoding = convert.UTF8
    col8 = len('if check("😀", '.encode())
    res = await s.suggest("file:///b.py", 0, col8, invoked=True)
    assert (res.items[0].start, res.items[0].end) == ((0, col8), (0, col8 + 1))


async def test_errors(make_session):
    s, eng = make_session("1")
    with pytest.raises(RequestError) as e:
        await s.suggest("file:///nope.py", 0, 0, invoked=False)
    assert e.value.code == RequestError.INVALID_PARAMS and "file:///nope.py" in e.value.message
    s.documents.open("file:///c.py", "x = \n", 1)
    with pytest.raises(RequestError) as e:
        await s.suggest("file:///c.py", 5, 0, invoked=False)
    assert e.value.code == RequestError.INVALID_PARAMS and "past the end" in e.value.message
    s.documents.open("file:///bin", "a\x00b", 1)
    with pytest.raises(RequestError) as e:
        await s.suggest("file:///bin", 0, 0, invoked=False)
    assert e.value.code == RequestError.REQUEST_FAILED and "binary" in e.value.message
    assert eng.calls == []  # none of these reached the model


async def test_inside_a_word_automatic_requests_skip_the_model(make_session):
    s, eng = make_session("x")
    s.documents.open("file:///d.py", "value = compute\n", 1)
    res = await s.suggest("file:///d.py", 0, 9, invoked=False)  # val|ue
    assert res.items == [] and eng.calls == []


async def test_disabled_returns_nothing(make_session):
    s, eng = make_session("1", settings=Settings(enable=False))
    s.documents.open("file:///e.py", "x = \n", 1)
    assert (await s.suggest("file:///e.py", 0, 4, invoked=True)).items == []
    assert eng.calls == []


async def test_speculation_on_did_change_is_joined_by_the_request(make_session):
    s, eng = make_session(" 42", delay=0.2)
    uri = "file:///f.py"
    s.documents.open(uri, "answer =\n", 1)
    s.speculate = True  # the client has been asking as the user types
    s.documents.change(uri, 2, [Change(" ", (0, 8, 0, 8))], s.encoding)
    s.did_change(uri, cursor=len("answer ="))
    # the edit already started the model for the spot after the new text
    await until(lambda: eng.calls)
    assert len(eng.calls) == 1
    s.documents.change(uri, 3, [Change("=", (0, 8, 0, 9))], s.encoding)  # replaced: stale
    s.did_change(uri, cursor=len("answer ="))
    res = await s.suggest(uri, 0, 8, invoked=False)
    assert [it.text for it in res.items] == ["42"] or [it.text for it in res.items] == [" 42"]
    assert len(eng.calls) == 2  # the stale speculation, then the current one the request joined


async def test_show_accept_and_stats_file(make_session, tmp_path):
    s, _ = make_session("1")
    s.documents.open("file:///g.py", "x = \n", 1)
    res = await s.suggest("file:///g.py", 0, 4, invoked=True)
    assert s.did_show(res.id, 0) and s.did_accept(res.id, 0)
    assert not s.did_accept(res.id, 0)  # once
    assert not s.did_show("unknown", 0)
    assert s.did_partially_accept(res.id, 0, 1)
    s.stats.flush()
    from lsp_server import stats

    data = stats.load(tmp_path / "stats.json")
    t = data["totals"]
    assert (t["requests"], t["suggestions"], t["shown"], t["accepted"], t["partial_accepts"]) == (1, 1, 1, 1, 1)
    assert t["accepted_units"] == 2  # "1" accepted whole, plus 1 unit partially
    assert len(data["latency_ms"]) == 1


# ---------------------------------------------------------------------------------------------------------
# speculation and caches, against the stand-in as an "oracle" that knows the file being typed and predicts
# it perfectly, two characters per step (tests/fakes.py: oracle). The real model runs in
# tests/test_speculation_e2e.py.


async def test_the_repository_context_is_fed_nothing_while_off_and_reads_the_open_documents_when_on(start_session):
    from dataclasses import replace
    from pathlib import Path

    s = start_session(FakeEngine(text("")))
    s.did_open("file:///tmp/ctx.py", "x = 1\n", 1)
    s.did_edit("file:///tmp/ctx.py", 2, [Change("2", (0, 4, 0, 5))])
    assert s.context.workspace.text(Path("/tmp/ctx.py")) is None  # contextBudget 0 (the default): off
    s.apply_settings(replace(s.settings, context_budget=256))
    assert s.context.workspace.text(Path("/tmp/ctx.py")) == "x = 2\n"  # turned on: what is open now
    s.did_edit("file:///tmp/ctx.py", 3, [Change("3", (0, 4, 0, 5))])
    assert s.context.workspace.text(Path("/tmp/ctx.py")) == "x = 3\n"  # and every edit from then on
