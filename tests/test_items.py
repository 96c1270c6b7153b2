"""Item building: post-processed, deduplicated, and ordered by what each variant is worth to insert."""

from engine.types import Completion
from lsp_server.items import build_items


def _items(texts: list[str], prefix: str, suffix: str = "\n"):
    text = prefix + suffix
    offset = len(prefix)
    line = prefix.count("\n")
    col = len(prefix) - (prefix.rfind("\n") + 1)
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    comps = [Completion(t, [1, 2], "eos", variant=i) for i, t in enumerate(texts)]
    return build_items(comps, "multi", prefix, suffix, text=text, offset=offset, cursor=(line, col), eol="\n",
                       starts=starts, encoding="utf-16", max_lines=8, backend="local")


def test_code_comes_before_a_comment_or_a_placeholder_the_model_ranked_higher():
    prefix = "def area(w, h):\n    "
    items = _items(["# Your code here\n    pass", "# compute the area", "return w * h"], prefix)
    assert items[0].text == "return w * h"
    assert [it.index for it in items] == list(range(len(items)))


def test_model_order_is_kept_among_code_variants():
    prefix = "def area(w, h):\n    "
    items = _items(["return w * h", "return h * w"], prefix)
    assert [it.text for it in items] == ["return w * h", "return h * w"]


def _items_lang(texts: list[str], prefix: str, suffix: str, language: str | None, finish: str = "eos",
                mode: str = "multi"):
    text = prefix + suffix
    line = prefix.count("\n")
    col = len(prefix) - (prefix.rfind("\n") + 1)
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    comps = [Completion(t, [1, 2], finish, variant=i) for i, t in enumerate(texts)]
    return build_items(comps, mode, prefix, suffix, text=text, offset=len(prefix), cursor=(line, col),  # type: ignore[arg-type]
                       eol="\n", starts=starts, encoding="utf-16", max_lines=8, backend="local", language=language)


def test_a_placeholder_or_comment_never_leads_when_code_exists_whatever_the_language():
    py = _items_lang(['"""Compute it."""\n    pass', "# todo", "return w * h"], "def area(w, h):\n    ", "\n",
                     "python")
    assert py[0].text == "return w * h"
    js = _items_lang(["// TODO", 'throw new Error("not implemented");', "return w * h;"],
                     "function area(w, h) {\n  ", "\n}\n", "javascript")
    assert js[0].text == "return w * h;"


def test_a_block_cut_by_a_deadline_never_ends_mid_statement_on_screen():
    items = _items_lang(["x = 1\n    y = foo(\n        a,\n        b,\n        c"], "def f(a, b):\n    ", "\n",
                        "python", finish="deadline")
    assert [it.text for it in items] == ["x = 1"]
    # nothing complete left: no item rather than a cut line
    assert _items_lang(["for b in"], "def f(a, b):\n    ", "\n", "python", finish="deadline") == []


def test_the_rest_of_a_body_may_be_longer_than_max_lines():
    body = "\n".join(["a = 1"] + [f"    a += {i}" for i in range(11)] + ["    return a"])
    items = _items_lang([body], "def f():\n    ", "\n\n\ndef g():\n    pass\n", "python")
    assert items[0].text == body  # 13 lines: the end of a body, not cut at maxLines (8)


def test_an_automatic_suggestion_is_cut_where_the_model_doubted_and_an_explicit_one_is_not():
    prefix, suffix = "def f(a, b):\n    return ", "\n"
    text = prefix + suffix
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    c = Completion("compute(a, b) + 1", [1] * 6, "eos", doubts=((7, 0.3), (13, 0.2)))

    def build(cut_below):
        return build_items([c], "single", prefix, suffix, text=text, offset=len(prefix), cursor=(1, 11),
                           eol="\n", starts=starts, encoding="utf-16", max_lines=8, backend="local",
                           cut_below=cut_below)

    assert build(0.5)[0].text == "compute"
    assert build(0.25)[0].text == "compute(a, b)"
    assert build(0.0)[0].text == "compute(a, b) + 1"


