"""Turn raw model text at a cursor into the suggestion an editor shows. Pure functions, no model.

``postprocess(raw, prefix, suffix, mode=...)`` runs the steps below in order; each is a small function
with golden tests (tests/test_postprocess.py):

1. ``normalize``                 LF line breaks, no trailing blanks, no runaway lines.
2. ``drop_incomplete_last_line`` a generation cut by a limit ends mid-line: drop that partial line.
3. ``limit_lines``               single-line mode keeps the first line; multi-line keeps ``max_lines``.
   ``fix_first_indent``          no extra indentation after the indentation already at the cursor.
   ``_finish_statement``         a one-line text whose statement goes on below takes the lines that end it.
4. ``cut_at_following_lines``    stop where the text starts re-writing the code below the cursor (the
                                 next line, a near copy of it, or two consecutive lines a little below).
5. ``limit_scope``               stop when indentation leaves the block the cursor is in;
   ``drop_dangling_header``      a cut block does not end on a header without its body.
6. ``drop_repetition``           the previous line again, a looping block, a looping character run.
7. ``fit_line_suffix``           text right of the cursor: cut what duplicates it, replace auto-closed
                                 brackets/quotes when the text supplies them, never leave a stray closer.
8. ``cut_to_complete``           a line a limit cut is cut back to a complete statement (Python: parsed
                                 with ``ast``; others: brackets and the last token), or nothing;
   ``cut_block_to_complete``     a block whose last line leaves its statement open loses lines until not.
   ``misses_block_opener``       Python: a text where a block header is due (the next line is indented
                                 deeper) that does not end on one is nothing;
   ``else_goes_on_below``        nor is an ``else:`` whose chain goes on below with its own ``else``/``elif``.
9. never return empty or whitespace-only text (``None`` instead).

At the end of a finished line a one-line request whose text starts with a line break shows that next line.

``budget_for(prefix, suffix, language)`` sizes a generation by the context (one line, one statement, the
rest of a body, the statement after a finished line); ``cut_to_budget`` / ``stop_reached`` say what of a
streaming text that budget shows and when generating more is wasted.

Everything works on LF text; the caller converts line breaks back to the document's own. The bracket
scanner is deliberately small (strings on one line, ``#``/``//`` comments): it is a guard against
obvious damage, not a parser.

``decide_mode(line_prefix, line_suffix, policy)`` says whether a position wants one line or a block.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from typing import Literal

Mode = Literal["single", "multi"]

OPENERS = {"(": ")", "[": "]", "{": "}"}
CLOSERS = {")": "(", "]": "[", "}": "{"}
QUOTES = "\"'`"
# characters an editor inserts on its own after the cursor (auto-closing)
AUTO_CLOSED = set(")]}") | set(QUOTES)
# a line ending in one of these opens a block (or a continuation) the suggestion should fill
_BLOCK_OPENERS = re.compile(r"(?:[:{(\[]|=>|->|\bdo|\bthen|\bbegin|\belse)\s*$")
_TRAILING_COMMENT = re.compile(r"\s+(?:#|//).*$")
# a line that only closes something: the end of a block
_CLOSING_LINE = re.compile(r"^\s*(?:[)\]}]+[;,)]*|end\b|fi\b|done\b|esac\b)")
_WORDS = re.compile(r"\w+")
LONG_COPY_CHARS = 24  # a line this long found word for word just below is a copy of it
MAX_LINE_CHARS = 400  # a longer generated line is noise (minified data, a looping model)


@dataclass(frozen=True)
class Suggestion:
    text: str  # inserted at the cursor (LF line breaks)
    replace: int = 0  # code points right of the cursor, on its line, that ``text`` replaces


# ---------------------------------------------------------------------------------------------------------
# small helpers


def indent_width(line: str) -> int:
    """Width of a line's leading whitespace, tabs counted as 4 columns."""
    ws = line[: len(line) - len(line.lstrip(" \t"))]
    return len(ws.expandtabs(4))


def _code_part(line: str) -> str:
    return _TRAILING_COMMENT.sub("", line).rstrip()


def opens_block(line: str) -> bool:
    """True when ``line`` ends with something that expects an indented body or continuation."""
    return bool(_BLOCK_OPENERS.search(_code_part(line)))


def _is_trivial(line: str) -> bool:
    """Lines too common to mean repetition: closers, blank, very short."""
    s = line.strip()
    return len(s) < 4 or not any(c.isalnum() for c in s)


def split_cursor(prefix: str, suffix: str) -> tuple[str, str]:
    """(text on the cursor's line before it, text on the cursor's line after it)."""
    line_prefix = prefix[prefix.rfind("\n") + 1:]
    nl = suffix.find("\n")
    line_suffix = suffix if nl == -1 else suffix[:nl]
    return line_prefix, line_suffix


# ---------------------------------------------------------------------------------------------------------
# bracket scanning


@dataclass(frozen=True)
class ScanState:
    stack: tuple[str, ...] = ()  # unclosed openers, innermost last
    quote: str | None = None  # open string quote on the current line


