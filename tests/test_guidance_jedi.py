"""Python names through real jedi (engine/guidance/jedi_analyser.py): what it answers, its cache, its
deadline, its limits and its failures."""

import sys
import time
from pathlib import Path

import pytest

from engine.guidance.jedi_analyser import JediAnalyser, line_col

SRC = '''import os


class Box:
    def __init__(self, width):
        self.width = width
        self.height = 2

    def area(self):
        return self.width * self.height


def make(size, *, key=None):
    box = Box(size)
    total = 0
    return box.
'''
AT_MEMBER = SRC.index("return box.") + len("return box.")
LONG = 60.0  # seconds: a deadline that is never the reason a test's answer is missing


@pytest.fixture
def an():
    a = JediAnalyser()
    yield a
    a.close()


def names(c):
    assert c is not None
    return set(c.names)


def test_line_col():
    assert line_col("ab\ncd", 0) == (1, 0) and line_col("ab\ncd", 4) == (2, 1) and line_col("ab\n", 3) == (2, 0)


def test_members_of_an_instance(an, tmp_path):
    c = an.names_at(SRC, AT_MEMBER, time.monotonic() + LONG, path=str(tmp_path / "m.py"))
    got = names(c)
    assert {"width", "height", "area"} <= got and "depth" not in got and "make" not in got
    kinds = {x.name: x.kind for x in c.items}
    assert kinds["area"] == "function" and c.partial == ""


def test_names_in_scope_keywords_and_later_definitions(an, tmp_path):
    src = SRC.replace("return box.", "return ") + "\n\ndef later():\n    pass\n"
    at = src.rindex("return ") + len("return ")
    got = names(an.names_at(src, at, time.monotonic() + LONG, path=str(tmp_path / "n.py")))
    assert {"box", "total", "size", "key", "Box", "os", "len", "isinstance", "later"} <= got
    assert {"None", "not", "lambda"} <= got  # keywords that start an expression
    assert "width" not in got


def test_keyword_arguments_are_names(an, tmp_path):
    src = SRC.replace("return box.", "return make(1, ")
    at = src.rindex("make(1, ") + len("make(1, ")
    c = an.names_at(src, at, time.monotonic() + LONG, path=str(tmp_path / "k.py"))
    assert "key=" in names(c) and {x.name: x.kind for x in c.items}["key="] == "param"


def test_asked_at_a_name_start_the_rest_of_the_name_does_not_matter(an, tmp_path):
    src = SRC.replace("return box.", "return box.wid")
    got = names(an.names_at(src, AT_MEMBER, time.monotonic() + LONG, path=str(tmp_path / "w.py")))
    assert {"width", "area"} <= got


def test_project_imports_a_sibling_module(an, tmp_path):
    (tmp_path / "helpers.py").write_text("def shout(s):\n    return s.upper()\n\nLIMIT = 3\n")
    an.add_root(str(tmp_path))
    src = "import helpers\n\nhelpers."
    got = names(an.names_at(src, len(src), time.monotonic() + LONG, path=str(tmp_path / "main.py")))
    assert {"shout", "LIMIT"} <= got
    src2 = "import helpers\nx = helpers."
    an.names_at(src2, len(src2), time.monotonic() + LONG, path=str(tmp_path / "sub" / "other.py"))
    assert list(an._projects) == [str(tmp_path)]  # one project for the root, both files under it


def test_cache_answers_the_same_question(an, tmp_path):
    p = str(tmp_path / "c.py")
    first = an.names_at(SRC, AT_MEMBER, time.monotonic() + LONG, path=p, version=3)
    t0 = time.perf_counter()
    again = an.names_at(SRC, AT_MEMBER, time.monotonic() + LONG, path=p, version=3)
    assert again is first and an.stats["cached"] == 1 and time.perf_counter() - t0 < 0.05
    other = an.names_at(SRC, AT_MEMBER, time.monotonic() + LONG, path=p, version=4)
    assert other is not first and names(other) == names(first)


def test_cache_is_bounded(tmp_path):
    a = JediAnalyser(cache_size=3)
    try:
        for i in range(5):
            src = SRC + f"\nvalue_{i} = 1\n"
            assert a.names_at(src, AT_MEMBER, time.monotonic() + LONG, path=str(tmp_path / "b.py")) is not None
        assert len(a._cache) == 3 and len(a._scripts) <= 2
    finally:
        a.close()


def test_past_the_deadline_none_then_the_late_answer_is_cached(an, tmp_path):
    p = str(tmp_path / "late.py")
    src = SRC + "\n# a text jedi has not seen\n"
    t0 = time.perf_counter()
    assert an.names_at(src, AT_MEMBER, time.monotonic() - 1.0, path=p) is None
    assert time.perf_counter() - t0 < 0.05 and an.stats["late"] == 1
    got = an.names_at(src, AT_MEMBER, time.monotonic() + LONG, path=p)  # the same question: waits for it
    assert "width" in names(got)
    assert an.names_at(src, AT_MEMBER, time.monotonic() - 1.0, path=p) is got  # now from the cache


