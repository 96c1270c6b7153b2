"""The on-disk completion cache (engine/cache.py): keys, crash safety, sharing, eviction, corruption.

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

from engine.cache import CompletionCache, cache_key, decode, encode
from engine.types import Completion, GenParams

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
    from engine.cache import CompletionCache, cache_key
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
        from engine.cache import CompletionCache, cache_key
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
    assert not list(tmp_path.glob("c.corrupt-*"))  # the damaged copy was removed


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
    # process "a" finds damage and rebuilds; "b" notices the new directory within INODE_CHECK_S
    with a._lock:
        a._cache = a._rebuild("test", a._inode)
    a.put(key("q"), comps("new"))
    time.sleep(1.1)
    assert b.get(key("q")) is not None and b.get(key("p")) is None


@pytest.mark.parametrize("size_mb", [0, -5])
def test_tiny_caps_are_clamped(tmp_path, size_mb):
    c = CompletionCache(tmp_path / "c", size_mb=size_mb)
    assert c.size_mb == 1 and c.put(key("p"), comps("v"))
