"""When the monitor applies and what an analyser answers: pure functions and plain data, no analysis.

``trigger(text_before)`` reads the text before the cursor (the document's prefix plus what has been
generated) and says whether a name is about to be written where static analysis knows the valid names:

- ``member``: after ``expr.`` (``obj.``, ``f().``, ``"".``), the partial attribute typed since the dot;
- ``argument``: a name inside a call's parentheses (after ``(``, ``,``, ``=``, an operator ...);
- ``name``: a name where an expression starts (after ``=``, ``return``, an operator, ``[`` ...).

It never triggers inside a string or a comment, after a number's dot (``1.``), nor where a name is being
defined: after ``def``/``class``/``as``/``global``/``nonlocal``/``lambda``, in ``import`` statements, in a
``for`` target (before its ``in``), in a ``def``'s parameter names (annotations and defaults are
expressions), at the start of a statement (it may be an assignment target), nor in a depth-0 statement
that has no assignment yet (``a, b`` may be ``a, b = ...``).

``Trigger.definite`` is False where a valid program may still name something the analyser cannot know
yet: the first element of a bracket (``[x for x in xs]`` names ``x`` before binding it) and a member at the
start of a statement (``self.new = ...`` creates ``new``). A caller masks hard only when definite (and
reweights, or leaves the choice free, otherwise).

A keyword that expects an expression (``return``, ``in``, ``not`` ...) at the very end of the text gives a
``glued`` trigger with an empty partial: a token that goes on with identifier characters extends the
keyword into another word (left free), a token that starts with whitespace starts the name (checked).
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

# ---- data ----------------------------------------------------------------------------------------------


class TriggerKind(StrEnum):
    MEMBER = "member"
    NAME = "name"
    ARGUMENT = "argument"


@dataclass(frozen=True, slots=True)
class Trigger:
    """A point where the next name should be one the analyser knows.

    ``start`` is the offset in ``text_before`` where the name starts (``len(text_before) - len(partial)``):
    the position to ask the analyser about, the same for every step of one name, so its answer is cached
    across them."""

    kind: TriggerKind
    partial: str  # the identifier characters already there (typed or generated) since the trigger point
    start: int
    glued: bool = False  # the text ends in an expression keyword: the name needs a separator first
    definite: bool = True  # False: a valid program may still name something not known yet (see module doc)
    receiver: str | None = None  # member: the dotted names before the '.' when that is all it is


@dataclass(frozen=True, slots=True)
class Candidate:
    name: str  # as it is written: "append", "key=" for a keyword argument
    kind: str  # the analyser's kind: "function", "class", "module", "instance", "param", "keyword" ...


@dataclass(frozen=True, slots=True)
class Candidates:
    """The names valid at a position. ``partial`` is the part of a name already at that position in the
    source the analyser read (the analysers here are asked at a name's start, so it is usually "")."""

    items: tuple[Candidate, ...]
    partial: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.items)

    def matching(self, prefix: str) -> tuple[Candidate, ...]:
        return tuple(c for c in self.items if c.name.startswith(prefix))

    def __len__(self) -> int:
        return len(self.items)


class Analyser(Protocol):
    """Static analysis for one language: the names valid at ``offset`` of ``source``.

    ``deadline`` is a ``time.monotonic()`` value: past it the analyser returns None rather than make the
    caller wait (it may go on in the background and answer the same question from its cache later).
    None also means "no opinion" (broken or huge file, no environment): the caller does not constrain.
    Implementations never raise to the caller."""

    def names_at(self, source: str, offset: int, deadline: float, *, path: str | None = None,
                 version: int | None = None) -> Candidates | None: ...


DEFAULT_BUDGET_S = 0.02  # how long a decode step waits for names it does not have yet

# string prefixes: where a name may start, "f" may also start f"..." (the trie is given these as names)
STRING_PREFIXES = ("r", "u", "b", "f", "br", "rb", "fr", "rf")


