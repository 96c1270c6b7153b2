"""The context source that asks jedi (issue 35): the definitions of the names used near the cursor
(engine/context/resolved.py says which and renders them), across the workspace's files and the installed
libraries of the user's environment.

jedi runs on the analyser's one worker thread (``Runner``: engine.guidance.jedi_analyser.JediAnalyser's
``call``; jedi is not thread-safe, and the monitor and next edits ask it there too), within a time budget
per gather; the questions stop at the deadline, and a late answer is kept for the next gather of the same
text and spot (jedi cannot be interrupted). A huge or broken file, a missing environment or any failure
inside jedi gives nothing (None), never an error.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from engine.context.resolved import (
    MAX_MEMBERS,
    MAX_QUESTIONS,
    Definition,
    Member,
    Question,
    questions,
    standard_library,
)

BUDGET_S = 0.5  # one gather's wait for jedi (idle time: a first question in a process loads ~0.3 s of caches)
LATE_S = 1.0  # jedi goes on this much longer for the next gather (its thread serves the monitor too)
MAX_DOC = 100  # characters of a docstring's first line


class Runner(Protocol):
    def call(self, source: str, path: str | None, fn: Callable[[Any], Any], deadline: float,
             late: Callable[[Any], None] | None = None) -> Any: ...


def _line_col(text: str, offset: int) -> tuple[int, int]:
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1)


def _first_line(doc: str) -> str:
    for ln in doc.splitlines():
        if ln.strip():
            return ln.strip()[:MAX_DOC]
    return ""


def _signature(name: Any) -> str:
    sigs = name.get_signatures()
    return sigs[0].to_string() if sigs else ""


def _member(name: Any, doc: bool) -> Member:
    sig = _signature(name) if name.type == "function" else ""
    return Member(name.name, name.type, sig, _first_line(name.docstring(raw=True)) if doc else "")


def _definition(name: Any, q: Question, members: list[Any], used: tuple[str, ...]) -> Definition:
    path = str(name.module_path) if name.module_path is not None else None
    header = name.get_line_code().strip() if path is not None and name.line else ""
    sig = _signature(name) if name.type == "function" else ""
    # signatures cost an inference each: only for the members a stub shows
    shown = [m for m in members if m.name in used] + [m for m in members if m.name not in used]
    shown = [m for m in shown if not m.name.startswith("_") or m.name == "__init__"][:MAX_MEMBERS]
    return Definition(q.expr, name.type, name.name, name.module_name or "", path, name.line or 0, header,
                      sig, "" if q.brief else _first_line(name.docstring(raw=True)),
                      tuple(_member(m, not q.brief) for m in shown),
                      q.distance, used)


def answer_one(script: Any, text: str, q: Question) -> list[Definition]:
    """jedi's answer to one question (worker thread)."""
    if q.kind == "goto":
        out = []
        for n in script.goto(*_line_col(text, q.at), follow_imports=True)[:1]:
            members = n.defined_names() if n.type == "class" else []
            if q.brief:  # a class the function does not use: its constructor alone
                members = [m for m in members if m.name == "__init__"]
            out.append(_definition(n, q, members, ()))
        return out
    types = [t for t in script.infer(*_line_col(text, q.name_at)) if t.type in ("instance", "class")]
    if not types or types[0].module_name == "builtins":
        return []
    t = types[0]
    members = [c for c in script.complete(*_line_col(text, q.at)) if c.module_name != "builtins"]
    used = (q.attr,) if q.attr else ()
    return [_definition(t, q, members, used)]


def answer(script: Any, text: str, qs: list[Question], deadline: float,
           clock: Callable[[], float] = time.monotonic) -> list[Definition]:
    """Answers in question order until ``deadline`` (the worker thread is freed for the monitor's questions);
    a question jedi fails on is skipped."""
    out: list[Definition] = []
    for q in qs:
        if clock() > deadline:
            break
        try:
            out += answer_one(script, text, q)
        except Exception:  # jedi on arbitrary code: no answer for this name
            continue
    return out


class JediContext:
    """``definitions(file, text, offset)`` for the Workspace's ``jedi`` source; its answers kept per (file,
    text, offset) in a small LRU (a late answer lands there for the next gather)."""

    def __init__(self, runner: Runner, budget_s: float = BUDGET_S, max_questions: int = MAX_QUESTIONS,
                 cache_size: int = 32, stdlib: bool = False, late_s: float = LATE_S,
                 unused_imports: int = 0) -> None:
        self.runner = runner
        self.unused_imports = unused_imports  # names imported but unused near the cursor asked too
        self.late_s = late_s
        # the standard library's definitions too (off: the model has read the stdlib more than any project)
        self.stdlib = stdlib
        self.budget_s, self.max_questions, self.cache_size = budget_s, max_questions, cache_size
        self._cache: OrderedDict[tuple[str, int, int], list[Definition]] = OrderedDict()
        self._lock = threading.Lock()
        self.stats = {"asked": 0, "answered": 0, "late": 0, "questions": 0}

    def definitions(self, file: Path, text: str, offset: int) -> list[Definition] | None:
        """The definitions jedi finds for the names used near ``offset`` in ``text`` (the document
        ``file``); None when it has none in time."""
        key = (str(file), hash(text), offset)
        with self._lock:
            self.stats["asked"] += 1
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
        if cached is not None:
            return [d for d in cached if self.stdlib or not standard_library(d.path)] or None
        qs = questions(text, offset, self.max_questions, self.unused_imports)
        if not qs:
            return None
        self.stats["questions"] += len(qs)
        deadline = time.monotonic() + self.budget_s

        def keep(found: list[Definition] | None) -> None:
            if found is None:
                return
            with self._lock:
                self._cache[key] = found
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)

        def late(found: list[Definition] | None) -> None:
            self.stats["late"] += 1
            keep(found)

        # the worker stops asking a little after the caller stops waiting
        found = self.runner.call(text, str(file), lambda s: answer(s, text, qs, deadline + self.late_s),
                                 deadline, late)
        keep(found)
        if found and not self.stdlib:
            found = [d for d in found if not standard_library(d.path)]
        if found:
            self.stats["answered"] += 1
        return found or None
