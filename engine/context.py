"""Repository context for the prompt: chunks of other open files, definitions of the names the current file
imports from the workspace, definitions in the current file too far from the cursor for the prompt window to
show, and recent edits as small diffs (issue 17).

Pure logic plus guarded file reads; no pygls. The server keeps one ``Workspace`` per session, tells it about
documents (``open`` / ``change`` / ``focus`` / ``close``) and, in idle time, asks ``gather`` for a
``ContextBlock``; ``engine.prompt.comment_ids`` turns the block into the token ids put in front of the file
window (each chunk as comments at the start of the FIM prefix; ``context_ids``: Qwen2.5-Coder's repository
format, EngineConfig.context_layout). Chunk selection follows llama.vim's ring buffer: chunks of at
most 64 lines, dropped when > 0.5 word-Dice similar to the text around the cursor (they make the model copy),
merged when > 0.9 similar to a chunk already taken.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("flint.context")

CHUNK_LINES = 64  # llama.vim's chunk size
MAX_FILE_BYTES = 1_000_000  # larger files are generated or data: never read
DROP_SIMILAR = 0.5  # a chunk this similar to the text around the cursor is dropped
MERGE_SIMILAR = 0.9  # a chunk this similar to one already taken is a duplicate
DEFINITION_SOURCES = ("import", "file")  # outlines of definitions: merged into one stub per file
AROUND_LINES = 32  # lines either side of the cursor compared against chunks / searched for used names
DEFAULT_BUDGET = 512  # tokens; see docs/benchmarks/context.md
DEFAULT_SOURCES = ("imports", "file", "open", "edits")

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def approx_tokens(text: str) -> int:
    """A tokenizer-free token estimate for code (~3.3 characters per token)."""
    return len(text) * 3 // 10 + 1


# ---- similarity ---------------------------------------------------------------------------------------
def words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text))


def dice(a: frozenset[str], b: frozenset[str]) -> float:
    """Word-Dice similarity of two word sets: 2|a & b| / (|a| + |b|)."""
    if not a or not b:
        return 0.0
    return 2 * len(a & b) / (len(a) + len(b))


# ---- chunks --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Chunk:
    path: str  # as shown in the block ("# Path: ..."): relative to the workspace folder
    text: str
    source: str  # "open" | "import" | "file" | "edit"
    line: int = 0  # first line (0-based) of the chunk in its file
    score: float = 0.0  # higher first; set by the source

    @property
    def label(self) -> str:
        """What status / `flint complete --json` shows: path:line (1-based) and the source."""
        return f"{self.path}:{self.line + 1} ({self.source})"

    @property
    def key(self) -> tuple[str, str]:
        return (self.path, self.text)


def split_chunks(text: str, max_lines: int = CHUNK_LINES) -> list[tuple[int, str]]:
    """(first line, text) pieces of at most ``max_lines`` lines, cut preferably where a top-level statement
    starts (a line with no indentation after a blank line), so a chunk tends to hold whole definitions."""
    lines = text.splitlines(keepends=True)
    out: list[tuple[int, str]] = []
    start = 0
    while start < len(lines):
        end = min(len(lines), start + max_lines)
        if end < len(lines):
            # the last top-level start in the second half of the window
            for j in range(end, start + max_lines // 2, -1):
                ln = lines[j]
                if ln[:1] not in (" ", "\t", "\n", "\r", "") and lines[j - 1].strip() == "":
                    end = j
                    break
        piece = "".join(lines[start:end])
        if piece.strip():
            out.append((start, piece))
        start = end
    return out


def select_chunks(candidates: Iterable[Chunk], around: str, budget: int,
                  count: Callable[[str], int] = approx_tokens) -> list[Chunk]:
    """The best-scored chunks that fit ``budget`` tokens: those too similar to ``around`` (the text near the
    cursor) dropped, near-duplicates of a better chunk dropped (the better one stands for both)."""
    near = words(around)
    taken: list[tuple[Chunk, frozenset[str]]] = []
    used = 0
    for c in sorted(candidates, key=lambda c: -c.score):
        w = words(c.text)
        # the file's own definitions share words with the cursor's text by construction (the names used
        # there) and are never in it (they lie outside the window): a short outline next to a short
        # neighbourhood must not count as a copy of it
        if c.source != "file" and dice(w, near) > DROP_SIMILAR:
            log.debug("context: %s dropped, too similar to the cursor's text", c.label)
            continue
        if any(c.key == t.key or dice(w, tw) > MERGE_SIMILAR for t, tw in taken):
            continue
        cost = count(c.path) + count(c.text) + 2
        if used + cost > budget:
            continue  # a smaller, lower-scored chunk may still fit
        taken.append((c, w))
        used += cost
    return [c for c, _ in taken]


def merge_by_file(chunks: list[Chunk]) -> list[Chunk]:
    """Definitions taken from one module (or from the current file, source "file") become one chunk in source
    order (a stub of what is used), so the block names each file once per source; other chunks stay as they
    are."""
    groups: dict[tuple[str, str], list[Chunk]] = {}
    out: list[Chunk] = []
    for c in chunks:
        if c.source in DEFINITION_SOURCES:
            if (c.source, c.path) not in groups:
                groups[(c.source, c.path)] = []
                out.append(c)  # placeholder, replaced below
            groups[(c.source, c.path)].append(c)
        else:
            out.append(c)
    merged = []
    for c in out:
        if c.source not in DEFINITION_SOURCES:
            merged.append(c)
            continue
        parts = sorted(groups[(c.source, c.path)], key=lambda x: x.line)
        text = "\n".join(x.text.rstrip("\n") + "\n" for x in parts)
        merged.append(Chunk(c.path, text, c.source, parts[0].line, max(x.score for x in parts)))
    return merged


def order_stably(previous: Iterable[Chunk], chosen: list[Chunk]) -> list[Chunk]:
    """The block's order: chunks the previous block had keep their order at the front (their KV stays valid
    up to the first change), new ones follow, best last (nearest the file being completed)."""
    keep = {c.key for c in chosen}
    head = [c for c in previous if c.key in keep]
    seen = {c.key for c in head}
    tail = sorted((c for c in chosen if c.key not in seen), key=lambda c: c.score)
    return head + tail


@dataclass(frozen=True)
class ContextBlock:
    """What goes in front of the file window: the chunks, each with its path, for the file ``current_path``
    of the repository ``repo`` (engine.prompt.comment_ids / context_ids lay it out in tokens)."""

    repo: str
    chunks: tuple[Chunk, ...]
    current_path: str

    def digest(self) -> str:
        """Identity of the block for caches (a suggestion made with other context is another entry)."""
        h = hashlib.sha256()
        for part in (self.repo, self.current_path, *(f"{c.path}\0{c.text}" for c in self.chunks)):
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\1")
        return h.hexdigest()[:16]

    def labels(self) -> list[str]:
        return [c.label for c in self.chunks]


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
    for m in re.finditer(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import[ \t]*(?:\([^)]*\)|[^\n]*)|import[ \t]+[^\n]*)",
                         source, re.M):
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
    real_roots = _real_roots(roots)
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


def _real_roots(roots: Iterable[Path]) -> list[Path]:
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


_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import[ \t]*(?:\([^)]*\)|[^\n]*)|import[ \t]+[^\n]*)", re.M)


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


# ---- the session's view of the workspace -----------------------------------------------------------------
@dataclass
class _Doc:
    text: str
    base: str  # the text the pending edit diff starts from
    focused: float = 0.0
    edited: float = 0.0


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

    def __post_init__(self) -> None:
        self.roots = [Path(r) for r in self.roots]
        self._real = _real_roots(self.roots)
        self._lock = threading.Lock()
        # a module's definitions by (file, text hash): parsing a big module costs tens of ms
        self._defs: dict[tuple[Path, int], dict[str, tuple[int, str]] | None] = {}

    def set_roots(self, roots: Iterable[Path]) -> None:
        """The workspace folders (the client's, from initialize) imports resolve in."""
        with self._lock:
            self.roots = [Path(r) for r in roots]
            self._real = _real_roots(self.roots)
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
               window_before: int = 6000, window_after: int = 600) -> ContextBlock | None:
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
        if "imports" in self.sources and file.suffix in (".py", ".pyi"):
            cands += self.import_chunks(file, text, offset, docs)
        if "file" in self.sources and file.suffix in (".py", ".pyi") and usable_text(text, str(file)):
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
            every = (self._definitions(mod, src) if mod.suffix in (".py", ".pyi") else None) or {}
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
        every = parsed_definitions(src)
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
