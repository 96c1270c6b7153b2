"""Repository context for the prompt: chunks of other open files, definitions of the names the current file
imports from the workspace, definitions in the current file too far from the cursor for the prompt window to
show, and recent edits as small diffs (issue 17).

Pure logic plus guarded file reads; no pygls. The server keeps one ``Workspace`` per session, tells it about
documents (``open`` / ``change`` / ``focus`` / ``close``) and, in idle time, asks ``gather`` for a
``ContextBlock``; engine/decoding/layout.py's ``comment_ids`` turns the block into the token ids put in front
of the file window (each chunk as comments at the start of the FIM prefix; ``context_ids``: Qwen2.5-Coder's
repository format, EngineConfig.context_layout).

This module owns the ``Workspace`` (the documents, the sources' chunks, ``gather``); the block, its chunk
selection and budgeting are engine/context/block.py, what the sources read (files, imports, edits)
engine/context/sources.py, outlines of definitions engine/context/definitions.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.context.block import (
    Chunk,
    ContextBlock,
    approx_tokens,
    merge_by_file,
    order_stably,
    select_chunks,
    split_chunks,
    words,
)
from engine.context.definitions import (
    file_definitions,
    parsed_definitions,
    regex_definitions,
    syntax_definitions,
)
from engine.context.resolved import definition_chunks
from engine.context.sources import (
    around_span,
    edit_diff,
    inside,
    names_near,
    read_text,
    resolve_imports,
    resolve_roots,
    usable_text,
)
from engine.syntax import grammar_for, language_for_path
from engine.text.window import MAX_PREFIX_CHARS, MAX_SUFFIX_CHARS

DEFAULT_BUDGET = 512  # tokens; see docs/benchmarks/context.md
DEFAULT_SOURCES = ("imports", "file", "open", "edits")
# "jedi" (opt-in, with a ``resolver``: engine/context/jedi_source.py): the definitions jedi finds for the names
# used near the cursor, in the workspace and the installed libraries; where it answers, the imports source's
# outline of the same definition goes


# ---- the session's view of the workspace -----------------------------------------------------------------
@dataclass
class _Doc:
    text: str
    base: str  # the text the pending edit diff starts from
    focused: float = 0.0
    edited: float = 0.0


def _outlined(file: Path) -> bool:
    """A file whose own definitions the ``file`` source can outline: Python, or a language with a grammar."""
    if file.suffix in (".py", ".pyi"):
        return True
    language = language_for_path(file.name)
    return language is not None and grammar_for(language) is not None


@dataclass
class Workspace:
    """Documents the user has open, their recent edits, and the workspace folders imports resolve in.

    The session's thread reports documents; ``gather`` may run on another thread (the engine's worker, in
    idle time): it works on a snapshot taken under a lock."""

    roots: list[Path]
    budget: int = DEFAULT_BUDGET
    sources: tuple[str, ...] = DEFAULT_SOURCES
    max_edits: int = 4
    docs: dict[Path, _Doc] = field(default_factory=dict)
    edits: list[tuple[float, Path, str]] = field(default_factory=list)  # (time, file, diff), newest last
    clock: Callable[[], float] = time.monotonic
    resolver: Any = None  # the "jedi" source's JediContext (definitions(file, text, offset)), if any

    def __post_init__(self) -> None:
        self.roots = [Path(r) for r in self.roots]
        self._real = resolve_roots(self.roots)
        self._lock = threading.Lock()
        # a module's definitions by (file, text hash): parsing a big module costs tens of ms
        self._defs: dict[tuple[Path, int], dict[str, tuple[int, str]] | None] = {}

    def set_roots(self, roots: Iterable[Path]) -> None:
        """The workspace folders (the client's, from initialize) imports resolve in."""
        with self._lock:
            self.roots = [Path(r) for r in roots]
            self._real = resolve_roots(self.roots)
            self._defs.clear()

    def text(self, file: Path) -> str | None:
        """An open document's current text (a snapshot), or None when it is not open."""
        with self._lock:
            d = self.docs.get(Path(file))
            return d.text if d is not None else None

    def relpath(self, file: Path) -> str:
        for r in list(self.roots) + list(self._real):
            if r in file.parents:
                return file.relative_to(r).as_posix()
        return file.name

    def open(self, file: Path, text: str) -> None:
        with self._lock:
            self.docs[Path(file)] = _Doc(text, text, focused=self.clock())

    def focus(self, file: Path) -> None:
        with self._lock:
            d = self.docs.get(Path(file))
            if d is not None:
                d.focused = self.clock()

    def close(self, file: Path) -> None:
        with self._lock:
            self.docs.pop(Path(file), None)

    def change(self, file: Path, text: str) -> None:
        """A new text of an open document; the edit since the last checkpoint becomes a diff when it stops
        growing small (see ``checkpoint``)."""
        with self._lock:
            d = self.docs.get(Path(file))
            if d is None:
                self.docs[Path(file)] = _Doc(text, text, focused=self.clock())
                return
            d.text = text
            d.edited = d.focused = self.clock()

    def checkpoint(self, file: Path) -> None:
        """Record the document's edit since the last checkpoint as a recent-edit diff (the server calls this
        when the user pauses or leaves the document)."""
        file = Path(file)
        with self._lock:
            d = self.docs.get(file)
            if d is None or d.text == d.base:
                return
            before, after = d.base, d.text
            d.base = d.text
        diff = edit_diff(self.relpath(file), before, after)
        if diff is not None:
            with self._lock:
                self.edits.append((self.clock(), file, diff))
                del self.edits[: -self.max_edits]

    def gather(self, file: Path, text: str, offset: int, count: Callable[[str], int] = approx_tokens,
               budget: int | None = None, previous: ContextBlock | None = None,
               window_before: int = MAX_PREFIX_CHARS, window_after: int = MAX_SUFFIX_CHARS) -> ContextBlock | None:
        """The context block for a cursor at ``offset`` in ``text`` (the document ``file``), or None when no
        source has anything to add. Chunks ``previous`` (the block the engine holds) also has keep their
        order at its front, so their KV stays valid. ``window_before`` / ``window_after``: the characters of
        ``text`` the prompt window shows around the cursor (the engine's max_prefix_chars /
        max_suffix_chars; the defaults are EngineConfig's)."""
        file = Path(file)
        with self._lock:
            docs = {f: _Doc(d.text, d.base, d.focused, d.edited) for f, d in self.docs.items()}
            edits = list(self.edits)
        budget = self.budget if budget is None else budget
        if budget <= 0:
            return None
        s, e = around_span(text, offset)
        around = text[s:e]
        cands: list[Chunk] = []
        python = file.suffix in (".py", ".pyi")
        resolved = (self.jedi_chunks(file, text, offset)
                    if "jedi" in self.sources and python and usable_text(text, str(file)) else [])
        if "imports" in self.sources and python:
            covered = {(c.path, c.line) for c in resolved}
            cands += [c for c in self.import_chunks(file, text, offset, docs) if (c.path, c.line) not in covered]
        cands += resolved
        if "file" in self.sources and _outlined(file) and usable_text(text, str(file)):
            cands += self.file_chunks(file, text, offset, window_before, window_after)
        if "open" in self.sources:
            cands += self.open_chunks(file, around, docs)
        if "edits" in self.sources:
            now = self.clock()
            for t, f, diff in edits:
                cands.append(Chunk(self.relpath(f) + ".diff", diff, "edit", 0, 1.0 + 1.0 / (1.0 + (now - t) / 60)))
        chosen = merge_by_file(select_chunks(cands, around, budget, count))
        if not chosen:
            return None
        ordered = order_stably(previous.chunks if previous is not None else (), chosen)
        return ContextBlock(self.repo_name(), tuple(ordered), self.relpath(file))

    def jedi_chunks(self, file: Path, text: str, offset: int) -> list[Chunk]:
        """The definitions jedi finds for the names used near the cursor (nothing without a resolver, past
        its budget, or when jedi cannot read the file)."""
        if self.resolver is None:
            return []
        found = self.resolver.definitions(file, text, offset)
        return definition_chunks(found or (), self.shown_path)

    def shown_path(self, path: str | None, module: str) -> str:
        """The path a definition's module shows in the block: relative to the workspace folder, or for an
        installed library its import path as a file (requests/models.py), as an import names it."""
        if path is not None:
            p = Path(path)
            if any(r in p.parents for r in list(self.roots) + list(self._real)):
                return self.relpath(p)
            if p.name == "__init__.py":
                return module.replace(".", "/") + "/__init__.py"
        return module.replace(".", "/") + ".py"

    def repo_name(self) -> str:
        return self.roots[0].name if self.roots else "workspace"

    def import_chunks(self, file: Path, text: str, offset: int, docs: dict[Path, _Doc]) -> list[Chunk]:
        """Outlines of the imported names used near the cursor, nearest first."""
        near = names_near(text, offset)
        rank = {n: i for i, n in enumerate(near)}
        by_module: dict[Path, list[tuple[str | None, str]]] = {}
        for imp in resolve_imports(text, file, self.roots):
            by_module.setdefault(imp.module, []).append((imp.attr, imp.local))
        out: list[Chunk] = []
        for mod, uses in by_module.items():
            src = self._text_of(mod, docs)
            if src is None:
                continue
            wanted: dict[str, float] = {}
            for attr, local in uses:
                if attr is not None:
                    if local in rank:  # imported names not used near the cursor are noise to the model
                        wanted[attr] = max(wanted.get(attr, 0.0), _near_score(rank[local]))
                else:  # a module: the attributes used as local.attr near the cursor
                    for n, i in rank.items():
                        if n.startswith(local + "."):
                            a = n[len(local) + 1:]
                            wanted[a] = max(wanted.get(a, 0.0), _near_score(i))
            if not wanted:
                continue
            every = self._definitions(mod, src) or {}
            defs = {n: every[n] for n in wanted if n in every} or regex_definitions(src, wanted)
            rel = self.relpath(mod)
            for name, (line, outline) in defs.items():
                out.append(Chunk(rel, outline, "import", line, 2.0 + wanted[name]))
        return out

    def file_chunks(self, file: Path, text: str, offset: int, before: int, after: int) -> list[Chunk]:
        """Outlines of the current file's own definitions of names used near the cursor that the prompt
        window (``before`` / ``after`` characters around it) does not show: a sentinel defined at the top of
        a long module, a helper far above. Scored as imports are: both are definitions the model cannot
        see otherwise, and the name used nearer the cursor matters more than where it is defined."""
        rank = {n: i for i, n in enumerate(names_near(text, offset))}
        lo, hi = max(0, offset - before), min(len(text), offset + after)
        defs = file_definitions(text, rank, lo, hi, lambda piece: self._definitions(file, piece))
        rel = self.relpath(file)
        return [Chunk(rel, outline, "file", line, 2.0 + _near_score(rank[name]))
                for name, (line, outline) in defs.items()]

    def _definitions(self, file: Path, src: str) -> dict[str, tuple[int, str]] | None:
        """``parsed_definitions`` of a text of ``file`` (None: it does not parse), cached by (file, text
        hash): parsing a big module costs tens of ms."""
        key = (file, hash(src))
        if key in self._defs:
            return self._defs[key]
        # Python by ``ast``; another language with a grammar by its tree-sitter outlines
        every = parsed_definitions(src) if file.suffix in (".py", ".pyi") else syntax_definitions(src, file.name)
        if len(self._defs) > 64:
            self._defs.clear()
        self._defs[key] = every
        return every

    def open_chunks(self, file: Path, around: str, docs: dict[Path, _Doc]) -> list[Chunk]:
        """Chunks of the other open documents: the more recently focused or edited, the better; within a
        document, the chunk sharing the most words with the cursor's neighbourhood first."""
        near = words(around)
        others = sorted(((max(d.focused, d.edited), f, d) for f, d in docs.items() if f != file),
                        key=lambda x: -x[0])
        out: list[Chunk] = []
        for rank, (_, f, d) in enumerate(others[:8]):
            if not usable_text(d.text, str(f)):
                continue
            rel = self.relpath(f)
            recency = 1.0 / (1 + rank)
            for line, piece in split_chunks(d.text):
                w = words(piece)
                overlap = len(w & near) / (len(near) or 1)
                out.append(Chunk(rel, piece, "open", line, recency * 0.5 + overlap))
        return out

    def _text_of(self, file: Path, docs: dict[Path, _Doc]) -> str | None:
        d = docs.get(file)
        if d is not None:
            return d.text if usable_text(d.text, str(file)) else None
        for f, dd in docs.items():  # the same file open under another spelling (a symlink)
            if inside(f, self._real) == file:
                return dd.text if usable_text(dd.text, str(f)) else None
        return read_text(file, self._real)


def _near_score(rank: int) -> float:
    """Names used nearer the cursor rank higher."""
    return 1.0 / (1.0 + rank / 8)
