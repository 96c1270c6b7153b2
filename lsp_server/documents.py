"""Open documents, kept in sync incrementally, and the file a URI names. No LSP types: ranges arrive as plain
numbers.

Every document carries the client's ``version`` and a server-side ``revision`` that increases on every
change, whatever the client's version numbers do. Work started on one revision is stale once the
revision moves on; that is how the worker drops results nobody can use. An edit also says where it left
the cursor (``DocumentStore.edit``), and a document whose edit could not be applied is *lost*: forgotten,
and refused until the editor opens it again (``lose``).
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

from engine.edits.history import EditHistory
from lsp_server import convert

log = logging.getLogger(__name__)

# A document larger than this is not completed (its text is still tracked so later edits stay in sync).
MAX_DOCUMENT_CHARS = 8 * 1024 * 1024
# ... and one larger than this keeps no edit history (next edits: jedi reads at most 400,000 characters)
MAX_HISTORY_CHARS = 400_000
# Applied changes the edit history is handed at once (a keystroke costs it nothing; reading it hands it the rest)
HISTORY_BATCH = 16
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # JSON decoding pairs the valid ones: what is left is lone


def clean_text(text: str) -> str:
    """``text`` with lone UTF-16 surrogates (an editor can hold them; no tokenizer or UTF-8 can) replaced by
    U+FFFD. One code point for one, and each is one UTF-16 unit, so every position stays where it was."""
    return _LONE_SURROGATE.sub("\ufffd", text) if not text.isascii() else text


class DocumentError(Exception):
    """A request about a document the server cannot serve (unknown, too large, binary)."""


@dataclass
class Document:
    uri: str
    text: str
    version: int
    language_id: str = ""
    revision: int = 0
    _starts: list[int] | None = field(default=None, repr=False)

    @property
    def starts(self) -> list[int]:
        if self._starts is None:
            self._starts = convert.line_starts(self.text)
        return self._starts

    def offset_at(self, line: int, character: int, encoding: str, *, clamp_line: bool = False) -> int:
        return convert.position_to_offset(self.text, line, character, encoding, starts=self.starts,
                                          clamp_line=clamp_line)

    def position_at(self, offset: int, encoding: str) -> tuple[int, int]:
        return convert.offset_to_position(self.text, offset, encoding, starts=self.starts)

    def problem(self) -> str | None:
        """Why this document cannot be completed, or None."""
        if len(self.text) > MAX_DOCUMENT_CHARS:
            return (f"document too large for completion ({len(self.text) / 1e6:.1f}M characters, "
                    f"limit {MAX_DOCUMENT_CHARS / 1e6:.1f}M)")
        if "\x00" in self.text:
            return "document looks binary (it contains NUL characters)"
        return None


@dataclass(frozen=True)
class Edited:
    """An edit applied: the document, and where it left the cursor (a code point offset; None: not known,
    several changes at once). ``same``: the whole text sent again unchanged, so the cursor has not moved."""

    doc: Document
    cursor: int | None
    same: bool = False


@dataclass(frozen=True)
class Change:
    """One content change: ``range`` is (start_line, start_char, end_line, end_char) or None for the
    whole document."""

    text: str
    range: tuple[int, int, int, int] | None = None


class DocumentStore:
    """All open documents. Mutated only on the event loop; read by the worker through ``revision``."""

    def __init__(self) -> None:
        self._docs: dict[str, Document] = {}
        # the recent edits of each open document (next edits, issue 37); on the event loop, like the texts
        self._history = EditHistory()
        # changes applied since the history last heard (uri, version, text after, change, when), in order; a
        # text too large for the history is not kept (None: the document drops out of it)
        self._unheard: list[tuple[str, int, str | None, tuple[int, int, str] | None, float]] = []
        self._lock = threading.Lock()  # guards the dict against reads from other threads
        self._revision = 0
        self.lost: dict[str, str] = {}  # uri -> why Flint's copy of it can no longer be trusted

    def _next_revision(self) -> int:
        self._revision += 1
        return self._revision

    def open(self, uri: str, text: str, version: int, language_id: str = "") -> Document:
        self.lost.pop(uri, None)  # opened again: in sync from here
        doc = Document(uri, clean_text(text), version, language_id, self._next_revision())
        with self._lock:
            if uri in self._docs:
                log.warning("didOpen for %s which is already open: replacing its text", uri)
            self._docs[uri] = doc
        if len(doc.text) <= MAX_HISTORY_CHARS:
            self.history.open(uri, doc.text, version)
        else:
            self.history.close(uri)
        return doc

    def close(self, uri: str) -> None:
        self.history.close(uri)
        with self._lock:
            if self._docs.pop(uri, None) is None:
                log.warning("didClose for %s which is not open", uri)

    def get(self, uri: str) -> Document:
        doc = self._docs.get(uri)
        if doc is None:
            raise DocumentError(f"unknown document {uri} (not opened with didOpen)")
        return doc

    def find(self, uri: str) -> Document | None:
        return self._docs.get(uri)

    def documents(self) -> list[Document]:
        """The open documents (a snapshot of the list; the documents themselves are live)."""
        with self._lock:
            return list(self._docs.values())

    def revision(self, uri: str) -> int | None:
        """Current revision of ``uri`` (None if closed). Safe to call from any thread."""
        doc = self._docs.get(uri)
        return doc.revision if doc is not None else None

    def change(self, uri: str, version: int, changes: list[Change], encoding: str) -> Document:
        """Apply ``changes`` in order. Out-of-order versions are applied anyway (the transport is
        ordered, the numbers are only labels) and logged; positions past the end are clamped."""
        doc = self.get(uri)
        if version <= doc.version:
            log.warning("didChange for %s with version %d after version %d: applying it in arrival order",
                        uri, version, doc.version)
        text = doc.text
        starts: list[int] | None = doc._starts
        for ch in changes:
            if ch.range is None:
                text = clean_text(ch.text)
                starts = None
                self._remember(uri, version, text)
                continue
            sl, sc, el, ec = ch.range
            if starts is None:
                starts = convert.line_starts(text)
            if (el, ec) < (sl, sc):
                log.warning("didChange for %s with an inverted range %s: swapping its ends", uri, ch.range)
                sl, sc, el, ec = el, ec, sl, sc
            if sl < 0 or el < 0 or sc < 0 or ec < 0:
                raise DocumentError(f"didChange for {uri} with a negative position {ch.range}")
            if el >= len(starts) or sl >= len(starts):
                log.warning("didChange for %s with range %s past the end (%d lines): clamped",
                            uri, ch.range, len(starts))
            a = convert.position_to_offset(text, sl, sc, encoding, starts=starts, clamp_line=True)
            b = convert.position_to_offset(text, el, ec, encoding, starts=starts, clamp_line=True)
            new = clean_text(ch.text)
            text = text[:a] + new + text[b:]
            starts = _patch_starts(starts, text, a, b, new)
            self._remember(uri, version, text, (a, b, new))
        doc.text = text
        doc._starts = starts
        doc.version = version
        doc.revision = self._next_revision()
        return doc

    def edit(self, uri: str, version: int, changes: list[Change], encoding: str) -> Edited:
        """Apply a didChange and say where it left the cursor: right after the new text of one range
        (typing, a paste, a deletion: the text before the range's start did not move, so its position
        still holds); after the span that differs when the whole text comes again (a client that syncs
        whole texts); the same text again leaves it where it was."""
        whole = len(changes) == 1 and changes[0].range is None
        before = self.get(uri).text if whole else None
        doc = self.change(uri, version, changes, encoding)
        if len(changes) == 1 and changes[0].range is not None:
            sl, sc = changes[0].range[:2]
            return Edited(doc, doc.offset_at(sl, sc, encoding, clamp_line=True) + len(changes[0].text))
        if before is not None:
            end = edit_end(before, doc.text)
            return Edited(doc, end, same=end is None)
        return Edited(doc, None)

    @property
    def history(self) -> EditHistory:
        """The recent edits of each open document, every change applied so far heard."""
        self._tell_history()
        return self._history

    def _remember(self, uri: str, version: int, text: str,
                  change: tuple[int, int, str] | None = None) -> None:
        """One applied change (offsets in the text before it; None: a whole new text) for the history, with
        its time; handed over HISTORY_BATCH at a time, or all of them when it is read."""
        kept = text if len(text) <= MAX_HISTORY_CHARS else None
        self._unheard.append((uri, version, kept, change, self._history.clock()))
        if len(self._unheard) >= HISTORY_BATCH:
            self._tell_history()

    def _tell_history(self) -> None:
        """Feed the changes not heard yet to the history, in order; a document grown past MAX_HISTORY_CHARS
        drops out of it, one shrunk under it comes back."""
        unheard, self._unheard = self._unheard, []
        h = self._history
        for uri, version, text, change, now in unheard:
            if text is None:
                h.close(uri)
            elif uri not in h:
                h.open(uri, text, version)  # (no edits yet: what came before it is unknown)
            elif change is None:
                h.replace(uri, text, version, now=now)
            else:
                try:
                    h.change(uri, change[0], change[1], change[2], version, now=now, after=text)
                except ValueError:  # the history's copy disagrees (cannot happen in order): start it again
                    log.warning("edit history of %s out of step: restarted", uri)
                    h.open(uri, text, version)

    def lose(self, uri: str, why: str) -> bool:
        """An edit of ``uri`` could not be applied: Flint's copy differs from the editor's. Forget it until
        the editor opens it again. True the first time."""
        self.history.close(uri)
        first = uri not in self.lost
        self.lost[uri] = why
        with self._lock:
            self._docs.pop(uri, None)
        return first

    def __len__(self) -> int:
        return len(self._docs)


def _common_prefix_len(a: str, b: str) -> int:
    """Length of the common prefix (slices compare in C: a binary search, not a Python loop per char)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def edit_end(old: str, new: str) -> int | None:
    """Where a whole-text replacement leaves the cursor: right after the span of ``new`` that differs from
    ``old`` (an undo, a paste or typing sent by a client that syncs whole texts). None: the texts are equal
    (nothing says where the cursor is; it has not moved)."""
    if old == new:
        return None
    head = _common_prefix_len(old, new)
    tail = _common_prefix_len(old[head:][::-1], new[head:][::-1])
    return len(new) - tail


