"""engine/edits/workspace.py: a rename's references in the other open documents, from their unsaved texts."""

from __future__ import annotations

import ast
import threading
import time

import pytest

from engine.edits import common
from engine.edits.exact import OpenDoc, apply_all, workspace_next_edits
from engine.edits.history import EditHistory
from engine.edits.ondisk import DiskSearch
from engine.edits.rename import new_script
from engine.edits.workspace import jedi_reads, occurrences
from engine.guidance.jedi_analyser import JediAnalyser

A = '''import os

LIMIT = 3


def helper(value, count=2):
    total = value * count
    return total


class Box:
    def __init__(self, width):
        self.width = width

    def area(self):
        return self.width * helper(self.width)
'''

B_DISK = '''from a import helper, Box
import a


def use(n):
    box = Box(n)
    return helper(box.width) + a.helper(1) + a.LIMIT
'''
# what the editor holds: one more use of helper, not saved, and a local of the same name
B_OPEN = B_DISK + '''

def shadow():
    helper = 3
    return helper


print(helper(5), os.path.join("x", "y"))
'''


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("ws")
    (root / "a.py").write_text(A)
    (root / "b.py").write_text(B_DISK)
    a = JediAnalyser()
    a.add_root(str(root))
    yield root, a
    a.close()


def _rename(src: str, at: int, old: str, new: str) -> EditHistory:
    h = EditHistory()
    h.open("a", src)
    h.change("a", at, at + len(old), new, now=0.0)
    return h


def _ask(ws, h: EditHistory, others: list[OpenDoc]):
    root, analyser = ws
    text = h.text("a")
    assert text is not None
    return workspace_next_edits(text, h.edits("a"), path=str(root / "a.py"), analyser=analyser,
                                deadline=time.monotonic() + 60, others=others)


def test_a_function_renamed_at_its_definition_offers_its_references_in_the_open_document(ws):
    root, _ = ws
    h = _rename(A, A.index("def helper") + 4, "helper", "assist")
    here, elsewhere = _ask(ws, h, [OpenDoc("B", str(root / "b.py"), B_OPEN)])
    assert [e.new_text for e in here] == ["assist"]  # the call in Box.area
    assert list(elsewhere) == ["B"]
    got = apply_all(B_OPEN, elsewhere["B"])
    # the import, the calls, the unsaved call at the end; not shadow()'s own local
    assert got == B_OPEN.replace("helper", "assist").replace("    assist = 3\n    return assist\n",
                                                             "    helper = 3\n    return helper\n")
    assert {e.source for e in elsewhere["B"]} == {"rename"}


def test_an_attribute_and_a_module_level_name_reach_the_other_document(ws):
    root, _ = ws
    at = A.index("self.width = width") + 5
    _, elsewhere = _ask(ws, _rename(A, at, "width", "size"), [OpenDoc("B", str(root / "b.py"), B_OPEN)])
    assert [(e.old_text, e.new_text) for e in elsewhere["B"]] == [("width", "size")]
    assert B_OPEN[elsewhere["B"][0].range_start - 4:elsewhere["B"][0].range_start] == "box."
    _, elsewhere = _ask(ws, _rename(A, A.index("LIMIT"), "LIMIT", "CAP"), [OpenDoc("B", str(root / "b.py"), B_OPEN)])
    assert apply_all(B_OPEN, elsewhere["B"]).count("a.CAP") == 1


def test_the_unsaved_text_of_the_renamed_document_is_what_jedi_reads(ws):
    # a.py in the editor has two more lines at the top than on disk: the definition's position jedi
    # compares with comes from the editor's text, so b's references are still found
    root, _ = ws
    a_open = "# unsaved\n# lines\n" + A
    h = _rename(a_open, a_open.index("def helper") + 4, "helper", "assist")
    _, elsewhere = _ask(ws, h, [OpenDoc("B", str(root / "b.py"), B_OPEN)])
    assert len(elsewhere.get("B", [])) == 4  # the import, three calls (jedi reading the disk would find none)


def test_nothing_elsewhere_for_a_local_a_clash_or_a_library_name(ws):
    root, _ = ws
    other = [OpenDoc("B", str(root / "b.py"), B_OPEN)]
    # a local of one function: nothing outside can name it
    at = A.index("total = value")
    assert _ask(ws, _rename(A, at, "total", "value_times_count"), other)[1] == {}
    # b already has the new name: left out
    assert _ask(ws, _rename(A, A.index("def helper") + 4, "helper", "shadow"), other)[1] == {}
    # os.path.join renamed at a use: its definition is the library's, not the user's
    src = A + "\n\nprint(os.path.join('a', 'b'))\n"
    h = _rename(src, src.index("join"), "join", "joined")
    assert _ask(ws, h, other)[1] == {}


