"""The KV cache: its buffers (``KVCache``, allocated once, written in place by the decoder) and what its rows
hold (``KVRows``), after llama.cpp's llama-kv-cache.cpp: the cache's bookkeeping in one place.

Row 0 holds the prompt being served and the tokens decoding appended to it; the spare batch rows (free
between variant batches) park other prompts' KV: before row 0 is overwritten by a prompt that shares little
with it, it is copied into a spare row, and a later prompt that shares more with a parked row swaps that row
back in (a file switched back to, an interrupted warm-up resumed). A variant batch spreads row 0 into the
rows it uses and forgets what was parked there. Positions are always explicit: the decoder writes KV at the
positions it is given, and ``KVRows`` records which of them hold what, through the named operations below.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

# row 0 about to lose at least this many computed positions: its KV is parked in a spare row first (the
# quick window's while the full one warms, the full one's while the user works elsewhere for a moment)
PARK_MIN_TOKENS = 96
# hidden states kept for row 0's last positions: a keystroke that diverges from the text decoding wrote
# there (its prompt ends at one of them) starts from that hidden state instead of running its position again
HIDDEN_KEPT = 256

Anchor = tuple[str, str]  # the FIM prefix-slot text and the suffix a prompt was laid out with


@dataclass
class KVCache:
    """Owner of the KV buffers: per layer, keys and values of shape (batch_max, kv_heads, capacity,
    head_dim); which positions of which row are valid is ``KVRows``'s to know."""

    keys: list[np.ndarray]
    values: list[np.ndarray]
    capacity: int
    batch_max: int

    @classmethod
    def allocate(cls, layers: int, kv_heads: int, head_dim: int, capacity: int, batch_max: int) -> KVCache:
        shape = (batch_max, kv_heads, capacity, head_dim)
        return cls([np.zeros(shape, np.float32) for _ in range(layers)],
                   [np.zeros(shape, np.float32) for _ in range(layers)], capacity, batch_max)

    def broadcast_row0(self, rows: int, length: int) -> None:
        """Copy the first ``length`` positions of row 0 into rows 1..rows-1 (variants share the prompt)."""
        assert rows <= self.batch_max
        for buf in (*self.keys, *self.values):
            buf[1:rows, :, :length, :] = buf[0:1, :, :length, :]

    def copy_row(self, src: int, dst: int, length: int) -> None:
        """Copy the first ``length`` positions of row ``src`` into row ``dst`` (parking a prompt's KV)."""
        if src == dst:
            return
        for buf in (*self.keys, *self.values):
            buf[dst, :, :length, :] = buf[src, :, :length, :]

    def swap_rows(self, a: int, b: int, len_a: int, len_b: int) -> None:
        """Exchange the valid positions of rows ``a`` and ``b`` (a parked prompt back into row 0)."""
        if a == b:
            return
        for buf in (*self.keys, *self.values):
            keep = buf[a, :, :len_a, :].copy()
            buf[a, :, :len_b, :] = buf[b, :, :len_b, :]
            buf[b, :, :len_a, :] = keep


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many leading tokens two token lists share."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    x = np.asarray(a[:n])
    y = np.asarray(b[:n])
    diff = np.nonzero(x != y)[0]
    return int(diff[0]) if diff.size else n


@dataclass
class Parked:
    """A prompt's KV kept in a spare batch row."""

    tokens: list[int]
    anchor: Anchor | None
    hidden: dict[int, np.ndarray]
    used: float


