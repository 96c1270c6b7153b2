"""The on-disk completion cache: one directory shared by every Flint server on the machine. What is stored
under which key: engine/cache/entries.py.

Built on diskcache (SQLite in WAL mode, one connection per thread and process):

- Shared: several server processes open the same directory; SQLite's locking serialises writers and
  WAL lets readers run beside a writer. A lookup waits at most ``READ_TIMEOUT_S`` on another process's
  lock and a write at most ``TIMEOUT_S``: longer is a miss (or an unwritten entry), never a stall.
- Bounded opening: diskcache retries a locked database for up to a minute while it opens, so opening
  (and any rebuild) runs on a helper thread, started with the object; the first caller waits for it at
  most ``OPEN_WAIT_S``, the others not at all. A cache that
  is still opening, or failed to, is off (every lookup a miss, one warning) and is retried later.
- Crash-safe: an entry is one SQLite transaction, so a process killed mid-write (``kill -9``) leaves
  either the whole entry or none of it; the next open replays or discards the WAL.
- Size-capped: ``size_mb`` is diskcache's ``size_limit``; every write evicts the oldest entries while
  the database is over it (auto-vacuum returns freed pages, so the file shrinks too).
- Only Flint's own files are ever removed: the database files ``cache.db``, ``cache.db-wal`` and
  ``cache.db-shm``, and only when the directory carries Flint's marker file (``OWNER_FILE``, written
  when Flint creates or adopts the database) -- never the directory or anything else in it. A database
  Flint did not create is left alone and the cache stays off.
- Last-resort rebuild: only real damage (SQLite reports a malformed image or "not a database", or the
  format marker is foreign) leads to a rebuild, and a database reported damaged by a query is first
  re-checked (``PRAGMA quick_check``) on a fresh connection. A full disk, an I/O error, a read-only or
  locked database are not damage: the cache keeps its entries, writes pause a while, one warning is
  logged. A cache read-only when it opens is opened read-only (db.ReadOnlyCache): served, never written,
  never rebuilt, one log line. Nothing here raises to the caller.

The database file itself (opening it with Flint's settings and marker, failure kinds, adoption, damage
checks, the rebuild lock, removing Flint's files): engine/cache/db.py.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import diskcache

from engine import paths
from engine.cache.db import (
    OWNER_FILE,
    Foreign,
    ReadOnlyCache,
    damaged_on_disk,
    failure_kind,
    file_lock,
    inode_of,
    is_read_only,
    open_cache,
    remove_db_files,
)
from engine.cache.entries import decode, encode, is_complete
from engine.types import Completion

log = logging.getLogger("flint.cache")

TIMEOUT_S = 0.5  # SQLite busy timeout for writes (on the engine thread): a lock held longer is a skipped write
READ_TIMEOUT_S = 0.05  # lookups run on the server's event loop: a lock held longer is a miss
OPEN_WAIT_S = 1.0  # a caller waits this long for the opening thread, then goes on without the cache
INODE_CHECK_S = 1.0  # how often to notice that another process rebuilt the database
RETRY_S = 5.0  # a cache that could not be opened is retried this much later (it is off meanwhile)
WRITE_PAUSE_S = 30.0  # after a full disk or an I/O error, writes pause this long (reads go on)
WARN_EVERY_S = 300.0  # the same warning about the cache is logged at most this often
MIN_SIZE_MB = 1


def default_dir() -> Path:
    """FLINT_CACHE_DIR, else FLINT_HOME/cache/completions."""
    env = os.environ.get("FLINT_CACHE_DIR")
    return Path(env).expanduser() if env else paths.cache_dir() / "completions"


class _ThreadTimeout(threading.local):
    """Per thread: (the cache's id, the busy timeout) its connection has now (None: diskcache's own)."""

    timeout: tuple[int, float] | None = None


class CompletionCache:
    """Thread-safe and process-safe. ``get``/``put`` never raise and never wait long (module docstring);
    ``stats`` counts what happened."""

    def __init__(self, directory: Path | str | None = None, size_mb: int = 256) -> None:
        self.directory = Path(directory) if directory is not None else default_dir()
        self.size_mb = max(MIN_SIZE_MB, int(size_mb))
        self._lock = threading.Lock()  # held only for quick swaps, never across I/O
        self._cache: diskcache.Cache | None = None
        self._inode: int | None = None
        self._checked = 0.0
        self._retry_at = 0.0  # after a failed open, wait before trying again
        self._opener: threading.Thread | None = None
        self._damaged_inode: int | None = None  # a query reported this database damaged: check, maybe rebuild
        self._writes_at = 0.0  # writes pause until then (full disk, I/O error)
        self._warned: dict[str, float] = {}
        self._local = _ThreadTimeout()  # the busy timeout each thread's connection has now
        self._closed = False
        self._waited = False  # someone waited for the opening under way already
        self.read_only = False  # opened read-only (the disk or directory refuses writes): nothing is written
        self.stats = {"hits": 0, "misses": 0, "puts": 0, "rejected": 0, "rebuilds": 0, "errors": 0}
        self.start()  # at once: the first lookup (a keystroke) then finds the cache open

    # ---- public ----------------------------------------------------------------------------------
    def get(self, key: str) -> list[Completion] | None:
        cache = self._current()
        if cache is None:
            self.stats["misses"] += 1
            return None
        try:
            self._timeout(cache, READ_TIMEOUT_S)
            data = cache.get(key, default=None, retry=False)
        except Exception as e:
            self._failed(cache, e, "get")
            self.stats["misses"] += 1
            return None
        if data is None:
            self.stats["misses"] += 1
            return None
        comps = decode(key, data)
        if comps is None:  # a damaged or foreign row: drop it, keep the rest
            self.stats["rejected"] += 1
            log.warning("cache entry %s… does not decode: dropped", key[:12])
            with contextlib.suppress(Exception):
                self._timeout(cache, TIMEOUT_S)
                if not self.read_only:
                    cache.delete(key, retry=False)
            self.stats["misses"] += 1
            return None
        self.stats["hits"] += 1
        return comps

    def put(self, key: str, comps: Sequence[Completion], gen_ms: float = 0.0) -> bool:
        """Store complete generations (partial ones are refused). True when written."""
        if not is_complete(comps):
            return False
        cache = self._writable()
        if cache is None:
            return False
        try:
            self._timeout(cache, TIMEOUT_S)
            cache.set(key, encode(key, comps, gen_ms), retry=False)
        except Exception as e:
            self._failed(cache, e, "put")
            return False
        self.stats["puts"] += 1
        return True

    def put_partial(self, key: str, comps: Sequence[Completion], gen_ms: float = 0.0) -> bool:
        """Store the start of a generation that was cut off (cancelled, deadline): greedy text is the
        model's own as far as it goes, so after a restart it answers the keystrokes it covers at once,
        while a generation there writes the rest. Never replaces an entry (a complete one stays); ``put``
        of the complete generation replaces it. True when written."""
        if not comps or is_complete(comps) or not any(c.text.strip() for c in comps):
            return False
        cache = self._writable()
        if cache is None:
            return False
        try:
            self._timeout(cache, TIMEOUT_S)
            added = bool(cache.add(key, encode(key, comps, gen_ms), retry=False))
        except Exception as e:
            self._failed(cache, e, "put")
            return False
        if added:
            self.stats["puts"] += 1
        return added

    def volume(self) -> int:
        """Bytes on disk (diskcache's estimate: database pages plus value files)."""
        cache = self._current()
        try:
            return int(cache.volume()) if cache is not None else 0
        except Exception:
            return 0

    def __len__(self) -> int:
        cache = self._current()
        try:
            return max(0, len(cache) - 1) if cache is not None else 0  # minus the format marker
        except Exception:
            return 0

    def close(self) -> None:
        with self._lock:
            self._closed = True
            cache, self._cache = self._cache, None
        if cache is not None:
            with contextlib.suppress(Exception):
                cache.close()

    # ---- internals -------------------------------------------------------------------------------
    @property
    def _db(self) -> Path:
        return self.directory / diskcache.core.DBNAME

    def _warn(self, what: str, message: str, *args: Any) -> None:
        """One warning per kind of trouble per WARN_EVERY_S (a full disk fails every write)."""
        now = time.monotonic()
        if now - self._warned.get(what, -WARN_EVERY_S) >= WARN_EVERY_S:
            self._warned[what] = now
            log.warning(message, *args)

    def _timeout(self, cache: diskcache.Cache, seconds: float) -> None:
        """Set this thread's connection's busy timeout (reads wait less than writes). diskcache opens one
        connection per thread with the timeout it was created with; the pragma changes just that one."""
        if self._local.timeout == (id(cache), seconds):
            return
        cache._con.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")  # this thread's connection
        self._local.timeout = (id(cache), seconds)

    def _writable(self) -> diskcache.Cache | None:
        if self.read_only or time.monotonic() < self._writes_at:
            return None
        return self._current()

    def _current(self) -> diskcache.Cache | None:
        """The open cache; (re)opened on a helper thread on first use and after a rebuild here or in another
        process. Waits for that thread at most OPEN_WAIT_S."""
        now = time.monotonic()
        cache = self._cache
        if cache is not None and now - self._checked < INODE_CHECK_S:
            return cache
        with self._lock:
            if self._closed:
                return None
            self._checked = now
            cache = self._cache
            if cache is not None and self._inode is not None and self._inode == inode_of(self._db):
                return cache
            if cache is not None:  # the database was rebuilt by another process: follow it
                log.info("cache %s was replaced by another process: reopening", self.directory)
                self._cache = None
                self._local = _ThreadTimeout()
            opener = self._opener
            if opener is None and now >= self._retry_at:
                opener = self._start_open()
            # the first caller of an opening waits for it (briefly); the others go on without the cache
            wait = opener is not None and not self._waited
            self._waited = self._waited or wait
        if cache is not None and self._cache is None:
            with contextlib.suppress(Exception):
                cache.close()
        if opener is not None and wait:
            opener.join(OPEN_WAIT_S)
            if opener.is_alive():
                self._warn("slow-open", "completion cache %s is slow to open (locked by another process?): "
                           "running without it until it opens", self.directory)
        return self._cache

    def start(self) -> None:
        """Begin opening in the background (unless open or opening already)."""
        with self._lock:
            if self._opener is None and self._cache is None and not self._closed:
                self._start_open()

    def _start_open(self) -> threading.Thread:
        """(lock held) The opening thread, started."""
        self._waited = False
        opener = self._opener = threading.Thread(target=self._open_in_background, name="flint-cache-open",
                                                 daemon=True)
        opener.start()
        return opener

    def _open_in_background(self) -> None:
        try:
            cache = self._open_or_rebuild()
        except Exception as e:  # never raised to anyone: the cache is off until the retry
            cache = None
            log.error("completion cache %s: %s: %s", self.directory, type(e).__name__, e)
        with self._lock:
            self._opener = None
            if cache is None or self._closed:
                self._retry_at = time.monotonic() + RETRY_S
                if cache is not None:
                    with contextlib.suppress(Exception):
                        cache.close()
                return
            self._cache = cache
            self._local = _ThreadTimeout()
            self._checked = time.monotonic()

    def _open(self) -> diskcache.Cache:
        """``open_cache`` here, remembering which database file it opened."""
        cache = open_cache(self.directory, self.size_mb, TIMEOUT_S)
        self._inode = inode_of(self._db)
        return cache

    def _open_or_rebuild(self) -> diskcache.Cache | None:
        """Runs on the opening thread."""
        suspect, self._damaged_inode = self._damaged_inode, None
        bad = inode_of(self._db)
        if suspect is not None and suspect == bad and not damaged_on_disk(self._db, TIMEOUT_S):
            suspect = None  # a query said "damaged" but the database checks out: not rebuilt
        if suspect is None or suspect != bad:
            try:
                return self._open()
            except Exception as e:
                kind = failure_kind(e)
                if isinstance(e, Foreign):
                    self._warn("foreign", "completion cache off: %s", e)
                    return None
                if is_read_only(e, self.directory):
                    return self._open_read_only(e)
                if kind == "busy":
                    self._warn("busy-open", "completion cache %s is locked by another process: running "
                               "without it, retrying in %.0f s", self.directory, RETRY_S)
                    return None
                # SQLite reports a truncated file as an I/O error: the file itself decides
                if kind == "env" and not (isinstance(e, sqlite3.DatabaseError)
                                            and damaged_on_disk(self._db, TIMEOUT_S)):
                    self._warn("env-open", "completion cache %s cannot be opened (%s: %s): running without "
                               "it, retrying in %.0f s", self.directory, type(e).__name__, e, RETRY_S)
                    return None
                why = f"{type(e).__name__}: {e}"
        else:
            why = "a query reported the database damaged"
        return self._rebuild(why, bad)

    def _open_read_only(self, why: BaseException) -> ReadOnlyCache | None:
        """(the opening thread) The cache as it is, read-only: served, never written, never rebuilt."""
        try:
            cache = ReadOnlyCache(self.directory, TIMEOUT_S)
        except Exception as e:
            self._warn("env-open", "completion cache %s is read-only (%s) and cannot be read (%s: %s): running "
                       "without it", self.directory, why, type(e).__name__, e)
            return None
        self.read_only, self._inode = True, inode_of(self._db)
        log.warning("completion cache %s is read-only (%s): serving its %d entries, storing none", self.directory,
                    why, max(0, len(cache) - 1))
        return cache

    def _failed(self, cache: Any, e: BaseException, op: str) -> None:
        kind = failure_kind(e)
        if kind == "busy":
            return
        self.stats["errors"] += 1
        if kind == "env" and "i/o" in str(e).lower():
            kind = "damaged"  # maybe a short read of a truncated file: checked on the opening thread first
        if self.read_only:
            kind = "env"  # a read-only cache is never rebuilt: a bad read is a miss
        if kind == "env":  # a full disk, a read-only file: the entries are fine; pause writes, keep reading
            if op != "get":
                self._writes_at = time.monotonic() + WRITE_PAUSE_S
            self._warn(f"env-{op}", "completion cache %s: %s failed (%s: %s): %s", self.directory, op,
                       type(e).__name__, e, "writes paused for a while" if op != "get" else "a miss")
            return
        with self._lock:
            if self._cache is not cache:
                return  # another thread dealt with it already
            self._cache = None
            self._damaged_inode = self._inode
            self._retry_at = 0.0
            self._checked = 0.0
        with contextlib.suppress(Exception):
            diskcache.Cache.close(cache)
        log.warning("completion cache %s: %s reported damage (%s: %s): checking it", self.directory, op,
                    type(e).__name__, e)

    def _rebuild(self, why: str, bad_inode: int | None) -> diskcache.Cache | None:
        """Remove Flint's own database files (nothing else) and start empty; runs on the opening thread.

        ``bad_inode``: the database file found damaged. If the file is another one by the time the lock
        is ours, another process rebuilt it already: its fresh cache is used as it is."""
        if not (self.directory / OWNER_FILE).exists():
            self._warn("foreign", "completion cache off: %s looks damaged (%s) but Flint did not create it: "
                       "left alone (point FLINT_CACHE_DIR elsewhere or remove it yourself)", self._db, why)
            return None
        try:
            with file_lock(self.directory / "cache.db.lock", budget_s=2.0) as locked:
                if not locked:
                    self._warn("busy-open", "completion cache %s is being rebuilt by another process: running "
                               "without it for now", self.directory)
                    return None
                now_inode = inode_of(self._db)
                if now_inode is not None and now_inode != bad_inode:
                    with contextlib.suppress(Exception):
                        return self._open()
                log.warning("completion cache %s is damaged (%s): removing its database files and "
                            "starting empty", self.directory, why)
                self.stats["rebuilds"] += 1
                remove_db_files(self.directory)
                return self._open()
        except Exception as e:  # a cache that cannot even be rebuilt (disk full, permissions): off
            self._warn("rebuild", "completion cache %s unavailable: %s: %s", self.directory, type(e).__name__, e)
            self.stats["errors"] += 1
            return None

