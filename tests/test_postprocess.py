"""Golden tests for engine/text/postprocess.py: document with a cursor (█), raw model text -> what is shown.

Each case is what a model really does at that spot (copies the rest of the line, runs past the block,
loops) and what the editor should get.
"""

from __future__ import annotations

import pytest

from engine.text.budget import decide_mode
from engine.text.overlap import drop_repetition
from engine.text.postprocess import (
    Suggestion,
    limit_scope,
    normalize,
    open_line_shown,
    postprocess,
)
from engine.text.statements import opens_block, prefix_state, scan
from engine.text.window import line_start, seen_from_cursor

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
    ("indentation the model writes after the cursor's is its own (the engine prompts such a line from its start)",
     "class A:\n    def load(self, path):\n    █\n", "    return cfg\n\nif x:\n    main()", Suggestion("    return cfg")),
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
    ("single-line mode at the end of a finished line offers the model's next line",
     "x = 1█\n", "\ny = 2\nz = 3", Suggestion("\ny = 2")),
    ("single-line mode in an unfinished line with the model starting a new line is nothing",
     "x = █\n", "\ny = 2", None),
    # --- Python: a line whose next line is indented deeper opens that block ------------------------------
    ("an emptied block header is not filled with a plain statement",
     "def f(a):\n    if a:\n        return 1\n    █\n        return 2\n", "raise", None),
    ("... but with a header",
     "def f(a):\n    if a:\n        return 1\n    █\n        return 2\n", "elif a > 1:",
     Suggestion("elif a > 1:")),
    ("... nor with a block that ends in a plain statement",
     "def f(a):\n    if a:\n        return 1\n    █\n        return 2\n", "x = 1\n    raise",
     None),
    ("... and only the header: its body is below already",
     "def f(xs):\n    total = 0\n    █\n        total += x\n    return total\n",
     "for x in xs:\n        print(x)\n        total += x", Suggestion("for x in xs:")),
    ("an else whose chain goes on below is nothing (two else branches)",
     "def f(a):\n    if a:\n        x = 1\n    █\n        x = 2\n    else:\n        x = 3\n", "else:", None),
    ("... an elif there is fine",
     "def f(a):\n    if a:\n        x = 1\n    █\n        x = 2\n    else:\n        x = 3\n", "elif a > 1:",
     Suggestion("elif a > 1:")),
    ("... as is an else that ends the chain",
     "def f(a):\n    if a:\n        x = 1\n    █\n        x = 2\n    return x\n", "else:",
     Suggestion("else:")),
    ("... and a call's continuation line below is not a block",
     "def f(a):\n    x = g(a,█\n          a)\n", " 1,", Suggestion(" 1,")),
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


# --- issue 16: overlap with the code below, complete statements, budgets ---------------------------------

from engine.text.budget import budget_for, cut_to_budget, stop_reached  # noqa: E402
from engine.text.overlap import cut_at_following_lines  # noqa: E402
from engine.text.statements import (  # noqa: E402
    cut_to_complete,
    ends_mid_statement,
    guess_language,
    statement_start,
)

PY_FN = "def triangle(a, b, c):\n    "


@pytest.mark.parametrize("name,doc,raw,expected", [
    ("a gap before a loop: the loop the model re-writes is cut",
     "def f(arr):\n    sorted_arr = sorted(arr)\n    █\n    for var in sorted_arr:\n        print(var)\n",
     "total = 0\n    for var in sorted_arr:\n        print(var)", Suggestion("total = 0")),
    ("a near copy of the next line (a small edit) is cut",
     "def f(xs):\n    █\n    result = compute(xs, key=None)\n",
     "xs = list(xs)\n    result = compute(xs, key=None )", Suggestion("xs = list(xs)")),
    ("block overlap: the model skips the next line then copies two after it",
     "def f(xs):\n    █\n    a = first(xs)\n    b = second(a)\n    c = third(b)\n",
     "xs = clean(xs)\n    a = first(xs)\n    b = second(a)", Suggestion("xs = clean(xs)")),
    ("a long line copied word for word from a few lines below is cut",
     'def f(xs):\n    █\n\ndef g(sig):\n    """ Convert the signature spec to a tuple of names"""\n',
     'xs = list(xs)\n    """ Convert the signature spec to a tuple of names"""', Suggestion("xs = list(xs)")),
    ("in the middle of code one statement is shown, a compound one with its body",
     "def f(xs):\n    total = 0\n    █\n    print(total)\n",
     "for x in xs:\n        total += x\n    total *= 2\n    return total",
     Suggestion("for x in xs:\n        total += x")),
], ids=lambda v: v if isinstance(v, str) and len(v) > 30 else "")
def test_overlap_with_following_lines(name, doc, raw, expected):
    assert run(doc, raw) == expected


