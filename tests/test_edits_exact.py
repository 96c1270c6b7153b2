"""engine/edits/exact.py: renames through jedi, literal repeats; never a wrong or breaking suggestion."""

from __future__ import annotations

import ast
import time

from engine.edits.exact import (
    NextEdit,
    apply_all,
    by_cursor,
    exact_next_edits,
    identifier_change,
    rename_edits,
    repeat_edits,
)
from engine.edits.history import Edit, EditHistory

SRC = '''import os


def helper(value, count=2):
    """Multiply value by count."""
    total = value * count
    for i in range(count):
        total += i
    return total


class Box:
    def __init__(self, width):
        self.width = width

    def area(self):
        return self.width * helper(self.width)


def other(value):
    return value + 1


box = Box(3)
print(box.width, helper(3, count=4), os.sep)
'''


def _rename_at(src: str, at: int, old: str, new: str, h: EditHistory | None = None) -> EditHistory:
    """The user deletes ``old`` at ``at`` by backspaces and types ``new``."""
    h = h or EditHistory()
    if "d" not in h:
        h.open("d", src)
    for i in range(len(old)):
        h.change("d", at + len(old) - i - 1, at + len(old) - i, "", now=0.0)
    for i, ch in enumerate(new):
        h.change("d", at + i, at + i, ch, now=0.0)
    return h


def _next(h: EditHistory, analyser, **kw) -> list[NextEdit]:
    text = h.text("d")
    assert text is not None
    # a generous deadline: these tests are about which edits, not jedi's speed on a loaded machine
    return exact_next_edits(text, h.edits("d"), path="/tmp/flint_edits_test.py", analyser=analyser,
                            deadline=time.monotonic() + 60, **kw)


def _nth(src: str, word: str, n: int) -> int:
    i = -1
    for _ in range(n + 1):
        i = src.index(word, i + 1)
    return i


def test_identifier_change():
    before = "x = count + 1\n"
    assert identifier_change(before, Edit(9, "", "_all")) is not None
    r = identifier_change(before, Edit(9, "", "_all"))
    assert r is not None and (r.start, r.old, r.new) == (4, "count", "count_all")
    assert identifier_change(before, Edit(10, "+", "-")) is None
    assert identifier_change(before, Edit(4, "count", "if")) is None  # a keyword
    assert identifier_change(before, Edit(12, "1", "2")) is None  # a number


def test_rename_parameter_at_definition(analyser):
    at = SRC.index("value")  # helper's parameter
    h = _rename_at(SRC, at, "value", "amount")
    got = _next(h, analyser)
    text = h.text("d")
    assert [e.source for e in got] == ["rename"]
    assert all(e.old_text == "value" and e.new_text == "amount" for e in got)
    # the docstring's "value" is no reference; other()'s parameter is another name
    result = apply_all(text, got)
    assert result == SRC.replace("def helper(value", "def helper(amount").replace(
        "total = value * count", "total = amount * count")
    ast.parse(result)
    # ranges are in the current text
    for e in got:
        assert text[e.range_start:e.range_end] == "value"


def test_rename_local_at_a_reference_nearest_after_cursor_first(analyser):
    at = _nth(SRC, "total", 1)  # total += i
    h = _rename_at(SRC, at, "total", "acc")
    got = _next(h, analyser)
    text = h.text("d")
    assert len(got) == 2
    cursor = at + 3
    assert got[0].range_start > cursor and got[1].range_start < cursor  # return total, then total = ...
    assert apply_all(text, got) == SRC.replace("total", "acc")


def test_rename_function_and_attribute(analyser):
    h = _rename_at(SRC, SRC.index("helper"), "helper", "scale")
    got = _next(h, analyser)
    assert len(got) == 2 and apply_all(h.text("d"), got) == SRC.replace("helper", "scale")
    at = SRC.index("self.width = width") + len("self.")
    h = _rename_at(SRC, at, "width", "size")
    got = _next(h, analyser)
    result = apply_all(h.text("d"), got)
    assert result.count("self.size") == 3 and "box.size" in result and "def __init__(self, width)" in result
    ast.parse(result)


