"""engine/syntax/queries.py with the real grammars: strings and comments at a cursor, complete statements
and blocks, where a text leaves its block, brackets, definitions with their signatures and outlines.

A document with a cursor is written with █ where the cursor is."""

from __future__ import annotations

import pytest

from engine.syntax.queries import (
    block_is_complete,
    complete_statement_end,
    definitions,
    enclosing_block,
    enclosing_definition,
    first_stray_closer,
    has_error_in,
    in_string_or_comment,
    is_complete,
    last_cut_point,
    open_brackets,
    outlines,
    repeats_following_lines,
    scope_end,
    statement_cut_points,
    statement_window,
)
from engine.syntax.tree import parse

CURSOR = "█"


def at_cursor(language_id: str, doc: str) -> bool:
    offset = doc.index(CURSOR)
    tree = parse(language_id, doc.replace(CURSOR, ""))
    return in_string_or_comment(tree, offset)


# ---- strings and comments ------------------------------------------------------------------------------
@pytest.mark.parametrize("language_id, doc", [
    ("javascript", "const s = `total: █ ${n}`;"),
    ("javascript", "const s = `total: ${n}█ items`;"),
    ("javascript", "const s = `first line\nsecond █line`;"),
    ("typescript", 'let x: string = "a█";'),
    ("javascript", "x = 1; // a note█\ny = 2;"),
    ("javascript", "x = /* a █ b */ 1;"),
    ("javascript", 'function f() {\n  x = "unterminated█\n  y = 2;\n}\n'),
    ("rust", "let c = 'x█';"),
    ("rust", 'let s = r#"a "quoted" █word"#;'),
    ("rust", "/// doc █comment\nfn f() {}"),
    ("go", "func f() { s := `raw\nli█ne` }"),
    ("go", "func f() { r := 'x█' }"),
    ("python", 'x = f"a {b} █c"'),
    ("python", 'def f():\n    """doc\n    mo█re"""\n'),
    ("python", "x = 1  # c█"),
    ("c", "int x; /* c █ */"),
    ("java", 'String s = """\n  text █ block\n  """;'),
])
def test_the_cursor_is_in_a_string_or_comment(language_id, doc):
    assert at_cursor(language_id, doc)


@pytest.mark.parametrize("language_id, doc", [
    ("javascript", "const s = `total: ${n█ + 1} items`;"),  # code inside a template literal
    ("javascript", 'const s = "abc"█;'),  # right after the closing quote
    ("javascript", 'const s = █"abc";'),
    ("javascript", "x = 1; // a note\n█y = 2;"),
    ("javascript", "x = /* a b */█ 1;"),
    ("typescript", 'let x: stri█ng = "a";'),  # the `string` keyword is no string
    ("rust", "fn f<'a>(s: &'a█ str) {}"),  # a lifetime is no character literal
    ("rust", 'let s = r#"a "quoted" word"#█;'),
    ("python", 'x = f"a {b█} c"'),
    ("go", "func f() {\n\tx := 1█\n}"),
])
def test_the_cursor_is_in_code(language_id, doc):
    assert not at_cursor(language_id, doc)


# ---- complete statements -------------------------------------------------------------------------------
JS_FN = "function f(a) {\n  "
RUST_FN = "fn f(a: i32) {\n    "
GO_FN = "func f(a int) {\n\t"
JAVA_M = "class A {\n  void f(int a) {\n    "


