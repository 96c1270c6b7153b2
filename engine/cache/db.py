"""The cache's database file (engine/cache/disk.py owns the cache): opening it with Flint's settings and
marker, what kind of trouble a failure is (another process's lock, damage a rebuild may cure, or the
machine's: full disk, I/O, permissions), whether a database Flint did not mark is one it may adopt, whether
a file SQLite calls damaged really is, a cross-process lock for a rebuild, and removing Flint's own files
(nothing else). Checks read on read-only connections; the busy timeout (``timeout``) is the cache's.

A cache on a read-only disk (or in a directory the user may not write) is not damage: ``ReadOnlyCache``
serves diskcache's table on a read-only connection (``mode=ro``; ``immutable=1`` when SQLite cannot even
open its shared-memory file there), and never writes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import diskcache

from engine.cache.entries import FORMAT

DISKCACHE_TABLES = frozenset({"Settings", "Cache"})
MARKER_KEY = "flint:format"
OWNER_FILE = "FLINT_CACHE"  # the marker that this directory's cache.db is Flint's
DB_FILES = ("cache.db", "cache.db-wal", "cache.db-shm", "cache.db-journal")  # all Flint ever removes


class Damaged(Exception):
    """The database is damaged or is not Flint's format: a rebuild (of Flint's own files) is warranted."""


class Foreign(Exception):
    """The directory holds a database Flint did not create: left alone, the cache stays off."""


def open_cache(directory: Path, size_mb: int, timeout: float) -> diskcache.Cache:
    """Open the cache in ``directory`` (creating it if there is none). Raises Foreign for a database that is
    not Flint's, Damaged for a damaged one, anything else for trouble that a rebuild would not cure."""
    directory.mkdir(parents=True, exist_ok=True)
    db = directory / diskcache.core.DBNAME
    owner = directory / OWNER_FILE
    if db.exists() and not owner.exists():
        check_adoptable(db, timeout)
    cache = diskcache.Cache(str(directory), timeout=timeout,
                            size_limit=size_mb * 2**20,
                            # by age of storage: a lookup stays a plain read (LRU would make every
                            # hit a write transaction, contended between server processes)
                            eviction_policy="least-recently-stored",
                            cull_limit=10,
                            # values always inside the database: no value files, so the database
                            # files are all Flint ever has to remove
                            disk_min_file_size=2**30)
    try:
        marker = cache.get(MARKER_KEY, default=None, retry=False)
        if marker is None:
            cache.set(MARKER_KEY, FORMAT, retry=False)
        elif marker != FORMAT:
            raise Damaged(f"cache format {marker!r}, expected {FORMAT}")
        cache.reset("size_limit", size_mb * 2**20)  # the cap is the newest opener's setting
        if not owner.exists():
            owner.write_text("Flint's completion cache. Flint only ever removes " + ", ".join(DB_FILES)
                             + " in this directory.\n")
    except BaseException:
        with contextlib.suppress(Exception):
            cache.close()
        raise
    return cache


def is_read_only(e: BaseException, directory: Path) -> bool:
    """Is ``e`` the disk or the directory refusing writes (EROFS, EACCES, SQLite's "readonly database", or a
    failure in a directory on a read-only mount or without write permission)?"""
    if isinstance(e, PermissionError) or (isinstance(e, OSError) and e.errno == errno.EROFS):
        return True
    if isinstance(e, sqlite3.OperationalError) and "readonly" in str(e).lower().replace("-", ""):
        return True
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_RDONLY) or not os.access(directory, os.W_OK)
    except OSError:
        return False


