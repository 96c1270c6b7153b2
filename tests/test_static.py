"""Static checks as part of the test command: ruff (lint) over the code, mypy (types) over the packages."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or "ruff"
    r = _run(ruff, "check", "engine", "lsp_server", "scripts", "tests")
    assert r.returncode == 0, r.stdout[-4000:]


def test_mypy_finds_nothing_in_the_packages():
    r = _run(sys.executable, "-m", "mypy", "engine", "lsp_server")
    assert r.returncode == 0, r.stdout[-4000:]
