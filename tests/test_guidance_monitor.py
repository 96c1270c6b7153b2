"""The monitor's trigger rules (engine/guidance/monitor.py): pure functions over the text before the cursor."""

import pytest

from engine.guidance.monitor import (
    STR,
    Candidate,
    Candidates,
    TriggerKind,
    code_tail,
    literal_names,
    safe_cut,
    trigger,
)

M, N, A = TriggerKind.MEMBER, TriggerKind.NAME, TriggerKind.ARGUMENT


@pytest.mark.parametrize("text, kind, partial, receiver", [
    ("x = obj.", M, "", "obj"),
    ("x = obj.al", M, "al", "obj"),
    ("    return self.", M, "", "self"),
    ("x = os.path.jo", M, "jo", "os.path"),
    ("print(x.", M, "", "x"),
    ("x = f(a).", M, "", None),
    ('x = "".jo', M, "jo", None),
    ("x = [1, 2].", M, "", None),
    ("x = obj.is", M, "is", "obj"),  # a keyword's spelling after '.' is an attribute's start
    ("@app.", M, "", "app"),
    ("x = '''\nabc'''.", M, "", None),
    ('x = "a\\"b".st', M, "st", None),
])
def test_member_triggers(text, kind, partial, receiver):
    t = trigger(text)
    assert t is not None and t.kind == kind and t.partial == partial and t.receiver == receiver
    assert t.start == len(text) - len(partial) and not t.glued


@pytest.mark.parametrize("text, kind, partial", [
    ("x = f(a, ", A, ""),
    ("x = f(a, b", A, "b"),
    ("foo(1, key=val", A, "val"),
    ("for x in ", N, ""),
    ("for x in ra", N, "ra"),
    ("lambda a: a", N, "a"),
    ("def f(a: int = ", N, ""),
    ("def f(x) -> Li", N, "Li"),
    ("return ", N, ""),
    ("    return x", N, "x"),
    ("x, y = a", N, "a"),
    ("a = b = ", N, ""),
    ("@dec", N, "dec"),
    ("x: Lis", N, "Lis"),
    ("x = 1 + ab", N, "ab"),
    ("x = (a,", N, ""),
    ("if x: y = ab", N, "ab"),
    ("x = a; y = b", N, "b"),
    ("x = (\n   a,\n   b", N, "b"),
    ("x = foo \\\n  + ba", N, "ba"),
    ("raise ValueError() from ex", N, "ex"),
])
def test_name_and_argument_triggers(text, kind, partial):
    t = trigger(text)
    assert t is not None and (t.kind, t.partial) == (kind, partial)
    assert t.start == len(text) - len(partial) and t.definite


@pytest.mark.parametrize("text", [
    "return", "    return", "x = a if", "if not", "yield from", "for x in", "x = y is", "while",
])
def test_expression_keyword_at_the_end_is_glued(text):
    t = trigger(text)
    assert t is not None and t.glued and t.partial == "" and t.kind == N and t.start == len(text)


@pytest.mark.parametrize("text", [
    # strings and comments
    "x = '''abc", "x = 'a.", "# obj.", "x = 1  # see obj.", 'x = f"{obj.', "x = '''a\nb.",
    # numbers
    "x = 1.", "x = 1e5", "x = 0x1f",
    # definitions
    "def fo", "class Fo", "async def g", "import os.pa", "from os import pa", "from . import x", "for x",
    "for x, y", "[y for y", "lambda a", "sorted(xs, key=lambda a", "def f(a, b", "def f(a, *ar",
    "with open(p) as f", "except ValueError as e", "global x", "nonlocal y",
    # a statement's start: maybe an assignment target
    "fo", "x, y", "if x:\n    ", "if x: ret", "x = obj.attr\n", "pri",
    # after a complete expression
    "x = y ", "x = y z", "x = 'a' b", "x = f() g",
])
def test_no_trigger(text):
    assert trigger(text) is None


@pytest.mark.parametrize("text", [
    "x = f(", "x = (a", "x = {1: a", "x = [y", "sum(x",  # a comprehension may bind it later
    "self.", "self.fo", "obj.attr",  # a statement's start: self.new = ... creates it
])
def test_not_definite(text):
    t = trigger(text)
    assert t is not None and not t.definite


def test_member_at_statement_start_keeps_the_receiver():
    t = trigger("        self.wi")
    assert t is not None and t.kind == M and t.receiver == "self" and t.partial == "wi"


def test_code_tail_blanks_strings_and_drops_comments():
    assert code_tail("x = 'a.b'  # c.d\ny = \"e\"") == f"x = {STR}  \ny = {STR}"
    assert code_tail('s = """doc\n"""\nt = s.') == f"s = {STR}\nt = s."
    assert code_tail("x = 'open") is None  # inside a string
    assert code_tail("x = '''a\\'''") is None  # the escaped quote does not close it
    assert code_tail("x = 1  # note") is None


def test_code_tail_window_keeps_a_string_that_crosses_it():
    text = 'x = """' + "a\n" * 3000 + '"""\ny = x.'
    tail = code_tail(text, window=100)
    assert tail is not None and tail.endswith("y = x.") and "a\n" not in tail


def test_safe_cut_reads_the_same_trigger_and_never_cuts_a_string():
    body = "".join(f"def f{i}(a):\n    return a.b{i}\n" for i in range(1500))
    doc = 'D = """\n' + "text\n" * 4000 + '"""\n'
    for text, most in ((body + "x = obj.pa", None), (doc + "x = obj.pa", 0),
                       (body + doc + "z = (a,\n b", len(body))):
        cut = safe_cut(text)
        assert cut <= len(text) - 8000 and (cut == 0 or text[cut - 1] == "\n")
        if most is not None:  # not after the docstring's first line
            assert cut <= most and (most == 0 or cut > 0)
        else:
            assert cut > len(text) - 8100
        assert code_tail(text[:cut]) is not None  # the cut is in code, not inside the docstring
        full, part = trigger(text), trigger(text[cut:])
        assert full is not None and part is not None
        assert (full.kind, full.partial, full.start) == (part.kind, part.partial, part.start + cut)
    assert safe_cut("x = 1\n") == 0


def test_literal_names_hold_each_string_prefix_with_each_quote():
    names = literal_names()
    assert {'f"', "f'", 'rb"', "Rb'", 'BR"'} <= set(names)
    assert all(n[-1] in "'\"" for n in names)


def test_candidates_names_and_matching():
    c = Candidates((Candidate("append", "function"), Candidate("extend", "function"),
                    Candidate("appendleft", "function")))
    assert c.names == ("append", "extend", "appendleft") and len(c) == 3
    assert [x.name for x in c.matching("app")] == ["append", "appendleft"]
