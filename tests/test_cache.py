"""The on-disk completion cache (engine/cache/disk.py): keys, crash safety, sharing, eviction, corruption.

Real diskcache/SQLite on a temporary directory and real processes (no mocks): a writer killed with
SIGKILL mid-loop, two processes writing and reading one directory, a file overwritten with garbage.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from engine.cache.disk import INODE_CHECK_S, CompletionCache
from engine.cache.entries import cache_key, decode, encode
from engine.types import Completion, GenParams
from tests.fakes import wait_for

ROOT = Path(__file__).resolve().parents[1]


def comps(text: str, n: int = 1, reason: str = "eos") -> list[Completion]:
    return [Completion(text=f"{text}#{i}", token_ids=[1, 2, 3 + i], finish_reason=reason) for i in range(n)]


def key(prefix: str, suffix: str = "", params: GenParams | None = None, model: str = "m1") -> str:
    return cache_key(model, params or GenParams(), prefix, suffix, 6000, 600)


# ---------------------------------------------------------------------------------------------- keys


def test_key_covers_model_params_prefix_and_suffix():
    base = key("def f(x):\n    ", "\nprint(f(1))\n")
    assert base == key("def f(x):\n    ", "\nprint(f(1))\n")
    assert base != key("def f(x):\n    ", "\nprint(f(2))\n")  # the suffix matters
    assert base != key("def f(y):\n    ", "\nprint(f(1))\n")
    assert base != key("def f(x):\n    ", "\nprint(f(1))\n", model="m2")
    assert base != key("def f(x):\n    ", "\nprint(f(1))\n", GenParams(max_lines=1))
    # deadline is not an output parameter
    assert base == key("def f(x):\n    ", "\nprint(f(1))\n", GenParams(deadline=123.0))


def test_a_whitespace_only_line_does_not_match_what_was_stored_for_it_before():
    """Such a line is asked from its start now (text.window.line_start): an entry stored by an older Flint,
    from a prompt that ended in the indentation, is not its answer; other states keep their keys."""
    import hashlib
    import json

    from engine.cache.entries import FORMAT

    def older(prefix: str, suffix: str) -> str:
        material = json.dumps([FORMAT, "m1", list(GenParams().key()), prefix, suffix], ensure_ascii=False)
        return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()

    assert key("def f(x):\n    ", "\nprint(f(1))\n") != older("def f(x):\n    ", "\nprint(f(1))\n")
    assert key("def f(x):\n    return ", "\nprint(f(1))\n") == older("def f(x):\n    return ", "\nprint(f(1))\n")


def test_key_uses_the_engines_window():
    """Text outside the window the engine sees does not split entries; text inside it does."""
    far = "".join(f"line_{i} = {i}\n" for i in range(2000))  # ~26k characters
    near = "def g():\n    return "
    assert key("# header A\n" + far + near) == key("# header B\n" + far + near)
    assert key(far + near, "x\n" * 10) != key(far + near, "y\n" * 10)
    assert key(far + near, "x\n" * 400 + "A") == key(far + near, "x\n" * 400 + "B")  # beyond 600 chars


def test_value_round_trip_and_rejection():
    k = key("a")
    data = encode(k, comps("hello", 2))
    got = decode(k, data)
    assert [c.text for c in got] == ["hello#0", "hello#1"] and got[1].token_ids == [1, 2, 4]
    assert all(c.source == "disk" for c in got)
    assert decode(key("b"), data) is None  # stored under another key
    assert decode(k, data[: len(data) // 2]) is None  # half a value
    assert decode(k, b"\xff\xfe garbage") is None
    assert decode(k, 42) is None


# ------------------------------------------------------------------------------------------- basics


def test_put_get_and_partial_generations_are_not_stored(tmp_path):
    c = CompletionCache(tmp_path / "c", size_mb=8)
    k = key("x = ")
    assert c.get(k) is None
    assert c.put(k, comps("1"))
    assert [x.text for x in c.get(k)] == ["1#0"]
    k2 = key("y = ")
    assert not c.put(k2, comps("2", reason="deadline"))  # cut by a deadline: not the model's answer
    assert not c.put(k2, comps("2", reason="cancelled"))
    assert c.get(k2) is None
    assert len(c) == 1


def test_a_cut_off_generation_is_kept_as_a_start_and_never_replaces_a_complete_one(tmp_path):
    c = CompletionCache(tmp_path / "c", size_mb=8)
    k = key("z = ")
    nothing = [Completion(text="  ", token_ids=[5], finish_reason="cancelled")]
    assert not c.put_partial(k, nothing)  # nothing written yet: nothing to keep
    assert c.put_partial(k, comps("fo", reason="cancelled"))
    assert [(x.text, x.finish_reason) for x in c.get(k)] == [("fo#0", "cancelled")]
    assert c.put(k, comps("foo"))  # the complete generation replaces the start
    assert not c.put_partial(k, comps("f", reason="deadline"))  # ... and a later start never replaces it
    assert [(x.text, x.finish_reason) for x in c.get(k)] == [("foo#0", "eos")]
    assert not c.put_partial(key("w = "), comps("1"))  # complete generations go through put


def test_survives_restart(tmp_path):
    c = CompletionCache(tmp_path / "c")
    c.put(key("p"), comps("persisted"))
    c.close()
    again = CompletionCache(tmp_path / "c")
    assert again.get(key("p"))[0].text == "persisted#0"


# ------------------------------------------------------------------------------- processes, crashes

WRITER = textwrap.dedent("""
    import sys
    from engine.cache.disk import CompletionCache
    from engine.cache.entries import cache_key
    from engine.types import Completion, GenParams
    c = CompletionCache(sys.argv[1], size_mb=64)
    tag = sys.argv[2]
    i = 0
    while True:
        k = cache_key("m1", GenParams(), f"{tag} prefix {i}", "suffix", 6000, 600)
        c.put(k, [Completion(text=f"{tag} value {i} " + "x" * 500, token_ids=list(range(50)),
                             finish_reason="eos")])
        if i % 20 == 0:
            print(i, flush=True)
        i += 1
        if len(sys.argv) > 3 and i >= int(sys.argv[3]):
            break
    print("done", i, flush=True)
