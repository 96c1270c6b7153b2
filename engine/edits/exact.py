"""Exact next edits: no model, right every time (issue 37).

**Rename.** The user's last (coalesced) edit changed one identifier occurrence, ``old`` -> ``new``, both
identifiers. jedi (``Script.get_references`` on the text *before* the rename, at the old name) gives the
other references in the document; each, mapped into the current text, is offered as ``old`` -> ``new``.
When the user has already renamed several occurrences by hand (a run of edits with the same ``old`` ->
``new``), jedi is asked on the text before the first of them, and the ones already done drop out. Only
references jedi finds are offered, and only when:

- the new name is not in the function that holds every reference (a local's, a parameter's), nor, for
  other names, anywhere in the file (else the edit may switch to another name rather than rename this
  one, and a rename into it could capture or shadow it);
- no reference is an import (changing ``os`` to ``sys`` at a use is not renaming the module);
- for a name of one function (a local, a parameter), the old name is left nowhere else in that function
  as a name jedi did not call a reference (jedi follows bindings: after a reassignment in a branch it may
  see two names, and renaming one of them can leave a name unbound on some path);
- every reference is still the old name in the current text, and applying them all leaves a file that
  ``ast.parse`` reads (Python).

**Literal repeat.** The last edit replaced a literal token sequence (names, numbers, strings with dots
between, e.g. ``"utf-8"`` -> ``ENCODING``, ``0.5`` -> ``0.25``, ``np.float`` -> ``numpy.double``) by another:
its other occurrences, on whole tokens, in the region being edited (the enclosing function in Python, else
40 lines either side) are offered, when the file with all of them applied parses (Python). Occurrences
inside comments and inside other strings are skipped. An edit inside a one-line string literal replaces
that whole literal (``"utf-8"`` -> ``"UTF-8"``: the other ``"utf-8"`` literals are offered); an edit inside
a comment or a triple-quoted string (prose, a docstring) offers nothing: on real version pairs, repeating
a changed word of prose was right once in 8 suggestions (docs/benchmarks/next_edit.md). A single name
changed into another is the rename's business, never a repeat (jedi knows which of its occurrences are the
same name).

Both are ordered nearest after the cursor first, then from the top down to the cursor.

jedi runs through ``engine.guidance.jedi_analyser.JediAnalyser`` (its projects, environments, scripts and
worker thread), so a question waits at most until its deadline and never raises.
"""

from __future__ import annotations

import ast
import bisect
import keyword
import logging
import os
import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Literal

from engine.edits.history import Edit
from engine.edits.lexer import COMMENT, NAME, OP, SPACE, STRING, Token, is_literal_sequence, tokens

log = logging.getLogger(__name__)

Source = Literal["rename", "repeat", "model"]
RENAME_CONFIDENCE = 0.95
REPEAT_CONFIDENCE = 0.7
REGION_LINES = 40  # the repeat's region outside a Python function: this many lines either side
MAX_SUGGESTIONS = 64
JEDI_BUDGET_S = 0.5  # default wait for jedi (a first question in a process loads its caches: ~0.3 s)


@dataclass(frozen=True)
class NextEdit:
    """Replace ``text[range_start:range_end]`` (== ``old_text``) of the current text by ``new_text``."""

    range_start: int
    range_end: int
    old_text: str
    new_text: str
    source: Source
    confidence: float

    def apply(self, text: str) -> str:
        return text[:self.range_start] + self.new_text + text[self.range_end:]


def apply_all(text: str, edits: Sequence[NextEdit]) -> str:
    """``text`` with every edit applied (they must not overlap)."""
    out = text
    for e in sorted(edits, key=lambda e: e.range_start, reverse=True):
        out = e.apply(out)
    return out


def is_python(path: str | None, language: str | None) -> bool:
    if language:
        return language.lower() == "python"
    return path is None or path.endswith((".py", ".pyi"))


def parses(text: str) -> bool:
    try:
        ast.parse(text)
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


# ---------------------------------------------------------------------------------------------------------
# rename


@dataclass(frozen=True)
class Renamed:
    """One identifier occurrence changed: at ``start`` of the text before the edit, ``old`` -> ``new``."""

    start: int
    old: str
    new: str