def literal_names() -> tuple[str, ...]:
    """Pseudo-names for a name trigger: a string prefix with its quote (``f"``, ``rb'`` ...), so that the
    mask does not forbid a prefixed string where a name may start."""
    out = []
    for p in STRING_PREFIXES:
        for v in {p, p.upper(), p.capitalize()}:
            out += [v + '"', v + "'"]
    return tuple(sorted(set(out)))


# ---- lexing ------------------------------------------------------------------------------------------

# a comment, a string (closed, or open to the end of its line / of the text), found by search: outside them
# every '#' starts a comment and every quote a string, so the first hit of each search is one of those
_STRINGS = re.compile(r"""
    \#[^\n]*
  | '''(?:[^'\\]|\\.|'(?!''))*(?:'''|\\?\Z)
  | \"\"\"(?:[^"\\]|\\.|"(?!""))*(?:\"\"\"|\\?\Z)
  | '(?:[^'\\\n]|\\.)*(?:'|\\?(?=\n)|\\?\Z)
  | "(?:[^"\\\n]|\\.)*(?:"|\\?(?=\n)|\\?\Z)
""", re.S | re.X)
_CLOSED = {
    "'''": re.compile(r"'''(?:[^'\\]|\\.|'(?!''))*'''", re.S),
    '"""': re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*"""', re.S),
    "'": re.compile(r"'(?:[^'\\\n]|\\.)*'", re.S),
    '"': re.compile(r'"(?:[^"\\\n]|\\.)*"', re.S),
}
STR = "\x00"  # a string literal in the code tail

_TOKEN = re.compile(r"""
    (?P<nl>\\\r?\n|\r?\n)
  | (?P<ws>[ \t\f]+)
  | (?P<name>[^\W\d]\w*)
  | (?P<num>\d(?:[\w.]|(?<=[eE])[-+])*)
  | (?P<op>\.\.\.|->|:=|\*\*=?|//=?|>>=?|<<=?|[-+*/%@&|^<>=!]=|[-+*/%@&|^<>=~:;,.()\[\]{}\x00])
  | (?P<other>.)
""", re.S | re.X)

KEYWORDS = frozenset(keyword.kwlist)
# after these a name starts an expression
EXPR_KEYWORDS = frozenset({"return", "yield", "await", "if", "elif", "while", "and", "or", "not", "in", "is",
                           "else", "assert", "del", "raise", "with", "except", "from"})
# a depth-0 ':' ends the header of a statement that starts with one of these
COMPOUND = frozenset({"if", "elif", "else", "while", "for", "with", "try", "except", "finally", "def",
                      "class", "async", "match", "case"})
DEFINES = frozenset({"def", "class", "as", "global", "nonlocal", "import", "lambda", "for"})
OPENERS = frozenset("([{")
CLOSERS = frozenset(")]}")
ASSIGN = frozenset({"=", ":=", "+=", "-=", "*=", "/=", "//=", "%=", "@=", "&=", "|=", "^=", ">>=", "<<=",
                    "**="})
NOT_EXPR_START = CLOSERS | {".", "...", ";", STR}  # ops after which a name does not start an expression

WINDOW = 4000  # characters of code before the cursor read for the statement's brackets


def safe_cut(text: str, keep: int = 2 * WINDOW) -> int:
    """A line start at most ``len(text) - keep`` that is not inside a string (0 when the text is short):
    ``trigger(text[cut:] + more)`` then reads the same as ``trigger(text + more)`` while the statement at
    the end starts after the cut, and the text before the cut is scanned once instead of each step."""
    target = len(text) - keep
    if target <= 0:
        return 0
    cut = text.rfind("\n", 0, target) + 1
    spans = [m.span() for m in _STRINGS.finditer(text, 0, target + 1)]
    for s, e in reversed(spans):
        if e <= cut:
            break
        if s < cut:  # a multi-line string: cut before the line it starts on (it is code there)
            cut = text.rfind("\n", 0, s) + 1
    return cut


def code_tail(text: str, window: int = WINDOW) -> str | None:
    """The last ``window`` characters of ``text`` (from a line start) with comments dropped and each string
    literal replaced by ``STR``; None when ``text`` ends inside a string or a comment."""
    n = len(text)
    cut = max(0, n - window)
    if cut:
        nl = text.find("\n", cut)
        cut = n if nl < 0 else nl + 1
    parts: list[str] = []
    at = cut
    last = None
    for m in _STRINGS.finditer(text):
        last = m
        s, e = m.span()
        if e <= cut:
            continue
        if s > at:
            parts.append(text[at:s])
        if m.group()[0] != "#":
            parts.append(STR)
        at = max(at, e)
    if last is not None and last.end() == n:
        lit = last.group()
        if lit[0] == "#":
            return None
        q = lit[:3] if lit[:3] in ("'''", '"""') else lit[0]
        if not _CLOSED[q].fullmatch(lit):
            return None
    parts.append(text[at:])
    return "".join(parts)


@dataclass(slots=True)
class _Tok:
    text: str
    kind: str  # name | num | op | other | nl
    depth: int  # bracket depth around it (an opener and its closer count at the outer depth)


@dataclass(slots=True)
class _Open:
    char: str
    at: int  # index of the opener in the token list
    role: str  # call | def | class | index | group


def _lex(code: str) -> tuple[list[_Tok], list[_Open], int, bool]:
    """Significant tokens of ``code``, the brackets still open at its end, the index where the current
    statement starts, and whether the last token touches the end (no whitespace after it)."""
    toks: list[_Tok] = []
    stack: list[_Open] = []
    stmt = 0
    lambdas = 0  # lambdas at depth 0 of the statement whose ':' has not come yet
    touching = False
    for m in _TOKEN.finditer(code):
        kind = m.lastgroup or "other"
        tx = m.group()
        touching = kind not in ("ws", "nl")
        if kind == "ws":
            continue
        if kind == "nl":
            if not stack and not tx.startswith("\\") and len(toks) > stmt:
                stmt, lambdas = len(toks), 0  # a logical line ends
            continue
        depth = len(stack)
        if tx in OPENERS and kind == "op":
            toks.append(_Tok(tx, kind, depth))
            stack.append(_Open(tx, len(toks) - 1, _role(tx, toks)))
            continue
        if tx in CLOSERS and kind == "op":
            if stack:
                stack.pop()
            toks.append(_Tok(tx, kind, len(stack)))
            continue
        toks.append(_Tok(tx, kind, depth))
        if depth:
            continue
        if tx == "lambda":
            lambdas += 1
        elif tx == ";":
            stmt, lambdas = len(toks), 0
        elif tx == ":":
            if lambdas:
                lambdas -= 1
            elif _compound_header(toks, stmt):
                stmt = len(toks)
    return toks, stack, stmt, touching


def _role(opener: str, toks: list[_Tok]) -> str:
    prev = toks[-2] if len(toks) >= 2 else None
    if prev is None:
        return "group"
    before = toks[-3].text if len(toks) >= 3 else None
    if opener == "(":
        if prev.kind == "name" and before == "def":
            return "def"
        if prev.kind == "name" and before == "class":
            return "class"
        if (prev.kind == "name" and prev.text not in KEYWORDS) or prev.text in (")", "]"):
            return "call"
        return "group"
    if opener == "[" and ((prev.kind == "name" and prev.text not in KEYWORDS) or prev.text in (")", "]", STR)):
        return "index"
    return "group"


def _compound_header(toks: list[_Tok], stmt: int) -> bool:
    if stmt >= len(toks):
        return False
    first = toks[stmt].text
    if first in ("match", "case"):  # soft keywords: "match: int" is an annotation
        return len(toks) - stmt > 2
    return first in COMPOUND


def _receiver(toks: list[_Tok], dot: int) -> str | None:
    """The dotted names ending just before ``toks[dot]`` ('.'), when that is all the receiver is."""
    parts: list[str] = []
    i = dot - 1
    while i >= 0 and toks[i].kind == "name":
        parts.append(toks[i].text)
        if i >= 1 and toks[i - 1].text == ".":
            i -= 2
            continue
        if i >= 1 and (toks[i - 1].text in CLOSERS or toks[i - 1].kind == "num"):
            return None
        break
    return ".".join(reversed(parts)) if parts else None


def trigger(text_before: str) -> Trigger | None:
    """Whether the monitor applies at the end of ``text_before`` (see the module doc), else None."""
    code = code_tail(text_before)
    if code is None:
        return None
    toks, stack, stmt, touching = _lex(code)
    if not toks:
        return None
    n = len(text_before)
    last = toks[-1]
    if touching and last.kind == "name":
        if last.text in EXPR_KEYWORDS and not (len(toks) >= 2 and toks[-2].text == "."):
            # ``return`` / ``in`` / ``not`` at the very end: the name comes after a separator
            return _decide(toks, stack, stmt, len(toks), "", n, glued=True)
        return _decide(toks, stack, stmt, len(toks) - 1, last.text, n - len(last.text))
    if touching and last.kind in ("num", "other"):
        return None
    return _decide(toks, stack, stmt, len(toks), "", n)


def _decide(toks: list[_Tok], stack: list[_Open], stmt: int, at: int, partial: str, start: int,
            glued: bool = False) -> Trigger | None:
    """The trigger for a name at token index ``at`` (``toks[:at]`` come before it)."""
    first = toks[stmt].text if stmt < len(toks) else None
    if first in ("import", "from", "global", "nonlocal"):
        return None
    prev = toks[at - 1] if at > stmt else None
    if prev is None:  # the start of a statement: maybe an assignment target, or a new name
        return None
    depth = len(stack)
    # the tokens of this statement at the current bracket depth since the innermost opener
    begin = max(stmt, stack[-1].at + 1) if stack else stmt
    level = [t for t in toks[begin:at] if t.depth == depth]
    assigned = any(t.text in ASSIGN for t in toks[stmt:at] if t.depth == 0) or (
        first not in KEYWORDS and any(t.text == ":" for t in toks[stmt:at] if t.depth == 0))
    at_target = depth == 0 and first not in KEYWORDS and first != "@" and not assigned

    if prev.text == ".":
        recv = toks[at - 2] if at - 2 >= stmt else None
        if recv is None or recv.kind == "num" or recv.text == "..." or \
                (recv.kind == "name" and recv.text in KEYWORDS and recv.text not in ("None", "True", "False")) or \
                (recv.kind == "op" and recv.text not in CLOSERS and recv.text != STR):
            return None
        # at a statement's start ``obj.attr`` may be an assignment that creates ``attr``: not definite
        return Trigger(TriggerKind.MEMBER, partial, start, receiver=_receiver(toks, at - 1),
                       definite=not at_target)

    if prev.kind == "name" and prev.text in DEFINES and not glued:
        return None
    if at_target:
        return None
    # a for target: 'for' at this level with no 'in' after it yet
    fors = [i for i, t in enumerate(level) if t.text == "for"]
    if fors and not any(t.text == "in" for t in level[fors[-1] + 1:]):
        return None
    lambdas = [i for i, t in enumerate(level) if t.text == "lambda"]
    if lambdas and not any(t.text == ":" for t in level[lambdas[-1] + 1:]):
        return None  # a lambda's parameters
    role = stack[-1].role if stack else None
    if role == "def":
        since = level
        commas = [i for i, t in enumerate(level) if t.text == ","]
        if commas:
            since = level[commas[-1] + 1:]
        if not any(t.text in (":", "=") for t in since):
            return None  # a parameter's name
    if prev.kind == "name":
        if prev.text not in EXPR_KEYWORDS:
            return None  # after a complete expression: an operator keyword or nothing
        if prev.text == "from" and first not in ("raise", "yield") and \
                not (at - 2 >= stmt and toks[at - 2].text == "yield"):
            return None
    elif prev.kind != "op" or prev.text in NOT_EXPR_START:
        return None
    # the first element of a bracket may be a comprehension's, naming its target before the 'for'
    first_element = bool(stack) and role != "def" and not any(t.text == "," for t in level)
    kind = TriggerKind.ARGUMENT if role == "call" else TriggerKind.NAME
    return Trigger(kind, partial, start, glued=glued, definite=not first_element)
