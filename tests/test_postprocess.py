"""Golden tests for engine/postprocess.py: document with a cursor (█), raw model text -> what is shown.

Each case is what a model really does at that spot (copies the rest of the line, runs past the block,
loops) and what the editor should get.
"""

from __future__ import annotations

import pytest

from engine.postprocess import (
    Suggestion,
    decide_mode,
    drop_repetition,
    limit_scope,
    normalize,
    opens_block,
    postprocess,
    prefix_state,
    scan,
)

CURSOR = "█"


def run(doc: str, raw: str, *, mode: str | None = None, max_lines: int = 8, truncated: bool = False):
    prefix, suffix = doc.split(CURSOR)
    line_prefix = prefix[prefix.rfind("\n") + 1:]
    line_suffix = suffix.split("\n", 1)[0]
    mode = mode or decide_mode(line_prefix, line_suffix)
    return postprocess(raw, prefix, suffix, mode=mode, max_lines=max_lines, truncated=truncated)


GOLDEN = [
    # --- single line when text sits right of the cursor ---------------------------------------------------
    ("auto-closed paren supplied by the model is cut",
     'print(█)\n', '"hello")', Suggestion('"hello"')),
    ("auto-closed quote and paren supplied by the model are cut",
     'print("█")\n', 'hello")', Suggestion("hello")),
    ("model closes the call and goes on: replace the auto-closed paren",
     "if check(█)\n    pass\n", "x):", Suggestion("x):", replace=1)),
    ("model does not close: the auto-closed paren stays",
     "foo(█)\n", "a, b", Suggestion("a, b")),
    ("model copies the rest of the line: cut",
     "x = compute(█, y)\n", "a, y)", Suggestion("a")),
    ("partial overlap with the rest of the line is cut",
     "total = add(█, 2, 3)\n", "1, 2", Suggestion("1")),
    ("single line: the next lines go",
     "value = █\n", "42\nprint(value)\n", Suggestion("42")),
    ("a stray closer ends the suggestion",
     "x = 1 + █\n", "2) * 3", Suggestion("2")),
    ("mismatched closer ends the suggestion",
     "items = [1, █\n", "2, 3)", Suggestion("2, 3")),
    ("closing a bracket opened earlier on the line is fine",
     "result = max(a, █\n", "b)", Suggestion("b)")),
    ("closing a bracket opened lines above is fine",
     "call(\n    first,\n    █\n", "second)", Suggestion("second)")),
    ("model closes what the auto-closed paren closes, twice: cut at its closer",
     "f(g(█))\n", "x)))", Suggestion("x")),
    # --- multi-line when the cursor opens a block or an empty line ----------------------------------------
    ("function body, stops when indentation leaves the block",
     "def add(a, b):█\n", "\n    return a + b\n\ndef sub(a, b):\n    return a - b",
     Suggestion("\n    return a + b")),
    ("empty line in a block: stops at the dedent",
     "def f(xs):\n    total = 0\n    █\n", "for x in xs:\n        total += x\n    return total\nprint(f)",
     Suggestion("for x in xs:\n        total += x\n    return total")),
    ("stops before repeating the next line of the document",
     "def f(xs):\n    total = 0\n    █\n    return total\n", "for x in xs:\n        total += x\n    return total",
     Suggestion("for x in xs:\n        total += x")),
    ("C block: body plus its closing brace at the opener's indentation",
     "int main() {█\n", "\n    return 0;\n}\nint other() {", Suggestion("\n    return 0;\n}")),
    ("C block with the brace already below: the model's brace is cut",
     "int main() {\n    █\n}\n", "return 0;\n}", Suggestion("return 0;")),
    ("JS braces auto-closed on the line: body between them, brace on its own line",
     "function f() {█}\n", "\n  return 1;\n}", Suggestion("\n  return 1;\n", replace=0)),
    ("max_lines limits the block",
     "def f():\n    █\n", "a = 1\n    b = 2\n    c = 3\n    d = 4", Suggestion("a = 1\n    b = 2"), ),
    ("a truncated generation drops its partial last line",
     "def f():\n    █\n", "a = 1\n    b = 2\n    c = comp", Suggestion("a = 1\n    b = 2")),
    ("nested closer is not the enclosing closer that follows the cursor",
     "fn max(a: i32, b: i32) -> i32 {\n    █\n}\n",
     "if a > b {\n        a\n    } else {\n        b\n    }\n}\n\nfn main() {",
     Suggestion("if a > b {\n        a\n    } else {\n        b\n    }")),
    ("extra indentation after the cursor's indentation is dropped",
     "def load(path):\n    █\n", "    return cfg\n\nif x:\n    main()", Suggestion("return cfg")),
    ("extra indentation dropped from every line that carries it",
     "def load(path):\n    █\n", "    with open(path) as f:\n            return f.read()",
     Suggestion("with open(path) as f:\n        return f.read()")),
    ("JS arrow braces: the model closes the body itself, replacing the auto-closed brace",
     "const add = (a, b) => {█}\n", "\n    return a + b;\n};", Suggestion("\n    return a + b;\n};", replace=1)),
    # --- repetition -----------------------------------------------------------------------------------
    ("copying the previous line is dropped",
     "import os\nimport sys\n█\n", "import sys", None),
    ("a looping line keeps one copy",
     "def f():\n    █\n", "x = 1\n    y = 2\n    y = 2\n    y = 2\n    y = 2", Suggestion("x = 1\n    y = 2")),
    ("a looping two-line block keeps one copy",
     "def f():\n    █\n", "a = g()\n    b = h(a)\n    a = g()\n    b = h(a)", Suggestion("a = g()\n    b = h(a)")),
    ("a truncated run of one character is dropped",
     "x = f(█\n", "1)))))))))))))))))))))))", Suggestion("1)")),
    # --- never empty ------------------------------------------------------------------------------------
    ("whitespace only is nothing", "x = █\n", "   \n  ", None),
    ("empty is nothing", "x = █\n", "", None),
    ("only the rest of the line is nothing", "print(█)\n", ")", None),
    ("single-line mode with the model starting a new line is nothing", "x = 1█\n", "\ny = 2", None),
]


