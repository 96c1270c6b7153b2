"""Per-document recent edits, as small diffs with positions (issue 37: next edits).

A document's history is its current text plus its last ``max_edits`` edits, oldest first. Each ``Edit`` is
one replacement, ``text[start:start + len(old_text)] -> new_text``, in the text as it was just before that
edit (later edits are applied after it). Any earlier state of the text is the current text with the later
edits undone (``text_before``), so no old copies of the document are kept.

Changes come in as plain offsets, as an editor sends them: an LSP incremental change (a range in the
current text and its new text, ``change``) or a whole new text (``replace``: the differing region, split
into line hunks by difflib when it spans several lines). A burst of keystrokes in one place becomes one
edit: a change that touches (overlaps or abuts) the last edit's span, within ``burst_s`` seconds of it,
and leaves the merged edit within ``burst_lines`` lines, is folded into it. Deleting ``foo`` letter by
letter and typing ``bar`` is one edit ``foo -> bar``; a keystroke elsewhere, or after a pause, starts a
new edit. A merged edit keeps only what differs (common head and tail trimmed); one that cancels out
(typed, then deleted) is dropped.

Bounded: ``max_edits`` per document, ``max_documents`` documents (least recently changed dropped first);
``close`` forgets a document. Pure Python, no editor types, not thread-safe (one owner thread).
"""

from __future__ import annotations

import difflib
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

MAX_EDITS = 16
MAX_DOCUMENTS = 32
BURST_S = 3.0  # keystrokes closer than this in one place are one edit
BURST_LINES = 3  # ... while the merged edit spans at most this many lines (old or new)


@dataclass(frozen=True)
class Edit:
    """``text[start:start + len(old_text)]`` replaced by ``new_text``, in the text just before this edit."""

    start: int
    old_text: str
    new_text: str
    line: int = 0  # 0-based line of ``start`` in the text before the edit
    version: int | None = None  # the document version after the edit
    t_first: float = 0.0  # when its first keystroke came
    t_last: float = 0.0  # when its last keystroke came

    @property
    def old_end(self) -> int:
        """End of the replaced span in the text before the edit."""
        return self.start + len(self.old_text)

    @property
    def new_end(self) -> int:
        """End of the new text in the text after the edit."""
        return self.start + len(self.new_text)

    @property
    def delta(self) -> int:
        return len(self.new_text) - len(self.old_text)

    def apply(self, text: str) -> str:
        """The text after the edit (``text`` is the text before it)."""
        return text[:self.start] + self.new_text + text[self.old_end:]

    def undo(self, text: str) -> str:
        """The text before the edit (``text`` is the text after it)."""
        return text[:self.start] + self.old_text + text[self.new_end:]


def trim(start: int, old: str, new: str) -> tuple[int, str, str]:
    """The same replacement without the head and tail ``old`` and ``new`` share."""
    n = 0
    m = min(len(old), len(new))
    while n < m and old[n] == new[n]:
        n += 1
    k = 0
    while k < m - n and old[len(old) - 1 - k] == new[len(new) - 1 - k]:
        k += 1
    return start + n, old[n:len(old) - k], new[n:len(new) - k]


def diff_texts(old: str, new: str) -> list[tuple[int, str, str]]:
    """The replacements turning ``old`` into ``new``, each as (start, old_text, new_text) in the text with
    the earlier ones applied: one for the differing region, or one per difflib line hunk when the region
    spans several lines on both sides (a formatter's or a paste's scattered changes stay apart)."""
    start, a, b = trim(0, old, new)
    if not a and not b:
        return []
    if a.count("\n") < 2 or b.count("\n") < 2:
        return [(start, a, b)]
    # the region from the start of its first line to the end of its last, compared line by line
    lo = old.rfind("\n", 0, start) + 1
    hi_old = old.find("\n", start + len(a))
    hi_old = len(old) if hi_old < 0 else hi_old + 1
    tail = len(old) - hi_old
    a_lines = old[lo:hi_old].splitlines(keepends=True)
    b_lines = new[lo:len(new) - tail].splitlines(keepends=True)
    out: list[tuple[int, str, str]] = []
    shift = 0  # length change of the hunks applied so far
    a_off = [0]
    for line in a_lines:
        a_off.append(a_off[-1] + len(line))
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        s, x, y = trim(lo + a_off[i1] + shift, "".join(a_lines[i1:i2]), "".join(b_lines[j1:j2]))
        if x or y:
            out.append((s, x, y))
            shift += len(y) - len(x)
    return out


