"""Planning speculative work: pure functions, no model, no threads, no LSP.

The server asks these what to do; the worker does it with the model (lsp_server/completion/scheduler/worker.py):

- ``skip_reason``: automatic work that could not be shown (or would be noise) is not started.
- ``window_start``: where the prefix window begins, chosen so the engine's KV cache survives typing.
"""

from __future__ import annotations

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