def identifier_change(before: str, edit: Edit) -> Renamed | None:
    """The identifier the edit changed, when it changed exactly one: the edit lies inside (or at the end
    of) one name, and the name is an identifier before and after (``value`` -> ``amount``, ``count`` ->
    ``count_all``)."""
    after = edit.apply(before)
    if not all(_is_word(c) for c in edit.old_text + edit.new_text):
        return None
    lo = edit.start
    while lo > 0 and _is_word(before[lo - 1]):
        lo -= 1
    hi_b = edit.old_end
    while hi_b < len(before) and _is_word(before[hi_b]):
        hi_b += 1
    hi_a = hi_b + edit.delta
    old, new = before[lo:hi_b], after[lo:hi_a]
    if old == new or not _ident(old) or not _ident(new):
        return None
    return Renamed(lo, old, new)


def _map_offset(off: int, length: int, edits: Sequence[Edit]) -> int | None:
    """A span of the text before ``edits`` in the text after them; None when one of them changed it."""
    for e in edits:
        if off + length <= e.start:
            continue
        if off >= e.old_end:
            off += e.delta
            continue
        return None
    return off


_NEWLINE = re.compile("\n")


class _Lines:
    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def offset(self, line: int, col: int) -> int:
        """jedi's (1-based line, 0-based column) as an offset."""
        return self.starts[line - 1] + col

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) - 1


class _Outline:
    """One parse of a text: its import lines (1-based) and its functions' spans (whole lines)."""

    def __init__(self, text: str, tree: ast.AST) -> None:
        lines = _Lines(text)
        self.text, self.tree, self.lines = text, tree, lines
        self.imports: set[int] = set()
        self.functions: list[tuple[int, int]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                self.imports.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                end_line = node.end_lineno or node.lineno
                self.functions.append((lines.starts[node.lineno - 1],
                                       lines.starts[end_line] if end_line < len(lines.starts) else len(text)))

    @classmethod
    def of(cls, text: str) -> _Outline | None:
        """None when the text does not parse."""
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return None
        return cls(text, tree)

    def _offset(self, lineno: int, col_bytes: int) -> int:
        line = self.text[self.lines.starts[lineno - 1]:]
        line = line[:col_bytes]  # a character is at least one byte: the column's characters are within
        return self.lines.starts[lineno - 1] + len(line.encode("utf-8")[:col_bytes].decode("utf-8", "ignore"))

    def comprehensions_binding(self, name: str) -> list[tuple[int, int]]:
        """The spans of the comprehensions that bind ``name`` themselves (their own scope)."""
        out = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) and any(
                    isinstance(n, ast.Name) and n.id == name for g in node.generators for n in ast.walk(g.target)):
                if node.end_lineno is not None and node.end_col_offset is not None:
                    out.append((self._offset(node.lineno, node.col_offset),
                                self._offset(node.end_lineno, node.end_col_offset)))
        return out

    def holder(self, offsets: list[int]) -> tuple[int, int] | None:
        """The innermost function holding every offset; None when there is none."""
        if not offsets:
            return None
        lo, hi = min(offsets), max(offsets)
        inside = [f for f in self.functions if f[0] <= lo and hi < f[1]]
        return min(inside, key=lambda f: f[1] - f[0]) if inside else None


def _keyword_at(text: str, off: int, n: int) -> bool:
    """Is the name at ``off`` a keyword argument (``f(a, name=...)``)?"""
    rest = text[off + n:].lstrip(" \t")
    return rest.startswith("=") and not rest.startswith("==") and text[:off].rstrip().endswith(("(", ","))


