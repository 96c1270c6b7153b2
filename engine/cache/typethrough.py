"""Type-through: answer a keystroke from a suggestion the model already wrote (or is writing).

A generation is made for a *base* state (the text before and after the cursor). While the user types
characters that continue any of its variants, the rest of that variant is the answer for the new state:
no model call. This module keeps the recent generations, finished or still streaming, and finds them:

- ``Trie``: a character trie over one generation's variants; walking the typed text lands on the node
  whose variants all continue it. Streaming appends to a variant's branch as tokens arrive.
- ``typed_since``: the text typed at the cursor since a base prefix. Prefixes are windows that may slide
  over long files, so the base is located by its tail (``ANCHOR_CHARS``), not by its start.
- ``suffix_compatible``: the text after the cursor is the same, give or take auto-closed characters an
  editor inserts right of the cursor (typing ``(`` gives ``()``).
- ``TypeThrough``: the store. ``lookup`` returns the hits for a state (best first); ``consistent`` says
  whether a running generation can still serve the state the user is in (the worker keeps reading it
  instead of restarting); ``reachable`` says whether a pre-generated future state is still ahead.

Thread-safe (one lock): the engine thread streams into it, the event loop looks up. Pure text, no LSP,
no model; texts are raw model text at the cursor (LF line breaks).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from engine.types import COMPLETE_REASONS, Completion, Doubts

ANCHOR_CHARS = 2048  # tail of the base prefix that locates it inside a later prefix
# How far typing may run ahead of a streaming generation (which has not written that far yet) and still
# count as agreeing with it. Further ahead (two lines or so), its text is for a spot the user has left
# behind. Not less: a generation is stopped only between prompt chunks, and one still in its prompt pass
# is usually most of the way to its first token; replacing it costs a new pass over the text after the
# cursor, and its prediction is checked against what was typed as soon as it streams.
RUN_AHEAD_CHARS = 160
CAPACITY = 64
_CLOSERS = ")]}\"'`"


# ---------------------------------------------------------------------------------------------- text


def typed_since(anchor: str, at_start: bool, prefix: str, max_typed: int) -> str | None:
    """``prefix`` = (the base prefix) + typed: return typed, or None when ``prefix`` does not continue it.

    ``anchor`` is the base prefix's tail (``ANCHOR_CHARS``); ``at_start``: the base prefix is the whole
    text from the start of the document (then ``prefix`` must start with it). Otherwise the window may
    have slid: the anchor is searched for in the last ``max_typed + len(anchor)`` characters."""
    if at_start:
        if not prefix.startswith(anchor) or len(prefix) - len(anchor) > max_typed:
            return None
        return prefix[len(anchor):]
    lo = max(0, len(prefix) - max_typed - len(anchor))
    j = prefix.rfind(anchor, lo)
    if j < 0:
        return None
    return prefix[j + len(anchor):]


def past_blank_lines(head: str | None, typed: str, text: str) -> str | None:
    """The rest of ``text`` after ``typed`` where they differ only by whitespace-only lines (one the user put in
    that the model did not write, or the reverse); None without such a skip or with nothing left. ``head``: the
    base's line before the cursor if only whitespace (None: after code, which both texts continue)."""
    if "\n" not in typed and not (head is not None and "\n" in text):
        return None
    lines_t, lines_f = ((head or "") + typed).split("\n"), ((head or "") + text).split("\n")
    skipped, j = False, 0
    for i, line in enumerate(lines_t[:-1]):  # the typed text's whole lines
        if (i or head is not None) and not line.strip():
            skipped = True
            continue
        while (i or head is not None) and j < len(lines_f) - 1 and not lines_f[j].strip() and lines_f[j] != line:
            j, skipped = j + 1, True
        if j >= len(lines_f) - 1 or lines_f[j] != line:
            return None
        j += 1
    cur, whole = lines_t[-1], len(lines_t) > 1 or head is not None  # (whole: the cursor's line from its start)
    while whole and j < len(lines_f) - 1 and not lines_f[j].strip() and not lines_f[j].startswith(cur):
        j, skipped = j + 1, True
    if not skipped or j >= len(lines_f) or not lines_f[j].startswith(cur):
        return None
    return "\n".join([lines_f[j][len(cur):], *lines_f[j + 1:]]) or None


