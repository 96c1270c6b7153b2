"""The text a prompt window shows around the cursor (pure): ``clip_window`` keeps the text nearest the
cursor, cut at line bounds (the engine's windows, and the disk cache's keys, which must window exactly as
the engine does); ``sticky_cut`` and ``header_start`` place the start of a short window so that it stays
put while the user types and keeps the line that opens the definition the cursor is in; ``from_line_start``
asks for a line of whitespace only from its start; ``window_start`` is where the server's prefix window
begins, moving as rarely as possible while the user types (the engine's KV cache survives typing)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Doubts = tuple[tuple[int, float], ...]  # engine.types.Doubts (text/ imports no other part)

# The prompt window's default size around the cursor, in characters (EngineConfig, a remote server's
# RemoteConfig, the repository context's window and the server before a model is loaded all start here).
MAX_PREFIX_CHARS, MAX_SUFFIX_CHARS = 6000, 600


def clip_window(prefix: str, suffix: str, max_prefix_chars: int, max_suffix_chars: int) -> tuple[str, str]:
    """Keep the text nearest the cursor: the prefix's tail and the suffix's head, cut at line bounds."""
    if len(prefix) > max_prefix_chars:
        cut = len(prefix) - max_prefix_chars
        nl = prefix.find("\n", cut)
        prefix = prefix[nl + 1:] if 0 <= nl < len(prefix) - 1 else prefix[cut:]
    if len(suffix) > max_suffix_chars:
        nl = suffix.rfind("\n", 0, max_suffix_chars)
        suffix = suffix[: nl + 1] if nl > 0 else suffix[:max_suffix_chars]
    return prefix, suffix


WINDOW_QUANTUM = 1024


def window_start(text: str, offset: int, max_chars: int, quantum: int = WINDOW_QUANTUM,
                 previous: int | None = None) -> int:
    """Start of the prefix window for a cursor at ``offset``: at most ``max_chars`` before it, at a line
    start, and moving as rarely as possible while the user types.

    The engine keeps the KV cache of the previous prompt and reuses its longest common token prefix. A
    window that starts ``max_chars`` before the cursor would move with every keystroke once the file is
    long enough, and nothing could be reused. So: the whole text while it fits; else the ``previous``
    start while it is still valid (a line start, the window within ``max_chars``); else a new start on a
    ``quantum`` grid that leaves at least ``quantum`` characters to type before the next move (the
    window is then ``max_chars - 2*quantum`` to ``max_chars - quantum`` long). Without ``previous`` the
    result depends only on the text and the offset, so reopening a file at a spot gives the same window
    (and the same disk key)."""
    if offset <= max_chars:
        return 0
    if previous is not None and 0 <= previous <= offset and offset - previous <= max_chars and \
            (previous == 0 or text[previous - 1: previous] == "\n"):
        return previous
    quantum = max(1, min(quantum, max_chars // 3))
    room = max_chars - quantum  # the new window's longest length: a quantum of headroom to type into
    q = -(-(offset - room) // quantum) * quantum  # round up to the grid: within ``room``
    nl = text.find("\n", q, offset)
    return nl + 1 if nl >= 0 else q


_HEADER = re.compile(r"\s*(?:export\s+|pub(?:\([^)]*\))?\s+|async\s+|static\s+)*"
                     r"(?:def|class|function|fn|func|fun|impl|struct|interface|module)\b")


def header_start(prefix: str, lo: int = 0) -> int | None:
    """Start of the line that opens the definition the cursor is in (a less indented ``def``/``class``/
    ``function``/... line, or the top-level line the cursor's block hangs from), searching back to ``lo``;
    None when there is none that far."""
    end = len(prefix)
    line_start = prefix.rfind("\n", 0, end) + 1
    line = prefix[line_start:end]
    ind = len(line) - len(line.lstrip(" \t"))
    if not line.strip():  # a line just begun (its indentation not typed yet): it can go one level deeper
        prev = prefix[:line_start].rstrip()
        last = prev[prev.rfind("\n") + 1:]
        ind = max(ind, len(last) - len(last.lstrip(" \t")) + 1) if prev else ind
    pos = line_start
    while pos > lo:
        start = prefix.rfind("\n", 0, pos - 1) + 1
        text = prefix[start:pos - 1]
        if start < lo:
            return None
        if text.strip():
            i = len(text) - len(text.lstrip(" \t"))
            if i < ind:
                if _HEADER.match(text) or i == 0:
                    return start
                ind = i
        pos = start
    return None


def sticky_cut(prefix: str, max_chars: int, slack: int, head: str | None, reach: int = 0) -> int:
    """Where a short window's prefix starts: where ``head`` (the start of the last such window) is, while
    the window from there is at most ``max_chars + slack`` long (``reach + slack`` if larger) and starts a
    line; else the line start nearest ``max_chars`` before the cursor — or, within ``reach`` characters,
    the line that opens the definition the cursor is in (its name and parameters matter more than any
    other text; header_start). Typing then keeps the start (and its KV cache) for ``slack`` characters at
    least, whichever keystroke the window was first made at (a fixed grid moves it at an arbitrary point,
    right after the first request as often as not)."""
    longest = max(max_chars, reach)
    if head:
        i = prefix.find(head, max(0, len(prefix) - longest - slack))
        if i >= 0 and (i == 0 or prefix[i - 1] == "\n"):
            return i
    if len(prefix) <= max_chars:
        return 0
    cut = len(prefix) - max_chars
    nl = prefix.find("\n", cut)
    cut = nl + 1 if 0 <= nl < len(prefix) - 1 else cut
    if reach > max_chars:
        h = header_start(prefix, max(0, len(prefix) - reach))
        if h is not None and h < cut:
            return h
    return cut


def line_start(prefix: str, suffix: str = "") -> tuple[str, str]:
    """(the prompt's prefix, the indentation typed at the cursor): when the cursor's line holds only
    whitespace (``suffix``: nothing right of the cursor either), the prompt ends at that line's start and
    the model writes the line's indentation itself.
    A FIM prompt that ends in part of an indentation makes the model start its code right there, at a
    column no line of the block has, or open a docstring; from the line start it indents as the block
    does, and every keystroke in the indentation is typed through the same generation."""
    i = prefix.rfind("\n") + 1
    indent = prefix[i:]
    if indent and not indent.strip() and not suffix.split("\n", 1)[0].strip():
        return prefix[:i], indent
    return prefix, ""


def seen_from_cursor(raw: str, indent: str, doubts: Doubts = ()) -> tuple[str, Doubts]:
    """Text the model wrote from the line start (``line_start``) as seen from the cursor after ``indent``,
    with its doubts' offsets: the indentation typed is taken off; while the model is still writing
    whitespace that the cursor has passed, nothing yet; a line indented less than the cursor (a dedent
    the editor cannot show as an insertion) starts at the cursor's column."""
    if not indent:
        return raw, doubts
    if raw.startswith(indent):
        cut = len(indent)
    elif indent.startswith(raw):
        return "", ()
    else:
        first = raw.split("\n", 1)[0]
        cut = len(first) - len(first.lstrip(" \t"))
    return raw[cut:], tuple((at - cut, p) for at, p in doubts if at >= cut)


def from_line_start(run: Callable[[str, Any], tuple[list[Any], Any]], prefix: str, suffix: str,
                    on_token: Callable[..., None] | None) -> tuple[list[Any], Any]:
    """``run(prefix, on_token) -> (completions, timings)``, asked from the line start when the cursor's
    line holds only whitespace (``line_start``); the completions (and what streams) as the cursor sees
    them (``seen_from_cursor``: their ``text`` and ``doubts`` are set)."""
    base, indent = line_start(prefix, suffix)
    if not indent:
        return run(prefix, on_token)

    seen = on_token
    if seen is not None:
        def relay(i: int, text: str, *doubts: Doubts) -> None:  # (doubts only where the backend streams them)
            shown, moved = seen_from_cursor(text, indent, doubts[0] if doubts else ())
            seen(i, shown, moved) if doubts else seen(i, shown)

    outs, t = run(base, relay if seen is not None else None)
    for c in outs:
        c.text, c.doubts = seen_from_cursor(c.text, indent, c.doubts)
    return outs, t
