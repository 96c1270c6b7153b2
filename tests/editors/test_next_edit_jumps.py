"""End-to-end, issue 50, in real editors against the real server: a parameter added at its definition marks
the call's jump target (the parameter's name, or the model's argument as ghost text), Tab jumps there and,
with an argument shown, Tab again writes it; in Neovim, an argument removed where the arguments stand one
a line is shown across its lines and applied whole. What the model writes is its own: the tests check the
place, and that the file with it parses."""

from __future__ import annotations

import ast

import pytest

from .nvim_driver import Nvim, poll
from .test_vscode import run_vscode

pytestmark = [pytest.mark.e2e, pytest.mark.editor]

AREA = ("def area(w, h):\n"
        "    return w * h\n"
        "\n"
        "\n"
        "print(area(2, 3))\n")
STACKED = ("def total(values, factor, scale):\n"
           "    return sum(values) * factor\n"
           "\n"
           "\n"
           "a = total(\n"
           "    [1],\n"
           "    2,\n"
           "    3,\n"
           ")\n")


def test_vscode_jump_target_after_an_added_parameter(vscode_env, vsix, real_server, tmp_path, artifacts):
    seen = run_vscode(vscode_env, vsix, real_server, tmp_path, artifacts, timeout_ms=180000, scenario="nextEditJump",
                      files={"area.py": AREA}, settings={"editor.inlineSuggest.enabled": False})
    added = seen["jumpMarks"]["added"]
    assert added and seen["jumpMarks"]["gutter"] >= 1, seen["jumpMarks"]
    assert seen["cursorAfterJumpTarget"] == [5, 16], seen  # 1-based: after `print(area(2, 3`
    after = seen["afterJump"]
    ast.parse(after)
    if any(not a.startswith("\u2038") for a in added):  # the model's argument was shown: Tab wrote it
        assert after.splitlines()[4].startswith("print(area(2, 3, ") and after.count("\n") == AREA.count("\n")
    else:
        assert added == ["\u2038unit"] and after == AREA.replace("(w, h)", "(w, h, unit)"), seen


def test_neovim_jump_target_after_an_added_parameter(neovim_env, real_server, tmp_path, artifacts):
    (tmp_path / "sample.py").write_text(AREA)
    nv = Nvim(neovim_env["FLINT_NVIM"], tmp_path, real_server, artifacts)
    try:
        nv.wait(lambda p: p["ready"] and p["attached"], 60, "the Flint client to attach")
        nv.send("gg0f)i, unit<Esc>")
        p = nv.wait(lambda p: p["next_edit"] is not None and p["next_edit"].get("note") == "unit", 60,
                    "the jump target after the added parameter")
        nv.snapshot("1-jump")
        ne = p["next_edit"]
        assert (ne["row"], ne["col"], ne["old_text"], ne["source"]) == (4, 15, "", "signature"), ne
        assert ne["marks"] == 1, ne
        # the jump comes at once; the model's argument, when it has one, once written (the client asks again)
        p, _ = poll(nv.probe, lambda p: bool((p["next_edit"] or {}).get("new_text")), 8)
        ne = p["next_edit"] or ne
        assert (ne["row"], ne["col"], ne["marks"]) == (4, 15, 1), ne  # the same target, one mark
        ghost = ne["new_text"]
        nv.send("<Tab>")  # jump
        p = nv.wait(lambda p: p["cursor"] == [5, 15], 10, "the cursor at the jump target")
        if not ghost:
            # asked again there: the jump alone at the cursor (or nothing), never anything elsewhere
            assert p["next_edit"] is None or (p["next_edit"]["row"], p["next_edit"]["col"]) == (4, 15), p
            return
        assert ghost.startswith(", ") and "\n" not in ghost, ghost
        nv.send("<Tab>")  # write the argument
        p = nv.wait(lambda p: p["lines"][4] == "print(area(2, 3" + ghost + "))", 10, "the argument written")
        ast.parse("\n".join(p["lines"]))
    finally:
        nv.close()


def test_neovim_edit_spanning_lines_is_shown_and_applied_whole(neovim_env, real_server, tmp_path, artifacts):
    (tmp_path / "sample.py").write_text(STACKED)
    nv = Nvim(neovim_env["FLINT_NVIM"], tmp_path, real_server, artifacts)
    try:
        nv.wait(lambda p: p["ready"] and p["attached"], 60, "the Flint client to attach")
        nv.send("gg025|d7l")  # ", scale" deleted at the def
        p = nv.wait(lambda p: p["next_edit"] is not None and p["next_edit"].get("source") == "signature", 60,
                    "the argument's removal offered")
        nv.snapshot("1-stacked")
        ne = p["next_edit"]
        assert (ne["row"], ne["col"], ne["end_row"], ne["end_col"], ne["old_text"], ne["new_text"]) == \
            (6, 5, 7, 5, ",\n    3", ""), ne
        nv.send("<Tab>")  # jump
        nv.wait(lambda p: p["cursor"] == [7, 5], 10, "the cursor at the removal")
        nv.send("<Tab>")  # apply: both lines' parts at once
        p = nv.wait(lambda p: len(p["lines"]) == len(STACKED.splitlines()) - 1, 10, "the argument removed")
        assert p["lines"][4:] == ["a = total(", "    [1],", "    2,", ")"], p["lines"]
    finally:
        nv.close()
