"""Next edits reach the plan as they are found (issue 50): the asked document's own first, then each other
document's; a request answers at the first with ``pending`` and gets the rest when it asks again, and
applying the first offer does not stop the search for the others. parts.py alone, then the session with a
scripted computation (no jedi: the order and timing are the script's)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from engine.edits.common import Fill, NextEdit
from engine.edits.signature import Change as SigChange
from engine.edits.signature import Param
from engine.edits.workspace import OpenDoc
from lsp_server.documents import Change
from lsp_server.nextedit import service
from lsp_server.nextedit.parts import elsewhere, part_of, signature_of
from lsp_server.nextedit.records import Job, Plan
from lsp_server.session import Session
from lsp_server.settings import Settings
from tests.fakes import FakeEngine, next_edit_whole, text


def _edit(at: int, old: str = "a", new: str = "c") -> NextEdit:
    return NextEdit(at, at + len(old), old, new, "rename", 0.95)


def test_a_part_joins_for_the_text_it_was_found_in():
    job = Job("u:a", 3, 2, 0.0, text="a = 1\n", others={"u:b": (5, 1, "b = a\n")})
    revisions = {"u:a": 3, "u:b": 5}.get
    assert part_of(job, None, [_edit(0)], revisions, set())[0] == "u:a"
    key, part = part_of(job, OpenDoc("u:b", "/w/b.py", "b = a\n"), [_edit(4)], revisions, set())
    assert (key, part.revision, part.version, part.on_disk) == ("u:b", 5, 1, False)
    assert part_of(job, OpenDoc("u:b", "/w/b.py", "b = a\n"), [_edit(4)], {"u:b": 6}.get, set()) is None  # typed since
    key, part = part_of(job, OpenDoc("file:///w/c.py", "/w/c.py", "a()\n"), [_edit(0)], revisions, set())
    assert (key, part.on_disk, part.text) == ("file:///w/c.py", True, "a()\n")
    assert part_of(job, OpenDoc("file:///w/c.py", "/w/c.py", "a()\n"), [_edit(0)], revisions, {"/w/c.py"}) is None
    assert part_of(job, None, [], revisions, set()) is None


def test_elsewhere_lists_the_origin_first_then_by_uri_each_still_valid():
    job = Job("u:b", 1, 1, 0.0, text="a\n")
    plan = Plan("u:b", {})
    plan.parts["u:z"] = part_of(Job("u:b", 1, 1, 0.0, others={"u:z": (2, 2, "a\n")}),
                                OpenDoc("u:z", "/z.py", "a\n"), [_edit(0)], {"u:z": 2}.get, set())[1]
    plan.parts["u:b"] = part_of(job, None, [_edit(0)], {}.get, set())[1]
    plan.parts["file:///c.py"] = part_of(job, OpenDoc("file:///c.py", "/c.py", "a\n"), [_edit(0)], {}.get, set())[1]
    revisions = {"u:b": 1, "u:z": 2}
    assert [x.uri for x in elsewhere(plan, "u:q", revisions.get)] == ["u:b", "file:///c.py", "u:z"]
    revisions["u:z"] = 3  # changed since: its part waits
    assert [x.uri for x in elsewhere(plan, "u:b", revisions.get)] == ["file:///c.py"]


def test_the_signature_for_the_fill_prompts():
    text = "x = 1\ndef area(w, h, unit):\n    return w * h\n"
    change = SigChange("added", "area", text.index("area"), 2, Param("unit", "pos", False))
    sig = signature_of(text, change)
    assert sig is not None and (sig.text, sig.def_at) == ("def area(w, h, unit):", 6)
    assert signature_of(text, None) is None


LIB = "a = 1\nb = a\n"
USE = "from lib import a\nprint(a)\n"


@pytest.fixture
async def scripted(tmp_path, monkeypatch):
    """A session whose computation hands over the asked document's part, then waits for ``go`` before
    handing over use.py's."""
    monkeypatch.setenv("FLINT_HOME", str(tmp_path / "home"))
    go = threading.Event()

    def compute(text_, edits, *, emit=None, others=(), **_kw):
        here = [_edit(text_.index("= a") + 2)]
        emit(None, here)
        go.wait(10)
        use = next(d for d in others if d.path.endswith("use.py"))
        jump = NextEdit(len(USE) - 3, len(USE) - 3, "", "", "signature", 0.9, note="n", fill=Fill(", ", ""))
        emit(use, [_edit(use.text.index("import a") + 7), jump])
        return here, {use.key: [_edit(0)]}

    monkeypatch.setattr(service, "workspace_next_edits", compute)
    s = Session(lambda _settings: FakeEngine(text("pass")), Settings())
    s.attach_loop(asyncio.get_running_loop())
    s.next_edits.quiet_s = 0.05
    (tmp_path / "lib.py").write_text(LIB)
    (tmp_path / "use.py").write_text(USE)
    yield s, (tmp_path / "lib.py").as_uri(), (tmp_path / "use.py").as_uri(), go
    go.set()
    s.shutdown()