def test_rename_continued_by_hand(analyser):
    h = _rename_at(SRC, SRC.index("total"), "total", "acc")
    h.change("d", 0, 0, "", now=0.0)
    text = h.text("d")
    assert text is not None
    at = text.index("total")  # the next one, renamed by hand too (a later burst)
    for i in range(5):
        h.change("d", at + 4 - i, at + 5 - i, "", now=10.0)
    for i, ch in enumerate("acc"):
        h.change("d", at + i, at + i, ch, now=10.0)
    got = _next(h, analyser)
    assert len(got) == 1 and apply_all(h.text("d"), got) == SRC.replace("total", "acc")


def test_no_rename_into_an_existing_name_or_of_an_import(analyser):
    at = SRC.index("total = value") + len("total = ")
    h = _rename_at(SRC, at, "value", "count")  # switches to another existing name
    assert _next(h, analyser) == []
    at = SRC.index("os.sep")
    h = _rename_at(SRC, at, "os", "oz")
    assert _next(h, analyser) == []


def test_rename_into_a_name_used_only_in_other_functions(analyser):
    at = SRC.index("def other(value)") + len("def other(")
    h = _rename_at(SRC, at, "value", "count")  # count is helper's parameter, not other's
    got = _next(h, analyser)
    assert len(got) == 1 and apply_all(h.text("d"), got).endswith("def other(count):\n    return count + 1\n\n\n"
                                                                  "box = Box(3)\nprint(box.width, helper(3, count=4), os.sep)\n")
    h = _rename_at(SRC, SRC.index("total"), "total", "i")  # i is in the same function
    assert _next(h, analyser) == []
    h = _rename_at(SRC, SRC.index("def helper") + 4, "helper", "other")  # a module name: anywhere counts
    assert _next(h, analyser) == []
    src = "class A:\n    def f(self):\n        self.a = 1\n        return self.a\n\n    def g(self):\n        return self.b\n"
    h = _rename_at(src, src.index("self.a") + 5, "a", "b")  # an attribute: the class's other methods count
    assert _next(h, analyser) == []


def test_rename_needs_jedi_to_know_the_name(analyser):
    src = "def f():\n    return undefined_name + undefined_name\n"
    h = _rename_at(src, src.index("undefined_name"), "undefined_name", "x")
    got = _next(h, analyser)
    # whatever jedi says about an unbound name, what is offered is exact and parses
    for e in got:
        assert e.old_text == "undefined_name"
    ast.parse(apply_all(h.text("d"), got))


def test_rename_past_the_deadline_is_nothing(analyser):
    # an attribute: jedi must say where its references are, and it is past its deadline
    h = _rename_at(SRC, SRC.index("width = width"), "width", "size")
    text = h.text("d")
    assert text is not None
    assert rename_edits(text, h.edits("d"), path="/tmp/flint_deadline.py", analyser=analyser,
                        deadline=time.monotonic() - 1) == []


def test_a_functions_own_name_needs_no_jedi(analyser):
    # a parameter no call passes by keyword: the syntax tree alone finds its references (local.py), so
    # they are offered even when jedi has no time at all
    h = _rename_at(SRC, SRC.index("value"), "value", "amount")
    text = h.text("d")
    assert text is not None
    got = rename_edits(text, h.edits("d"), path="/tmp/flint_deadline.py", analyser=analyser,
                       deadline=time.monotonic() - 1)
    assert [(e.old_text, e.new_text) for e in got] == [("value", "amount")]
    helper = ast.parse(apply_all(text, got)).body[1]
    assert {n.id for n in ast.walk(helper) if isinstance(n, ast.Name)} >= {"amount", "count"}
    assert "value" not in {n.id for n in ast.walk(helper) if isinstance(n, ast.Name)}
    # a module's function: its uses in the module, from the tree too
    h = _rename_at(SRC, SRC.index("helper"), "helper", "assist")
    text = h.text("d")
    got = rename_edits(text, h.edits("d"), path="/tmp/flint_deadline.py", analyser=analyser,
                       deadline=time.monotonic() - 1)
    assert [(e.old_text, e.new_text) for e in got] == [("helper", "assist")] * 2
    assert "helper" not in apply_all(text, got)


