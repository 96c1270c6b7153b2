"""Reading the code at a cursor: its lines, its brackets, and whether a text leaves a statement unfinished.

Pure functions shared by the post-processing steps (engine/text/postprocess.py) and the budgets
(engine/text/budget.py): line helpers (indentation, block openers, the lines around the cursor), a small bracket
scanner (``scan``, ``prefix_state``), and the complete-statement checks (``ends_mid_statement``,
``cut_to_complete``, ``cut_block_to_complete``, ``misses_block_opener``, ``else_goes_on_below``,
``drop_dangling_header``): Python by its parser, a language the client names and tree-sitter has a grammar for
by its parse (engine/syntax/adapt.py), any other by brackets and the last token.

The bracket scanner is deliberately small (strings on one line, ``#``/``//`` comments): it is a guard against
obvious damage, not a parser.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass

from engine.syntax import adapt

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


def split_cursor(prefix: str, suffix: str) -> tuple[str, str]:
    """(text on the cursor's line before it, text on the cursor's line after it)."""
    line_prefix = prefix[prefix.rfind("\n") + 1:]
    nl = suffix.find("\n")
    line_suffix = suffix if nl == -1 else suffix[:nl]
    return line_prefix, line_suffix


def following_lines(suffix: str, n: int = 8) -> list[str]:
    """The first ``n`` non-blank lines after the cursor's line (right-stripped)."""
    out: list[str] = []
    nl = suffix.find("\n")
    while nl != -1 and len(out) < n:  # line by line: the suffix may be the rest of a long file
        end = suffix.find("\n", nl + 1)
        ln = suffix[nl + 1: end if end != -1 else len(suffix)]
        if ln.strip():
            out.append(ln.rstrip())
        nl = end
    return out


def _previous_line(prefix: str) -> str | None:
    """The last non-blank line above the cursor's, within 20 lines (without splitting a long prefix)."""
    end = prefix.rfind("\n")
    for _ in range(20):
        if end == -1:
            return None
        start = prefix.rfind("\n", 0, end) + 1
        if prefix[start:end].strip():
            return prefix[start:end]
        end = start - 1
    return None


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
    tree = adapt.is_complete_statement(stmt, language)  # a grammar for the client's language (not Python)
    if tree is not None:
        return tree
    lang = _lang(language, stmt)
    if lang == "python":
        return _python_complete(stmt)
    return _heuristic_complete(stmt, _depth_brackets(lang))


def ends_mid_statement(text: str, prefix: str, line_suffix: str = "", language: str | None = None) -> bool:
    """Would inserting ``text`` at the cursor leave its last line unfinished (``for b in``, ``x = (a +``)?"""
    tree = adapt.ends_mid_statement(text, prefix, line_suffix, language)
    if tree is not None:
        return tree
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
    tree = adapt.cut_to_complete(text, prefix, line_suffix, language)
    if tree is not None:
        return tree
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


_WORD_ONLY = re.compile(r"\w+")


def ends_open(text: str, prefix: str, language: str | None) -> bool:
    """A language with a grammar (not Python): the text leaves its statement unfinished (``keyFinder =``, ``&&``,
    ``.get(key``) -- a line the model stopped early or a doubt cut -- and is more than the rest of the word being
    typed (``isFunct`` + ``ion``: the statement was open before it). Postprocess cuts it back like a line a limit
    cut. Python and languages without a grammar: False (as before)."""
    if adapt.tree_language(language) is None or not text.strip():
        return False
    if _WORD_ONLY.fullmatch(text) and (prefix[-1:].isalnum() or prefix[-1:] == "_"):
        return False
    return ends_mid_statement(text, prefix, "", language)


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
