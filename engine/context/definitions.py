"""Outlines of definitions for the repository context (pure): a Python file's top-level definitions as the
model needs them to use a name (signature and docstring, a class's members, short assignments), parsed
with ``ast`` or, for other languages and broken files, by regex; and the current file's own definitions
that lie outside the prompt window."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable

from engine.syntax import language_for_path, outlines, parse

# ---- definitions ---------------------------------------------------------------------------------------
_Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _doc_lines(node: _Def, lines: list[str], max_doc_lines: int) -> list[str]:
    if max_doc_lines <= 0:
        return []  # signatures only
    d = node.body[0] if node.body else None
    if not isinstance(d, ast.Expr) or not isinstance(d.value, ast.Constant) or not isinstance(d.value.value, str):
        return []
    seg = lines[d.lineno - 1: (d.end_lineno or d.lineno)]
    if len(seg) > max_doc_lines:
        indent = seg[0][: len(seg[0]) - len(seg[0].lstrip())]
        seg = seg[: max_doc_lines - 1] + [f'{indent}..."""\n']
    return seg


def _header(node: _Def, lines: list[str]) -> list[str]:
    """Decorators and the def/class line(s) up to the colon that opens the body."""
    first = min([d.lineno for d in node.decorator_list] + [node.lineno])
    last = node.body[0].lineno - 1 if node.body else node.lineno
    return lines[first - 1: max(last, node.lineno)]  # `def f(): return 1` is one line


MAX_OUTLINE_LINES = 48  # a huge class shows its first members only


def _outline(node: _Def, lines: list[str], max_doc_lines: int) -> str:
    """A definition as the model needs it to call it: signature and docstring (a class: also its
    attributes' lines and its methods' signatures with the first docstring line)."""
    out = _header(node, lines) + _doc_lines(node, lines, max_doc_lines)
    if isinstance(node, ast.ClassDef):
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if item.name.startswith("_") and item.name not in ("__init__", "__call__", "__enter__"):
                    continue
                out += _header(item, lines) + _doc_lines(item, lines, 1)
                indent = " " * (item.col_offset + 4)
                out.append(f"{indent}...\n")
            elif isinstance(item, (ast.AnnAssign, ast.Assign)) and item.end_lineno and item.end_lineno - item.lineno < 3:
                out += lines[item.lineno - 1: item.end_lineno]
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        indent = " " * (node.col_offset + 4)
        out.append(f"{indent}...\n")
    if len(out) > MAX_OUTLINE_LINES:
        out = out[:MAX_OUTLINE_LINES] + ["    ...\n"]
    return "".join(ln if ln.endswith("\n") else ln + "\n" for ln in out)


MAX_ASSIGN_LINE = 160  # characters; a data table on one line would cost the whole budget


def _clip_line(line: str) -> str:
    line = line.rstrip("\r\n")
    return (line[:MAX_ASSIGN_LINE].rstrip() + " ...\n") if len(line) > MAX_ASSIGN_LINE else line + "\n"


def _assignment(node: ast.Assign | ast.AnnAssign, lines: list[str]) -> str:
    """A module-level assignment as the model needs it to use the name: short ones verbatim, a long one's
    first line (its name, type and the start of its value), long lines clipped."""
    last = node.end_lineno or node.lineno
    seg = lines[node.lineno - 1: last]
    if last - node.lineno >= 4:
        seg = seg[:1] + ["    ...\n"]
    return "".join(_clip_line(ln) for ln in seg)