def test_the_gate_drops_a_suggestion_whose_first_token_was_doubted_once_the_line_is_typed_on():
    def build(c: Completion, prefix: str, gate_below: float, invoked: bool = False):
        suffix = "\n"
        text = prefix + suffix
        starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
        line = prefix.rsplit("\n", 1)[-1]
        return [it.text for it in build_items([c], "single", prefix, suffix, text=text, offset=len(prefix),
                                              cursor=(1, len(line)), eol="\n", starts=starts, encoding="utf-16",
                                              max_lines=8, backend="local", cut_below=0.0 if invoked else 0.5,
                                              gate_below=0.0 if invoked else gate_below)]

    guessed = Completion("compute(a, b)", [1] * 6, "eos", doubts=((0, 0.2), (7, 0.9)))
    assert build(guessed, "def f(a, b):\n    return ", 0.3) == []
    assert build(guessed, "def f(a, b):\n    return ", 0.1) == ["compute(a, b)"]  # above the gate
    assert build(guessed, "def f(a, b):\n    return ", 0.0) == ["compute(a, b)"]  # off
    assert build(guessed, "def f(a, b):\n    return ", 0.3, invoked=True) == ["compute(a, b)"]
    # a line nothing is typed on yet: the whole statement, as the cut leaves it there
    assert build(Completion("return a", [1] * 2, "eos", doubts=((0, 0.2),)), "def f(a, b):\n    ", 0.3) \
        == ["return a"]
    # a doubt after the first visible character is the cut's, not the gate's
    later = Completion("compute(a, b)", [1] * 6, "eos", doubts=((7, 0.2),))
    assert build(later, "def f(a, b):\n    return ", 0.3) == ["compute"]


def test_a_line_nothing_is_typed_on_yet_shows_the_whole_statement():
    prefix, suffix = "def f(a, b):\n    ", "\n"
    text = prefix + suffix
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    c = Completion("return compute(a, b)", [1] * 6, "eos", doubts=((7, 0.3),))
    items = build_items([c], "single", prefix, suffix, text=text, offset=len(prefix), cursor=(1, 4), eol="\n",
                        starts=starts, encoding="utf-16", max_lines=8, backend="local", cut_below=0.5)
    assert items[0].text == "return compute(a, b)"  # at the line's start: never "return " alone


def test_at_the_end_of_a_typed_line_a_sure_next_line_comes_with_it():
    """An automatic suggestion at the end of the line being written shows the model's look-ahead line too
    when it was sure of both lines (one Tab for two lines); a doubt in the next line, a cut in this one, text
    right of the cursor or an explicit request (no cut) keep it to the cursor's line."""
    prefix, suffix = "def f(a, b):\n    total = ", "\n"

    def build(c: Completion, cut_below: float = 0.5, suffix: str = suffix):
        text = prefix + suffix
        starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
        return build_items([c], "single", prefix, suffix, text=text, offset=len(prefix), cursor=(1, 12),
                           eol="\n", starts=starts, encoding="utf-16", max_lines=8, backend="local",
                           cut_below=cut_below)[0].text

    sure = Completion("a + b\n    return total\n", [1] * 8, "lines", doubts=((2, 0.7),))
    assert build(sure) == "a + b\n    return total"
    unsure_below = Completion("a + b\n    return total\n", [1] * 8, "lines", doubts=((17, 0.3),))
    assert build(unsure_below) == "a + b"
    cut_here = Completion("a + b\n    return total\n", [1] * 8, "lines", doubts=((2, 0.3),))
    assert build(cut_here) == "a"
    still_writing = Completion("a + b\n    return to", [1] * 8, "cancelled")
    assert build(still_writing) == "a + b"
    assert build(sure, cut_below=0.0) == "a + b"
    assert build(Completion("a + b", [1] * 3, "stop"), suffix=")\n") == "a + b"


def _js_items(c: Completion, prefix: str, suffix: str = "\n}\n", cut_below: float = 0.8) -> list[str]:
    text = prefix + suffix
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    line = prefix.count("\n")
    return [it.text for it in build_items([c], "single", prefix, suffix, text=text, offset=len(prefix),
                                          cursor=(line, len(prefix) - prefix.rfind("\n") - 1), eol="\n",
                                          starts=starts, encoding="utf-16", max_lines=8, backend="local",
                                          language="javascript", cut_below=cut_below)]


def test_a_streaming_head_inside_a_condition_is_shown_and_a_cut_off_one_is_not():
    prefix = "function f(obj) {\n  if (!t"
    assert _js_items(Completion("his._listeners)", [1] * 4, "partial"), prefix) == ["his._listeners)"]
    assert _js_items(Completion("his._listeners)", [1] * 4, "length"), prefix) == []


def test_a_line_the_model_ended_inside_a_statement_written_over_lines_is_shown():
    # `a ||` then the condition's next operand on the next line: the model's line, whole as it wrote it
    prefix = "function f(url) {\n  if (\n    !!url.password"
    assert _js_items(Completion(" ||\n    !!url.username", [1] * 4, "lines"), prefix) == [" ||"]
    assert _js_items(Completion(" ||", [1] * 4, "stop"), prefix) == [" ||"]
    assert _js_items(Completion(" ||", [1] * 4, "length"), prefix) == []  # a limit cut it: not a line


def test_a_brace_language_line_is_cut_where_the_model_doubted_as_a_python_one_is():
    prefix = "function f(value) {\n  if (value == "
    c = Completion("null) return '';", [1] * 5, "eos", doubts=((5, 0.3),))
    assert _js_items(c, prefix) == ["null)"]
    assert _js_items(c, prefix, cut_below=0.0) == ["null) return '';"]
