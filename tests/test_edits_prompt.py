"""engine/edits/prompt.py: the next-edit prompt and the parser of hand-written model answers."""

from __future__ import annotations

import pytest

from engine.edits.history import EditHistory
from engine.edits.prompt import (
    CURSOR,
    EDIT_CLOSE,
    EDIT_OPEN,
    Window,
    build_prompt,
    chatml,
    choose_window,
    edit_diff,
    history_diffs,
    parse_answer,
    render_chat,
)

SRC = '''import math


def area(radius):
    return math.pi * radius ** 2


def scale(points, factor):
    out = []
    for x, y in points:
        out.append((x * factor, y * factor))
    return out
'''

QWEN_LIKE = ("{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
             "'<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
             "{%- endif %}")


def _edited() -> tuple[str, EditHistory]:
    h = EditHistory()
    h.open("d", SRC)
    at = SRC.index("x * factor")
    h.change("d", at, at + 1, "(x + 1)", now=0.0)
    return h.text("d") or "", h


def test_window_is_whole_lines_around_the_cursor():
    text = "".join(f"l{i}\n" for i in range(30))
    cur = text.index("l10") + 1
    w = choose_window(text, cur, before=2, after=3)
    assert text[w.start:w.end] == "l8\nl9\nl10\nl11\nl12\nl13\n" and w.cursor == cur
    w = choose_window("a\nb", 0, before=5, after=5)
    assert (w.start, w.end) == (0, 3)


def test_edit_diff_and_history():
    text, h = _edited()
    (d,) = history_diffs(text, h.edits("d"))
    assert d == ("@@ line 11 @@\n-        out.append((x * factor, y * factor))\n"
                 "+        out.append(((x + 1) * factor, y * factor))")
    from engine.edits.history import Edit

    assert edit_diff("a\nb\nc\n", Edit(2, "b", "B\nB2", line=1)) == "@@ line 2 @@\n-b\n+B\n+B2"


def test_prompt_shape_chatml_and_template_agree():
    text, h = _edited()
    p1 = build_prompt(text, h.edits("d"), path="geo.py", template="")  # no template: ChatML by hand
    p2 = build_prompt(text, h.edits("d"), path="geo.py", template=QWEN_LIKE)
    assert p1.text == p2.text
    t = p1.text
    assert t.startswith("<|im_start|>system\n") and t.endswith("<|im_start|>assistant\n```python\n")
    assert "```diff\n@@ line 11 @@" in t and f"{EDIT_OPEN}\n" in t and f"\n{EDIT_CLOSE}\n" in t
    assert t.count(CURSOR) == 3  # the instruction names it twice, the code holds it once
    assert "out.append(((x + 1)" + CURSOR in t or CURSOR + " * factor" in t
    assert "Before those edits" in t and "out.append((x * factor, y * factor))" in t
    assert p1.stop == ("```",)


def test_prompt_with_the_model_dirs_template(tmp_path):
    (tmp_path / "chat_template.jinja").write_text(QWEN_LIKE)
    text, h = _edited()
    assert build_prompt(text, h.edits("d"), model_dir=tmp_path).text == build_prompt(
        text, h.edits("d"), template="").text
    p = build_prompt(text, [], cursor=0, model_dir=None)
    assert "My recent edits" not in p.text and "Before those edits" not in p.text


def test_render_chat_plain():
    msgs = [{"role": "user", "content": "hi"}]
    assert render_chat(msgs, None) == chatml(msgs) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def _window(text: str) -> Window:
    return choose_window(text, text.index("(x + 1)") + 7)


def test_parse_the_expected_answer():
    text, h = _edited()
    w = _window(text)
    new_window = text[w.start:w.end].replace("y * factor", "(y + 1) * factor")
    e = parse_answer(new_window + "```", text, w, edits=h.edits("d"))
    assert e is not None and e.source == "model"
    assert (e.old_text, e.new_text) == ("y", "(y + 1)")
    assert e.apply(text) == text.replace("y * factor", "(y + 1) * factor")