def test_two_short_lines_equal_to_lines_below_are_not_an_overlap():
    suffix = "\n    x += 1\n    i += 1\n    return x\n"
    assert cut_at_following_lines("i = 0\n    i += 1", "    ", suffix) == "i = 0\n    i += 1"


def test_cut_at_following_lines_keeps_an_inner_closer():
    # `    }` closes the model's own inner block; the `}` below the cursor closes the function
    assert cut_at_following_lines("if a {\n        b\n    }", "    ", "\n}\n") == "if a {\n        b\n    }"


@pytest.mark.parametrize("prefix,text,line_suffix,mid", [
    (PY_FN, "for b in", "", True),
    (PY_FN, "for b in range(c):", "", False),
    (PY_FN, "if a + b <= c or a + c <= b or b + c <= a", "", True),
    (PY_FN, "if a + b <= c or a + c <= b or b + c <= a:", "", False),
    (PY_FN, "return (a +", "", True),
    (PY_FN, "s = 'abc", "", True),
    ("if x:\n    pass\n", "else:", "", False),
    ("try:\n    pass\n", "except ValueError as e:", "", False),
    ("print(", '"hi"', ")", False),
    ("x = f(\n    a,\n    ", "b,", "", False),
    ("x = f(\n    a,\n    ", "b +", "", True),
    ("int main() {\n    ", "return 0;", "", False),
    ("int main() {\n    ", "int x = a +", "", True),
    ("function f() {\n  ", "if (a && b) {", "", False),
])
def test_ends_mid_statement(prefix, text, line_suffix, mid):
    assert ends_mid_statement(text, prefix, line_suffix) is mid


@pytest.mark.parametrize("prefix,text,expected", [
    (PY_FN, "for b in", ""),
    (PY_FN, "if a + b <= c or a + c <= b or b + c <= a", ""),
    (PY_FN, "return (a +", ""),  # not `return`: a name cut from its expression says something else
    (PY_FN, "x = foo(a, b", ""),
    (PY_FN, "x = a + b if c", "x = a + b"),
    (PY_FN, "total = 0\n    for b in", "total = 0"),
    (PY_FN, "return a + b", "return a + b"),
])
def test_cut_to_complete(prefix, text, expected):
    assert cut_to_complete(text, prefix) == expected


def test_statement_start_spans_open_brackets():
    assert statement_start("def f():\n    x = foo(a,\n        b, ") == "    x = foo(a,\n        b, "
    assert statement_start("int f() {\n  int x = 1;\n  y = ") == "  y = "


def test_guess_language():
    assert guess_language("import os\n\ndef f(x):\n    return x\n") == "python"
    assert guess_language("int main() {\n  return 0;\n}\n") == "other"


