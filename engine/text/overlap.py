"""What of a suggestion the code around the cursor already says (pure, steps of engine/text/postprocess.py):
``cut_at_following_lines`` stops where the text starts re-writing the code below the cursor, and
``drop_repetition`` drops text that repeats the line above or itself."""

from __future__ import annotations

import re

from engine.text.statements import _previous_line, following_lines

_WORDS = re.compile(r"\w+")
LONG_COPY_CHARS = 24  # a line this long found word for word just below is a copy of it


def _is_trivial(line: str) -> bool:
    """Lines too common to mean repetition: closers, blank, very short."""
    s = line.strip()
    return len(s) < 4 or not any(c.isalnum() for c in s)


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