@pytest.mark.parametrize("wrap", [
    lambda s: s,  # the closing fence missing but the turn ended
    lambda s: s + "```\nThis adds one to y.",  # prose after the block
    lambda s: "```python\n" + s + "```",  # its own fence
    lambda s: f"{EDIT_OPEN}\n" + s.replace("(y + 1)", f"(y + 1){CURSOR}") + f"{EDIT_CLOSE}\n```",  # echoed markers
])
def test_parse_tolerates_wrapping(wrap):
    text, h = _edited()
    w = _window(text)
    new_window = text[w.start:w.end].replace("y * factor", "(y + 1) * factor")
    e = parse_answer(wrap(new_window), text, w, edits=h.edits("d"))
    assert e is not None and e.apply(text) == text.replace("y * factor", "(y + 1) * factor")


def test_parse_rejects_bad_answers():
    text, h = _edited()
    w = _window(text)
    old = text[w.start:w.end]
    edits = h.edits("d")
    # a copy: nothing to show
    assert parse_answer(old + "```", text, w, edits=edits) is None
    # empty
    assert parse_answer("```", text, w, edits=edits) is None
    # two hunks
    two = old.replace("out = []", "out = list()").replace("return out", "return tuple(out)")
    assert parse_answer(two + "```", text, w, edits=edits) is None
    # undoing the user's edit
    assert parse_answer(old.replace("(x + 1)", "x") + "```", text, w, edits=edits) is None
    # breaks the file
    assert parse_answer(old.replace("y * factor))", "y * factor)") + "```", text, w, edits=edits) is None
    # cut short (the tail missing), or stopped on the token limit
    lines = old.splitlines(keepends=True)
    assert parse_answer("".join(lines[:-1]), text, w, edits=edits) is None
    good = old.replace("y * factor", "(y + 1) * factor")
    assert parse_answer(good, text, w, edits=edits, complete=False) is None
    # other code of the prompt instead of the window (seen from the 0.5B Instruct model): a rewrite
    assert parse_answer("def area(radius):\n    return math.pi * radius ** 2\n```", text, w, edits=edits) is None
    # too big a hunk
    big = old.replace("    return out\n", "".join(f"    x{i} = {i}\n" for i in range(9)) + "    return out\n")
    assert parse_answer(big + "```", text, w, edits=edits) is None
    assert parse_answer(big + "```", text, w, edits=edits, max_lines=10) is not None


def test_parse_non_python_skips_the_parse_check():
    text = "int f() {\n  a = 1;\n  b = 1;\n}\n"
    w = Window(0, len(text), 0)
    e = parse_answer(text.replace("b = 1;", "b = 2;") + "```", text, w, python=False)
    assert e is not None and (e.old_text, e.new_text) == ("1", "2") and text[e.range_start:e.range_end] == "1"


def test_parse_an_added_line():
    text, h = _edited()
    w = _window(text)
    old = text[w.start:w.end]
    new = old.replace("    return out\n", "    out.sort()\n    return out\n")
    e = parse_answer(new, text, w, edits=h.edits("d"))
    assert e is not None and e.old_text == "" and e.new_text == "    out.sort()\n"
    assert e.apply(text) == text.replace("    return out\n", "    out.sort()\n    return out\n")


class _FakeEngine:
    """Engine.complete's contract: answers a prompt (the FIM layout must be off during the call)."""

    def __init__(self, answer: str, reason: str = "stop") -> None:
        self.fim = object()
        self.model_dir = None
        self.answer, self.reason = answer, reason
        self.seen: list[tuple[str, object, object]] = []

    def complete(self, prefix, suffix="", params=None, cancel=None, on_token=None):
        from engine.types import Completion, Timings

        self.seen.append((prefix, self.fim, params))
        return [Completion(self.answer, [], self.reason)], Timings()


def test_model_next_edit_with_a_fake_engine():
    from engine.edits.model import model_next_edit

    text, h = _edited()
    w = _window(text)
    answer = text[w.start:w.end].replace("y * factor", "(y + 1) * factor") + "```"
    eng = _FakeEngine(answer)
    fim = eng.fim
    edit, raw = model_next_edit(eng, text, h.edits("d"), path="geo.py", cursor=w.cursor)
    assert raw == answer and eng.fim is fim
    prompt, fim_during, params = eng.seen[0]
    assert fim_during is None and prompt.endswith("```python\n")
    assert params.stop == ("```",) and not params.token_healing
    assert edit is not None and edit.apply(text) == text.replace("y * factor", "(y + 1) * factor")
    eng = _FakeEngine(answer, reason="length")  # cut on the token limit: nothing
    assert model_next_edit(eng, text, h.edits("d"), path="geo.py", cursor=w.cursor)[0] is None