def test_huge_file_is_skipped(tmp_path):
    a = JediAnalyser(max_chars=10_000)
    try:
        src = "x = 1\n" * 3000 + SRC
        t0 = time.perf_counter()
        assert a.names_at(src, len(src) - 1, time.monotonic() + LONG, path=str(tmp_path / "h.py")) is None
        assert a.stats["skipped"] == 1 and time.perf_counter() - t0 < 0.05
    finally:
        a.close()


def test_broken_files_and_bad_offsets_never_raise(an, tmp_path):
    p = str(tmp_path / "broken.py")
    for src in ("def f(:\n    x = obj.\n", "class (:\n  ]]]\nself.", "\x00\x01 = .", ""):
        c = an.names_at(src, len(src), time.monotonic() + LONG, path=p)
        assert c is None or isinstance(c.names, tuple)
    assert an.names_at("x = 1", 99, time.monotonic() + LONG) is None
    assert an.names_at("x = 1", -1, time.monotonic() + LONG) is None


def test_missing_environment_is_no_candidates(tmp_path):
    a = JediAnalyser(environment=str(tmp_path / "no-such-venv"))
    try:
        assert a.names_at(SRC, AT_MEMBER, time.monotonic() + LONG, path=str(tmp_path / "e.py")) is None
        good = tmp_path / "good"
        good.mkdir()
        a.add_root(str(good), environment=sys.executable)  # a root with a working environment
        assert "width" in names(a.names_at(SRC, AT_MEMBER, time.monotonic() + LONG, path=str(good / "e.py")))
    finally:
        a.close()


def test_a_5000_line_module(an, tmp_path):
    import _pydecimal

    lines = open(_pydecimal.__file__, encoding="utf-8").read().split("\n")[:5000]
    at_line = next(i for i in range(3900, 5000) if lines[i].startswith("        return "))
    lines.insert(at_line, "        probe = self.")
    src = "\n".join(lines)
    at = sum(len(x) + 1 for x in lines[:at_line]) + len(lines[at_line])
    p = str(tmp_path / "big.py")
    t0 = time.perf_counter()
    first = an.names_at(src, at, time.monotonic() + LONG, path=p)
    cold = time.perf_counter() - t0
    lines[at_line] = "        probe2 = self."  # an edit: jedi re-reads the module (parso's diff parser)
    src2 = "\n".join(lines)
    t0 = time.perf_counter()
    second = an.names_at(src2, at + 1, time.monotonic() + LONG, path=p)
    warm = time.perf_counter() - t0
    print(f"jedi on a 5,000-line module: first {cold * 1000:.0f} ms, after an edit {warm * 1000:.0f} ms")
    # self is a decimal.Context there
    assert {"clear_flags", "create_decimal", "Etiny", "divide"} <= names(first) and "_exp" not in names(first)
    assert names(first) == names(second)
    assert warm < 5.0


def test_a_kept_script_never_answers_from_a_newer_text_of_its_file(an, tmp_path):
    """parso's diff parser updates the cached tree of a path in place when another text of that path is
    parsed; a Script kept for the older text then reads the newer one. Asked again about the older text
    (another position: not the answer cache), the analyser must answer from that text."""
    p = str(tmp_path / "edited.py")
    old = "class Box:\n    def area(self):\n        pass\n\n\nb = Box()\nb.\nb.\n"
    new = "class Box:\n    def volume(self):\n        pass\n\n\nb = Box()\nb.\nb.\n"
    assert "area" in names(an.names_at(old, old.index("b.\n") + 2, time.monotonic() + LONG, path=p))
    assert "volume" in names(an.names_at(new, new.index("b.\n") + 2, time.monotonic() + LONG, path=p))
    again = names(an.names_at(old, old.rindex("b.\n") + 2, time.monotonic() + LONG, path=p))
    assert "area" in again and "volume" not in again


def test_after_jedis_first_answer_its_caches_leave_the_collectors_full_scans(an, tmp_path):
    import gc

    f = tmp_path / "m.py"
    f.write_text(SRC)
    assert an.names_at(SRC, AT_MEMBER, time.monotonic() + LONG, path=str(f)) is not None
    # builtins' and typeshed's objects, read for that answer, are frozen (jedi_analyser.freeze_once)
    assert gc.get_freeze_count() > 100_000


def test_a_forgotten_document_leaves_parsos_cache_and_the_others_stay(an, tmp_path):
    """A closed document's tree leaves parso's cache (every full collection of the heap scans what it keeps):
    the document asked about later is parsed again and answered as before; another stays cached."""
    from parso.cache import parser_cache

    a, b = str(tmp_path / "a.py"), str(tmp_path / "b.py")
    first = an.names_at(SRC, AT_MEMBER, time.monotonic() + LONG, path=a)
    an.names_at(SRC, AT_MEMBER, time.monotonic() + LONG, path=b)

    def cached(path: str) -> bool:
        return an.submit(lambda: any(Path(path) in by_path for by_path in list(parser_cache.values()))).result()

    assert cached(a) and cached(b)
    an.forget(a)
    assert not cached(a) and cached(b)
    assert an.names_at(SRC + "\n", AT_MEMBER, time.monotonic() + LONG, path=a).names == first.names
