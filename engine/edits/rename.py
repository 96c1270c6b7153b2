"""Exact next edits, the rename (issue 37; engine/edits/exact.py has the whole story).

The user's last (coalesced) edit changed one identifier occurrence, ``old`` -> ``new``, both identifiers.
jedi (``Script.get_references`` on the text *before* the rename, at the old name) gives the other
references in the document; each, mapped into the current text, is offered as ``old`` -> ``new``, under the
guards exact.py lists. jedi runs through ``engine.guidance.jedi_analyser.JediAnalyser`` (its projects,
environments, scripts and worker thread), so a question waits at most until its deadline and never raises.
"""

from __future__ import annotations

import ast
import keyword
import logging
import os
import re
import time
from collections.abc import Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from engine.edits.common import (
    JEDI_BUDGET_S,
    MAX_REFERENCES,
    RENAME_CONFIDENCE,
    Lines,
    NextEdit,
    _ident,
    _is_word,
    apply_all,
    ast_offset,
    by_cursor,
    parse,
    parses,
)
from engine.edits.history import Edit
from engine.edits.lexer import COMMENT, NAME, OP, SPACE, tokens
from engine.edits.local import module_references, own_references, walk_lines

log = logging.getLogger(__name__)


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


_LAMBDA = re.compile(r"\blambda\b")


class _Outline:
    """One parse of a text: its import lines (1-based) and its functions' spans (whole lines)."""

    def __init__(self, text: str, tree: ast.AST) -> None:
        lines = Lines(text)
        self.text, self.tree, self.lines = text, tree, lines
        self.imports: set[int] = set()
        self.functions: list[tuple[int, int]] = []
        self.own_names: dict[tuple[int, int], int] = {}  # a def's span -> the offset of its name
        at = sorted({lines.line_of(m.start()) + 1 for m in _LAMBDA.finditer(text)})
        # a def or an import is a statement, and a lambda's line says ``lambda``: data literals are not walked
        for node in walk_lines(tree, at, statements=False):
            if isinstance(node, ast.Import | ast.ImportFrom):
                self.imports.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                end_line = node.end_lineno or node.lineno
                span = (lines.starts[node.lineno - 1],
                        lines.starts[end_line] if end_line < len(lines.starts) else len(text))
                self.functions.append(span)
                if not isinstance(node, ast.Lambda):
                    m = re.compile(rf"def\s+({re.escape(node.name)})\b").search(text, span[0])
                    if m is not None:
                        self.own_names[span] = m.start(1)

    @classmethod
    def of(cls, text: str) -> _Outline | None:
        """None when the text does not parse."""
        try:
            tree = parse(text)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return None
        return cls(text, tree)

    def _offset(self, lineno: int, col_bytes: int) -> int:
        return ast_offset(self.text, self.lines, lineno, col_bytes)

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
        # a def's own name is its enclosing scope's (a function used only in other modules is no local)
        inside = [f for f in self.functions if f[0] <= lo and hi < f[1] and self.own_names.get(f) not in offsets]
        return min(inside, key=lambda f: f[1] - f[0]) if inside else None


def _keyword_at(text: str, off: int, n: int) -> bool:
    """Is the name at ``off`` a keyword argument (``f(a, name=...)``)?"""
    rest = text[off + n:].lstrip(" \t")
    return rest.startswith("=") and not rest.startswith("==") and text[:off].rstrip().endswith(("(", ","))


def _leftovers(text: str, span: tuple[int, int], name: str, refs: set[int],
               scopes: Sequence[tuple[int, int]] = ()) -> list[int]:
    """Where ``name`` occurs as a name in ``text[span]`` and jedi saw no reference (jedi follows bindings:
    after ``value = other`` in a branch it may call the later ``value`` another name; renaming only some of
    them can leave a name unbound on some path). Attribute names (after a dot) and keyword arguments
    (``f(name=...)``) are other names and do not count, nor are the names inside ``scopes`` (comprehensions
    that bind the name themselves), unless jedi's references are in there."""
    toks = [t for t in tokens(text, span[0], span[1]) if t.kind not in (SPACE, COMMENT)]
    out = []
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
        out.append(t.start)
    return out


MAX_REASKS = 4  # jedi asked again at a leftover occurrence at most this often per rename