def scan(text: str, state: ScanState = ScanState()) -> tuple[ScanState, int | None]:
    """Track brackets through ``text``. Returns the state after it and the index of the first closer that
    closes nothing or the wrong thing (None if there is none; scanning stops there)."""
    stack = list(state.stack)
    quote = state.quote
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            quote = None  # strings do not span lines here (triple quotes are rare at a cursor)
        elif quote is not None:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in QUOTES:
            quote = c
        elif c == "#" or (c == "/" and text[i + 1 : i + 2] == "/"):
            nl = text.find("\n", i)
            if nl == -1:
                break
            i = nl
            continue
        elif c in OPENERS:
            stack.append(c)
        elif c in CLOSERS:
            if not stack or stack[-1] != CLOSERS[c]:
                return ScanState(tuple(stack), quote), i
            stack.pop()
        i += 1
    return ScanState(tuple(stack), quote), None


@functools.lru_cache(maxsize=64)  # one request asks it for every variant and every streamed check
def prefix_state(prefix: str, max_lines: int = 40) -> ScanState:
    """Bracket state at the cursor, from the last ``max_lines`` lines (stray closers there are skipped)."""
    start = len(prefix)
    for _ in range(max_lines):
        start = prefix.rfind("\n", 0, start)
        if start == -1:
            break
    text = prefix[start + 1:]
    state = ScanState()
    while True:
        state, bad = scan(text, state)
        if bad is None:
            return state
        text = text[bad + 1:]  # a closer of something older than the window: ignore it


def _balanced_cut(text: str, tail: str, state: ScanState) -> str:
    """Longest prefix of ``text`` that, followed by ``tail``, has no stray closer; cuts only at closers."""
    end, bad = scan(text + tail, state)
    if bad is None:
        return text
    if bad < len(text):
        return text[:bad]
    # the tail's closer has nothing left to close: the text closed it already; cut at its closers
    for i in range(len(text) - 1, -1, -1):
        if text[i] in CLOSERS and scan(text[:i] + tail, state)[1] is None:
            return text[:i]
    return text


# ---------------------------------------------------------------------------------------------------------
# the steps


def decide_mode(line_prefix: str, line_suffix: str, policy: str = "auto") -> Mode:
    """One line when text sits right of the cursor; a block when the cursor is on an empty line or the line
    opens a block; otherwise finish the current line."""
    if policy == "always":
        return "multi"
    if policy == "never":
        return "single"
    rest = line_suffix.strip()
    if rest:
        # `{|}` with an auto-closed brace: the body goes between
        if rest[0] == "}" and all(c in AUTO_CLOSED or c in ";," for c in rest) and \
                line_prefix.rstrip().endswith("{"):
            return "multi"
        return "single"
    if not line_prefix.strip() or opens_block(line_prefix):
        return "multi"
    return "single"


def normalize(raw: str) -> str:
    text = raw.replace("\r\n", "\n").replace("\r", "\n")
    lines = [ln.rstrip() for ln in text.split("\n")]
    # keep the first line's leading text exactly; only trailing blanks go
    out: list[str] = []
    for ln in lines:
        if len(ln) > MAX_LINE_CHARS:
            out.append(ln[:MAX_LINE_CHARS])
            break
        out.append(ln)
    while len(out) > 1 and not out[-1]:
        out.pop()
    return "\n".join(out)


def drop_incomplete_last_line(text: str, truncated: bool) -> str:
    """A generation stopped by a token limit or deadline ends mid-line; keep only whole lines when there
    are any (the first line continues the cursor's line and is kept)."""
    if not truncated or "\n" not in text:
        return text
    return text[: text.rfind("\n")]


def limit_lines(text: str, mode: Mode, max_lines: int) -> str:
    lines = text.split("\n")
    if mode == "single":
        return lines[0]
    return "\n".join(lines[: max(1, max_lines) + (1 if lines[0] == "" else 0)])


def following_lines(suffix: str, n: int = 8) -> list[str]:
    """The first ``n`` non-blank lines after the cursor's line (right-stripped)."""
    nl = suffix.find("\n")
    if nl == -1:
        return []
    out: list[str] = []
    for ln in suffix[nl + 1:].split("\n"):
        if ln.strip():
            out.append(ln.rstrip())
            if len(out) == n:
                break
    return out


def _similar(a: str, b: str) -> bool:
    """Two lines that say the same thing: equal once stripped, or the same words with only spacing or
    punctuation apart (``f(a, b)`` / ``f(a,b),``). Lines that differ in a word (``x = f(a)`` / ``y = f(a)``)
    are different code, however close: runs of similar lines are where completion helps most."""
    if _is_trivial(a) or _is_trivial(b):
        return a.rstrip() == b.rstrip()  # `}` closing an inner block is not the enclosing `}`
    a, b = a.strip(), b.strip()
    if a == b:
        return True
    return min(len(a), len(b)) >= 6 and _WORDS.findall(a) == _WORDS.findall(b)


