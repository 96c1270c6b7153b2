"""engine/edits/fill.py: the argument at a jump target (issue 50): the slot signature.py gives each call, the
prompt around it, cutting the model's text to one argument, the confidence floor, and the plan keeping a
filled jump. Pure functions; the real model is tests/test_edits_fill_model.py's."""

from __future__ import annotations

import ast

import pytest

from engine.edits.common import Fill, NextEdit, apply_all
from engine.edits.fill import FLOOR, answer, argument, fill_prompt, header, single_argument
from engine.edits.plan import remaining, unapplied
from engine.edits.signature import call_edits, calls, signature_change

SRC = '''def area(w, h):
    return w * h


def report(shapes):
    total = area(2, 3)
    for s in shapes:
        total += area(s.w,
                      s.h)
    print(area(h=1, w=2), area(*shapes[0]))
    return area()
'''


def _added(src: str, old: str, new: str) -> tuple[str, list[NextEdit], int]:
    at = src.index(old)
    after = src[:at] + new + src[at + len(old):]
    s = next(i for i in range(len(src)) if src[i] != after[i])  # the edit as typed: its differing span
    tail = next(i for i in range(1, len(src)) if src[-i] != after[-i]) - 1
    ch = signature_change(src, after, s, len(src) - tail, len(after) - tail)
    assert ch is not None and ch.kind == "added"
    offs = [i for i in range(len(after)) if after.startswith(ch.name + "(", i)]
    return after, call_edits(after, ch, calls(after, offs)), ch.name_at


def _insert(text: str, jump: NextEdit, arg: str) -> str:
    done = answer(jump, arg)
    assert done.fill is not None and done.fill.text == arg
    return text[:jump.range_start] + done.fill.insert + text[jump.range_end:]


def test_each_slot_writes_one_valid_argument_whatever_the_call_looks_like():
    after, jumps, _ = _added(SRC, "def area(w, h)", "def area(w, h, unit)")
    assert [j.note for j in jumps] == ["unit"] * 4  # area(*shapes[0]) unpacks: where it goes is unknown
    text = after
    for j in sorted(jumps, key=lambda j: -j.range_start):  # from the end: earlier offsets hold
        text = _insert(text, j, '"cm"')
    ast.parse(text)
    assert 'area(2, 3, "cm")' in text and 'area(s.w,\n                      s.h, "cm")' in text
    assert 'area(h=1, w=2, unit="cm")' in text  # after keywords: by name
    assert 'return area(unit="cm")' in text  # its earlier arguments are missing too: by name


def test_a_parameter_added_in_front_goes_before_the_argument_now_in_its_place():
    after, jumps, _ = _added(SRC, "def area(w, h)", "def area(scale, w, h)")
    first = min(jumps, key=lambda j: j.range_start)
    assert first.fill == Fill("", ", ")
    assert 'area(0.5, 2, 3)' in _insert(after, first, "0.5")


def test_a_keyword_only_parameter_is_passed_by_name():
    after, jumps, _ = _added(SRC, "def area(w, h)", "def area(w, h, *, unit)")
    first = min(jumps, key=lambda j: j.range_start)
    assert first.fill is not None and first.fill.keyword == "unit"
    prefix, suffix = fill_prompt(after, first, "")
    assert prefix.endswith("total = area(2, 3, unit=") and suffix.startswith(")\n")


def test_the_prompt_shows_the_edited_signature_when_the_window_does_not():
    padded = SRC.replace("\n\n\ndef report", "\n\n" + "# other code\n" * 120 + "\n\ndef report")
    after, jumps, name_at = _added(padded, "def area(w, h)", "def area(w, h, unit)")
    sig = header(after, name_at)
    assert sig == "def area(w, h, unit):"
    last = max(jumps, key=lambda j: j.range_start)  # return area(): far from the def
    prefix, suffix = fill_prompt(after, last, sig, max_prefix=30, def_at=0)
    assert prefix.startswith("def area(w, h, unit):\n    ...\n") and prefix.endswith("return area(unit=")
    assert "return w * h" not in prefix and suffix.startswith(")\n")
    whole, _ = fill_prompt(after, last, sig, max_prefix=len(after), def_at=0)  # the window holds the def: no stub
    assert whole.startswith("def area(w, h, unit):\n    return w * h")


def test_nearby_call_sites_share_the_start_of_their_prompts():
    after, jumps, _ = _added(SRC.replace("def report", "# x\n" * 200 + "def report"), "def area(w, h)",
                             "def area(w, h, unit)")
    a, b = sorted(jumps, key=lambda j: j.range_start)[:2]
    pa, pb = fill_prompt(after, a, "", max_prefix=300)[0], fill_prompt(after, b, "", max_prefix=300)[0]
    assert len(pa) >= 300 and pb.startswith(pa[:len(pa) - len("area(2, 3, ")])  # the KV of one serves the next


def test_a_signature_over_several_lines_is_the_header_and_a_method_is_dedented():
    src = "class A:\n    def run(\n        self,\n        n,  # how many (at most)\n    ) -> int:\n        return n\n"
    sig = header(src, src.index("run"))
    assert sig == "    def run(\n        self,\n        n,  # how many (at most)\n    ) -> int:"
    j = NextEdit(len(src), len(src), "", "", "signature", 0.9, "n", Fill())
    prefix, _ = fill_prompt(src + "A().run(", j, sig, max_prefix=8)
    assert prefix.startswith("def run(\n    self,")