def _completed(base: str, site: int, name: str, refs: list[tuple[int, str]], outline: _Outline,
               path: str | None, analyser: Any, deadline: float | None) -> list[tuple[int, str]]:
    """jedi's references of the name at ``site``, completed from its other occurrences in the same function.

    jedi is asymmetric at a definition: asked at a parameter (or any binding), it follows only the names
    whose inference reaches that binding, so it stops at a rebinding (``pos += 2``, ``x = f(x)``, ``value =
    tp()`` in a branch, a dead ``value = None`` in ``finally``); asked at one of the later occurrences it
    finds them all, the parameter included. So while the function holding the references still has the
    name where jedi saw none, jedi is asked at the first such occurrence, and its answer joins when it holds
    ``site`` (jedi's own word that it is the same name); else the references stay as they are (and the
    leftover guard offers nothing)."""
    n = len(name)
    for _ in range(MAX_REASKS):
        if any(base[:off].rstrip().endswith(".") for off, _ in refs):
            return refs  # an attribute: no function holds it
        own = outline.holder([off for off, _ in refs if not _keyword_at(base, off, n)])
        if own is None:
            return refs
        left = _leftovers(base, own, name, {off for off, _ in refs}, outline.comprehensions_binding(name))
        if not left:
            return refs
        more = jedi_references(base, left[0], path=path, analyser=analyser, deadline=deadline)
        if not more or all(off != site for off, _ in more):
            return refs
        have = {off for off, _ in refs}
        refs = refs + [(off, typ) for off, typ in more if off not in have]
    return refs


def new_script(analyser: Any, source: str, path: str) -> Any:
    """A new jedi Script of ``source`` in the analyser's project and environment (worker thread only).
    Not the analyser's cached Scripts: parso's diff parser reuses a path's cached tree for the next text
    at that path and changes it in place, so a Script kept from an older text of the file can answer from
    the newer one (seen: an empty reference list). A new Script parses incrementally from that cache."""
    import jedi

    project = analyser._project(path)
    if project is None:
        return None
    script = jedi.Script(source, path=path, project=project)
    state = getattr(script, "_inference_state", None)
    if not analyser.flow_analysis and state is not None and hasattr(state, "flow_analysis_enabled"):
        state.flow_analysis_enabled = False
    return script


def jedi_references(source: str, offset: int, *, path: str | None = None, analyser: Any = None,
                    deadline: float | None = None) -> list[tuple[int, str]] | None:
    """The references jedi finds in this file to the name at ``offset`` of ``source``, as (offset, jedi
    type) pairs in ``source``; None past the deadline, for a huge file or on any jedi failure."""
    from engine.guidance.jedi_analyser import line_col, shared_analyser

    analyser = analyser or shared_analyser()
    if len(source) > analyser.max_chars:
        return None
    path = os.path.abspath(path) if path else os.path.abspath("untitled.py")
    line, col = line_col(source, offset)

    def run() -> list[tuple[int, str]] | None:
        try:
            script = new_script(analyser, source, path)
            if script is None:
                return None
            refs = script.get_references(line, col, scope="file")
        except Exception as e:  # jedi on arbitrary text: any failure is "no opinion"
            log.debug("jedi references failed at %s:%d: %r", path, offset, e)
            return None
        lines = Lines(source)
        out = []
        for r in refs:
            if r.module_path is None or os.path.abspath(str(r.module_path)) != path or r.line is None:
                continue
            if r.line > len(lines.starts):
                continue
            out.append((lines.offset(r.line, r.column), r.type))
        return out

    fut = analyser.submit(run)  # jedi only ever runs on the analyser's worker thread
    wait = JEDI_BUDGET_S if deadline is None else max(0.0, deadline - time.monotonic())
    try:
        result: list[tuple[int, str]] | None = fut.result(timeout=wait)
    except FutureTimeout:
        fut.cancel()
        return None
    except Exception:
        return None
    return result


@dataclass(frozen=True)
class Rename:
    """A rename jedi vouches for: ``old`` -> ``new`` at ``site`` of ``base`` (the text before the user's run
    of renaming edits), and its remaining references in this document as ``edits`` (possibly none: every
    one done already, or the name is used only in other files). ``local``: a name of one function (a
    local, a parameter), so nothing outside this document can refer to it."""

    edits: list[NextEdit]
    base: str
    site: int
    old: str
    new: str
    local: bool


def rename_edits(text: str, edits: Sequence[Edit], *, path: str | None = None, analyser: Any = None,
                 deadline: float | None = None, cursor: int | None = None) -> list[NextEdit]:
    """The remaining references of the name the last edit renamed (module docstring). ``text`` is the
    current text, ``edits`` the document's recent edits (EditHistory.edits), the last one the user's."""
    r = find_rename(text, edits, path=path, analyser=analyser, deadline=deadline, cursor=cursor)
    return r.edits if r is not None else []


