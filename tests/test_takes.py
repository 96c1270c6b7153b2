"""The take tracker (lsp_server/takes.py): after a take, the next automatic suggestion at the spot is uncut."""

from lsp_server.takes import Takes, took

URI = "file:///a.rs"


def test_took_needs_more_than_one_character_of_the_ghosts_start():
    assert took("foo(bar)", "foo(")
    assert not took("foo(bar)", "f")  # typed through
    assert not took("foo(bar)", "fox")  # typed over
    assert not took("foo(bar)", "")


def test_a_take_marks_the_spot_it_left_the_cursor_at():
    t = Takes()
    text = "let x = foo(bar);"
    t.shown(URI, 8, "foo(")
    t.edited(URI, text, 12)
    assert t.after_take(URI, 12)
    assert not t.after_take(URI, 13)


def test_typing_through_or_over_is_no_take():
    t = Takes()
    t.shown(URI, 8, "foo(")
    t.edited(URI, "let x = f", 9)
    assert not t.after_take(URI, 9)
    t.shown(URI, 9, "oo(")
    t.edited(URI, "let x = fa", 10)
    assert not t.after_take(URI, 10)


def test_the_next_edit_move_or_close_forgets_the_take():
    t = Takes()
    t.shown(URI, 0, "abc")
    t.edited(URI, "abc", 3)
    assert t.after_take(URI, 3)
    t.edited(URI, "abcd", 4)  # no ghost shown since: nothing taken
    assert not t.after_take(URI, 4)
    t.shown(URI, 0, "abc")
    t.edited(URI, "abc", 3)
    t.forget(URI)
    assert not t.after_take(URI, 3)


def test_crlf_text_is_compared_with_the_ghosts_lf_text():
    t = Takes()
    t.shown(URI, 0, "a\nb")
    t.edited(URI, "a\r\nb", 4)
    assert t.after_take(URI, 4)


def test_a_hidden_answer_clears_the_shown_ghost():
    t = Takes()
    t.shown(URI, 0, "abc")
    t.shown(URI, 0, "")
    t.edited(URI, "abc", 3)
    assert not t.after_take(URI, 3)