def test_a_hand_edit_of_a_string_prefix_is_no_rename_to_finish(analyser):
    # the user renamed the parameter b to c, then changed b"x" to c"x" by hand (outside the function): finishing
    # the rename would leave a file that does not parse, so nothing is offered (rename.py parses again for
    # words that can be a string's prefix or a soft keyword)
    src = 'X = b"x"\n\n\ndef f(b):\n    return b\n'
    h = _rename_at(src, src.index("b)"), "b", "c")
    h = _rename_at(h.text("d"), src.index('b"'), "b", "c", h)
    assert h.text("d") == 'X = c"x"\n\n\ndef f(c):\n    return b\n'
    assert _next(h, analyser) == []
    ok = _rename_at(src, src.index("b)"), "b", "c")  # the parameter alone: its use follows
    assert [(e.old_text, e.new_text) for e in _next(ok, analyser)] == [("b", "c")]


def test_rename_result_must_parse(analyser):
    # a rename into a name that breaks nothing is fine; a broken file offers nothing
    src = "def f(a):\n    return a +\n"
    h = _rename_at(src, src.index("a"), "a", "b")
    assert _next(h, analyser) == []


REPEAT = '''def fetch(url):
    r = get(url, timeout=30, encoding="utf-8")
    if r.status == 30:
        retry(url, timeout=30, encoding="utf-8")  # 30 tries at "utf-8"
    log("utf-8 done", 30.5, x30)
    return r


def other():
    return get("u", timeout=30, encoding="utf-8")
'''


def _replace_once(src: str, at: int, old: str, new: str) -> EditHistory:
    h = EditHistory()
    h.open("d", src)
    h.change("d", at, at + len(old), new, now=0.0)
    return h


def test_repeat_number_in_the_function_only():
    at = REPEAT.index("30")
    h = _replace_once(REPEAT, at, "30", "60")
    got = repeat_edits(h.text("d") or "", h.edits("d"))
    # the other whole-number 30s of fetch(), not 30.5, x30, the comment, nor other()'s
    assert [e.new_text for e in got] == ["60", "60"]
    result = apply_all(h.text("d") or "", got)
    assert result.count("timeout=60") == 2 and "r.status == 60" in result and "30.5" in result
    assert "x30" in result and "# 30 tries" in result and 'get("u", timeout=30' in result


def test_repeat_string_by_another_token():
    at = REPEAT.index('"utf-8"')
    h = _replace_once(REPEAT, at, '"utf-8"', "ENCODING")
    got = repeat_edits(h.text("d") or "", h.edits("d"))
    assert len(got) == 1 and got[0].old_text == '"utf-8"'
    result = apply_all(h.text("d") or "", got)
    assert result.count("encoding=ENCODING") == 2 and '"utf-8 done"' in result and 'at "utf-8"' in result


def test_repeat_editing_inside_a_string_replaces_the_literal():
    at = REPEAT.index('"utf-8"') + 1  # utf -> UTF inside the string
    h = _replace_once(REPEAT, at, "utf", "UTF")
    got = repeat_edits(h.text("d") or "", h.edits("d"))
    assert [(e.old_text, e.new_text) for e in got] == [('"utf-8"', '"UTF-8"')]
    result = apply_all(h.text("d") or "", got)
    # the other literal of fetch(); not the comment, not another string, not other()'s
    assert result.count('"UTF-8"') == 2 and '"utf-8 done"' in result and 'at "utf-8"' in result
    assert 'encoding="utf-8")\n' in result.split("def other")[1]


