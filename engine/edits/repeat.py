"""Exact next edits, the literal repeat (issue 37; engine/edits/exact.py has the whole story).

The last edit replaced a literal token sequence by another: its other occurrences, on whole tokens, in the
region being edited, outside comments and other strings, when the file with all of them applied parses.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from engine.edits.common import (
    MAX_SUGGESTIONS,
    REGION_LINES,
    REPEAT_CONFIDENCE,
    Lines,
    NextEdit,
    apply_all,
    by_cursor,
    parse,
    parses,
)
from engine.edits.history import Edit
from engine.edits.lexer import COMMENT, NAME, SPACE, STRING, Token, is_literal_sequence, tokens


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
    lines = Lines(text)
    line = lines.line_of(pos)  # 0-based
    lo_line, hi_line = max(0, line - REGION_LINES), min(len(lines.starts) - 1, line + REGION_LINES)
    if python:
        try:
            tree = parse(text)
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

