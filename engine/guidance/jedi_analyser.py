"""Python names through jedi: the names in scope, the attributes after ``obj.``, a call's keyword arguments.

One ``jedi.Project`` per workspace root (``add_root``; a file under no root gets one for its folder), with
the user's Python environment when given, else the running interpreter's (jedi inspects compiled modules
in a subprocess of that interpreter, never in ours).

Time: jedi cannot be interrupted, so each question runs on one worker thread and the caller waits only
until its deadline; a late answer still lands in the cache, where the next step of the same name (the
same position) finds it. A newer question cancels the older ones not started yet. Files over
``max_chars`` are not analysed (jedi re-reads a changed module whole: ~50-100 ms at 5,000 lines here).
Flow analysis is off: jedi then does not drop names assigned in branches it judges unreachable, which
costs 4x on long modules and only ever makes the list longer (a monitor must not forbid a valid name).

Memory: answers in an LRU of ``cache_size`` entries keyed by (path, version, offset, hash of the source),
``max_projects`` projects, the last few ``jedi.Script`` objects (asking several positions of one text
reuses its inference state; a kept Script is used only while parso's tree of its path still is its text:
``reads_its_text``). parso keeps its own cache of parsed modules (it drops ones unused for 10
minutes once it holds 600).

Every failure (a broken file jedi cannot read, a missing environment, an exception inside jedi) is "no
candidates" (None), never an exception to the caller.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from engine.guidance.monitor import Candidate, Candidates

log = logging.getLogger(__name__)

MAX_CHARS = 400_000  # ~10,000 lines: past this jedi's re-read of the module costs a few hundred ms
_Key = tuple[str, int | None, int, int, int]
_frozen = False  # gc.freeze() done in this process (after jedi's first answer)


def freeze_once() -> None:
    """Move what the process holds after jedi's first answer out of the collector's reach (``gc.freeze``): jedi's
    builtins and typeshed caches, about 900,000 objects kept for the life of the process (parso's cache of the
    stubs). A full collection runs whenever the heap has grown by a quarter and scans every tracked object, with
    every thread stopped: 0.3-1 s each over those caches, at a keystroke or in a rename's first offer
    (docs/benchmarks/next_edit.md). The garbage frozen with them (a Script's inference state, ~5%) is kept, once."""
    global _frozen
    if not _frozen and _builtins_read():
        _frozen = True
        gc.freeze()


def _builtins_read() -> bool:
    """Has jedi read the builtins' stub yet (parso's cache holds it)? Before that there is little to freeze."""
    module = sys.modules.get("parso.cache")
    cache = vars(module).get("parser_cache") or {} if module is not None else {}
    return any(str(path).endswith("builtins.pyi") for modules in list(cache.values()) for path in list(modules))


def line_col(source: str, offset: int) -> tuple[int, int]:
    """jedi's (1-based line, 0-based column in code points) of a string offset."""
    line = source.count("\n", 0, offset) + 1
    return line, offset - (source.rfind("\n", 0, offset) + 1)


def _partial_before(source: str, offset: int) -> str:
    i = offset
    while i > 0 and (source[i - 1].isalnum() or source[i - 1] == "_"):
        i -= 1
    return source[i:offset]


def _default_root(path: str) -> str:
    import jedi

    try:
        return str(jedi.get_default_project(os.path.dirname(path)).path)
    except Exception:
        return os.path.dirname(path)


def _workspace_venv(root: str) -> str | None:
    """The workspace's own virtual environment (``.venv`` or ``venv`` at its root), if it has one."""
    for name in (".venv", "venv"):
        if os.path.isfile(os.path.join(root, name, "pyvenv.cfg")):
            return os.path.join(root, name)
    return None


def reads_its_text(script: Any) -> bool:
    """Whether a kept ``jedi.Script`` still reads the text it was made from. parso caches one tree per path
    and its diff parser updates that tree in place when another text of the path is parsed (a newer version
    of the document, the checker's completed file, a rename's question): a Script of the older text would
    then answer from the newer one. parso saves a new cache entry whenever it does so, so the Script is
    good while the entry for its path still holds its tree and its lines."""
    try:
        from parso.cache import parser_cache

        item = parser_cache.get(script._inference_state.grammar._hashed, {}).get(script.path)
        return item is not None and item.node is script._module_node and item.lines == script._code_lines
    except Exception:  # another parso or jedi: never reuse
        return False


def _then_freeze(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    finally:
        freeze_once()


class JediAnalyser:
    """``monitor.Analyser`` for Python. Thread-safe: every jedi call runs on its own worker thread (a caller
    waits ``monitor.DEFAULT_BUDGET_S`` per step by default)."""

    def __init__(self, environment: str | None = None, *, max_chars: int = MAX_CHARS, cache_size: int = 256,
                 max_projects: int = 8, flow_analysis: bool = False) -> None:
        self.environment = environment  # a venv folder or a python executable; None: this interpreter
        self.max_chars = max_chars
        self.cache_size = cache_size
        self.max_projects = max_projects
        self.flow_analysis = flow_analysis
        self._roots: dict[str, str | None] = {}  # workspace root -> its environment (None: the default)
        self._projects: OrderedDict[str, Any] = OrderedDict()  # root -> jedi.Project, or None when broken
        self._scripts: OrderedDict[tuple[str, int], Any] = OrderedDict()
        self._cache: OrderedDict[_Key, Candidates | None] = OrderedDict()
        self._pending: dict[_Key, Future[Candidates | None]] = {}
        self._lock = threading.Lock()
        self._worker: int | None = None  # the worker thread's ident, once it started
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="flint-jedi", initializer=self._started)
        self.stats = {"asked": 0, "cached": 0, "late": 0, "failed": 0, "skipped": 0, "ms_max": 0.0,
                      "ms_last": 0.0}

    # ---- configuration ----
    def add_root(self, root: str, environment: str | None = None) -> None:
        """A workspace root; files under it share its project (and ``environment``, else the default)."""
        root = os.path.abspath(root)
        with self._lock:
            self._roots[root] = environment
            self._projects.pop(root, None)

    def idle(self, timeout: float = 30.0) -> bool:
        """Wait until the questions asked so far are answered (jedi is not thread-safe: another jedi user in
        this process waits for this before it runs). Whether the worker is idle."""
        try:
            self._pool.submit(lambda: None).result(timeout=timeout)
            return True
        except (FutureTimeout, RuntimeError):
            return False

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def forget(self, path: str) -> None:
        """A closed document's parse out of parso's cache and its Scripts gone (on the worker): parso keeps
        every tree it made for ten minutes and more, and each full collection of the collector scans them
        all with every thread stopped (a hundred large modules: about a second, in a next edit's answer)."""
        path = os.path.abspath(path)

        def drop() -> None:
            from parso.cache import parser_cache

            for by_path in list(parser_cache.values()):
                by_path.pop(Path(path), None)  # (jedi hands parso its paths as Path)
                by_path.pop(path, None)
            for key in [k for k in self._scripts if k[0] == path]:
                del self._scripts[key]

        with contextlib.suppress(RuntimeError):  # closed: the process is going
            self._pool.submit(drop)

    def _started(self) -> None:
        self._worker = threading.get_ident()

    def on_worker(self) -> bool:
        """Whether the caller runs on the analyser's worker thread (what it would submit runs there at once)."""
        return threading.get_ident() == self._worker

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """``fn(*args)`` on the analyser's worker thread, after the questions asked before: jedi only ever
        runs there (it is not thread-safe), whoever asks (next edits' rename and references too)."""
        return self._pool.submit(_then_freeze, fn, *args)

    # ---- the question ----
    def names_at(self, source: str, offset: int, deadline: float, *, path: str | None = None,
                 version: int | None = None) -> Candidates | None:
        """The names jedi completes at ``offset`` (ask at a name's start: then the list does not depend on
        what is typed after it, and every step of that name hits the cache). None past ``deadline``
        (``time.monotonic()``), for a huge or unreadable file, or without a usable environment."""
        if not 0 <= offset <= len(source):
            return None
        if len(source) > self.max_chars:
            self.stats["skipped"] += 1
            return None
        path = os.path.abspath(path) if path else os.path.abspath("untitled.py")
        key: _Key = (path, version, offset, len(source), hash(source))
        with self._lock:
            self.stats["asked"] += 1
            if key in self._cache:
                self._cache.move_to_end(key)
                self.stats["cached"] += 1
                return self._cache[key]
            fut = self._pending.get(key)
            if fut is None:
                for k, f in list(self._pending.items()):  # the caller has moved on from older questions
                    if f.cancel():
                        del self._pending[k]
                fut = self.submit(self._run, key, source, offset, path)
                self._pending[key] = fut
        try:
            return fut.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            self.stats["late"] += 1
            return None
        except CancelledError:
            return None

    def _run(self, key: _Key, source: str, offset: int, path: str) -> Candidates | None:
        t0 = time.perf_counter()
        try:
            res = self._complete(source, offset, path)
        except Exception as e:  # jedi on arbitrary text: any failure is "no opinion"
            log.debug("jedi failed at %s:%d: %r", path, offset, e)
            self.stats["failed"] += 1
            res = None
        ms = (time.perf_counter() - t0) * 1000
        with self._lock:
            self.stats["ms_last"] = ms
            self.stats["ms_max"] = max(self.stats["ms_max"], ms)
            self._pending.pop(key, None)
            self._cache[key] = res
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return res

    def call(self, source: str, path: str | None, fn: Callable[[Any], Any], deadline: float,
             late: Callable[[Any], None] | None = None) -> Any:
        """``fn(script)`` on the worker thread, ``script`` a jedi Script of ``source`` in the project of
        ``path`` (a kept one while it still reads that text). None past ``deadline``, for a huge file,
        without a usable environment, or when jedi fails; a result that comes after the deadline goes to
        ``late`` (jedi cannot be interrupted: the work is not lost). Questions asked before are not
        cancelled: this runs after them."""
        if len(source) > self.max_chars:
            self.stats["skipped"] += 1
            return None
        path = os.path.abspath(path) if path else os.path.abspath("untitled.py")

        def run() -> Any:
            try:
                script = self._script(source, path)
                return None if script is None else fn(script)
            except Exception as e:  # jedi on arbitrary text: any failure is "no answer"
                log.debug("jedi call failed for %s: %r", path, e)
                self.stats["failed"] += 1
                return None

        try:
            fut = self.submit(run)
            return fut.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            self.stats["late"] += 1
            if late is not None:
                fut.add_done_callback(lambda f: None if f.cancelled() else late(f.result()))
            return None
        except (CancelledError, RuntimeError):  # RuntimeError: the pool was shut down
            return None

    # ---- jedi (worker thread only) ----
    def _complete(self, source: str, offset: int, path: str) -> Candidates | None:
        script = self._script(source, path)
        if script is None:
            return None
        line, col = line_col(source, offset)
        seen: set[str] = set()
        items = []
        for c in script.complete(line, col):
            if c.type == "path" or c.name in seen:
                continue
            seen.add(c.name)
            items.append(Candidate(c.name, c.type))
        return Candidates(tuple(items), partial=_partial_before(source, offset))

    def _script(self, source: str, path: str) -> Any:
        import jedi

        skey = (path, hash(source))
        script = self._scripts.get(skey)
        if script is not None and reads_its_text(script):
            self._scripts.move_to_end(skey)
            return script
        project = self._project(path)
        if project is None:
            return None
        script = jedi.Script(source, path=path, project=project)
        if not self.flow_analysis:
            with contextlib.suppress(AttributeError):  # jedi's private switch (absent: jedi decides)
                script._inference_state.flow_analysis_enabled = False
        self._scripts[skey] = script
        while len(self._scripts) > 2:
            self._scripts.popitem(last=False)
        return script

    def _project(self, path: str) -> Any:
        import jedi

        with self._lock:
            roots = [r for r in self._roots if path == r or path.startswith(r.rstrip(os.sep) + os.sep)]
            root = max(roots, key=len) if roots else None
            env = self._roots.get(root, self.environment) if root is not None else self.environment
        if root is None:  # under no workspace root: the folder jedi would take (a .git, setup.py... above)
            root = _default_root(path)
        env = env or _workspace_venv(root)
        if root in self._projects:
            self._projects.move_to_end(root)
            return self._projects[root]
        try:
            project = jedi.Project(root, environment_path=env or sys.executable)
            project.get_environment()  # a missing or broken environment fails here, once per root
        except Exception as e:
            log.warning("no Python environment for %s (%s): %r", root, env, e)
            project = None
        self._projects[root] = project
        while len(self._projects) > self.max_projects:
            self._projects.popitem(last=False)
        return project


_shared: JediAnalyser | None = None
_shared_lock = threading.Lock()


def forget_parsed(path: str) -> None:
    """``JediAnalyser.forget`` on the process's analyser, if it was made."""
    if _shared is not None:
        _shared.forget(path)


def shared_analyser() -> JediAnalyser:
    """The process's JediAnalyser (the running interpreter's environment), for every caller that brings
    none: guidance, the context's "jedi" source and next edits. jedi and parso are not thread-safe, so a
    process asks all its questions on this one analyser's worker thread."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = JediAnalyser()
        return _shared