@pytest.mark.parametrize("language_id, before, completion, line_suffix", [
    ("javascript", JS_FN + "const x = ", "foo(a, b)", ""),
    ("javascript", JS_FN + "foo(a, ", "b", ""),  # inside a call the rest follows
    ("javascript", JS_FN + "foo(a, ", "b", ")"),  # an auto-closed paren after the cursor
    ("javascript", JS_FN, "for (const b of xs) {", ""),  # a header: its body comes next
    ("javascript", JS_FN + "const s = `a ${", "x}`", ""),
    ("typescript", "function f(a: number): string {\n  return ", "a.toString()", ""),
    ("java", JAVA_M + "int x = ", "foo();", ""),
    ("java", JAVA_M + "int x = ", "foo()", ""),  # the `;` is the user's to type
    ("rust", RUST_FN + "let x = ", "foo(a);", ""),
    ("rust", "fn f<'a>(s: &'a str) {\n    let c = ", "'x';", ""),
    ("rust", RUST_FN, "if a > 1 {", ""),
    ("go", GO_FN + "x := foo(a,\n\t\t", "b)", ""),
    ("go", GO_FN, "for i := range xs {", ""),
    ("c", "int f() {\n  int x = ", "g(1);", ""),
    ("python", "def f(a):\n    ", "for b in a:", ""),
])
def test_a_complete_statement_or_header(language_id, before, completion, line_suffix):
    assert is_complete(language_id, before, completion, line_suffix) is True


@pytest.mark.parametrize("language_id, before, completion", [
    ("javascript", JS_FN + "const x = ", "foo(a, b"),
    ("javascript", JS_FN + "const x = ", "a +"),
    ("javascript", JS_FN, "for (const b of"),
    ("javascript", JS_FN, "for (const b of xs)"),  # a header without its body
    ("javascript", JS_FN + "foo(a, ", "b +"),
    ("javascript", JS_FN + "this.", "insert"),  # a bare attribute: still being written
    ("javascript", JS_FN + "const s = `a ${", "x} b"),  # the template literal is left open
    ("javascript", JS_FN + "const x = ", "foo(a))"),  # a closer that closes nothing
    ("typescript", "function f(a: number): string {\n  return ", "a."),
    ("java", JAVA_M + "int x = ", "a +"),
    ("rust", RUST_FN + "let x = ", ""),
    ("rust", RUST_FN, "if a > 1"),
    ("go", GO_FN, "for i := range"),
    ("go", GO_FN + "x := ", ""),
    ("c", "int f() {\n  int x = ", "g(1"),
    ("python", "def f(a):\n    ", "for b in"),
])
def test_a_statement_cut_in_its_middle(language_id, before, completion):
    assert is_complete(language_id, before, completion) is False


def test_a_statement_in_a_class_method_is_judged_with_the_class_around_it():
    before = "class Cart {\n  add(item) {\n    this.items.push(item);\n    const n = "
    assert statement_window(before) == before
    assert is_complete("javascript", before, "this.items.length;") is True
    assert is_complete("javascript", before, "this.items.length +") is False


def test_a_blank_line_inside_a_body_counts_at_the_body_indentation():
    before = "fn f() {\n    let a = 1;\n"  # the editor stripped the blank line's indentation
    assert statement_window(before) == before
    assert is_complete("rust", before, "let b = a + 1;") is True


def test_the_headers_of_a_long_class_come_alone_before_the_window():
    members = "".join(f"  m{i}() {{\n    return {i};\n  }}\n" for i in range(40))
    before = "class Command extends Base {\n" + members + "  opts() {\n    const x = "
    window = statement_window(before)
    # the class line, then at most 60 lines from a member's start
    assert window.startswith("class Command extends Base {\n  m") and window.endswith("  opts() {\n    const x = ")
    assert window.count("\n") <= 61
    assert is_complete("javascript", before, "this.x;") is True  # a method header parses in its class
    after_method = "class Command extends Base {\n" + members + "  "
    assert is_complete("javascript", after_method, "helpOption(flags, description) {") is True


