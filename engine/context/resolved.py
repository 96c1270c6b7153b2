"""Context from what jedi resolves (issue 35): which names near the cursor to ask jedi about, and how its
answers read in the context block. Pure; engine/context/jedi_source.py asks jedi.

The questions come from the function the cursor is in (at most ``AROUND_LINES`` either side of it), nearest
the cursor first:

- an imported name used alone (``connect(url)``): where it is defined (goto): a function's signature, a
  class's header with its methods;
- a chain whose head is imported (``models.connect``, ``json.dumps``): where its last name is defined;
- a chain whose head is anything else (a parameter, a local, ``self.session``): the receiver's type (infer)
  and its members (jedi's completions after the dot), the member the code uses first: the methods the
  line is likely to call. ``self`` / ``cls`` alone are the file's own class, which the prompt window or
  the ``file`` source shows.

Answers are ``Definition`` records (plain data), rendered as Python stubs: ``def name(params) -> ret:`` and
the docstring's first line; a class's header, then its public methods' signatures.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from engine.context.block import Chunk
from engine.context.sources import AROUND_LINES, around_span, imported_names

MAX_QUESTIONS = 10  # jedi questions per gather: each costs 5-200 ms on the analyser's one thread
MAX_MEMBERS = 12  # a receiver's type shows this many members (the used ones first)
MAX_LINE = 160  # characters of a header or signature line: a long one is clipped

_NOISE = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|#[^\n]*'
                    r'|^[ \t]*(?:from|import)[ \t][^\n]*', re.M)
_CHAIN = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:[ \t]*\.[ \t]*[A-Za-z_]\w*)*(?:[ \t]*\.(?![ \t]*\w))?")
_PART = re.compile(r"[A-Za-z_]\w*")
_DEF = re.compile(r"^([ \t]*)(?:async[ \t]+)?def[ \t]", re.M)
_OWN = ("self", "cls")
_FROM = re.compile(r"^[ \t]*from[ \t]+([\w.]+)[ \t]+import[ \t]*(\([^)]*\)|[^\n]*)", re.M)


@dataclass(frozen=True)
class Question:
    kind: str  # "goto": where ``expr``'s last name is defined; "members": the type of the receiver ``expr``
    at: int  # goto: the last name's start; members: just after the receiver's dot (jedi completes there)
    expr: str  # as written, without spaces: "models.connect", or the receiver "self.session"
    distance: int  # characters between the use and the cursor
    name_at: int = 0  # members: the start of the receiver's last name (jedi infers its type there)
    attr: str = ""  # members: the member used after the dot ("" at the cursor: not written yet)
    brief: bool = False  # an imported name the function does not use: its signature alone


@dataclass(frozen=True)
class Member:
    name: str
    kind: str  # jedi's type: function, statement, property, class, instance...
    signature: str = ""  # functions: "get(path: str) -> Response" (jedi leaves ``self`` out)
    doc: str = ""  # the docstring's first line


@dataclass(frozen=True)
class Definition:
    expr: str  # the question it answers
    kind: str  # jedi's type: function | class | instance | statement | module | ...
    name: str
    module: str  # "pkg.models"
    path: str | None  # the module's file (None: compiled, no source)
    line: int  # 1-based line of the definition (0: unknown)
    header: str = ""  # the definition's first source line ("class Session(Base):")
    signature: str = ""
    doc: str = ""
    members: tuple[Member, ...] = ()
    distance: int = 0
    used: tuple[str, ...] = ()  # members the code near the cursor uses (shown first)


# ---- the questions ----------------------------------------------------------------------------------------
def function_span(text: str, offset: int) -> tuple[int, int]:
    """The characters of the function around ``offset`` (its ``def`` line to the last line indented deeper
    than it), cut to ``AROUND_LINES`` either side; at module level those lines alone."""
    s, e = around_span(text, offset, AROUND_LINES)
    ls = text.rfind("\n", 0, offset) + 1
    line = text[ls:offset]
    indent = len(line) - len(line.lstrip(" \t"))
    if indent == 0:
        return s, e
    start = None
    for m in _DEF.finditer(text, 0, ls):
        if len(m.group(1)) < indent:
            start = m.start()  # the last def above, less indented than the cursor's line
    if start is None:
        return s, e
    depth = len(_DEF.match(text, start).group(1))  # type: ignore[union-attr]
    end = len(text)
    p = text.find("\n", offset)
    while p >= 0:
        nxt = text.find("\n", p + 1)
        ln = text[p + 1: nxt if nxt >= 0 else len(text)]
        if ln.strip() and not ln.lstrip().startswith("#") and len(ln) - len(ln.lstrip(" \t")) <= depth:
            end = p
            break
        p = nxt
    return max(s, start), min(e, end)


def _blank(piece: str) -> str:
    """``piece`` with strings, comments and import statements blanked (the same length: offsets hold)."""
    return _NOISE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), piece)


def import_sites(text: str) -> dict[str, tuple[int, bool]]:
    """Where the name each ``from ... import`` statement binds is written (the imported name's offset: jedi
    goes from there to its definition), and whether the import is relative (the package's own module)."""
    out: dict[str, tuple[int, bool]] = {}
    for m in _FROM.finditer(text):
        for n in re.finditer(r"(\w+)(?:\s+as\s+(\w+))?", m.group(2)):
            out.setdefault(n.group(2) or n.group(1), (m.start(2) + n.start(1), m.group(1).startswith(".")))
    return out


def questions(text: str, offset: int, max_questions: int = MAX_QUESTIONS, unused_imports: int = 0
              ) -> list[Question]:
    """What to ask jedi about the names used near ``offset`` (module doc), nearest first, each once; then,
    with ``unused_imports``, up to that many names the file imports but the function does not use (the
    line being written may call one: its signature alone), in the order the file imports them."""
    imported = imported_names(text)
    lo, hi = function_span(text, offset)
    found: dict[tuple[str, str], Question] = {}
    for m in _CHAIN.finditer(_blank(text[lo:hi])):
        start, end = lo + m.start(), lo + m.end()
        parts = [(lo + p.start() + m.start(), p.group(0)) for p in _PART.finditer(m.group(0))]
        trailing = m.group(0).rstrip().endswith(".")
        distance = 0 if start <= offset <= end else min(abs(start - offset), abs(end - offset))
        head = parts[0][1]
        q: Question | None = None
        if head in imported and (len(parts) > 1 or not trailing):
            at, _ = parts[-1]
            q = Question("goto", at, ".".join(p for _, p in parts), distance)
        elif len(parts) > 1 or trailing:
            recv = parts if trailing else parts[:-1]
            if len(recv) == 1 and recv[0][1] in _OWN:
                continue
            dot = text.find(".", recv[-1][0] + len(recv[-1][1]))
            attr = "" if trailing else parts[-1][1]
            q = Question("members", dot + 1, ".".join(p for _, p in recv), distance, recv[-1][0], attr)
        if q is None:
            continue
        key = (q.kind, q.expr)
        old = found.get(key)
        if old is None or q.distance < old.distance:
            used = old.attr if old is not None and not q.attr else q.attr
            found[key] = Question(q.kind, q.at, q.expr, q.distance, q.name_at, used)
    near = sorted(found.values(), key=lambda q: q.distance)[:max_questions]
    if unused_imports <= 0:
        return near
    heads = {q.expr.split(".")[0] for q in found.values()}
    # the package's own modules' names first (what a sibling module offers), then in the file's order
    sites = sorted((not rel, at, name) for name, (at, rel) in import_sites(text).items() if name not in heads)
    far = [Question("goto", at, name, len(text) + i, brief=True) for i, (_, at, name) in enumerate(sites)]
    return near + far[:unused_imports]


# ---- the answers as stubs ---------------------------------------------------------------------------------
def _clip(line: str) -> str:
    line = line.strip()
    return line if len(line) <= MAX_LINE else line[:MAX_LINE].rstrip() + " ..."


def _method(signature: str) -> str:
    """A method's signature as its ``def`` reads (jedi leaves ``self`` out)."""
    name, _, rest = signature.partition("(")
    if not rest or re.match(r"(?:self|cls)\b", rest):  # unbound: jedi shows it already
        return signature
    return f"{name}(self{', ' if not rest.startswith(')') else ''}{rest}"


def _function_lines(signature: str, doc: str, indent: str = "") -> list[str]:
    out = [f"{indent}def {_clip(signature)}:"]
    if doc:
        out.append(f'{indent}    """{_clip(doc)}"""')
    return out


def _members(d: Definition, max_members: int) -> list[Member]:
    """The members worth showing: those the code uses first, then public ones (a class's constructor too)."""
    by_name = {m.name: m for m in d.members}
    first = [by_name[n] for n in d.used if n in by_name]
    rest = [m for m in d.members if m.name not in d.used and
            (not m.name.startswith("_") or (m.name == "__init__" and d.kind == "class"))]
    return (first + rest)[:max_members]


def render(d: Definition, max_members: int = MAX_MEMBERS) -> str:
    """A definition as a stub ("" for a module: its used names are answers of their own)."""
    if d.kind == "function":
        lines = _function_lines(d.signature or f"{d.name}(...)", d.doc)
    elif d.kind in ("class", "instance"):
        head = _clip(d.header) if d.header.lstrip().startswith("class ") else f"class {d.name}:"
        lines = [head if head.endswith(":") else head + ":"]
        if d.doc:
            lines.append(f'    """{_clip(d.doc)}"""')
        for m in _members(d, max_members):
            if m.kind == "function" and m.signature:
                lines += _function_lines(_method(m.signature), m.doc if m.name in d.used else "", "    ")
            else:
                lines.append(f"    {m.name} = ...")
    elif d.kind == "module":
        return ""
    else:
        lines = [_clip(d.header) if d.header.lstrip().startswith(d.name) else f"{d.name} = ..."]
    return "\n".join(lines) + "\n"


def near_score(rank: int) -> float:
    """Names used nearer the cursor rank higher (the imports source's scale: 2 + this)."""
    return 1.0 / (1.0 + rank / 8)


def standard_library(path: str | None) -> bool:
    """A module of the standard library (or its typeshed stub, or compiled: no source)."""
    if path is None:
        return True
    p = path.replace("\\", "/")
    return "/typeshed/" in p or (re.search(r"/lib/python3\.\d+/", p) is not None and "-packages/" not in p)


def definition_chunks(defs: Iterable[Definition], shown: Callable[[str | None, str], str],
                      max_members: int = MAX_MEMBERS) -> list[Chunk]:
    """One chunk per definition (the same definition reached twice: once, nearest use, used members of
    both), scored by how near the cursor it is used; builtins' types left out (the model knows them).
    ``shown(path, module)``: the path the block shows for a definition's module."""
    merged: dict[tuple[str, int, str], Definition] = {}
    for d in defs:
        if d.module == "builtins" or d.kind == "module":
            continue
        key = (d.path or d.module, d.line, d.name)
        old = merged.get(key)
        if old is not None:
            used = tuple(dict.fromkeys(old.used + d.used))
            d = old if old.distance <= d.distance else d
            d = Definition(d.expr, d.kind, d.name, d.module, d.path, d.line, d.header, d.signature, d.doc,
                           d.members, d.distance, used)
        merged[key] = d
    out = []
    # the standard library's last: the model knows it best, the project's and its libraries' it has not seen
    for rank, d in enumerate(sorted(merged.values(), key=lambda d: (standard_library(d.path), d.distance))):
        text = render(d, max_members)
        if text:
            out.append(Chunk(shown(d.path, d.module), text, "jedi", max(0, d.line - 1), 2.0 + near_score(rank)))
    return out
