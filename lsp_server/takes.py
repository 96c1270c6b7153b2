"""Whether the user has just taken a suggestion at the cursor (issue 49).

An automatic suggestion ends before its first doubt (items.doubt_for's cut). Where the user took such a part, the
line's rest is what the typist reads next: cut again, each piece would cost its own reaction time, though the model
wrote the line whole. After a take the next automatic suggestion at that spot is shown to the end of its line
(session.py asks build_items for no cut there); any other edit, a move or a close forgets the take.
"""

from __future__ import annotations


def took(ghost: str, typed: str) -> bool:
    """Whether an edit that inserted ``typed`` (LF) at a ghost's spot took it: more than one character of its start
    at once (Tab, a word or its first line; typing through inserts one)."""
    return len(typed) > 1 and ghost.startswith(typed)


class Takes:
    """Per document, the ghost last shown (its spot, a code point offset, and LF text) and where a take of it left
    the cursor. Used from the event loop only."""

    def __init__(self) -> None:
        self._shown: dict[str, tuple[int, str]] = {}
        self._taken_at: dict[str, int] = {}

    def shown(self, uri: str, offset: int, text: str) -> None:
        if text:
            self._shown[uri] = (offset, text)
        else:
            self._shown.pop(uri, None)

    def edited(self, uri: str, text: str, cursor: int) -> None:
        """An edit left the cursor at ``cursor`` in ``text`` (the document after it)."""
        self._taken_at.pop(uri, None)
        ghost = self._shown.pop(uri, None)
        if ghost is None or cursor <= ghost[0]:
            return
        offset, shown = ghost
        if took(shown, text[offset:cursor].replace("\r\n", "\n")):
            self._taken_at[uri] = cursor

    def after_take(self, uri: str, offset: int) -> bool:
        """The last edit took a ghost and left the cursor at ``offset``."""
        return self._taken_at.get(uri) == offset

    def forget(self, uri: str) -> None:
        self._shown.pop(uri, None)
        self._taken_at.pop(uri, None)
