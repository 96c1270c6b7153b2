"""When not to suggest (issue 36): places where an automatic suggestion is mostly noise, read from the tree-sitter
parse of the client's language (engine/syntax) and the cursor's line.

- ``comment``: the cursor is inside a comment (prose the model rarely guesses);
- ``string``: inside a string or character literal (its rest);
- ``word``: right after a word character with nothing right of the cursor (a name being typed);
- ``after_block``: the line holds only closers (``}``, ``});``) and the cursor is at its end.

``conditions`` says which hold at a cursor (the replay benchmark measures each one's cost in characters saved
against the wrong ghosts it removes: scripts/replay_quality.py); ``gate_reason`` is what the planner asks, with the
gates ``ENABLED`` for the language: a gate is enabled only where it was measured not to cost characters saved
(docs/benchmarks/replay_languages.md). Explicit requests are never gated. A language without a grammar keeps
today's behaviour: only the line-based gates can hold there.
"""

from __future__ import annotations

import re

from engine.syntax.queries import literal_at
from engine.text.statements import split_cursor

GATES = ("comment", "string", "word", "after_block")
_CLOSERS_ONLY = re.compile(r"^\s*[)\]}]+[;,)]*\s*$")
# language id -> the gates measured not to cost characters saved there (none yet: see the module docstring)
ENABLED: dict[str, frozenset[str]] = {}


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


def gate_reason(prefix: str, suffix: str, language: str | None, *, invoked: bool,
                enabled: frozenset[str] | None = None) -> str | None:
    """Why an automatic suggestion at this cursor is not shown (None: go ahead). ``enabled``: the gates to apply
    (default: ``ENABLED`` for the language)."""
    if invoked or not language:
        return None
    gates = ENABLED.get(language.lower(), frozenset()) if enabled is None else enabled
    if not gates:
        return None
    held = conditions(prefix, suffix, language) & gates
    return f"gate: {min(held)}" if held else None
