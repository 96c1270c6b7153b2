"""engine/edits/history.py: edits as small diffs, bursts coalesced, bounded, undoable."""

from __future__ import annotations

import random

import pytest

from engine.edits.history import Edit, EditHistory, diff_texts, edits_from_versions, trim


def _type(h: EditHistory, doc: str, at: int, text: str, now: float = 0.0) -> None:
    for i, ch in enumerate(text):
        h.change(doc, at + i, at + i, ch, now=now)


def _backspace(h: EditHistory, doc: str, end: int, n: int, now: float = 0.0) -> None:
    for i in range(n):
        h.change(doc, end - i - 1, end - i, "", now=now)


def test_trim():
    assert trim(10, "foo(a)", "foo(b)") == (14, "a", "b")
    assert trim(0, "abc", "abc") == (3, "", "")
    assert trim(0, "aa", "aaa") == (2, "", "a")


def test_rename_by_keystrokes_is_one_edit():
    h = EditHistory()
    src = "def f(value):\n    return value + 1\n"
    h.open("d", src, 1)
    at = src.index("value")
    _backspace(h, "d", at + 5, 5)
    _type(h, "d", at, "amount")
    (e,) = h.edits("d")
    assert (e.start, e.old_text, e.new_text, e.line) == (at, "value", "amount", 0)
    assert h.text("d") == src.replace("value", "amount", 1)
    assert h.text_before("d") == src


def test_extending_a_name_is_an_insertion():
    h = EditHistory()
    h.open("d", "x = count\n")
    _type(h, "d", 9, "_all")
    (e,) = h.edits("d")
    assert (e.start, e.old_text, e.new_text) == (9, "", "_all")


def test_selection_replaced_then_typed():
    h = EditHistory()
    src = "a = 1\nb = total * 2\n"
    h.open("d", src)
    at = src.index("total")
    h.change("d", at, at + 5, "s", now=0.0)
    _type(h, "d", at + 1, "um", now=0.5)
    (e,) = h.edits("d")
    assert (e.start, e.old_text, e.new_text, e.line) == (at, "total", "sum", 1)


def test_pause_or_another_place_starts_a_new_edit():
    h = EditHistory(burst_s=2.0)
    h.open("d", "aaa\nbbb\nccc\n")
    h.change("d", 0, 1, "x", now=0.0)
    h.change("d", 1, 2, "y", now=5.0)  # touches, but after a pause
    h.change("d", 8, 9, "z", now=5.1)  # soon, but elsewhere
    assert [(e.start, e.old_text, e.new_text) for e in h.edits("d")] == [(0, "a", "x"), (1, "a", "y"), (8, "c", "z")]
    assert [e.line for e in h.edits("d")] == [0, 0, 2]
    assert h.text("d") == "xya\nbbb\nzcc\n"
    assert h.text_before("d", 0) == "aaa\nbbb\nccc\n"
    assert h.text_before("d", 1) == "xaa\nbbb\nccc\n"
    assert h.text_before("d", 2) == "xya\nbbb\nccc\n"


def test_typed_then_deleted_cancels_out():
    h = EditHistory()
    h.open("d", "abc")
    _type(h, "d", 1, "xyz")
    _backspace(h, "d", 4, 3)
    assert h.edits("d") == [] and h.text("d") == "abc"


def test_typing_several_lines_stays_apart_past_burst_lines():
    h = EditHistory(burst_lines=2)
    h.open("d", "")
    _type(h, "d", 0, "a = 1\nb = 2\nc = 3\nd = 4\n")
    edits = h.edits("d")
    assert len(edits) >= 2
    text = ""
    for e in edits:
        text = e.apply(text)
    assert text == h.text("d")
    assert all(max(e.new_text.count("\n"), e.old_text.count("\n")) < 2 for e in edits)


def test_backspace_before_the_edit_joins():
    h = EditHistory()
    h.open("d", "foo = 1\n")
    h.change("d", 3, 3, "d", now=0.0)  # food
    h.change("d", 2, 3, "", now=0.1)  # delete the second o, before the typed d
    (e,) = h.edits("d")
    assert h.text("d") == "fod = 1\n"
    assert e.apply("foo = 1\n") == "fod = 1\n"
    assert (e.start, e.old_text, e.new_text) == (2, "o", "d")


