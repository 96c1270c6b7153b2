"""The statement window: the lines above a cursor that its statement (and the headers of the blocks around
it) needs, so a question about the statement parses a few dozen lines, not the whole file. Pure text; no
grammar needed."""

from __future__ import annotations

import functools
import re

WINDOW_LINES = 60
MAX_SCAN_LINES = 3000  # how far up the headers of the enclosing blocks are looked for
_CONTINUATION_KEYWORDS = ("else", "elif", "except", "finally", "catch", "case", "default")


def indent_width(line: str) -> int:
    """The width of ``line``'s leading blanks, a tab to the next multiple of 4 (a walk asks it of every line above:
    only a line whose blanks hold a tab is expanded)."""
    n = len(line) - len(line.lstrip())
    return n if line.find("\t", 0, n) < 0 else len(line[:n].expandtabs(4))


def _opens(line: str) -> bool:
    s = line.rstrip()
    return bool(s) and (s[-1] in "{(:[" or s.endswith(("=>", "->")))


def _header_line(line: str, col: int) -> bool:
    """A line above the cursor that opens a block around it or starts the statement it continues:
    indented less than ``col`` and ending in an opener or an operator (a line of a multi-line string or
    comment that happens to sit at a lower indentation rarely does); not a line that only closes
    brackets, continues a clause (``} else {``, ``except:``) or is a comment. A leading ``>`` closes a type
    parameter list (``> extends Base {`` of a generic class over several lines): its header starts above."""
    s = line.strip()
    return bool(s) and indent_width(line) < col and (_opens(line) or s[-1] in ",=+-*/%&|?.<>!") and \
        s[0] not in _CLOSES and not s.startswith(_CONTINUATION_KEYWORDS) and not _comment_line(s)


_CLOSES = ")]}>"  # a line starting with one continues a statement begun above
_GOES_ON = ",([=+-*/%&|?.<>!\\"  # a line ending in one of these continues on the next


# `#name(`, `#name =`, `#name:` start a JavaScript/TypeScript private member, not a `#` comment
_PRIVATE_MEMBER = re.compile(r"#[A-Za-z_$][\w$]*(?:\s*[(<:=!?;]|$)")


def _comment_line(s: str) -> bool:
    return s.startswith(("*", "//", "/*")) or (s.startswith("#") and not _PRIVATE_MEMBER.match(s))


def _boundary(lines: list[str], i: int, col: int) -> bool:
    """``lines[i]`` starts a statement at column ``col``: the code line above it ends one. (Exactly at
    ``col``: a line of a multi-line string at some other indentation is no statement.)"""
    s = lines[i].strip()
    if not s or indent_width(lines[i]) != col or s[0] in _CLOSES or s.startswith(_CONTINUATION_KEYWORDS) or \
            _comment_line(s):
        return False
    above = next((ln.strip() for ln in reversed(lines[max(0, i - 20): i])
                  if ln.strip() and not _comment_line(ln.strip())), None)
    return above is None or above[-1] not in _GOES_ON


def _far_header(lines: list[str], i: int) -> list[str] | None:
    """The header that ``lines[i]`` starts, whole: the line when it opens a block (with the line above
    for an Allman ``{``), else the lines down to the one that does (a signature over several lines, its
    parameters one a line after a ``(``);
    None when no block opens within 16 lines (a generic class's type parameters, one a line)."""
    s = lines[i].strip()
    if s.startswith("{"):
        return lines[_allman_start(lines, i, max(0, i - 8)): i + 1]
    if _opens(lines[i]) and not lines[i].rstrip().endswith(("(", "[")):
        return [lines[i]]
    for j in range(i + 1, min(len(lines), i + 16)):  # (a signature's parameters, one a line, down to its `{`/`:`)
        if lines[j].rstrip().endswith(("{", ":")):
            return lines[i: j + 1]
    return None


def _allman_start(lines: list[str], i: int, lo: int) -> int:
    """The first line of the header an Allman ``{`` (``lines[i]``) ends: the line above it, or up through a
    ``where`` clause and its bounds (indented deeper than the brace) to the line at the brace's column."""
    c = indent_width(lines[i])
    j = i - 1
    while j > lo and lines[j].strip() and (indent_width(lines[j]) > c or lines[j].strip().startswith("where")):
        j -= 1
    return max(j, lo)


_OPENERS = {'"""': '"""', "'''": "'''", "`": "`", "/*": "*/"}
_DELIMITER = re.compile(r'"""|\'\'\'|`|/\*|\*/')


