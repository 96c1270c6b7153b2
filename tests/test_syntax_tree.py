"""engine/syntax/tree.py: code point <-> byte offsets, incremental reparse equal to a fresh parse, and the
per-document cache (hits, incremental updates, LRU bound)."""

from __future__ import annotations

import pytest

from engine.syntax.languages import grammar_for
from engine.syntax.timing import generated, measure
from engine.syntax.tree import TextEdit, TreeCache, infer_edit, parse, parse_text, reparse


def sexp(tree) -> str:
    """The tree's structure (types and byte ranges) to compare two parses."""
    out = []
    stack = [tree.root]
    while stack:
        n = stack.pop()
        out.append(f"{n.type}:{n.start_byte}-{n.end_byte}")
        stack.extend(reversed(n.children))
    return " ".join(out)


def test_offsets_convert_between_code_points_and_bytes_for_non_ascii_text():
    text = 'const s = "héllo 😀";\nlet y = 1;\n'
    tree = parse("javascript", text)
    y = text.index("y")
    assert tree.source[tree.byte_at(y): tree.byte_at(y) + 1] == b"y"
    assert tree.offset_at(tree.byte_at(y)) == y
    assert not tree.ascii
    assert tree.node_text(tree.root.named_children[1]) == "let y = 1;"


def test_an_ascii_text_converts_offsets_as_the_identity():
    tree = parse("go", "package main\n")
    assert tree.ascii
    assert tree.byte_at(5) == 5 and tree.offset_at(5) == 5


def test_infer_edit_finds_the_span_between_the_common_prefix_and_suffix():
    assert infer_edit(b"abcdef", b"abXYef") == (2, 4, 4)
    assert infer_edit(b"abc", b"abxc") == (2, 2, 3)
    assert infer_edit(b"aaaa", b"aaa") == (3, 4, 3)
    assert infer_edit(b"same", b"same") == (4, 4, 4)


@pytest.mark.parametrize("language_id", ["javascript", "go", "python", "rust"])
def test_an_incremental_reparse_equals_a_fresh_parse(language_id):
    old = 'fn main() {\n    let x = 1;\n}\n' if language_id == "rust" else generated(language_id, 60)
    at = old.index("\n", len(old) // 2)
    edits = [TextEdit(at, at, " é("), TextEdit(at + 3, at + 3, ")")]
    new = old[:at] + " é()" + old[at:]
    previous = parse(language_id, old)
    given = reparse(previous, new, edits)
    inferred = reparse(previous, new)
    fresh = parse(language_id, new)
    assert sexp(given) == sexp(fresh)
    assert sexp(inferred) == sexp(fresh)
    assert previous.text == old and sexp(previous) == sexp(parse(language_id, old))  # left as it was


@pytest.mark.parametrize("language_id", ["javascript", "go", "python", "rust"])
def test_a_memoized_parse_from_the_last_text_equals_a_fresh_parse(language_id):
    """parse_text reparses from this thread's last text of the grammar (a keystroke's window is the last one
    and a character): every tree of a line typed character by character, then an unrelated text and an empty one,
    is the tree a parse from scratch gives."""
    from engine.syntax.tree import _parse_now, _thread_parser
    grammar = grammar_for(language_id)
    base = generated(language_id, 40)
    at = base.index("\n", len(base) // 2) + 1
    line = {"python": "    total = sum(x.price for x in ite", "go": "\ttotal := compute(items, func(x Item",
            "rust": "    let total: u64 = items.iter().map(|x| x.pr", "javascript": "  const total = items.map((x) => x.pr"}
    texts = [base[:at] + line[language_id][:k] + "\n" + base[at:] for k in range(len(line[language_id]) + 1)]
    texts += ["x = 1\n", ""]
    for text in texts:
        assert sexp(parse_text(grammar, text)) == sexp(_parse_now(grammar, text, _thread_parser(grammar))), text


def test_edits_that_do_not_lead_to_the_text_fall_back_to_a_fresh_parse():
    old = "let a = 1;\n"
    previous = parse("javascript", old)
    tree = reparse(previous, "let b = 2;\n", [TextEdit(0, 0, "zzz")])
    assert tree.text == "let b = 2;\n"
    assert sexp(tree) == sexp(parse("javascript", "let b = 2;\n"))


def test_the_cache_answers_the_same_version_from_memory_and_a_new_one_incrementally():
    cache = TreeCache()
    text = "function f() {\n  return 1;\n}\n"
    first = cache.get("file:///a.js", 1, text, "javascript")
    assert cache.get("file:///a.js", 1, text, "javascript") is first
    changed = text.replace("1;", "12;")
    second = cache.get("file:///a.js", 2, changed, "javascript", [TextEdit(text.index("1;") + 1, text.index("1;") + 1, "2")])
    assert second.text == changed
    assert sexp(second) == sexp(parse("javascript", changed))
    assert cache.stats == {"hit": 1, "incremental": 1, "full": 1}


def test_the_cache_parses_afresh_when_the_language_changes_and_forgets_a_language_without_grammar():
    cache = TreeCache()
    cache.get("file:///a", 1, "x = 1\n", "python")
    tree = cache.get("file:///a", 2, "x = 1\n", "javascript")
    assert tree.grammar.name == "javascript"
    assert cache.stats["full"] == 2
    assert cache.get("file:///a", 3, "x = 1\n", "plaintext") is None
    assert "file:///a" not in cache


def test_the_cache_keeps_the_most_recently_used_documents_only():
    cache = TreeCache(max_documents=2)
    for name in ("a", "b"):
        cache.get(f"file:///{name}.go", 1, "package main\n", "go")
    cache.get("file:///a.go", 1, "package main\n", "go")  # a is now the most recent
    cache.get("file:///c.go", 1, "package main\n", "go")
    assert len(cache) == 2
    assert "file:///a.go" in cache and "file:///c.go" in cache and "file:///b.go" not in cache


def test_a_parser_is_reused_per_grammar_and_a_fresh_parse_accepts_one():
    grammar = grammar_for("c")
    parser = grammar.parser()
    one = parse_text(grammar, "int x;\n", parser)
    two = parse_text(grammar, "int y;\n", parser)
    assert one.text == "int x;\n" and two.text == "int y;\n"
    assert not two.root.has_error


def test_timing_of_a_small_file_reports_every_measure():
    # the real figures (5,000 lines) are in docs/syntax.md; here only that the measuring runs
    m = measure("javascript", lines=200, edits=3)
    assert set(m) == {"size", "full", "incremental_edit", "incremental_inferred", "in_string_or_comment",
                      "is_complete", "statement_cut_points"}
    assert m["size"]["lines"] == 200
    assert all(v >= 0 for k, d in m.items() if k != "size" for v in d.values())
