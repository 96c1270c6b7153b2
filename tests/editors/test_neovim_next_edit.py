"""End-to-end in real Neovim 0.11 against the real server (issue 37): next edits after a rename, in the same
file and in another buffer."""

from __future__ import annotations

import pytest

from .nvim_driver import Nvim
from .test_vscode import NEXT_EDIT_LIB, NEXT_EDIT_SRC, NEXT_EDIT_USE  # the same files in both editors

pytestmark = [pytest.mark.e2e, pytest.mark.editor]


def test_neovim_next_edit_after_a_rename(neovim_env, real_server, tmp_path, artifacts):
    """Issue 37: rename a parameter at its definition (normal-mode `ciw`), the real server offers the next
    reference (extmarks: struck-through old text, the new text inline, a sign); <Tab> jumps there, <Tab>
    applies it, and the one after is offered at once; <Esc> dismisses."""
    (tmp_path / "sample.py").write_text(NEXT_EDIT_SRC)
    nv = Nvim(neovim_env["FLINT_NVIM"], tmp_path, real_server, artifacts)
    try:
        nv.wait(lambda p: p["ready"] and p["attached"], 60, "the Flint client to attach")
        nv.send("gg0f(l")  # on the `v` of `values`
        nv.send("ciwitems<Esc>")
        p = nv.wait(lambda p: p["next_edit"] is not None, 60, "a next edit after the rename")
        nv.snapshot("1-next-edit")
        ne = p["next_edit"]
        assert (ne["row"], ne["col"], ne["old_text"], ne["new_text"], ne["source"]) == \
            (2, 13, "values", "items", "rename"), ne
        assert ne["marks"] == 2 and p["cursor"][0] == 1 and p["mode"] == "n", p
        nv.send("<Tab>")  # jump
        p = nv.wait(lambda p: p["cursor"] == [3, 13], 10, "the cursor at the next edit")
        assert p["lines"][2] == "    for v in values:" and p["next_edit"]["jumped"], p
        nv.send("<Tab>")  # apply; the next one comes at once
        p = nv.wait(lambda p: p["lines"][2] == "    for v in items:" and p["next_edit"] is not None
                    and p["next_edit"]["row"] == 4, 30, "the edit applied and the last reference offered")
        nv.snapshot("2-applied")
        nv.send("<Esc>")  # dismiss
        p = nv.wait(lambda p: p["next_edit"] is None, 10, "the next edit dismissed")
        assert p["lines"] == NEXT_EDIT_SRC.replace("values", "items", 2).splitlines(), p["lines"]
        assert p["lines"][4] == "    return out / len(values)", p
    finally:
        nv.close()


def test_neovim_next_edit_in_another_file(neovim_env, real_server, tmp_path, artifacts):
    """Issue 37 across files: `scale` renamed in sample.py (the buffer Nvim opens); once its own call is
    applied, the other buffer use.py (which imports it, and holds an unsaved call) is offered by name;
    <Tab> opens it at the edit, <Tab> applies, and its other references follow."""
    (tmp_path / "sample.py").write_text(NEXT_EDIT_LIB)
    (tmp_path / "use.py").write_text(NEXT_EDIT_USE.replace("from lib", "from sample"))
    nv = Nvim(neovim_env["FLINT_NVIM"], tmp_path, real_server, artifacts)
    try:
        nv.wait(lambda p: p["ready"] and p["attached"], 60, "the Flint client to attach")
        nv.send(":edit use.py<CR>")
        nv.wait(lambda p: p["buffer"] == "use.py" and p["attached"], 30, "use.py attached")
        nv.send("Goprint(scale([2], 4))<Esc>")  # not saved
        nv.wait(lambda p: p["lines"][-1] == "print(scale([2], 4))", 10, "the unsaved call")
        nv.send(":buffer sample.py<CR>")
        nv.wait(lambda p: p["buffer"] == "sample.py", 10, "back in sample.py")
        nv.send("gg0w")  # on `scale`
        nv.send("ciwtimes<Esc>")
        p = nv.wait(lambda p: p["next_edit"] is not None and p["next_edit"].get("row") == 5, 60,
                    "the call in twice() offered")
        nv.send("<Tab>")
        nv.wait(lambda p: p["cursor"][0] == 6, 10, "the cursor at the call")
        nv.send("<Tab>")
        p = nv.wait(lambda p: p["next_edit"] is not None and "away" in p["next_edit"], 30, "use.py offered by name")
        assert p["next_edit"]["away"]["uri"].endswith("/use.py") and p["next_edit"]["away"]["row"] == 0, p
        nv.snapshot("1-away")
        nv.send("<Tab>")  # open use.py at the import
        p = nv.wait(lambda p: p["buffer"] == "use.py" and p["next_edit"] is not None
                    and p["next_edit"].get("jumped"), 10, "use.py opened at the edit")
        assert p["cursor"] == [1, 19] and p["next_edit"]["old_text"] == "scale", p  # `from sample import scale`
        def done(q: dict) -> bool:
            return not any("scale" in ln for ln in q["lines"])

        for _ in range(8):  # <Tab> applies; the next one is offered, <Tab> jumps, <Tab> applies...
            if done(p):
                break
            before = (p["lines"], p["cursor"])
            nv.send("<Tab>")  # (only once the last one was handled: a <Tab> with nothing offered is <C-I>)
            p = nv.wait(lambda q, b=before: (q["lines"], q["cursor"]) != b and (q["next_edit"] is not None or done(q)),
                        30, "the next edit in use.py")
        nv.snapshot("2-done")
        expected = (NEXT_EDIT_USE.replace("from lib", "from sample") + "print(scale([2], 4))").replace("scale", "times")
        assert p["lines"] == expected.splitlines(), p["lines"]
    finally:
        nv.close()
