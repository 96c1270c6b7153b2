"""LM-head picks: greedy tokens from the full head or the trimmed one (``greedy_pick``), the full head's
re-check of the trimmed head's provisional picks (``verify_picks``), and a variant batch's branches: the
next-best distinct tokens where the greedy text's code starts (``branch_pick``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from engine.decoding.sampling import pick_probs

if TYPE_CHECKING:
    from engine.decoding.tokenizer import HFTokenizer
    from engine.model.runtime import LazyHeads, LMHead

Pick = tuple[int, np.ndarray, int]  # a provisional pick: (output index, hidden row, token)


# healing allows this many tokens at most for its pick to read their head rows alone (numpy) instead of
# running the whole head: a typed character's first pick, the most frequent healing, allows a handful
ALLOWED_ROWS_MAX = 2048


def greedy_pick(heads: LazyHeads, hidden: np.ndarray, exact: bool, allowed: np.ndarray | None = None,
                ctx_ids: np.ndarray | None = None, ctx_w: np.ndarray | None = None,
                head_rows: Callable[[np.ndarray], np.ndarray | None] | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """Greedy token ids [rows] (``allowed`` constrains the first row) and the probability the model gives
    each pick: argmax over the full head when ``exact``, else the trimmed head's picks from its own columns
    and the prompt's rows (``ctx_ids``, their full-head rows ``ctx_w``), without a vocabulary-sized row per
    position (their probabilities are then over those columns: a little high; the full head's re-check
    replaces them). One row whose pick ``allowed`` constrains to a few tokens is picked from their head rows
    (``head_rows``: the full head's weight rows for ids) alone."""
    h2 = hidden.reshape(-1, hidden.shape[-1])
    if allowed is not None and h2.shape[0] == 1 and head_rows is not None and len(allowed) <= ALLOWED_ROWS_MAX:
        w = head_rows(np.asarray(allowed, dtype=np.int64))
        if w is not None:
            sub = (h2 @ w.T).astype(np.float32)
            j = int(np.argmax(sub[0]))
            return np.asarray([allowed[j]], dtype=np.int64), pick_probs(sub, np.asarray([j]))
    if exact:
        lg = heads["full"](h2)
        guesses = np.argmax(lg, axis=1)
        probs = pick_probs(lg, guesses)
        if allowed is not None:
            sub = lg[0, allowed]
            j = int(np.argmax(sub))
            guesses[0] = allowed[j]
            probs[0] = pick_probs(sub[None, :], np.asarray([j]))[0]  # among the tokens healing allows
        return guesses, probs
    code = heads["code"]
    lg = code(h2)
    rows = np.arange(h2.shape[0])
    best = np.argmax(lg, axis=1)
    guesses = code.ids[best] if code.ids is not None else best
    if ctx_ids is not None and ctx_w is not None:
        cl = h2 @ ctx_w.T
        cb = np.argmax(cl, axis=1)
        take = cl[rows, cb] > lg[rows, best]
        guesses = np.where(take, ctx_ids[cb], guesses)
        lg = np.concatenate([lg, cl], axis=1)
        best = np.where(take, lg.shape[1] - cl.shape[1] + cb, best)
    return guesses.astype(np.int64), pick_probs(lg, best)


def verify_picks(full: LMHead, picks: list[Pick], probs: dict[int, float] | None = None
                 ) -> tuple[int, int, np.ndarray] | None:
    """Check provisional picks (output index, hidden row, token) with the full head in one call; the
    first disagreement as (output index, the full head's token, its hidden row), else None. ``probs``
    (output index -> probability of its token) gets the full head's figures for the rows checked."""
    if not picks:
        return None
    rows = np.stack([h for _, h, _ in picks])
    lg = full(rows)
    best = np.argmax(lg, axis=1)
    p = pick_probs(lg, best)
    for k, ((idx, h, tok), b) in enumerate(zip(picks, best, strict=True)):
        if probs is not None:
            probs[idx] = float(p[k])
        if int(b) != tok:
            return idx, int(b), h
    return None


BRANCH_CANDIDATES = 64  # the best tokens looked through for a branch's alternatives
# A branch goes on at most this much longer than item 1 once item 1 ended (a token count: at least
# BRANCH_MIN_TOKENS): the list is complete when its longest row is, and one that rambled on to the token
# budget kept Pick Variant's list open for as long as the user would wait (docs/benchmarks/picks.md)
BRANCH_RATIO, BRANCH_MIN_TOKENS = 2.0, 48


def branch_limit(first_tokens: int) -> int:
    """The most tokens a branch writes once item 1 (``first_tokens`` long) has ended."""
    return max(BRANCH_MIN_TOKENS, int(BRANCH_RATIO * first_tokens))
_COMMENT = ("#", "//")


def token_text(tok: HFTokenizer, i: int) -> str:
    return tok.token_bytes(i).decode("utf-8", "replace")


def starts_code(text: str) -> bool:
    """Does a token's text start code (not whitespace only, nor a comment's start)?"""
    s = text.strip()
    return bool(s) and not s.startswith(_COMMENT)


def branch_pick(tok: HFTokenizer, logits: np.ndarray, allowed: np.ndarray | None, rank: int) -> int:
    """The ``rank``-th (1: the first) best token after the greedy one (0) whose code differs from every
    better one: not whitespace only, no comment's start, and not a piece or an extension of a better one's
    text (the same word tokenized otherwise). The greedy token when there is no such alternative."""
    ids = np.asarray(allowed) if allowed is not None else np.arange(logits.shape[0])
    sub = logits[ids]
    k = min(BRANCH_CANDIDATES, sub.shape[0])
    top = np.argpartition(-sub, k - 1)[:k]
    order = ids[top[np.argsort(-sub[top], kind="stable")]]
    greedy = int(order[0])
    kept = [token_text(tok, greedy).strip()]
    for cand in order[1:]:
        s = token_text(tok, int(cand)).strip()
        if not starts_code(s) or any(s.startswith(c) or c.startswith(s) for c in kept if c):
            continue
        kept.append(s)
        if len(kept) == rank + 1:
            return int(cand)
    return greedy