@pytest.mark.parametrize("raw, expected", [
    ('"cm"', '"cm"'),
    (' "cm")\n', '"cm"'),  # the model closes the call: cut there
    ('"cm", 4)', '"cm"'),  # a second argument: cut at the comma
    ("max(a, b)", "max(a, b)"),  # commas inside brackets belong to it
    ("'a,b'", "'a,b'"),  # and inside strings
    ("units[\"m\"]\nx = 1", 'units["m"]'),
    ("", ""),
    (")", ""),
    ("return x", ""),  # not an expression
    ("...", ""),
    ("a b", ""),
])
def test_argument_is_one_expression_or_nothing(raw, expected):
    assert argument(raw)[0] == expected


def test_a_text_cut_by_the_token_limit_is_no_argument_unless_something_ended_it():
    assert argument("compute_the_value(a", finish_reason="length") == ("", 0.0)
    assert argument("value.attr", finish_reason="length") == ("", 0.0)  # may go on: .attr2...
    assert argument("value, x", finish_reason="length")[0] == "value"


def test_the_lowest_probability_of_its_own_tokens_is_its_confidence():
    assert argument('"cm"', ((0, 0.4), (3, 0.9)))[1] == 0.4
    assert argument('"cm", x', ((0, 0.8), (6, 0.01)))[1] == 0.8  # the cut-off tokens do not count
    assert argument("x")[1] == 1.0  # no token below the doubt threshold


def test_below_the_floor_only_the_jump_is_offered():
    j = NextEdit(10, 10, "", "", "signature", 0.9, "unit", Fill(", ", ""))
    low = answer(j, '"cm"', ((0, FLOOR / 2),))
    assert low.fill is not None and low.fill.text == "" and low.fill.insert == "" and low.fill.confidence == FLOOR / 2
    high = answer(j, '"cm"', ((0, FLOOR + 0.1),))
    assert high.fill is not None and high.fill.insert == ', "cm"' and high.jump


def test_keyword_form_only_for_its_own_name_where_no_argument_follows():
    assert single_argument('unit="cm"', "unit") and not single_argument('units="cm"', "unit")
    end = NextEdit(0, 0, "", "", "signature", 0.9, "unit", Fill(", ", ""))
    before = NextEdit(0, 0, "", "", "signature", 0.9, "unit", Fill("", ", "))
    assert answer(end, 'unit="cm"').fill.text == 'unit="cm"'  # type: ignore[union-attr]
    assert answer(before, 'unit="cm"').fill.text == ""  # type: ignore[union-attr]


def test_the_plan_keeps_a_fill_and_says_which_edit_each_remaining_one_is():
    then = "f(1)\nf(2)\ng(x)\n"
    a = NextEdit(3, 3, "", "", "signature", 0.9, "u", Fill(", ", "", "", "7", 0.8))
    b = NextEdit(8, 8, "", "", "signature", 0.9, "u", Fill(", ", ""))
    c = NextEdit(10, 11, "g", "h", "rename", 0.95)
    now = apply_all(then, [c]).replace("f(1)", "f(1, 5)")  # c applied, a written at (not what was offered)
    left = unapplied(then, [c, a, b], now)
    assert left is not None and [i for i, _ in left] == [2]
    assert left[0][1].range_start == 11 and left[0][1].fill == b.fill
    assert remaining(then, [a], then) == [a]  # the fill travels with the edit


def test_an_argument_that_repeats_the_one_after_the_target_is_none():
    before = NextEdit(0, 0, "", "", "signature", 0.9, "highlighter", Fill("", ", "))
    copy = answer(before, "verbose)", after="verbose)\n")
    assert copy.fill is not None and copy.fill.text == "" and copy.fill.confidence == 0.0
    assert answer(before, "highlighter", after="verbose)\n").fill.text == "highlighter"  # type: ignore[union-attr]
    assert answer(before, "verbose_level", after="verbose)\n").fill.text == "verbose_level"  # type: ignore[union-attr]


def test_the_calling_functions_header_goes_before_a_window_that_starts_inside_it():
    caller = ("def determine_setup(\n    inifile,\n    invocation_dir,\n) -> str:\n" + "    x = 1\n" * 60 +
              "    if x:\n        return locate(x, \n")
    src = "def locate(invocation_dir, args):\n    return args\n\n\n" + caller
    at = len(src) - 1
    j = NextEdit(at, at, "", "", "signature", 0.9, "invocation_dir", Fill("", ", "))
    sig = "def locate(invocation_dir, args):"
    prefix, _ = fill_prompt(src, j, sig, max_prefix=100, def_at=0)
    assert prefix.startswith(sig + "\n    ...\n\n\ndef determine_setup(\n    inifile,\n    invocation_dir,\n) -> str:\n"
                             "    ...\n    x = 1\n")
    assert prefix.endswith("return locate(x, ")
    plain, _ = fill_prompt(src, j, sig, max_prefix=100, def_at=0, caller=False)
    assert "determine_setup" not in plain
    whole, _ = fill_prompt(src, j, sig, max_prefix=len(src), def_at=0)  # the window holds it: nothing added
    assert whole.count("def determine_setup(") == 1
    module = "x = 1\n" * 100 + "y = locate(x, \n"  # a call at module level: no header
    j2 = NextEdit(len(module) - 1, len(module) - 1, "", "", "signature", 0.9, "invocation_dir", Fill("", ", "))
    assert fill_prompt(module, j2, "", max_prefix=50)[0].startswith("x = 1\n")
