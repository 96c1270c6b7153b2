"""engine/syntax/window.py: the statement window (what of the text before a cursor a statement's parse needs), the
lines inside multi-line strings and comments, and the walk kept while a line is typed."""

from __future__ import annotations

from engine.syntax import window
from engine.syntax.window import statement_window, string_lines


def test_the_lines_above_are_walked_once_per_line_and_never_served_for_another_text():
    members = "".join(f"  m{i}() {{\n    return {i};\n  }}\n" for i in range(40))
    head = "class Command extends Base {\n" + members + "  opts() {\n"
    line = "    const x = this.m1() + 2;"
    window._lines_above.cache_clear()
    typed = [statement_window.__wrapped__(head + line[:k]) for k in range(5, len(line))]
    assert window._lines_above.cache_info().misses == 1  # one walk for the whole line (its indentation never changed)
    window._lines_above.cache_clear()
    assert typed == [statement_window.__wrapped__(head + line[:k]) for k in reversed(range(5, len(line)))][::-1]
    # a text above of the same length but other lines (a header renamed in place) is walked, not served
    other = head.replace("class Command extends Base {", "clasz Command extends Base {")
    assert len(other) == len(head)
    assert statement_window.__wrapped__(other + line).startswith("clasz Command")
    assert statement_window.__wrapped__(head + line).startswith("class Command")


def test_the_statement_window_never_starts_inside_a_docstring_or_a_block_comment():
    doc = "\n".join(["    Sorted-key list.", ""] + [f"    >>> sl.add({i})" for i in range(40)])
    init = ('    def __init__(self, key=None):\n        """Initialize.\n\n'
            + "\n".join(f"        Runtime complexity: `O({i})`" for i in range(12))
            + '\n\n        """\n        self._key = key\n\n')
    clear = '    def clear(self):\n        """Remove all values."""\n        self._len = 0\n        '
    before = 'class SortedKeyList(SortedList):\n    """Sorted-key list.\n\n' + doc + '\n\n    """\n' + init + clear
    window = statement_window(before)
    # a window starting at a docstring line turns every later docstring into code and code into strings
    assert ">>> sl.add" not in window, window[:200]
    assert window.startswith("class SortedKeyList(SortedList):\n    def __init__")
    jsdoc = "\n".join(f"   * clear({i}) resets it" for i in range(80))
    js = "class K {\n  /**\n" + jsdoc + "\n   */\n  clear() {\n    this.n = 0;\n    "
    assert "resets it" not in statement_window(js)


def test_string_lines_follow_only_the_open_string_s_own_closer():
    lines = ['x = 1', '"""doc with `ticks`', "and /* this", '"""', "y = `a", "b`", "/* c", "*/ z = 2"]
    assert string_lines(lines) == {2, 3, 5, 7}
    # a `/*` inside a comment holds the `*` of its `/*/`: the comment closes at the next `*/`, on the second line
    assert string_lines(["/* a /*/ b", "c */", "d"]) == {1}


def test_two_threads_asking_at_once_get_each_their_own_window():
    import threading
    heads = [f"class C{i}:\n    def m(self):\n" + "        x = 1\n" * (i % 7) for i in range(40)]
    errors: list[BaseException] = []

    def ask(offset: int) -> None:
        try:
            for n in range(400):
                head = heads[(n + offset) % len(heads)]
                got = window._lines_above(head, 8, False, 60, 3000)
                assert got == window._walk_above(head, 8, False, 60, 3000)
        except BaseException as e:  # noqa: BLE001 (the thread's failure is the test's)
            errors.append(e)

    threads = [threading.Thread(target=ask, args=(k * 13,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    info = window._lines_above.cache_info()
    assert info.maxsize is not None and info.currsize <= info.maxsize
