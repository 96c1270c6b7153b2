"""bench_served_languages (issue 36): the pure parts: spot selection (line and block spots from a function body,
the seeded draw), the tree-sitter judge, the summary. No model, no server; small made-up functions stand for the
held-out corpora (which the fast tier does not fetch)."""

from __future__ import annotations

import pytest

from tests.scripts import load_script

sl = load_script("bench_served_languages")
from replay_corpus import Segment  # noqa: E402

GO_FILE = """package p

func sum(xs []int) int {
\ttotal := 0
\tfor _, x := range xs {
\t\ttotal += x
\t}
\t// the total
\treturn total
}
"""

JS_FILE = """function f(a, b) {
  const x = compute(a,
    b);
  const label = "a, b: " + x;
  if (x > 0) {
    return label;
  }
  return null;
}
"""


def _segment(text: str, language: str, name: str = "pkg/f.x:f") -> Segment:
    """The body between the braces of the file's one function, as replay_languages cuts it."""
    start = text.index("{\n") + 2
    end = text.rindex("\n}")
    return Segment(name, language, "f", text[:start], text[start:end], text[end:])


# ------------------------------------------------------------------------------------------------ spots


def test_mid_cuts_start_tokens_outside_strings_and_leave_enough():
    code = 'x = f("a b c", y)'
    cuts = sl.mid_cuts(code)
    assert 0 not in cuts  # the line's start is the other kind of spot
    assert all(len(code) - k >= sl.MIN_REST for k in cuts)
    # inside the string literal no cursor: the quote count before every cut is even
    assert not any(code.index('"') < k < code.rindex('"') + 1 for k in cuts)
    assert code.index("f") in cuts and code.index("=") in cuts


def test_line_spots_empty_the_rest_of_a_code_line_and_restore_the_file():
    import random

    seg = _segment(GO_FILE, "go")
    spots = sl.line_candidates(seg, "go", random.Random(1))
    truths = {s.expected for s in spots}
    # code lines only: the closer `}` and the comment are no candidates
    assert "}" not in truths and not any(t.startswith("//") for t in truths)
    assert len(spots) == 4
    for s in spots:
        assert s.prefix + s.expected + s.suffix == GO_FILE  # the truth puts the original back
        assert s.suffix.startswith("\n")  # the rest of the line is emptied, the lines below are kept
        assert s.kind == "line" and s.language == "go"
        if s.where == "line start":
            assert s.prefix.endswith("\t") and s.expected == s.expected.strip()
        else:
            assert s.where == "mid-line" and not s.prefix.endswith("\t")
    # over seeds both cursors occur: the generator decides per line
    wheres = {s.where for seed in range(8) for s in sl.line_candidates(seg, "go", random.Random(seed))}
    assert wheres == {"line start", "mid-line"}


def test_lines_inside_a_statement_over_lines_are_no_spots():
    import random

    seg = _segment(JS_FILE, "javascript")
    truths = [s.prefix[s.prefix.rfind("\n") + 1:].strip() + s.expected
              for s in sl.line_candidates(seg, "javascript", random.Random(0))]
    # the call over two lines is left out (its first line's truth ends mid-statement); a block header is kept
    assert not any("compute" in t or t == "b);" for t in truths)
    assert "if (x > 0) {" in truths and "return null;" in truths
    ternary = "function h(t) {\n  return isMap(t)\n    ? t.has(p)\n    : false\n}\n"
    spots = sl.line_candidates(_segment(ternary, "typescript"), "typescript", random.Random(0))
    # the ternary's continuation lines start no statement: only the line `return isMap(t)` could be one, and it
    # ends below (no header), so no line of this body is a spot
    assert spots == []
    assert sl.whole_statement_line("python", "def f():\n    x = 1\n", "def f():\n    x = 1\n    y = 2")
    assert not sl.whole_statement_line("python", "def f():\n", "def f():\n    d = {")


