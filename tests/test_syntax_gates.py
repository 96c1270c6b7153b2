"""engine/text/gates.py: where an automatic suggestion is not shown, per language, from the parse."""

from __future__ import annotations

from engine.text.gates import conditions, gate_reason
from lsp_server.completion.policy.planner import state_at
from lsp_server.settings import Settings

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


def test_a_gate_applies_only_when_enabled_and_never_to_an_explicit_request():
    prefix = JS + "// the total of"
    assert gate_reason(prefix, "\n}\n", "javascript", invoked=False, enabled=frozenset({"comment"})) == "gate: comment"
    assert gate_reason(prefix, "\n}\n", "javascript", invoked=True, enabled=frozenset({"comment"})) is None
    assert gate_reason(prefix, "\n}\n", "javascript", invoked=False, enabled=frozenset({"string"})) is None
    assert gate_reason(prefix, "\n}\n", None, invoked=False, enabled=frozenset({"comment"})) is None


def test_the_planner_skips_an_automatic_request_a_language_gate_holds_at(monkeypatch):
    from engine.text import gates

    prefix = JS + "// the total of"

    def skip(invoked: bool, language: str = "javascript") -> str | None:
        return state_at(Settings(), "file:///a.js", 1, len(prefix), prefix, "\n}\n", invoked=invoked,
                        remote_ready=False, language=language).skip

    monkeypatch.setitem(gates.ENABLED, "javascript", frozenset({"comment"}))
    assert skip(False) == "gate: comment"
    assert skip(True) is None
    assert skip(False, "go") == gate_reason(prefix, "\n}\n", "go", invoked=False)
    monkeypatch.setitem(gates.ENABLED, "javascript", frozenset())
    assert skip(False) is None
