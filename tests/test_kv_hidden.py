"""The hidden states row 0 keeps per position (a keystroke off the text decoding wrote starts from the one
its prompt ends at, running nothing), without the model."""

from __future__ import annotations

import numpy as np

from engine.model import kv_cache
from engine.model.kv_cache import KVCache, KVRows


def _rows(capacity: int = 128) -> KVRows:
    return KVRows(KVCache.allocate(layers=1, kv_heads=1, head_dim=2, capacity=capacity, batch_max=3))


def _h(*values: float) -> np.ndarray:
    return np.asarray([[v, -v] for v in values], dtype=np.float32)


def test_each_position_a_forward_kept_answers_for_the_tokens_up_to_it():
    rows = _rows()
    rows.append([1, 2, 3], _h(3.0)[0])  # a prompt pass keeps its last position only
    assert rows.hidden_after(3).tolist() == [3.0, -3.0] and rows.hidden_after(2) is None
    rows.append([4, 5], _h(4.0, 5.0))  # a decode step keeps each of its positions
    assert [rows.hidden_after(n)[0] for n in (3, 4, 5)] == [3.0, 4.0, 5.0]
    assert rows.hidden.tolist() == [5.0, -5.0]
    assert rows.hidden_after(0) is None and rows.hidden_after(6) is None  # nothing past row 0's tokens


def test_truncating_keeps_the_positions_still_held_and_forgets_the_rest():
    rows = _rows()
    rows.append([1, 2, 3, 4], _h(1.0, 2.0, 3.0, 4.0))
    rows.truncate(3)
    assert rows.hidden_after(3)[0] == 3.0 and rows.hidden.tolist() == [3.0, -3.0]
    rows.append([9], _h(9.0))  # position 4 written over: its old hidden state is gone with it
    assert rows.hidden_after(4)[0] == 9.0
    rows.truncate(2, _h(7.0)[0])  # a rewind says what the hidden state after its kept tokens is
    assert rows.hidden_after(2)[0] == 7.0 and rows.hidden_after(3) is None
    rows.append([5, 6])  # not kept: the batch's rows
    assert rows.hidden is None and rows.hidden_after(2)[0] == 7.0


def test_a_parked_row_takes_its_hidden_states_along_and_brings_them_back():
    rows = _rows()
    rows.append(list(range(100)), _h(*range(100)))
    rows.serve_from(0, [500, 501])  # shares nothing with row 0: row 0 is parked first
    rows.truncate(0)
    rows.append([500, 501], _h(0.5, 1.5))
    assert rows.hidden_after(2)[0] == 1.5 and rows.hidden_after(50) is None
    (row, parked), = rows.parked.items()
    rows.serve_from(row, list(range(100)))
    assert rows.tokens == list(range(100)) and rows.hidden_after(50)[0] == 49.0


def test_only_the_last_positions_keep_their_hidden_states(monkeypatch):
    monkeypatch.setattr(kv_cache, "HIDDEN_KEPT", 8)
    rows = _rows()
    for i in range(20):
        rows.append([i], _h(float(i)))
    assert rows.hidden_after(20)[0] == 19.0 and rows.hidden_after(13)[0] == 12.0
    assert rows.hidden_after(5) is None
    assert sum(rows.hidden_after(n) is not None for n in range(21)) <= 2 * 8  # pruned back at twice the bound
