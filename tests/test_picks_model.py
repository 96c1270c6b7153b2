"""Branch variants on the real default model (issue 34): greedy rows after item 1 that take the next-best
distinct token of code where item 1's code starts, then go on greedily."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.decoding.picks import BRANCH_MIN_TOKENS, branch_limit, branch_pick
from engine.text.rank import same_substance
from engine.types import GenParams

pytestmark = pytest.mark.model

PREFIX = 'def total(numbers: list[int]) -> int:\n    """The sum of the numbers."""\n    '
SUFFIX = "\n\n\nprint(total([1, 2, 3]))\n"


def _one(tok, text: str) -> int:
    ids = tok.encode(text)
    assert len(ids) == 1, (text, ids)
    return ids[0]


def test_a_branch_skips_spaces_comments_and_the_same_word_tokenized_otherwise(engine):
    tok = engine.tok
    ids = {t: _one(tok, t) for t in ("return", " return", "ret", "   ", "#", "total", "result")}
    logits = np.full(tok.vocab_size, -10.0, dtype=np.float32)
    for rank, t in enumerate(("return", " return", "ret", "   ", "#", "total", "result")):
        logits[ids[t]] = 10.0 - rank  # in this order of preference
    assert branch_pick(tok, logits, None, 1) == ids["total"]
    assert branch_pick(tok, logits, None, 2) == ids["result"]
    allowed = np.asarray([ids["return"], ids["ret"], ids["result"]])
    assert branch_pick(tok, logits, allowed, 1) == ids["result"]  # within what token healing allows
    assert branch_pick(tok, logits, allowed, 2) == ids["return"]  # no other alternative: the greedy token


def test_branch_variants_differ_from_item_one_and_are_reproducible(engine):
    params = GenParams(max_tokens=40, max_lines=4, n=3, variant_temperature=0.0)
    # no randomness: the same branches again, on each path (a batch of all n rows from a fresh state, and the
    # branches alone after item 1). The two paths' batches differ in shape, so their numerics may order two
    # near-tied alternatives otherwise where the branch point follows a decoded token (the indentation the
    # model writes at a line of whitespace only)
    runs = []
    for _ in range(2):
        engine.reset()
        runs.append(engine.complete(PREFIX, SUFFIX, params)[0])
        runs.append(engine.complete(PREFIX, SUFFIX, params)[0])  # after item 1: the branches alone
    first, known, again, known_again = ([c.text for c in r] for r in runs)
    assert first == again and known == known_again, runs
    assert len(runs[1]) == 3 and not any(same_substance(c.text, runs[1][0].text) for c in runs[1][1:]), runs[1]
    first = runs[0]
    greedy, _ = engine.complete(PREFIX, SUFFIX, GenParams(max_tokens=40, max_lines=4))
    assert first[0].text == greedy[0].text  # item 1 is the greedy text
    assert len(first) == 3, [c.text for c in first]
    for alt in first[1:]:
        assert not same_substance(alt.text, first[0].text), (alt.text, first[0].text)
    assert not same_substance(first[1].text, first[2].text)


def test_a_branch_stops_a_bounded_length_after_item_one_ended(engine):
    assert branch_limit(5) == BRANCH_MIN_TOKENS and branch_limit(100) == 200
    params = GenParams(max_tokens=160, n=3, variant_temperature=0.0)  # no line limit: rows run long
    outs, _ = engine.complete(PREFIX, SUFFIX, params)
    limit = branch_limit(len(outs[0].token_ids))
    assert limit < params.max_tokens, outs[0].text  # (the prompt's item 1 is short: the limit is what binds)
    assert all(len(c.token_ids) <= limit for c in outs[1:]), [len(c.token_ids) for c in outs]


def test_after_the_greedy_item_the_branches_run_alone_and_row_0_keeps_it(engine):
    """Pick Variant's order: item 1 as the greedy row wrote it, then the variants on the KV it left. Item 1
    is that very completion (not written again as a batch row), the branches differ from it, and row 0
    holds item 1's KV again, bit for bit (the prompt's last position is not run again either: its KV run in
    another shape differs in its last bits, and once tipped a near tie in what followed item 1), so what
    follows item 1 once accepted is what follows it without the variants."""
    line = GenParams(max_tokens=40, max_lines=4)
    engine.reset()
    greedy, _ = engine.complete(PREFIX, SUFFIX, line)
    assert greedy[0].finish_reason in ("stop", "eos"), greedy[0]
    held = engine.rows.tokens
    kv = engine.rows.kv
    before = [buf[0, :, : len(held)].copy() for buf in (*kv.keys, *kv.values)]
    outs, t = engine.complete(PREFIX, SUFFIX, replace(line, n=3, variant_temperature=0.0))
    assert (outs[0].text, outs[0].token_ids) == (greedy[0].text, greedy[0].token_ids)
    assert t.decode_tokens == sum(len(c.token_ids) for c in outs[1:])  # the branches' tokens only
    assert t.reused_tokens == t.prompt_tokens  # the prompt's last position is item 1's, not run again
    assert len(outs) == 3 and not any(same_substance(c.text, outs[0].text) for c in outs[1:]), outs
    assert engine.rows.tokens == held
    after = [buf[0, :, : len(held)] for buf in (*kv.keys, *kv.values)]
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    _, t = engine.complete(PREFIX + greedy[0].text + "\n    ", SUFFIX, line)
    assert t.reused_tokens > t.prompt_tokens - 4  # item 1's own KV is reused


def test_branches_from_the_trimmed_head_are_the_full_heads_even_where_a_pick_was_wrong(engine, monkeypatch):
    """The branches pick from the trimmed head and the full head checks the picks a few steps at a time: the
    alternatives are those of the full head alone, also where a trimmed pick was wrong (the batch goes back
    to it), here made wrong on purpose now and then."""
    from engine.decoding import batch

    params = GenParams(max_tokens=80, max_lines=9)
    prefix = 'def fib(n: int) -> int:\n    """The n-th Fibonacci number."""\n    '

    def branches() -> list[str]:
        engine.reset()
        first, _ = engine.complete(prefix, SUFFIX, params)
        assert first[0].finish_reason in batch.SETTLED, first[0]  # (the branches follow it)
        outs, _ = engine.complete(prefix, SUFFIX, replace(params, n=3, variant_temperature=0.0))
        return [c.text for c in outs]

    # one token per forward in both arms: drafts (sized by timings, drawn from earlier tests' outputs) change
    # the forwards' shapes, and with them the last bits of a near tie (`n-1` or `n - 1` on a Zen 5 EPYC)
    monkeypatch.setattr(engine.config.fast, "speculative", False)
    monkeypatch.setattr(engine.config.fast, "trimmed_head", False)
    exact = branches()
    monkeypatch.setattr(engine.config.fast, "trimmed_head", True)
    assert branches() == exact
    calls = []
    real = batch.greedy_pick

    def sometimes_wrong(*args, **kwargs):
        picks, probs = real(*args, **kwargs)
        calls.append(1)
        if len(calls) % 5 == 3:
            picks = picks.copy()
            picks[0] = picks[0] + 1
        return picks, probs

    monkeypatch.setattr(batch, "greedy_pick", sometimes_wrong)
    assert branches() == exact
    assert len(calls) >= 5, "the trimmed head was not used"


def test_variants_at_a_body_s_first_line_stop_at_the_function_s_end(engine):
    """At a line of whitespace only the prompt ends at the line start (text.window.line_start), yet the
    block is the cursor's: a column-0 line after the body ends every item, which is what keeps Pick
    Variant's list quick (without it item 1 and the branches ran to their token limit)."""
    prefix = ('from typing import List\n\n\ndef mean_absolute_deviation(numbers: List[float]) -> float:\n'
              '    """The mean absolute deviation of the numbers around their mean."""\n    ')
    params = GenParams(max_tokens=160, max_lines=12, n=3, variant_temperature=0.0)
    outs, _ = engine.complete(prefix, "", params)
    assert outs and outs[0].text.strip(), outs
    assert outs[0].finish_reason != "length", outs[0].text  # item 1 stopped at the body's end
    for c in outs:
        body = c.text.split("\n")[1:]
        assert not any(line[:1].strip() for line in body), c.text  # no line below the body
