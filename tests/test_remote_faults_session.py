"""A hostile or broken remote behind a whole session (docs/reliability.md, "A hostile or broken remote"): the
hostile server of tests/test_remote_faults.py (127.0.0.1, a real socket server in a thread) with the local
model scripted (tests/fakes.py). The key through a real `flint serve` (log file, stderr, every message, the
status, the cache); a dripping remote's recovery; settings changes that never wait on the old remote; the
status after a dropped job; the memory a 50 MB answer costs (in a child process, so only its own RSS counts).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from lsp_server.session import Session
from lsp_server.settings import Settings
from tests.fakes import FakeEngine, text, until, wait_for
from tests.test_reliability_server import Server, inline, open_doc
from tests.test_remote_faults import KEY, LEAKS, Hostile, drip, event, models, stream

ROOT = Path(__file__).resolve().parents[1]
DOC = "def add(a, b):\n    total = \n    return total\n"
URI = "file:///r/add.py"


@pytest.fixture
def hostile():
    h = Hostile()
    yield h
    h.close()


@pytest.fixture
async def make(tmp_path, monkeypatch):
    monkeypatch.setenv("FLINT_HOME", str(tmp_path))
    made: list[Session] = []

    def build(**settings) -> Session:
        statuses: list[dict] = []
        s = Session(lambda _s: FakeEngine(text("local"), model_id="local-script"),
                    Settings(max_variants=1, **settings), on_status=statuses.append)
        s.attach_loop(asyncio.get_running_loop())
        s.start()
        assert s.worker.loaded.wait(5) and (s.remote_worker is None or s.remote_worker.loaded.wait(5))
        s.documents.open(URI, DOC, 1)
        s.statuses = statuses
        made.append(s)
        return s

    yield build
    for s in made:
        s.shutdown()


async def ask(s: Session, version: int):
    """An explicit request at a fresh spot (a new document version: no answer from memory)."""
    s.documents.open(URI, DOC.replace("total = ", f"total = {version} + "), version)
    return await s.suggest(URI, 1, len(f"    total = {version} + "), invoked=True)


# ------------------------------------------------------------------------------------ the key, end to end


def ask_until_seen(w, hostile: Hostile, i: int, tries: int = 5) -> None:
    """Ask again at a new document, every half second and at most ``tries`` times, until the server of case
    ``i`` has seen a completion request."""
    again: list[int] = []

    def ask_again() -> None:
        again.append(len(again) + 1)
        open_doc(w, f"file:///k/case{i}-{again[-1]}.py", "x = \n")
        w.answer(inline(w, f"file:///k/case{i}-{again[-1]}.py", 0, 4), timeout=30)

    wait_for(lambda: (f"c{i}", "completions") in hostile.seen or len(again) == tries, 40 * tries, every=0.5,
             poke=ask_again)


@pytest.mark.parametrize("source", ["settings", "env"])
def test_the_key_reaches_no_log_message_status_or_cache_of_a_real_server(hostile, source, tmp_path):
    """Every leak of tests/test_remote_faults.py, and a completion echoing the key, through `flint serve -v`:
    its log file, its stderr, every message it sent (window/logMessage, window/showMessage, flint/status,
    answers) and its disk cache."""
    cases = [*LEAKS, "echo"]
    for i, case in enumerate(LEAKS):
        hostile.routes[(f"c{i}", "completions")] = LEAKS[case]
    hostile.routes[(f"c{len(LEAKS)}", "completions")] = stream("secret = '", KEY[:9], KEY[9:], "'")
    hostile.routes[(f"c{len(LEAKS)}", "models")] = models(KEY)  # the model's name is the key, too
    log_file = tmp_path / "flint.log"
    env = {"FLINT_REMOTE_API_KEY": KEY} if source == "env" else {}
    srv = Server("--model", "no-such-model", "-v", "--log-stderr", "--log-file", str(log_file), env=env)
    try:
        srv.initialize()
        w = srv.wire
        for i, _case in enumerate(cases):
            flint = {"routing": "hybrid", "remoteUrl": hostile.url(f"c{i}"), "remoteTimeoutMs": 2000}
            if source == "settings":
                flint["remoteApiKey"] = KEY
            w.notify("workspace/didChangeConfiguration", {"settings": {"flint": flint}})
            w.wait_note("flint/status", lambda p, i=i: f"c{i}" in json.dumps(p.get("remote")), timeout=20)
            uri = f"file:///k/case{i}.py"
            open_doc(w, uri, "x = \n")
            w.answer(inline(w, uri, 0, 4), timeout=30)
            # the tier may still be asking the server for its model's name when the first request comes (then
            # the request is answered without it): ask again until this server has seen a completion request
            ask_until_seen(w, hostile, i)
        assert w.call("flint/noSuchThing", {}, timeout=10)  # a round trip: everything before it went out
        time.sleep(0.3)
        assert {c for c, k in hostile.seen if k == "completions"} == {f"c{i}" for i in range(len(cases))}
        assert all(a == f"Bearer {KEY}" for a in hostile.auth)  # the key was in play every time
        statuses = json.dumps(w.notes("flint/status"))
        assert "HTTP 429" in statuses and "***" in statuses  # the server's words arrived, redacted
        everything = srv.log_text() + log_file.read_text()
        for piece in (KEY, KEY[:9], KEY[9:]):
            assert piece not in everything
        cache = b"".join(p.read_bytes() for p in Path(srv.cache).rglob("*") if p.is_file())
        assert KEY.encode() not in cache and KEY[:9].encode() not in cache
    finally:
        srv.close()


# ------------------------------------------------------------------------------------------- time


async def test_a_dripping_remote_gives_the_tier_back_within_the_backoff_once_it_recovers(make, hostile):
    """The completion endpoint drips a byte every 0.3 s: every request is answered locally within its
    timeout, no job outlives its deadline, and once the server is healthy the capable tier answers again
    within the retry pause (plus one request)."""
    hostile.routes[("", "completions")] = drip(stream("remote"), every_s=0.3)
    s = make(routing="hybrid", remote_url=hostile.url(), remote_timeout_ms=800)
    t_end = time.monotonic() + 4.0
    v = 2
    while time.monotonic() < t_end:
        t0 = time.monotonic()
        res = await ask(s, v)
        v += 1
        assert res.backend == "local" and time.monotonic() - t0 < 2.5  # never past its timeout (+ slack)
        await asyncio.sleep(0.2)
    be = s.remote_worker.engine
    assert be.backoff.failures >= 2
    hostile.routes[("", "completions")] = stream("remote")
    healthy = time.monotonic()
    answers = []

    async def ask_again() -> None:
        answers.append(await ask(s, v + len(answers)))

    await ask_again()
    await until(lambda: answers[-1].backend == "remote", 30.0, every=0.25, poke=ask_again)
    assert answers[-1].backend == "remote", "the capable tier never came back"
    took = time.monotonic() - healthy
    assert took < be.backoff.cap_s
    print(f"capable tier back {took:.1f} s after the remote recovered")


async def test_a_settings_change_never_waits_on_a_dripping_remote(make, hostile):
    hostile.routes[("drip", "models")] = drip(models(), every_s=1.0)
    hostile.routes[("drip", "completions")] = drip(stream("slow"), every_s=1.0)
    hostile.routes[("ok", "completions")] = stream("healthy")
    s = make(routing="hybrid", remote_url=hostile.url("drip"), remote_timeout_ms=3000)
    await until(lambda: ("drip", "models") in hostile.seen)  # its load is checking GET /models, a byte a second
    res = await ask(s, 2)  # and a completion job of it on the same drip
    assert res.backend == "local"
    took = []
    for url in (hostile.url("ok"), hostile.url("drip"), hostile.url("ok")):
        t0 = time.perf_counter()
        s.apply_settings(Settings(max_variants=1, routing="hybrid", remote_url=url, remote_timeout_ms=3000))
        took.append(time.perf_counter() - t0)
        await asyncio.sleep(0.3)
    assert max(took) < 0.5, took  # on the event loop: no join of a worker stuck on the old server
    print(f"settings applied in {max(took) * 1000:.0f} ms at most")
    t0 = time.monotonic()
    assert s.remote_worker.loaded.wait(3)
    res = await ask(s, 3)
    assert (res.backend, res.items[0].text) == ("remote", "healthy") and time.monotonic() - t0 < 3.0


async def test_a_dropped_remote_job_is_no_remote_failure_in_the_status(make, hostile):
    """The user types something else while the remote writes: its job is stopped and dropped (the document
    changed). That is no failure of the remote: the status must not say so."""
    from tests.test_session_typing import type_chars

    hostile.routes[("", "completions")] = stream("a", " +", " b", delay=0.3)
    s = make(routing="hybrid", remote_url=hostile.url(), remote_timeout_ms=5000)
    task = asyncio.ensure_future(s.suggest(URI, 1, len("    total = "), invoked=True))
    def streamed() -> bool:
        job = s.remote_worker.running()
        return job is not None and job.handle is not None and any(job.handle.raw)

    await until(streamed)  # "a" streamed
    assert streamed()
    type_chars(s, URI, "x", 1, len("    total = "), 1)  # disagrees with the remote's text: stopped
    await asyncio.gather(task, return_exceptions=True)  # (refused or answered: the document changed)
    await until(lambda: not (s.remote_worker.backlog() or s.remote_worker.running()))
    s.service.events.drain()  # its status event reaches the board
    assert hostile.seen.count(("", "completions")) >= 1 and s.remote_worker.engine.backoff.failures == 0
    remote = [st["remote"] for st in s.statuses if st.get("remote")]
    assert remote and not [r for r in remote if "remote failed" in r["message"] or r["state"] == "error"], remote


# ------------------------------------------------------------------------------------------ memory

RSS_CHILD = r"""
import asyncio, json, sys, time
from lsp_server.session import Session
from lsp_server.settings import Settings
from tests.fakes import FakeEngine, text

