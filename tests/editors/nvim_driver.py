"""Drives the Flint Neovim plugin in real Neovim 0.11 (headless, over its RPC socket) for the editor tests.

Keys go through Neovim's real input loop (`nvim --server SOCK --remote-send`), so insert mode,
mappings and autocommands behave as for a person; ``Nvim.probe`` reads the ghost-text extmark, the
buffer and the plugin's state back (nvim_init.lua: flint_probe).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from tests.fakes import wait_for

from .conftest import HERE, ROOT


def poll(read, done, timeout: float, every: float = 0.1):
    """``read()`` again every ``every`` seconds until ``done(value)`` holds; returns (value, True), or
    (the last value, False) once ``timeout`` passed."""
    seen: list = []
    ok = wait_for(lambda: done(seen.append(read()) or seen[-1]), timeout, every)
    return seen[-1], ok


class Nvim:
    def __init__(self, exe: str, workdir: Path, server: dict, artifacts: Path, mode: str = "",
                 opts: dict | None = None):
        self.exe = exe
        self.sock = str(workdir / "nvim.sock")
        self.artifacts = artifacts
        env = dict(os.environ)
        env.update(server["env"])
        env.update({
            "FLINT_TEST_PLUGIN": str(ROOT / "editor-extension" / "neovim"),
            "FLINT_TEST_CMD": json.dumps(self._cmd(server["cmd"], artifacts)),
            "FLINT_TEST_MODE": mode,
            "FLINT_TEST_OPTS": json.dumps(opts or {}),
            "XDG_STATE_HOME": str(workdir / "state"),  # LSP log and shada stay in the test dir
            "XDG_DATA_HOME": str(workdir / "data"),
            "XDG_CONFIG_HOME": str(workdir / "config"),
            "FLINT_CACHE_DIR": str(workdir / "flint-cache"),  # this test's answers only (conftest.real_server)
        })
        self.file = workdir / "sample.py"
        self.stderr = open(artifacts / "nvim-stderr.log", "w")
        self.proc = subprocess.Popen(
            [exe, "--headless", "--listen", self.sock, "-u", str(HERE / "nvim_init.lua"), "-i", "NONE",
             str(self.file)],
            cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr)
        _, opened = poll(lambda: os.path.exists(self.sock) or self.proc.poll() is not None, bool, 20, 0.05)
        assert self.proc.poll() is None, "nvim exited"
        assert opened and os.path.exists(self.sock), "nvim did not open its socket"

    @staticmethod
    def _cmd(cmd: list[str] | None, artifacts: Path) -> list[str] | None:
        """The real server logs (verbose) to the test's artifacts, so a failure says what the server did."""
        if not cmd or cmd[-1:] != ["serve"]:
            return cmd  # the stub, or none: the plugin finds the server itself
        log = artifacts / "flint-server.log"
        log.unlink(missing_ok=True)
        return [*cmd[:-1], "-v", "serve", "--log-file", str(log)]

    def send(self, keys: str) -> None:
        subprocess.run([self.exe, "--server", self.sock, "--remote-send", keys], check=True, timeout=20)

    def expr(self, expr: str) -> str:
        out = subprocess.run([self.exe, "--server", self.sock, "--remote-expr", expr],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    def probe(self) -> dict:
        out = subprocess.run([self.exe, "--server", self.sock, "--remote-expr", "v:lua.flint_probe()"],
                             capture_output=True, text=True, timeout=20)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def wait(self, pred, timeout: float, what: str) -> dict:
        p, ok = poll(self.probe, pred, timeout)
        if not ok:
            self.snapshot("timeout")
            raise AssertionError(f"timed out waiting for {what}: {json.dumps(p, indent=1)}")
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


def pick_labels(nv: Nvim) -> list[str]:
    """:FlintPick's rows for the variants at the cursor (flint/variants through the plugin's formatter)."""
    return json.loads(nv.expr(
        "json_encode(luaeval('(function() local c = vim.lsp.get_clients({name = \"flint\"})[1];"
        " local p = vim.lsp.util.make_position_params(0, c.offset_encoding);"
        " local r = c:request_sync(\"flint/variants\", {textDocument = p.textDocument, position = p.position},"
        " 60000, 0); return vim.tbl_map(require(\"flint\").variant_label, (r and r.result or {}).items or {})"
        " end)()'))"))


def selects(nv: Nvim) -> list[dict]:
    """Every vim.ui.select the plugin opened since flint_record_select(): {prompt, rows}."""
    return json.loads(nv.expr("v:lua.flint_selects()"))


def wait_select(nv: Nvim, count: int, timeout: float, what: str) -> dict:
    got, ok = poll(lambda: selects(nv), lambda got: len(got) >= count, timeout)
    assert ok, f"timed out waiting for {what}: {got}"
    return got[count - 1]


def run_flow(nv: Nvim, timeout: float, pick: bool = False) -> dict:
    """Type in a function body, see ghost text, cycle variants, accept; returns what it saw. With `pick`,
    also the Pick Variant rows where the first ghost text showed (issue 15 item 6)."""
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
    if pick:
        seen["pick"] = pick_labels(nv)
        # :FlintPick itself: the list it opens, with the server's note in its prompt
        nv.expr("v:lua.flint_record_select()")
        nv.send("<Cmd>FlintPick<CR>")
        seen["picker"] = wait_select(nv, 1, 15, "the :FlintPick list")
    assert p["current"]["text"].startswith(p["ghost"].rstrip("\n")[:1]), p

    # Cycling changes the ghost text. An automatic request brings the fastest single variant; the
    # first <M-]> asks again as "invoked", which brings all ranked variants from one batched pass.
    # An invoked request answers at its deadline with the variants that are whole by then; the generation
    # goes on, so a user who sees no second variant presses <M-]> again (answered from memory).
    deadline = time.time() + timeout
    while True:
        nv.send("<M-]>")
        try:
            p2 = nv.wait(lambda q: q["current"] and q["current"]["count"] >= 2 and q["ghost"]
                         and q["ghost"] != seen["ghost"], 15, "another variant after <M-]>")
            break
        except AssertionError:
            if time.time() > deadline:
                raise
    nv.snapshot("2-cycled")
    seen["cycled"] = p2["ghost"]
    seen["variants"] = p2["current"]["count"]
    nv.send("<M-[>")
    # the first variant again: the same text, or its whole line when the first ghost was what had streamed
    # of it so far (an automatic request shows a partial line after PARTIAL_AFTER_S)
    p3 = nv.wait(lambda q: q["ghost"] and q["ghost"].startswith(seen["ghost"]) and q["current"]["index"] == 1, 10,
                 "the first variant again after <M-[>")

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


def write_sample(path: Path, header: str = "def add(a, b):") -> None:
    path.write_text(header + "\n")


def stub_log(stub_server: dict) -> list[dict]:
    path = stub_server["log"]
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def flint_config(entry: dict) -> dict:
    s = entry["params"]["settings"]
    return s.get("flint", s) if isinstance(s, dict) else {}


def fake_variants(nv: Nvim, answers: list[dict]) -> None:
    """The client answers flint/variants from `answers` (nvim_init.lua: flint_fake_variants)."""
    quoted = json.dumps(answers).replace("'", "''")  # a Vim string in single quotes
    nv.expr(f"v:lua.flint_fake_variants('{quoted}')")


def checkhealth(nv: Nvim, timeout: float) -> str:
    """Run :checkhealth flint and return its buffer once the server check has answered (or failed)."""
    nv.send(":checkhealth flint<CR>")
    text, _ = poll(lambda: nv.expr("join(getline(1, '$'), \"\\n\")"),
                   lambda text: "answered initialize" in text or "ERROR" in text, timeout, 0.3)
    return text
