"""The workspace's Python files on disk that may refer to a name (issue 50: call sites and references in files
that are not open).

workspace.py asks jedi about the other documents one occurrence at a time; that is too slow for every file
of a workspace, so this module finds the few worth asking: a plain text search for the name as a word,
before any parsing. The walk is bounded (``MAX_FILES`` Python files, ``MAX_FILE_BYTES`` a file,
``MAX_CANDIDATES`` kept), stays inside the workspace folders (symbolic links are not followed), skips
what is not the user's code (version control, virtual environments, ``node_modules``, caches, build
output) and the documents that are open (their unsaved text is what counts, and the caller has it), and
stops at the deadline or when ``cancelled()`` says the user moved on. Files that import the name come
first, then those that mention the edited module's name, then the rest (a package may re-export it): a
common name (``decode``) is a word in many files, and jedi has time for only some of them.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".bzr", "__pycache__", "node_modules", ".venv", "venv", ".env", "env", ".tox",
    ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs", "site-packages", "dist-packages",
    "build", "dist", ".idea", ".vscode",
})
MAX_FILES = 20_000  # Python files looked at in one search (a 2,000-file workspace is searched whole)
MAX_FILE_BYTES = 400_000  # larger files are generated or data: not read (jedi's own bound, MAX_CHARS)
MAX_CANDIDATES = 48  # files handed to jedi: each costs a parse and a goto per occurrence


@dataclass
class Scan:
    """What one search did (the benchmark reads it; the log says it)."""

    files: int = 0  # Python files found under the roots
    read: int = 0  # files read (the rest: too large, open, or past the deadline)
    matched: int = 0  # files holding the name as a word
    seconds: float = 0.0
    stopped: str = ""  # "deadline", "cancelled", "max_files" or ""
    paths: list[str] = field(default_factory=list)  # the candidates kept, best first


@dataclass
class DiskSearch:
    """One computation's search: where (the workspace folders, ``roots``), the files not to read
    (``exclude``: the open documents' paths), ``cancelled`` (true once the work is for a text the user has
    left); and what it found: ``docs``, each candidate's text by its key (its file URI: the caller's plan
    needs the text its edits belong to), and ``scan``."""

    roots: tuple[str, ...]
    exclude: frozenset[str] = frozenset()
    cancelled: Callable[[], bool] = lambda: False
    max_candidates: int = MAX_CANDIDATES
    docs: dict[str, tuple[str, str]] = field(default_factory=dict)  # key -> (path, text)
    scan: Scan | None = None


def python_files(roots: Iterable[str], max_files: int = MAX_FILES) -> Iterator[str]:
    """The ``.py`` files under ``roots``, depth first, skipping ``SKIP_DIRS``, hidden directories, virtual
    environments (a ``pyvenv.cfg``) and symbolic links; each file once."""
    seen: set[str] = set()
    n = 0
    stack = [os.path.abspath(r) for r in reversed(list(roots)) if os.path.isdir(r)]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        if any(e.name == "pyvenv.cfg" for e in entries):
            continue
        dirs = []
        for e in entries:
            try:
                if e.is_symlink():
                    continue  # may lead outside the workspace
                if e.is_dir():
                    if e.name not in SKIP_DIRS and not e.name.startswith("."):
                        dirs.append(e.path)
                elif e.name.endswith(".py") and e.is_file() and e.path not in seen:
                    seen.add(e.path)
                    n += 1
                    yield e.path
                    if n >= max_files:
                        return
            except OSError:
                continue
        stack.extend(reversed(dirs))


def candidates(search: DiskSearch, name: str, module: str, deadline: float, max_files: int = MAX_FILES,
               imported: bool = False) -> tuple[list[tuple[str, str]], Scan]:
    """The files on disk that hold ``name`` as a word, as (path, text), at most ``search.max_candidates``:
    first those that import it by name or call it through its module (``module.name``), then those that
    mention ``module`` (the edited file's module name), then the rest; and what the search did. With
    ``imported`` only the first and those that import the module: a module-level function is called where
    it is imported (its name, or its module), while a method's callers hold only ``obj.name``."""
    t0 = time.monotonic()
    scan = Scan()
    word = re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")
    needle, mod = name.encode(), re.compile(rf"(?<!\w){re.escape(module)}(?!\w)") if module else None
    n, m = re.escape(name), re.escape(module or "\0")
    # an import naming it (``from m import name``, also in brackets over lines) or ``module.name``
    imports = re.compile(rf"\bimport\s*\([^)]*(?<!\w){n}(?!\w)|\bimport\b[^\n;(]*(?<!\w){n}(?!\w)|(?<!\w){m}\.{n}(?!\w)")
    # an import of the module itself (``import pkg.util as u``: ``u.name`` is a call of it)
    mod_import = re.compile(rf"\bimport\b[^\n;]*(?<!\w){m}(?!\w)|\bfrom\s+[\w.]*(?<!\w){m}\s+import\b")
    first: list[tuple[str, str]] = []
    second: list[tuple[str, str]] = []
    rest: list[tuple[str, str]] = []
    for path in python_files(search.roots, max_files):
        scan.files += 1
        if scan.files % 64 == 0 and (time.monotonic() > deadline or search.cancelled()):
            scan.stopped = "deadline" if time.monotonic() > deadline else "cancelled"
            break
        if path in search.exclude:
            continue
        try:
            if os.path.getsize(path) > MAX_FILE_BYTES:
                continue
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        scan.read += 1
        if needle not in data:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if not word.search(text):
            continue
        scan.matched += 1
        if imports.search(text):
            first.append((path, text))
        elif imported and not (mod_import.search(text) if module else False):
            continue
        else:
            (second if mod is not None and mod.search(text) else rest).append((path, text))
    else:
        if scan.files >= max_files:
            scan.stopped = "max_files"
    out = (first + second + rest)[:search.max_candidates]
    scan.paths = [p for p, _ in out]
    scan.seconds = time.monotonic() - t0
    return out, scan


def module_name(path: str) -> str:
    """The name an import of ``path`` ends with (``pkg/util.py`` -> ``util``, ``pkg/__init__.py`` -> ``pkg``)."""
    stem = os.path.splitext(os.path.basename(path))[0]
    return os.path.basename(os.path.dirname(path)) if stem == "__init__" else stem