def _leftovers(text: str, span: tuple[int, int], name: str, refs: set[int],
               scopes: Sequence[tuple[int, int]] = ()) -> bool:
    """Does ``name`` occur as a name in ``text[span]`` where jedi saw no reference? (jedi follows bindings:
    after ``value = other`` in a branch it may call the later ``value`` another name; renaming only some of
    them can leave a name unbound on some path.) Attribute names (after a dot) and keyword arguments
    (``f(name=...)``) are other names and do not count, nor are the names inside ``scopes`` (comprehensions
    that bind the name themselves), unless jedi's references are in there."""
    toks = [t for t in tokens(text, span[0], span[1]) if t.kind not in (SPACE, COMMENT)]
    depth = 0
    for i, t in enumerate(toks):
        if t.kind == OP and t.text in "([{":
            depth += 1
        elif t.kind == OP and t.text in ")]}":
            depth = max(0, depth - 1)
        if t.kind != NAME or t.text != name or t.start in refs:
            continue
        if any(a <= t.start < b and not any(a <= r < b for r in refs) for a, b in scopes):
            continue
        if i > 0 and toks[i - 1].text == ".":
            continue
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        after = toks[i + 2] if i + 2 < len(toks) else None
        if depth > 0 and nxt is not None and nxt.text == "=" and (after is None or after.text != "="):
            continue
        return True
    return False


_default_analyser: Any = None
_default_lock = threading.Lock()


def default_analyser() -> Any:
    """A process-wide JediAnalyser for callers that bring none (the running interpreter's environment)."""
    global _default_analyser
    with _default_lock:
        if _default_analyser is None:
            from engine.guidance.jedi_analyser import JediAnalyser

            _default_analyser = JediAnalyser()
        return _default_analyser


def jedi_references(source: str, offset: int, *, path: str | None = None, analyser: Any = None,
                    deadline: float | None = None) -> list[tuple[int, str]] | None:
    """The references jedi finds in this file to the name at ``offset`` of ``source``, as (offset, jedi
    type) pairs in ``source``; None past the deadline, for a huge file or on any jedi failure."""
    from engine.guidance.jedi_analyser import line_col

    analyser = analyser or default_analyser()
    if len(source) > analyser.max_chars:
        return None
    path = os.path.abspath(path) if path else os.path.abspath("untitled.py")
    line, col = line_col(source, offset)

    def run() -> list[tuple[int, str]] | None:
        try:
            script = analyser._script(source, path)  # the analyser's project, environment and script cache
            if script is None:
                return None
            refs = script.get_references(line, col, scope="file")
        except Exception as e:  # jedi on arbitrary text: any failure is "no opinion"
            log.debug("jedi references failed at %s:%d: %r", path, offset, e)
            return None
        lines = _Lines(source)
        out = []
        for r in refs:
            if r.module_path is None or os.path.abspath(str(r.module_path)) != path or r.line is None:
                continue
            if r.line > len(lines.starts):
                continue
            out.append((lines.offset(r.line, r.column), r.type))
        return out

    fut = analyser._pool.submit(run)  # jedi only ever runs on the analyser's worker thread
    wait = JEDI_BUDGET_S if deadline is None else max(0.0, deadline - time.monotonic())
    try:
        result: list[tuple[int, str]] | None = fut.result(timeout=wait)
    except FutureTimeout:
        fut.cancel()
        return None
    except Exception:
        return None
    return result


