"""End-to-end: the Flint Neovim plugin in real Neovim 0.11 (headless, driven over its RPC socket).

Keys go through Neovim's real input loop (`nvim --server SOCK --remote-send`), so insert mode,
mappings and autocommands behave as for a person; the test reads the ghost-text extmark back.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import HERE, ROOT

pytestmark = pytest.mark.e2e


class Nvim:
    def __init__(self, exe: str, workdir: Path, server: dict, artifacts: Path, mode: str = ""):
        self.exe = exe
        self.sock = str(workdir / "nvim.sock")
        self.artifacts = artifacts
        env = dict(os.environ)
        env.update(server["env"])
        env.update({
            "FLINT_TEST_PLUGIN": str(ROOT / "editor-extension" / "neovim"),
            "FLINT_TEST_CMD": json.dumps(server["cmd"]),
            "FLINT_TEST_MODE": mode,
            "XDG_STATE_HOME": str(workdir / "state"),  # LSP log and shada stay in the test dir
            "XDG_DATA_HOME": str(workdir / "data"),
            "XDG_CONFIG_HOME": str(workdir / "config"),
        })
        self.file = workdir / "sample.py"
        self.stderr = open(artifacts / "nvim-stderr.log", "w")
        self.proc = subprocess.Popen(
            [exe, "--headless", "--listen", self.sock, "-u", str(HERE / "nvim_init.lua"), "-i", "NONE",
             str(self.file)],
            cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr)
        deadline = time.time() + 20
        while not os.path.exists(self.sock):
            assert self.proc.poll() is None, "nvim exited"
            assert time.time() < deadline, "nvim did not open its socket"
            time.sleep(0.05)

    def send(self, keys: str) -> None:
        subprocess.run([self.exe, "--server", self.sock, "--remote-send", keys], check=True, timeout=20)

    def probe(self) -> dict:
        out = subprocess.run([self.exe, "--server", self.sock, "--remote-expr", "v:lua.flint_probe()"],
                             capture_output=True, text=True, timeout=20)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def wait(self, pred, timeout: float, what: str) -> dict:
        deadline = time.time() + timeout
        p = self.probe()
        while not pred(p):
            if time.time() > deadline:
                self.snapshot("timeout")
                raise AssertionError(f"timed out waiting for {what}: {json.dumps(p, indent=1)}")
            time.sleep(0.1)
            p = self.probe()
        return p

    def snapshot(self, name: str) -> None:
        try:
            (self.artifacts / f"{name}.json").write_text(json.dumps(self.probe(), indent=1))
        except Exception:
            pass

    def close(self) -> None:
        try:
            subprocess.run([self.exe, "--server", self.sock, "--remote-send", "<Esc>:qa!<CR>"], timeout=5)
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


def run_flow(nv: Nvim, timeout: float) -> dict:
    """Type in a function body, see ghost text, cycle variants, accept; returns what it saw."""
    seen: dict = {}
    nv.wait(lambda p: p["ready"], 60, "the Flint client to initialize")
    if nv.probe()["status"]["state"] == "loading":
        nv.wait(lambda p: p["status"]["state"] != "loading", timeout, "the model to load")
    # Go to the end of the function header, open a line, indent: the cursor sits in the empty body.
    # Normal-mode `G` then `o`: Python's indent plugin puts the cursor in the (empty) body, and entering
    # insert mode asks Flint for a suggestion.
    nv.send("Go")
    p = nv.wait(lambda p: p["ghost"] not in (None, ""), timeout, "ghost text")
    assert p["mode"] == "i", p
    nv.snapshot("1-ghost")
    seen["ghost"] = p["ghost"]
    seen["first"] = p["current"]
    seen["status_after_first"] = p["statusline"]
    assert p["current"]["text"].startswith(p["ghost"].rstrip("\n")[:1]), p

    # Cycling changes the ghost text. An automatic request brings the fastest single variant; the
    # first <M-]> asks again as "invoked", which brings all ranked variants from one batched pass.
    nv.send("<M-]>")
    p2 = nv.wait(lambda q: q["current"] and q["current"]["count"] >= 2 and q["ghost"]
                 and q["ghost"] != seen["ghost"], timeout, "another variant after <M-]>")
    nv.snapshot("2-cycled")
    seen["cycled"] = p2["ghost"]
    seen["variants"] = p2["current"]["count"]
    nv.send("<M-[>")
    p3 = nv.wait(lambda q: q["ghost"] == seen["ghost"], 10, "the first variant again after <M-[>")

    # Tab accepts the whole suggestion: the buffer now holds it after the indentation.
    before = p3["lines"]
    nv.send("<Tab>")
    p4 = nv.wait(lambda q: q["lines"] != before, 10, "the accepted text in the buffer")
    nv.snapshot("3-accepted")
    body = "\n".join(p4["lines"][len(before) - 1:])
    assert body == "    " + seen["ghost"] or body.startswith("    " + seen["ghost"]), (body, seen["ghost"])
    assert p4["stats"]["accepted"] == 1
    seen["buffer"] = p4["lines"]
    seen["status"] = p4["status"]
    return seen


def _write_sample(path: Path, header: str = "def add(a, b):") -> None:
    path.write_text(header + "\n")


def test_neovim_client_protocol_with_stub(neovim_env, stub_server, tmp_path, artifacts):
    """Client paths against the protocol stub: ghost text, cycle, accept, word accept, reports."""
    _write_sample(tmp_path / "sample.py")
    nv = Nvim(neovim_env["FLINT_NVIM"], tmp_path, stub_server, artifacts)
    try:
        seen = run_flow(nv, timeout=30)
        assert seen["ghost"] == "return a + b"
        assert seen["cycled"] == "return sum((a, b))"
        assert seen["buffer"] == ["def add(a, b):", "    return a + b"]
        assert seen["status"]["model"] == "stub" and seen["status"]["state"] == "ready"
        # Word accept: a new line gets the generic variants; accept one word, then the rest with Tab.
        nv.send("<CR>x = ")
        nv.wait(lambda q: q["ghost"] == "flint_one()", 20, "ghost text on the second line")
        nv.send("<M-Right>")
        q = nv.wait(lambda q: q["lines"][-1] == "x = flint_one", 10, "one word accepted")
        assert q["ghost"] == "()", q
        nv.send("<Tab>")
        nv.wait(lambda q: q["lines"][-1] == "x = flint_one()", 10, "the rest accepted")
        nv.snapshot("4-word")
        time.sleep(0.3)
    finally:
        nv.close()
    log = [json.loads(line) for line in stub_server["log"].read_text().splitlines()]
    kinds = [e["kind"] for e in log]
    assert "flint/didShow" in kinds
    partial = [e["params"] for e in log if e["kind"] == "flint/didPartiallyAccept"]
    assert partial and partial[0]["acceptedLength"] == len("flint_one") and partial[0]["index"] == 0
    accepts = [e["params"] for e in log if e["kind"] == "flint/didAccept"]
    assert len(accepts) == 2 and accepts[0]["index"] == 0


def test_neovim_real_model(neovim_env, real_server, tmp_path, artifacts):
    """The real `flint serve` and model: ghost text from the model, cycling changes it, Tab inserts it."""
    # A body with several plausible completions, so the model's variants differ.
    _write_sample(tmp_path / "sample.py", "def greet(name):")
    nv = Nvim(neovim_env["FLINT_NVIM"], tmp_path, real_server, artifacts)
    try:
        seen = run_flow(nv, timeout=180)
    finally:
        nv.close()
    (artifacts / "seen.json").write_text(json.dumps(seen, indent=1))
    assert seen["status"]["state"] in ("ready", "busy"), seen["status"]
    assert isinstance(seen["status"]["lastLatencyMs"], (int, float)), seen["status"]


def test_neovim_07_fallback_loads(neovim_env, stub_server, tmp_path, artifacts):
    """Neovim 0.7 (Debian): the plugin loads, picks completion-item mode and attaches the server."""
    exe = "/usr/bin/nvim"
    if not os.path.exists(exe):
        pytest.skip("Debian's neovim (0.7) is not installed")
    _write_sample(tmp_path / "sample.py")
    env = dict(os.environ)
    env.update(stub_server["env"])
    env.update({"FLINT_TEST_PLUGIN": str(ROOT / "editor-extension" / "neovim"),
                "FLINT_TEST_CMD": json.dumps(stub_server["cmd"]), "FLINT_TEST_MODE": "",
                "XDG_STATE_HOME": str(tmp_path / "s"), "XDG_CACHE_HOME": str(tmp_path / "c")})
    script = tmp_path / "check.lua"
    script.write_text(
        "vim.wait(15000, function() local c = vim.lsp.get_active_clients()[1]\n"
        "  return c ~= nil and c.initialized end, 50)\n"
        "local c = vim.lsp.get_active_clients()[1]\n"
        "local f = require('flint')\n"
        "vim.api.nvim_win_set_cursor(0, {1, 0}); vim.cmd('normal! o'); vim.api.nvim_set_current_line('    ')\n"
        "vim.api.nvim_win_set_cursor(0, {2, 4})\n"
        "local res = vim.lsp.buf_request_sync(0, 'textDocument/completion',"
        " vim.lsp.util.make_position_params(), 10000)\n"
        "local labels = {}\n"
        "for _, r in pairs(res or {}) do for _, it in ipairs((r.result or {}).items or r.result or {}) do"
        " labels[#labels+1] = it.label end end\n"
        "io.stdout:write(vim.json.encode({mode = f.mode, omnifunc = vim.bo.omnifunc,"
        " attached = c ~= nil, labels = labels}))\n"
        "vim.cmd('qa!')\n")
    out = subprocess.run([exe, "--headless", "-u", str(HERE / "nvim_init.lua"), "-i", "NONE",
                          str(tmp_path / "sample.py"), "-c", f"luafile {script}"],
                         capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    (artifacts / "nvim07.log").write_text(out.stdout + "\n" + out.stderr)
    data = json.loads(out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "{}")
    assert data.get("mode") == "completion", out
    assert data["attached"] and data["omnifunc"] == "v:lua.vim.lsp.omnifunc"
    assert data["labels"] and data["labels"][0].startswith("⚡ Flint: "), data
