"""engine/text/rank.py: variants ordered by what inserting them is worth."""

from __future__ import annotations

import pytest

from engine.text.rank import kind, rank


@pytest.mark.parametrize("text,expected", [
    ("return a + b", "code"),
    ("# Increase depth for an opening parenthesis", "comment"),
    ("# a\n    // b", "comment"),
    ('"""Return the sum."""', "comment"),
    ('"""Return\n    the sum.\n    """', "comment"),
    ("# Your code here\n    pass", "placeholder"),
    ("pass", "placeholder"),
    ("...", "placeholder"),
    ("raise NotImplementedError", "placeholder"),
    ('raise NotImplementedError("later")', "placeholder"),
    ("todo!()", "placeholder"),
    ("# check the input\n    if not xs:\n        return 0", "code"),
    ('"""Sum."""\n    return sum(xs)', "code"),
    ("if x:\n        pass", "code"),
])
def test_kind(text, expected):
    assert kind(text) == expected


def test_code_goes_before_comments_and_placeholders():
    texts = ["# Your code here\n    pass", "# Increase depth", "depth += 1", "return depth"]
    assert rank(texts) == [2, 3, 1, 0]


def test_model_order_kept_within_a_kind_and_nothing_dropped():
    texts = ["# a", "# b", "pass"]
    assert rank(texts) == [0, 1, 2]
    assert rank([]) == []


def test_incomplete_code_follows_complete_code():
    texts = ["for b in", "x = 1", "# c"]
    assert rank(texts, incomplete=lambda t: t.endswith(" in")) == [1, 0, 2]


def test_order_at_cursor_puts_unfinished_code_after_finished_code():
    from engine.text.rank import order_at_cursor

    prefix = "def f(xs):\n    "
    assert order_at_cursor(["for x in", "return sum(xs)", "# sum them"], prefix, "\n") == [1, 0, 2]


def test_docstrings_are_prose_in_python_only():
    assert kind('"""Return the area."""', "python") == "comment"
    assert kind('"""Return the area."""') == "comment"  # unknown language: as Python
    assert kind('"""Return the area."""', "kotlin") == "code"  # a raw string literal there