def test_no_repeat_inside_prose():
    src = 'def f():\n    """Return the foo."""\n    x = "foo"  # the foo\n    # foo again\n    return "foo"\n'
    h = _replace_once(src, src.index("foo again"), "foo", "bar")  # in a comment
    assert repeat_edits(h.text("d") or "", h.edits("d")) == []
    h = _replace_once(src, src.index("foo."), "foo", "bar")  # in a docstring
    assert repeat_edits(h.text("d") or "", h.edits("d")) == []
    h = _replace_once(src, src.index('"foo"') + 1, "foo", "bar")  # in a literal: the other literal
    got = repeat_edits(h.text("d") or "", h.edits("d"))
    assert [(e.old_text, e.new_text) for e in got] == [('"foo"', '"bar"')]


def test_no_repeat_for_a_non_literal_edit_or_one_name():
    src = "def f():\n    foo(1, 2)\n    foo(1, 2)\n"
    h = EditHistory()
    h.open("d", src)
    h.change("d", src.index("2)") + 1, src.index("2)") + 1, ", x", now=0.0)  # foo(1, 2) -> foo(1, 2, x)
    assert repeat_edits(h.text("d") or "", h.edits("d")) == []
    h = _replace_once(src, src.index("foo"), "foo", "bar")
    assert repeat_edits(h.text("d") or "", h.edits("d")) == []


def test_repeat_dotted_name():
    src = "def f(a):\n    x = np.float(a)\n    y = np.float(2) + mynp.float(3)\n"
    at = src.index("np.float")
    h = _replace_once(src, at, "np.float", "np.float64")
    got = repeat_edits(h.text("d") or "", h.edits("d"))
    # the edit itself is the insertion "64": widened to the name float; float alone is one name -> nothing,
    # while replacing the whole dotted name is a repeat
    assert got == []
    h = EditHistory()
    h.open("d", src)
    h.change("d", at, at + len("np.float"), "numpy.double", now=0.0)
    got = repeat_edits(h.text("d") or "", h.edits("d"))
    assert len(got) == 1 and apply_all(h.text("d") or "", got).count("numpy.double(") == 2
    assert "mynp.float(3)" in apply_all(h.text("d") or "", got)


def test_repeat_in_other_languages_uses_the_region():
    src = "function f() {\n  a = 100; // 100 ms\n  b = 100;\n}\n"
    h = _replace_once(src, src.index("100"), "100", "250")
    got = repeat_edits(h.text("d") or "", h.edits("d"), language="javascript")
    assert len(got) == 1 and apply_all(h.text("d") or "", got) == src.replace("a = 100", "a = 250").replace(
        "b = 100", "b = 250")


def test_exact_next_edits_dispatch(analyser):
    h = _replace_once(REPEAT, REPEAT.index("30"), "30", "60")
    got = exact_next_edits(h.text("d") or "", h.edits("d"), path="/tmp/x.py", analyser=analyser,
                           deadline=time.monotonic() + 60)
    assert got and all(e.source == "repeat" for e in got)
    assert exact_next_edits("x", [], analyser=analyser) == []


def test_by_cursor():
    es = [NextEdit(i, i + 1, "a", "b", "repeat", 0.5) for i in (1, 10, 5, 20)]
    assert [e.range_start for e in by_cursor(es, 6)] == [10, 20, 1, 5]


def test_parameter_rebound_in_a_branch_and_in_finally_is_renamed_everywhere(analyser):
    # six.reraise: asked at the parameter, jedi stops at `value = tp()` and never sees the `finally` store;
    # asked at a later `value` it finds them all, the parameter included
    src = ("def reraise(tp, value, tb=None):\n    try:\n        if value is None:\n            value = tp()\n"
           "        if value.__traceback__ is not tb:\n            raise value.with_traceback(tb)\n"
           "        raise value\n    finally:\n        value = None\n        tb = None\n")
    h = _rename_at(src, src.index("value"), "value", "exc")
    got = _next(h, analyser)
    assert apply_all(h.text("d"), got) == src.replace("value", "exc")
    assert {e.source for e in got} == {"rename"}