def test_a_generic_class_header_over_several_lines_comes_whole():
    # `> extends Removable {` closes the type parameters opened above: a window starting there parses as
    # nothing, and every cut of every completion in the class was judged incomplete (an empty answer)
    params = "".join(f"  T{i} = unknown,\n" for i in range(5))
    members = "".join(f"  m{i}() {{\n    return this.#x + {i}\n  }}\n\n" for i in range(20))
    before = f"export class Mutation<\n{params}> extends Removable {{\n  #x = 1\n\n{members}  run() {{\n    if (!th"
    window = statement_window(before)
    assert window.startswith(f"export class Mutation<\n{params}> extends Removable {{\n")
    assert is_complete("typescript", before, "is.#x) {") is True
    assert last_cut_point("typescript", before, "is.#x) {\n      return foo(") >= len("is.#x) {")


def test_a_far_signature_over_several_lines_comes_whole():
    # a long method whose parameters stand one a line: its header alone (`  run(`) parsed as nothing
    body = "".join(f"    const v{i} = this.#x + {i}\n" for i in range(70))
    before = ("class A {\n  #x = 1\n  run(\n    a: number,\n    b: string,\n  ): void {\n" + body +
              "    if (a) {\n      thi")
    assert "  run(\n    a: number,\n    b: string,\n  ): void {\n" in statement_window(before)
    assert is_complete("typescript", before, "s.#notify()") is True
    # a private method's header (`#run(`) is no `#` comment
    private = before.replace("  run(\n    a: number,\n    b: string,\n  ): void {", "  #run(a: number): void {")
    assert statement_window(private).startswith("class A {\n  #run(a: number): void {\n")
    py = "class A:\n    def run(\n        self,\n        a,\n    ) -> None:\n" + \
        "".join(f"        v{i} = a + {i}\n" for i in range(70)) + "        if a:\n            pri"
    assert "    def run(\n        self,\n        a,\n    ) -> None:\n" in statement_window(py)


def test_lines_of_a_multi_line_string_are_no_headers():
    before = "const msg = `first\nExpecting one of ${xs}`;\nfunction f() {\n  const x = "
    assert statement_window(before) == "function f() {\n  const x = "
    assert is_complete("javascript", before, "msg.length;") is True


def test_an_allman_brace_brings_its_header():
    before = "class A\n{\n    void F()\n    {\n        int x = "
    assert statement_window(before) == before
    assert is_complete("csharp", before, "G(1);") is True
    assert is_complete("csharp", before, "G(1") is False


def test_the_cut_points_are_the_token_ends_where_the_statement_is_complete():
    before = JS_FN + "const total = "
    completion = "items.reduce((acc, x) => acc + x, 0) + tax"
    points = statement_cut_points("javascript", before, completion)
    # `items` alone is cut from its call; inside the call nothing is complete
    assert points == [completion.index(" + tax"), len(completion)]
    assert complete_statement_end("javascript", before, completion) == completion.index(" + tax")


def test_a_completion_with_no_complete_cut_has_no_cut_points():
    assert statement_cut_points("go", GO_FN, "for i := range") == []
    assert complete_statement_end("go", GO_FN, "for i := range") is None


def test_the_first_statement_end_of_a_multi_line_completion():
    completion = "x := compute(a,\n\t\tb)\n\ty := x * 2"
    end = complete_statement_end("go", GO_FN, completion)
    assert completion[:end] == "x := compute(a,\n\t\tb)"


# ---- blocks --------------------------------------------------------------------------------------------
def test_a_block_is_complete_when_it_closes_every_brace_it_opens():
    body = "for (const b of xs) {\n    total += b;\n  }"
    assert block_is_complete("javascript", JS_FN, body) is True
    assert block_is_complete("javascript", JS_FN, "for (const b of xs) {\n    total += b;") is False
    assert block_is_complete("javascript", JS_FN, "for (const b of xs) {") is False  # a dangling header
    assert block_is_complete("rust", RUST_FN, "if a > 1 {\n        return;\n    }") is True
    assert block_is_complete("go", GO_FN, "if a > 1 {\n\t\treturn\n\t}\n\tx := f(a,") is False


