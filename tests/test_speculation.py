"""Speculation planning (engine/policy/speculation.py): pure functions, checked alone."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.policy.speculation import (
    futures,
    next_indent,
    skip_reason,
    window_start,
)

# ---------------------------------------------------------------------------------------------- futures


def test_single_line_suggestion_futures_are_accepted_and_the_next_line():
    prefix, suffix = "x = compute(", "\nprint(x)\n"
    fs = futures(prefix, suffix, "a, b)")
    assert [(f.kind, f.prefix, f.suffix) for f in fs] == [
        ("accepted", "x = compute(a, b)", "\nprint(x)\n"),
        ("accepted-newline", "x = compute(a, b)\n", "\nprint(x)\n"),
    ]
    fs = futures("def f():\n    y = ", "\n", "1")
    assert fs[1].prefix == "def f():\n    y = 1\n    "  # the editor keeps the indentation


def test_block_futures_include_its_first_line_accepted():
    prefix = "def f(n):\n    "
    text = "if n < 2:\n        return n\n    return f(n - 1) + f(n - 2)"
    fs = futures(prefix, "\n", text)
    kinds = {f.kind: f for f in fs}
    assert set(kinds) == {"accepted", "accepted-newline", "first-line-newline"}
    assert kinds["first-line-newline"].prefix == prefix + "if n < 2:\n        "  # one level deeper
    assert kinds["accepted"].prefix == prefix + text


def test_replaced_closers_leave_the_suffix():
    fs = futures('print(', ')\nnext()\n', '"hi")', replace=1)
    assert fs[0].prefix == 'print("hi")' and fs[0].suffix == "\nnext()\n"
    assert fs[1].prefix == 'print("hi")\n'


def test_next_indent():
    assert next_indent("x = 1") == ""
    assert next_indent("def f():\n    x = 1") == "    "
    assert next_indent("def f():\n    if x:") == "        "
    assert next_indent("\tif x {") == "\t\t"
    assert next_indent("call(") == "    "


def test_no_newline_future_when_code_follows_on_the_line():
    fs = futures("a = ", " + offset\n", "base")
    assert [f.kind for f in fs] == ["accepted"]
    assert futures("a = ", "\n", "") == []


@given(st.text(max_size=30), st.text(max_size=30), st.text(min_size=1, max_size=30))
def test_futures_are_distinct_and_continue_the_prefix(prefix, suffix, text):
    fs = futures(prefix, suffix, text)
    assert len({(f.prefix, f.suffix) for f in fs}) == len(fs)
    assert all(f.prefix.startswith(prefix) and len(f.prefix) > len(prefix) for f in fs)
    assert fs[0].prefix == prefix + text


# ---------------------------------------------------------------------------------------------- skip


def test_skip_rules():
    assert skip_reason("x = val", "ue + 1", invoked=False) == "inside a word"
    assert skip_reason("x = ", " compute(a, b, c) + offset", invoked=False) == "text right of the cursor"
    assert skip_reason("x = ", " compute(a, b, c) + offset", invoked=True) is None  # asked for: served
    assert skip_reason("print(", ")", invoked=False) is None  # auto-closed: fine
    assert skip_reason('f(', '"")', invoked=False) is None
    assert skip_reason("area = math.pi * ", "  # square it", invoked=False) is None  # a comment
    assert skip_reason("foo(", ", bar)", invoked=False) is None  # short
    assert skip_reason("    ", "", invoked=False) is None


# ---------------------------------------------------------------------------------------------- window


def test_short_files_start_at_the_top():
    text = "a = 1\n" * 100
    assert window_start(text, len(text), 6000) == 0


def test_window_is_bounded_line_aligned_and_moves_rarely():
    text = "".join(f"line number {i:05d}\n" for i in range(2000))  # 36k characters
    starts = []
    prev = None
    for offset in range(20000, 26000, 7):  # typing forward
        s = window_start(text, offset, 6000, previous=prev)
        assert 0 < offset - s <= 6000
        assert text[s - 1] == "\n"
        starts.append(s)
        prev = s
    moves = sum(a != b for a, b in zip(starts, starts[1:], strict=False))
    assert moves <= 6000 // 1024 + 1  # once per quantum typed, not per keystroke
    # a fresh start leaves room to type: no move within the next quantum of characters
    first = window_start(text, 14171, 6000)
    assert all(window_start(text, 14171 + d, 6000, previous=first) == first for d in range(0, 1000, 10))


def test_window_without_history_depends_on_the_position_only():
    text = "".join(f"x{i} = {i}\n" for i in range(5000))
    assert window_start(text, 30000, 6000) == window_start(text, 30000, 6000, previous=None)
    # an invalid previous start (not a line start, or too far back) is replaced
    assert window_start(text, 30000, 6000, previous=30000 - 7000) == window_start(text, 30000, 6000)
    mid_line = text.index("\n", 26000) + 3
    assert window_start(text, 30000, 6000, previous=mid_line) == window_start(text, 30000, 6000)


@given(st.integers(0, 30000), st.integers(100, 8000), st.one_of(st.none(), st.integers(0, 30000)))
def test_window_always_fits(offset, max_chars, previous):
    text = ("abc def\n" * 4000)[:30000]
    s = window_start(text, offset, max_chars, previous=previous)
    assert 0 <= s <= offset and offset - s <= max_chars
