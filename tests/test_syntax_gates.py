"""engine/text/gates.py: where an automatic suggestion is not shown, per language, from the parse."""

from __future__ import annotations

from engine.text.gates import conditions

JS = "function f(a) {\n  "


def test_the_conditions_read_comments_strings_words_and_closing_lines():
    assert "comment" in conditions(JS + "// the total of", "\n}\n", "javascript")
    assert "string" in conditions(JS + 'const s = "abc', "\n}\n", "javascript")
    assert conditions(JS + "const s = ", "\n}\n", "javascript") == frozenset()
    assert conditions(JS + "const total", "\n}\n", "javascript") == {"word"}
    assert conditions(JS + "if (a) {\n    g(a);\n  }", "\n}\n", "javascript") == {"after_block"}
    assert "comment" in conditions("def f():\n    # the total", "\n", "python")
    # no grammar: only the line-based conditions
    assert conditions("x = # note:", "\n", "plaintext") == frozenset()
