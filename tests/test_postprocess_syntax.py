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


# ---- the TypeScript replay's last mid-statement ghosts (docs/benchmarks/replay_languages.md) ---------------
import itertools  # noqa: E402

import pytest  # noqa: E402

from engine.syntax.queries import is_complete, statement_cut_points  # noqa: E402

REVOKE = "export function revokeScope(scope: ImmerScope) {\n\tleaveScope(scope)\n\tscope.drafts_.forEa"
REVOKE_BELOW = "\n\t// @ts-ignore\n\tscope.drafts_ = null\n}\n"
HAS = ("export function has(thing: any, prop: PropertyKey): boolean {\n"
       "\treturn getArchtype(thing) === ArchType.Map\n\t\t? th")
HAS_BELOW = "\n}\n\nexport function get(thing: any, prop: PropertyKey): any {\n\treturn thing[prop]\n}\n"


@pytest.mark.parametrize("language", ["javascript", "typescript"])
def test_a_callback_block_header_is_a_header_like_if(language):
    assert is_complete(language, REVOKE, "ch(draft => {") is True
    assert is_complete(language, REVOKE, "ch(function (draft) {") is True
    assert statement_cut_points(language, REVOKE, "ch(draft => {") == [len("ch(draft => {")]
    assert is_complete(language, REVOKE, "ch({") is False  # an object literal in a call: its `)` is this line's
    assert is_complete(language, REVOKE, "ch(draft => { revoke(") is False
    sug = postprocess("ch(draft => {", REVOKE, REVOKE_BELOW, mode="single", language=language)
    assert sug is not None and sug.text == "ch(draft => {"


@pytest.mark.parametrize(("language", "prefix", "header"), [
    ("go", "func TestX(t *testing.T) {\n\t", 't.Run("x", func(t *testing.T) {'),
    ("rust", "fn main() {\n    ", "thread::spawn(move || {"),
    ("java", "class A {\n  void f() {\n    ", "xs.forEach(d -> {"),
    ("cpp", "int main() {\n  ", "std::for_each(a, b, [](int x) {"),
])
def test_callback_headers_in_other_brace_languages(language, prefix, header):
    assert is_complete(language, prefix, header) is True
    assert is_complete(language, prefix, header[: header.rindex("{")]) is False


def test_a_missing_semicolon_after_the_brackets_the_context_opened_is_the_users():
    prefix = "class A {\n  void f() {\n    foo(a, "
    assert is_complete("java", prefix, "b") is True
    assert is_complete("java", prefix, "b +") is False
    assert is_complete("c", "int main() {\n  foo(a, ", "b") is True


@pytest.mark.parametrize("language", ["javascript", "typescript"])
def test_a_ternary_branch_whose_else_line_was_cut_is_not_shown_alone(language):
    assert is_complete(language, HAS, "ing.has(prop)") is False
    # the model's next line stopped at `:` (streaming, or a limit): the line before it does not complete the return
    assert postprocess("ing.has(prop)\n\t\t:", HAS, HAS_BELOW, mode="single", language=language) is None
    whole = postprocess("ing.has(prop)\n\t\t: thing[prop]", HAS, HAS_BELOW, mode="single", language=language)
    assert whole is not None and whole.text == "ing.has(prop)\n\t\t: thing[prop]"


@pytest.mark.parametrize("language", ["javascript", "typescript"])
def test_no_text_post_processing_shows_ends_mid_statement(language):
    """What the replay's judge asks of every ghost, over the model texts that produced these cases."""
    cases = [(REVOKE, REVOKE_BELOW, ["ch(draft => {\n", "ch(draft => {\n\t\trevokeDraft(draft)\n",
                                     "ch(draft => {\n\t\trevokeDraft(draft)\n\t})\n", "ch(draft => {\n\t\trevokeDraft("]),
             (HAS, HAS_BELOW, ["ing.has(prop)\n", "ing.has(prop)\n\t\t", "ing.has(prop)\n\t\t:",
                               "ing.has(prop)\n\t\t: thing[", "ing.has(prop)\n\t\t: thing[prop]\n"])]
    shown = 0
    for (prefix, suffix, raws) in cases:
        for raw, mode, max_lines, truncated in itertools.product(raws, ("single", "multi"), (1, 2, 8), (False, True)):
            sug = postprocess(raw, prefix, suffix, mode=mode, max_lines=max_lines, truncated=truncated,
                              language=language)
            if sug is not None:
                shown += 1
                assert is_complete(language, prefix, sug.text.rstrip()) is True, (raw, mode, max_lines, truncated)
    assert shown > 10