class _Doc:
    __slots__ = ("burst", "edits", "text", "version")

    def __init__(self, text: str, version: int | None, max_edits: int) -> None:
        self.text = text
        self.version = version
        self.edits: deque[Edit] = deque(maxlen=max_edits)
        # the span of the current text the last edit's keystrokes wrote, before trimming: typing "key" over
        # "name" trims to "nam" -> "k" after the "e", and the "y" that follows must still join
        self.burst: tuple[int, int] | None = None


class EditHistory:
    """Recent edits of open documents (keyed by any hashable id: a URI, a path)."""

    def __init__(self, *, max_edits: int = MAX_EDITS, max_documents: int = MAX_DOCUMENTS, burst_s: float = BURST_S,
                 burst_lines: int = BURST_LINES, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_edits = max_edits
        self.max_documents = max_documents
        self.burst_s = burst_s
        self.burst_lines = burst_lines
        self.clock = clock
        self._docs: OrderedDict[str, _Doc] = OrderedDict()

    # ---- the document's life ----
    def open(self, doc: str, text: str, version: int | None = None) -> None:
        """Start (or restart) a document's history at ``text``: no edits yet."""
        self._docs[doc] = _Doc(text, version, self.max_edits)
        self._docs.move_to_end(doc)
        while len(self._docs) > self.max_documents:
            self._docs.popitem(last=False)

    def close(self, doc: str) -> None:
        self._docs.pop(doc, None)

    def __contains__(self, doc: object) -> bool:
        return doc in self._docs

    def __len__(self) -> int:
        return len(self._docs)

    # ---- changes ----
    def change(self, doc: str, start: int, end: int, new_text: str, version: int | None = None,
               now: float | None = None, after: str | None = None) -> Edit | None:
        """An incremental change: ``text[start:end]`` (offsets in the current text) becomes ``new_text``.
        Returns the document's latest edit afterwards (the change merged into it, or a new one), None when
        the document is unknown (open it first) or nothing is left of the burst. ``after``: the text with
        the change applied, when the caller has built it already (an editor's document store: one copy of
        a large text per keystroke, not two); trusted as is."""
        d = self._docs.get(doc)
        if d is None:
            return None
        if not 0 <= start <= end <= len(d.text):
            raise ValueError(f"change [{start}, {end}) outside a text of {len(d.text)} characters")
        now = self.clock() if now is None else now
        self._docs.move_to_end(doc)
        before = d.text
        d.text = before[:start] + new_text + before[end:] if after is None else after
        d.version = version
        s, old, new = trim(start, before[start:end], new_text)
        if not old and not new:
            return d.edits[-1] if d.edits else None
        last = d.edits[-1] if d.edits else None
        merged = _merge(last, s, old, new, before) if last is not None and self._joins(
            last, d.burst, start, end, now) else None
        if merged is not None and max(merged.old_text.count("\n"), merged.new_text.count("\n")) < self.burst_lines:
            d.edits.pop()
            if merged.old_text or merged.new_text:
                d.edits.append(replace(merged, version=version, t_last=now))
                b_lo, b_hi = d.burst if d.burst is not None else (merged.start, merged.new_end)
                delta = len(new_text) - (end - start)
                d.burst = (min(b_lo, start, merged.start),
                           max(b_hi + delta if b_hi >= end else b_hi, start + len(new_text), merged.new_end))
            else:
                d.burst = None
            return d.edits[-1] if d.edits else None
        line = before.count("\n", 0, s)
        d.edits.append(Edit(s, old, new, line=line, version=version, t_first=now, t_last=now))
        d.burst = (start, start + len(new_text))
        return d.edits[-1]

    def replace(self, doc: str, text: str, version: int | None = None, now: float | None = None) -> Edit | None:
        """A whole new text (full sync, or a (version, text) sequence): its differences from the current
        text, as changes. Opens the document when it is unknown (no edits then)."""
        d = self._docs.get(doc)
        if d is None:
            self.open(doc, text, version)
            return None
        out = self.edits(doc)[-1] if d.edits else None
        for s, old, new in diff_texts(d.text, text):
            out = self.change(doc, s, s + len(old), new, version=version, now=now)
        d.version = version
        d.text = text  # (equal already; keeps the caller's string)
        return out

    def _joins(self, last: Edit, burst: tuple[int, int] | None, start: int, end: int, now: float) -> bool:
        """Does a change of ``[start, end)`` of the current text continue the burst of ``last`` (its new text
        at ``last.start .. last.new_end`` there, its keystrokes over ``burst``)?"""
        if now - last.t_last > self.burst_s:
            return False
        lo, hi = (min(burst[0], last.start), max(burst[1], last.new_end)) if burst is not None else \
            (last.start, last.new_end)
        return start <= hi and end >= lo

    # ---- questions ----
    def text(self, doc: str) -> str | None:
        d = self._docs.get(doc)
        return None if d is None else d.text

    def version(self, doc: str) -> int | None:
        d = self._docs.get(doc)
        return None if d is None else d.version

    def edits(self, doc: str) -> list[Edit]:
        """The document's recent edits, oldest first."""
        d = self._docs.get(doc)
        return [] if d is None else list(d.edits)

    def last(self, doc: str) -> Edit | None:
        d = self._docs.get(doc)
        return d.edits[-1] if d is not None and d.edits else None

    def settled(self, doc: str, quiet_s: float, now: float | None = None) -> bool:
        """Has the document's last edit had no keystroke for ``quiet_s`` seconds? (Ask for next edits
        then: mid-burst, a half-typed name would be offered as the rename.)"""
        last = self.last(doc)
        now = self.clock() if now is None else now
        return last is not None and now - last.t_last >= quiet_s

    def text_before(self, doc: str, index: int = -1) -> str | None:
        """The text just before edit ``index`` of ``edits(doc)`` (the current text with it and every later
        edit undone)."""
        d = self._docs.get(doc)
        if d is None:
            return None
        edits = list(d.edits)
        if not edits:
            return d.text
        index = index % len(edits)
        text = d.text
        for e in reversed(edits[index:]):
            text = e.undo(text)
        return text


def _merge(last: Edit, start: int, old: str, new: str, before: str) -> Edit:
    """``last`` followed by the change ``before[start:start + len(old)] -> new`` that touches its span, as
    one edit of the text before ``last`` (``before`` is the text after ``last``)."""
    end = start + len(old)
    lo, hi = min(start, last.start), max(end, last.new_end)
    merged_new = before[lo:start] + new + before[end:hi]
    # the same span in the text before ``last``: its own old text in place of its new text
    merged_old = before[lo:last.start] + last.old_text + before[last.new_end:hi]
    s, o, n = trim(lo, merged_old, merged_new)
    line = last.line - before.count("\n", lo, last.start) + merged_old[:s - lo].count("\n")
    return Edit(s, o, n, line=line, version=last.version, t_first=last.t_first, t_last=last.t_last)


def edits_from_versions(texts: Iterable[tuple[int | None, str]], *, times: Iterable[float] | None = None,
                        **kw: object) -> tuple[str, list[Edit]]:
    """The last text of a sequence of (version, text) states of one document and its coalesced edits.
    ``times``: when each state after the first came (default: all at once, so touching changes coalesce);
    ``kw``: EditHistory's bounds."""
    h = EditHistory(**kw)  # type: ignore[arg-type]
    it = iter(texts)
    try:
        v0, t0 = next(it)
    except StopIteration:
        return "", []
    h.open("doc", t0, v0)
    ts = iter(times) if times is not None else None
    for v, t in it:
        now = next(ts) if ts is not None else 0.0
        h.replace("doc", t, version=v, now=now)
    return h.text("doc") or "", h.edits("doc")
