"""A function's own name found from the syntax tree alone (engine/edits/local.py), and its agreement with jedi."""

from __future__ import annotations

import ast
import inspect
import re
import time

import pytest

from engine.edits.local import enclosing_function, module_references, own_references
from engine.edits.rename import _completed, _Outline, jedi_references


def _refs(src: str, needle: str, name: str, nth: int = 0) -> list[str] | None:
    """own_references at the ``nth`` occurrence of ``needle`` (the name starts it), as 'line:col' strings."""
    at = [m.start() for m in re.finditer(re.escape(needle), src)][nth]
    got = own_references(ast.parse(src), src, at, name)
    if got is None:
        return None
    offs, span = got
    assert span[0] <= min(offs) and max(offs) < span[1]
    return [f"{src.count(chr(10), 0, o) + 1}:{o - src.rfind(chr(10), 0, o) - 1}" for o in offs]


def test_a_parameter_and_its_uses():
    src = "def f(value, count):\n    total = value * count\n    return value + total\n"
    assert _refs(src, "value", "value") == ["1:6", "2:12", "3:11"]
    assert _refs(src, "value", "value", nth=2) == ["1:6", "2:12", "3:11"]  # asked at a use: the same


def test_a_local_and_its_rebindings():
    src = "def f(x):\n    n = 0\n    for n in x:\n        n += 1\n    del n\n"
    assert _refs(src, "n = 0", "n") == ["2:4", "3:8", "4:8", "5:8"]


def test_the_innermost_function_through_blocks():
    src = ("class A:\n    def m(self, v):\n        if v:\n            try:\n                def g(v):\n"
           "                    return v\n            except E:\n                pass\n        return v\n")
    assert _refs(src, "v)", "v") is None  # the outer v: g binds its own v, a nested scope mentions it
    assert _refs(src, "v):\n                    return", "v") == ["5:22", "6:27"]  # g's own
    tree = ast.parse(src)
    fn = enclosing_function(tree, 6)
    assert fn is not None and fn.name == "g"
    assert enclosing_function(tree, 1) is None


@pytest.mark.parametrize("src, needle", [
    ("def f(v):\n    return [v for v in range(3)]\n", "v)"),  # a comprehension binds its own
    ("def f(v):\n    return lambda v: v\n", "v)"),  # a lambda's parameter
    ("def f(v):\n    def g():\n        v = 2\n        return v\n    return g, v\n", "v)"),  # g's own local
    ("def f(v):\n    def g():\n        nonlocal v\n        v += 1\n    return g\n", "v)"),  # nonlocal
    ("def f(v):\n    def g():\n        global v\n        return v\n    return g\n", "v)"),  # the module's
    ("def f(v):\n    class C:\n        v = 1\n    return C, v\n", "v)"),  # a class attribute
    ("def f():\n    global v\n    v = 1\n", "v = 1"),  # declared global
    ("def f():\n    return v\n", "v\n"),  # only read: another scope's name
    ("def f(v):\n    return v\n\nf(v=2)\n", "v)"),  # passed by keyword to a call of its spelling
    ("class A:\n    def __init__(self, v):\n        self.v = v\n\nx = A(\n    v=1)\n", "v)"),  # its class's
    ("def f(v):\n    return v\n\n@f(v=2)\ndef g():\n    pass\n", "v)"),  # in a decorator
    ("class A:\n    def __init__(self, v):\n        self.v = v\n\n\nclass B:\n    make = A\n\n    def m(self):\n"
     "        return self.make(v=1)\n", "v)"),  # a class attribute holding the class: jedi follows it
    ("def f(v):\n    try:\n        pass\n    except E as v:\n        pass\n", "v)"),  # a binding without position
    ("def f(v):\n    import os as v\n", "v)"),
    ("def f(v=v):\n    return v\n", "v="),  # the default is the enclosing scope's v
    ("v = 1\nprint(v)\n", "v = 1"),  # module level: jedi's business
])
def test_what_the_tree_leaves_to_jedi(src, needle):
    assert _refs(src, needle, "v") is None


def test_nested_scopes_that_only_read_it_read_the_functions():
    src = ("def f(v, w):\n    g = lambda: v + 1\n    def h(x=v):\n        return [v * i for i in x]\n"
           "    class C:\n        k = v\n    return g, h, C, v\n")
    assert _refs(src, "v, w", "v") == ["1:6", "2:16", "3:12", "4:16", "6:12", "7:20"]
    assert _refs(src, "v + 1", "v") == _refs(src, "v, w", "v")  # asked in the lambda: the same
    assert _refs(src, "w)", "w") == ["1:9"]


def test_keywords_of_builtins_and_defaults_are_not_its_references():
    src = "def f(v):\n    return dict(v=v, w=max(v=1))\n\ndef k(v=None):\n    pass\n# f(v=3) in a comment\n"
    assert _refs(src, "v)", "v") is None  # the comment's "f(v=" lies in no statement: not guessed
    src = src.replace("# f(v=3) in a comment\n", "")
    assert _refs(src, "v)", "v") == ["1:6", "2:18"]
    assert _refs(src.replace("dict(", "g("), "v)", "v") is None  # g may be f under another name
    assert _refs(src + "dict = f\n", "v)", "v") is None  # a builtin's name the module binds itself


def test_offsets_are_characters_after_non_ascii_text():
    src = 'def f(v):\n    s = "é→" + v\n    return s\n'
    assert _refs(src, "s = ", "s") == ["2:4", "3:11"]
    offs, _ = own_references(ast.parse(src), src, src.index("s = "), "s")
    assert all(src[o] == "s" for o in offs)