class KVRows:
    """What the rows of a ``KVCache`` hold. Row 0: ``tokens`` (their KV is valid at positions
    0..len(tokens)-1), ``hidden`` (the hidden state after the last of them; None when not kept),
    ``hidden_after(n)`` (after the first n of them, for at least the last ``HIDDEN_KEPT`` positions a
    forward wrote, at most twice as many) and ``anchor`` (the FIM anchor of its prompt); ``parked``: spare
    row -> the prompt it holds.

    Token lists are replaced, never changed in place (a parked row may share one with row 0 once)."""

    def __init__(self, kv: KVCache) -> None:
        self.kv = kv
        self.tokens: list[int] = []
        self._hidden: dict[int, np.ndarray] = {}  # n -> the hidden state after row 0's first n tokens
        self.anchor: Anchor | None = None
        self.parked: dict[int, Parked] = {}

    # ---- reading ----------------------------------------------------------------------------------
    @property
    def hidden(self) -> np.ndarray | None:
        """The hidden state after the last of row 0's tokens (None: not kept)."""
        return self._hidden.get(len(self.tokens))

    def hidden_after(self, n: int) -> np.ndarray | None:
        """The hidden state after row 0's first ``n`` tokens, if a forward that wrote them kept it."""
        return self._hidden.get(n) if 0 < n <= len(self.tokens) else None

    def reusable(self, ids: list[int]) -> int:
        """How many leading tokens of ``ids`` row 0 holds already."""
        return common_prefix(self.tokens, ids)

    def holds(self, ids: list[int], anchor: Anchor | None, slack: float) -> bool:
        """Row 0 holds the prompt ``ids`` (laid out at ``anchor``) but for at most ``slack`` tokens."""
        return self.anchor == anchor and len(ids) - self.reusable(ids) <= slack

    def slots(self) -> list[tuple[int, Anchor | None, list[int]]]:
        """(row, anchor, tokens) of row 0 and of every parked row, row 0 first."""
        return [(0, self.anchor, self.tokens)] + [(r, p.anchor, p.tokens) for r, p in self.parked.items()]

    # ---- row 0 grows and shrinks ------------------------------------------------------------------
    def append(self, ids: list[int], hidden: np.ndarray | None = None) -> None:
        """A forward wrote the KV of ``ids`` right after row 0's tokens: they join them; ``hidden`` is the
        hidden state after the last of them ([H]), or after each of them ([len(ids), H]); None: not kept."""
        assert len(self.tokens) + len(ids) <= self.kv.capacity, "row 0 past the KV capacity"
        n0 = len(self.tokens)
        self.tokens = self.tokens + list(ids)
        if hidden is None or not ids:
            return
        if hidden.ndim == 1:
            self._hidden[len(self.tokens)] = hidden
        else:
            assert hidden.shape[0] == len(ids), "one hidden state per token"
            for j in range(len(ids)):
                self._hidden[n0 + j + 1] = hidden[j]
        if len(self._hidden) > 2 * HIDDEN_KEPT:  # pruned now and then, not at every decode step
            old = len(self.tokens) - HIDDEN_KEPT
            self._hidden = {n: h for n, h in self._hidden.items() if n > old}

    def truncate(self, length: int, hidden: np.ndarray | None = None) -> None:
        """Row 0 keeps its first ``length`` tokens (the positions after them are written over next) and the
        hidden states kept for them; ``hidden``: the hidden state after the last one kept."""
        assert 0 <= length <= len(self.tokens), "truncating row 0 beyond its tokens"
        self.tokens = self.tokens[:length]
        self._hidden = {n: h for n, h in self._hidden.items() if n <= length}
        if hidden is not None:
            self._hidden[length] = hidden

    def reset(self) -> None:
        """Nothing is held: every row is free."""
        self.tokens, self._hidden, self.anchor = [], {}, None
        self.parked.clear()

    # ---- rows -------------------------------------------------------------------------------------
    def serve_from(self, row: int, ids: list[int]) -> None:
        """Row ``row`` (0 or a parked one) will serve the prompt ``ids``: a parked row is swapped into row 0;
        a row 0 about to lose ``PARK_MIN_TOKENS`` or more computed positions to it is parked first."""
        if row != 0:
            self._swap_in(row)
        elif len(self.tokens) - self.reusable(ids) >= PARK_MIN_TOKENS:
            self._park_row0()

    def spread_row0(self, n: int) -> None:
        """Row 0's tokens' KV into rows 1..n-1 for a variant batch: what was parked there is gone."""
        for row in range(1, n):
            self.parked.pop(row, None)
        self.kv.broadcast_row0(n, len(self.tokens))

    def branch_rows(self, n: int, keep: int) -> None:
        """Rows 0..n-2 for a batch of n-1 rows sharing row 0's tokens' KV, and row 0's first ``keep``
        positions (a greedy row written after them) kept in row n-1 until ``restore_row0``: what was
        parked in rows 1..n-1 is gone."""
        for row in range(1, n):
            self.parked.pop(row, None)
        self.kv.copy_row(0, n - 1, keep)
        self.kv.broadcast_row0(n - 1, len(self.tokens))

    def restore_row0(self, n: int, tokens: list[int]) -> None:
        """After a ``branch_rows(n, len(tokens))`` batch: row 0 holds ``tokens`` again (the KV kept in row
        n-1; they extend row 0's tokens, whose KV the batch read but never wrote)."""
        assert tokens[: len(self.tokens)] == self.tokens, "row 0's tokens must start the kept ones"
        self.kv.copy_row(n - 1, 0, len(tokens))
        self.tokens, self._hidden = list(tokens), {}

    def _park_row0(self) -> None:
        """Copy row 0's KV into a spare row (an empty one, else the least recently used)."""
        spare = range(1, self.kv.batch_max)
        if not spare or not self.tokens:
            return
        free = [r for r in spare if r not in self.parked]
        row = free[0] if free else min(spare, key=lambda r: self.parked[r].used)
        self.kv.copy_row(0, row, len(self.tokens))
        self.parked[row] = Parked(list(self.tokens), self.anchor, dict(self._hidden), time.monotonic())

    def _swap_in(self, row: int) -> None:
        """A parked prompt back into row 0; row 0's takes its place."""
        p = self.parked.pop(row)
        self.kv.swap_rows(0, row, len(self.tokens), len(p.tokens))
        if self.tokens:
            self.parked[row] = Parked(self.tokens, self.anchor, self._hidden, time.monotonic())
        self.tokens, self.anchor, self._hidden = p.tokens, p.anchor, p.hidden
