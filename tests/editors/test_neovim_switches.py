"""End-to-end in real Neovim 0.11 against the protocol stub: the plugin's switches (settings, trace, snooze,
disabled filetypes, excluded files) and :FlintPick (issue 34)."""

from __future__ import annotations

import json
import time

import pytest

from lsp_server.items import AGREE, PENDING

from .nvim_driver import Nvim, fake_variants, flint_config, poll, selects, stub_log, wait_select, write_sample

pytestmark = [pytest.mark.e2e, pytest.mark.editor]


def test_neovim_switches_with_stub(neovim_env, stub_server, tmp_path, artifacts):
    """Issue 15 items 3-6 in Neovim: settings and trace reach the server, snooze stops and resumes
    suggestions (and tells the server), disabled filetypes and excluded files never reach it, Pick
    Variant rows carry each variant's own latency or where it came from."""
    write_sample(tmp_path / "sample.py")
    (tmp_path / "notes.md").write_text("# notes\n")
    (tmp_path / ".env").write_text("TOKEN=abc\n")
    (tmp_path / "other.py").write_text("x = 1\n")
    nv = Nvim(neovim_env["FLINT_NVIM"], tmp_path, stub_server, artifacts,
              opts={"disabled_filetypes": ["markdown"], "trace": "messages",
                    "settings": {"routing": "hybrid", "remoteTimeoutMs": 3000}})
    try:
        nv.wait(lambda p: p["ready"] and p["status"]["state"] == "ready", 30, "the stub to be ready")
        init = next(e for e in stub_log(stub_server) if e["kind"] == "initialize")["params"]
        assert init["initializationOptions"] == {"maxVariants": 3, "maxLines": 4, "multiline": "auto",
                                                 "routing": "hybrid", "remoteTimeoutMs": 3000}, init
        assert init["trace"] == "messages"

        # Snooze: no requests, the status line says so, the server is told (enable false).
        nv.send(":FlintSnooze 5<CR>")
        p = nv.wait(lambda q: q["statusline"].startswith("Flint snoozed"), 10, "snoozed status line")
        assert p["statusline"] == "Flint snoozed 5 min", p["statusline"]
        cfgs = [flint_config(e) for e in stub_log(stub_server) if e["kind"] == "didChangeConfiguration"]
        assert cfgs and cfgs[-1].get("enable") is False and cfgs[-1].get("routing") == "hybrid", cfgs
        before = p["stats"]["requests"]
        nv.send("Go")
        time.sleep(1.5)
        p = nv.probe()
        assert p["mode"] == "i" and p["ghost"] is None and p["stats"]["requests"] == before, p
        nv.send("<Esc>:FlintResume<CR>")
        nv.wait(lambda q: q["statusline"].startswith("⚡ Flint"), 10, "resumed status line")
        cfgs = [flint_config(e) for e in stub_log(stub_server) if e["kind"] == "didChangeConfiguration"]
        assert cfgs[-1].get("enable") is not False, cfgs[-1]
        nv.send("cc")  # the empty body line again, in insert mode: Flint asks
        nv.wait(lambda q: q["ghost"] == "return a + b", 20, "ghost text after resume")
        nv.send("<Esc>")

        # Pick Variant rows: the server's own per-item figures, or what the answer cost instead.
        labels = json.loads(nv.expr(
            "json_encode(luaeval('vim.tbl_map(require\"flint\".variant_label, _A)', ["
            "{'insertText': 'return a + b', 'source': 'memory', 'totalMs': 0, 'ttftMs': 0},"
            "{'insertText': 'return a', 'source': 'type-through', 'totalMs': 0},"
            "{'insertText': \"\\n  return sum((a, b))\", 'source': 'model', 'totalMs': 312.4, 'ttftMs': 95.0,"
            " 'backend': 'remote'},"
            "{'insertText': 'pass', 'source': 'model', 'totalMs': 0}]))"))
        assert labels == ["return a + b   (from cache (memory))", "return a   (typed through)",
                          "return sum((a, b))   (312 ms, first token 95 ms, model, remote)",
                          "pass   (latency not reported, model)"], labels

        # A disabled filetype and an excluded file: not attached, never opened on the server.
        nv.send(":e notes.md<CR>")
        p = nv.wait(lambda q: q["buffer"] == "notes.md", 10, "notes.md")
        assert p["off_reason"] == "markdown" and not p["attached"], p
        assert p["statusline"] == "Flint off (markdown)"
        nv.send(":e .env<CR>")
        p = nv.wait(lambda q: q["buffer"] == ".env", 10, ".env")
        assert p["off_reason"] == "excluded file" and not p["attached"], p
        nv.send(":e other.py<CR>")
        nv.wait(lambda q: q["buffer"] == "other.py" and q["attached"], 10, "other.py attached")
        log, _ = poll(lambda: stub_log(stub_server),
                      lambda log: any(e["kind"] == "didOpen" and e["params"]["uri"].endswith("/other.py") for e in log), 10)
        opened = [e["params"]["uri"] for e in log if e["kind"] == "didOpen"]
        assert any(u.endswith("/other.py") for u in opened), opened
        assert not any(u.endswith((".md", ".env")) for u in opened), opened
        # Turning a filetype off at run time detaches its buffers.
        nv.send(":FlintToggleFiletype<CR>")
        p = nv.wait(lambda q: not q["attached"], 10, "python detached")
        assert p["off_reason"] == "python"
        nv.snapshot("switches")
    finally:
        nv.close()