def test_a_module_level_name_imported_under_another_name_renames_the_import_only(ws):
    root, _ = ws
    b = "from a import helper as h, LIMIT\n\n\nprint(h(1), LIMIT)\n"
    h = _rename(A, A.index("def helper") + 4, "helper", "assist")
    _, elsewhere = _ask(ws, h, [OpenDoc("B", str(root / "b.py"), b)])
    assert apply_all(b, elsewhere["B"]) == b.replace("import helper as", "import assist as")


def test_each_part_is_handed_over_as_found_the_renamed_document_first(ws):
    root, analyser = ws
    c = "from a import helper\n\nhelper(2)\n"
    (root / "c.py").write_text(c)
    h = _rename(A, A.index("def helper") + 4, "helper", "assist")
    got: list = []
    text = h.text("a")
    assert text is not None
    here, elsewhere = workspace_next_edits(text, h.edits("a"), path=str(root / "a.py"), analyser=analyser,
                                           deadline=time.monotonic() + 60,
                                           others=[OpenDoc("B", str(root / "b.py"), B_OPEN)],
                                           disk=DiskSearch((str(root),)), emit=lambda d, e: got.append((d, e)))
    # this document's first, then the open one, then the file on disk: the same edits as returned
    assert [d.key if d else None for d, _ in got] == [None, "B", (root / "c.py").as_uri()]
    assert got[0][1] == here and {d.key: e for d, e in got[1:]} == elsewhere


def test_jedi_reads_a_saved_text_itself_and_an_unsaved_one_is_parsed_first(ws):
    root, analyser = ws
    analyser.submit(new_script, analyser, B_DISK, str(root / "b.py")).result()
    assert jedi_reads(OpenDoc("B", str(root / "b.py"), B_DISK))
    assert not jedi_reads(OpenDoc("B", str(root / "b.py"), B_OPEN))  # unsaved
    assert not jedi_reads(OpenDoc("Z", str(root / "missing.py"), "x = 1\n"))
    # parso's cache holds another text of the file (an older unsaved one): that is what jedi would read
    analyser.submit(new_script, analyser, B_OPEN, str(root / "b.py")).result()
    assert not jedi_reads(OpenDoc("B", str(root / "b.py"), B_DISK))


def test_a_search_for_a_text_the_user_left_stops(ws):
    root, analyser = ws
    h = _rename(A, A.index("def helper") + 4, "helper", "assist")
    text = h.text("a")
    assert text is not None
    here, elsewhere = workspace_next_edits(text, h.edits("a"), path=str(root / "a.py"), analyser=analyser,
                                           deadline=time.monotonic() + 60,
                                           others=[OpenDoc("B", str(root / "b.py"), B_OPEN)],
                                           disk=DiskSearch((str(root),), cancelled=lambda: True))
    assert [e.new_text for e in here] == ["assist"] and elsewhere == {}


def test_the_call_sites_ask_jedi_only_where_the_name_is_called():
    text = "from a import helper\nx = helper\ny = helper (1) + obj.helper(\n2)  # helper(3)\ns = 'helper(4)'\n"
    assert len(occurrences(text, "helper")) == 4
    assert [text[o:o + 9] for o in occurrences(text, "helper", calls_only=True)] == ["helper (1", "helper(\n2"]


def test_every_parse_of_next_edits_runs_on_jedis_thread(monkeypatch):
    """Python 3.11's ast is not safe beside parso's on another thread: with an analyser set (the server sets
    its own), a parse asked on any other thread runs on jedi's worker, one asked there runs at once, and a
    SyntaxError comes back to the caller as it was."""
    threads: list[str] = []
    real = ast.parse

    def spy(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    a = JediAnalyser()
    monkeypatch.setattr(ast, "parse", spy)
    monkeypatch.setattr(common, "_parser", None)
    common.parse_on(a)
    try:
        assert common.parses("x = 1\n") and not common.parses("def (")
        assert a.submit(common.parses, "y = 2\n").result(timeout=10)  # already there: no hand-over (no deadlock)
        assert a.on_worker() is False
    finally:
        a.close()
    assert len(threads) == 3 and all(t.startswith("flint-jedi") for t in threads), threads


def test_a_text_equal_to_one_of_the_last_two_parsed_is_not_parsed_again(monkeypatch):
    calls: list[str] = []
    real = ast.parse
    monkeypatch.setattr(ast, "parse", lambda text, *a, **k: calls.append(text) or real(text, *a, **k))
    monkeypatch.setattr(common, "_parser", None)
    monkeypatch.setattr(common, "_last", [])
    before, after = "x = 1\n" * 3, "".join(["y = 1\n", "x = 1\n", "x = 1\n"])
    t1 = common.parse(before)
    assert common.parse(after) is not t1
    assert common.parse("".join(["x = 1\n"] * 3)) is t1  # equal, another object: the same tree
    common.parse(after)
    assert len(calls) == 2
    common.parse("z = 3\n")  # a third text: the oldest (before) goes
    common.parse(before)
    assert len(calls) == 4
