"""The code bench_replay types in languages other than Python (issue 36): function bodies from pinned npm packages
(JavaScript, TypeScript) and Debian source packages (Go: ``golang-*-dev``, Rust: ``librust-*-dev``), chosen and split
by replay_corpus.py's rule, with the definitions read by tree-sitter (engine/syntax) instead of ``ast``.

The rule (as replay_corpus.py's, per language):

1. every source file of the package under its source folders (tests, benches, examples, generated and vendored
   code excluded);
2. every function or method (a method directly in a top-level class, ``impl`` or Go receiver) whose body between
   its braces has ``BODY_LINES`` lines and ``BODY_CHARS`` characters, starts on the line after its ``{`` and ends
   on the line before its own ``}``, defines nothing inside (no nested function, closure, arrow function or
   class), and whose name is defined once in its scope;
3. per package, ordered by sha256 of ``package:path:qualname``, the first ``PER_PACKAGE``;
4. per package, in (path, qualname) order, alternately tuning and validation.

No corpus of Flint's holds these packages: the trimmed LM head's corpus is Python's standard library,
/usr/include, the global node_modules (npm's own dependencies) and /usr/share/doc; the .deb packages are unpacked
with ``dpkg -x`` into the cache, never installed. ``python scripts/replay_languages.py LANGUAGE`` prints the list.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from replay_corpus import BODY_CHARS, BODY_LINES, Segment, Spec, body_cut, split_of, typing_start  # noqa: E402

from engine.syntax import definitions, parse  # noqa: E402


@dataclass(frozen=True)
class Package:
    source: str  # "npm" (npm pack NAME@VERSION) or "deb" (apt-get download NAME=VERSION, dpkg -x)
    name: str
    version: str
    folder: str  # where its sources are, inside the unpacked package
    ext: str


# (language id) -> pinned packages; versions are what `npm pack` / `apt-get download` fetched on 2026-11-26
PACKAGES: dict[str, tuple[Package, ...]] = {
    "javascript": (
        Package("npm", "underscore", "1.13.7", "package/modules", ".js"),
        Package("npm", "axios", "1.7.7", "package/lib", ".js"),
        Package("npm", "moment", "2.30.1", "package/src/lib", ".js"),
    ),
    "typescript": (
        Package("npm", "immer", "10.1.1", "package/src", ".ts"),
        Package("npm", "rxjs", "7.8.1", "package/src/internal", ".ts"),
    ),
    "go": (
        Package("deb", "golang-github-spf13-pflag-dev", "1.0.6~git20210604-d5e0c0615ace-1",
                "usr/share/gocode/src/github.com/spf13/pflag", ".go"),
        Package("deb", "golang-github-google-go-cmp-dev", "0.5.9-1",
                "usr/share/gocode/src/github.com/google/go-cmp/cmp", ".go"),
        Package("deb", "golang-github-pkg-errors-dev", "0.9.1-2",
                "usr/share/gocode/src/github.com/pkg/errors", ".go"),
        Package("deb", "golang-github-mattn-go-runewidth-dev", "0.0.14-1",
                "usr/share/gocode/src/github.com/mattn/go-runewidth", ".go"),
    ),
    "rust": (
        Package("deb", "librust-semver-dev", "1.0.14-1", "usr/share/cargo/registry/semver-1.0.14/src", ".rs"),
        Package("deb", "librust-smallvec-dev", "1.9.0-1", "usr/share/cargo/registry/smallvec-1.9.0/src", ".rs"),
        Package("deb", "librust-hex-dev", "0.4.3-1+b2", "usr/share/cargo/registry/hex-0.4.3/src", ".rs"),
        Package("deb", "librust-itoa-dev", "1.0.1-2", "usr/share/cargo/registry/itoa-1.0.1/src", ".rs"),
        Package("deb", "librust-either-dev", "1.6.1-1", "usr/share/cargo/registry/either-1.6.1/src", ".rs"),
    ),
}
PER_PACKAGE = 8
LANGUAGES = tuple(PACKAGES)
# each language's source file extension (Python's corpus is replay_corpus's)
EXT = {"python": ".py", "javascript": ".js", "typescript": ".ts", "go": ".go", "rust": ".rs"}
_SKIP = re.compile(r"(^|/)(tests?|__tests__|testing|testdata|benches|examples|vendor|internal/testprotos)(/|$)|"
                   r"(_test\.go|\.test\.ts|\.spec\.ts|\.d\.ts|_tables?\.go|table\.go|(^|/)tests?\.rs)$")
_TEST_SCOPES = frozenset({"test", "tests"})  # Rust's `mod tests` inside a source file
# nodes that define something inside a body (rule 2)
_NESTED = frozenset({"arrow_function", "function_expression", "function", "generator_function", "function_declaration",
                     "class_declaration", "class", "method_definition", "closure_expression", "func_literal",
                     "function_item", "impl_item", "struct_item", "type_declaration"})
_FUNCTIONS = frozenset({"function", "method", "constructor"})


def fetch(pkg: Package, cache: Path) -> Path:
    """The unpacked package (once per cache directory)."""
    dest = cache / f"{pkg.name}-{pkg.version}"
    if (dest / ".done").exists():
        return dest
    dl = cache / "downloads"
    dl.mkdir(parents=True, exist_ok=True)
    dest.mkdir(parents=True, exist_ok=True)
    if pkg.source == "npm":
        out = subprocess.run(["npm", "pack", "--silent", f"{pkg.name}@{pkg.version}"], cwd=dl, check=True,
                             capture_output=True, text=True).stdout.strip().splitlines()[-1]
        with tarfile.open(dl / out) as t:
            t.extractall(dest, filter="data")
    else:
        subprocess.run(["apt-get", "download", f"{pkg.name}={pkg.version}"], cwd=dl, check=True, capture_output=True)
        deb = next(dl.glob(f"{pkg.name}_*.deb"))
        subprocess.run(["dpkg", "-x", str(deb), str(dest)], check=True)
    (dest / ".done").write_text("")
    return dest


def source_files(root: Path, pkg: Package) -> list[Path]:
    base = root / pkg.folder
    return sorted(p for p in base.rglob(f"*{pkg.ext}") if not _SKIP.search(p.relative_to(base).as_posix()))


def _body_span(text: str, body) -> tuple[int, int] | None:
    """(start, end) code points of the lines between a body's braces: ``{`` ends its line, ``}`` starts its."""
    raw = text.encode("utf-8")
    open_b, close_b = body.start_byte, body.end_byte - 1
    if raw[open_b:open_b + 1] != b"{" or raw[close_b:close_b + 1] != b"}":
        return None
    nl = raw.find(b"\n", open_b)
    if nl < 0 or raw[open_b + 1: nl].strip():
        return None
    line_start = raw.rfind(b"\n", 0, close_b)
    if raw[line_start + 1: close_b].strip() or line_start <= nl:
        return None
    start, end = len(raw[: nl + 1].decode("utf-8")), len(raw[:line_start].decode("utf-8"))
    return (start, end) if text[start:end].strip() else None