""")


def spawn_writer(directory: Path, tag: str, count: int | None = None) -> subprocess.Popen:
    args = [sys.executable, "-c", WRITER, str(directory), tag] + ([str(count)] if count else [])
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, text=True)


def test_kill_9_mid_write_then_the_cache_opens_and_serves(tmp_path):
    d = tmp_path / "c"
    proc = spawn_writer(d, "w")
    written = -1
    try:
        # let it write a few hundred entries, then kill it without any chance to clean up
        while written < 200:
            line = proc.stdout.readline()
            assert line, "writer died on its own"
            written = int(line.split()[0])
        time.sleep(0.05)  # mid-loop: it is inside a write most of the time
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    c = CompletionCache(d, size_mb=64)
    for i in (0, 100, written):  # everything reported written is there, whole
        got = c.get(cache_key("m1", GenParams(), f"w prefix {i}", "suffix", 6000, 600))
        assert got is not None and got[0].text.startswith(f"w value {i} ") and len(got[0].token_ids) == 50
    assert c.stats["rebuilds"] == 0 and c.stats["rejected"] == 0
    assert len(c) >= written + 1
    assert c.put(key("after the crash"), comps("ok")) and c.get(key("after the crash"))[0].text == "ok#0"


def test_two_processes_share_one_cache(tmp_path):
    d = tmp_path / "c"
    a, b = spawn_writer(d, "a", 150), spawn_writer(d, "b", 150)  # concurrent writers, one directory
    out_a, _ = a.communicate(timeout=120)
    out_b, _ = b.communicate(timeout=120)
    assert a.returncode == 0 and b.returncode == 0, (out_a, out_b)
    assert "done 150" in out_a and "done 150" in out_b
    c = CompletionCache(d, size_mb=64)
    for tag in "ab":
        for i in range(150):
            got = c.get(cache_key("m1", GenParams(), f"{tag} prefix {i}", "suffix", 6000, 600))
            assert got is not None and got[0].text.startswith(f"{tag} value {i} "), (tag, i)
    # and a third process reads what this one writes
    c.put(key("from the parent"), comps("hi"))
    probe = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        from engine.cache.disk import CompletionCache
        from engine.cache.entries import cache_key
        from engine.types import GenParams
        c = CompletionCache({str(d)!r}, size_mb=64)
        print(c.get(cache_key("m1", GenParams(), "from the parent", "", 6000, 600))[0].text)
    """)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == "hi#0", probe.stderr


# ------------------------------------------------------------------------------------------ eviction


def test_eviction_keeps_the_cap(tmp_path):
    c = CompletionCache(tmp_path / "c", size_mb=1)
    payload = "y" * 4000  # ~4 KB per entry: 1000 entries is ~4x the cap
    for i in range(1000):
        assert c.put(key(f"p{i}"), [Completion(text=payload + str(i), token_ids=[1], finish_reason="eos")])
    vol = c.volume()
    assert vol <= 1.1 * 2**20, f"{vol / 2**20:.2f} MiB on disk with a 1 MiB cap"
    db = (tmp_path / "c" / "cache.db").stat().st_size
    assert db <= 1.2 * 2**20  # the file itself shrinks back (auto-vacuum), not just the count
    assert c.get(key("p999")) is not None  # the newest survive
    assert c.get(key("p0")) is None  # the oldest went first
    assert 100 < len(c) < 400


