"""When not to suggest (issue 36): places where an automatic suggestion is mostly noise, read from the tree-sitter
parse of the client's language (engine/syntax) and the cursor's line.

- ``comment``: the cursor is inside a comment (prose the model rarely guesses);
- ``string``: inside a string or character literal (its rest);
- ``word``: right after a word character with nothing right of the cursor (a name being typed);
- ``after_block``: the line holds only closers (``}``, ``});``) and the cursor is at its end.

``conditions`` says which hold at a cursor: the replay benchmark measures each one's cost in characters saved
against the wrong ghosts it removes (scripts/replay_quality.py, docs/benchmarks/replay_languages.md). None was
measured to pay for itself, so the server applies none: the planner asks nothing here on a keystroke. A gate
that earns its place would be one more ``skip`` reason in the planner's ``state_at``.
"""

from __future__ import annotations

import re

from engine.syntax.queries import literal_at
from engine.text.statements import split_cursor

GATES = ("comment", "string", "word", "after_block")
_CLOSERS_ONLY = re.compile(r"^\s*[)\]}]+[;,)]*\s*$")


def conditions(prefix: str, suffix: str, language: str | None) -> frozenset[str]:
    """The gates that hold at the cursor (``prefix``/``suffix``: the text before/after it)."""
    line_prefix, line_suffix = split_cursor(prefix, suffix)
    out: set[str] = set()
    if not line_suffix.strip():
        if line_prefix[-1:].isalnum() or line_prefix[-1:] == "_":
            out.add("word")
        if _CLOSERS_ONLY.match(line_prefix):
            out.add("after_block")
    if language:
        kind = literal_at(language, prefix, line_suffix)
        if kind in ("comment", "string"):
            out.add(str(kind))
    return frozenset(out)
