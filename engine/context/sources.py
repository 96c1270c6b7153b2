"""What the repository context sources read (engine/context/workspace.py makes chunks of it): guarded reads of
workspace files, the workspace modules a Python file imports, the names used near the cursor, and recent
edits as small diffs. Outlines of definitions: engine/context/definitions.py.

Pure logic plus guarded file reads: nothing outside the workspace folders is read.
"""

from __future__ import annotations

import ast
import difflib
import logging
import re
from collections.abc import Iterable
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


def imported_names(source: str) -> dict[str, bool]:
    """The names ``source``'s import statements bind (anywhere in it), each with whether it is bound to a
    module for sure (``import a.b`` binds the module ``a``; ``from a import b`` may bind either)."""
    out: dict[str, bool] = {}
    for node in _import_nodes(source):
        for a in node.names:
            if a.name == "*":
                continue
            if isinstance(node, ast.Import):
                out[a.asname or a.name.split(".")[0]] = True
            else:
                out.setdefault(a.asname or a.name, False)
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