def cut_at_following_lines(text: str, line_prefix: str, suffix: str) -> str:
    """Stop where the text starts re-writing the code below the cursor (Tab would duplicate it).

    A text line overlaps when
    - it is the next non-blank line after the cursor's line, with its indentation (so a ``}`` that
      closes an inner block is not the ``}`` of the enclosing one that follows the cursor);
    - or it is that line up to spacing and punctuation (a meaningful line, not ``}``/``else:``);
    - or it and the text line after it are two consecutive lines among the next few below the cursor
      (block overlap: the model skipped a line of the suffix and then copies the rest);
    - or it is a long line (``LONG_COPY_CHARS``) that stands word for word among the next three (a
      docstring or a call copied from just below: long lines repeat that close only as copies).
    """
    following = following_lines(suffix)
    if not following:
        return text
    lines = text.split("\n")
    full = [line_prefix + lines[0]] + lines[1:]
    for i, ln in enumerate(full):
        if i == 0 and line_prefix.strip():
            continue  # the cursor's own line is never a copy of the next one
        if not ln.strip():
            continue
        if ln.rstrip() == following[0] or _similar(ln, following[0]):
            return "\n".join(lines[:i])
        if len(ln.strip()) >= LONG_COPY_CHARS and any(ln.strip() == f.strip() for f in following[1:3]):
            return "\n".join(lines[:i])
        nxt = next((x for x in full[i + 1:] if x.strip()), None)
        if nxt is None:
            continue
        for k in range(1, min(4, len(following) - 1)):
            pair = (following[k], following[k + 1])
            if _similar(ln, pair[0]) and _similar(nxt, pair[1]) and \
                    not (_is_trivial(ln) and _is_trivial(nxt)):
                return "\n".join(lines[:i])
    return text


def fix_first_indent(text: str, line_prefix: str) -> str:
    """The cursor sits after indentation the editor (or user) already typed, yet the model starts with more
    whitespace (a FIM prompt ending in whitespace invites it). The cursor's column is the intent: drop the
    extra from the first line, and from the following lines when they all carry it too (the model then
    believed in a deeper block throughout)."""
    if not line_prefix or line_prefix.strip():
        return text
    first = text.split("\n", 1)[0]
    extra = first[: len(first) - len(first.lstrip(" \t"))]
    if not extra or not first.strip():
        return text
    lines = text.split("\n")
    rest = lines[1:]
    if all(not ln.strip() or ln.startswith(extra) for ln in rest):
        rest = [ln[len(extra):] if ln.strip() else ln for ln in rest]
    return "\n".join([first[len(extra):]] + rest)


def limit_scope(text: str, line_prefix: str) -> str:
    """Stop when indentation leaves the cursor's block.

    - cursor after indentation only (empty line): lines indented less than the cursor leave the block.
    - the cursor's line opens a block: the body is indented deeper; a line back at the opener's
      indentation ends it (kept when it only closes, like ``}``).
    - otherwise lines indented less than the cursor's line leave its block.
    """
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    ref = indent_width(line_prefix)
    first = line_prefix + lines[0]
    opener = bool(line_prefix.strip()) and opens_block(first)
    for i in range(1, len(lines)):
        ln = lines[i]
        if not ln.strip():
            continue
        w = indent_width(ln)
        if opener:
            if w <= ref:
                if w == ref and _CLOSING_LINE.match(ln):
                    return "\n".join(lines[: i + 1])
                return "\n".join(lines[:i]).rstrip()
        elif w < ref:
            return "\n".join(lines[:i]).rstrip()
    return text


def _previous_line(prefix: str) -> str | None:
    lines = prefix.split("\n")[:-1]
    for ln in reversed(lines[-20:]):
        if ln.strip():
            return ln
    return None


_RUN = re.compile(r"(.{1,8}?)\1{7,}$")  # a unit of 1-8 characters repeated 8+ times at a line's end


def drop_repetition(text: str, line_prefix: str, prefix: str, truncated: bool) -> str:
    """Drop text that repeats itself or the line above.

    - the cursor's line, completed, equals the previous non-blank line: the model is copying it.
    - the text ends with a block of 1-4 lines repeated (three copies of one line, two of a longer block):
      one copy is kept.
    - a truncated generation whose last line ends in a run of one short unit (``)))))))``): the run goes.
    """
    lines = text.split("\n")
    prev = _previous_line(prefix)
    if prev is not None and not _is_trivial(prev) and lines[0].strip() and \
            (line_prefix + lines[0]).strip() == prev.strip():
        return ""
    # compare whole lines: the first one starts at the cursor, after the line's own indentation
    full = [line_prefix + lines[0]] + lines[1:]
    n = len(full)
    for k in range(1, 5):
        copies_needed = 3 if k == 1 else 2
        if n < k * copies_needed:
            continue
        block = full[-k:]
        if all(_is_trivial(b) for b in block):
            continue
        copies = 1
        while n >= k * (copies + 1) and full[n - k * (copies + 1): n - k * copies] == block:
            copies += 1
        if copies >= copies_needed:
            lines = lines[: n - k * (copies - 1)]
            break
    if truncated and lines:
        m = _RUN.search(lines[-1])
        if m:
            lines[-1] = lines[-1][: m.start() + len(m.group(1))]
    return "\n".join(lines)