def anchor_of(prefix: str) -> tuple[str, bool]:
    """(anchor, at_start) for a base prefix."""
    if len(prefix) <= ANCHOR_CHARS:
        return prefix, True
    return prefix[-ANCHOR_CHARS:], False


def suffix_compatible(base: str, suffix: str) -> bool:
    """Same text after the cursor, ignoring closing brackets/quotes right at the cursor (auto-closing
    inserts them, typing over them removes them)."""
    return base == suffix or base.lstrip(_CLOSERS) == suffix.lstrip(_CLOSERS)


# ---------------------------------------------------------------------------------------------- trie


class _Node:
    __slots__ = ("children", "ids")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.ids: set[int] = set()


class Trie:
    """A character trie over a few variant texts. Each node holds the variants whose text passes through
    it, so ``walk(typed)`` gives every variant that ``typed`` continues in O(len(typed))."""

    def __init__(self) -> None:
        self.root = _Node()
        self.texts: dict[int, str] = {}
        self._ends: dict[int, _Node] = {}

    def set(self, i: int, text: str) -> None:
        """Variant ``i`` is now ``text`` (usually the old text plus a streamed token: appended in place)."""
        old = self.texts.get(i)
        if old == text:
            return
        if old is not None and text.startswith(old):
            node, rest = self._ends[i], text[len(old):]
        else:
            if old is not None:
                self._remove(i, old)
            node, rest = self.root, text
            node.ids.add(i)
        for ch in rest:
            nxt = node.children.get(ch)
            if nxt is None:
                nxt = node.children[ch] = _Node()
            nxt.ids.add(i)
            node = nxt
        self.texts[i] = text
        self._ends[i] = node

    def _remove(self, i: int, text: str) -> None:
        path = [self.root]
        for ch in text:
            path.append(path[-1].children[ch])
        for node in path:
            node.ids.discard(i)
        for depth in range(len(text), 0, -1):  # prune branches no variant uses any more
            node, parent = path[depth], path[depth - 1]
            if not node.ids and not node.children:
                del parent.children[text[depth - 1]]
        del self.texts[i]
        del self._ends[i]

    def walk(self, typed: str) -> AbstractSet[int]:
        """Variants whose text starts with ``typed``."""
        node = self.root
        for ch in typed:
            nxt = node.children.get(ch)
            if nxt is None:
                return set()
            node = nxt
        return set(node.ids)

    def node_count(self) -> int:
        n, stack = 0, [self.root]
        while stack:
            node = stack.pop()
            n += 1
            stack.extend(node.children.values())
        return n


# --------------------------------------------------------------------------------------------- store


@dataclass(eq=False)
class Entry:
    """One generation for a base state: its variants (as the user sees them) and how each finished."""

    anchor: str
    at_start: bool
    suffix: str
    n: int  # variants asked for
    key: tuple  # GenParams.key() of the generation
    origin: str = "model"  # "model" | "disk"
    seq: int = 0
    raw: list[str] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    finish: list[str | None] = field(default_factory=list)  # None while streaming
    doubts: list[Doubts] = field(default_factory=list)  # per variant, offsets into its display text
    live: bool = True
    created: float = field(default_factory=time.monotonic)
    finished_at: float | None = None
    trie: Trie = field(default_factory=Trie)
    version: int = 0  # bumped on every change (waiters poll it)
    window: str = "full"  # the engine's prompt window ("quick": the short first one, Timings.window)
    work: str = ""  # the kind of work that wrote it (the scheduler's job kind: "now", "future", ...)
    served: bool = False  # an answer made from it went out with a suggestion
    head: str | None = None  # the base's line before the cursor when only whitespace (past_blank_lines)

    def text(self, i: int) -> str:
        return self.trie.texts.get(i, "")

    @property
    def max_len(self) -> int:
        return max((len(t) for t in self.trie.texts.values()), default=0)

    @property
    def complete(self) -> bool:
        """Finished, every variant on the model's own terms: for its base state this is *the* answer,
        even when there is no text (the model has nothing to add there)."""
        return not self.live and all(f in COMPLETE_REASONS for f in self.finish)