ITEM_1 = {"index": 0, "insertText": "return a + b", "source": "model", "totalMs": 20.0, "ttftMs": 5.0}
ALL_ITEMS = [ITEM_1,
             {"index": 1, "insertText": "return sum((a, b))", "source": "model", "totalMs": 30.0, "ttftMs": 6.0},
             {"index": 2, "insertText": "return b + a", "source": "model", "totalMs": 40.0, "ttftMs": 7.0}]



def test_neovim_pick_variant_with_stub(neovim_env, stub_server, tmp_path, artifacts):
    """:FlintPick (issue 34): the list's rows and the server's note in its prompt; item 1 alone with
    `complete` false waits for flint/refresh and shows the longer answer; a complete short list shows at
    once with its note (the model agrees); a wait that runs out shows what there is, saying more were on
    their way. The chosen variant is inserted and reported."""
    write_sample(tmp_path / "sample.py")
    nv = Nvim(neovim_env["FLINT_NVIM"], tmp_path, stub_server, artifacts)
    try:
        nv.wait(lambda p: p["ready"] and p["status"]["state"] == "ready", 30, "the stub to be ready")
        nv.expr("v:lua.flint_record_select()")
        nv.send("Go<Esc>")  # the empty body line, normal mode
        nv.wait(lambda p: p["mode"] == "n" and p["cursor"][0] == 2, 10, "normal mode on line 2")

        # The stub's answer (no `complete`, three items): the list at once, then the choice inserted.
        nv.send(":FlintPick<CR>")
        pick = wait_select(nv, 1, 10, "the list of the stub's variants")
        assert pick == {"prompt": "Flint variants", "rows": [
            "return a + b   (from cache (memory))", "return sum((a, b))   (30 ms, first token 6.0 ms, model)",
            "raise NotImplementedError   (40 ms, first token 7.0 ms, model)"]}, pick
        nv.expr("v:lua.flint_choose(2)")
        p = nv.wait(lambda q: q["lines"][1] == "return sum((a, b))", 10, "the chosen variant inserted")
        assert p["stats"]["accepted"] == 1, p
        nv.send("cc<Esc>")
        nv.wait(lambda q: q["lines"][1] == "" and q["mode"] == "n", 10, "the line emptied again")

        # Item 1 alone, more on their way: no list until flint/refresh brings them all.
        fake_variants(nv, [
            {"id": "p1", "items": [ITEM_1], "complete": False, "note": PENDING},
            {"id": "p1", "items": ALL_ITEMS, "complete": True, "note": ""}])
        t0 = time.time()
        nv.send(":FlintPick<CR>")
        time.sleep(0.5)
        assert len(selects(nv)) == 1, selects(nv)
        nv.expr("v:lua.flint_refresh()")
        pick = wait_select(nv, 2, 10, "the list after flint/refresh")
        assert time.time() - t0 < 2.5, "shown by the 3 s wait, not by flint/refresh"
        assert pick["prompt"] == "Flint variants" and len(pick["rows"]) == 3, pick
        nv.expr("v:lua.flint_choose(3)")
        nv.wait(lambda q: q["lines"][1] == "return b + a", 10, "the third variant inserted")

        # A short list the server calls complete (its variants agree): at once, saying so.
        fake_variants(nv, [
            {"id": "p2", "items": [ITEM_1], "complete": True, "note": AGREE}])
        t0 = time.time()
        nv.send(":FlintPick<CR>")
        pick = wait_select(nv, 3, 10, "the agreeing list")
        assert time.time() - t0 < 2.5, "a complete answer waited"
        assert pick["prompt"] == "Flint variants · " + AGREE and len(pick["rows"]) == 1, pick

        # Still incomplete when the wait runs out: what there is, with the server's note.
        fake_variants(nv, [
            {"id": "p3", "items": [ITEM_1], "complete": False, "note": PENDING}])
        nv.send(":FlintPick<CR>")
        time.sleep(1.5)
        assert len(selects(nv)) == 3, selects(nv)
        pick = wait_select(nv, 4, 10, "the list after the wait")
        assert pick["prompt"] == "Flint variants · " + PENDING and len(pick["rows"]) == 1, pick
    finally:
        nv.close()
    accepts = [e["params"] for e in stub_log(stub_server) if e["kind"] == "flint/didAccept"]
    assert [a["index"] for a in accepts] == [1, 2] and accepts[1]["id"] == "p1", accepts