def rename_edits(text: str, edits: Sequence[Edit], *, path: str | None = None, analyser: Any = None,
                 deadline: float | None = None, cursor: int | None = None) -> list[NextEdit]:
    """The remaining references of the name the last edit renamed (module docstring). ``text`` is the
    current text, ``edits`` the document's recent edits (EditHistory.edits), the last one the user's."""
    if not edits:
        return []
    before = edits[-1].undo(text)
    ch = identifier_change(before, edits[-1])
    if ch is None:
        return []
    # the run of edits that renamed the same name by hand: ask jedi before the first of them
    first = len(edits) - 1
    base, base_ch = before, ch
    while first > 0:
        prev = edits[first - 1].undo(base)
        c = identifier_change(prev, edits[first - 1])
        if c is None or (c.old, c.new) != (ch.old, ch.new):
            break
        first, base, base_ch = first - 1, prev, c
    new_re = re.compile(rf"(?<!\w){re.escape(ch.new)}(?!\w)")
    refs = jedi_references(base, base_ch.start, path=path, analyser=analyser, deadline=deadline)
    if not refs or all(off != base_ch.start for off, _ in refs):
        return []
    outline = _Outline.of(base)
    if outline is None:
        return []
    imports = outline.imports
    attribute = any(base[:off].rstrip().endswith(".") for off, _ in refs)
    span = None if attribute else outline.holder([off for off, _ in refs])
    if new_re.search(base):
        # the new name exists already: within the one function holding every reference (a local's or a
        # parameter's), or anywhere for names beyond one function, it may be a switch to that name or a
        # rename into a clash
        if span is None or new_re.search(base, span[0], span[1]):
            return []
    # a parameter's keyword at call sites elsewhere aside, the function whose name this is
    own = None if attribute else outline.holder([off for off, _ in refs if not _keyword_at(base, off, len(ch.old))])
    if own is not None and _leftovers(base, own, ch.old, {off for off, _ in refs},
                                      outline.comprehensions_binding(ch.old)):
        return []
    lines = _Lines(base)
    n = len(ch.old)
    later = list(edits[first:])
    out = []
    seen = set()
    for off, _kind in refs:
        if base[off:off + n] != ch.old or (off > 0 and _is_word(base[off - 1])) or \
                (off + n < len(base) and _is_word(base[off + n])):
            return []  # jedi's position does not hold the name: do not guess
        if lines.line_of(off) + 1 in imports:
            return []
        cur = _map_offset(off, n, later)
        if cur is None or cur in seen:
            continue  # edited since (renamed by hand, or changed otherwise)
        if text[cur:cur + n] != ch.old or (cur > 0 and _is_word(text[cur - 1])) or \
                (cur + n < len(text) and _is_word(text[cur + n])):
            continue
        seen.add(cur)
        out.append(NextEdit(cur, cur + n, ch.old, ch.new, "rename", RENAME_CONFIDENCE))
    if not out or len(out) > MAX_SUGGESTIONS:
        return []
    if not parses(apply_all(text, out)):
        return []
    if cursor is None:
        cursor = edits[-1].new_end
    return by_cursor(out, cursor)


# ---------------------------------------------------------------------------------------------------------
# literal repeat


def _token_at(toks: list[Token], pos: int) -> Token | None:
    """The token with ``start < pos < end`` (strictly inside)."""
    for t in toks:
        if t.start < pos < t.end:
            return t
        if t.start >= pos:
            break
    return None


def _expand(before: str, after: str, edit: Edit, language: str | None) -> tuple[int, int, int] | None:
    """The edit widened to whole tokens: (lo, hi in before, hi in after)."""
    lo = edit.start
    tail = len(before) - edit.old_end  # the unchanged text after the edit
    for _ in range(4):
        line_lo = before.rfind("\n", 0, max(0, lo - 1)) + 1
        hb, ha = len(before) - tail, len(after) - tail
        tb = tokens(before, line_lo, min(len(before), hb + 200), language)
        ta = tokens(after, line_lo, min(len(after), ha + 200), language)
        new_lo, new_tail = lo, tail
        for toks, pos in ((tb, lo), (ta, lo)):
            t = _token_at(toks, pos)
            if t is not None:
                new_lo = min(new_lo, t.start)
        for toks, pos, size in ((tb, hb, len(before)), (ta, ha, len(after))):
            t = _token_at(toks, pos)
            if t is not None:
                new_tail = min(new_tail, size - t.end)
        if (new_lo, new_tail) == (lo, tail):
            return lo, len(before) - tail, len(after) - tail
        lo, tail = new_lo, new_tail
    return None