def test_scope_end_is_the_brace_that_closes_the_cursors_block():
    before = "function f(a) {\n  if (a) {\n    "
    completion = "x();\n  }\n  y();\n}\n"
    assert scope_end("javascript", before, completion) == completion.index("}")
    # braces in strings and comments and a call's closing paren do not close the block
    completion = 'x := "}"\n\t// }\n\treturn\n}\n'
    assert scope_end("go", "func f() {\n\t", completion) == completion.rindex("}")
    assert scope_end("javascript", JS_FN + "foo(a, ", "b);\n  bar();") is None


def test_enclosing_block_tells_its_extent_indentation_and_what_follows():
    doc = "function f(a) {\n  const x = 1;\n  █\n  return x;\n}\n"
    block = enclosing_block(parse("javascript", doc.replace(CURSOR, "")), doc.index(CURSOR))
    assert (block.header_indent, block.body_indent, block.closed, block.statements_after) == (0, 2, True, True)
    doc = "func f() {\n\tif x {\n\t\t█\n\t}\n}\n"
    block = enclosing_block(parse("go", doc.replace(CURSOR, "")), doc.index(CURSOR))
    assert (block.header_indent, block.body_indent, block.statements_after) == (4, None, False)


def test_a_blank_line_after_a_python_block_belongs_to_the_block_its_indentation_names():
    text = "class A:\n    def f(self):\n        if x:\n            y = 1\n"
    inner = enclosing_block(parse("python", text + "        "), len(text) + 8)
    outer = enclosing_block(parse("python", text + "    "), len(text) + 4)
    assert (inner.header_indent, inner.body_indent) == (4, 8)
    assert (outer.header_indent, outer.body_indent) == (0, 4)


def test_has_error_in_a_range():
    text = "function f() {\n  x = (1;\n}\nfunction g() { return 1; }\n"
    tree = parse("javascript", text)
    assert has_error_in(tree, text.index("x ="), text.index(";"))
    assert not has_error_in(tree, text.index("function g"), len(text))


# ---- brackets ------------------------------------------------------------------------------------------
def test_open_brackets_skip_strings_and_template_text():
    assert open_brackets("javascript", "function f() {\n  foo(`)${[1, ") == ("{", "(", "${", "[")
    assert open_brackets("rust", "fn f<'a>(x: &'a str) {\n  let v = vec![") == ("{", "[")
    assert open_brackets("python", "x = foo(')', [1,") == ("(", "[")


def test_first_stray_closer_in_an_inserted_text():
    assert first_stray_closer("javascript", "function f() {\n  foo(", "a)) + 1") == 2
    assert first_stray_closer("javascript", "function f() {\n  foo(", "')', a)") is None
    assert first_stray_closer("plaintext", "", ")") is False


# ---- definitions ---------------------------------------------------------------------------------------
GO_SRC = """package store

// Store keeps values.
type Store struct {
\titems map[string]int
}

// Get returns a value.
func (s *Store) Get(k string) (int, error) {
\tv, ok := s.items[k]
\tif !ok {
\t\treturn 0, errNotFound
\t}
\treturn v, nil
}
"""

RUST_SRC = """/// A point.
#[derive(Debug, Clone)]
pub struct Point { pub x: f64, pub y: f64 }

impl Point {
    /// Distance to the origin.
    pub fn norm(&self) -> f64 {
        (self.x * self.x + self.y * self.y).sqrt()
    }
}

pub trait Shape { fn area(&self) -> f64; }
"""

TS_SRC = """export interface Item { id: number; name: string }

export class Cart<T extends Item> extends Base {
  private items: T[] = [];
  add(item: T): void {
    this.items.push(item);
  }
}

export const price = async (item: Item, qty = 1): Promise<number> => {
  return item.id * qty;
};
"""

PY_SRC = '''@dataclass
class Point:
    """A point."""
    x: int = 0

    def norm(self) -> float:
        """Its norm."""
        return (self.x ** 2) ** 0.5
'''

