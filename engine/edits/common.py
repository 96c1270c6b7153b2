"""What the exact next edits share (issue 37): ``NextEdit``, applying, ordering, line offsets."""

from __future__ import annotations

import ast
import bisect
import contextlib
import keyword
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

log = logging.getLogger(__name__)

Source = Literal["rename", "repeat", "signature", "move", "model"]
RENAME_CONFIDENCE = 0.95
REPEAT_CONFIDENCE = 0.7
REGION_LINES = 40  # the repeat's region outside a Python function: this many lines either side
MAX_SUGGESTIONS = 64  # a repeat's occurrences, or another document's names to ask jedi about one by one
MAX_REFERENCES = 5000  # a rename's references jedi found in the document: every one (a rename must finish)
JEDI_BUDGET_S = 0.5  # default wait for jedi (a first question in a process loads its caches: ~0.3 s)


@dataclass(frozen=True)
class Fill:
    """What goes at a jump target for a new argument: ``lead`` + ``keyword=`` (when it must be passed by
    name) + the argument + ``trail`` (the separators the call needs there). ``text``: the model's argument
    (fill.py), ``confidence``: the lowest probability of the tokens that wrote it; None until the model
    was asked (then "" and a confidence below the floor: only the jump is offered)."""

    lead: str = ""
    trail: str = ""
    keyword: str = ""
    text: str = ""
    confidence: float | None = None

    @property
    def insert(self) -> str:
        """The whole insertion at the target ("" when there is no argument text)."""
        if not self.text:
            return ""
        return self.lead + (self.keyword + "=" if self.keyword else "") + self.text + self.trail


@dataclass(frozen=True)
class NextEdit:
    """Replace ``text[range_start:range_end]`` (== ``old_text``) of the current text by ``new_text``. An empty
    edit (no range, no text) is a *jump target*: a place that needs an edit Flint does not write (``note``:
    what goes there, e.g. the name of a parameter added without a default)."""

    range_start: int
    range_end: int
    old_text: str
    new_text: str
    source: Source
    confidence: float
    note: str = ""
    fill: Fill | None = None  # a jump target's argument slot (signature.py) and the model's text for it

    @property
    def jump(self) -> bool:
        return self.range_start == self.range_end and not self.new_text

    def at(self, start: int) -> NextEdit:
        """The same edit moved to ``start`` (its fill kept)."""
        return replace(self, range_start=start, range_end=start + self.range_end - self.range_start)

    def apply(self, text: str) -> str:
        return text[:self.range_start] + self.new_text + text[self.range_end:]


def apply_all(text: str, edits: Sequence[NextEdit]) -> str:
    """``text`` with every edit applied (they must not overlap)."""
    out, at = [], 0
    for e in sorted(edits, key=lambda e: e.range_start):  # one pass: a rename may have hundreds
        out += [text[at:e.range_start], e.new_text]
        at = e.range_end
    out.append(text[at:])
    return "".join(out)


def is_python(path: str | None, language: str | None) -> bool:
    if language:
        return language.lower() == "python"
    return path is None or path.endswith((".py", ".pyi"))


# The analyser whose worker thread (jedi's) does every ``ast.parse`` of next edits; None: the caller's thread.
# Python 3.11's ast keeps one recursion depth for all threads, and parso calls ``ast.literal_eval`` on each
# file jedi reads: a parse on another thread beside it failed (``SystemError: AST constructor recursion depth
# mismatch``). The next-edit service sets it (``parse_on``).
_parser: Any = None


def parse_on(analyser: Any) -> None:
    global _parser
    _parser = analyser


# the last texts parsed (exec) and their trees: one computation parses the text before the edit and the one after,
# often in turn, and the next computation's text before is this one's after (equal, not the same object)
_last: list[tuple[str, ast.AST]] = []
_KEEP = 2


def parse(text: str, mode: str = "exec") -> ast.AST:
    """``ast.parse(text)`` on jedi's thread: there at once, else handed over and waited for (after the
    questions jedi has before it). SyntaxError and the others as ``ast.parse`` raises them. A text equal to
    one of the last two parsed gets the same tree (read it, never change it)."""
    global _last
    if mode != "exec":
        return _parse_now(text, mode)
    kept = list(_last)  # (another thread may replace the list: read one version of it)
    for t, tree in kept:
        if t is text or (len(t) == len(text) and t == text):
            return tree
    tree = _parse_now(text, mode)
    _last = [(text, tree), *kept][:_KEEP]
    return tree


def parse_ahead(text: str) -> None:
    """``parse(text)`` in idle time, so that a computation about this text finds its tree; a text that does not
    parse (half-typed) is left."""
    with contextlib.suppress(SyntaxError, ValueError, RecursionError, MemoryError):
        parse(text)


def _parse_now(text: str, mode: str) -> ast.AST:
    a = _parser
    if a is None or a.on_worker():
        return ast.parse(text, mode=mode)
    t0 = time.monotonic()
    try:
        fut = a.submit(_timed_parse, text, mode)
    except RuntimeError:  # the analyser closed (the server is going): here, as before
        return ast.parse(text, mode=mode)
    tree, ran = fut.result()
    if time.monotonic() - t0 > ran + 0.05:  # it waited behind jedi's questions
        log.debug("ast.parse of %d chars waited %.0f ms on jedi's thread (ran %.0f ms)", len(text),
                  (time.monotonic() - t0 - ran) * 1000, ran * 1000)
    return tree


def _timed_parse(text: str, mode: str) -> tuple[ast.AST, float]:
    t0 = time.monotonic()
    tree = ast.parse(text, mode=mode)
    return tree, time.monotonic() - t0


def module_tree(text: str) -> ast.Module | None:
    """The text's module tree (``parse``), None when it does not parse."""
    try:
        tree = parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    return tree if isinstance(tree, ast.Module) else None


def parses(text: str) -> bool:
    try:
        parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


def by_cursor(edits: list[NextEdit], cursor: int) -> list[NextEdit]:
    """Nearest after the cursor first, then from the top down to the cursor."""
    return sorted(edits, key=lambda e: (e.range_start < cursor, e.range_start))


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _ident(s: str) -> bool:
    return s.isidentifier() and not keyword.iskeyword(s)


_NEWLINE = re.compile("\n")


class Lines:
    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def offset(self, line: int, col: int) -> int:
        """jedi's (1-based line, 0-based column) as an offset."""
        return self.starts[line - 1] + col

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) - 1


def ast_offset(text: str, lines: Lines, lineno: int, col_bytes: int) -> int:
    """ast's (line, UTF-8 byte column) as an offset of ``text`` (``lines``: its Lines)."""
    start = lines.starts[lineno - 1]
    line = text[start:start + col_bytes]  # a character is at least one byte
    return start + len(line.encode("utf-8")[:col_bytes].decode("utf-8", "ignore"))