@pytest.mark.parametrize("name,doc,raw,expected", GOLDEN, ids=[g[0] for g in GOLDEN])
def test_golden(name, doc, raw, expected):
    max_lines = 2 if name == "max_lines limits the block" else 8
    truncated = name.startswith("a truncated")
    assert run(doc, raw, max_lines=max_lines, truncated=truncated) == expected


# --- the steps one by one -------------------------------------------------------------------------------


@pytest.mark.parametrize("line_prefix,line_suffix,mode", [
    ("", "", "multi"),
    ("    ", "", "multi"),
    ("def f(x):", "", "multi"),
    ("if x:  # comment", "", "multi"),
    ("function f() {", "", "multi"),
    ("function f() {", "}", "multi"),
    ("x = ", "", "single"),
    ("print(", ")", "single"),
    ("value = compute(a", ", b)", "single"),
    ("for x in xs", "", "single"),
    ("    return", "", "single"),
])
def test_decide_mode(line_prefix, line_suffix, mode):
    assert decide_mode(line_prefix, line_suffix) == mode


def test_decide_mode_policy_overrides():
    assert decide_mode("x = ", "", "always") == "multi"
    assert decide_mode("", "", "never") == "single"


def test_opens_block():
    assert opens_block("def f():")
    assert opens_block("items = [")
    assert opens_block("x.map(v =>")
    assert not opens_block("x = 1")
    assert not opens_block("print('a:')")


def test_normalize_crlf_and_trailing_blanks():
    assert normalize("a  \r\nb\t\r\n\r\n") == "a\nb"
    assert normalize("x" * 1000) == "x" * 400


def test_scan_strings_and_comments_are_skipped():
    state, bad = scan('f(")", 1  # )\n')
    assert bad is None and state.stack == ("(",)
    _, bad = scan("a)")
    assert bad == 1
    assert prefix_state("x = [1,\n  (2, ").stack == ("[", "(")
    # a closer of something older than the window is skipped, not fatal
    assert prefix_state("]\nf(").stack == ("(",)


def test_limit_scope_keeps_deeper_lines():
    assert limit_scope("a\n        b\n    c\nd", "    ") == "a\n        b\n    c"


def test_drop_repetition_keeps_two_equal_lines():
    # two equal lines are common in real code; three are a loop
    assert drop_repetition("x += 1\n    x += 1", "    ", "def f():\n", False) == "x += 1\n    x += 1"


def test_never_whitespace_only_over_many_inputs():
    docs = ["x = █\n", "def f():\n    █\n", "print(█)\n", "█", "a\n█\nb"]
    raws = ["", " ", "\n", "\n\n  \n", "\t", ")", "))", '")', "\n    \n"]
    for d in docs:
        for r in raws:
            s = run(d, r)
            assert s is None or s.text.strip(), (d, r, s)
