"""Turn raw model text at a cursor into the suggestion an editor shows. Pure functions, no model.

``postprocess(raw, prefix, suffix, mode=...)`` runs the steps below in order; each is a small function
with golden tests (tests/test_postprocess.py):

1. ``normalize``                 LF line breaks, no trailing blanks, no runaway lines.
2. ``drop_incomplete_last_line`` a generation cut by a limit ends mid-line: drop that partial line.
3. ``limit_lines``               single-line mode keeps the first line; multi-line keeps ``max_lines``.
   ``fix_first_indent``          no extra indentation after the indentation already at the cursor.
4. ``cut_at_following_lines``    stop where the text starts repeating the lines after the cursor.
5. ``limit_scope``               stop when indentation leaves the block the cursor is in.
6. ``drop_repetition``           the previous line again, a looping block, a looping character run.
7. ``fit_line_suffix``           text right of the cursor: cut what duplicates it, replace auto-closed
                                 brackets/quotes when the text supplies them, never leave a stray closer.
8. never return empty or whitespace-only text (``None`` instead).

Everything works on LF text; the caller converts line breaks back to the document's own. The bracket
scanner is deliberately small (strings on one line, ``#``/``//`` comments): it is a guard against
obvious damage, not a parser.

``decide_mode(line_prefix, line_suffix, policy)`` says whether a position wants one line or a block.
"""

from __future__ import annotations

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


def cut_at_following_lines(text: str, line_prefix: str, suffix: str) -> str:
    """Stop before the first line that repeats the next non-blank line after the cursor's line.

    Lines compare with their indentation: a ``}`` that closes an inner block is not the ``}`` of the
    enclosing one that follows the cursor."""
    nl = suffix.find("\n")
    if nl == -1:
        return text
    following = next((ln.rstrip() for ln in suffix[nl + 1:].split("\n") if ln.strip()), None)
    if following is None:
        return text
    lines = text.split("\n")
    for i, ln in enumerate(lines):
        if i == 0 and line_prefix.strip():
            continue  # the cursor's own line is never a copy of the next one
        full = (line_prefix + ln) if i == 0 else ln
        if full.rstrip() == following:
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


# finish reasons of a generation stopped by a limit rather than by the model (its last line may be unfinished)
CUT_OFF_REASONS = frozenset({"length", "deadline", "cancelled", "partial"})


def postprocess(raw: str, prefix: str, suffix: str, *, mode: Mode = "single", max_lines: int = 8,
                truncated: bool = False) -> Suggestion | None:
    """Raw model text at the cursor -> the suggestion to show, or None when nothing useful is left.

    ``prefix``/``suffix`` are the document text before/after the cursor (LF line breaks). ``truncated``:
    the generation stopped on a limit (tokens, lines, deadline) rather than on its own.
    """
    line_prefix, line_suffix = split_cursor(prefix, suffix)
    text = normalize(raw)
    text = drop_incomplete_last_line(text, truncated and mode == "multi")
    text = limit_lines(text, mode, max_lines)
    text = fix_first_indent(text, line_prefix)
    if mode == "multi":
        text = cut_at_following_lines(text, line_prefix, suffix)
        text = limit_scope(text, line_prefix)
    text = drop_repetition(text, line_prefix, prefix, truncated)
    if not text.strip():
        return None
    sug = fit_line_suffix(text, line_prefix, line_suffix, prefix)
    text = sug.text.rstrip()
    if mode == "multi" and "\n" in text and sug.replace == 0 and line_suffix.strip().startswith("}"):
        # `{|}`: the block goes between the braces, the brace on its own line below it
        text = text + "\n" + line_prefix[: len(line_prefix) - len(line_prefix.lstrip())]
    if not text.strip():
        return None
    return Suggestion(text, sug.replace)
