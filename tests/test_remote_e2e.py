"""Hybrid routing against a real OpenAI-compatible server: llama-cpp-python's server (the `remote-test`
extra) serving the packaged Qwen2.5-Coder-0.5B GGUF on 127.0.0.1, beside the real local model.

- hybrid: automatic keystroke requests are answered locally (the remote gets no completion request),
  invoked ones and variant picks by the remote, reported as such on items and in the status;
- killing the server while it streams: the request is answered by the local model, the status says
  what happened, nothing raises; later requests go local at once while the remote backs off.

Malformed streams, 5xx and stalls are tested on a fault
injecting server (tests/test_remote_client.py, tests/test_remote_session.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from engine import paths
from engine.model.presets import DEFAULT_MODEL, PRESETS
from lsp_server.session import Session
from lsp_server.settings import Settings
from tests.fakes import until, wait_for

pytestmark = [pytest.mark.model, pytest.mark.e2e]

CODE = ("import os\n\n\ndef list_python_files(path):\n    \"\"\"Names of the .py files in path.\"\"\"\n"
        "    names = []\n    for name in os.listdir(path):\n        \n    return names\n")
BLOCK = (7, 8)  # the empty line in the loop: a block (multi-line) position
LINE = "    names = []\n    for name in os.listdir(path):\n        if name."
URI = "file:///w/files.py"


GGUF = paths.gguf_dir() / PRESETS[DEFAULT_MODEL].gguf_name  # FLINT_HOME as the suite starts
FP32 = paths.models_dir() / f"{DEFAULT_MODEL}-fp32"  # scripts/test.sh builds it (the reference model)


def gguf_path() -> Path:
    p = GGUF
    if not p.exists():  # the default model's build fetches it: required, never skipped
        pytest.fail(f"{p} is missing: run `flint model build` (it fetches the GGUF)")
    return p


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LIVE: dict[str, LlamaServer] = {}  # url -> the server there: a session's answers are checked against its life


class LlamaServer:
    """`python -m llama_cpp.server` on 127.0.0.1 (one thread: the local model has the other core).

    A server that dies or never comes up fails the test as itself (exit code or signal, its stderr's tail):
    otherwise a llama.cpp built for another CPU (SIGILL at its first request) reads as a routing failure."""

    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.killed = False
        self.log = log_dir / f"llama-server-{self.port}.log"
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path()), "--host", "127.0.0.1",
               "--port", str(self.port), "--n_ctx", "2048", "--n_threads", "1", "--verbose", "False"]
        with open(self.log, "wb") as err:  # a file, not a pipe: nothing blocks on a full pipe, the tail stays
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)

        def healthy() -> bool:
            self.check("while starting")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False

        if not wait_for(healthy, 180, every=0.3):
            self.stop()
            pytest.fail(f"the llama.cpp server did not become healthy in 180 s; its stderr ends:\n"
                        f"{self.tail()}", pytrace=False)
        self.first_completion()
        LIVE[self.url] = self

    def first_completion(self) -> None:
        """One token through the model: where a library built for another CPU dies."""
        body = json.dumps({"prompt": "def add(a, b):", "max_tokens": 2, "temperature": 0}).encode()
        req = urllib.request.Request(f"{self.url}/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                out = json.loads(r.read())
        except OSError as e:
            wait_for(lambda: self.proc.poll() is not None, 0.5)  # the process may be on its way down: name its
            # end rather than the socket's
            self.check("at its first completion")
            pytest.fail(f"the llama.cpp server's first completion failed: {e}; its stderr ends:\n{self.tail()}",
                        pytrace=False)
        assert out["choices"], out

    def tail(self, n: int = 3000) -> str:
        return self.log.read_bytes()[-n:].decode(errors="replace")

    def check(self, when: str = "during the test") -> None:
        """Fail (as the server's death, not the routing's) when the server exited without being killed."""
        rc = self.proc.poll()
        if rc is None or self.killed:
            return
        try:
            how = f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exit code {rc}"
        except ValueError:
            how = f"killed by signal {-rc}"
        pytest.fail(f"the llama.cpp server died {when} ({how}); its stderr ends:\n{self.tail()}", pytrace=False)

    def kill(self) -> None:
        self.killed = True  # on purpose: not a failure
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        LIVE.pop(self.url, None)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = LlamaServer(tmp_path_factory.mktemp("llama"))
    yield s
    try:
        s.check("by the end of the module")
    finally:
        s.stop()


@pytest.fixture
async def make_session(engine, tmp_path, monkeypatch):
    monkeypatch.setenv("FLINT_HOME", str(tmp_path))
    made: list[Session] = []
    statuses: list[dict] = []

    def make(**settings) -> Session:
        settings = {"max_lines": 4, "max_variants": 2, "remote_timeout_ms": 60_000, **settings}
        s = Session(lambda _s: engine, Settings(**settings), on_status=statuses.append)
        s.attach_loop(asyncio.get_running_loop())
        s.start()
        assert s.worker.loaded.wait(120)
        if s.remote_worker is not None:
            assert s.remote_worker.loaded.wait(180)
        s.documents.open(URI, CODE, 1)
        s.statuses = statuses
        srv = LIVE.get(settings.get("remote_url", ""))
        if srv is not None:  # every answer is checked against the server's life before the test reads it
            ask = s.suggest

            async def suggest(*a, **kw):
                res = await ask(*a, **kw)
                srv.check()
                return res

            s.suggest = suggest  # type: ignore[method-assign]
        made.append(s)
        return s

    yield make
    for s in made:
        s.shutdown()


async def idle(s: Session, timeout: float = 120.0) -> None:
    """Both workers finished what they were doing (the capable tier's generation included)."""
    def done() -> bool:
        return s.worker.backlog() == 0 and (s.remote_worker is None or s.remote_worker.backlog() == 0)

    await until(done, timeout)
    assert done(), "the workers did not go idle"


def completion_requests(s: Session) -> int:
    return s.remote_worker.engine.completion_requests


async def test_hybrid_keystrokes_stay_local_invoked_goes_remote(server, make_session):
    s = make_session(routing="hybrid", remote_url=server.url, remote_for=("invoked", "variants"))
    # an automatic request as the user types (one line): local, and the remote is not asked at all
    line = CODE.split("\n").index("        ")
    text = CODE.replace("        \n    return", "        if name.\n    return")
    s.documents.open(URI + "2", text, 1)
    auto = await s.suggest(URI + "2", line, len("        if name."), invoked=False)
    assert auto.items and auto.backend == "local" and all(it.backend == "local" for it in auto.items)
    assert completion_requests(s) == 0
    # the same spot asked for explicitly: the remote answers, and says so
    inv = await s.suggest(URI + "2", line, len("        if name."), invoked=True)
    assert inv.items, "the remote gave nothing"
    assert inv.backend == "remote" and inv.items[0].backend == "remote" and inv.items[0].source == "model"
    assert completion_requests(s) >= 1
    assert s.status["backend"] == "remote" and s.status["message"].endswith("· remote")
    # a variants pick (flint/variants) on a block: remote too
    picks = await s.suggest(URI, *BLOCK, invoked=True, variants=True)
    assert picks.items and {it.backend for it in picks.items} == {"remote"}
    assert s.stats.counts["remote_answers"] == 2


def test_a_server_that_dies_fails_as_itself(tmp_path):
    """The diagnosis the fixtures rely on: a server ended by SIGILL (what a build for another CPU gets) is
    reported as such, with its stderr."""
    srv = LlamaServer(tmp_path)
    try:
        srv.check()  # alive: nothing to report
        os.kill(srv.proc.pid, signal.SIGILL)
        srv.proc.wait(10)
        with pytest.raises(pytest.fail.Exception, match="llama.cpp server died during the test .killed by SIGILL"):
            srv.check()
    finally:
        srv.stop()


async def test_killing_the_server_mid_stream_falls_back_to_local(make_session, tmp_path):
    srv = LlamaServer(tmp_path)
    try:
        s = make_session(routing="hybrid", remote_url=srv.url, max_lines=8, remote_timeout_ms=60_000)
        task = asyncio.ensure_future(s.suggest(URI, *BLOCK, invoked=True))
        def streaming() -> bool:
            job = s.remote_worker.running()
            entry = job.handle if job is not None else None
            return entry is not None and any(entry.raw)

        await until(streaming, 60)  # wait until the remote is streaming its answer
        assert streaming(), "the remote never streamed"
        srv.kill()
        res = await asyncio.wait_for(task, 120)
        assert res.items and res.backend == "local"  # the local model answered instead
        assert any("local fallback: remote failed" in st["message"] for st in s.statuses), \
            [st["message"] for st in s.statuses]
        assert s.status["remote"]["state"] == "error" and "retry in" in s.status["remote"]["message"]
        assert s.remote_worker.engine.backoff.failures == 1
        # the server stays down: the next routed request is local again (backing off, or refused at once)
        res2 = await asyncio.wait_for(s.suggest(URI, *BLOCK, invoked=True), 120)
        assert res2.items and res2.backend == "local"
    finally:
        srv.stop()


async def test_a_second_local_model_as_the_capable_tier(make_session):
    """No server: the capable tier is a second local model (here the fp32 build scripts/test.sh makes;
    in use the 1.5B preset, `capableModel: qwen2.5-coder-1.5b`)."""
    from engine.config import resolve_model_dir

    fp32 = str(resolve_model_dir(FP32))  # raises (fails the test) when it is not built
    s = make_session(routing="hybrid", capable_model=fp32, remote_for=("invoked",))
    assert s.remote_worker is not None and s.remote_worker.loaded.wait(120)
    assert s.remote_worker.engine.model_id != s.worker.engine.model_id
    text = CODE.replace("        \n    return", "        if name.\n    return")
    s.documents.open(URI + "3", text, 1)
    line = CODE.split("\n").index("        ")
    auto = await s.suggest(URI + "3", line, len("        if name."), invoked=False)
    assert auto.items and auto.backend == "local"
    inv = await s.suggest(URI + "3", line, len("        if name."), invoked=True)
    assert inv.items and inv.backend == "capable" and s.status["message"].endswith("· capable")


async def test_the_backend_is_on_the_wire(server, tmp_path):
    """Through the real `flint serve` (stdio): flint/variants items, the inline items' accept command and
    flint/status name the backend that wrote the answer."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from lsp_stdio import Server

    lsp = Server()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "FLINT_CACHE_DIR": str(tmp_path / "cache")}
    await lsp.start([sys.executable, "-m", "lsp_server", "--threads", "2"], env, tmp_path / "server.log")
    try:
        _, init = lsp.request("initialize", {
            "processId": os.getpid(), "rootUri": None, "capabilities": {"textDocument": {"inlineCompletion": {}}},
            "initializationOptions": {"routing": "hybrid", "remoteUrl": server.url, "maxVariants": 1,
                                      "remoteFor": ["invoked", "variants"], "remoteTimeoutMs": 60_000,
                                      "remoteApiKey": "sk-wire-SECRET"}})
        await asyncio.wait_for(init, 120)
        lsp.notify("initialized", {})
        await asyncio.wait_for(lsp.ready.wait(), 240)
        text = CODE.replace("        \n    return", "        if name.\n    return")
        line = CODE.split("\n").index("        ")
        lsp.notify("textDocument/didOpen", {"textDocument": {"uri": URI, "languageId": "python", "version": 1,
                                                             "text": text}})
        pos = {"textDocument": {"uri": URI}, "position": {"line": line, "character": len("        if name.")}}
        # an automatic request: the local model
        _, fut = lsp.request("textDocument/inlineCompletion", {**pos, "context": {"triggerKind": 2}})
        _, msg = await asyncio.wait_for(fut, 120)
        server.check()
        inline = msg["result"]["items"]
        assert inline and inline[0]["command"]["arguments"][0]["backend"] == "local"
        assert any(p.get("backend") == "local" and "· " not in p["message"] for _, p in lsp.statuses)
        # a variants pick at the same spot: the remote (the local answer there does not count for it)
        _, fut = lsp.request("flint/variants", pos)
        _, msg = await asyncio.wait_for(fut, 120)
        server.check()
        items = msg["result"]["items"]
        assert items and {it["backend"] for it in items} == {"remote"}
        assert [p for _, p in lsp.statuses if p.get("backend") == "remote" and "· remote" in p["message"]]
    finally:
        await lsp.stop()
    log = (tmp_path / "server.log").read_text()
    assert "sk-wire-SECRET" not in log and "Traceback" not in log
