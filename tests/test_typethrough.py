"""Type-through (engine/cache/typethrough.py): the trie, locating typed text in sliding windows, and the store's
answers for finished and streaming generations. Pure text, no model."""

from __future__ import annotations

import threading

from hypothesis import given
from hypothesis import strategies as st

from engine.cache.typethrough import (
    ANCHOR_CHARS,
    Trie,
    TypeThrough,
    anchor_of,
    past_blank_lines,
    reachable,
    suffix_compatible,
    typed_since,
)
from engine.types import Completion

KEY = (64, 1, 1)


def comps(*texts: str, reason: str = "eos") -> list[Completion]:
    return [Completion(text=t, token_ids=list(range(len(t) // 2 + 1)), finish_reason=reason) for t in texts]


# ---------------------------------------------------------------------------------------------- trie


def test_trie_walk_finds_every_variant_the_typed_text_continues():
    t = Trie()
    t.set(0, "return a + b")
    t.set(1, "return a - b")
    t.set(2, "pass")
    assert t.walk("") == {0, 1, 2}
    assert t.walk("ret") == {0, 1}
    assert t.walk("return a +") == {0}
    assert t.walk("return a * ") == set()
    assert t.walk("return a + b and more") == set()


def test_trie_streaming_appends_and_rewrites():
    t = Trie()
    for part in ("re", "return", "return x"):
        t.set(0, part)
    assert t.walk("return x") == {0}
    n = t.node_count()
    t.set(0, "yield y")  # not an extension (a stop string cut it): the old branch goes
    assert t.walk("ret") == set() and t.walk("yield") == {0}
    assert t.node_count() <= n  # pruned, not leaked


@given(st.lists(st.text(alphabet="ab\n ", max_size=12), min_size=1, max_size=4), st.text(alphabet="ab\n ", max_size=6))
def test_trie_agrees_with_startswith(texts, typed):
    t = Trie()
    for i, s in enumerate(texts):
        t.set(i, s[: len(s) // 2])  # stream in two steps
        t.set(i, s)
    assert t.walk(typed) == {i for i, s in enumerate(texts) if s.startswith(typed)}


# ------------------------------------------------------------------------------------- typed_since


def test_typed_since_short_prefix_must_match_from_the_start():
    anchor, at_start = anchor_of("import os\n")
    assert at_start
    assert typed_since(anchor, at_start, "import os\nimp", 100) == "imp"
    assert typed_since(anchor, at_start, "import os\n", 100) == ""
    assert typed_since(anchor, at_start, "import sys\nimp", 100) is None  # an edit before the cursor
    assert typed_since(anchor, at_start, "import os\n" + "x" * 200, 100) is None  # too far ahead


def test_typed_since_finds_the_base_in_a_slid_window():
    doc = "".join(f"value_{i} = {i}\n" for i in range(1000))
    base = doc[-6000:]
    anchor, at_start = anchor_of(base)
    assert not at_start and len(anchor) == ANCHOR_CHARS
    typed = "def main():\n    ret"
    slid = (doc + typed)[-6000:]  # the window kept its size: its start moved past the base's start
    assert typed_since(anchor, at_start, slid, 100) == typed
    cut = len(slid) - len(typed) - 10
    edited = slid[:cut] + "#" + slid[cut + 1:]  # a character changed just before the cursor's old spot
    assert typed_since(anchor, at_start, edited, 100) is None


def test_suffix_compatible_ignores_auto_closed_characters_at_the_cursor():
    assert suffix_compatible("\nprint(x)\n", "\nprint(x)\n")
    assert suffix_compatible("\nprint(x)\n", ")\nprint(x)\n")  # typed "(", the editor added ")"
    assert suffix_compatible('")\nz\n', "\nz\n")
    assert not suffix_compatible("\nprint(x)\n", "\nprint(y)\n")
    assert not suffix_compatible("\nx\n", " + 1\nx\n")


# ---------------------------------------------------------------------------------------------- store


def test_typing_through_a_finished_suggestion():
    tt = TypeThrough()
    prefix, suffix = "def add(a, b):\n    ", "\n\nprint(add(1, 2))\n"
    tt.add(prefix, suffix, comps("return a + b"), n=1, key=KEY, origin="model")
    [hit] = tt.lookup(prefix, suffix)
    assert hit.exact and hit.variants[0].text == "return a + b"
    [hit] = tt.lookup(prefix + "retu", suffix)
    assert not hit.exact and hit.typed == "retu" and hit.variants[0].text == "rn a + b"
    assert hit.variants[0].finish == "eos" and hit.variants[0].tokens >= 1
    assert tt.lookup(prefix + "return a - ", suffix) == []  # diverged
    assert tt.lookup(prefix + "return a + b", suffix) == []  # typed it all: nothing left
    assert tt.lookup(prefix + "retu", "\nother\n") == []  # a different text after the cursor


def test_typed_indentation_is_typed_through():
    tt = TypeThrough()
    prefix = "def f():\n  "  # the engine wrote the line from its start: the rest of the indentation comes first
    tt.add(prefix, "\n", comps("  return 1\n    # done"), n=1, key=KEY, origin="model")
    [hit] = tt.lookup(prefix + " ", "\n")
    assert hit.variants[0].text == " return 1\n    # done"
    [hit] = tt.lookup(prefix + "  ret", "\n")
    assert hit.variants[0].text == "urn 1\n    # done"
    assert tt.lookup(prefix + "\t", "\n") == []


def test_any_variant_of_several_answers():
    tt = TypeThrough()
    tt.add("x = ", "\n", comps("compute(1)", "count + 1", "None"), n=3, key=KEY, origin="model")
    [hit] = tt.lookup("x = co", "\n", n=1)
    assert [(v.index, v.text) for v in hit.variants] == [(0, "mpute(1)"), (1, "unt + 1")]
    [hit] = tt.lookup("x = cou", "\n", n=3)
    assert [(v.index, v.text) for v in hit.variants] == [(1, "nt + 1")]
    assert [c.text for c in hit.completions("type-through", 3)] == ["nt + 1"]
    tt2 = TypeThrough()
    tt2.add("x = ", "\n", comps("compute(1)"), n=1, key=KEY, origin="model")
    assert tt2.lookup("x = co", "\n", n=3) == []  # asked for 3 variants: a 1-variant entry does not do


def test_auto_closed_paren_while_typing_through():
    tt = TypeThrough()
    tt.add("print", "\n", comps('("hello")'), n=1, key=KEY, origin="model")
    [hit] = tt.lookup('print(', ")\n")  # the editor closed the paren
    assert hit.variants[0].text == '"hello")'  # the caller's post-processing replaces the ")"


def test_streaming_entry_is_read_while_it_grows():
    tt = TypeThrough()
    prefix, suffix = "for i in range(10):\n    ", "\n"
    e = tt.open(prefix, suffix, n=1, key=KEY)
    [pending] = tt.lookup(prefix + "pri", suffix)  # nothing streamed yet: agrees, no text
    assert pending.live and pending.variants == []
    assert tt.consistent(e, prefix + "pri", suffix)
    assert not tt.consistent(e, prefix + "print(value_of_x)\n" * 20, suffix)  # nothing yet, and far ahead
    tt.update(e, 0, "print")
    [hit] = tt.lookup(prefix + "pri", suffix)
    assert hit.variants[0].text == "nt" and hit.variants[0].finish is None
    assert tt.consistent(e, prefix + "print(i", suffix)  # typed past the stream: may still come
    assert not tt.consistent(e, prefix + "print(i" + "x" * 200, suffix)  # too far ahead of it
    tt.update(e, 0, "print(i)")
    assert tt.consistent(e, prefix + "print(i", suffix)
    assert not tt.consistent(e, prefix + "pass", suffix)  # diverged: the generation is useless
    tt.close(e, comps("print(i)\n    total += i"))
    [hit] = tt.lookup(prefix + "print(i", suffix)
    assert hit.variants[0].text == ")\n    total += i" and hit.variants[0].finish == "eos"
    assert not tt.consistent(e, prefix + "print(i)!", suffix)  # finished: no more text is coming


def test_a_finished_empty_answer_is_remembered_for_its_state_only():
    tt = TypeThrough()
    tt.add("x = 1\n", "\n", comps(""), n=1, key=KEY, origin="model")  # the model had nothing to add
    [hit] = tt.lookup("x = 1\n", "\n")
    assert hit.known_empty and hit.variants == []
    assert tt.lookup("x = 1\ny", "\n") == []
    cut = TypeThrough()
    cut.add("y = ", "\n", comps("", reason="cancelled"), n=1, key=KEY, origin="model")  # stopped early: unknown
    assert cut.lookup("y = ", "\n") == [] and len(cut) == 0


def test_exact_repeat_ranks_first_and_the_closest_base_next():
    tt = TypeThrough()
    tt.add("a = ", "\n", comps("1 + 2 + 3"), n=1, key=KEY, origin="model")
    tt.add("a = 1 + ", "\n", comps("2 + 3"), n=1, key=KEY, origin="disk")
    hits = tt.lookup("a = 1 + ", "\n")
    assert hits[0].exact and hits[0].entry.origin == "disk"
    assert hits[1].typed == "1 + "
    hits = tt.lookup("a = 1 + 2", "\n")
    assert [h.typed for h in hits] == ["2", "1 + 2"]


def test_capacity_evicts_old_finished_entries_not_live_ones():
    tt = TypeThrough(capacity=4)
    live = tt.open("live = ", "\n", n=1, key=KEY)
    for i in range(10):
        tt.add(f"v{i} = ", "\n", comps(str(i)), n=1, key=KEY, origin="model")
    assert len(tt) == 4
    assert tt.lookup("live = ", "\n")[0].entry is live
    assert tt.lookup("v9 = ", "\n") and not tt.lookup("v0 = ", "\n")


def test_reachable_future_states():
    base, suffix = "def f():\n    ", "\n"
    future = base + "return 1\n    "
    assert reachable(future, suffix, base, suffix)
    assert reachable(future, suffix, base + "retu", suffix)  # typing toward it
    assert reachable(future, suffix, future, suffix)  # arrived (accepted)
    assert not reachable(future, suffix, base + "x", suffix)
    assert not reachable(future, suffix, base, "\nother\n")


def test_concurrent_streaming_and_lookups():
    tt = TypeThrough()
    prefix = "s = '"
    e = tt.open(prefix, "'\n", n=1, key=KEY)
    text = "abcdefghij" * 30
    errors: list[BaseException] = []

    def stream():
        try:
            for k in range(1, len(text) + 1):
                tt.update(e, 0, text[:k])
        except BaseException as ex:  # pragma: no cover - reported below
            errors.append(ex)

    th = threading.Thread(target=stream)
    th.start()
    seen = 0
    while th.is_alive() or seen < 1:
        for h in tt.lookup(prefix + "abc", "'\n"):
            for v in h.variants:
                assert text.startswith("abc" + v.text)
                seen += 1
    th.join()
    assert not errors and tt.lookup(prefix + "abc", "'\n")[0].variants[0].text == text[3:]


def test_doubts_follow_the_typing_and_drop_once_typed_past():
    tt = TypeThrough()
    prefix = "def f():\n    "
    c = Completion("return compute(a, b)", [1] * 6, "eos", doubts=((7, 0.3), (15, 0.4)))
    tt.add(prefix, "\n", [c], n=1, key=KEY, origin="model")
    [hit] = tt.lookup(prefix, "\n")
    assert hit.variants[0].text == "return compute(a, b)" and hit.variants[0].doubts == ((7, 0.3), (15, 0.4))
    [hit] = tt.lookup(prefix + "return comp", "\n")  # typed into the first doubtful token: it stood
    assert hit.completions("type-through", 1)[0].doubts == ((4, 0.4),)


# ---------------------------------------------------------------------------------------------- blank lines


def test_an_empty_line_the_user_puts_in_leaves_the_model_s_next_line():
    # after `x = 1` the model wrote the next line directly; the user pressed Enter twice
    assert past_blank_lines(None, "\n\n    ", "\n    y = 2\n    z = 3") == "y = 2\n    z = 3"
    assert past_blank_lines(None, "\n   \n    y", "\n    y = 2") == " = 2"  # the blank line kept its spaces
    # the base was the empty line itself (written from its start): Enter leaves it empty
    assert past_blank_lines("", "\n    ", "    y = 2") == "y = 2"
    assert past_blank_lines("    ", "\n    ", "y = 2") == "y = 2"


def test_an_empty_line_the_model_wrote_and_the_user_left_out():
    assert past_blank_lines(None, "\n    ", "\n\n    y = 2") == "y = 2"
    assert past_blank_lines("", "    ret", "\n    return x") == "urn x"


def test_only_blank_lines_are_skipped():
    assert past_blank_lines(None, "\n    ", "\n    y = 2") is None  # a plain prefix: the trie's walk
    assert past_blank_lines(None, "\n\n    w", "\n    y = 2") is None  # another line
    assert past_blank_lines(None, "z\n\n    ", "\n    y = 2") is None  # the line before differs
    assert past_blank_lines(None, "\n\n    y = 2", "\n    y = 2") is None  # nothing left
    assert past_blank_lines(None, "", "\n\n    y = 2") is None  # nothing typed
    assert past_blank_lines(None, " x", "\n    y = 2") is None


def test_lookup_types_through_an_empty_line():
    tt = TypeThrough()
    e = tt.open("def f():\n    x = 1", "\n", n=1, key=KEY)
    tt.close(e, comps("\n    y = 2\n    return y"))
    hits = tt.lookup("def f():\n    x = 1\n\n    ", "\n")
    assert [v.text for v in hits[0].variants] == ["y = 2\n    return y"]
    assert hits[0].typed == "\n\n    "
    # at the empty line's own start (a generation made there), Enter again
    e2 = tt.open("def f():\n    x = 1\n", "\n", n=1, key=KEY)
    tt.close(e2, comps("    y = 2"))
    hits = tt.lookup("def f():\n    x = 1\n\n    ", "\n")
    assert {v.text for h in hits for v in h.variants} == {"y = 2\n    return y", "y = 2"}
    assert tt.lookup("def f():\n    x = 1\n\n    w", "\n") == []