async def test_the_first_part_is_answered_pending_and_applying_it_keeps_the_search_going(scripted):
    s, lib, use, go = scripted
    s.did_open(lib, LIB, 1, "python")
    s.did_open(use, USE, 1, "python")
    await s.next_edit(lib, 1, 0, 0)
    s.did_edit(lib, 2, [Change("z", (0, 0, 0, 1))])
    res = await s.next_edit(lib, 2, 0, 1)
    assert [e["newText"] for e in res["edits"]] == ["c"] and res["pending"] and "elsewhere" not in res
    assert res["readyMs"] >= 0 and "completeMs" not in res
    # the client applies it at once: the rest of the plan is still being found, not computed again
    r = res["edits"][0]["range"]
    s.did_edit(lib, 3, [Change("c", (r["start"]["line"], r["start"]["character"], r["end"]["line"],
                                     r["end"]["character"]))])
    go.set()
    res = await next_edit_whole(s, lib, 3, 1, 5)
    assert res["edits"] == [] and res["completeMs"] >= 0
    assert [(x["uri"], x["range"]["start"]["line"]) for x in res["elsewhere"]] == [(use, 0), (use, 1)]
    assert s.next_edits.computed == 1 and s.next_edits.plan is not None and s.next_edits.plan.complete


async def test_a_later_part_of_the_asked_document_keeps_what_the_user_applied_meanwhile(tmp_path, monkeypatch):
    """The asked document's part found again, whole (a renamed parameter's uses first, then with the call
    sites): applied after the user took the first one, it is the rest of it, moved to the text as it is."""
    monkeypatch.setenv("FLINT_HOME", str(tmp_path / "home"))
    go = threading.Event()
    src = "a = 1\nb = a\nd = a\n"
    first, second = NextEdit(10, 11, "a", "cc", "rename", 0.95), NextEdit(16, 17, "a", "cc", "signature", 0.9)

    def compute(text_, edits, *, emit=None, **_kw):
        emit(None, [first])
        go.wait(10)
        emit(None, [first, second])
        return [first, second], {}

    monkeypatch.setattr(service, "workspace_next_edits", compute)
    s = Session(lambda _settings: FakeEngine(text("pass")), Settings())
    s.attach_loop(asyncio.get_running_loop())
    s.next_edits.quiet_s = 0.05
    lib = (tmp_path / "lib.py").as_uri()
    try:
        s.did_open(lib, src.replace("a = 1", "z = 1"), 1, "python")
        s.did_edit(lib, 2, [Change("a", (0, 0, 0, 1))])
        res = await s.next_edit(lib, 2, 0, 1)
        assert [(e["range"]["start"], e["newText"]) for e in res["edits"]] == [({"line": 1, "character": 4}, "cc")]
        assert res["pending"]
        s.did_edit(lib, 3, [Change("cc", (1, 4, 1, 5))])  # the client applies it while the rest is found
        go.set()
        res = await next_edit_whole(s, lib, 3, 1, 6)
        assert [(e["range"]["start"], e["newText"]) for e in res["edits"]] == [({"line": 2, "character": 4}, "cc")]
        assert s.next_edits.computed == 1
    finally:
        go.set()
        s.shutdown()