@pytest.mark.parametrize("module", ["ftplib", "smtplib"])
def test_the_tree_agrees_with_jedi_on_real_code(module, analyser):
    # the parameters and first locals of 30 functions in two standard-library modules the tree answers for: the same references
    # jedi finds (asked as rename.py asks it, with the leftover re-asks)
    mod = __import__(module)
    path = inspect.getsourcefile(mod)
    assert path is not None
    text = open(path, encoding="utf-8").read()
    tree = ast.parse(text)
    outline = _Outline(text, tree)
    lines = [0] + [m.end() for m in re.finditer("\n", text)]
    answered = 0
    for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)][:30]:
        params = [(a.arg, a.lineno, a.col_offset) for a in fn.args.args if a.arg != "self"]
        stores = [(n.id, n.lineno, n.col_offset) for n in ast.walk(fn)
                  if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
        for name, lineno, col in params + stores[:2]:
            site = lines[lineno - 1] + col
            got = own_references(tree, text, site, name)
            if got is None:
                continue
            answered += 1
            refs = jedi_references(text, site, path=path, analyser=analyser, deadline=time.monotonic() + 30)
            assert refs, (fn.name, name)
            refs = _completed(text, site, name, refs, outline, path, analyser, time.monotonic() + 30)
            assert sorted(off for off, _ in refs) == got[0], (fn.name, name, lineno)
    assert answered >= 25


def test_the_outline_finds_lambdas_and_defs_without_walking_data():
    src = ("import os\nDATA = [(1, 'a'), (2, 'b')]\nf = (\n    lambda x: x + 1\n)\n"
           "def g(y):\n    from sys import path\n    return sorted(y, key=lambda z: -z)\n")
    o = _Outline(src, ast.parse(src))
    starts = sorted(src.count("\n", 0, a) + 1 for a, _ in o.functions)
    assert starts == [4, 6, 8]  # the lambda on its own line, g, the lambda in g's call
    assert o.imports == {1, 7}


def test_an_edit_after_a_defs_closed_parentheses_is_not_in_its_parameters():
    from engine.edits.signature import _in_parameters

    src = "def f(a, b=(1, 2)) -> int:\n    return g(a,\n             b)\n"
    assert _in_parameters(src, src.index("b="))
    assert not _in_parameters(src, src.index("b)"))  # a call's argument below: f's "(" closed before it
    assert not _in_parameters(src, src.index("int"))


def _mod(src: str, needle: str, name: str, nth: int = 0) -> list[str] | None:
    at = [m.start() for m in re.finditer(re.escape(needle), src)][nth]
    got = module_references(ast.parse(src), src, at, name)
    return None if got is None else [f"{src.count(chr(10), 0, o) + 1}:{o - src.rfind(chr(10), 0, o) - 1}" for o in got]


def test_a_modules_function_and_its_uses():
    src = ("import os\n\n\n@cache\ndef scale(x):\n    return x * 2\n\n\nclass A:\n    def m(self):\n"
           "        return scale(self.v) + [scale(i) for i in range(3)][0]\n\n\nY = scale(3)\nZ = obj.scale(4)\n")
    want = ["5:4", "11:15", "11:32", "14:4"]  # the def, the calls in a method and a comprehension, the module's
    assert _mod(src, "scale(x)", "scale") == want
    assert _mod(src, "scale(3)", "scale") == want  # asked at a use: the same; obj.scale is an attribute


@pytest.mark.parametrize("src", [
    "def f():\n    pass\n\n\nf = wrap(f)\n",  # bound again at module level
    "def f():\n    pass\n\n\ndef g(f):\n    return f()\n",  # a parameter shadows it
    "def f():\n    pass\n\n\ndef g():\n    global f\n    f = 1\n",  # rebound through global
    "try:\n    from x import f\nexcept ImportError:\n    def f():\n        pass\n",  # two bindings, one a def in a block
    "def f():\n    pass\n\n\nclass A:\n    f = staticmethod(f)\n",  # a class binds it
])
def test_what_the_tree_leaves_to_jedi_at_module_level(src):
    assert _mod(src, "f", "f") is None


def test_the_module_walk_and_jedi_agree_on_a_real_module(analyser):
    # every module-level function of ftplib the tree answers for: the same references jedi finds in the file
    import ftplib

    path = inspect.getsourcefile(ftplib)
    assert path is not None
    text = open(path, encoding="utf-8").read()
    tree = ast.parse(text)
    answered = 0
    for st in tree.body:
        if not isinstance(st, ast.FunctionDef):
            continue
        site = re.compile(rf"def\s+({st.name})\b").search(text).start(1)
        got = module_references(tree, text, site, st.name)
        if got is None:
            continue
        answered += 1
        refs = jedi_references(text, site, path=path, analyser=analyser, deadline=time.monotonic() + 30)
        assert refs is not None
        assert sorted(off for off, _ in refs) == got, st.name
    assert answered >= 5


def test_a_keyword_to_another_modules_function_is_not_its_reference():
    src = ("import functools\n\ndef wraps(wrapped, updated=()):\n    return functools.partial(wrapped, updated=updated)\n")
    assert _refs(src, "updated=()", "updated") == ["3:19", "4:46"]
    # the function's own name through the module (a package re-exporting it), a module name rebound, a class's
    # attribute: jedi's business
    assert _refs(src.replace("functools.partial", "functools.wraps"), "updated=()", "updated") is None
    assert _refs(src + "functools = object()\n", "updated=()", "updated") is None
    assert _refs(src.replace("import functools\n", "from x import functools\n"), "updated=()", "updated") is None
    assert _refs(src + "class functools:\n    pass\n", "updated=()", "updated") is None
