"""Turn raw model text at a cursor into the suggestion an editor shows. Pure functions, no model.

``postprocess(raw, prefix, suffix, mode=...)`` runs the steps below in order; each is a small function
with golden tests (tests/test_postprocess.py):

1. ``normalize``                 LF line breaks, no trailing blanks, no runaway lines.
2. ``drop_incomplete_last_line`` a generation cut by a limit ends mid-line: drop that partial line.
3. ``limit_lines``               single-line mode keeps the first line; multi-line keeps ``max_lines``.
   ``_finish_statement``         a one-line text whose statement goes on below takes the lines that end it.
4. ``cut_at_following_lines``    stop where the text starts re-writing the code below the cursor (the
                                 next line, a near copy of it, or two consecutive lines a little below).
5. ``limit_scope``               stop when indentation leaves the block the cursor is in;
   ``drop_dangling_header``      a cut block does not end on a header without its body.
6. ``drop_repetition``           the previous line again, a looping block, a looping character run.
7. ``fit_line_suffix``           text right of the cursor: cut what duplicates it, replace auto-closed
                                 brackets/quotes when the text supplies them, never leave a stray closer.
8. ``cut_to_complete``           a line a limit cut is cut back to a complete statement (Python: parsed
                                 with ``ast``; others: brackets and the last token), or nothing; not a
                                 one-line text that may stay open (``open_line``: a streaming head, the
                                 part before the first doubt);
   ``cut_block_to_complete``     a block whose last line leaves its statement open loses lines until not.
   ``misses_block_opener``       Python: a text where a block header is due (the next line is indented
                                 deeper) that does not end on one is nothing;
   ``else_goes_on_below``        nor is an ``else:`` whose chain goes on below with its own ``else``/``elif``.
9. never return empty or whitespace-only text (``None`` instead).

A cursor on a line of whitespace only is prompted from that line's start (engine/text/window.py's
``from_line_start``), so the model's own indentation is the suggestion's.

At the end of a finished line a one-line request whose text starts with a line break shows that next line.

Steps 4 and 6 (the code around the cursor) live in engine/text/overlap.py; the budgets (``budget_for``,
``cut_to_budget``, ``stop_reached``) and ``decide_mode`` in engine/text/budget.py; the line helpers, the
bracket scanner and the complete-statement checks in engine/text/statements.py.

Everything works on LF text; the caller converts line breaks back to the document's own.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.syntax import adapt
from engine.text.budget import (
    Mode,
    budget_for,
    cut_to_budget,
)
from engine.text.overlap import cut_at_following_lines, drop_repetition
from engine.text.statements import (
    _CLOSING_LINE,
    AUTO_CLOSED,
    CLOSERS,
    ScanState,
    cut_block_to_complete,
    cut_to_complete,
    drop_dangling_header,
    else_goes_on_below,
    ends_mid_statement,
    ends_open,
    indent_width,
    misses_block_opener,
    opens_block,
    prefix_state,
    scan,
    split_cursor,
)

MAX_LINE_CHARS = 400  # a longer generated line is noise (minified data, a looping model)


@dataclass(frozen=True)
class Suggestion:
    text: str  # inserted at the cursor (LF line breaks)
    replace: int = 0  # code points right of the cursor, on its line, that ``text`` replaces


# ---------------------------------------------------------------------------------------------------------
# the steps


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


def limit_scope(text: str, line_prefix: str, prefix: str = "", language: str | None = None) -> str:
    """Stop when indentation leaves the cursor's block.

    - cursor after indentation only (empty line): lines indented less than the cursor leave the block.
    - the cursor's line opens a block: the body is indented deeper; a line back at the opener's
      indentation ends it (kept when it only closes, like ``}``).
    - otherwise lines indented less than the cursor's line leave its block.
    - a brace language with a grammar (``language``): also where the parse says a ``}`` closes a block opened
      before the cursor (indentation the model got wrong cannot hide it); kept when the cursor's line
      opened that block.
    """
    text = _scope_by_syntax(text, line_prefix, prefix, language)
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


def _scope_by_syntax(text: str, line_prefix: str, prefix: str, language: str | None) -> str:
    if "\n" not in text or "}" not in text:
        return text
    at = adapt.scope_end_at(text, prefix, language)
    if at is None:
        return text
    nl = text.rfind("\n", 0, at)
    if nl < 0:
        return text  # on the cursor's own line: fit_line_suffix's business
    if line_prefix.rstrip().endswith("{"):
        end = text.find("\n", at)
        return text if end < 0 else text[:end]  # the `}` of the block the cursor's line opened
    return (text[:at] if text[nl + 1: at].strip() else text[:nl]).rstrip()


def _stray(text: str, prefix: str, state: ScanState, language: str | None) -> int | None:
    """Index of ``text``'s first closer that closes nothing: the parse when there is a grammar, else the scanner."""
    bad = adapt.stray_closer(text, prefix, language)
    return scan(text, state)[1] if bad is False else bad