def test_parameter_rebound_from_itself_is_renamed_everywhere(analyser):
    # tomli's loads: `parse_float = make_safe(parse_float)`; jedi at the parameter sees only the call's argument
    src = ("def load(fp, *, parse_float=float):\n    return loads(fp.read(), parse_float=parse_float)\n\n\n"
           "def loads(s, *, parse_float=float):\n    parse_float = make_safe(parse_float)\n"
           "    return [parse_float(x) for x in s.split()]\n\n\ndef make_safe(f):\n    return f\n")
    at = src.index("def loads(s, *, parse_float") + len("def loads(s, *, ")
    h = _rename_at(src, at, "parse_float", "to_float")
    got = _next(h, analyser)
    result = apply_all(h.text("d"), got)
    assert "def loads(s, *, to_float=float):\n    to_float = make_safe(to_float)\n" \
        "    return [to_float(x) for x in s.split()]\n" in result
    assert "def load(fp, *, parse_float=float):" in result  # load's own parameter is another name
    assert result.count("parse_float") + result.count("to_float") == src.count("parse_float")


def test_parameter_augmented_at_once_is_renamed_everywhere(analyser):
    # tomli's create_list_rule: `pos += 2` first; jedi at the parameter finds no other reference at all
    src = ("def rule(src, pos, out):\n    pos += 2\n    pos = skip(src, pos)\n    if src.startswith(']]', pos):\n"
           "        out.append(pos)\n    return pos + 2\n\n\ndef skip(src, pos):\n    return pos\n")
    at = src.index("pos")
    h = _rename_at(src, at, "pos", "index")
    got = _next(h, analyser)
    first, second = src.split("\n\n\n")
    assert apply_all(h.text("d"), got) == first.replace("pos", "index") + "\n\n\n" + second


def test_a_nested_function_own_parameter_still_blocks_a_partial_rename(analyser):
    # jedi asked at the inner `value` does not name the outer parameter: not the same name, and leaving it
    # would make the rename partial within the outer function's text, so nothing is offered
    src = ("def outer(value):\n    def inner(value):\n        return value + 1\n    return inner(value)\n")
    h = _rename_at(src, src.index("value"), "value", "amount")
    got = _next(h, analyser)
    assert got == []


def test_keyword_arguments_and_attributes_are_not_leftovers(analyser):
    src = "def f(timeout, obj):\n    g(timeout=timeout)\n    return obj.timeout + timeout\n"
    h = _rename_at(src, src.index("timeout"), "timeout", "limit")
    got = _next(h, analyser)
    assert apply_all(h.text("d"), got) == "def f(limit, obj):\n    g(timeout=limit)\n    return obj.timeout + limit\n"


def test_rename_parameter_reaches_keyword_arguments_of_calls(analyser):
    src = "def f(limit):\n    return limit * 2\n\n\ndef g():\n    return f(limit=3)\n"
    h = _rename_at(src, src.index("limit"), "limit", "cap")
    got = _next(h, analyser)
    # whatever jedi finds of the call's keyword, the function's own uses are all there, and nothing else
    result = apply_all(h.text("d"), got)
    assert "def f(cap):\n    return cap * 2\n" in result
    assert result.endswith(("f(cap=3)\n", "f(limit=3)\n"))


def test_a_comprehension_binding_the_same_name_is_another_scope(analyser):
    src = ("def f(kw, names):\n    first = [kw[name] for name in names]\n    for name in names:\n"
           "        if name not in kw:\n            raise KeyError(name)\n    return first\n")
    at = src.index("for name in names:") + 4
    h = _rename_at(src, at, "name", "key")
    got = _next(h, analyser)
    assert apply_all(h.text("d"), got) == src.replace("for name in names:", "for key in names:").replace(
        "if name not", "if key not").replace("KeyError(name)", "KeyError(key)")
