"""engine/syntax/adapt.py against engine/text/statements.py: the drop-ins agree with the bracket scanner on
ordinary code, answer right where the scanner cannot read the code (regex and multi-line template
literals, lifetimes), and leave Python and languages without a grammar to the existing code (None)."""

from __future__ import annotations

import pytest

from engine.syntax import adapt
from engine.text import statements

JS_FN = "function f(a) {\n  "
RUST_FN = "fn f<'a>(s: &'a str) -> &'a str {\n    "

AGREE = [
    ("javascript", JS_FN + "const x = ", "foo(a, b", ""),
    ("javascript", JS_FN + "const x = ", "foo(a, b)", ""),
    ("javascript", JS_FN + "const x = ", "a +", ""),
    ("javascript", JS_FN, "for (const b of", ""),
    ("javascript", JS_FN + "foo(a, ", "b", ")"),
    ("typescript", "function f(a: number): string {\n  return ", "a.", ""),
    ("java", "class A {\n  void f() {\n    int x = ", "a +", ""),
    ("go", "func f() {\n\tx := ", "`raw (`", ""),
    ("c", "int f() {\n  char c = ", "'(';", ""),
    ("rust", RUST_FN + "let t = ", "s.trim(", ""),
]


@pytest.mark.parametrize("language_id, prefix, text, line_suffix", AGREE)
def test_the_drop_ins_agree_with_the_scanner_on_ordinary_code(language_id, prefix, text, line_suffix):
    # the scanner's answer: no language id (guessed from the text)
    assert adapt.ends_mid_statement(text, prefix, line_suffix, language_id) == \
        statements.ends_mid_statement(text, prefix, line_suffix, None)
    assert adapt.cut_to_complete(text, prefix, line_suffix, language_id) == \
        statements.cut_to_complete(text, prefix, line_suffix, None)


@pytest.mark.parametrize("language_id, prefix, text", [
    ("javascript", JS_FN + "const re = ", "/[(]/g;"),  # a bracket in a regex literal
    ("javascript", JS_FN + "const s = `line one\n", "line two (`;"),  # a template literal over lines
    ("rust", RUST_FN + "let t: &'a str = ", "s.trim();"),  # a lifetime is no quote
])
def test_the_tree_reads_what_the_scanner_cuts_to_nothing(language_id, prefix, text):
    # the scanner (no language id: guessed) cuts it; with the client's id statements.py asks the tree
    assert statements.ends_mid_statement(text, prefix, "", None) is True
    assert statements.ends_mid_statement(text, prefix, "", language_id) is False
    assert statements.cut_to_complete(text, prefix, "", language_id) == text
    assert adapt.ends_mid_statement(text, prefix, "", language_id) is False
    assert adapt.cut_to_complete(text, prefix, "", language_id) == text


def test_cut_to_complete_keeps_whole_lines_and_cuts_the_last_one_back():
    assert adapt.cut_to_complete("x = 1;\nconst y = foo(a, b", JS_FN, "", "javascript") == "x = 1;"
    assert adapt.cut_to_complete("const y = total + tax +", JS_FN, "", "javascript") == "const y = total + tax"


def test_a_dangling_header_goes_and_a_started_body_stays():
    assert adapt.drop_dangling_header("x = 1;\nfor (const b of xs) {", JS_FN, "javascript") == "x = 1;"
    body = "for (const b of xs) {\n    x = 1;"
    assert adapt.drop_dangling_header(body, JS_FN, "javascript") == body


def test_brackets_and_stray_closers_read_past_strings():
    assert adapt.open_pairs("fn f() {\n    let c = '(';\n    g(", "rust") == ("{", "(")
    assert adapt.stray_closer("a)) + 1", "foo(", "go") == 2


@pytest.mark.parametrize("language_id", ["python", "Python", None, "", "plaintext"])
def test_python_and_languages_without_grammar_stay_with_the_existing_code(language_id):
    assert adapt.ends_mid_statement("foo(", "x = ", "", language_id) is None
    assert adapt.is_complete_statement("x = foo(", language_id) is None
    assert adapt.cut_to_complete("foo(a", "x = ", "", language_id) is None
    assert adapt.drop_dangling_header("a\nfor x in y:", "", language_id) is None
    assert adapt.open_pairs("(", language_id) is None
    assert adapt.stray_closer(")", "", language_id) is False
