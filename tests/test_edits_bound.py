"""engine/edits/bound.py: the model's argument checked against the names bound at its call (issue 50): a name
no scope binds there means NameError, so no text, unless it is the new parameter's own name (threaded
through), which becomes the caller's qualified use of that name when it has one. Pure functions on real
syntax trees; fill.answer's use of it at the end."""

from __future__ import annotations

import ast

from engine.edits.bound import bound_at, checked, own, qualified, read_names
from engine.edits.common import Fill, NextEdit
from engine.edits.fill import FLOOR, OWN_NAME_CONFIDENCE, answer

SRC = '''import os
from helpers import load as loader

LIMIT = 3


class Plot:
    kind = "line"

    def __init__(self, request):
        self.fig = None
        self.request = request

    def draw(self, request, params, ax=None):
        cfg = request.config
        show(ax, params['encoding'])
        show(ax)
        return [p for p in params]

    def other(self):
        render(self)


def top(n, *rest, **opts):
    for i in range(n):
        total = i
    show(n)
'''


def _line(src: str, text: str) -> int:
    return src.split("\n").index(text) + 1


TREE = ast.parse(SRC)
IN_DRAW = _line(SRC, "        show(ax)")
IN_OTHER = _line(SRC, "        render(self)")
IN_TOP = _line(SRC, "    show(n)")


def test_the_names_an_argument_reads_are_those_it_does_not_bind_itself():
    assert sorted(read_names("len(items) + offset") or []) == ["items", "len", "offset"]
    assert read_names("lambda q: q + base") == ["base"]
    assert sorted(read_names("[z * k for z in zs]") or []) == ["k", "zs"]
    assert read_names("name=value") == ["value"]
    assert read_names("x.attr['k']") == ["x"]
    assert read_names("f(") is None


def test_bound_names_follow_pythons_scopes():
    draw = bound_at(TREE, IN_DRAW)
    assert draw is not None
    # the method's own and every other function's in the same outermost def, the module's, the builtins
    assert {"request", "params", "ax", "cfg", "p", "self", "os", "loader", "LIMIT", "Plot", "top", "len"} <= draw
    assert "kind" not in draw  # a class attribute is not a method's name
    assert "total" not in draw and "i" not in draw and "n" not in draw  # another function's locals
    top = bound_at(TREE, IN_TOP)
    assert top is not None and {"n", "rest", "opts", "i", "total"} <= top and "request" not in top
    in_class = bound_at(TREE, _line(SRC, '    kind = "line"'))
    assert in_class is not None and "kind" in in_class  # a class body reads its own names


def test_a_module_whose_names_its_tree_does_not_show_is_not_judged():
    assert bound_at(ast.parse("from m import *\n\ndef f():\n    g(x)\n"), 4) is None
    assert bound_at(ast.parse("globals()['x'] = 1\n\ndef f():\n    g(x)\n"), 4) is None
    assert checked("x", ast.parse("from m import *\n\ndef f():\n    g(x)\n"), 4) == "x"


def test_an_argument_of_bound_names_is_kept_as_it_is():
    for arg in ("request", "params['encoding']", "len(params)", "os.path.sep", "LIMIT", "ax=ax", "self.fig",
                "lambda q: q + LIMIT", "None"):
        assert checked(arg, TREE, IN_DRAW) == arg


def test_an_unbound_name_means_no_text():
    assert checked("missing", TREE, IN_TOP) == ""
    assert checked("len(missing)", TREE, IN_DRAW) == ""
    assert checked("undefined_helper(request)", TREE, IN_DRAW) == ""
    assert checked("kind", TREE, IN_DRAW) == ""  # a class attribute read bare in a method: NameError
    assert checked("request", TREE, IN_TOP) == ""  # the other function's parameter