def fit_line_suffix(text: str, line_prefix: str, line_suffix: str, prefix: str) -> Suggestion:
    """Make the text fit what is right of the cursor on its line, and keep brackets balanced.

    - The text ends with the rest of the line (or its first 3+ characters): the copy is cut.
    - The rest of the line is auto-closed brackets/quotes the text supplies itself (``print(|)`` →
      ``"hi")``), and the line only balances without them: the suggestion replaces them (``replace``).
    - Otherwise a closer that closes nothing is cut, with everything after it.
    """
    rest = line_suffix.rstrip()
    state = prefix_state(prefix)
    if not rest.strip():
        return Suggestion(_balanced_cut(text, "", state))
    core = rest.strip()
    last_nl = text.rfind("\n")
    head, last = text[: last_nl + 1], text[last_nl + 1:]
    if last.endswith(core):
        last = last[: len(last) - len(core)].rstrip() if last.endswith(" " + core) else last[: len(last) - len(core)]
    else:
        # partial overlap: the text ends with the beginning of the rest of the line
        for k in range(min(len(core), len(last)) - 1, 2, -1):
            if last.endswith(core[:k]):
                last = last[: len(last) - k]
                break
    text = head + last
    if all(c in AUTO_CLOSED for c in core):
        if scan(text + rest, state)[1] is None:
            return Suggestion(text)
        if scan(text, state)[1] is None and _is_subsequence(core, last):
            return Suggestion(text, replace=len(rest))
    return Suggestion(_balanced_cut(text, rest, state))


def _is_subsequence(needle: str, hay: str) -> bool:
    it = iter(hay)
    return all(c in it for c in needle)


# ---------------------------------------------------------------------------------------------------------
# complete statements: never show a line cut in the middle (``for b in``, a condition without its colon)

_PY_HINT = re.compile(r"^\s*(?:def |class |import |from \S+ import |elif |except\b|with |async def )|:\s*(?:#.*)?$",
                      re.M)
_C_HINT = re.compile(r"[;{}]\s*(?://.*)?$|^\s*(?:function |const |let |var |fn |func |#include)", re.M)
# a line ending in one of these goes on (binary operators, separators, keywords that need what follows)
_OPEN_END = re.compile(
    r"(?:[-+*/%=<>!&|^~,.?@\\]|\b(?:and|or|not|in|is|if|elif|else|for|while|with|as|from|import|def|class|"
    r"lambda|return\s+not|await|yield\s+from|new|of|let|const|var|function|typeof|instanceof|case|fn|"
    r"match|where|impl|struct|enum|async|del|assert|raise|except|throw))$")
_TOKEN = re.compile(r"\w+|\"(?:\\.|[^\"\\])*\"?|'(?:\\.|[^'\\])*'?|\S")
_PY_CONTINUES = re.compile(r"^\s*(elif\b|else\b|except\b|finally\b)")


@functools.lru_cache(maxsize=64)
def guess_language(text: str) -> str:
    """``python`` or ``other`` from the text itself, for callers that do not pass the document's
    language: Python lines (``def``, ``import``, a trailing colon) against C-family ones (``;``, braces)."""
    py = len(_PY_HINT.findall(text))
    c = len(_C_HINT.findall(text))
    return "python" if py > c else "other"


def _lang(language: str | None, text: str) -> str:
    if not language:  # None, or a client's empty languageId
        return guess_language(text)
    return "python" if language.lower() in ("python", "py", "python3") else "other"


def _depth_brackets(lang: str) -> str:
    # C-family bodies live inside `{`, so a statement is delimited by ( and [ only
    return "([{" if lang == "python" else "(["


def statement_start(prefix: str, language: str | None = None, max_lines: int = 40) -> str:
    """The text of the statement the cursor is in, from its first line (the last line before the cursor
    that starts outside any bracket and does not follow a ``\\`` continuation) to the cursor."""
    return _statement_start(prefix, _lang(language, prefix[-2000:]), max_lines)


@functools.lru_cache(maxsize=64)
def _statement_start(prefix: str, lang: str, max_lines: int = 40) -> str:
    keep = _depth_brackets(lang)
    lines = prefix.split("\n")[-max_lines:]
    state = ScanState()
    start = 0
    for j, ln in enumerate(lines):
        if not any(c in keep for c in state.stack) and not (j and lines[j - 1].endswith("\\")):
            start = j
        text = ln + "\n"
        while True:
            state, bad = scan(text, state)
            if bad is None:
                break
            text = text[bad + 1:]
    return "\n".join(lines[start:])


def _python_complete(src: str) -> bool:
    """Does ``src`` (a statement, or the start of a block) parse? A trailing header (``for x in y:``) gets a
    ``pass`` body and a leading ``else:``/``except:`` its opener, so a finished header line counts."""
    lines = src.split("\n")
    first = next((ln for ln in lines if ln.strip()), "")
    code = [ln for ln in lines if ln.strip() and not ln.strip().startswith("#")]
    if not code:
        return True
    last = code[-1]
    ind0 = first[: len(first) - len(first.lstrip())]
    pre = ""
    m = _PY_CONTINUES.match(first)
    if m:
        pre = ind0 + ("try:" if m.group(1) in ("except", "finally") else "if x:") + "\n" + ind0 + "    pass\n"
    post = ""
    stripped = _code_part(last)
    if stripped.endswith(":") or stripped.lstrip().startswith("@"):
        ind = last[: len(last) - len(last.lstrip())]
        post = "\n" + ind + ("    pass" if stripped.endswith(":") else "def _(): pass")
    # inside `if 1:` every line may keep its own indentation (one more column than written)
    body = pre + src + post
    wrapped = "if 1:\n" + "\n".join(" " + ln for ln in body.split("\n"))
    try:
        tree = ast.parse(wrapped)
    except (SyntaxError, ValueError):
        return False
    # a last line that is only a name or an attribute (``self.insert``, ``value``) parses, but as a
    # statement it does nothing: the line is still being written (a call, an assignment follows)
    last_no = 2 + pre.count("\n") + max(i for i, ln in enumerate(lines) if ln.strip() and not ln.strip().startswith("#"))
    return not any(isinstance(node, ast.Expr) and isinstance(node.value, ast.Name | ast.Attribute)
                   and node.end_lineno == last_no for node in ast.walk(tree))