@pytest.mark.parametrize("name,doc,raw,truncated,expected", [
    ("a deadline-cut line is not shown", PY_FN + "█\n", "if a + b <= c or a + c", True, None),
    ("a deadline-cut line after whole lines keeps the whole lines",
     PY_FN + "█\n", "s = a + b + c\n    if s > 10", True, Suggestion("s = a + b + c")),
    ("a line the model continues below is finished from its next lines",
     "def f(a, b, c):\n    x = (a █\n", "+ b +\n        c)\n    return x", False, Suggestion("+ b +\n        c)")),
    ("a block cut after a header drops the header",
     PY_FN + "█\n", "s = a + b\n    for x in s:\n        pri", True, Suggestion("s = a + b")),
], ids=lambda v: v if isinstance(v, str) and len(v) > 30 else "")
def test_complete_statements_on_screen(name, doc, raw, truncated, expected):
    assert run(doc, raw, truncated=truncated) == expected


def test_complete_statements_can_be_switched_off():
    prefix = PY_FN
    sug = postprocess("for b in", prefix, "\n", mode="single", truncated=True, complete_statements=False)
    assert sug == Suggestion("for b in")


def test_a_streaming_line_is_shown_mid_statement_and_one_a_limit_cut_is_not():
    # the head of an `if (` condition a generation is still writing: shown, typed through as it grows
    js = "function f(value) {\n  if (!"
    assert postprocess("this", js, "\n}\n", truncated=True, language="javascript") is None
    assert postprocess("this", js, "\n}\n", truncated=True, language="javascript", open_line=True) == \
        Suggestion("this")
    # a block is still cut back to its complete statements
    assert postprocess("a = 1;\n  foo(a,", "function f() {\n  ", "\n}\n", mode="multi", truncated=True,
                       language="javascript", open_line=True) == Suggestion("a = 1;")
    assert open_line_shown("partial") and open_line_shown("eos", before_doubt=True)
    assert not any(open_line_shown(r) for r in ("eos", "length", "deadline", "cancelled"))


def test_a_line_the_model_ended_is_shown_though_its_statement_goes_on():
    # a ternary's `? a` line, a condition's `||` line, `return (`: the statement is written over several lines
    ts = "function f(updater, input) {\n  return typeof updater === 'function'\n    ? (upd"
    assert postprocess("ater)(input)", ts, "\n}\n", mode="multi", language="typescript") is None
    assert open_line_shown("stop", language="typescript") and open_line_shown("lines", language="go")
    assert not open_line_shown("stop", language="python") and not open_line_shown("lines")
    assert postprocess("ater)(input)", ts, "\n}\n", mode="multi", language="typescript",
                       open_line=True) == Suggestion("ater)(input)")
    cond = "function f(url) {\n  if (\n    !url.password"
    assert postprocess(" ||\n    x", cond, "\n}\n", language="javascript", open_line=True) == Suggestion(" ||")
    # the model's next lines that do not finish the statement: the first line, not a cut back to nothing
    ret = "function f(opts) {\n  ret"
    raw = "urn (\n    (opts.searchParams.get('id') as string | null) ??"
    assert postprocess(raw, ret, "\n}\n", language="typescript") is None
    assert postprocess(raw, ret, "\n}\n", language="typescript", open_line=True) == Suggestion("urn (")
    # lines that do finish it are still taken together
    assert postprocess("urn f(\n    a)\n  x", ret, "\n}\n", language="typescript", open_line=True) == \
        Suggestion("urn f(\n    a)")


def test_a_statement_inside_a_do_block_is_complete_before_the_block_s_while_is_typed():
    # the parse closes the open do-body with its `while (...)`: without it every statement there was an error
    from engine.syntax.queries import is_complete

    for lang, before, text in (("typescript", "function f() {\n  do {\n    list[", "x] = node"),
                               ("javascript", "function f() {\n  do {\n    list[", "x] = node"),
                               ("c", "int f() {\n  do {\n    a[", "i] = 1;"),
                               ("java", "class A { void f() {\n  do {\n    a[", "i] = 1;")):
        assert is_complete(lang, before, text) is True, lang
        assert is_complete(lang, before, text + " + (") is False, lang
    assert is_complete("typescript", "function f() {\n  const undo = {\n    a: ", "1") is True


# budgets: how much to ask for by context, and when a stream has written enough