def test_block_spots_cut_only_between_statements_of_the_body():
    import random

    seg = _segment(JS_FILE, "javascript")
    spots = [sl.block_candidate(seg, "javascript", random.Random(seed)) for seed in range(40)]
    assert {s.where for s in spots} == {"whole body", "rest of body"}
    lines = seg.typed.split("\n")
    for s in spots:
        assert s.prefix + s.expected + s.suffix == JS_FILE
        assert s.kind == "block" and s.prefix.endswith("\n  ")  # an empty line at the body's indentation
        if s.where == "whole body":
            assert s.expected == seg.typed[2:]
        else:
            kept = s.prefix[len(seg.before):].count("\n")
            # never inside the open call (line 2) nor leaving fewer than MIN_BLOCK_LINES lines
            assert kept in (2, 3) and len(lines) - kept >= sl.MIN_BLOCK_LINES


def test_draw_is_fixed_by_the_seed_and_spreads_over_functions():
    segs = [_segment(GO_FILE, "go", f"pkg/f{i}.go:sum") for i in range(5)]
    a = sl.draw(segs, "go", 5, 3, seed=7)
    b = sl.draw(list(reversed(segs)), "go", 5, 3, seed=7)  # the input order does not matter
    c = sl.draw(segs, "go", 5, 3, seed=8)
    assert [(s.name, s.where, s.expected) for s in a] == [(s.name, s.where, s.expected) for s in b]
    assert [(s.name, s.where) for s in a] != [(s.name, s.where) for s in c]
    lines, blocks = [s for s in a if s.kind == "line"], [s for s in a if s.kind == "block"]
    assert len(lines) == 5 and len(blocks) == 3
    # round-robin: five line spots from five functions; a block per function at most
    assert len({s.name.rsplit(":", 1)[0] for s in lines}) == 5
    assert len({s.name.split(":")[0] for s in blocks}) == 3
    # every spot has its own name (outcomes refer to spots by name): a block starting on a line spot's line too
    every = sl.draw(segs, "go", 100, 5, seed=7)
    assert len({s.name for s in every}) == len(every)


def test_interleave_alternates_languages():
    mk = lambda lang, n: [sl.LangSpot(f"{lang}{i}", "line", "", "", "x", lang) for i in range(n)]  # noqa: E731
    order = sl.interleave({"go": mk("go", 2), "rust": mk("rust", 3)})
    assert [s.name for s in order] == ["go0", "rust0", "go1", "rust1", "rust2"]


# ------------------------------------------------------------------------------------------------ judge


def _go_line(k: int = 0):
    import random

    seg = _segment(GO_FILE, "go")
    return [s for s in sl.line_candidates(seg, "go", random.Random(0)) if s.where == "line start"][k]


def test_the_truth_is_judged_right_in_every_language():
    import random

    for text, lang in ((GO_FILE, "go"), (JS_FILE, "javascript")):
        seg = _segment(text, lang)
        spots = sl.line_candidates(seg, lang, random.Random(3)) + \
            [sl.block_candidate(seg, lang, random.Random(s)) for s in range(6)]
        check = sl.truth_check(spots)[lang]
        assert check["spots"] == len(spots)
        assert (check["not_exact"], check["duplicate"], check["mid_statement"], check["not_parses"]) == (0, 0, 0, 0)


def test_judge_flags_a_statement_left_open_and_a_file_that_no_longer_parses():
    spot = _go_line()
    o = sl.judge(spot, spot.expected[: spot.expected.index(":=") + 2] + " f(a,")
    assert o.shown and not o.exact and o.mid_statement and not o.parses
    right = sl.judge(spot, spot.expected)
    assert right.exact and right.edit_sim == 1.0 and not right.mid_statement and right.parses


def test_judge_rest_of_a_word_is_no_mid_statement_end():
    spot = sl.LangSpot("s", "line", "package p\n\nfunc f() {\n\tx := lengt", "\n}\n", "h(y)", "go")
    assert not sl.judge(spot, "h").mid_statement  # the word being typed: the statement was open before
    assert sl.judge(spot, "h(y,").mid_statement


