"""Routing inside the session, with a scripted local engine and the fault-injecting remote of
tests/test_remote_client.py (127.0.0.1): fallbacks on 5xx / malformed / stalled remotes, the disk cache keeping
local and remote entries apart, and settings that must not leak the API key. The same paths against the real llama.cpp server: test_remote_e2e.py."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from lsp_server.session import Session
from lsp_server.settings import Settings, parse_settings, to_camel
from tests.fakes import FakeEngine, text, until
from tests.test_remote_client import FakeRemote

DOC = "def add(a, b):\n    total = \n    return total\n"
POS = (1, len("    total = "))  # a one-line spot
URI = "file:///r/add.py"


def local(raw: str, delay: float = 0.0) -> FakeEngine:
    """The local model: the same text for every call, after ``delay`` seconds."""
    return FakeEngine(text(raw, delay), model_id="local-script")


@pytest.fixture
def fake():
    f = FakeRemote()
    yield f
    f.close()


@pytest.fixture
async def make(tmp_path, monkeypatch):
    monkeypatch.setenv("FLINT_HOME", str(tmp_path))
    made: list[Session] = []

    def build(engine: FakeEngine, **settings) -> Session:
        refreshed: list[tuple[str, int]] = []
        statuses: list[dict] = []
        s = Session(lambda _s: engine, Settings(max_variants=1, **settings), on_status=statuses.append,
                    on_refresh=lambda uri, v: refreshed.append((uri, v)))
        s.attach_loop(asyncio.get_running_loop())
        s.start()
        assert s.worker.loaded.wait(5) and (s.remote_worker is None or s.remote_worker.loaded.wait(5))
        s.documents.open(URI, DOC, 1)
        s.refreshed, s.statuses = refreshed, statuses
        made.append(s)
        return s

    yield build
    for s in made:
        s.shutdown()


async def wait_for(cond, timeout=5.0):
    await until(cond, timeout)
    assert cond(), "condition not reached"


def handled(s: Session) -> None:
    """The events the workers sent so far handled (on this loop, as its scheduled drain would)."""
    s.service.events.drain()


def remote_done(s: Session) -> bool:
    return s.remote_worker.backlog() == 0


# ------------------------------------------------------------------------------------------ fallbacks


@pytest.mark.parametrize("behaviour", [
    {"status": 503, "body": '{"error": {"message": "loading model"}}'},
    {"stream": ["a +"], "end": "malformed"},
    {"stream": ["a +"], "end": "cut"},
])
async def test_hybrid_falls_back_to_local_on_remote_failure(make, fake, behaviour, caplog):
    fake.script = [behaviour]
    s = make(local("a - b"), routing="hybrid", remote_url=fake.url)
    with caplog.at_level(logging.WARNING):
        res = await s.suggest(URI, *POS, invoked=True)
    assert res.backend == "local" and res.items[0].text == "a - b"
    assert "local fallback: remote failed" in s.status["message"]
    assert s.status["remote"]["state"] == "error"
    assert s.stats.counts["remote_fallbacks"] == 1
    assert "Traceback" not in caplog.text  # an expected failure is one line, not a crash report
    # after the backoff the remote is tried again and answers
    s.remote_worker.engine.backoff.retry_at = 0.0
    fake.default = {"stream": ["a + b"]}
    s.documents.open(URI, DOC.replace("total = ", "total = 0\n    total = "), 2)
    res = await s.suggest(URI, 2, len("    total = "), invoked=True)
    assert res.backend == "remote" and res.items[0].text == "a + b"


async def test_a_stalled_remote_gives_way_to_local_after_its_timeout(make, fake):
    fake.script = [{"stall": 10}]
    s = make(local("a - b"), routing="hybrid", remote_url=fake.url, remote_timeout_ms=400)
    t0 = time.monotonic()
    res = await s.suggest(URI, *POS, invoked=True)
    assert res.backend == "local" and time.monotonic() - t0 < 3.0


async def test_while_backing_off_routed_requests_go_local_without_asking(make, fake):
    fake.script = [{"status": 500, "body": "boom"}]
    s = make(local("a - b"), routing="hybrid", remote_url=fake.url)
    await s.suggest(URI, *POS, invoked=True)
    s.remote_worker.engine.backoff.retry_at = time.monotonic() + 60
    asked = len(fake.requests)
    s.documents.open(URI, DOC, 2)
    res = await s.suggest(URI, *POS, invoked=True)
    assert res.backend == "local" and len(fake.requests) == asked and not s.remote_ready()


# ------------------------------------------------------------------------------------- caches and ids


async def test_remote_answers_land_on_disk_under_their_own_key(make, fake, tmp_path, monkeypatch):
    monkeypatch.setenv("FLINT_CACHE_DIR", str(tmp_path / "cache"))
    fake.default = {"stream": ["a + b"]}
    s = make(local("a - b"), routing="hybrid", remote_url=fake.url)
    res = await s.suggest(URI, *POS, invoked=True)
    assert res.backend == "remote"
    await wait_for(lambda: remote_done(s))
    s.shutdown()
    # a new server: the invoked request is answered from disk, as the remote's answer
    s2 = make(local("a - b"), routing="hybrid", remote_url=fake.url)
    asked = len(fake.requests)
    res = await s2.suggest(URI, *POS, invoked=True)
    assert (res.source, res.backend, res.items[0].text) == ("disk", "remote", "a + b")
    assert len(fake.requests) == asked  # only GET /models is not a completion; nothing was generated
    # a local-only server on the same disk never serves the remote's entry
    s3 = make(local("a - b"), routing="local", remote_url=fake.url)
    res = await s3.suggest(URI, *POS, invoked=True)
    assert (res.backend, res.items[0].text) == ("local", "a - b")


def test_settings_check_the_url_and_hide_the_key():
    s, w = parse_settings({"routing": "hybrid", "remoteUrl": "http://gpu.example.com:8000/v1",
                           "remoteApiKey": "sk-SECRET"})
    assert s.remote_url == "" and s.remote_config() is None and any("unencrypted" in x for x in w)
    s, w = parse_settings({"routing": "hybrid", "remoteUrl": "http://gpu.example.com:8000/v1",
                           "remoteAllowInsecureHttp": True, "remoteApiKey": "sk-SECRET"})
    assert w == [] and s.remote_config().url == "http://gpu.example.com:8000/v1"
    assert "sk-SECRET" not in repr(s) and "sk-SECRET" not in str(to_camel(s))
    assert to_camel(s)["remoteApiKey"] == "***"
    s, w = parse_settings({"routing": "remote"})
    assert any("needs remoteUrl" in x for x in w) and s.remote_config() is None
    for gone in ("race", "pause"):  # modes since removed: answered locally, with a warning
        s, w = parse_settings({"routing": gone})
        assert s.routing == "local" and "routing" in w[0]
    s, w = parse_settings({"remoteApiKey": 12345})
    assert w and "12345" not in w[0]
    s, w = parse_settings({"remoteFor": ["invoked", "tabs"]})
    assert s.remote_for == Settings().remote_for and "tabs" in w[0]
