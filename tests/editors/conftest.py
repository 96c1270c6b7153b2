"""Fixtures for the end-to-end tests in real editors (VS Code via code-server, Neovim 0.11).

The editors install themselves through scripts/setup_editors.sh (idempotent, cached under
$FLINT_EDITORS_CACHE, default ~/.cache/flint-editors). Two kinds of server:
- `stub`: tests/editors/stub_server.py, protocol only, no model: checks the clients' protocol paths fast.
- `real`: `flint serve` with the real built model. A missing model or a broken CLI fails the test.
Screenshots and logs go to tests/editors/artifacts/ (gitignored).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
ARTIFACTS = HERE / "artifacts"


def _setup(part: str) -> dict[str, str]:
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "setup_editors.sh"), part],
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        pytest.fail(f"scripts/setup_editors.sh {part} failed:\n{proc.stderr[-4000:]}")
    env: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("export ") and "=" in line:
            k, v = line[len("export "):].split("=", 1)
            env[k] = shlex.split(v)[0] if v else ""
    return env


@pytest.fixture(scope="session")
def neovim_env() -> dict[str, str]:
    env = _setup("neovim")
    assert "FLINT_NVIM" in env, env
    return env


@pytest.fixture(scope="session")
def vscode_env() -> dict[str, str]:
    env = _setup("vscode")
    for k in ("FLINT_NODE24", "FLINT_CODE_SERVER", "FLINT_NODE_PATH", "FLINT_CHROMIUM"):
        assert k in env, (k, env)
    return env


@pytest.fixture(scope="session")
def vsix() -> Path:
    out = ARTIFACTS / "flint-e2e.vsix"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "package_vsix.sh"), str(out)],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"scripts/package_vsix.sh failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return out


def _check_serve(python: str) -> None:
    proc = subprocess.run([python, "-m", "lsp_server.cli", "serve", "--help"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    if proc.returncode != 0:  # a broken CLI is a failure, never a skip
        pytest.fail(f"`flint serve --help` exited {proc.returncode}:\n{proc.stderr[-3000:]}")


@pytest.fixture(scope="session")
def real_server(tmp_path_factory) -> dict:
    """The real `flint serve` with the real model: {cmd, python, env}."""
    python = sys.executable
    _check_serve(python)
    from engine.config import ModelNotBuilt, resolve_model_dir

    try:
        model = resolve_model_dir(os.environ.get("FLINT_MODEL"))
    except ModelNotBuilt as e:  # the real path is required: fail loudly, never skip
        pytest.fail(f"the default model must be built for the editor end-to-end tests: {e}")
    # never the user's cache: an answer an earlier run (or test) left there is not this test's result (a
    # one-item Pick Variant answer on disk failed every later run on its machine); each editor test sets its own
    env = {"PYTHONPATH": str(ROOT), "FLINT_CACHE_DIR": str(tmp_path_factory.mktemp("flint-cache"))}
    if os.environ.get("FLINT_HOME"):
        env["FLINT_HOME"] = os.environ["FLINT_HOME"]
    return {"cmd": [python, "-m", "lsp_server.cli", "serve"], "python": python, "env": env, "model": str(model)}


@pytest.fixture
def stub_server(tmp_path) -> dict:
    """tests/editors/stub_server.py behind a `python`-like wrapper (the VS Code extension runs
    `<python> -m lsp_server.cli serve`): {cmd, python, env, log}."""
    log = tmp_path / "stub-notifications.jsonl"
    wrapper = tmp_path / "stub-python"
    wrapper.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(HERE / 'stub_server.py'))}\n")
    wrapper.chmod(0o755)
    return {"cmd": [str(wrapper)], "python": str(wrapper), "env": {"FLINT_STUB_LOG": str(log)}, "log": log}


@pytest.fixture
def artifacts(request) -> Path:
    d = ARTIFACTS / request.node.name.replace("/", "_").replace("[", "-").replace("]", "")
    d.mkdir(parents=True, exist_ok=True)
    return d
