"""Planning speculative work: pure functions, no model, no threads, no LSP.

The server asks these what to do; the worker does it with the model (lsp_server/completion/scheduler/worker.py):

- ``futures``: after an explicit request's suggestion is shown, the states worth generating before the
  user gets there: the suggestion accepted whole, and accepted then Enter (the next line); for a block,
  its first line accepted then Enter. (After an automatic suggestion the generation's own look-ahead line
  covers them: lsp_server/completion/policy/planner.py follow_ups.)
- ``skip_reason``: automatic work that could not be shown (or would be noise) is not started.
- ``window_start``: where the prefix window begins, chosen so the engine's KV cache survives typing.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.text.statements import opens_block

# ---------------------------------------------------------------------------------------------- futures


@dataclass(frozen=True)
class Future:
    """A state the user may reach next: the text before and after the cursor there."""

    prefix: str
    suffix: str
    kind: str  # "accepted" | "accepted-newline" | "first-line-newline"


def futures(prefix: str, suffix: str, text: str, replace: int = 0) -> list[Future]:
    """States after the suggestion ``text`` (LF line breaks, inserted at the cursor, replacing ``replace``
    characters right of it) is taken, best first, without duplicates:

    1. accepted whole: the cursor right after it;
    2. accepted, then Enter: the cursor on a new line, indented as an editor indents it (the accepted
       line's indentation, one level deeper after a line that opens a block);
    3. a block's first line accepted, then Enter (Tab on the first line in editors that accept by line).

    The caller drops the ones a suggestion it already has covers (type-through of the same generation
    answers "first line accepted" whenever the model wrote past that line)."""
    if not text:
        return []
    rest = suffix[replace:]
    after = prefix + text
    out = [Future(after, rest, "accepted")]
    line_end = rest.find("\n")
    if not rest[: line_end if line_end >= 0 else len(rest)].strip():  # nothing else on the line
        out.append(Future(after + "\n" + next_indent(after), rest, "accepted-newline"))
    first, nl, _ = text.partition("\n")
    if nl and first.strip():
        # only the first line taken: the rest of the block is no longer right of the cursor
        head = prefix + first
        out.append(Future(head + "\n" + next_indent(head), rest, "first-line-newline"))
    seen: set[tuple[str, str]] = set()
    uniq = []
    for f in out:
        if (f.prefix, f.suffix) not in seen:
            seen.add((f.prefix, f.suffix))
            uniq.append(f)
    return uniq


def next_indent(prefix: str) -> str:
    """The indentation an editor gives the line after the last line of ``prefix`` when Enter is pressed:
    the same as that line's, plus one level when it opens a block (``:``, ``{``, ``(``...). The level is
    a tab if the line is indented with tabs, else four spaces."""
    line = prefix[prefix.rfind("\n") + 1:]
    indent = line[: len(line) - len(line.lstrip(" \t"))]
    if opens_block(line):
        indent += "\t" if indent.startswith("\t") else "    "
    return indent


# ------------------------------------------------------------------------------------------- idle warm


# a gap between keystrokes this many times the usual interval is a pause, not typing
PAUSE_FACTOR = 2.0


# ----------------------------------------------------------------------------------------------- skip

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


# ---------------------------------------------------------------------------------------------- window

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