MIDDLE = ("def f(xs):\n    total = 0\n    ", "\n    return total\n")
END_OF_BODY = ("def f(xs):\n    total = 0\n    ", "\n\ndef g():\n    pass\n")


@pytest.mark.parametrize("prefix,suffix,kind,mode", [
    (*MIDDLE, "statement", "multi"),
    (*END_OF_BODY, "body", "multi"),
    ("def f(xs):", "\n\ndef g():\n    pass\n", "body", "multi"),
    ("def f(xs):", "\n    return 1\n", "statement", "multi"),
    ("def f(xs):\n    total = 0", "\n    return total\n", "next", "multi"),
    ("def f(xs):\n    total = ", "\n    return total\n", "line", "single"),
    ("def f(xs):\n    total = 0\n    ", "\n        total += 1\n    return total\n", "header", "single"),
    ("def f():\n    x = 1\n", "\n    return x\n", "statement", "multi"),  # a stripped blank line in a body
    ("print(", ")\n", "line", "single"),
    ("function f() {", "}\n", "body", "multi"),
])
def test_budget_for(prefix, suffix, kind, mode):
    b = budget_for(prefix, suffix)
    assert (b.kind, b.mode) == (kind, mode)
    assert b.max_tokens >= 24 * b.max_lines or b.kind == "line"


def test_body_budget_is_larger_than_a_statement():
    assert budget_for(*END_OF_BODY).max_lines > budget_for(*MIDDLE).max_lines


def test_cut_to_budget_statement_keeps_a_compound_statement_whole():
    b = budget_for(*MIDDLE)
    text = "for x in xs:\n        total += x\n    return total"
    assert cut_to_budget(text, "    ", b) == "for x in xs:\n        total += x"
    assert cut_to_budget("if x:\n        a()\n    else:\n        b()\n    y = 1", "    ", b) == \
        "if x:\n        a()\n    else:\n        b()"
    assert stop_reached(text, "    ", b)
    assert not stop_reached("for x in xs:\n        total += x\n", "    ", b)


def test_cut_to_budget_body_stops_at_the_dedent():
    b = budget_for(*END_OF_BODY)
    text = "for x in xs:\n        total += x\n    return total\n\ndef g():"
    assert cut_to_budget(text, "    ", b) == "for x in xs:\n        total += x\n    return total"


def test_cut_to_budget_next_line_starts_with_the_break():
    b = budget_for("def f(xs):\n    total = 0", "\n    return total\n")
    assert cut_to_budget("\n    for x in xs:\n        total += x\n    return", "    total = 0", b) == \
        "\n    for x in xs:\n        total += x"
    assert cut_to_budget(" + 1\n    return", "    total = 0", b) == " + 1"


def test_a_similar_line_that_differs_in_a_word_is_not_an_overlap():
    suffix = '\n    parser.add_argument("--blocks", type=int, default=10)\n'
    text = 'parser.add_argument("--lines", type=int, default=20)'
    assert cut_at_following_lines(text, "    ", suffix) == text


def test_settled_when_finished_or_past_the_budget():
    from engine.text.budget import settled

    b = budget_for(*MIDDLE)
    assert settled("x = 1", True, "    ", b)
    assert not settled("for x in xs:\n        total += x\n", False, "    ", b)
    assert settled("for x in xs:\n        total += x\n    return", False, "    ", b)
    line = budget_for("x = ", "\n")
    assert not settled("compute(a", False, "x = ", line)
    assert settled("compute(a)\ny", False, "x = ", line)


def test_a_line_cut_after_a_name_is_not_a_complete_statement():
    """`self.insert` parses, but a deadline cut it before its call: it is not shown."""
    from engine.text.statements import cut_to_complete, ends_mid_statement

    prefix = "class A:\n    def f(self, index, item):\n        "
    assert ends_mid_statement("self.insert", prefix)
    assert not ends_mid_statement("self.insert(index, item)", prefix)
    assert not ends_mid_statement("return value", prefix)
    assert cut_to_complete("self.insert", prefix) == ""
    assert postprocess("self.insert", prefix, "\n", mode="multi", truncated=True) is None