@dataclass
class Variant:
    index: int
    text: str  # the rest of the variant after what was typed (raw model text at the new cursor)
    finish: str | None  # None: still streaming
    tokens: int  # the variant's tokens in proportion to what is left (for the protocol's `tokens`)
    doubts: Doubts = ()  # offsets into ``text``


@dataclass
class Hit:
    entry: Entry
    typed: str
    variants: list[Variant]

    @property
    def exact(self) -> bool:
        """The state the generation was made for (same text typed, same suffix): a repeat."""
        return self.typed == ""

    @property
    def live(self) -> bool:
        return self.entry.live

    @property
    def known_empty(self) -> bool:
        """The exact state, and the model finished there with nothing more to write."""
        return self.exact and not self.variants and self.entry.complete

    def completions(self, source: str, limit: int) -> list[Completion]:
        return [Completion(text=v.text, token_ids=[0] * v.tokens,
                           finish_reason=v.finish or "partial", variant=v.index, source=source, doubts=v.doubts)
                for v in self.variants[:limit]]


class TypeThrough:
    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[int, Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._seq = itertools.count(1)

    def __len__(self) -> int:
        return len(self._entries)

    # ---- writing (engine thread) ----------------------------------------------------------------
    def open(self, prefix: str, suffix: str, *, n: int, key: tuple, origin: str = "model", work: str = "") -> Entry:
        """A generation starts for (prefix, suffix): a live entry that ``update`` streams into."""
        anchor, at_start = anchor_of(prefix)
        entry = Entry(anchor, at_start, suffix, n, key, origin, work=work)
        if ("\n" in anchor or at_start) and not (line := anchor[anchor.rfind("\n") + 1:]).strip():
            entry.head = line
        with self._lock:
            entry.seq = next(self._seq)
            # an older entry for the very same state and parameters is replaced
            for old in [e for e in self._entries.values() if e.anchor == anchor and e.at_start == at_start
                        and e.suffix == suffix and e.key == key and not e.live]:
                del self._entries[old.seq]
            self._entries[entry.seq] = entry
            self._evict()
        return entry

    def update(self, entry: Entry, i: int, raw: str, doubts: Doubts = ()) -> None:
        """Variant ``i`` has streamed ``raw`` so far (``doubts``: where the model was unsure in it)."""
        with self._lock:
            while len(entry.raw) <= i:
                entry.raw.append("")
                entry.tokens.append(0)
                entry.finish.append(None)
                entry.doubts.append(())
            entry.raw[i] = raw
            entry.tokens[i] += 1
            entry.trie.set(i, raw)
            entry.doubts[i] = doubts
            entry.version += 1

    def close(self, entry: Entry, comps: Sequence[Completion] | None) -> None:
        """The generation ended: its final variants (``None``: it failed, keep what streamed as partial)."""
        with self._lock:
            if comps is not None:
                entry.raw, entry.tokens, entry.finish, entry.doubts = [], [], [], []
                entry.trie = Trie()
                for i, c in enumerate(comps):
                    entry.raw.append(c.text)
                    entry.tokens.append(len(c.token_ids))
                    entry.finish.append(c.finish_reason)
                    entry.doubts.append(c.doubts)
                    entry.trie.set(i, c.text)
            else:
                entry.finish = [f or "cancelled" for f in entry.finish]
            entry.live = False
            entry.finished_at = time.monotonic()
            entry.version += 1
            if not any(t for t in entry.trie.texts.values()) and not entry.complete and entry.seq in self._entries:
                del self._entries[entry.seq]  # cut off before it wrote anything: nothing to serve

    def add(self, prefix: str, suffix: str, comps: Sequence[Completion], *, n: int, key: tuple,
            origin: str) -> Entry:
        """A finished generation from elsewhere (the disk cache)."""
        entry = self.open(prefix, suffix, n=n, key=key, origin=origin)
        self.close(entry, comps)
        return entry

    def discard(self, entry: Entry) -> None:
        with self._lock:
            self._entries.pop(entry.seq, None)

    def _evict(self) -> None:
        while len(self._entries) > self.capacity:
            victim = next((s for s, e in self._entries.items() if not e.live), None)
            if victim is None:
                break
            del self._entries[victim]

    # ---- reading (event loop, and the engine thread's checks) -----------------------------------
    def lookup(self, prefix: str, suffix: str, *, n: int = 1) -> list[Hit]:
        """Generations that continue into this state, best first: the exact state, then the closest base
        (least typed since it), then the newest. A hit's variants are the ones the typed text continues,
        with something left after it; a streaming generation that the typed text agrees with so far is
        a hit with no variants yet (the text may still come), and so is the exact state of a finished
        generation that wrote nothing (``known_empty``: nothing to ask the model again)."""
        hits: list[Hit] = []
        with self._lock:
            for entry in reversed(self._entries.values()):
                if entry.n < n or not suffix_compatible(entry.suffix, suffix):
                    continue
                typed = typed_since(entry.anchor, entry.at_start, prefix, entry.max_len + RUN_AHEAD_CHARS)
                if typed is None:
                    continue
                variants: list[Variant] = []
                walked = entry.trie.walk(typed)
                for i in sorted(walked or entry.trie.texts):
                    full = entry.trie.texts[i]
                    # an empty line typed that the model did not write (or the reverse): its lines still hold
                    rest = full[len(typed):] if walked else past_blank_lines(entry.head, typed, full) or ""
                    if not rest:
                        continue
                    ntok = entry.tokens[i] if i < len(entry.tokens) else 0
                    cut = len(full) - len(rest)
                    doubts = tuple((at - cut, p) for at, p in entry.doubts[i] if at >= cut) \
                        if i < len(entry.doubts) else ()
                    variants.append(Variant(i, rest, entry.finish[i] if i < len(entry.finish) else None,
                                            max(1, round(ntok * len(rest) / len(full))), doubts))
                if variants or (entry.live and self._agrees(entry, typed)) or (typed == "" and entry.complete):
                    hits.append(Hit(entry, typed, variants))
            for h in hits:  # recently useful entries are kept longest
                self._entries.move_to_end(h.entry.seq)
        hits.sort(key=lambda h: (not h.exact, len(h.typed), -h.entry.seq))
        return hits

    @staticmethod
    def _agrees(entry: Entry, typed: str) -> bool:
        """(lock held) ``typed`` continues a variant, or runs at most ``RUN_AHEAD_CHARS`` ahead of one
        still streaming (or of a generation that has not written anything yet)."""
        if entry.trie.walk(typed) and entry.trie.texts:
            return True
        if not entry.live:
            return False
        if not entry.trie.texts:
            return len(typed) <= RUN_AHEAD_CHARS
        for i, f in enumerate(entry.finish):
            t = entry.trie.texts.get(i, "")
            if f is None and typed.startswith(t) and len(typed) - len(t) <= RUN_AHEAD_CHARS:
                return True
        return False

    def consistent(self, entry: Entry, prefix: str, suffix: str) -> bool:
        """Can this (usually still streaming) generation serve the state (prefix, suffix)? True while
        what was typed since its base agrees with some variant: it continues a variant, or (streaming)
        a variant so far is a prefix of what was typed (the model may still write the rest)."""
        with self._lock:
            if not suffix_compatible(entry.suffix, suffix):
                return False
            typed = typed_since(entry.anchor, entry.at_start, prefix, entry.max_len + RUN_AHEAD_CHARS)
            return typed is not None and self._agrees(entry, typed)


def reachable(target_prefix: str, target_suffix: str, prefix: str, suffix: str, max_ahead: int = 4096) -> bool:
    """Is the state (target_prefix, target_suffix) ahead of (prefix, suffix) by typing alone? A
    pre-generated future stays useful while the user types toward it (or has arrived)."""
    if not suffix_compatible(target_suffix, suffix):
        return False
    anchor, at_start = anchor_of(prefix)
    return typed_since(anchor, at_start, target_prefix, max_ahead) is not None