def _heuristic_complete(src: str, keep: str) -> bool:
    """Brackets (those ``keep`` names) balanced and closed strings, and not ending on an operator or a
    keyword that needs more: the check for languages we do not parse."""
    state, bad = scan(src)
    if bad is not None or state.quote is not None:
        return False
    if any(c in keep for c in state.stack):
        return False
    last = _code_part(src.rstrip().split("\n")[-1]).strip()
    if not last:
        return True
    if last.endswith(("{", "}", ";", ")", "]", "++", "--")):
        return True
    return not _OPEN_END.search(last)


def _inside_open_bracket(prefix: str, lang: str) -> bool:
    return any(c in _depth_brackets(lang) for c in prefix_state(prefix).stack)


def is_complete_statement(stmt: str, language: str | None = None) -> bool:
    """``stmt`` (from ``statement_start`` through the inserted text and the rest of its line) is a whole
    statement or block header: Python by its parser, other languages by brackets and the last token."""
    lang = _lang(language, stmt)
    if lang == "python":
        return _python_complete(stmt)
    return _heuristic_complete(stmt, _depth_brackets(lang))


def ends_mid_statement(text: str, prefix: str, line_suffix: str = "", language: str | None = None) -> bool:
    """Would inserting ``text`` at the cursor leave its last line unfinished (``for b in``, ``x = (a +``)?"""
    lang = _lang(language, prefix[-2000:])
    return _ends_mid(text, prefix, line_suffix, lang, _inside_open_bracket(prefix, lang),
                     _statement_start(prefix, lang))


def _ends_mid(text: str, prefix: str, line_suffix: str, lang: str, inside: bool, stmt: str) -> bool:
    if inside:
        # inside a call/list the suffix continues: only an open end (operator, keyword, string) is cut
        last = _code_part((prefix[-400:] + text).split("\n")[-1]).strip()
        state, _ = scan(text)
        return state.quote is not None or bool(last) and bool(_OPEN_END.search(last)) and not last.endswith(",")
    return not is_complete_statement(stmt + text + line_suffix, lang)


def _cut_points(line: str) -> list[int]:
    """Ends of the tokens of ``line``, longest first."""
    return sorted({m.end() for m in _TOKEN.finditer(line)}, reverse=True)


def cut_to_complete(text: str, prefix: str, line_suffix: str = "", language: str | None = None) -> str:
    """Cut a text that a limit stopped mid-line back to the longest token sequence that completes the
    statement (``for b in`` -> nothing; ``x = foo(a, b`` -> ``x = foo``... -> the whole line once it is
    complete). Whole lines before the last one are kept; a last line with no complete cut goes. May return
    ``""``: nothing complete to show."""
    lang = _lang(language, prefix[-2000:])
    inside, stmt = _inside_open_bracket(prefix, lang), _statement_start(prefix, lang)
    nl = text.rfind("\n")
    head, last = text[: nl + 1], text[nl + 1:]
    for cut in _cut_points(last):
        rest = last[cut:].lstrip()
        if rest and (rest[0] in "([.=:" or not any(ch.isalnum() for ch in last[:cut])):
            continue  # a name cut from its call, index, attribute or assignment says something else
        cand = head + last[:cut]
        if not _ends_mid(cand, prefix, line_suffix, lang, inside, stmt):
            return cand
    return head.rstrip("\n") if head.strip() else ""


def cut_block_to_complete(text: str, prefix: str, line_suffix: str = "", language: str | None = None) -> str:
    """``cut_to_complete`` for a text of several lines: when cutting the last line is not enough (the
    statement opened on an earlier line: ``foo(\n    a,\n    b,``), whole lines go from the end until what is
    left completes its statements. May return ``""``."""
    while text.strip() and ends_mid_statement(text, prefix, line_suffix, language):
        cut = cut_to_complete(text, prefix, line_suffix, language).rstrip()
        if cut == text.rstrip():
            cut = text[: text.rfind("\n")].rstrip() if "\n" in text else ""
        text = cut
    return text


