"""A completion cache that is read-only when Flint starts (docs/reliability.md): a read-only mount where this
process may make one (a bind mount remounted ``ro``), else a directory and files without write permission
(which binds any user but root). Opened read-only: served, never written, never rebuilt, one log line."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cache.disk import CompletionCache
from engine.types import Completion
from lsp_server.session import Session
from lsp_server.settings import Settings
from tests.fakes import FakeEngine, text, until


def comps(t: str) -> list[Completion]:
    return [Completion(t, [1, 2], "eos")]


def snapshot(d: Path) -> dict[str, tuple[bytes, int]]:
    """Every file's bytes and modification time (-shm's bytes aside: SQLite's shared-memory index, which the
    writer's last connection may still touch through the writable path when it is collected)."""
    return {p.name: (b"" if p.name.endswith("-shm") else p.read_bytes(), p.stat().st_mtime_ns)
            for p in d.iterdir() if p.is_file()}


@pytest.fixture
def read_only(tmp_path):
    """``make(src)``: ``src`` (a directory with a cache in it) read-only; yields the path to open it at."""
    mounts: list[Path] = []
    chmodded: list[Path] = []

    def make(src: Path) -> Path:
        view = tmp_path / "ro"
        view.mkdir()
        ok = subprocess.run(["mount", "--bind", str(src), str(view)], capture_output=True).returncode == 0
        if ok:
            mounts.append(view)
            if subprocess.run(["mount", "-o", "remount,ro,bind", str(view)], capture_output=True).returncode == 0:
                return view
        if os.geteuid() == 0:
            pytest.skip("root here and no read-only mount allowed: nothing can make a directory read-only")
        for p in (src, *src.iterdir()):
            p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
            chmodded.append(p)
        return src

    yield make
    for p in chmodded:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    for m in mounts:
        subprocess.run(["umount", "-l", str(m)], capture_output=True)


WRITER = """
import os, sys
from engine.cache.disk import CompletionCache
from engine.types import Completion
c = CompletionCache(sys.argv[1])
assert c.put("k-stored", [Completion("kept", [1, 2], "eos")]) and c.put("k-other", [Completion("also", [1], "eos")])
os._exit(0)  # as a server killed or still running: its WAL and shared-memory files stay
"""


@pytest.mark.parametrize("wal", ["left by a writer", "checkpointed"])
def test_a_read_only_cache_serves_its_entries_and_writes_nothing(tmp_path, read_only, caplog, wal):
    src = tmp_path / "c"
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", WRITER, str(src)], check=True, cwd=root, timeout=60,
                   env={**os.environ, "PYTHONPATH": str(root)})
    if wal == "checkpointed":  # the last connection to close folds the WAL in and removes it
        con = sqlite3.connect(src / "cache.db")
        con.execute("SELECT COUNT(*) FROM Cache").fetchone()
        con.close()
    assert (src / "cache.db-wal").exists() == (wal != "checkpointed")
    d = read_only(src)
    with pytest.raises(OSError):
        (d / "probe").write_text("x")  # it really is read-only
    before = snapshot(d)
    caplog.set_level(logging.INFO, logger="flint.cache")
    ro = CompletionCache(d)
    got = ro.get("k-stored")
    assert got is not None and got[0].text == "kept" and got[0].source == "disk"
    assert ro.read_only and len(ro) == 2 and ro.get("missing") is None
    assert not ro.put("k-new", comps("new")) and not ro.put_partial("k-new", [Completion("n", [1], "deadline")])
    for _ in range(3):
        assert ro.get("k-other")[0].text == "also"
    assert ro.stats["rebuilds"] == 0 and ro.stats["errors"] == 0
    lines = [r.getMessage() for r in caplog.records if "read-only" in r.getMessage()]
    assert len(lines) == 1 and "serving its 2 entries" in lines[0], lines
    ro.close()
    assert snapshot(d) == before  # not a byte, not a timestamp changed


def test_a_session_on_a_read_only_cache_answers_from_it(tmp_path, read_only, monkeypatch):
    """A server whose cache directory is read-only answers a stored spot from disk, with no model call."""
    monkeypatch.setenv("FLINT_HOME", str(tmp_path / "home"))
    src = tmp_path / "shared"
    monkeypatch.setenv("FLINT_CACHE_DIR", str(src))
    doc, uri = "def add(a, b):\n    return \n", "file:///r/add.py"

    async def ask(eng: FakeEngine) -> tuple[str | None, str]:
        s = Session(lambda _s: eng, Settings(max_variants=1))
        s.attach_loop(asyncio.get_running_loop())
        s.start()
        try:
            assert s.worker.loaded.wait(5)
            s.documents.open(uri, doc, 1)
            res = await s.suggest(uri, 1, len("    return "), invoked=True)
            await until(lambda: s.worker.backlog() == 0, 2)  # the generation lands on disk after the answer
            await asyncio.sleep(0.1)
            return res.source, res.items[0].text
        finally:
            s.shutdown()

    first = FakeEngine(text("a + b"), model_id="m")
    assert asyncio.run(ask(first)) == ("model", "a + b")
    monkeypatch.setenv("FLINT_CACHE_DIR", str(read_only(src)))
    second = FakeEngine(text("a - b"), model_id="m")
    assert asyncio.run(ask(second)) == ("disk", "a + b")
    assert second.calls == []  # served from the read-only cache: no model call
