"""Post-processing with the client's language id: the steps ask the tree-sitter parse (engine/syntax) where
the bracket scanner and indentation cannot read the code, and keep today's answers without an id."""

from __future__ import annotations

from engine.text.postprocess import fit_line_suffix, limit_scope, postprocess

JS_IF = "function f(a) {\n  if (a) {\n    "


def test_a_closing_brace_the_model_indented_wrong_still_ends_the_block():
    text = "return 1;\n    }\n    foo();"
    assert limit_scope(text, "    ", JS_IF, "javascript") == "return 1;"
    assert limit_scope(text, "    ", JS_IF, None) == text  # indentation alone keeps it


def test_the_brace_of_the_block_the_cursor_line_opened_is_kept():
    prefix = "function f(a) {\n  if (a) {"
    assert limit_scope("\n    x();\n  }\n  y();", "  if (a) {", prefix, "javascript") == "\n    x();\n  }"


def test_a_block_the_text_opens_and_closes_itself_stays_whole():
    text = "for (const b of a) {\n      g(b);\n    }\n    h();"
    assert limit_scope(text, "    ", JS_IF, "javascript") == text


def test_a_bracket_inside_a_regex_literal_is_no_stray_closer():
    prefix = "function f() {\n  const re = "
    assert fit_line_suffix("/[)]/g;", "  const re = ", "", prefix, "javascript").text == "/[)]/g;"
    assert fit_line_suffix("/[)]/g;", "  const re = ", "", prefix, None).text == "/["  # the scanner's cut


def test_a_closer_that_closes_nothing_is_still_cut_with_a_grammar():
    prefix = "func f() {\n\tx := g("
    assert fit_line_suffix("a)) + 1", "\tx := g(", "", prefix, "go").text == "a)"


def test_a_template_literal_over_lines_is_shown_whole():
    prefix = "function f(a) {\n  const s = `line one\n"
    sug = postprocess("line two (`;", prefix, "\n}\n", mode="single", truncated=True, language="javascript")
    assert sug is not None and sug.text == "line two (`;"
    cut = postprocess("line two (`;", prefix, "\n}\n", mode="single", truncated=True, language=None)
    assert cut is not None and cut.text == "line"  # the scanner reads `(` as open


def test_a_rust_statement_cut_by_a_limit_goes_back_to_a_complete_one():
    prefix = "fn f(v: &[u8]) -> usize {\n    let n = "
    sug = postprocess("compute(a, b) + scale(", prefix, "\n}\n", mode="single", truncated=True, language="rust")
    assert sug is not None and sug.text == "compute(a, b)"


def test_a_line_the_model_stopped_on_an_operator_is_cut_back_with_a_grammar_only():
    prefix = "function f(units) {\n  "
    sug = postprocess("var p = getUnits(units),", prefix, "\n}\n", mode="single", language="javascript")
    assert sug is not None and sug.text == "var p = getUnits(units)"
    assert postprocess("if (input &&", prefix, "\n}\n", mode="single", language="javascript") is None
    # no language id, or Python: as before
    kept = postprocess("var p = getUnits(units),", prefix, "\n}\n", mode="single", language=None)
    assert kept is not None and kept.text == "var p = getUnits(units),"
    py = postprocess("x = a +", "def f():\n    ", "\n", mode="single", language="python")
    assert py is not None and py.text == "x = a +"


def test_a_grammar_that_fails_to_load_leaves_post_processing_as_before_with_one_warning(caplog, tmp_path):
    import logging

    from engine.syntax.languages import REGISTRY
    from engine.text.statements import ends_mid_statement

    REGISTRY.add("flint-broken-lang", str(tmp_path / "missing.so"))  # an id no other test uses
    prefix = "function f() {\n  const re = "
    with caplog.at_level(logging.WARNING, logger="flint.syntax"):
        got = fit_line_suffix("/[)]/g;", "  const re = ", "", prefix, "flint-broken-lang").text
        mid = ends_mid_statement("/[)]/g;", prefix, "", "flint-broken-lang")
        again = postprocess("/[)]/g;", prefix, "\n}\n", mode="single", language="flint-broken-lang")
    assert got == "/[" and mid is True  # the scanner's answers
    assert again is not None and again.text == "/["
    warnings = [r for r in caplog.records if r.name == "flint.syntax" and r.levelno == logging.WARNING]
    assert len(warnings) == 1
