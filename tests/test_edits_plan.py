"""engine/edits/plan.py: a plan of next edits matched against the texts that apply it (issue 50)."""

from __future__ import annotations

from engine.edits.common import NextEdit, apply_all
from engine.edits.plan import remaining

SRC = ("def area(width, height):\n"
       "    if width < 0:\n"
       "        raise ValueError(width)\n"
       "    return width * height\n")


def _renames(text: str, old: str, new: str) -> list[NextEdit]:
    out, at = [], text.find(old)
    while at >= 0:
        out.append(NextEdit(at, at + len(old), old, new, "rename", 0.95))
        at = text.find(old, at + 1)
    return out


def test_nothing_applied_leaves_every_edit():
    plan = _renames(SRC, "width", "w")
    assert remaining(SRC, plan, SRC) == plan


def test_each_applied_edit_leaves_the_others_moved_to_the_new_text():
    plan = _renames(SRC, "width", "size_w")
    text = SRC
    for k in range(len(plan)):
        # the client applies the first of what is left, as Tab does
        rest = remaining(SRC, plan, text)
        assert rest is not None and len(rest) == len(plan) - k
        assert all(text[e.range_start:e.range_end] == "width" for e in rest)
        text = rest[0].apply(text)
    assert remaining(SRC, plan, text) == []
    assert text == SRC.replace("width", "size_w")


def test_edits_applied_out_of_order_and_a_shrinking_name():
    plan = _renames(SRC, "height", "h")
    text = plan[1].apply(SRC)  # the use first, then the parameter
    rest = remaining(SRC, plan, text)
    assert rest is not None and [(e.range_start, e.old_text) for e in rest] == [(plan[0].range_start, "height")]


def test_any_other_change_is_no_plan():
    plan = _renames(SRC, "width", "w")
    assert remaining(SRC, plan, SRC.replace("return", "return  ")) is None
    assert remaining(SRC, plan, plan[0].apply(SRC) + "# note\n") is None
    # half of the new name typed at a reference: not yet an applied edit
    assert remaining(SRC, plan, SRC.replace("raise ValueError(width)", "raise ValueError(wi)")) is None
    # the same length as one applied edit, but elsewhere
    assert remaining(SRC, plan, SRC.replace("def area", "def xxxx")) is None


def test_a_rename_with_a_hundred_references_is_followed_to_the_end():
    text0 = "def f(value):\n" + "".join(f"    print(value + {i})\n" for i in range(100)) + "    return value\n"
    plan = _renames(text0, "value", "amount")
    assert len(plan) == 102
    text = text0
    while (rest := remaining(text0, plan, text)):
        text = rest[len(rest) // 2].apply(text)  # from the middle: order does not matter
    assert text == apply_all(text0, plan) == text0.replace("value", "amount")


def test_removals_and_insertions_as_edits():
    text0 = "f(a, b)\nf(c, d)\n"
    plan = [NextEdit(3, 6, ", b", "", "argument", 0.9), NextEdit(11, 14, ", d", "", "argument", 0.9)]
    rest = remaining(text0, plan, "f(a)\nf(c, d)\n")
    assert rest is not None and [(e.range_start, e.old_text) for e in rest] == [(8, ", d")]
    assert remaining(text0, plan, "f(a)\nf(c)\n") == []
    assert remaining(text0, plan, "f(a)\nf(c, e)\n") is None
