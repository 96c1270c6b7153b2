"""The fast tier's floor (scripts/test_fast.sh), no model: every module imports, the CLI parses, and a real
`flint serve` over stdio answers initialize, an inline completion (the model's error) and shutdown."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from lsp_stdio import Server  # noqa: E402

MODEL_UNAVAILABLE = -32803


def _modules() -> list[str]:
    # listed from the file system, not by importing: a module that fails to import is still listed
    names = []
    for pkg in ("engine", "lsp_server"):
        for f in (ROOT / pkg).rglob("*.py"):
            parts = f.relative_to(ROOT).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(names)


def test_the_module_list_is_the_packages():
    mods = _modules()
    assert {"engine.engine", "engine.model.runtime", "engine.decoding.greedy", "lsp_server.protocol.handlers",
            "lsp_server.completion.requests.service", "lsp_server.cli"} <= set(mods), mods


def test_every_module_imports():
    # in a fresh interpreter: an import's side effects (the export stack's) stay out of pytest's process
    code = """if True:
        import importlib, json, sys, traceback
        from pathlib import Path
        bad = {}
        for name in sys.argv[2:]:
            try:
                mod = importlib.import_module(name)
                if not Path(mod.__file__).resolve().is_relative_to(sys.argv[1]):  # an installed copy elsewhere
                    bad[name] = f"imported from {mod.__file__}"
            except BaseException:
                bad[name] = traceback.format_exc(limit=-3)
        print(json.dumps(bad))
    """
    mods = _modules()
    r = subprocess.run([sys.executable, "-c", code, str(ROOT), *mods], capture_output=True, text=True, timeout=300,
                       cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-3000:]
    bad = json.loads(r.stdout.strip().splitlines()[-1])
    assert bad == {}, "\n".join(f"{k}: {v}" for k, v in bad.items())


def _flint() -> str:
    exe = Path(sys.executable).parent / "flint"
    if not exe.exists():  # the console script is part of what setup installs
        pytest.fail(f"{exe} is missing: run scripts/setup.sh (pip install -e .)")
    return str(exe)


@pytest.mark.parametrize("argv", [["--help"], ["serve", "--help"], ["model", "--help"], ["model", "build", "--help"],
                                  ["complete", "--help"], ["stats", "--help"]])
def test_the_cli_parses(argv, tmp_path):
    r = subprocess.run([_flint(), *argv], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "FLINT_HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("usage: flint") and "Traceback" not in r.stderr, (r.stdout[:500], r.stderr[-2000:])


async def test_stdio_serve_without_a_model_answers_the_protocol(tmp_path):
    lsp = Server()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FLINT_HOME": str(tmp_path / "home")}
    await lsp.start([sys.executable, "-m", "lsp_server.cli", "serve"], env, tmp_path / "server.log")
    try:
        _, init = await lsp.ask("initialize", {"processId": os.getpid(), "rootUri": None,
                                               "capabilities": {"textDocument": {"inlineCompletion": {}}}}, 60)
        caps = init["result"]["capabilities"]
        assert "inlineCompletionProvider" in caps and init["result"]["serverInfo"]["name"] == "flint"
        lsp.notify("initialized", {})
        await asyncio.wait_for(lsp.ready.wait(), 60)
        state = lsp.statuses[-1][1]
        assert state["state"] == "error" and "not built" in state["message"], state
        uri = "file:///w/a.py"
        lsp.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                             "text": "def f():\n    return \n"}})
        _, msg = await lsp.ask("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": {"line": 1, "character": 11}, "context": {"triggerKind": 1}}, 30)
        # the request went through the handler to the session: the answer is the model's state, not a crash
        assert msg.get("error", {}).get("code") == MODEL_UNAVAILABLE and "not built" in msg["error"]["message"], msg
        _, down = await lsp.ask("shutdown", {}, 30)
        assert "error" not in down, down
        lsp.notify("exit", {})
        assert await asyncio.wait_for(lsp.proc.wait(), 30) == 0
    finally:
        if lsp.proc is not None and lsp.proc.returncode is None:  # a failed step above: stop it
            await lsp.stop()
        else:  # what stop() does after the exit
            lsp._reader.cancel()
            lsp._stderr.close()
    log = (tmp_path / "server.log").read_text()
    assert "Traceback" not in log, log[-3000:]