def string_lines(lines: list[str]) -> set[int]:
    """The indexes of ``lines`` that start inside a multi-line string or block comment (triple quotes,
    backticks, ``/* */``), counted from the first line: a statement cannot start there. Inside one, only its
    own closer counts (a docstring's backticks, a comment's quotes). One-line strings and line comments are not
    followed (a rare ``# '''`` can mislead it; a window is then what it was before)."""
    text = "\n".join(lines)
    spans: list[tuple[int, int]] = []  # (after an opener, at its closer)
    pos = 0
    while (m := _DELIMITER.search(text, pos)) is not None:  # a search per string, not per delimiter
        closer = _OPENERS.get(m.group())
        if closer is None:  # a stray `*/`
            pos = m.end()
            continue
        opened = m.end()
        if closer == "*/":  # (a `/*` inside a comment can hold the `*` of `/*/`: delimiters read in order)
            end = next((d.start() for d in _DELIMITER.finditer(text, opened) if d.group() == "*/"), -1)
        else:  # no other delimiter shares a character with a quote or a backtick
            end = text.find(closer, opened)
        if end < 0:
            spans.append((opened, len(text)))
            break
        spans.append((opened, end))
        pos = end + len(closer)
    inside: set[int] = set()
    # a line starts inside when its first character is between an opener and its closer: lines are counted by
    # the newlines before each span's ends (spans come in order), not by every line's offset
    newlines, at = 0, 0  # newlines in text[:at]
    for lo, hi in spans:
        first = 0
        if lo > 0:
            newlines, at = newlines + text.count("\n", at, lo - 1), lo - 1
            first = newlines + 1  # the first line starting at or after lo
        newlines, at = newlines + text.count("\n", at, hi), hi
        inside.update(range(first, newlines + 1))  # through the last line starting at or before hi
    return inside


@functools.lru_cache(maxsize=32)  # one request asks for every variant and cut with the same prefix
def statement_window(text_before: str, max_lines: int = WINDOW_LINES, max_scan: int = MAX_SCAN_LINES) -> str:
    """What to parse of ``text_before`` so the statement at its end is whole, inside the blocks around it.

    Within the last ``max_lines`` lines: from the outermost header of the enclosing blocks found there
    (each line above indented less than the last: a block opener, or the start of a statement the cursor's
    line continues), or, when that does not reach column 0, from the first line there that starts a
    statement at that header's (or the cursor's) level (so a ``}, 3000);`` has its opener). Above the window, up
    to ``max_scan`` lines, the headers of the blocks still around it come alone (a method in a long class:
    the class line). An empty cursor line (or one whose indentation is still being typed) counts at least at
    the indentation of the code line above it, one deeper when that line opens a block (editors strip a blank
    line's spaces)."""
    nl = text_before.rfind("\n")
    if nl < 0:
        return text_before
    cur = text_before[nl + 1:]
    blank = not cur.strip()
    col = len(cur.expandtabs(4)) if blank else indent_width(cur)
    return _lines_above(text_before[:nl], col, blank, max_lines, max_scan) + cur


@functools.lru_cache(maxsize=8)
def _lines_above(head: str, col: int, blank: bool, max_lines: int, max_scan: int) -> str:
    """The window's lines above the cursor's line (joined, each ending in a newline) for the text ``head`` above
    it: the same while the cursor's line is typed (most keystrokes), so the walk is kept for the next ones."""
    return _walk_above(head, col, blank, max_lines, max_scan)


def _walk_above(head: str, col: int, blank: bool, max_lines: int, max_scan: int) -> str:
    above = head.rsplit("\n", max_scan - 1)
    if len(above) >= max_scan:
        above = above[1:]  # the first part may be many lines: never a header
    if blank:  # empty, or its indentation still being typed: at least the block's own column
        code = next((ln for ln in reversed(above[-20:]) if ln.strip() and not _comment_line(ln.strip())), None)
        if code is not None:
            col = max(col, indent_width(code) + (1 if _opens(code) else 0))
    n = len(above)
    lo = max(0, n - max_lines)
    start, c = n, col
    for i in range(n - 1, lo - 1, -1):
        if c == 0:
            break
        if above[i][:c].strip() and _header_line(above[i], c):  # (the first: a line indented less has a sign there)
            start, c = i, indent_width(above[i])
            if above[i].strip().startswith("{") and i > lo:  # Allman braces: the header is above
                j = _allman_start(above, i, lo)
                start, c = j, min(c, indent_width(above[j]))
    if c > 0:
        # a docstring's lines sit at a statement's column (block comments' lines start with `*`: no boundary)
        quoted = any('"""' in ln or "'''" in ln for ln in above[lo:start])
        strings = string_lines(above[:start]) if quoted else set()
        first = next((i for i in range(lo, start) if i not in strings and _boundary(above, i, c)), None)
        if first is not None:
            start, c = first, indent_width(above[first])
    far: list[list[str]] = []
    for i in range(start - 1, -1, -1):
        if c == 0:
            break
        if above[i][:c].strip() and _header_line(above[i], c):
            header = _far_header(above, i)
            if header is not None:
                far.append(header)
                c = min(indent_width(ln) for ln in header if ln.strip())
    lines = [ln for h in reversed(far) for ln in h] + above[start:]
    return "\n".join(lines) + "\n" if lines else ""


