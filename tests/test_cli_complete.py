"""`flint complete` on the real default model: the suggestion an editor would show, and the raw text."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.model


def _complete(path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lsp_server.cli", "complete", f"{path}:3:5", *extra],
                          capture_output=True, text=True, timeout=300)


def test_complete_prints_the_post_processed_suggestion_and_keeps_the_raw_text(tmp_path):
    src = tmp_path / "fib.py"
    src.write_text('def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n    \n', encoding="utf-8")
    other = tmp_path / "memo.py"  # open in another tab: repository context in front of the prompt
    other.write_text("def memoize(func):\n    cache = {}\n    return lambda *a: cache.setdefault(a, func(*a))\n")
    r = _complete(src, "-n", "2", "--json", "--open", str(other))
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["context"]["files"] == ["memo.py"] and out["context"]["chunks"] == ["memo.py:1 (open)"], out["context"]
    assert out["mode"] == "multi"  # an empty line inside a function: a block
    first = out["completions"][0]
    assert first["suggestion"], first
    # the suggestion is the model's text as far as it is code for this spot: a prefix of its lines
    assert first["text"].replace("\r\n", "\n").startswith(first["suggestion"].split("\n")[0])
    assert "```" not in first["suggestion"]
    human = _complete(src, "--open", str(other))  # the same prompt
    assert human.returncode == 0 and first["suggestion"].split("\n")[0] in human.stdout
    raw = _complete(src, "--raw", "--open", str(other))
    assert raw.returncode == 0 and first["text"].split("\n")[0] in raw.stdout
