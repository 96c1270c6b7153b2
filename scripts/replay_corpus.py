"""The code bench_replay types: function bodies from pinned PyPI packages, chosen by a fixed rule and split into a
tuning half and a validation half (issue 32).

No corpus of Flint's holds these packages: not the standard library the trimmed LM head is built from
(engine/model/lm_head.py), not pygls/lsprotocol (bench_quality), not engine/data/eval_prompts.json, not Flint, and none
of the packages other benchmarks type (bench_context: click, marshmallow, tomlkit, httpx; bench_served: boltons,
toolz, humanize; the replay reports before issue 32: more-itertools, toolz, boltons).

The rule (``choose``), so that the list is reproducible and nobody picks functions a policy does well on:

1. every module of the package's wheel (``*.py`` under its top-level packages, tests excluded);
2. every function at module level or directly in a module-level class, whose body after its docstring has
   ``BODY_LINES`` lines and ``BODY_CHARS`` characters, defines nothing inside (no nested def, class or lambda:
   typing one would mostly test nested indentation), and whose name is defined once in its scope (not a
   property's setter or an overload);
3. per package, ordered by sha256 of ``package:module:qualname``, the first ``PER_PACKAGE`` of them;
4. per package, in (module, qualname) order, alternately tuning, validation, tuning, ... (``split_of``): both
   halves span every package with the same number of functions.

The whole body is typed. With 10 packages and 6 functions each, a half is 30 functions over all 10 packages:
validation 4,089 characters (3,411 keystrokes once Enter's auto-indent writes the indentation), tuning 3,999
(3,311), about 7 minutes of the ``steady`` typist (8 characters/s) before accepts, 10 of ``think``. Each half
holds 11 functions in modules of 2,200-2,700 lines (pycodestyle.py, pyflakes/checker.py,
sortedcontainers/sortedlist.py, tabulate/__init__.py): the report's long-file rows. ``python
scripts/replay_corpus.py`` prints the list.
"""

from __future__ import annotations

import ast
import hashlib
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

# (package, version): pure-Python wheels, fetched with ``pip download --no-deps`` at run time.
PACKAGES: tuple[tuple[str, str], ...] = (
    ("cachetools", "5.5.0"),
    ("jmespath", "1.0.1"),
    ("pathspec", "0.12.1"),
    ("pycodestyle", "2.12.1"),
    ("pyflakes", "3.2.0"),
    ("python-dateutil", "2.9.0.post0"),
    ("sortedcontainers", "2.4.0"),
    ("sqlparse", "0.5.1"),
    ("tabulate", "0.9.0"),
    ("toml", "0.10.2"),
)
BODY_LINES = (3, 12)
BODY_CHARS = (80, 180)
PER_PACKAGE = 6  # with BODY_CHARS, what keeps a half within 6-10 minutes of the steady typist
SPLITS = ("validation", "tuning")
# Validation functions read while debugging leave validation for tuning (issue 47): their text is in
# tests/test_postprocess_syntax.py (immer's revokeScope, has) and tests/test_syntax_queries.py (either's either_with,
# smallvec's resize), so a fix was fitted to them. Keys as Spec.key.
READ_WHILE_DEBUGGING = frozenset({
    "immer:package/src/core/scope.ts:revokeScope",
    "immer:package/src/utils/common.ts:has",
    "librust-either-dev:usr/share/cargo/registry/either-1.6.1/src/lib.rs:Either<L, R>.either_with",
    "librust-smallvec-dev:usr/share/cargo/registry/smallvec-1.9.0/src/lib.rs:SmallVec<A>.resize",
})
LONG_FILE_LINES = 2000  # "a long file" in the report's first-suggestion rows


@dataclass
class Segment:
    name: str
    language: str
    path: str
    before: str  # file text before the typed region
    typed: str  # the region the user types (ends before a line break that stays in the document)
    after: str  # file text after the region (starts with that line break)
    file_lines: int = 0
    split: str = ""


@dataclass(frozen=True)
class Spec:
    """One chosen function: where it is and which half it belongs to."""

    package: str
    version: str
    module: str  # path inside the wheel
    qualname: str  # "func" or "Class.method"
    split: str = ""
    chars: int = 0  # of its body (what is typed)

    @property
    def key(self) -> str:
        return f"{self.package}:{self.module}:{self.qualname}"


def fetch_package(pkg: str, version: str, cache: Path) -> Path:
    """The unpacked wheel of ``pkg==version`` (pip download --no-deps, once per cache directory)."""
    dest = cache / f"{pkg}-{version}"
    if not (dest / ".done").exists():
        dl = cache / "wheels"
        dl.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                        "--quiet", "-d", str(dl), f"{pkg}=={version}"], check=True)
        norm = re.sub(r"[-_.]+", "_", pkg).lower()
        wheels = [w for w in dl.glob("*.whl") if w.name.lower().startswith(f"{norm}-{version}-")]
        if not wheels:
            raise SystemExit(f"pip download gave no wheel for {pkg}=={version} in {dl}")
        shutil.rmtree(dest, ignore_errors=True)
        with zipfile.ZipFile(wheels[0]) as z:
            z.extractall(dest)
        (dest / ".done").write_text("")
    return dest


