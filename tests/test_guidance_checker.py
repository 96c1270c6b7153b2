"""Names in a suggestion that do not exist (engine/guidance/checker.py), through real jedi."""

from engine.guidance.checker import check_suggestion

SRC = '''import os
import collections


class Box:
    def __init__(self):
        self.width = 1

    def area(self):
        return self.width * self.heigth


def make(size, *, key=None):
    return size


def use(obj):
    d = collections.OrderedDict()
    d.move_to_end(1)
    total = [n for n in range(3)]
    return obj.anything + os.path.joinn("a") + make(1, key=2, nokey=3) + undefined_name + len(total)
'''


def span(src, start_text, end_text="\n"):
    s = src.index(start_text)
    return s, src.index(end_text, s)


def test_a_misspelt_attribute(tmp_path):
    s, e = span(SRC, "return self.width")
    c = check_suggestion(SRC, s, e, path=str(tmp_path / "a.py"))
    assert c is not None and c.bad
    assert [(u.name, u.kind) for u in c.unresolved] == [("heigth", "attribute")]
    assert SRC[c.unresolved[0].offset:].startswith("heigth")
    assert c.checked == 4  # self, width, self, heigth


def test_names_attributes_keyword_arguments_and_unknown_receivers(tmp_path):
    s, e = SRC.index("    d = collections"), len(SRC)
    c = check_suggestion(SRC, s, e, path=str(tmp_path / "b.py"))
    assert c is not None
    got = {(u.name, u.kind) for u in c.unresolved}
    assert got == {("joinn", "attribute"), ("nokey", "keyword_argument"), ("undefined_name", "name")}
    assert c.unknown == 1  # obj.anything: obj's type is not known
    # defined in the span (d, n, total) are not references; move_to_end, key, len, range exist


def test_a_valid_suggestion_is_not_bad(tmp_path):
    src = SRC.replace("self.heigth", "self.width")
    s, e = span(src, "return self.width")
    c = check_suggestion(src, s, e, path=str(tmp_path / "c.py"))
    assert c is not None and not c.bad and c.checked == 4 and c.unknown == 0


def test_only_the_span_is_checked(tmp_path):
    s, e = span(SRC, "def make")  # the line "def make(size, *, key=None):" defines only
    c = check_suggestion(SRC, s, e, path=str(tmp_path / "d.py"))
    assert c is not None and c.checked == 0 and not c.bad


def test_imports_the_environment_does_not_have(tmp_path):
    src = "from os import pathx, getcwd\nimport nosuchmodule_zz\nimport os.path as p\n"
    c = check_suggestion(src, 0, len(src), path=str(tmp_path / "e.py"))
    assert c is not None
    assert {(u.name, u.kind) for u in c.unresolved} == {("pathx", "import"), ("nosuchmodule_zz", "import")}


def test_a_broken_file_does_not_raise(tmp_path):
    src = "def f(:\n    return obj.\n"
    c = check_suggestion(src, 0, len(src), path=str(tmp_path / "f.py"))
    assert c is not None and "obj" in {u.name for u in c.unresolved}  # parso recovers; obj is undefined