JAVA_SRC = """/** A cart. */
public class Cart extends Base {
  public Cart() { super(); }
  public int total(int discount) throws IOException {
    return items.size() - discount;
  }
}
"""

C_SRC = "struct point { int x; int y; };\nstatic int *find(int a, char **b) {\n  return 0;\n}\n"


def sigs(language_id: str, source: str) -> list[tuple[str, str, str | None, str]]:
    return [(d.kind, d.name, d.parent, d.signature) for d in definitions(parse(language_id, source))]


def test_go_definitions_with_signatures():
    assert sigs("go", GO_SRC) == [
        ("type", "Store", None, "type Store struct"),
        ("method", "Get", None, "func (s *Store) Get(k string) (int, error)"),
    ]


def test_rust_definitions_with_signatures():
    assert sigs("rust", RUST_SRC) == [
        ("struct", "Point", None, "pub struct Point"),
        ("impl", "Point", None, "impl Point"),
        ("function", "norm", "Point", "pub fn norm(&self) -> f64"),
        ("trait", "Shape", None, "pub trait Shape"),
        ("function", "area", "Shape", "fn area(&self) -> f64;"),
    ]


def test_typescript_definitions_with_signatures_include_arrow_functions():
    assert sigs("typescript", TS_SRC) == [
        ("interface", "Item", None, "export interface Item"),
        ("class", "Cart", None, "export class Cart<T extends Item> extends Base"),
        ("method", "add", "Cart", "add(item: T): void"),
        ("function", "price", None, "export const price = async (item: Item, qty = 1): Promise<number> =>"),
    ]


def test_python_java_and_c_definitions_with_signatures():
    assert sigs("python", PY_SRC) == [
        ("class", "Point", None, "@dataclass\nclass Point:"),
        ("function", "norm", "Point", "def norm(self) -> float:"),
    ]
    assert sigs("java", JAVA_SRC) == [
        ("class", "Cart", None, "public class Cart extends Base"),
        ("constructor", "Cart", "Cart", "public Cart()"),
        ("method", "total", "Cart", "public int total(int discount) throws IOException"),
    ]
    assert sigs("c", C_SRC) == [
        ("struct", "point", None, "struct point"),
        ("function", "find", None, "static int *find(int a, char **b)"),
    ]


@pytest.mark.parametrize("language_id, source, expected", [
    ("csharp", "namespace N { class A { int F(int a) { return a; } } }\n",
     [("namespace", "N", None), ("class", "A", "N"), ("method", "F", "A")]),
    ("cpp", "namespace n { class A { int f(int a) { return a; } }; }\n",
     [("namespace", "n", None), ("class", "A", "n"), ("function", "f", "A")]),
    ("kotlin", "class A { fun f(a: Int): Int { return a } }\n", [("class", "A", None), ("function", "f", "A")]),
    ("ruby", "class A\n  def f(a)\n    a\n  end\nend\n", [("class", "A", None), ("method", "f", "A")]),
])
def test_definitions_in_more_languages(language_id, source, expected):
    assert [(d.kind, d.name, d.parent) for d in definitions(parse(language_id, source))] == expected


def test_enclosing_definition_is_the_innermost_one_local_functions_included():
    src = "class A {\n  m(a: number) {\n    const f = (x) => {\n      return x;\n    };\n  }\n}\n"
    tree = parse("typescript", src)
    inner = enclosing_definition(tree, src.index("return x"))
    assert (inner.kind, inner.name, inner.parent, inner.signature) == ("function", "f", "m", "const f = (x) =>")
    method = enclosing_definition(tree, src.index("const f"))
    assert (method.name, method.parent) == ("m", "A")
    assert enclosing_definition(parse("go", GO_SRC), 0) is None


