"""Under memory pressure a model that cannot be loaded is a clear status, not a crash loop: `flint serve` with
an address-space limit too small for the model answers the protocol, reports the load error once in
flint/status, refuses completions with that reason, and stays up."""

from __future__ import annotations

import resource
import subprocess
import sys
import threading
import time

import pytest

from tests.test_reliability_server import CAPS, ROOT, Wire, inline, open_doc

pytestmark = [pytest.mark.model, pytest.mark.e2e]

# enough for Python, pygls and onnxruntime to start; far too little for the decoder's weights and KV buffers
LIMIT = 900 * 1024 * 1024


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def test_a_model_that_does_not_fit_is_one_clear_error_and_the_server_stays_up(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "lsp_server", "--threads", "2"], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_limit,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT),
                                 "FLINT_HOME": _flint_home(), "FLINT_CACHE_DIR": str(tmp_path / "cache")})
    err: list[bytes] = []
    threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True).start()  # type: ignore[arg-type]
    try:
        assert proc.stdin is not None and proc.stdout is not None
        stdin = proc.stdin

        def write(b: bytes) -> None:
            stdin.write(b)
            stdin.flush()

        wire = Wire(write, proc.stdout.read1)
        wire.call("initialize", {"processId": None, "capabilities": CAPS})
        wire.notify("initialized", {})
        bad = wire.wait_note("flint/status", lambda p: p.get("state") == "error", timeout=120)
        assert bad.get("message"), bad
        uri = "file:///tmp/pressure.py"
        open_doc(wire, uri, "def f(x):\n    return ")
        ans = wire.answer(inline(wire, uri, 1, 11), timeout=30)
        assert "error" in ans and ans["error"]["message"], ans  # refused with the reason, not left waiting
        time.sleep(2)
        assert proc.poll() is None, "the server exited"
        # one load attempt, not a loop: a single error status in all this time
        assert sum(1 for p in wire.notes("flint/status") if p.get("state") == "error") == 1
        assert wire.call("shutdown", None, timeout=30).get("error") is None
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def _flint_home() -> str:
    from engine import paths

    return str(paths.flint_home())
