"""Next edits in the workspace's files on disk that are not open (issue 50): after a parameter is added,
removed, or a function renamed in one open document, the call sites and references in files that exist
only on disk come under ``elsewhere`` with no version; opening such a file makes them that document's
answer (the model's argument at its jump targets included), and a file changed on disk since is left out.
The session with real jedi and real files; the engine is the scripted FakeEngine on its worker thread."""

from __future__ import annotations

import asyncio
from collections.abc import Generator

import pytest

from engine.types import GenParams
from lsp_server.documents import Change
from lsp_server.session import Session
from lsp_server.settings import Settings
from tests.fakes import Done, FakeEngine, Step, next_edit_whole

GEO = ("def area(w, h):\n"
       "    return w * h\n")
USE = ("from pkg.geo import area\n"
       "\n"
       "\n"
       "def report(rows):\n"
       "    return [area(r.w, r.h) for r in rows]\n")
OTHER = ("import pkg.geo as g\n"
         "\n"
         "total = g.area(2, 3) + g.area(4, 5)\n")


def arguments(prefix: str, suffix: str, params: GenParams) -> Generator[Step, None, Done]:
    """The argument for the fill prompts (they end in ", "), "pass" for anything else."""
    yield Step('"cm"' if prefix.endswith(", ") else "pass", 0.2)
    return Done("eos")


@pytest.fixture
async def workspace(tmp_path, monkeypatch):
    monkeypatch.setenv("FLINT_HOME", str(tmp_path / "home"))
    root = tmp_path / "ws"
    for rel, text in {"pkg/__init__.py": "", "pkg/geo.py": GEO, "pkg/use.py": USE, "pkg/other.py": OTHER,
                      ".venv/lib/pkg/use.py": USE}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    eng = FakeEngine(arguments)
    s = Session(lambda _settings: eng, Settings(cache_size_mb=0))
    s.attach_loop(asyncio.get_running_loop())
    s.set_workspace_folders([root.as_uri()])
    s.start()
    assert s.worker.loaded.wait(5)
    s.next_edits.quiet_s = 0.05
    yield s, root
    s.shutdown()


def at(text: str, res_range: dict) -> int:
    lines = text.split("\n")
    return sum(len(x) + 1 for x in lines[:res_range["line"]]) + res_range["character"]


async def test_a_parameter_added_offers_the_call_sites_in_files_not_open_then_their_arguments(workspace):
    s, root = workspace
    geo, use = (root / "pkg/geo.py").as_uri(), (root / "pkg/use.py").as_uri()
    s.did_open(geo, GEO, 1, "python")
    await s.next_edit(geo, 1, 0, 0)  # the first ask starts speculation
    s.did_edit(geo, 2, [Change(", unit", (0, 13, 0, 13))])
    res = await next_edit_whole(s, geo, 2, 0, 19)
    assert res["edits"] == [] and "jumps" not in res
    away = res["elsewhere"]
    assert {x["uri"].rsplit("/", 1)[-1] for x in away} == {"use.py", "other.py"}, res
    assert all(x["version"] is None and x["note"] == "unit" and "newText" not in x for x in away)
    assert not any(".venv" in x["uri"] for x in away)
    first = next(x for x in away if x["uri"] == use)
    assert at(USE, first["range"]["start"]) == USE.index("r.h)") + 3  # after the last argument
    other = sorted(at(OTHER, x["range"]["start"]) for x in away if x["uri"].endswith("other.py"))
    assert other == [OTHER.index("3)") + 1, OTHER.index("5)") + 1]
    # the client opens the file at the target (and says where its cursor went) and asks there: the model's
    # argument comes with the jump
    s.did_open(use, USE, 1, "python")
    await asyncio.sleep(0.05)
    s.did_move_cursor(use, first["range"]["start"]["line"], first["range"]["start"]["character"], 1)
    res = await next_edit_whole(s, use, 1, first["range"]["start"]["line"], first["range"]["start"]["character"])
    assert res["edits"] == [] and [j["note"] for j in res["jumps"]] == ["unit"]
    assert res["jumps"][0]["newText"] == ', "cm"'
    # writing it leaves nothing in this document; the origin's answer still names other.py's
    j = res["jumps"][0]["range"]["start"]
    s.did_edit(use, 2, [Change(', "cm"', (j["line"], j["character"], j["line"], j["character"]))])
    res = await s.next_edit(use, 2, j["line"], j["character"] + 6)
    assert res["edits"] == [] and "jumps" not in res
    assert [x["uri"].rsplit("/", 1)[-1] for x in res["elsewhere"]] == ["other.py", "other.py"]
    assert s.next_edits.computed == 1  # nothing computed again


