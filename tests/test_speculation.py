"""Speculation planning (engine/text/budget.py skip_reason, engine/text/window.py window_start): pure
functions, checked alone."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.text.budget import skip_reason
from engine.text.window import window_start

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
