"""The on-disk completion cache: one directory shared by every Flint server on the machine.

Keyed by model id, generation parameters (``GenParams.key()``) and the prompt window exactly as the
engine windows it (prefix **and** suffix, through ``engine.prompt.clip_window``): two prompts the
engine would see as the same text share an entry, anything else that changes the output does not.

Built on diskcache (SQLite in WAL mode, one connection per thread and process):

- Shared: several server processes open the same directory; SQLite's locking serialises writers and
  WAL lets readers run beside a writer. A lookup that waits on another process's lock longer than
  ``TIMEOUT_S`` is a miss, never a stall of the editor.
- Crash-safe: an entry is one SQLite transaction, so a process killed mid-write (``kill -9``) leaves
  either the whole entry or none of it; the next open replays or discards the WAL.
- Size-capped: ``size_mb`` is diskcache's ``size_limit``; every write evicts the oldest entries while
  the database is over it (auto-vacuum returns freed pages, so the file shrinks too).
- Corruption: a database that does not open, a query that reports a malformed image, or a value that
  does not decode to what was stored is detected; the directory is moved aside and rebuilt empty
  (under a lock file, so two processes do not rebuild it twice). Nothing here raises to the caller:
  a broken cache is an empty cache.

Values are our own JSON (not pickle): a format version, the key they were stored under (a garbled or
misplaced row is rejected), and per variant the text, token ids and finish reason.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import diskcache

from . import paths
from .prompt import clip_window
from .types import Completion, GenParams

log = logging.getLogger("flint.cache")

FORMAT = 1  # bump when the key material or the value layout changes: old entries stop matching
MARKER_KEY = "flint:format"
TIMEOUT_S = 0.5  # SQLite busy timeout: a lock held longer by another process is a miss
INODE_CHECK_S = 1.0  # how often to notice that another process rebuilt the directory
RETRY_S = 5.0  # a cache that could not be opened is retried this much later (it is off meanwhile)
MIN_SIZE_MB = 1
# finish reasons that mean "the model finished on its own terms": the same prompt gives the same text.
# A generation cut by a deadline or a cancel is partial, and is not stored.
COMPLETE_REASONS = frozenset({"eos", "length", "lines", "stop"})


def default_dir() -> Path:
    """FLINT_CACHE_DIR, else FLINT_HOME/cache/completions."""
    env = os.environ.get("FLINT_CACHE_DIR")
    return Path(env).expanduser() if env else paths.cache_dir() / "completions"


def cache_key(model_id: str, params: GenParams, prefix: str, suffix: str,
              max_prefix_chars: int, max_suffix_chars: int) -> str:
    """The key for a prompt: the windows the engine would use, not the raw strings around the cursor."""
    p, s = clip_window(prefix, suffix, max_prefix_chars, max_suffix_chars)
    material = json.dumps([FORMAT, model_id, list(params.key()), p, s], ensure_ascii=False)
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()


def is_complete(comps: Sequence[Completion]) -> bool:
    return bool(comps) and all(c.finish_reason in COMPLETE_REASONS for c in comps)


def encode(key: str, comps: Sequence[Completion], gen_ms: float = 0.0) -> bytes:
    return json.dumps({"v": FORMAT, "k": key, "ms": round(gen_ms, 1),
                       "c": [{"t": c.text, "i": list(c.token_ids), "f": c.finish_reason} for c in comps]},
                      ensure_ascii=False).encode("utf-8", "surrogatepass")


def decode(key: str, data: Any) -> list[Completion] | None:
    """Completions from a stored value, or None when the value is not what ``put`` wrote for ``key``."""
    try:
        if not isinstance(data, bytes | bytearray):
            return None
        obj = json.loads(bytes(data).decode("utf-8", "surrogatepass"))
        if not isinstance(obj, dict) or obj.get("v") != FORMAT or obj.get("k") != key:
            return None
        out = []
        for i, c in enumerate(obj["c"]):
            text, ids, finish = c["t"], c["i"], c["f"]
            if not isinstance(text, str) or not isinstance(finish, str) or not isinstance(ids, list) or \
                    not all(isinstance(t, int) for t in ids):
                return None
            out.append(Completion(text=text, token_ids=ids, finish_reason=finish, variant=i, source="disk"))
        return out or None
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


def _transient(e: BaseException) -> bool:
    """Contention (another process holds the lock), not damage."""
    if isinstance(e, diskcache.Timeout):
        return True
    msg = str(e).lower()
    return isinstance(e, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # Windows: no cross-process lock; a double rebuild is harmless, only wasteful
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class CompletionCache:
    """Thread-safe and process-safe. ``get``/``put`` never raise; ``stats`` counts what happened."""

    def __init__(self, directory: Path | str | None = None, size_mb: int = 256) -> None:
        self.directory = Path(directory) if directory is not None else default_dir()
        self.size_mb = max(MIN_SIZE_MB, int(size_mb))
        self._lock = threading.Lock()
        self._cache: diskcache.Cache | None = None
        self._inode: int | None = None
        self._checked = 0.0
        self._retry_at = 0.0  # after a failed open, wait before trying again
        self.stats = {"hits": 0, "misses": 0, "puts": 0, "rejected": 0, "rebuilds": 0, "errors": 0}

    # ---- public ----------------------------------------------------------------------------------
    def get(self, key: str) -> list[Completion] | None:
        cache = self._current()
        if cache is None:
            self.stats["misses"] += 1
            return None
        try:
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
                cache.delete(key, retry=False)
            self.stats["misses"] += 1
            return None
        self.stats["hits"] += 1
        return comps

    def put(self, key: str, comps: Sequence[Completion], gen_ms: float = 0.0) -> bool:
        """Store complete generations (partial ones are refused). True when written."""
        if not is_complete(comps):
            return False
        cache = self._current()
        if cache is None:
            return False
        try:
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
        cache = self._current()
        if cache is None:
            return False
        try:
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
            if self._cache is not None:
                with contextlib.suppress(Exception):
                    self._cache.close()
            self._cache = None

    # ---- internals -------------------------------------------------------------------------------
    @property
    def _db(self) -> Path:
        return self.directory / diskcache.core.DBNAME

    def _current(self) -> diskcache.Cache | None:
        """The open cache, (re)opening it when needed: first use, after a rebuild here or elsewhere."""
        now = time.monotonic()
        cache = self._cache
        if cache is not None and now - self._checked < INODE_CHECK_S:
            return cache
        with self._lock:
            self._checked = now
            if self._cache is not None and self._inode is not None and self._inode == _inode(self._db):
                return self._cache
            if self._cache is not None:  # the directory was rebuilt by another process: follow it
                log.info("cache %s was replaced by another process: reopening", self.directory)
                with contextlib.suppress(Exception):
                    self._cache.close()
                self._cache = None
            if now < self._retry_at:
                return None
            self._cache = self._open_or_rebuild()
            if self._cache is None:
                self._retry_at = now + RETRY_S
            return self._cache

    def _open(self) -> diskcache.Cache:
        self.directory.mkdir(parents=True, exist_ok=True)
        cache = diskcache.Cache(str(self.directory), timeout=TIMEOUT_S,
                                size_limit=self.size_mb * 2**20,
                                # by age of storage: a lookup stays a plain read (LRU would make every
                                # hit a write transaction, contended between server processes)
                                eviction_policy="least-recently-stored",
                                cull_limit=10)
        marker = cache.get(MARKER_KEY, default=None, retry=True)
        if marker is None:
            cache.set(MARKER_KEY, FORMAT, retry=True)
        elif marker != FORMAT:
            raise sqlite3.DatabaseError(f"cache format {marker!r}, expected {FORMAT}")
        cache.reset("size_limit", self.size_mb * 2**20)  # the cap is the newest opener's setting
        self._inode = _inode(self._db)
        return cache

    def _open_or_rebuild(self) -> diskcache.Cache | None:
        bad = _inode(self._db)
        try:
            return self._open()
        except Exception as e:
            if _transient(e):
                log.info("cache %s busy at open: %s", self.directory, e)
                return None
            return self._rebuild(f"open failed: {type(e).__name__}: {e}", bad)

    def _failed(self, cache: Any, e: BaseException, op: str) -> None:
        if _transient(e):
            return
        self.stats["errors"] += 1
        with self._lock:
            if id(self._cache) != id(cache):
                return  # another thread already replaced it
            with contextlib.suppress(Exception):
                cache.close()
            self._cache = self._rebuild(f"{op} failed: {type(e).__name__}: {e}", self._inode)

    def _rebuild(self, why: str, bad_inode: int | None) -> diskcache.Cache | None:
        """Move the damaged directory aside and start empty. Called with ``self._lock`` held.

        ``bad_inode``: the database file found damaged. If the file is another one by the time the lock
        is ours, another process rebuilt the directory already: its fresh cache is used as it is."""
        lock = self.directory.with_name(self.directory.name + ".lock")
        try:
            with _file_lock(lock):
                now_inode = _inode(self._db)
                if now_inode is not None and now_inode != bad_inode:
                    with contextlib.suppress(Exception):
                        return self._open()
                log.warning("completion cache %s is damaged (%s): rebuilding it empty", self.directory, why)
                self.stats["rebuilds"] += 1
                if self.directory.exists():
                    aside = self.directory.with_name(f"{self.directory.name}.corrupt-{os.getpid()}-{time.time_ns()}")
                    try:
                        os.replace(self.directory, aside)
                    except OSError:
                        aside = self.directory
                    shutil.rmtree(aside, ignore_errors=True)
                return self._open()
        except Exception as e:  # a cache that cannot even be rebuilt (disk full, permissions): off
            log.error("completion cache %s unavailable: %s", self.directory, e)
            self.stats["errors"] += 1
            return None


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None