def _defines_inside(node) -> bool:
    stack = list(node.named_children)
    while stack:
        n = stack.pop()
        if n.type in _NESTED:
            return True
        stack.extend(n.named_children)
    return False


def function_bodies(text: str, language: str) -> dict[str, tuple[int, int]]:
    """qualname -> body span of the functions rule 2 looks at (before the size limits), names defined once."""
    tree = parse(language, text)
    if tree is None:
        return {}
    defs = definitions(tree)
    kinds = {d.name: d for d in defs if d.parent is None}
    seen: dict[str, int] = {}
    spans: dict[str, tuple[int, int]] = {}
    for d in defs:
        if d.kind not in _FUNCTIONS or (d.parent is not None and (d.parent not in kinds or kinds[d.parent].parent)):
            continue
        if d.parent in _TEST_SCOPES:
            continue
        qual = f"{d.parent}.{d.name}" if d.parent else d.name
        if d.node.type == "method_declaration" and language == "go":  # Go: the receiver's type qualifies it
            recv = d.node.child_by_field_name("receiver")
            qual = f"{re.sub(r'[^A-Za-z0-9_]', '', tree.node_text(recv).split()[-1])}.{d.name}" if recv else qual
        seen[qual] = seen.get(qual, 0) + 1
        body = d.node.child_by_field_name("body")
        if body is None or _defines_inside(body):
            continue
        span = _body_span(text, body)
        if span is not None:
            spans[qual] = span
    return {q: s for q, s in spans.items() if seen[q] == 1}


def candidates(text: str, language: str, lines: tuple[int, int] = BODY_LINES,
               chars: tuple[int, int] = BODY_CHARS) -> list[tuple[str, int]]:
    out = []
    for qual, (start, end) in function_bodies(text, language).items():
        body = text[start:end]
        if lines[0] <= body.count("\n") + 1 <= lines[1] and chars[0] <= len(body) <= chars[1]:
            out.append((qual, len(body)))
    return out


def rank(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def choose(language: str, cache: Path, per_package: int = PER_PACKAGE) -> list[Spec]:
    chosen: list[Spec] = []
    for pkg in PACKAGES[language]:
        root = fetch(pkg, cache)
        cands = [Spec(pkg.name, pkg.version, p.relative_to(root).as_posix(), qual, chars=n)
                 for p in source_files(root, pkg) for qual, n in candidates(p.read_text(encoding="utf-8"), language)]
        chosen += sorted(cands, key=lambda s: rank(s.key))[:per_package]
    return split_of(chosen)


def function_segment(path: Path, qual: str, language: str, label: str, max_chars: int | None = None,
                     split: str = "") -> Segment:
    """replay_corpus.function_segment for a brace language: the body between the braces, ``max_chars`` cutting it
    at a line of the body's own level (a line closing a nested block is still inside it)."""
    text = path.read_text(encoding="utf-8")
    start, end = function_bodies(text, language)[qual]
    cut = body_cut(text, start, end, max_chars, closers=")]}")
    start = typing_start(text, start)
    return Segment(f"{label}:{qual}", language, str(path), text[:start], text[start:cut], text[cut:],
                   file_lines=text.count("\n") + 1, split=split)


def segments(language: str, specs: list[Spec], cache: Path, max_chars: int | None = None) -> list[Segment]:
    by_name = {p.name: p for p in PACKAGES[language]}
    return [function_segment(fetch(by_name[s.package], cache) / s.module, s.qualname, language,
                             f"{s.package}=={s.version}/{s.module}", max_chars, s.split) for s in specs]


if __name__ == "__main__":  # python scripts/replay_languages.py LANGUAGE [CACHE]
    lang = sys.argv[1]
    cache = Path(sys.argv[2] if len(sys.argv) > 2 else Path.home() / ".cache" / "flint-bench" / "langs")
    specs = choose(lang, cache)
    for s in specs:
        print(f"{s.split:<11}{s.key}  ({s.chars} chars)")
    print({sp: sum(s.split == sp for s in specs) for sp in ("tuning", "validation")},
          {sp: sum(s.chars for s in specs if s.split == sp) for sp in ("tuning", "validation")})