class ReadOnlyCache:
    """Flint's cache table, read on a read-only connection: the part of ``diskcache.Cache`` that ``get``,
    ``volume`` and ``len`` need. Thread-safe (one connection, one lock: a lookup is a single query)."""

    def __init__(self, directory: Path, timeout: float) -> None:
        db = directory / diskcache.core.DBNAME
        if not db.exists():
            raise FileNotFoundError(f"{db} does not exist")
        con: sqlite3.Connection | None = None
        marker: list = []
        for flags in ("mode=ro", "immutable=1"):  # (immutable: -shm cannot be made here; no writer can be either)
            try:
                con = sqlite3.connect(f"file:{db}?{flags}", uri=True, timeout=timeout, check_same_thread=False,
                                      isolation_level=None)
                marker = con.execute("SELECT value FROM Cache WHERE key = ? AND raw = 1", (MARKER_KEY,)).fetchall()
                break
            except sqlite3.OperationalError:
                if con is not None:
                    con.close()
                if flags == "immutable=1":
                    raise
        assert con is not None  # the loop either broke with a connection or raised
        if marker != [(FORMAT,)]:
            con.close()
            raise Foreign(f"{db} is read-only and not in Flint's format {FORMAT}: left alone")
        self._con: sqlite3.Connection = con
        self._lock = threading.Lock()
        self._disk = diskcache.Disk(str(directory))

    def get(self, key: str, default: object = None, retry: bool = False) -> object:
        with self._lock:
            rows = self._con.execute("SELECT mode, filename, value FROM Cache WHERE key = ? AND raw = 1 AND "
                                     "(expire_time IS NULL OR expire_time > ?)", (key, time.time())).fetchall()
        if not rows:
            return default
        mode, filename, value = rows[0]
        return self._disk.fetch(mode, filename, value, False)

    def __len__(self) -> int:
        with self._lock:
            return int(self._con.execute("SELECT COUNT(*) FROM Cache").fetchone()[0])

    def volume(self) -> int:
        with self._lock:
            return int(self._con.execute("PRAGMA page_count").fetchone()[0]) * \
                int(self._con.execute("PRAGMA page_size").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._con.close()


def remove_db_files(directory: Path) -> None:
    """Remove Flint's database files in ``directory`` (``DB_FILES``; nothing else)."""
    for name in DB_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(directory / name)


def failure_kind(e: BaseException) -> str:
    """``busy`` (another process holds the lock), ``damaged`` (a rebuild may help) or ``env`` (full disk,
    I/O error, permissions, read-only: the database is fine, the machine is not; a rebuild would not help)."""
    if isinstance(e, diskcache.Timeout):
        return "busy"
    if isinstance(e, Damaged):
        return "damaged"
    msg = str(e).lower()
    if isinstance(e, sqlite3.OperationalError):
        return "busy" if ("locked" in msg or "busy" in msg) else "env"
    if isinstance(e, sqlite3.DatabaseError) and ("malformed" in msg or "not a database" in msg):
        return "damaged"
    return "env"


@contextlib.contextmanager
def file_lock(path: Path, budget_s: float) -> Iterator[bool]:
    """An exclusive lock on ``path``, waited for at most ``budget_s``: yields whether it was obtained."""
    try:
        import fcntl
    except ImportError:  # Windows: no cross-process lock; a double rebuild is harmless, only wasteful
        yield True
        return
    with open(path, "a") as f:
        deadline = time.monotonic() + budget_s
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    yield False
                    return
                time.sleep(0.02)
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def check_adoptable(db: Path, timeout: float) -> None:
    """A cache.db without Flint's marker file: Flint adopts it only when it is a diskcache database (an
    older Flint made it); anything else is someone else's file. Opened read-only: nothing is written."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=timeout)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
    except sqlite3.OperationalError:
        raise  # locked, unreadable: the caller says so and retries
    except sqlite3.DatabaseError as e:
        raise Foreign(f"{db} is not a Flint cache ({e}): left alone") from None
    if not tables <= DISKCACHE_TABLES:
        raise Foreign(f"{db} is another program's database (tables {', '.join(sorted(tables))}): left alone")


def damaged_on_disk(db: Path, timeout: float) -> bool:
    """True when the operating system reads the whole file fine but SQLite finds it damaged."""
    try:
        with open(db, "rb") as f:
            while f.read(1 << 20):
                pass
    except FileNotFoundError:
        return False
    except OSError:
        return False  # the machine's trouble (a failing disk), not the file's: a rebuild would not help
    return not quick_check(db, timeout)


def quick_check(db: Path, timeout: float) -> bool:
    """SQLite's own structural check on a fresh read-only connection: True when the database is sound
    (or cannot be checked now because another process holds a lock)."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=timeout)
        try:
            rows = con.execute("PRAGMA quick_check").fetchall()
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        # locked now is no evidence of damage; a short read or "malformed" is
        return failure_kind(e) == "busy"
    return rows == [("ok",)]


def inode_of(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None