def test_bounds_and_close():
    h = EditHistory(max_edits=3, max_documents=2)
    h.open("a", "0123456789\n" * 3)
    for i in range(5):
        h.change("a", i * 11, i * 11 + 1, "x", now=float(i * 10)) if i < 3 else h.change("a", 0, 0, "y", now=i * 10.0)
    assert len(h.edits("a")) == 3
    assert h.text_before("a", 0) is not None
    h.open("b", "b")
    h.change("a", 0, 0, "z", now=100.0)  # "a" is now the most recently used
    h.open("c", "c")
    assert "b" not in h and "a" in h and "c" in h
    h.close("a")
    assert "a" not in h and h.edits("a") == [] and h.change("a", 0, 0, "q") is None


def test_change_outside_the_text_raises():
    h = EditHistory()
    h.open("d", "abc")
    with pytest.raises(ValueError):
        h.change("d", 2, 9, "x")


def test_replace_full_text_and_versions():
    v0 = "def f(a):\n    return a\n"
    v1 = "def f(b):\n    return a\n"
    v2 = "def f(b):\n    return b\n"
    text, edits = edits_from_versions([(0, v0), (1, v1), (2, v2)], times=[0.0, 10.0])
    assert text == v2
    assert [(e.start, e.old_text, e.new_text, e.version) for e in edits] == [(6, "a", "b", 1), (21, "a", "b", 2)]
    # at once: still two edits, they do not touch
    _, edits = edits_from_versions([(0, v0), (1, v1), (2, v2)])
    assert len(edits) == 2


def test_diff_texts_splits_scattered_line_changes():
    old = "".join(f"line {i}\n" for i in range(20))
    new = old.replace("line 2\n", "LINE 2\n").replace("line 15\n", "line 15\nextra\n")
    hunks = diff_texts(old, new)
    assert len(hunks) == 2
    text = old
    for s, a, b in hunks:
        assert text[s:s + len(a)] == a
        text = text[:s] + b + text[s + len(a):]
    assert text == new


def test_random_changes_replay_exactly():
    rng = random.Random(7)
    for trial in range(30):
        text = "".join(rng.choice("ab \n") for _ in range(40))
        h = EditHistory(max_edits=1000, burst_s=rng.choice([0.0, 5.0]))
        h.open("d", text)
        states = [text]
        for step in range(25):
            s = rng.randint(0, len(text))
            e = min(len(text), s + rng.randint(0, 3))
            new = "".join(rng.choice("abc\n") for _ in range(rng.randint(0, 3)))
            text = text[:s] + new + text[e:]
            h.change("d", s, e, new, now=float(step))
            states.append(text)
        assert h.text("d") == text
        edits = h.edits("d")
        # undoing every edit gives back the first text; redoing them gives the last
        first = h.text_before("d", 0) if edits else text
        assert first == states[0], trial
        t = first
        for ed in edits:
            assert t[ed.start:ed.old_end] == ed.old_text
            assert t.count("\n", 0, ed.start) == ed.line
            t = ed.apply(t)
        assert t == text


def test_edit_helpers():
    e = Edit(2, "cd", "XYZ")
    assert e.apply("abcdef") == "abXYZef" and e.undo("abXYZef") == "abcdef"
    assert (e.old_end, e.new_end, e.delta) == (4, 5, 1)


def test_settled():
    h = EditHistory()
    h.open("d", "abc")
    assert not h.settled("d", 0.3, now=5.0)  # no edit yet
    h.change("d", 0, 0, "x", now=1.0)
    h.change("d", 1, 1, "y", now=1.2)
    assert not h.settled("d", 0.3, now=1.4) and h.settled("d", 0.3, now=1.5)


def test_typing_over_a_name_with_a_shared_tail_is_one_edit():
    # "name" -> "key": after "ke" the edit trims to "nam" -> "k" (the "e"s agree); the "y" still joins
    h = EditHistory()
    src = "for name in names:\n"
    h.open("d", src)
    _backspace(h, "d", 8, 4)
    _type(h, "d", 4, "key")
    (e,) = h.edits("d")
    assert (e.start, e.old_text, e.new_text) == (4, "name", "key") and h.text("d") == "for key in names:\n"
    # and a later keystroke elsewhere is still its own edit
    h.change("d", 17, 17, "!", now=0.0)
    assert len(h.edits("d")) == 2


def test_a_change_can_bring_the_text_it_makes():
    """``after``: the caller built the new text already (the server's document store); the history keeps
    that string and records the same edit as without it."""
    a, b = EditHistory(), EditHistory()
    for h in (a, b):
        h.open("d", "x = value + 1\n")
    after = "x = values + 1\n"
    a.change("d", 9, 9, "s", after=after, now=0.0)
    b.change("d", 9, 9, "s", now=0.0)
    assert a.text("d") is after and a.text("d") == b.text("d")
    assert a.edits("d") == b.edits("d") and a.edits("d")[0].new_text == "s"