def test_the_new_parameters_own_name_is_threaded_through_or_read_qualified():
    # unbound, but the parameter's name: the caller gets the same parameter next, as real changes do
    assert checked("verbose", TREE, IN_DRAW, "verbose") == "verbose"
    assert checked("verbose=verbose", TREE, IN_DRAW, "verbose") == "verbose=verbose"
    assert checked("verbose", TREE, IN_DRAW, "quiet") == ""  # another name unbound: NameError
    assert checked("not verbose", TREE, IN_DRAW, "verbose") == ""  # (only the bare name)
    # the caller reads a value of that name qualified: that is the argument
    assert qualified(TREE, IN_DRAW, "config") == "request.config"
    assert checked("config", TREE, IN_DRAW, "config") == "request.config"
    assert checked("encoding", TREE, IN_DRAW, "encoding") == "params['encoding']"
    assert checked("config=config", TREE, IN_DRAW, "config") == "config=request.config"
    assert checked("config", TREE, IN_DRAW) == ""  # not the parameter's name
    assert qualified(TREE, IN_TOP, "config") is None  # top reads no x.config
    # a method called on an object is no value of that name
    calls = ast.parse("def f(o):\n    o.config()\n    g()\n")
    assert qualified(calls, 3, "config") is None


def test_the_qualified_use_nearest_above_the_call_wins():
    src = "def f(a, b):\n    x = a.size\n    y = b.size\n    g()\n    z = a.size\n"
    assert qualified(ast.parse(src), 4, "size") == "b.size"
    assert qualified(ast.parse(src), 1, "size") == "a.size"  # none above: the first below


def test_fill_answer_checks_the_argument_against_the_document():
    at = SRC.index("show(ax)") + len("show(ax")
    jump = NextEdit(at, at, "", "", "signature", 0.9, "config", Fill(", "))  # (note: the parameter's name)
    done = answer(jump, "config)", text=SRC)
    assert done.fill is not None and done.fill.text == "request.config" and done.fill.confidence == 1.0
    gone = answer(jump, "nowhere)", text=SRC)
    assert gone.fill is not None and gone.fill.text == "" and gone.fill.confidence == 0.0
    assert answer(jump, "nowhere)").fill.text == "nowhere"  # type: ignore[union-attr]  # (no document: unchecked)
    broken = SRC + "def (\n"  # a document that does not parse is not judged
    assert answer(jump, "nowhere)", text=broken).fill.text == "nowhere"  # type: ignore[union-attr]


def test_own_names_are_the_calling_functions_not_the_modules_nor_a_nested_scopes():
    assert all(own(TREE, IN_DRAW, n) for n in ("self", "request", "params", "ax", "cfg"))
    assert not own(TREE, IN_DRAW, "p")  # the comprehension's
    assert not own(TREE, IN_DRAW, "LIMIT") and not own(TREE, IN_DRAW, "os")  # the module's
    assert not own(TREE, IN_DRAW, "draw")  # (its own name is the class's)
    assert all(own(TREE, IN_TOP, n) for n in ("n", "rest", "opts", "i", "total"))
    assert not own(TREE, _line(SRC, "LIMIT = 3"), "LIMIT")  # at module level: none


def test_where_the_model_is_unsure_the_callers_own_name_of_the_parameter_is_the_argument():
    at = SRC.index("show(ax)") + len("show(ax")
    jump = NextEdit(at, at, "", "", "signature", 0.9, "params", Fill(", "))
    for raw, doubts in ((")", ()), ("params[0])", ((0, FLOOR / 2),)), ("nowhere)", ())):
        done = answer(jump, raw, doubts, text=SRC)
        assert done.fill is not None and (done.fill.text, done.fill.confidence) == ("params", OWN_NAME_CONFIDENCE)
    sure = answer(jump, "params[1:])", text=SRC)  # the model's own answer at or above the floor stands
    assert sure.fill is not None and sure.fill.text == "params[1:]"
    other = NextEdit(at, at, "", "", "signature", 0.9, "width", Fill(", "))  # no such name in the caller
    assert answer(other, ")", text=SRC).fill.text == ""  # type: ignore[union-attr]
    assert answer(jump, ")").fill.text == ""  # type: ignore[union-attr]  # (no document: the model alone)
    # by keyword where the call needs it: the slot writes `params=`, the argument is the name
    kw = NextEdit(at, at, "", "", "signature", 0.9, "params", Fill(", ", keyword="params"))
    done = answer(kw, ")", text=SRC)
    assert done.fill is not None and done.fill.insert == ", params=params"
