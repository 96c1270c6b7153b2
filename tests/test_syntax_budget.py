"""budget_for at an empty line of a language with a grammar (not Python): whether the cursor ends its block or
the code below is the body of a header still to write is read from the braces of a parse (engine/syntax/blocks.py
``block_around``), not from the next line's indentation; Python and unknown languages keep the indentation."""

from __future__ import annotations

import pytest

from engine.syntax import adapt
from engine.syntax.blocks import Around, block_around
from engine.text.budget import budget_for

CURSOR = "|"


def kinds(language: str | None, doc: str) -> str:
    i = doc.index(CURSOR)
    return budget_for(doc[:i], doc[i + 1:], language).kind


# (language, document, the tree's budget, indentation's budget)
MISLED = [
    # a preprocessor line sits at column 0 inside the body: statements follow
    ("c", "int f(void) {\n    a();\n    |\n#ifdef FOO\n    b();\n#endif\n    return 0;\n}\n", "statement", "body"),
    # an editor that strips blank lines puts the cursor at column 0: the `}` below still ends the body
    ("javascript", "function f() {\n    a();\n|\n}\n", "body", "statement"),
    ("go", "func f() {\n\ta()\n|\n}\n", "body", "statement"),
    # a statement indented wrong, deeper (a one-line if) or shallower, is still a statement of the block
    ("javascript", "function f() {\n    a();\n    |\n        if (y) { z(); }\n    w();\n}\n", "statement", "header"),
    ("typescript", "function f() {\n    a();\n    |\n  b();\n}\n", "statement", "body"),
    ("rust", "fn f() {\n    a();\n    |\n        b();\n    c();\n}\n", "statement", "header"),
    # a one-line `if (x) { a();` opened the block the cursor ends; its `}` is at the cursor's column
    ("javascript", "function f() {\n    if (x) { a();\n    |\n    }\n}\n", "body", "statement"),
]

AGREE = [
    # the header of the block below is missing: its `}` is deeper than the enclosing block's header
    ("javascript", "function f() {\n    a();\n    |\n        b();\n        c();\n    }\n    d();\n}\n", "header"),
    ("java", "class A\n{\n    void f()\n    {\n        a();\n        |\n            b();\n        }\n    }\n}\n", "header"),
    ("java", "class A\n{\n    void f()\n    {\n        a();\n        |\n    }\n}\n", "body"),
    ("rust", "fn f() {\n    a();\n    |\n    b();\n}\n", "statement"),
    # Allman braces with the first statement on the brace's line
    ("java", "class A {\n  void f()\n  {   a();\n      |\n  }\n}\n", "body"),
    ("typescript", "function f() {\n    if (x) { a(); }\n    |\n}\n", "body"),
    # a closing `}` on the line of the block's last statement
    ("typescript", "function f() {\n    if (x) {\n        a();\n        |\n        b(); }\n    c();\n}\n", "statement"),
]


@pytest.mark.parametrize(("language", "doc", "tree", "indentation"), MISLED)
def test_the_tree_answers_where_indentation_misleads(language, doc, tree, indentation):
    assert kinds(language, doc) == tree
    assert kinds(None, doc) == indentation  # no language id: the indentation reading, as before


@pytest.mark.parametrize(("language", "doc", "kind"), AGREE)
def test_the_tree_agrees_with_indentation_where_it_is_right(language, doc, kind):
    assert kinds(language, doc) == kind
    assert kinds(None, doc) == kind


def test_python_and_unknown_languages_keep_the_indentation():
    doc = "def f():\n    a()\n    |\n  b()\n"
    i = doc.index(CURSOR)
    assert adapt.block_around(doc[:i], doc[i + 1:], "python") is None
    assert adapt.block_around(doc[:i], doc[i + 1:], "no-such-language") is None
    assert kinds("python", doc) == kinds(None, doc) == "body"


def test_block_around_reads_only_a_window_of_the_lines_below():
    body = "".join(f"    b{i}();\n" for i in range(200))
    doc = "function f() {\n    a();\n    |\n" + body + "}\n"
    i = doc.index(CURSOR)
    # the block's `}` is past the lines read: whether a header is missing is not known, statements follow
    assert block_around("javascript", doc[:i], doc[i + 1:], max_lines=60) == Around(False, None)
    assert block_around("javascript", doc[:i], doc[i + 1:], max_lines=400) == Around(False, False)
    assert kinds("javascript", doc) == "statement"


def test_top_level_code_has_no_braced_block():
    doc = "const a = 1;\n|\nconst b = 2;\n"
    i = doc.index(CURSOR)
    assert block_around("javascript", doc[:i], doc[i + 1:]) is None


def test_go_statements_in_their_statement_list_count():
    doc = "func f() {\n\ta()\n\t|\n\tb()\n}\n"
    i = doc.index(CURSOR)
    assert block_around("go", doc[:i], doc[i + 1:]) == Around(False, False)
    doc = "func f() {\n\ta()\n|\n}\n"
    i = doc.index(CURSOR)
    assert block_around("go", doc[:i], doc[i + 1:]) == Around(True, False)
