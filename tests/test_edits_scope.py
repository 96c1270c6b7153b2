"""engine/edits/scope.py: the caller's own names in scope at a call site (jedi), and fill.py's prompt line for
those its window does not show."""

from __future__ import annotations

from engine.edits.common import Fill, NextEdit
from engine.edits.fill import def_line, fill_prompt
from engine.edits.scope import MAX_NAMES, names_in_scope, own_names
from engine.guidance.jedi_analyser import JediAnalyser

SRC = '''import os
LIMIT = 3


def helper(a, b):
    return a


class K:
    def run(self, request, n):
        cfg = request.config
        total = 0
        for item in range(n):
            total += item
        x = helper(1)
'''


def test_own_names_are_the_callers_bound_above_the_call_nearest_first():
    found = [("b=", "param", 5), ("cfg", "statement", 11), ("item", "statement", 13), ("LIMIT", "statement", 2),
             ("n", "param", 10), ("os", "module", 1), ("x", "statement", 15), ("total", "statement", 14),
             ("total", "statement", 12), ("__file__", "instance", None), ("path", "statement", None)]
    assert own_names(found, 15, 10) == ["total", "item", "cfg", "n"]
    assert own_names(found, 15, 1) == ["total", "item", "cfg", "n", "LIMIT"]  # module level: the module's
    assert len(own_names([(f"v{i}", "statement", i) for i in range(40)], 41, 1)) == MAX_NAMES


def test_jedi_gives_the_names_at_the_call(tmp_path):
    a = JediAnalyser()
    try:
        at = SRC.index("helper(1") + len("helper(1")
        names = names_in_scope(SRC, at, def_line(SRC, at), lead=", ", path=str(tmp_path / "k.py"), analyser=a,
                               wait_s=30)
    finally:
        a.close()
    assert def_line(SRC, at) == 10 and def_line(SRC, SRC.index("LIMIT")) == 1
    assert set(names) == {"self", "request", "n", "cfg", "total", "item"}


def test_the_prompt_names_those_the_window_does_not_show():
    src = "def run(request, n):\n    cfg = request.config\n" + "    pass\n" * 80 + "    go(cfg)\n"
    at = src.index("go(cfg") + len("go(cfg")
    jump = NextEdit(at, at, "", "", "signature", 0.9, note="unit", fill=Fill(", ", ""))
    prefix, _ = fill_prompt(src, jump, "def go(c, unit):", max_prefix=40, names=["cfg", "n", "request", "other"])
    # the caller's header shows its parameters; the window shows cfg: only "other" is news
    assert prefix.startswith("def go(c, unit):\n    ...\n\n\ndef run(request, n):\n    ...\n    # in scope: other\n")
    plain, _ = fill_prompt(src, jump, "def go(c, unit):", max_prefix=40)
    assert "# in scope" not in plain and plain.endswith("go(cfg, ")