def misses_block_opener(text: str, prefix: str, suffix: str, language: str | None = None) -> bool:
    """Python: the line below the cursor's is indented deeper than the text's last line, so that line
    opens the block (an emptied ``elif x:``); a text ending in a plain statement there (``raise``) breaks
    the code below. Not inside brackets (a call's continuation lines) or a statement left open."""
    body = text.rstrip()
    if not body.strip() or _lang(language, prefix[-2000:]) != "python":
        return False
    line_prefix, line_suffix = split_cursor(prefix, suffix)
    if line_suffix.strip() or _inside_open_bracket(prefix, "python"):
        return False
    below = next((ln for ln in suffix.split("\n")[1:] if ln.strip()), None)
    if below is None or below.lstrip().startswith("#"):
        return False
    last = (line_prefix + body).split("\n")[-1]
    if len(below) - len(below.lstrip()) <= len(last) - len(last.lstrip()):
        return False
    return not opens_block(last) and not ends_mid_statement(body, prefix, "", language)


_PY_ELSE = re.compile(r"^\s*else\s*:\s*(?:#.*)?$")
_PY_CHAIN_GOES_ON = re.compile(r"^\s*(?:else\b|elif\b)")


def else_goes_on_below(text: str, prefix: str, suffix: str, language: str | None = None) -> bool:
    """Python: the text's last line at the cursor's indentation is ``else:`` while the code below, back at
    that indentation, goes on with its own ``else``/``elif`` (an emptied ``elif x:`` filled with ``else:``):
    Tab would leave two ``else`` branches, a syntax error."""
    if not text.strip() or _lang(language, prefix[-2000:]) != "python":
        return False
    line_prefix, _ = split_cursor(prefix, suffix)
    lines = (line_prefix + text.rstrip()).split("\n")
    col = indent_width(lines[0]) if lines[0].strip() else indent_width(line_prefix)
    chain = [ln for ln in lines if ln.strip() and indent_width(ln) == col]
    if not chain or not _PY_ELSE.match(chain[-1]):
        return False
    for ln in suffix.split("\n")[1:]:
        if not ln.strip() or ln.lstrip().startswith("#") or indent_width(ln) > col:
            continue
        return indent_width(ln) == col and bool(_PY_CHAIN_GOES_ON.match(ln))
    return False


def drop_dangling_header(text: str, line_prefix: str) -> str:
    """A block cut by a limit that ends on a line opening a nested block (``for x in xs:`` with no body
    yet) stops before that line: Tab would leave a header without its body."""
    lines = text.split("\n")
    if len(lines) < 2 or not opens_block(lines[-1]):
        return text
    return "\n".join(lines[:-1]).rstrip()


# ---------------------------------------------------------------------------------------------------------
# budgets: how much to generate for a cursor, and when a streaming generation has written enough

SINGLE_LINE_TOKENS = 48
TOKENS_PER_LINE = 24
MAX_BLOCK_TOKENS = 384
BODY_LINES = 16  # the rest of a body: most function bodies fit


@dataclass(frozen=True)
class Budget:
    """What to ask the model for at a cursor (``budget_for``) and when to stop it (``stop_reached``).

    ``kind``: ``line`` (finish the cursor's line), ``statement`` (one statement, a compound one with its
    body: a gap in the middle of code), ``header`` (the line that opens the block below: an empty line
    whose next line is indented deeper, so the body is there already), ``next`` (the statement after a
    finished line, starting with the line break), ``body`` (the rest of the block: the cursor is at the end
    of a body or opens one).
    ``max_lines`` counts shown lines (+1 for a leading line break is the caller's ``max_lines`` for the
    generation, as today); ``stop_below``: a line indented less than this column ends the suggestion.
    """
    kind: Literal["line", "statement", "header", "next", "body"]
    mode: Mode
    max_tokens: int
    max_lines: int
    stop_below: int | None = None


def _ends_body(suffix: str, column: int) -> bool:
    """The next non-blank line after the cursor's line is indented less than ``column`` (or there is
    none): the cursor is at the end of its block."""
    following = following_lines(suffix, 1)
    return not following or indent_width(following[0]) < column


def _opens_block_below(prefix: str, suffix: str, column: int) -> bool:
    """The cursor's empty line is followed by a line indented deeper than ``column`` (not a comment, not a
    continuation inside brackets): the line written there opens that block, whose body exists. At column 0
    only when the code above is at column 0 too: an editor that strips blank lines puts the cursor of an
    empty line inside a body at column 0."""
    following = following_lines(suffix, 1)
    if not following or indent_width(following[0]) <= column or following[0].lstrip().startswith(("#", "//")):
        return False
    if column == 0:
        above = _previous_line(prefix)
        if above is not None and indent_width(above) > 0:
            return False
    return not _inside_open_bracket(prefix, _lang(None, prefix[-2000:]))


