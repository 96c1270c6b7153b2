"""A pick that healing constrains to a few tokens reads their head rows alone, and picks what the whole head
would (the token and its probability among the allowed ones), without the model."""

from __future__ import annotations

import numpy as np

from engine.decoding import picks
from engine.decoding.picks import greedy_pick


class _Head:
    def __init__(self, w: np.ndarray) -> None:
        self.w, self.calls, self.ids = w, 0, None

    def __call__(self, hidden: np.ndarray) -> np.ndarray:
        self.calls += 1
        return hidden.reshape(-1, self.w.shape[1]) @ self.w.T


def _setup(vocab: int = 5000, dim: int = 16):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((vocab, dim)).astype(np.float32)
    full = _Head(w)
    return w, {"full": full}, full, rng.standard_normal((1, dim)).astype(np.float32)


def test_a_few_allowed_tokens_are_picked_from_their_rows_as_the_whole_head_picks_them():
    w, heads, full, h = _setup()
    read: list[int] = []

    def rows(ids: np.ndarray) -> np.ndarray:
        read.append(len(ids))
        return w[ids]

    for allowed in (np.asarray([7, 4000, 12, 999]), np.asarray([3]), np.arange(100, 600)):
        whole, wp = greedy_pick(heads, h, True, allowed)
        calls = full.calls
        few, fp = greedy_pick(heads, h, True, allowed, head_rows=rows)
        assert full.calls == calls, "the whole head ran"
        assert int(few[0]) == int(whole[0]) and int(few[0]) in allowed.tolist()
        assert abs(float(fp[0]) - float(wp[0])) < 1e-5
    assert read == [4, 1, 500]
    assert greedy_pick(heads, h, True, np.asarray([3]), head_rows=rows)[1][0] == 1.0  # the only one allowed


def test_many_allowed_tokens_or_several_rows_run_the_whole_head(monkeypatch):
    w, heads, full, h = _setup()
    monkeypatch.setattr(picks, "ALLOWED_ROWS_MAX", 50)

    def rows(ids: np.ndarray) -> np.ndarray:
        raise AssertionError("rows read for a large set")

    calls = full.calls
    tok, _ = greedy_pick(heads, h, True, np.arange(0, 51), head_rows=rows)
    assert full.calls == calls + 1 and 0 <= int(tok[0]) <= 50
    two = np.concatenate([h, -h])
    toks, _ = greedy_pick(heads, two, True, np.asarray([1, 2]), head_rows=rows)  # rows after the first: free
    assert full.calls == calls + 2 and int(toks[0]) in (1, 2) and int(toks[1]) == int(np.argmax(w @ -h[0]))
    assert int(greedy_pick(heads, h, True, np.asarray([5, 6]), head_rows=lambda ids: None)[0][0]) in (5, 6)
