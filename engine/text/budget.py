"""Budgets: how much to generate at a cursor, and when a streaming generation has written enough.

``decide_mode(line_prefix, line_suffix, policy)`` says whether a position wants one line or a block, and
``skip_reason`` why an automatic suggestion there is not worth a model call (text right of the cursor).
``budget_for(prefix, suffix, language)`` sizes a generation by the context (one line, one statement, the
rest of a body, the statement after a finished line); ``cut_to_budget`` / ``stop_reached`` say what of a
streaming text that budget shows and when generating more is wasted; ``settled`` whether a variant's
suggestion is final. Pure functions, no model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.syntax import adapt
from engine.text.statements import (
    _CLOSING_LINE,
    _PY_CONTINUES,
    AUTO_CLOSED,
    _inside_open_bracket,
    _lang,
    _previous_line,
    ends_mid_statement,
    following_lines,
    indent_width,
    opens_block,
    split_cursor,
)

Mode = Literal["single", "multi"]


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


MAX_RIGHT_CHARS = 8  # more code than this right of the cursor: an inline suggestion cannot fit there


def skip_reason(line_prefix: str, line_suffix: str, *, invoked: bool) -> str | None:
    """Why an automatic suggestion here is not worth a model call (None: go ahead). Explicit requests
    are always served."""
    if invoked:
        return None
    if line_suffix[:1].isalnum() or line_suffix[:1] == "_":
        return "inside a word"
    code = line_suffix
    for marker in (" #", "\t#", " //", "\t//"):  # a trailing comment does not block a suggestion
        j = code.find(marker)
        if j >= 0:
            code = code[:j]
    code = code.strip()
    closers = sum(c in ")]}\"'`;," for c in code)
    if len(code) - closers > MAX_RIGHT_CHARS:
        return "text right of the cursor"
    return None


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


def _ends_body(suffix: str, column: int, around: adapt.Around | None = None) -> bool:
    """The next non-blank line after the cursor's line is indented less than ``column`` (or there is
    none): the cursor is at the end of its block. ``around`` (a language with a grammar, in a braced block):
    no statement of that block follows the cursor, whatever the indentation says."""
    if around is not None:
        return around.ends_body
    following = following_lines(suffix, 1)
    return not following or indent_width(following[0]) < column


def _opens_block_below(prefix: str, suffix: str, column: int, around: adapt.Around | None = None) -> bool:
    """The cursor's empty line is followed by a line indented deeper than ``column`` (not a comment, not a
    continuation inside brackets): the line written there opens that block, whose body exists. At column 0
    only when the code above is at column 0 too: an editor that strips blank lines puts the cursor of an
    empty line inside a body at column 0. ``around`` (a language with a grammar, in a braced block): the
    ``}`` closing the cursor's block is deeper than its header, so it closes the block below."""
    if around is not None and around.opens_below is not None:
        return around.opens_below
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
        around = adapt.block_around(prefix, suffix, language)
        if _opens_block_below(prefix, suffix, col, around):
            return Budget("header", "single", SINGLE_LINE_TOKENS, 1)
        if _ends_body(suffix, col, around):
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