def fit_line_suffix(text: str, line_prefix: str, line_suffix: str, prefix: str,
                    language: str | None = None) -> Suggestion:
    """Make the text fit what is right of the cursor on its line, and keep brackets balanced.

    - The text ends with the rest of the line (or its first 3+ characters): the copy is cut.
    - The rest of the line is auto-closed brackets/quotes the text supplies itself (``print(|)`` →
      ``"hi")``), and the line only balances without them: the suggestion replaces them (``replace``).
    - Otherwise a closer that closes nothing is cut, with everything after it.
    """
    rest = line_suffix.rstrip()
    state = prefix_state(prefix)
    if not rest.strip():
        return Suggestion(_balanced_cut(text, "", state, prefix, language))
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
        if _stray(text + rest, prefix, state, language) is None:
            return Suggestion(text)
        if _stray(text, prefix, state, language) is None and _is_subsequence(core, last):
            return Suggestion(text, replace=len(rest))
    return Suggestion(_balanced_cut(text, rest, state, prefix, language))


def _balanced_cut(text: str, tail: str, state: ScanState, prefix: str = "", language: str | None = None) -> str:
    """Longest prefix of ``text`` that, followed by ``tail``, has no stray closer; cuts only at closers."""
    bad = _stray(text + tail, prefix, state, language)
    if bad is None:
        return text
    if bad < len(text):
        return text[:bad]
    # the tail's closer has nothing left to close: the text closed it already; cut at its closers
    for i in range(len(text) - 1, -1, -1):
        if text[i] in CLOSERS and _stray(text[:i] + tail, prefix, state, language) is None:
            return text[:i]
    return text


def _is_subsequence(needle: str, hay: str) -> bool:
    it = iter(hay)
    return all(c in it for c in needle)


# ---------------------------------------------------------------------------------------------------------
# the pipeline

# finish reasons of a generation stopped by a limit rather than by the model (its last line may be unfinished)
CUT_OFF_REASONS = frozenset({"length", "deadline", "cancelled", "partial"})


def _finish_statement(first: str, rest: list[str], prefix: str, language: str | None,
                      max_extra: int = 3, open_line: bool = False) -> str:
    """A one-line text whose statement goes on over the next lines the model wrote (``x = f(a,`` then
    ``b)``): take those lines until the statement is complete (at most ``max_extra``). ``open_line``: when
    those lines do not complete it, the first line alone (shown open) rather than lines cut back to nothing."""
    text = first
    for ln in rest[:max_extra]:
        if not ends_mid_statement(text, prefix, "", language):
            return text
        text = text + "\n" + ln
    if open_line and text != first and ends_mid_statement(text, prefix, "", language):
        return first
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


def lead_doubt(text: str, doubts: tuple[tuple[int, float], ...]) -> float:
    """The probability the model gave the token that starts ``text``'s visible part, when it doubted it (the lowest
    doubt before any visible character); 1.0 when it did not. ``doubt_cut`` cannot cut there (nothing would be
    left), so this is what a gate on the whole suggestion reads."""
    lowest = 1.0
    for at, p in doubts:
        if at >= len(text) or text[:at].strip():
            break
        lowest = min(lowest, p)  # a doubted token of the leading blanks, or the first visible one
    return lowest


# the finish reason of a generation still streaming: what it wrote so far is the head of its text
STREAMING = "partial"


# a generation that ended on a line break (the line limit, or a settled block): its lines are whole as written
LINE_ENDED = frozenset({"lines", "stop"})


def open_line_shown(finish_reason: str | None, *, before_doubt: bool = False, language: str | None = None) -> bool:
    """May a one-line text end mid-statement on screen (``postprocess``'s ``open_line``)? Yes for a generation
    still streaming (``partial``: the head of the statement it is writing, typed through and extended as it
    goes on; a refresh brings the rest), for the part of a line before the model's first doubt
    (``before_doubt``: the sure part, as a Python line is cut), and for a line the model ended itself
    (``LINE_ENDED``, a ``language`` read by tree-sitter: a condition, a ternary or a parameter list written
    over several lines, `a ||`, `? b`, `return (`; Python's continuation lines are inside brackets, which
    its rules leave open already). Cut back to a complete statement, such a line showed nothing at all
    (session 48: most of the empty answers on TypeScript's train split; docs/benchmarks/replay_languages.md,
    session 49)."""
    return before_doubt or finish_reason == STREAMING or \
        (finish_reason in LINE_ENDED and adapt.tree_language(language) is not None)