def _region(text: str, pos: int, python: bool) -> tuple[int, int]:
    """The region a repeat looks in: the innermost function holding ``pos`` (Python, when the text parses),
    else ``REGION_LINES`` lines either side; offsets of line starts."""
    lines = _Lines(text)
    line = lines.line_of(pos)  # 0-based
    lo_line, hi_line = max(0, line - REGION_LINES), min(len(lines.starts) - 1, line + REGION_LINES)
    if python:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            tree = None
        best = None
        if tree is not None:
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    a = (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1
                    b = (node.end_lineno or node.lineno) - 1
                    if a <= line <= b and (best is None or a >= best[0]):
                        best = (a, b)
        if best is not None:
            lo_line, hi_line = best
    lo = lines.starts[lo_line]
    hi = lines.starts[hi_line + 1] if hi_line + 1 < len(lines.starts) else len(text)
    return lo, hi


def repeat_edits(text: str, edits: Sequence[Edit], *, language: str | None = "python",
                 cursor: int | None = None) -> list[NextEdit]:
    """The other occurrences of the literal the last edit replaced (module docstring)."""
    if not edits:
        return []
    last = edits[-1]
    after = text
    before = last.undo(text)
    python = (language or "python").lower() == "python"
    line_lo = before.rfind("\n", 0, last.start) + 1
    line_hi = before.find("\n", last.old_end)
    ctx = tokens(before, line_lo, len(before) if line_hi < 0 else line_hi, language)
    holder = next((t for t in ctx if t.start <= last.start and last.old_end <= t.end and t.kind in (STRING, COMMENT)
                   and (t.start < last.start or last.old_end < t.end)), None)
    if holder is not None and not _literal_string(holder):
        return []  # prose (a comment, a docstring): its words repeat by meaning, not by spelling
    span = _expand(before, after, last, language)
    if span is None:
        return []
    lo, hi_b, hi_a = span
    old, new = before[lo:hi_b], after[lo:hi_a]
    if not old.strip() or not new.strip() or old == new or "\n" in old:
        return []
    old_toks = [t for t in tokens(old, language=language) if t.kind != SPACE]
    new_toks = [t for t in tokens(new, language=language) if t.kind != SPACE]
    if not is_literal_sequence(old_toks) or not is_literal_sequence(new_toks):
        return []
    if len(old_toks) == 1 and len(new_toks) == 1 and old_toks[0].kind == NAME and new_toks[0].kind == NAME:
        return []  # one name for another: a rename (jedi), not a repeat
    r_lo, r_hi = _region(after, lo, python)
    toks = tokens(after, r_lo, r_hi, language)
    starts = {t.start: i for i, t in enumerate(toks)}
    ends = {t.end for t in toks}
    out = []
    edited = (lo, hi_a)
    for m in re.finditer(re.escape(old), after[r_lo:r_hi]):
        s, e = r_lo + m.start(), r_lo + m.end()
        if s not in starts or e not in ends or (s < edited[1] and e > edited[0]):
            continue
        i = starts[s]
        covered = []
        while i < len(toks) and toks[i].start < e:
            covered.append(toks[i])
            i += 1
        if any(t.kind == COMMENT for t in covered):
            continue
        if [t.text for t in covered if t.kind != SPACE] != [t.text for t in old_toks]:
            continue  # e.g. a string token that only starts like the old one
        if len(old_toks) > 1 and s > 0 and after[s - 1] == ".":
            continue  # a.b.c holding b.c is another thing
        out.append(NextEdit(s, e, old, new, "repeat", REPEAT_CONFIDENCE))
    return _finish(text, out, last, python, cursor)


def _literal_string(tok: Token) -> bool:
    """A one-line string literal (not a comment, not a triple-quoted string such as a docstring)."""
    if tok.kind != STRING or "\n" in tok.text:
        return False
    body = tok.text.lstrip("rRbBuUfF")
    return not body.startswith(('"""', "'''"))


def _finish(text: str, out: list[NextEdit], last: Edit, python: bool, cursor: int | None) -> list[NextEdit]:
    if not out or len(out) > MAX_SUGGESTIONS:
        return []
    if python and not parses(apply_all(text, out)):  # a file that does not parse gets nothing
        return []
    return by_cursor(out, last.new_end if cursor is None else cursor)


# ---------------------------------------------------------------------------------------------------------


def exact_next_edits(text: str, edits: Sequence[Edit], *, path: str | None = None, language: str | None = None,
                     analyser: Any = None, deadline: float | None = None, cursor: int | None = None) -> list[NextEdit]:
    """The exact next edits after the last of ``edits``: a rename's remaining references (Python), else a
    literal's other occurrences; [] when neither applies."""
    if not edits:
        return []
    python = is_python(path, language)
    if python:
        before = edits[-1].undo(text)
        if identifier_change(before, edits[-1]) is not None:
            found = rename_edits(text, edits, path=path, analyser=analyser, deadline=deadline, cursor=cursor)
            if found:
                return found
            # a word inside a string or comment is no name jedi knows: its repeat (a name in code never is)
    return repeat_edits(text, edits, language="python" if python else language, cursor=cursor)
