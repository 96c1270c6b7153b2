"""What the repository context sources read (engine/context/workspace.py makes chunks of it): guarded reads of
workspace files, the workspace modules a Python file imports, outlines of definitions (parsed, or by regex
for other languages and broken files), the current file's definitions outside the prompt window, the names
used near the cursor, and recent edits as small diffs.

Pure logic plus guarded file reads: nothing outside the workspace folders is read.
"""

from __future__ import annotations

import ast
import difflib
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("flint.context")

MAX_FILE_BYTES = 1_000_000  # larger files are generated or data: never read
AROUND_LINES = 32  # lines either side of the cursor compared against chunks / searched for used names


# ---- guarded file access -------------------------------------------------------------------------------
def inside(path: Path, roots: Iterable[Path]) -> Path | None:
    """The real path if it lies under one of the (real) workspace roots, else None (symlink loops and
    vanished files: None)."""
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop before Python 3.13
        log.debug("context: %s skipped (%s)", path, e)
        return None
    for r in roots:
        if real == r or r in real.parents:
            return real
    log.debug("context: %s skipped, outside the workspace", path)
    return None


def read_text(path: Path, roots: Iterable[Path], max_bytes: int = MAX_FILE_BYTES) -> str | None:
    """A workspace file's text, or None (outside the workspace, vanished, a loop, huge, binary, not UTF-8)."""
    real = inside(path, roots)
    if real is None:
        return None
    try:
        if not real.is_file() or real.stat().st_size > max_bytes:
            log.debug("context: %s skipped (not a regular file or larger than %d bytes)", path, max_bytes)
            return None
        data = real.read_bytes()
    except OSError as e:
        log.debug("context: %s skipped (%s)", path, e)
        return None
    return decode_text(data, str(path))


def decode_text(data: bytes, name: str = "") -> str | None:
    if b"\0" in data[:8192]:
        log.debug("context: %s skipped (binary)", name)
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        log.debug("context: %s skipped (not UTF-8)", name)
        return None


def usable_text(text: str, name: str = "", max_bytes: int = MAX_FILE_BYTES) -> bool:
    """Whether an open document's text may feed the context (not huge, not binary)."""
    if len(text) > max_bytes or "\0" in text[:8192]:
        log.debug("context: %s skipped (huge or binary)", name)
        return False
    return True


# ---- imports (Python) ----------------------------------------------------------------------------------
# an import statement (a parenthesized name list may span lines)
_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import[ \t]*(?:\([^)]*\)|[^\n]*)|import[ \t]+[^\n]*)", re.M)


@dataclass(frozen=True)
class Imported:
    local: str  # the name bound in the current file
    module: Path  # the workspace file it comes from
    attr: str | None  # the name inside that module (None: the module itself is bound)


def _import_nodes(source: str) -> list[ast.Import | ast.ImportFrom]:
    """Import statements of a file; a file mid-edit rarely parses, so then each import statement alone."""
    try:
        tree = ast.parse(source)
        return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    except (SyntaxError, ValueError):
        pass
    out: list[ast.Import | ast.ImportFrom] = []
    for m in _IMPORT_LINE.finditer(source):
        try:
            node = ast.parse(m.group(0).strip()).body
        except (SyntaxError, ValueError):
            continue
        out.extend(n for n in node if isinstance(n, (ast.Import, ast.ImportFrom)))
    return out


def _module_file(base: Path, parts: list[str]) -> Path | None:
    p = base.joinpath(*parts) if parts else base
    for cand in (p.with_name(p.name + ".py") if parts else None, p / "__init__.py"):
        if cand is not None and cand.is_file():
            return cand
    return None


def search_bases(roots: Iterable[Path]) -> list[Path]:
    """Where absolute imports are looked up: each workspace folder and its src/ (the src layout)."""
    out = []
    for r in roots:
        out.append(r)
        if (r / "src").is_dir():
            out.append(r / "src")
    return out


def resolve_imports(source: str, file: Path, roots: list[Path]) -> list[Imported]:
    """The names ``source`` (the text of ``file``) imports from Python files under ``roots``. Imports
    resolving outside the workspace (installed packages, the stdlib) are never read."""
    real_roots = resolve_roots(roots)
    bases = search_bases(real_roots)
    out: list[Imported] = []
    for node in _import_nodes(source):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                target = _find_module(bases, parts)
                real = inside(target, real_roots) if target is not None else None
                if real is not None:
                    # `import a.b` binds a; `import a.b as m` binds m to a.b
                    out.append(Imported(a.asname or a.name, real, None))
            continue
        mod_parts = node.module.split(".") if node.module else []
        if node.level:
            base: Path | None = file.parent
            for _ in range(node.level - 1):
                base = base.parent if base is not None else None
            mbases = [base] if base is not None else []
        else:
            mbases = bases
        for a in node.names:
            if a.name == "*":
                continue
            local = a.asname or a.name
            sub = _find_module(mbases, mod_parts + [a.name])  # `from pkg import mod`
            real = inside(sub, real_roots) if sub is not None else None
            if real is not None:
                out.append(Imported(local, real, None))
                continue
            target = _find_module(mbases, mod_parts)
            real = inside(target, real_roots) if target is not None else None
            if real is not None:
                out.append(Imported(local, real, a.name))
    return out


def _find_module(bases: Iterable[Path], parts: list[str]) -> Path | None:
    for b in bases:
        f = _module_file(b, parts)
        if f is not None:
            return f
    return None


def resolve_roots(roots: Iterable[Path]) -> list[Path]:
    out = []
    for r in roots:
        try:
            out.append(Path(r).resolve(strict=True))
        except (OSError, RuntimeError):
            log.debug("context: workspace folder %s skipped", r)
    return out


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


def names_near(text: str, offset: int, lines: int = AROUND_LINES) -> list[str]:
    """Identifiers (and dotted ``a.b`` pairs as ``a.b``) used near ``offset``, nearest first (import
    statements bind names, they do not use them)."""
    start, end = around_span(text, offset, lines)
    window = _IMPORT_LINE.sub(lambda m: " " * len(m.group(0)), text[start:end])
    found: dict[str, int] = {}
    for m in re.finditer(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?", window):
        d = abs(start + m.start() - offset)
        for name in (m.group(0), m.group(0).split(".")[0]):
            if name not in found or d < found[name]:
                found[name] = d
    return sorted(found, key=lambda n: found[n])


def around_span(text: str, offset: int, lines: int = AROUND_LINES) -> tuple[int, int]:
    start = offset
    for _ in range(lines):
        start = text.rfind("\n", 0, max(0, start - 1)) + 1 if start > 0 else 0
        if start == 0:
            break
    end = offset
    for _ in range(lines):
        nl = text.find("\n", end + 1)
        end = len(text) if nl < 0 else nl
        if nl < 0:
            break
    return start, end


# ---- recent edits --------------------------------------------------------------------------------------
def edit_diff(path: str, before: str, after: str, context: int = 2, max_lines: int = 24) -> str | None:
    """A small unified diff of one edit (None when nothing changed or the diff is too large to help)."""
    if before == after:
        return None
    diff = list(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                     f"a/{path}", f"b/{path}", n=context))
    if not diff or len(diff) > max_lines:
        return None
    return "".join(ln if ln.endswith("\n") else ln + "\n" for ln in diff)