def budget_for(prefix: str, suffix: str, language: str | None = None, *, max_lines: int = 8) -> Budget:
    """Size the generation by the context:

    - text right of the cursor, or a line being written: finish the line;
    - an empty line whose next line is indented deeper: the header of the block below (one line);
    - an empty line in the middle of code (the next line is at the cursor's indentation): one statement (a
      compound one with its body);
    - an empty line at the end of a body, or a line that opens a block with no body below yet: the rest of
      the body, up to ``BODY_LINES``, stopping at a dedent below the body;
    - the end of a finished line with nothing right of it: the next statement, after the line break.
    """
    line_prefix, line_suffix = split_cursor(prefix, suffix)
    col = indent_width(line_prefix)
    if line_suffix.strip():
        mode = decide_mode(line_prefix, line_suffix)
        if mode == "multi":  # `{|}`: a body between braces
            return Budget("body", "multi", min(MAX_BLOCK_TOKENS, TOKENS_PER_LINE * (max_lines + 1)), max_lines,
                          col + 1)
        return Budget("line", "single", SINGLE_LINE_TOKENS, 1)
    if not line_prefix.strip():
        if _opens_block_below(prefix, suffix, col):
            return Budget("header", "single", SINGLE_LINE_TOKENS, 1)
        if _ends_body(suffix, col):
            n = max(max_lines, BODY_LINES)
            return Budget("body", "multi", min(MAX_BLOCK_TOKENS, TOKENS_PER_LINE * (n + 1)), n, col)
        return Budget("statement", "multi", TOKENS_PER_LINE * (max_lines + 1), max_lines, col)
    if opens_block(line_prefix):
        body_col = col + 1
        following = following_lines(suffix, 1)
        if following and indent_width(following[0]) > col:  # the body exists: add its first statement
            return Budget("statement", "multi", TOKENS_PER_LINE * (max_lines + 1), max_lines, body_col)
        n = max(max_lines, BODY_LINES)
        return Budget("body", "multi", min(MAX_BLOCK_TOKENS, TOKENS_PER_LINE * (n + 1)), n, body_col)
    if not ends_mid_statement("", prefix, "", language):
        return Budget("next", "multi", TOKENS_PER_LINE * 3, 2, col)
    return Budget("line", "single", SINGLE_LINE_TOKENS, 1)


def cut_to_budget(text: str, line_prefix: str, budget: Budget) -> str:
    """What of a (possibly still streaming) text the budget shows: one line; one statement (the first line
    and, when it opens a block, its body); or the lines until a dedent below ``stop_below``. A ``next``
    text must start with the line break (otherwise it continues the finished line: the first line only)."""
    lines = text.split("\n")
    if budget.kind in ("line", "header"):
        return lines[0]
    if budget.kind == "next" and lines[0].strip():
        return lines[0]
    start = 1 if budget.kind == "next" or (lines[0] == "" and len(lines) > 1) else 0
    out = lines[: start + 1]
    if len(lines) <= start:
        return text
    first = line_prefix + lines[0] if start == 0 else lines[start]
    base = indent_width(first) if first.strip() else (budget.stop_below or 0)
    opened = opens_block(first) or (start == 1 and opens_block(line_prefix))
    for ln in lines[start + 1:]:
        if len(out) - start >= budget.max_lines:
            break
        if ln.strip():
            w = indent_width(ln)
            if budget.stop_below is not None and w < budget.stop_below:
                if budget.kind == "body" and w == budget.stop_below - 1 and _CLOSING_LINE.match(ln):
                    out.append(ln)  # the `}` that closes the body opened at the cursor
                break
            if budget.kind in ("statement", "next") and w <= base and not (opened and _PY_CONTINUES.match(ln)):
                if not (opened and w == base and _CLOSING_LINE.match(ln)):
                    break
                out.append(ln)  # the `}` that closes the statement's block
                break
            if budget.kind in ("statement", "next") and not opened and w > base:
                out.append(ln)  # a continuation line of the one statement
                continue
        out.append(ln)
    return "\n".join(out).rstrip()


def stop_reached(text: str, line_prefix: str, budget: Budget) -> bool:
    """For the engine's streaming loop: the text has gone past what ``cut_to_budget`` will show (a line
    after the shown ones has started), so generating more is wasted."""
    if "\n" not in text:
        return False
    last = text[text.rfind("\n") + 1:]
    # a started line's indentation already tells whether it is shown; an empty one tells nothing yet
    seen = text if last.strip() else text[: text.rfind("\n")]
    shown = cut_to_budget(seen, line_prefix, budget)
    return len(shown) < len(seen.rstrip())


def settled(text: str, finished: bool, line_prefix: str, budget: Budget) -> bool:
    """Is a (possibly still streaming) variant's suggestion final? Its generation ended, or it has gone
    past what ``budget`` shows (``stop_reached``). A request can answer with item 1 once it is settled
    and let the other variants follow (flint/variants, a refresh) instead of waiting for all of them."""
    return finished or stop_reached(text, line_prefix, budget)


# finish reasons of a generation stopped by a limit rather than by the model (its last line may be unfinished)
CUT_OFF_REASONS = frozenset({"length", "deadline", "cancelled", "partial"})


def _finish_statement(first: str, rest: list[str], prefix: str, language: str | None,
                      max_extra: int = 3) -> str:
    """A one-line text whose statement goes on over the next lines the model wrote (``x = f(a,`` then
    ``b)``): take those lines until the statement is complete (at most ``max_extra``)."""
    text = first
    for ln in rest[:max_extra]:
        if not ends_mid_statement(text, prefix, "", language):
            break
        text = text + "\n" + ln
    return text