def postprocess(raw: str, prefix: str, suffix: str, *, mode: Mode = "single", max_lines: int = 8,
                truncated: bool = False, language: str | None = None, complete_statements: bool = True,
                offer_next_line: bool = True, one_statement_in_code: bool = True,
                open_line: bool = False) -> Suggestion | None:
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
    the line that opens that block (``header``: its body is there). ``open_line`` (``open_line_shown``): a
    text of one line is not cut back to a complete statement (a block still is).
    """
    line_prefix, line_suffix = split_cursor(prefix, suffix)
    text = normalize(raw)
    if offer_next_line and mode == "single" and _ends_finished_line(text, prefix, line_prefix, line_suffix, language):
        mode, max_lines = "multi", 1  # the model ended the line: its next line is the suggestion
    text = drop_incomplete_last_line(text, truncated and mode == "multi")
    raw_lines = text.split("\n")
    text = limit_lines(text, mode, max_lines)
    # the last shown line is one the model had not finished: a limit stopped it, or it continues below
    cut_mid_line = truncated and "\n" not in text
    if complete_statements and mode == "single" and len(raw_lines) > 1 and text.strip() and \
            not line_suffix.strip():
        text = _finish_statement(text, raw_lines[1:], prefix, language, open_line=open_line)
    text = cut_at_following_lines(text, line_prefix, suffix)
    if mode == "multi":
        text = _fit_block(text, prefix, suffix, line_prefix, language, max_lines, truncated, one_statement_in_code)
    text = drop_repetition(text, line_prefix, prefix, truncated)
    if not text.strip():
        return None
    sug = fit_line_suffix(text, line_prefix, line_suffix, prefix, language)
    text, replace = sug.text.rstrip(), sug.replace
    if complete_statements and not (open_line and "\n" not in text):
        text, replace = _to_complete(text, replace, prefix, line_suffix, language,
                                     line_cut=cut_mid_line or (mode == "single" and len(raw_lines) > 1) or
                                     (replace == 0 and ends_open(text, prefix, language)),
                                     block=mode == "multi")
    if replace == 0 and (misses_block_opener(text, prefix, suffix, language) or
                         else_goes_on_below(text, prefix, suffix, language)):
        return None
    if mode == "multi" and "\n" in text and replace == 0 and line_suffix.strip().startswith("}"):
        # `{|}`: the block goes between the braces, the brace on its own line below it
        text = text + "\n" + line_prefix[: len(line_prefix) - len(line_prefix.lstrip())]
    if not text.strip():
        return None
    return Suggestion(text, replace)


def _ends_finished_line(text: str, prefix: str, line_prefix: str, line_suffix: str, language: str | None) -> bool:
    """The text starts with a line break at the end of a finished line with nothing right of the cursor (not
    a line that opens a block or leaves its statement open): the model ended the line."""
    return text.startswith("\n") and not line_suffix.strip() and bool(line_prefix.strip()) \
        and not opens_block(line_prefix) and not ends_mid_statement("", prefix, "", language)


def _fit_block(text: str, prefix: str, suffix: str, line_prefix: str, language: str | None, max_lines: int,
               truncated: bool, one_statement_in_code: bool) -> str:
    """A block's steps: it stays in the cursor's block (``limit_scope``), shows one statement or header where
    the budget says so (``one_statement_in_code``), and a cut block does not end on a bare header."""
    text = limit_scope(text, line_prefix, prefix, language)
    if one_statement_in_code:
        budget = budget_for(prefix, suffix, language, max_lines=max_lines)
        if budget.kind in ("statement", "header"):
            text = cut_to_budget(text, line_prefix, budget)
    if truncated:
        by_syntax = adapt.drop_dangling_header(text, prefix, language)
        text = drop_dangling_header(text, line_prefix) if by_syntax is None else by_syntax
    return text


def _to_complete(text: str, replace: int, prefix: str, line_suffix: str, language: str | None, *,
                 line_cut: bool, block: bool) -> tuple[str, int]:
    """(text, replace) cut back to complete statements where the text ends mid-statement: a line a limit cut
    (or one whose statement went on below, ``line_cut``) to a complete statement on it, a block to its last
    complete statement with no dangling header. Unchanged when the text ends a statement."""
    if line_cut and ends_mid_statement(text, prefix, line_suffix[replace:], language):
        return cut_to_complete(text, prefix, line_suffix, language).rstrip(), 0
    if block and "\n" in text and ends_mid_statement(text, prefix, line_suffix[replace:], language):
        # a block whose last whole line leaves its statement open (a call over several lines a limit cut,
        # a line limit inside a statement): back to the last complete statement, with no dangling header
        cut = cut_block_to_complete(text, prefix, line_suffix, language)
        if cut != text and cut.strip() and opens_block(cut.split("\n")[-1]):
            cut = cut[: cut.rfind("\n")].rstrip() if "\n" in cut else ""  # a header whose body was cut off
        return cut, 0
    return text, replace