def test_a_block_whose_last_statement_a_limit_left_open_is_cut_back_without_a_bare_header():
    prefix = "def f(a, b):\n    "
    cut_call = postprocess("x = 1\n    y = foo(\n        a,\n        b,", prefix, "\n", mode="multi", truncated=True)
    assert cut_call is not None and cut_call.text == "x = 1"
    open_body = postprocess("x = 1\n    if x:\n        y = (a +\n", prefix, "\n", mode="multi", truncated=True)
    assert open_body is not None and open_body.text == "x = 1"


def test_doubt_cut_ends_before_the_first_unsure_token_with_something_visible():
    from engine.text.postprocess import doubt_cut

    doubts = ((0, 0.1), (3, 0.2), (7, 0.6))
    assert doubt_cut("x = foo(bar)", doubts, 0.5) == "x ="  # a doubt at the start does not cut
    assert doubt_cut("x = foo(bar)", doubts, 0.7) == "x ="
    assert doubt_cut("x = foo(bar)", doubts, 0.15) == "x = foo(bar)"  # (3, 0.2) is sure enough
    assert doubt_cut("x = foo(bar)", doubts, 0.0) == "x = foo(bar)"  # off
    assert doubt_cut("    return x", ((2, 0.1), (10, 0.3)), 0.5) == "    return"  # not inside the indentation
    assert doubt_cut("a = 1\n    b = 2", ((10, 0.3),), 0.5) == "a = 1"  # a later line: whole lines before it
    # the next line offered after a break is not cut inside (a statement cut in its middle), a later one is
    assert doubt_cut("\n    b = c", ((8, 0.3),), 0.5) == "\n    b = c"
    assert doubt_cut("\n    b = c\n    d = e", ((8, 0.3), (18, 0.2)), 0.5) == "\n    b = c"
    assert doubt_cut("abc", ((9, 0.1),), 0.5) == "abc"  # past the text (it was cut since)


def test_lead_doubt_is_the_lowest_doubt_before_the_first_visible_character():
    from engine.text.postprocess import lead_doubt

    assert lead_doubt("foo(x)", ((0, 0.4), (3, 0.1))) == 0.4
    assert lead_doubt("  foo", ((0, 0.9), (2, 0.3), (4, 0.1))) == 0.3  # a blank token, then the first visible one
    assert lead_doubt("foo", ((1, 0.2),)) == 1.0  # inside the first word: the cut's
    assert lead_doubt("foo", ()) == 1.0
    assert lead_doubt("", ((0, 0.2),)) == 1.0  # nothing to show


# --- a line of whitespace only is prompted from its start (engine/text/window.py) ------------------------
@pytest.mark.parametrize("prefix,suffix,expected", [
    ("def f():\n      ", "\nx", ("def f():\n", "      ")),
    ("def f():\n\t", "", ("def f():\n", "\t")),
    ("def f():\n", "\n", ("def f():\n", "")),  # at the line start already
    ("def f():\n    x", "\n", ("def f():\n    x", "")),  # code on the line
    ("def f():\n    ", "return x\n", ("def f():\n    ", "")),  # code right of the cursor
])
def test_line_start(prefix, suffix, expected):
    assert line_start(prefix, suffix) == expected


@pytest.mark.parametrize("raw,doubts,expected", [
    ("        value = 1\n        y", ((8, 0.5), (1, 0.2)), ("  value = 1\n        y", ((2, 0.5),))),  # the rest of the indentation
    ("    ", (), ("", ())),  # still writing indentation the cursor has passed
    ("      ", (), ("", ())),
    ("    else:\n        y", ((4, 0.5),), ("else:\n        y", ((0, 0.5),))),  # a dedent starts at the cursor
    ("\n        y", ((9, 0.5),), ("\n        y", ((9, 0.5),))),
])
def test_seen_from_cursor(raw, doubts, expected):
    assert seen_from_cursor(raw, "      ", doubts) == expected