def test_judge_flags_a_copy_of_the_line_below_and_a_closer_already_there():
    import random

    seg = _segment(GO_FILE, "go")
    spot = next(s for s in sl.line_candidates(seg, "go", random.Random(0)) if s.expected == "total := 0")
    o = sl.judge(spot, "total := 0\n\tfor _, x := range xs {")
    assert o.duplicate  # the next line written again
    block = sl.block_candidate(seg, "go", random.Random(0))
    closed = sl.judge(block, block.expected + "\n}")
    assert closed.duplicate and not closed.exact  # the function's `}` is already below


def test_a_block_left_open_after_its_tabs_is_no_mid_statement_end():
    import random

    block = sl.block_candidate(_segment(GO_FILE, "go"), "go", random.Random(0))
    assert block.where == "whole body"
    o = sl.judge(block, "total := 0\n\tfor _, x := range xs {\n\t\ttotal += x")
    # the statements are whole (a ghost there is fine), the for's block is open: left_open, and the file is broken
    assert o.left_open and not o.mid_statement and not o.parses
    assert not sl.judge(block, block.expected).left_open
    line = _go_line()
    assert not sl.judge(line, "for _, x := range xs {").left_open  # line spots: never judged for it


def test_empty_insertion_is_a_miss_not_a_flag():
    spot = _go_line()
    o = sl.judge(spot, "")
    assert not o.shown and not o.exact and not o.duplicate and not o.mid_statement
    assert o.edit_sim == 0.0


# ------------------------------------------------------------------------------------------------ summary


def _o(lang, kind, req, ms, shown=True, exact=False, mid=False):
    return sl.Outcome("s", lang, kind, "", req, True, "x" if shown else "", exact, 1.0 if exact else 0.5, shown,
                      False, mid, True, ms)


def test_summary_rows_per_language_kind_and_request():
    outs = [_o("go", "line", "automatic", ms, exact=ms == 10) for ms in (10, 20, 30, 40)] + \
        [_o("go", "line", "automatic", 1000, shown=False)] + \
        [_o("rust", "block", "invoked", 50, mid=True), _o("python", "line", "invoked", 5)]
    rows = sl.summarize(outs)
    assert [(r["language"], r["spots"], r["request"]) for r in rows] == [
        ("python", "line", "invoked"), ("go", "line", "automatic"), ("rust", "block", "invoked")]
    go = rows[1]
    assert go["n"] == 5 and go["exact"] == 0.2 and go["shown"] == 0.8
    assert go["latency_p50_ms"] == 30.0  # the ordinary median of 10, 20, 30, 40, 1000
    assert go["latency_mean_ms"] == 220.0
    assert 40.0 < go["latency_p95_ms"] <= 1000.0
    assert rows[2]["mid_statement"] == "1/1" and go["mid_statement"] == "0/4"
    assert go["fresh_p50_ms"] == 30.0 and go["warm_p50_ms"] is None  # every made-up outcome is fresh


def test_quantile_interpolates_and_handles_tiny_samples():
    assert sl.quantile([], 0.95) is None
    assert sl.quantile([7.0], 0.95) == 7.0
    assert sl.quantile([0.0, 100.0], 0.5) == 50.0
    assert sl.quantile([0.0, 100.0], 0.95) == pytest.approx(95.0)


def test_report_keeps_the_notes_written_by_hand(tmp_path):
    spot = _go_line()
    meta = {"command": "c", "commit": "x", "date": "d", "cpu": "cpu", "machine": "m", "load": "1", "model": "q",
            "threads": 2, "lines": 1, "blocks": 0, "seed": 1, "tab_rounds": 3, "patience": 1, "gap": 1,
            "variants_wait": 1, "spots": [(spot.name, spot.where)]}
    outs = [sl.judge(spot, spot.expected, "automatic", True, 12.0)]
    first = sl.write(tmp_path, "r", meta, outs, [spot])
    assert "| go | line | automatic | 1 | 1.000 |" in first and "\nSpots: " in first
    path = tmp_path / "r.md"
    path.write_text(first.replace("\nSpots: ", "\n" + sl.NOTES + "\n\nGo reads well.\n\nSpots: ", 1))
    again = sl.write(tmp_path, "r", meta, outs, [spot])
    assert "Go reads well." in again and again.index("Go reads well.") < again.index("\nSpots: ")
    assert again.count(sl.NOTES) == 1