# --------------------------------------------------------------------------------------- corruption


def test_garbage_database_is_rebuilt(tmp_path):
    d = tmp_path / "c"
    c = CompletionCache(d)
    c.put(key("p"), comps("v"))
    c.close()
    for f in d.glob("cache.db*"):
        f.unlink()
    (d / "cache.db").write_bytes(b"this is not a database " * 500)
    c2 = CompletionCache(d)
    assert c2.get(key("p")) is None  # gone, and no exception
    assert c2.stats["rebuilds"] == 1
    assert c2.put(key("p"), comps("again")) and c2.get(key("p"))[0].text == "again#0"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]  # nothing left beside the directory


def test_half_written_database_is_rebuilt(tmp_path):
    d = tmp_path / "c"
    c = CompletionCache(d, size_mb=64)
    for i in range(300):
        c.put(key(f"p{i}"), comps("z" * 3000 + str(i)))
    c.close()
    for f in d.glob("cache.db-*"):  # no WAL to recover from: the main file alone, cut in half
        f.unlink()
    db = d / "cache.db"
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])
    c2 = CompletionCache(d, size_mb=64)
    hits = [c2.get(key(f"p{i}")) for i in range(300)]  # each lookup either serves or misses
    assert c2.stats["rebuilds"] >= 1
    assert all(h is None or h[0].text.startswith("z") for h in hits)
    assert c2.put(key("new"), comps("fresh")) and c2.get(key("new"))[0].text == "fresh#0"


def test_garbled_value_is_dropped_not_served(tmp_path):
    import diskcache

    d = tmp_path / "c"
    c = CompletionCache(d)
    k = key("p")
    c.put(k, comps("v"))
    c.close()
    with diskcache.Cache(str(d)) as raw:
        raw.set(k, b'{"v": 1, "k": "someone else", "c": []}')
    c2 = CompletionCache(d)
    assert c2.get(k) is None and c2.stats["rejected"] == 1
    assert c2.get(k) is None and c2.stats["rejected"] == 1  # deleted, not rejected again
    assert c2.stats["rebuilds"] == 0


def test_another_process_rebuilding_is_followed(tmp_path):
    d = tmp_path / "c"
    a = CompletionCache(d)
    a.put(key("p"), comps("v"))
    b = CompletionCache(d)
    assert b.get(key("p")) is not None
    # process "a" finds damage and rebuilds; "b" notices the new database within INODE_CHECK_S
    old = a._cache
    a._cache = a._rebuild("test", a._inode)
    old.close()
    a.put(key("q"), comps("new"))
    assert wait_for(lambda: b.get(key("q")) is not None, INODE_CHECK_S + 0.5)
    assert b.get(key("p")) is None


@pytest.mark.parametrize("size_mb", [0, -5])
def test_tiny_caps_are_clamped(tmp_path, size_mb):
    c = CompletionCache(tmp_path / "c", size_mb=size_mb)
    # (a loaded machine can take longer than OPEN_WAIT_S to open it: the put then waits for the opening)
    assert c.size_mb == 1 and wait_for(lambda: c.put(key("p"), comps("v")), 10.0)


# ------------------------------------------------------------------ only Flint's own files, last resort


def test_a_rebuild_removes_only_flints_database_files(tmp_path):
    d = tmp_path / "shared"
    d.mkdir()
    (d / "notes.txt").write_text("the user's own file")
    (d / "project").mkdir()
    (d / "project" / "main.py").write_text("print('hi')")
    c = CompletionCache(d)
    assert c.put(key("p"), comps("v"))
    c.close()
    (d / "cache.db").write_bytes(b"garbage " * 2000)
    c2 = CompletionCache(d)
    assert c2.get(key("p")) is None and c2.stats["rebuilds"] == 1
    assert (d / "notes.txt").read_text() == "the user's own file"
    assert (d / "project" / "main.py").read_text() == "print('hi')"
    assert c2.put(key("p"), comps("again")) and c2.get(key("p"))[0].text == "again#0"