def parsed_definitions(source: str, names: Iterable[str] | None = None,
                       max_doc_lines: int = 12) -> dict[str, tuple[int, str]] | None:
    """Top-level definitions of ``source`` (all when ``names`` is None) as name -> (line, outline):
    functions and classes by signature and docstring, assignments as ``_assignment`` shows them; None when
    ``source`` does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    want = None if names is None else set(names)
    lines = source.splitlines(keepends=True)
    out: dict[str, tuple[int, str]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if want is None or node.name in want:
                out[node.name] = (node.lineno - 1, _outline(node, lines, max_doc_lines))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and (want is None or t.id in want):
                    out[t.id] = (node.lineno - 1, _assignment(node, lines))
    return out


def python_definitions(source: str, names: Iterable[str] | None = None, max_doc_lines: int = 12) -> dict[str, tuple[int, str]]:
    """``parsed_definitions``, or for a file that does not parse ``regex_definitions``."""
    defs = parsed_definitions(source, names, max_doc_lines)
    return regex_definitions(source, names) if defs is None else defs


_DEF_RE = r"^[ \t]*(?:export[ \t]+)?(?:pub(?:\([^)]*\))?[ \t]+)?(?:async[ \t]+)?" \
          r"(?:def|class|function|fn|func|const|let|var|type|interface|struct|enum|trait)[ \t]+{name}\b"


# `NAME = ...` / `NAME: T = ...` at the start of a line (a module-level assignment in Python), not `==`
_ASSIGN_RE = r"^{name}[ \t]*(?::[^=\n]*)?=(?!=)"


def syntax_definitions(source: str, path: str, names: Iterable[str] | None = None
                       ) -> dict[str, tuple[int, str]] | None:
    """Top-level definitions of a file in a language other than Python, from its tree-sitter parse (outlines:
    signatures, doc comments, fields; bodies elided), as name -> (line, outline). None: Python (``ast``
    reads it), a language without a grammar, or a text too big to parse: the caller keeps the regexes."""
    language = language_for_path(path)
    if language is None or language == "python":
        return None
    tree = parse(language, source)
    return None if tree is None else outlines(tree, names)


def regex_definitions(source: str, names: Iterable[str] | None, max_lines: int = 8) -> dict[str, tuple[int, str]]:
    """A cheap fallback for files ``ast`` cannot read (other languages, a broken file): the line defining each
    name and what follows it up to a blank line (at most ``max_lines``); an assignment: its line."""
    out: dict[str, tuple[int, str]] = {}
    if names is None:
        return out
    lines = source.splitlines(keepends=True)
    for name in names:
        m = re.search(_DEF_RE.format(name=re.escape(name)), source, re.M)
        a = re.search(_ASSIGN_RE.format(name=re.escape(name)), source, re.M)
        if a is not None and (m is None or a.start() < m.start()):
            first = source.count("\n", 0, a.start())
            out[name] = (first, _clip_line(lines[first]))
            continue
        if m is None:
            continue
        first = source.count("\n", 0, m.start())
        seg: list[str] = []
        for ln in lines[first: first + max_lines]:
            if seg and not ln.strip():
                break
            seg.append(ln)
        out[name] = (first, "".join(seg))
    return out


# ---- the current file's own definitions (Python) -------------------------------------------------------
# a line starting a top-level statement: at column 0, not a clause of the statement above (else, except, ...)
# and not its closing bracket, comment or string
_TOP_START = re.compile(r"(?!(?:else|elif|except|finally)\b)[A-Za-z_@]")
_PY_DEFINED = re.compile(r"\b(?:def|class)[ \t]+([A-Za-z_]\w*)|^([A-Za-z_]\w*)[ \t]*[:=]", re.M)


def _top_start_before(text: str, pos: int) -> int:
    """The start of the last line at or before ``pos`` that begins a top-level statement (its decorators
    included), else 0: ``text[:result]`` holds whole statements only, all of them ending before ``pos``."""
    p = text.rfind("\n", 0, pos) + 1
    while p > 0 and not _TOP_START.match(text, p):
        p = text.rfind("\n", 0, p - 1) + 1
    while p > 0:  # a decorator belongs to the definition below it
        q = text.rfind("\n", 0, p - 1) + 1
        if not text.startswith("@", q):
            break
        p = q
    return p


def _top_start_after(text: str, pos: int) -> int:
    """The start of the first line at or after ``pos`` that begins a top-level statement, else len(text)."""
    if pos <= 0:
        p = 0
    elif text[pos - 1: pos] == "\n":
        p = pos
    else:
        nl = text.find("\n", pos)
        p = len(text) if nl < 0 else nl + 1
    while p < len(text) and not _TOP_START.match(text, p):
        nl = text.find("\n", p)
        p = len(text) if nl < 0 else nl + 1
    return p


def file_definitions(text: str, names: Iterable[str], lo: int, hi: int,
                     defs: Callable[[str], dict[str, tuple[int, str]] | None] = parsed_definitions,
                     ) -> dict[str, tuple[int, str]]:
    """Top-level definitions of ``names`` in the Python ``text`` lying wholly outside its characters
    ``[lo, hi)`` (what the prompt window shows) as name -> (line, outline).

    Only the whole statements before and after the window are parsed (``defs``: all definitions of a piece,
    None when it does not parse): the text being typed, which rarely parses, is in the window, and the pieces
    stay the same while the user types there, so a cache of ``defs`` keeps hitting. A piece that does not
    parse either (an unfinished edit elsewhere) falls back to ``regex_definitions``."""
    want = set(names)
    out: dict[str, tuple[int, str]] = {}
    head_end = _top_start_before(text, lo) if lo > 0 else 0
    tail_start = _top_start_after(text, hi) if hi < len(text) else len(text)
    # the head last: a name bound both above and below the cursor is the one above (it ran first)
    for start, piece in ((tail_start, text[tail_start:]), (0, text[:head_end])):
        if not piece.strip():
            continue
        found = defs(piece)
        if found is None:
            # only names the piece may define: a regex search per name near the cursor would be slow
            candidates = {n for pair in _PY_DEFINED.findall(piece) for n in pair if n}
            found = regex_definitions(piece, want & candidates)
        base = text.count("\n", 0, start)
        for name, (line, outline) in found.items():
            if name in want:
                out[name] = (base + line, outline)
    return out
