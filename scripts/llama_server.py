"""llama.cpp's own server as a yardstick (issue 47): `llama-server` built for this machine by
scripts/llama_server.sh, started on a loopback port, asked for greedy completions of token ids.

Its speculative decoding without a draft model (``--spec-type ngram-simple``: prompt lookup in C++, or
``ngram-mod``) is the yardstick for Flint's drafted decoding; the same server without ``--spec-type`` is its
plain decoding. Tokens per second are the server's own (``timings.predicted_per_second``: tokens generated
after the prompt pass, over the time they took).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build() -> str:
    """The path of llama-server built for this CPU (built on first use)."""
    r = subprocess.run(["bash", str(ROOT / "scripts" / "llama_server.sh")], capture_output=True, text=True,
                       env=dict(os.environ, PYTHON=sys.executable))
    if r.returncode != 0:
        raise RuntimeError(f"scripts/llama_server.sh failed:\n{r.stderr[-3000:]}")
    return r.stdout.strip().splitlines()[-1]


def spec_args(spec: str) -> list[str]:
    """Command-line arguments for one speculative setting: "" (plain), "ngram-simple:N:M" (look up the last N
    tokens, draft up to M), "ngram-mod" (its defaults)."""
    if not spec:
        return []
    kind, *nums = spec.split(":")
    if kind == "ngram-simple":
        n, m = [*nums, *("3", "10")[len(nums):]][:2]
        return ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", n, "--spec-ngram-simple-size-m", m]
    if kind == "ngram-mod" and not nums:
        return ["--spec-type", "ngram-mod"]
    raise ValueError(f"unknown speculative setting {spec!r}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# settings whose n-gram pool outlives a request (ngram-mod hashes every token the slot has seen into one pool,
# reset only when it fills or stops paying): a benchmark that sends the same prompts again would feed it the
# answers, so such a server is started afresh before each request
STATEFUL = ("ngram-mod", "ngram-map-k", "ngram-map-k4v", "ngram-cache")


def fresh_per_request(spec: str) -> bool:
    return spec.split(":")[0] in STATEFUL


class LlamaServer:
    """One llama-server process: ``threads`` threads, one slot, a 2,048-token context (as the Python
    yardstick), no web UI; ``spec`` as spec_args takes it. A setting that keeps n-grams across requests
    (fresh_per_request) is restarted before each request, so every request starts from what it is sent."""

    def __init__(self, binary: str, gguf: str, threads: int, spec: str = "", start_timeout: float = 120) -> None:
        self.binary, self.gguf, self.threads, self.start_timeout = binary, gguf, threads, start_timeout
        self.spec, self.used = spec, False
        self._start()

    def _start(self) -> None:
        spec, start_timeout = self.spec, self.start_timeout
        binary, gguf, threads = self.binary, self.gguf, self.threads
        self.port = _free_port()
        t0 = time.time()
        self.p = subprocess.Popen(
            [binary, "-m", gguf, "--host", "127.0.0.1", "--port", str(self.port), "-t", str(threads), "-tb",
             str(threads), "-c", "2048", "-np", "1", "--no-webui", *spec_args(spec)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        while True:
            if self.p.poll() is not None:
                raise RuntimeError(f"llama-server ({spec or 'plain'}) exited {self.p.returncode}: "
                                   f"{self.p.stderr.read()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.time() - t0 > start_timeout:
                self.close()
                raise RuntimeError(f"llama-server ({spec or 'plain'}) not ready in {start_timeout:.0f} s")
            time.sleep(0.2)
        self.ready_s = time.time() - t0

    def decode(self, ids: list[int], max_tokens: int) -> dict:
        """Greedy completion of the token ids: tokens/s after the prompt pass, the text, the drafts."""
        if self.used and fresh_per_request(self.spec):
            self.close()
            self._start()
        self.used = True
        body = json.dumps({"prompt": ids, "n_predict": max_tokens, "temperature": 0.0, "top_k": 1,
                           "repeat_penalty": 1.0, "cache_prompt": False, "stream": False}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/completion", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=300) as r:
            out = json.loads(r.read())
        t = out.get("timings", {})
        return {"tokens": t.get("predicted_n", 0), "tok_s": float(t.get("predicted_per_second") or 0.0),
                "text": out.get("content", ""), "draft_n": t.get("draft_n", 0),
                "draft_accepted": t.get("draft_n_accepted", 0)}

    def close(self) -> None:
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(10)