def test_outlines_keep_doc_comments_and_fields_and_replace_bodies():
    # name -> (the definition's line, 0-based, as regex_definitions gives it; its outline)
    go = outlines(parse("go", GO_SRC))
    assert go["Get"] == (8, "// Get returns a value.\nfunc (s *Store) Get(k string) (int, error) { ... }\n")
    assert go["Store"] == (3, "// Store keeps values.\ntype Store struct {\n\titems map[string]int\n}\n")
    ts = outlines(parse("typescript", TS_SRC), ["Cart"])
    assert ts == {"Cart": (2, "export class Cart<T extends Item> extends Base {\n  private items: T[] = [];\n"
                              "  add(item: T): void { ... }\n}\n")}


def test_a_rust_type_and_its_impl_blocks_share_one_outline():
    line, text = outlines(parse("rust", RUST_SRC))["Point"]
    assert line == 2  # the struct's own line; its doc comment and attribute come with it
    assert text == ("/// A point.\n#[derive(Debug, Clone)]\npub struct Point { pub x: f64, pub y: f64 }\n"
                    "impl Point {\n    /// Distance to the origin.\n    pub fn norm(&self) -> f64 { ... }\n}\n")


def test_a_python_outline_keeps_docstrings():
    assert outlines(parse("python", PY_SRC))["Point"][1] == (
        '@dataclass\nclass Point:\n    """A point."""\n    x: int = 0\n\n'
        '    def norm(self) -> float:\n        """Its norm."""\n        ...\n')


# ---- repetition of the code below -------------------------------------------------------------------
def test_a_completion_that_rewrites_the_next_statement_over_other_lines():
    completion = "x = 1;\nfoo(a,\n    b);"
    assert repeats_following_lines("javascript", completion, "\nfoo(a, b);\nbar();") == completion.index("foo")
    assert repeats_following_lines("javascript", "x = 1;\ny = 2;", "\nfoo(a, b);\nbar();") is None
    assert repeats_following_lines("plaintext", "x\ny", "\nz") is None


# ---- no grammar ----------------------------------------------------------------------------------------
def test_every_query_answers_none_for_a_language_without_grammar():
    assert is_complete("plaintext", "x = ", "1") is None
    assert block_is_complete("plaintext", "", "{") is None
    assert statement_cut_points("no-such-language", "", "a b") is None
    assert scope_end(None, "{", "}") is None
    assert open_brackets("", "(") is None


def test_a_cursor_line_whose_indentation_is_being_typed_keeps_the_header_above():
    from engine.syntax.queries import is_complete, statement_window

    prefix = ("impl<L, R> Either<L, R> {\n    pub fn either_with<F>(self, f: F) -> T\n    where\n"
              "        F: FnOnce(L) -> T,\n    {\n ")
    assert "where" in statement_window(prefix)
    assert is_complete("rust", prefix, "match self {") is True


def test_an_allman_brace_after_a_where_clause_keeps_the_whole_header():
    from engine.syntax.queries import is_complete, statement_window

    prefix = ("impl<A: Array> SmallVec<A>\nwhere\n    A::Item: Clone,\n{\n    /// Resizes.\n"
              "    pub fn resize(&mut self, len: usize) {\n        let")
    assert statement_window(prefix).startswith("impl<A: Array> SmallVec<A>\nwhere")
    assert is_complete("rust", prefix, " mut new_len = len;") is True


def test_last_cut_point_is_the_last_of_the_cut_points():
    from engine.syntax.queries import last_cut_point
    prefix = "function f(a) {\n  "
    for text in ["const y = total + tax +", "x = 1;\nconst y = foo(a, b", "if (a) {\n    g(a);\n  }\n  h(", "foo(",
                 "xs.forEach(d => {"]:
        points = statement_cut_points("javascript", prefix, text)
        assert last_cut_point("javascript", prefix, text) == (max(points) if points else 0)
    assert last_cut_point("javascript", prefix, "foo(") == 0
    assert last_cut_point("no-such-language", prefix, "foo(") is None