def _references(base: str, site: int, old: str, outline: _Outline, *, path: str | None, analyser: Any,
                deadline: float | None, in_function: bool) -> list[tuple[int, str]] | None:
    """``old``'s references in ``base`` (the text before the user's run of renames, ``site`` one of them):
    from the syntax tree when it can say (a function's own name, a module's function or class: local.py),
    else jedi's; None when jedi does not know the site, or with ``in_function`` when the tree cannot say."""
    mine = own_references(outline.tree, base, site, old, keywords=not in_function)
    if mine is not None and not _leftovers(base, mine[1], old, set(mine[0])):
        return [(off, "name") for off in mine[0]]
    if in_function:
        return None
    module = module_references(outline.tree, base, site, old) if mine is None else None
    if module is not None:
        return [(off, "name") for off in module]
    refs = jedi_references(base, site, path=path, analyser=analyser, deadline=deadline) or []
    if all(off != site for off, _ in refs):
        return None
    return _completed(base, site, old, refs, outline, path, analyser, deadline)


def find_rename(text: str, edits: Sequence[Edit], *, path: str | None = None, analyser: Any = None,
                deadline: float | None = None, cursor: int | None = None, in_function: bool = False
                ) -> Rename | None:
    """The rename the last edit made, with its remaining references here; None when the last edit is no
    rename or a guard refuses it (module docstring). ``in_function``: only a parameter's or a local's
    references in its own function, from the syntax tree (no jedi; a parameter's ``name=`` at calls left out):
    a first part, for a renamed parameter whose calls jedi must find."""
    if not edits:
        return None
    before = edits[-1].undo(text)
    ch = identifier_change(before, edits[-1])
    if ch is None:
        return None
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
    outline = _Outline.of(base)
    if outline is None:
        return None
    refs = _references(base, base_ch.start, ch.old, outline, path=path, analyser=analyser, deadline=deadline,
                       in_function=in_function)
    if refs is None:
        return None
    imports = outline.imports
    attribute = any(base[:off].rstrip().endswith(".") for off, _ in refs)
    span = None if attribute else outline.holder([off for off, _ in refs])
    if new_re.search(base):
        # the new name exists already: within the one function holding every reference (a local's or a
        # parameter's), or anywhere for names beyond one function, it may be a switch to that name or a
        # rename into a clash
        if span is None or new_re.search(base, span[0], span[1]):
            return None
    # a parameter's keyword at call sites elsewhere aside, the function whose name this is
    own = None if attribute else outline.holder([off for off, _ in refs if not _keyword_at(base, off, len(ch.old))])
    if own is not None and _leftovers(base, own, ch.old, {off for off, _ in refs},
                                      outline.comprehensions_binding(ch.old)):
        return None
    out = _mapped(text, base, [off for off, _ in refs], ch, imports, list(edits[first:]))
    if out is None or len(out) > MAX_REFERENCES:
        return None
    # ``base`` parses, and the result is ``base`` with some whole words ``old`` replaced by ``new``: that keeps
    # the grammar unless one of them can be a string's prefix or a soft keyword (a hand edit of ``b"..."``)
    if out and _grammar_word(ch) and not parses(apply_all(text, out)):
        return None
    if cursor is None:
        cursor = edits[-1].new_end
    return Rename(by_cursor(out, cursor), base, base_ch.start, ch.old, ch.new, local=span is not None)


def _grammar_word(ch: Renamed) -> bool:  # a string's prefix, or a soft keyword
    return any(w.lower() in ("r", "u", "b", "f", "br", "rb", "fr", "rf") or w in keyword.softkwlist for w in (ch.old, ch.new))


def _holds(text: str, off: int, name: str) -> bool:
    """Does ``text`` hold ``name`` at ``off`` as a whole word?"""
    n = len(name)
    return text[off:off + n] == name and not (off > 0 and _is_word(text[off - 1])) and \
        not (off + n < len(text) and _is_word(text[off + n]))


def _mapped(text: str, base: str, refs: list[int], ch: Renamed, imports: set[int],
            later: list[Edit]) -> list[NextEdit] | None:
    """jedi's references in ``base`` as renames of the current ``text`` (``later``: the edits between);
    None when one of them is not the name or sits on an import line (do not guess)."""
    lines = Lines(base)
    n = len(ch.old)
    out = []
    seen = set()
    for off in refs:
        if not _holds(base, off, ch.old) or lines.line_of(off) + 1 in imports:
            return None
        cur = _map_offset(off, n, later)
        if cur is None or cur in seen or not _holds(text, cur, ch.old):
            continue  # edited since (renamed by hand, or changed otherwise)
        seen.add(cur)
        out.append(NextEdit(cur, cur + n, ch.old, ch.new, "rename", RENAME_CONFIDENCE))
    return out