def test_another_programs_database_is_left_alone(tmp_path, caplog):
    import sqlite3

    d = tmp_path / "d"
    d.mkdir()
    con = sqlite3.connect(d / "cache.db")
    con.execute("CREATE TABLE invoices (id INTEGER, amount REAL)")
    con.execute("INSERT INTO invoices VALUES (1, 9.5)")
    con.commit()
    con.close()
    before = (d / "cache.db").read_bytes()
    c = CompletionCache(d)
    assert c.get(key("p")) is None and not c.put(key("p"), comps("v"))
    assert (d / "cache.db").read_bytes() == before and c.stats["rebuilds"] == 0
    assert "another program's database" in caplog.text
    # a file that is not a database at all, in a directory Flint never used: not Flint's either
    e = tmp_path / "e"
    e.mkdir()
    (e / "cache.db").write_bytes(b"not sqlite " * 100)
    c = CompletionCache(e)
    assert c.get(key("p")) is None and (e / "cache.db").read_bytes() == b"not sqlite " * 100


def test_a_locked_database_opens_later_without_stalling_the_caller(tmp_path, monkeypatch, caplog):
    import sqlite3

    import engine.cache.disk as cache_mod

    d = tmp_path / "c"
    first = CompletionCache(d)
    assert first.put(key("old"), comps("v"))
    first.close()
    # another process holds the write lock: opening writes settings, and diskcache retries for a minute
    holder = sqlite3.connect(d / "cache.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("INSERT INTO Settings VALUES ('x', 1)")
    monkeypatch.setattr(cache_mod, "RETRY_S", 0.1)
    c = CompletionCache(d)
    t0 = time.monotonic()
    assert c.get(key("p")) is None
    assert not c.put(key("p"), comps("v"))
    assert time.monotonic() - t0 < cache_mod.OPEN_WAIT_S + 1.0
    assert "slow to open" in caplog.text
    holder.execute("ROLLBACK")
    holder.close()
    wait_for(lambda: c.put(key("p"), comps("v")), 30, every=0.05)
    assert c.get(key("p"))[0].text == "v#0" and c.stats["rebuilds"] == 0


def test_a_write_lock_held_elsewhere_costs_a_lookup_little(tmp_path):
    import sqlite3

    d = tmp_path / "c"
    c = CompletionCache(d)
    assert c.put(key("p"), comps("v"))
    holder = sqlite3.connect(d / "cache.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
    holder.execute("INSERT INTO Settings VALUES ('x', 1)")
    try:
        t0 = time.monotonic()
        assert c.get(key("p"))[0].text == "v#0"  # WAL: readers go on beside a writer
        assert not c.put(key("q"), comps("w"))  # a skipped write, not an error and not a rebuild
        assert time.monotonic() - t0 < 3.0
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert c.stats["rebuilds"] == 0 and c.stats["errors"] == 0
    assert c.put(key("q"), comps("w"))


@pytest.fixture
def small_disk(tmp_path):
    """A real 1 MiB filesystem (tmpfs) when this process may mount one; else None."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                        capture_output=True).returncode == 0
    yield mnt if ok else None
    if ok:  # lazily: a connection another thread opened may still hold a file until it is collected
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_full_disk_keeps_the_entries_and_never_rebuilds(tmp_path, small_disk, caplog):
    d = (small_disk or tmp_path) / "c"
    c = CompletionCache(d, size_mb=64)
    assert c.put(key("early"), comps("kept"))
    (d / "mine.txt").write_text("user data")
    if small_disk is None:  # no mount here: SQLite's own page cap gives the same SQLITE_FULL
        c._current()._con.execute("PRAGMA max_page_count = 40")
    written = 0
    for i in range(2000):
        if not c.put(key(f"p{i}"), comps("x" * 4000 + str(i))):
            break
        written += 1
    assert written < 2000, "the disk never filled"
    assert c.stats["rebuilds"] == 0 and c.stats["errors"] == 1
    assert not c.put(key("more"), comps("y"))  # writes pause instead of failing again and again
    assert c.stats["errors"] == 1
    assert caplog.text.count("writes paused") == 1
    assert c.get(key("early"))[0].text == "kept#0"  # reads go on
    assert c.get(key(f"p{written - 1}")) is not None
    assert (d / "mine.txt").read_text() == "user data"
    c.close()


def test_doubts_round_trip_through_the_disk_value():
    k = key("d")
    c = Completion("x = foo(bar)", [1, 2, 3], "eos", doubts=((3, 0.25), (7, 0.5)))
    [got] = decode(k, encode(k, [c]))
    assert got.doubts == ((3, 0.25), (7, 0.5))
    [plain] = decode(k, encode(k, [Completion("y", [1], "eos")]))
    assert plain.doubts == ()
