"""A minimal JSON-RPC client for `flint serve` over stdio, shared by the benchmarks (bench_replay,
bench_served) and the remote e2e test: every message is timed on arrival, server requests are accepted
plainly, flint/status and flint/refresh are recorded."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def proc_cpu_seconds(stat: str, clk_tck: int) -> float:
    """utime + stime of a /proc/<pid>/stat line, in seconds (fields 14 and 15; the command name in
    parentheses may itself hold spaces, so fields are counted after its closing parenthesis)."""
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / clk_tck


def utf16_position(text: str, offset: int) -> dict:
    """The LSP position (UTF-16 columns, the protocol's default) of a character offset."""
    line = text.count("\n", 0, offset)
    col_text = text[text.rfind("\n", 0, offset) + 1: offset]
    return {"line": line, "character": len(col_text.encode("utf-16-le")) // 2}


class Server:
    """`flint serve` as a child process spoken to over stdio."""

    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self._id = 0
        self.pending: dict[int, asyncio.Future] = {}
        self.statuses: list[tuple[float, dict]] = []
        self.refreshes: list[tuple[float, dict]] = []
        self._refresh: asyncio.Future | None = None
        self._reader: asyncio.Task | None = None
        self.ready = asyncio.Event()  # the first flint/status "ready" (or "error")
        self.stderr_path: Path | None = None

    async def start(self, cmd: list[str], env: dict[str, str], stderr_path: Path, cwd: str | None = None) -> None:
        self.stderr_path = stderr_path
        self._stderr = open(stderr_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = await asyncio.create_subprocess_exec(*cmd, stdin=asyncio.subprocess.PIPE,
                                                         stdout=asyncio.subprocess.PIPE, stderr=self._stderr,
                                                         env=env, cwd=cwd, limit=2**24)
        self._reader = asyncio.create_task(self._read())

    def _send(self, msg: dict) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        body = json.dumps(msg).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method: str, params: dict) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: dict) -> tuple[int, asyncio.Future]:
        """Send a request; its id and a future of (arrival perf_counter, response message)."""
        self._id += 1
        fut = asyncio.get_running_loop().create_future()
        self.pending[self._id] = fut
        self._send({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        return self._id, fut

    async def ask(self, method: str, params: dict, timeout: float = 120) -> tuple[float, dict]:
        """A request awaited: (milliseconds to its response, the response message)."""
        t0 = time.perf_counter()
        _, fut = self.request(method, params)
        t1, msg = await asyncio.wait_for(fut, timeout)
        return (t1 - t0) * 1000, msg

    def cancel(self, msg_id: int) -> None:
        self.notify("$/cancelRequest", {"id": msg_id})

    def refresh_signal(self) -> asyncio.Future:
        """A future that completes at the next flint/refresh."""
        if self._refresh is None or self._refresh.done():
            self._refresh = asyncio.get_running_loop().create_future()
        return self._refresh

    def cpu_s(self) -> float:
        """CPU seconds (user + system, all threads) the server process has used so far."""
        assert self.proc is not None
        try:
            return proc_cpu_seconds(Path(f"/proc/{self.proc.pid}/stat").read_text(), CLK_TCK)
        except OSError:
            return math.nan

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        out = self.proc.stdout
        while True:
            headers = await out.readuntil(b"\r\n\r\n")
            m = re.search(rb"Content-Length: (\d+)", headers)
            assert m is not None, headers
            msg = json.loads(await out.readexactly(int(m.group(1))))
            now = time.perf_counter()
            if "id" in msg and "method" in msg:  # a request from the server: accept it plainly
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
            elif "id" in msg:
                fut = self.pending.pop(msg["id"], None)
                if fut is not None and not fut.done():
                    fut.set_result((now, msg))
            elif msg.get("method") == "flint/status":
                self.statuses.append((now, msg["params"]))
                if msg["params"].get("state") in ("ready", "error"):
                    self.ready.set()
            elif msg.get("method") == "flint/refresh":
                self.refreshes.append((now, msg.get("params") or {}))
                if self._refresh is not None and not self._refresh.done():
                    self._refresh.set_result(None)

    async def stop(self) -> None:
        if self.proc is None:
            return
        try:
            await self.ask("shutdown", {}, timeout=30)
            self.notify("exit", {})
            await asyncio.wait_for(self.proc.wait(), 30)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            self.proc.kill()
            await self.proc.wait()
        if self._reader is not None:
            self._reader.cancel()
        self._stderr.close()