def _patch_starts(starts: list[int], text: str, a: int, b: int, inserted: str) -> list[int] | None:
    """Line starts after replacing [a, b) with ``inserted``, without rescanning the whole text.

    Small edits (a keystroke) are the common case; anything touching a ``\\r`` (a CRLF could be split
    or joined at the seam) falls back to a full rescan on next use.
    """
    if "\r" in inserted or (a > 0 and text[a - 1 : a] == "\r") or "\r" in text[a + len(inserted): a + len(inserted) + 1]:
        return None
    from bisect import bisect_right

    delta = len(inserted) - (b - a)
    # lines starting inside (a, b] disappear; later ones shift by delta
    lo = bisect_right(starts, a)
    hi = bisect_right(starts, b)
    new = starts[:lo]
    pos = inserted.find("\n")
    while pos != -1:
        new.append(a + pos + 1)
        pos = inserted.find("\n", pos + 1)
    new.extend(s + delta for s in starts[hi:])
    return new


def uri_path(uri: str) -> Path | None:
    """The file a ``file:`` URI names (None for other schemes: untitled buffers, remote files)."""
    u = urlparse(uri)
    if u.scheme != "file":
        return None
    return Path(url2pathname(u.path)) if u.netloc in ("", "localhost") else Path(f"//{u.netloc}{unquote(u.path)}")
