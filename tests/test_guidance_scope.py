"""The names-in-scope question of a generation (engine/guidance/scope.py) and the decode loop's pure parts of
the monitor (engine/decoding/monitored.py)."""

import jedi
import numpy as np

from engine.decoding.monitored import constrained_ids
from engine.guidance.scope import bound_names, scope_question
from engine.guidance.service import is_python, strip_heal

METHOD = '''class A:
    def get(self, name, default=None):
        return self.x

    def other(self):
        pass
'''


def test_scope_question_is_the_same_for_every_keystroke_on_the_line():
    i = METHOD.index("self.x")
    a = scope_question(METHOD[:i], METHOD[i:])
    b = scope_question(METHOD[:i + 5], METHOD[i + 5:])
    assert a == b
    source, offset = a
    assert source[offset:].startswith("pass\n\n    def other")


def test_scope_question_keeps_the_last_line_of_a_body_in_its_function():
    i = METHOD.index("self.x")
    source, offset = scope_question(METHOD[:i], METHOD[i:])
    line = source[:offset].count("\n") + 1
    col = offset - (source.rfind("\n", 0, offset) + 1)
    names = {c.name for c in jedi.Script(source).complete(line, col)}
    assert {"self", "name", "default"} <= names


def test_bound_names_of_comprehensions_lambdas_walrus_and_assignments():
    assert set(bound_names("total = sum(v for k, v in items if (n := len(k)))")) >= {"total", "k", "v", "n"}
    assert set(bound_names("key=lambda item, *rest: item")) >= {"item", "rest"}
    assert set(bound_names("with open(p) as fh")) == {"fh"}
    assert "x" not in bound_names("if x == 1")


def test_constrained_ids_intersect_healing_and_drop_an_empty_intersection():
    mask = np.zeros(10, dtype=bool)
    mask[[2, 3, 5]] = True
    assert constrained_ids(None, np.asarray([1, 2])) is None
    assert constrained_ids(mask, None).tolist() == [2, 3, 5]
    assert constrained_ids(mask, np.asarray([3, 7])).tolist() == [3]
    assert constrained_ids(mask, np.asarray([7, 8])) is None  # healing alone: the monitor has no opinion


def test_python_only_and_heal_bytes_come_off_the_prefix():
    assert is_python("python", None) and not is_python("rust", "a.py")
    assert is_python(None, "a.py") and not is_python(None, "a.ts")
    assert strip_heal("x = os.pa", b".pa") == "x = os"
    assert strip_heal("x = os", b"zz") == "x = os"


def test_the_analyser_reports_idle_once_its_questions_are_answered():
    import time

    from engine.guidance.jedi_analyser import JediAnalyser

    an = JediAnalyser()
    try:
        src = "import os\nos."
        an.names_at(src, len(src), time.monotonic())  # asked, not waited for
        assert an.idle(timeout=120)
        got = an.names_at(src, len(src), time.monotonic())  # now a cache hit, without waiting
        assert got is not None and "path" in got.names
    finally:
        an.close()


def test_a_workspace_of_ten_thousand_files_answers_by_the_deadline(tmp_path):
    """Every question returns by its deadline, whatever jedi has to read (here a root of 10,000 modules and
    a file importing from it); a late answer lands in the cache for the next step."""
    import time

    from engine.guidance.jedi_analyser import JediAnalyser

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for i in range(10_000):
        (pkg / f"m{i}.py").write_text(f"def f{i}(x):\n    return x\n")
    src = "from pkg import m42\nfrom pkg.m7 import f7\n\n\ndef g():\n    return m42."
    an = JediAnalyser()
    an.add_root(str(tmp_path))
    try:
        for offset in (len(src), src.index("m42.") + 4):
            t0 = time.monotonic()
            an.names_at(src, offset, t0 + 0.05, path=str(tmp_path / "main.py"), version=1)
            assert time.monotonic() - t0 < 0.05 + 0.5  # the deadline, plus a loaded machine's slack
        assert an.idle(timeout=120)
        got = an.names_at(src, len(src), time.monotonic(), path=str(tmp_path / "main.py"), version=1)
        assert got is not None and "f42" in got.names
    finally:
        an.close()