def find_def(tree: ast.Module, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The function ``func`` at module level or ``Class.method`` in a module-level class."""
    *outer, name = qualname.split(".")
    scope: list[ast.stmt] = tree.body
    if len(outer) > 1:
        raise ValueError(f"{qualname!r}: only func or Class.method")
    if outer:
        cls = next((n for n in scope if isinstance(n, ast.ClassDef) and n.name == outer[0]), None)
        if cls is None:
            raise ValueError(f"no top-level class {outer[0]!r}")
        scope = cls.body
    node = next((n for n in scope if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name), None)
    if node is None:
        raise ValueError(f"no top-level function {qualname!r}")
    return node


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _body_span(node: ast.FunctionDef | ast.AsyncFunctionDef, starts: list[int]) -> tuple[int, int] | None:
    body = node.body
    has_doc = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and isinstance(body[0].value.value, str)
    if has_doc and len(body) == 1:
        return None
    first = body[1] if has_doc else body[0]
    # node.end_lineno is 1-based: the next line's start, minus its "\n"
    return starts[first.lineno - 1], starts[node.end_lineno] - 1


def body_region(text: str, func: str) -> tuple[int, int]:
    """Character offsets (start, end) of a function's body after its docstring (``func`` or ``Class.method``):
    whole lines, ``end`` before the last line break (the cursor types before it)."""
    span = _body_span(find_def(ast.parse(text), func), _line_starts(text))
    if span is None:
        raise ValueError(f"{func}: only a docstring")
    return span


def defines_inside(node: ast.AST) -> bool:
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda)
               for stmt in node.body for n in ast.walk(stmt))


def candidates(text: str, lines: tuple[int, int] = BODY_LINES, chars: tuple[int, int] = BODY_CHARS
               ) -> list[tuple[str, int]]:
    """(qualname, body characters) of the functions in ``text`` rule 2 admits."""
    tree = ast.parse(text)
    starts = _line_starts(text)
    defs: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for n in tree.body:
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            defs.append((n.name, n))
        elif isinstance(n, ast.ClassDef):
            defs += [(f"{n.name}.{m.name}", m) for m in n.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)]
    seen = [q for q, _ in defs]
    out = []
    for qual, node in defs:
        span = _body_span(node, starts)
        # a name defined twice (a property's setter, an overload) is no single function to find again
        if span is None or defines_inside(node) or seen.count(qual) > 1:
            continue
        body = text[span[0]: span[1]]
        n_lines = body.count("\n") + 1
        if lines[0] <= n_lines <= lines[1] and chars[0] <= len(body) <= chars[1]:
            out.append((qual, len(body)))
    return out


def rank(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def split_of(specs: list[Spec]) -> list[Spec]:
    """Rule 4: per package, in (module, qualname) order, alternately tuning and validation; a function in
    ``READ_WHILE_DEBUGGING`` is tuning whatever its turn."""
    out: list[Spec] = []
    by_pkg: dict[str, list[Spec]] = {}
    for s in specs:
        by_pkg.setdefault(s.package, []).append(s)
    for pkg in sorted(by_pkg):
        for i, s in enumerate(sorted(by_pkg[pkg], key=lambda s: (s.module, s.qualname))):
            half = "tuning" if i % 2 == 0 or s.key in READ_WHILE_DEBUGGING else "validation"
            out.append(Spec(s.package, s.version, s.module, s.qualname, half, s.chars))
    return out


def wheel_modules(root: Path) -> list[Path]:
    """Rule 1: the wheel's modules (not its tests, metadata or vendored copies)."""
    skip = re.compile(r"(^|/)(tests?|testing|_vendor|vendor)(/|$)|(^|/)(test_[^/]*|conftest|__main__|_version)\.py$")
    return sorted(p for p in root.rglob("*.py")
                  if ".dist-info" not in str(p) and not skip.search(p.relative_to(root).as_posix()))


def choose(cache: Path, packages: tuple[tuple[str, str], ...] = PACKAGES, per_package: int = PER_PACKAGE
           ) -> list[Spec]:
    """Rules 1-4 over the pinned wheels: the chosen functions, each with its half, in (package, module, qualname)
    order."""
    chosen: list[Spec] = []
    for pkg, ver in packages:
        root = fetch_package(pkg, ver, cache)
        cands = [Spec(pkg, ver, p.relative_to(root).as_posix(), qual, chars=n)
                 for p in wheel_modules(root) for qual, n in candidates(p.read_text(encoding="utf-8"))]
        chosen += sorted(cands, key=lambda s: rank(s.key))[:per_package]
    return split_of(chosen)


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def typing_start(text: str, start: int) -> int:
    """Where the typist starts in a body whose first line starts at ``start``: after that line's indentation,
    which the editor's auto-indent wrote with the Enter that opened the line, as it writes every later line's
    with the typist's Enter (replay_typist.enter_text); before session 44 the typist typed it a space at a
    time, keys no user makes."""
    nl = text.find("\n", start)
    return start + indent_of(text[start: nl if nl >= 0 else len(text)])


def body_cut(text: str, start: int, end: int, max_chars: int | None, closers: str = "") -> int:
    """Where the typed region of the body ``text[start:end]`` ends: whole lines of about ``max_chars``, at a line
    of the body's own level (a blank line, a deeper one, or one starting with one of ``closers`` is still inside
    a nested block); ``end`` when there is no limit."""
    body_indent = indent_of(text[start: text.find("\n", start)])

    def nested(pos: int) -> bool:
        nl = text.find("\n", pos, end)
        line = text[pos: end if nl < 0 else nl]
        return not line.strip() or indent_of(line) > body_indent or (bool(closers) and line.lstrip()[:1] in closers)

    if max_chars is None:
        return end
    cut = start
    while cut < end and (cut - start < max_chars or nested(cut)):
        nl = text.find("\n", cut, end)
        cut = end if nl < 0 else nl + 1
    return cut - 1 if cut < end else cut  # keep the line break in the document


def function_segment(path: Path, func: str, label: str, max_chars: int | None = None, split: str = "") -> Segment:
    """The body of ``func`` in ``path`` (after its docstring); ``max_chars`` cuts it to whole lines of about that
    many characters, at a statement of the body's own level: the code left below the typed region starts back at
    the body's indentation, as below a user who inserts statements into a function. (A region cut inside a nested
    block would leave a deeper-indented line right below every line typed, a document no one types into: Flint
    rightly shows nothing at a line end there that does not open a block, postprocess's misses_block_opener.)"""
    text = path.read_text(encoding="utf-8")
    start, end = body_region(text, func)
    cut = body_cut(text, start, end, max_chars)
    start = typing_start(text, start)
    return Segment(f"{label}:{func}", "python", str(path), text[:start], text[start:cut], text[cut:],
                   file_lines=text.count("\n") + 1, split=split)


def pick(specs: list[Spec], split: str, n: int | None = None, only: tuple[str, ...] = ()) -> list[Spec]:
    """The functions a run types: ``split`` ("tuning", "validation"), all of them or ``only`` those qualnames /
    keys, or the first ``n`` round-robin over the packages (a quick look that still covers several)."""
    half = [s for s in specs if s.split == split]
    if only:
        return [s for s in half if s.qualname in only or s.key in only or s.qualname.split(".")[-1] in only]
    by_pkg: dict[str, list[Spec]] = {}
    for s in half:
        by_pkg.setdefault(s.package, []).append(s)
    rr = [s for i in range(max(map(len, by_pkg.values()), default=0)) for lst in by_pkg.values() if i < len(lst)
          for s in [lst[i]]]
    return rr if n is None else rr[:n]


def segments(specs: list[Spec], cache: Path, max_chars: int | None = None) -> list[Segment]:
    return [function_segment(fetch_package(s.package, s.version, cache) / s.module, s.qualname,
                             f"{s.package}=={s.version}/{s.module}", max_chars, s.split) for s in specs]


def keystrokes(seg: Segment) -> int:
    """Keystrokes that type a segment with no accept: its characters less what Enter's auto-indent writes."""
    lines = seg.typed.split("\n")
    return len(seg.typed) - sum(len(ln) - len(ln.lstrip(" \t")) for ln in lines[1:])


def size_to_keys(segs: list[Segment], keys: int) -> list[Segment]:
    """The first segments (in the order given) whose whole text fits in ``keys`` keystrokes typed with no accept, at
    least one: every arm types each of them to its end, so arms are scored on the same code (issue 47; before, each
    function was cut to a share and the run stopped at the keystroke cap, so a faster-accepting arm typed further)."""
    out: list[Segment] = []
    total = 0
    for seg in segs:
        total += keystrokes(seg)
        if out and total > keys:
            break
        out.append(seg)
    return out


def round_seeds(seed: int, rounds: int) -> list[int]:
    """Each round's timing and pause seed: rounds are samples of the typist, not replicas of one script. Within a
    round every arm gets the same seed, so arms stay paired."""
    return [seed + r for r in range(rounds)]


def describe(specs: list[Spec]) -> dict:
    """Per half: functions, packages, characters (a quick table for the report and the docstring)."""
    out = {}
    for split in dict.fromkeys([*SPLITS, *(s.split for s in specs)]):
        half = [s for s in specs if s.split == split]
        out[split] = {"functions": len(half), "packages": len({s.package for s in half}),
                      "chars": sum(s.chars for s in half)}
    return out


if __name__ == "__main__":  # print the chosen list: python scripts/replay_corpus.py [PKG_CACHE]
    cache = Path(sys.argv[1] if len(sys.argv) > 1 else Path.home() / ".cache" / "flint-bench" / "pypi")
    specs = choose(cache)
    for s in specs:
        print(f"{s.split:<11}{s.key}  ({s.chars} chars)")
    print(describe(specs))