def doubt_cut(text: str, doubts: tuple[tuple[int, float], ...], below: float) -> str:
    """``text`` up to its first token the model chose with probability under ``below`` (``doubts``: (offset,
    probability) pairs, engine ``Completion.doubts``), so an automatic suggestion shows what the model is
    sure of: what follows a guess is only as good as the guess. A doubt in the first line cuts at that token;
    one in a later line keeps the whole lines before it. A doubt before any visible character does not cut
    (the suggestion then runs to the next one); ``below`` <= 0: no cut. Only the cursor's own line is cut
    inside: a line the suggestion starts (the next line offered after a break, a block's later lines) is
    kept whole or dropped whole, as a part of it would be a statement cut in its middle (issue 16)."""
    if below <= 0:
        return text
    for at, p in doubts:
        if p >= below:
            continue
        if at >= len(text):
            break
        head = text[:at]
        if not head.strip():
            continue
        nl = head.rfind("\n")
        if nl < 0:
            return head  # on the cursor's line
        kept = text[:nl].rstrip(" \t")
        if kept.strip():
            return kept  # the whole lines before the doubt's line
        # (the first visible line is one the suggestion starts: not cut; a later doubt may cut below it)
    return text


def postprocess(raw: str, prefix: str, suffix: str, *, mode: Mode = "single", max_lines: int = 8,
                truncated: bool = False, language: str | None = None, complete_statements: bool = True,
                offer_next_line: bool = True, one_statement_in_code: bool = True) -> Suggestion | None:
    """Raw model text at the cursor -> the suggestion to show, or None when nothing useful is left.

    ``prefix``/``suffix`` are the document text before/after the cursor (LF line breaks). ``truncated``:
    the generation stopped on a limit (tokens, lines, deadline) rather than on its own. ``language``: the
    document's language id (guessed from the text when None). ``complete_statements``: a line a limit cut
    (or a one-line text whose statement goes on below) is finished from the model's next lines or cut back
    to a complete statement, never shown mid-statement. ``offer_next_line``: at the end of a finished line
    (nothing right of the cursor) a one-line request whose text starts with a line break shows that next
    line (after the break) instead of nothing. ``one_statement_in_code``: a block asked for in the middle of
    code (the next line is at the cursor's indentation) shows one statement (``budget_for``'s
    ``statement``), a compound one with its body; on an empty line whose next line is indented deeper, only
    the line that opens that block (``header``: its body is there).
    """
    line_prefix, line_suffix = split_cursor(prefix, suffix)
    text = normalize(raw)
    if offer_next_line and mode == "single" and text.startswith("\n") and not line_suffix.strip() \
            and line_prefix.strip() and not opens_block(line_prefix) \
            and not ends_mid_statement("", prefix, "", language):
        mode, max_lines = "multi", 1  # the model ended the line: its next line is the suggestion
    text = drop_incomplete_last_line(text, truncated and mode == "multi")
    raw_lines = text.split("\n")
    text = limit_lines(text, mode, max_lines)
    # the last shown line is one the model had not finished: a limit stopped it, or it continues below
    cut_mid_line = truncated and "\n" not in text
    if complete_statements and mode == "single" and len(raw_lines) > 1 and text.strip() and \
            not line_suffix.strip():
        text = _finish_statement(text, raw_lines[1:], prefix, language)
    text = fix_first_indent(text, line_prefix)
    text = cut_at_following_lines(text, line_prefix, suffix)
    if mode == "multi":
        text = limit_scope(text, line_prefix)
        if one_statement_in_code:
            budget = budget_for(prefix, suffix, language, max_lines=max_lines)
            if budget.kind in ("statement", "header"):
                text = cut_to_budget(text, line_prefix, budget)
        if truncated:
            text = drop_dangling_header(text, line_prefix)
    text = drop_repetition(text, line_prefix, prefix, truncated)
    if not text.strip():
        return None
    sug = fit_line_suffix(text, line_prefix, line_suffix, prefix)
    text = sug.text.rstrip()
    replace = sug.replace
    if complete_statements and (cut_mid_line or (mode == "single" and len(raw_lines) > 1)) and \
            ends_mid_statement(text, prefix, line_suffix[replace:], language):
        text = cut_to_complete(text, prefix, line_suffix, language).rstrip()
        replace = 0
    elif complete_statements and mode == "multi" and "\n" in text and \
            ends_mid_statement(text, prefix, line_suffix[replace:], language):
        # a block whose last whole line leaves its statement open (a call over several lines a limit cut,
        # a line limit inside a statement): back to the last complete statement, with no dangling header
        cut = cut_block_to_complete(text, prefix, line_suffix, language)
        if cut != text and cut.strip() and opens_block(cut.split("\n")[-1]):
            cut = cut[: cut.rfind("\n")].rstrip() if "\n" in cut else ""  # a header whose body was cut off
        text = cut
        replace = 0
    if replace == 0 and (misses_block_opener(text, prefix, suffix, language) or
                         else_goes_on_below(text, prefix, suffix, language)):
        return None
    if mode == "multi" and "\n" in text and replace == 0 and line_suffix.strip().startswith("}"):
        # `{|}`: the block goes between the braces, the brace on its own line below it
        text = text + "\n" + line_prefix[: len(line_prefix) - len(line_prefix.lstrip())]
    if not text.strip():
        return None
    return Suggestion(text, replace)
