"""The text a prompt window shows around the cursor (pure): ``clip_window`` keeps the text nearest the
cursor, cut at line bounds (the engine's windows, and the disk cache's keys, which must window exactly as
the engine does); ``sticky_cut`` and ``header_start`` place the start of a short window so that it stays
put while the user types and keeps the line that opens the definition the cursor is in."""

from __future__ import annotations

import re


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
