"""Pick Variant's branches after a known item 1 (issue 34), without the model: the engine hands the greedy
item to the next generation only while row 0 still holds it, and the KV rows the branch batch borrows give
row 0 back its item 1."""

from __future__ import annotations

import numpy as np

from engine.decoding.batch import Firsts
from engine.model.kv_cache import KVCache, KVRows
from engine.types import Completion, GenParams


def _done(reason: str) -> Completion:
    return Completion("return 1", [5, 6], reason)


def test_a_settled_greedy_item_is_handed_on_once_while_row_0_is_unchanged():
    firsts, held = Firsts(), [1, 2, 3, 5]
    firsts.keep([1, 2, 3], _done("stop"), held)
    known = firsts.take(held)
    assert known is not None and known.prompt == [1, 2, 3] and known.first.text == "return 1"
    # its branches: greedy variants of this very prompt while row 0 holds it and item 1's tokens
    three = GenParams(n=3, variant_temperature=0.0)
    assert known.serves([1, 2, 3], held, three, 4) and known.serves([1, 2, 3], [1, 2, 3], three, 4)
    assert not known.serves([1, 2, 3], held, three, 1)  # one row: item 1 itself, written again
    assert not known.serves([1, 2, 3], held, GenParams(n=1), 4)
    assert not known.serves([1, 2, 3], held, GenParams(n=3, variant_temperature=0.8), 4)  # sampled variants
    assert not known.serves([1, 2, 4], held, three, 4)  # another prompt
    assert not known.serves([1, 2, 3], [1, 2, 7], three, 4)  # row 0 written since
    assert firsts.take(held) is None  # once: the next generation, not any later one


def test_no_item_is_handed_on_when_row_0_changed_or_it_was_cut_short():
    firsts, held = Firsts(), [1, 2, 3, 5]
    firsts.keep([1, 2, 3], _done("stop"), held)
    assert firsts.take(list(held)) is None  # an equal list is not proof: another prompt ran in between
    for reason in ("lines", "length", "cancelled", "deadline"):  # a batch row would write it further
        firsts.keep([1, 2, 3], _done(reason), held)
        assert firsts.take(held) is None, reason


def _rows(positions: int) -> KVRows:
    kv = KVCache.allocate(layers=2, kv_heads=1, head_dim=2, capacity=16, batch_max=3)
    for buf in (*kv.keys, *kv.values):
        buf[0, :, :positions, :] = np.arange(positions * 2, dtype=np.float32).reshape(1, positions, 2) + 1
    return KVRows(kv)


def test_branch_rows_share_the_prompt_and_row_0_gets_its_item_back():
    rows = _rows(6)
    held = [10, 11, 12, 13, 14, 15]  # a prompt of 4 tokens and item 1's 2
    rows.tokens = held
    before = [buf[0, :, :6, :].copy() for buf in rows.kv.keys]
    rows.truncate(4)  # the variants' prompt pass: row 0 says it holds the prompt only
    rows.parked[2] = None  # type: ignore[assignment]  (something parked in the row set aside)
    rows.branch_rows(3, len(held))
    assert 2 not in rows.parked
    for buf in rows.kv.keys:
        assert np.array_equal(buf[1, :, :4, :], buf[0, :, :4, :])  # branch row 1: the prompt's KV
        buf[0:2, :, 4:8, :] = -1.0  # the branches write past the prompt in rows 0 and 1
    rows.restore_row0(3, held)
    assert rows.tokens == held
    for buf, old in zip(rows.kv.keys, before, strict=True):
        assert np.array_equal(buf[0, :, :6, :], old)