async def test_a_removed_parameter_and_a_rename_reach_files_on_disk_and_a_changed_file_is_dropped(workspace):
    s, root = workspace
    geo, other = (root / "pkg/geo.py").as_uri(), (root / "pkg/other.py").as_uri()
    s.did_open(geo, GEO, 1, "python")
    await s.next_edit(geo, 1, 0, 0)
    s.did_edit(geo, 2, [Change("", (0, 10, 0, 13))])  # def area(w): h removed
    res = await next_edit_whole(s, geo, 2, 0, 10)
    removed = [(x["uri"].rsplit("/", 1)[-1], x["oldText"], x["newText"], x["version"]) for x in res["elsewhere"]]
    assert sorted(removed) == [("other.py", ", 3", "", None), ("other.py", ", 5", "", None),
                               ("use.py", ", r.h", "", None)]
    # other.py changes on disk before it is opened: its edits are not for that text
    changed = OTHER.replace("g.area(4, 5)", "g.area(4, 5) * 2")
    (root / "pkg/other.py").write_text(changed)
    s.did_open(other, changed, 1, "python")
    res = await s.next_edit(other, 1, 2, 0)
    assert res["edits"] == [] and all(not x["uri"].endswith("other.py") for x in res.get("elsewhere", []))
    s.did_close(other)
    # a function renamed at its def: its references in the files on disk
    s.did_edit(geo, 3, [Change("surface", (0, 4, 0, 8))])
    res = await next_edit_whole(s, geo, 3, 0, 11)
    renamed = sorted((x["uri"].rsplit("/", 1)[-1], x["oldText"], x["newText"]) for x in res["elsewhere"])
    assert renamed == [("other.py", "area", "surface")] * 2 + [("use.py", "area", "surface")] * 2
    # opened unchanged, the file's own references are its answer, applied one by one
    use = (root / "pkg/use.py").as_uri()
    s.did_open(use, USE, 1, "python")
    res = await s.next_edit(use, 1, 0, 0)
    text, v = USE, 1
    while res["edits"]:
        e = res["edits"][0]
        a, b = at(text, e["range"]["start"]), at(text, e["range"]["end"])
        r = e["range"]
        v += 1
        s.did_edit(use, v, [Change(e["newText"], (r["start"]["line"], r["start"]["character"],
                                                  r["end"]["line"], r["end"]["character"]))])
        text = text[:a] + e["newText"] + text[b:]
        res = await s.next_edit(use, v, 0, 0)
    assert text == USE.replace("area", "surface") == s.documents.get(use).text


async def test_a_rename_with_its_references_only_on_disk_answers_at_once_pending_then_names_them(workspace):
    """Nothing to offer in the renamed document itself: the request answers as soon as that is known
    (pending, no readyMs: nothing found yet) instead of waiting for the files on disk; asking again, as the
    clients do while pending, gets them."""
    s, root = workspace
    geo = (root / "pkg/geo.py").as_uri()
    s.did_open(geo, GEO, 1, "python")
    await s.next_edit(geo, 1, 0, 0)
    s.did_edit(geo, 2, [Change("surface", (0, 4, 0, 8))])
    first = await s.next_edit(geo, 2, 0, 11)
    assert first["edits"] == [] and first.get("pending") and "readyMs" not in first and "elsewhere" not in first
    res = await next_edit_whole(s, geo, 2, 0, 11)
    assert sorted(x["uri"].rsplit("/", 1)[-1] for x in res["elsewhere"]) == ["other.py"] * 2 + ["use.py"] * 2
    assert res["readyMs"] >= 0 and res["completeMs"] >= res["readyMs"]