def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024

async def main(urls):
    doc = "def f():\n    x = \n"
    s = Session(lambda _s: FakeEngine(text("local"), model_id="local"), Settings(max_variants=1))
    s.attach_loop(asyncio.get_running_loop())
    s.start()
    s.worker.loaded.wait(5)
    out = {}
    for i, url in enumerate(urls):
        s.apply_settings(Settings(max_variants=1, routing="hybrid", remote_url=url, remote_timeout_ms=20000))
        s.remote_worker.loaded.wait(5)
        if i == 0:
            s.documents.open("file:///w.py", doc, 1)
            await s.suggest("file:///w.py", 1, 8, invoked=True)  # everything imported and warm
            base = rss("VmRSS")
        s.documents.open("file:///w.py", doc.replace("x = ", f"x{i} = "), i + 2)
        t0 = time.monotonic()
        res = await s.suggest("file:///w.py", 1, 9 + len(str(i)), invoked=True)
        out[url] = [res.backend, round(time.monotonic() - t0, 2)]
    await asyncio.sleep(0.5)
    out["peak_growth"] = rss("VmHWM") - base
    out["growth"] = rss("VmRSS") - base
    s.shutdown()
    print(json.dumps(out))

asyncio.run(main(sys.argv[1:]))
"""


def test_a_50_mb_answer_costs_the_server_little_memory(hostile):
    """50 MB of small events (one line of text, max_tokens ignored), 50 MB on one line, 50 MB of empty
    events: each is cut at a cap; the process (a whole session) grows by far less than 50 MB."""
    from tests.test_remote_faults import endless

    size = 50 * 2**20
    hostile.routes[("events", "completions")] = endless(event("x"), size)
    hostile.routes[("line", "completions")] = endless(b"x", size, newline=False)
    hostile.routes[("empty", "completions")] = endless(event(""), size)
    urls = [hostile.url(c) for c in ("warm", "events", "line", "empty")]
    with tempfile.TemporaryDirectory() as home:
        r = subprocess.run([sys.executable, "-c", RSS_CHILD, *urls], capture_output=True, text=True, timeout=120,
                           cwd=ROOT, env={**os.environ, "FLINT_HOME": home, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert all(out[u][0] == "local" for u in urls[1:]), out  # each cut, answered locally
    assert out["peak_growth"] < 50 * 2**20, out
    print(f"RSS growth: peak {out['peak_growth'] / 2**20:.1f} MB, after {out['growth'] / 2**20:.1f} MB")
