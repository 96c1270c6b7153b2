"""Sampling from logits: temperature 0 is argmax; otherwise top-k / top-p with an explicit seeded RNG,
one uniform draw per step, so a variant is reproducible from its seed alone."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class Sampler:
    def __init__(self, temperature: float, top_k: int, top_p: float, seed: int) -> None:
        self.temperature = float(temperature)
        self.top_k = int(top_k)
        self.top_p = float(top_p)
        self.rng = np.random.Generator(np.random.PCG64(seed))

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    def __call__(self, logits: np.ndarray, allowed: np.ndarray | None = None) -> int:
        """Pick a token id from 1-D logits; ``allowed`` (ids) restricts the choice (token healing)."""
        if allowed is not None:
            sub = logits[allowed]
            return int(allowed[self._pick(sub)])
        return self._pick(logits)

    def _pick(self, logits: np.ndarray) -> int:
        if self.greedy:
            return int(np.argmax(logits))
        u = self.rng.random()  # drawn every step, whatever the distribution, to keep streams aligned
        return sample_index(logits, self.temperature, self.top_k, self.top_p, u)


def sample_index(logits: np.ndarray, temperature: float, top_k: int, top_p: float, u: float) -> int:
    n = logits.shape[0]
    k = n if top_k <= 0 else min(top_k, n)
    if k < n:
        idx = np.argpartition(-logits, k - 1)[:k]
    else:
        idx = np.arange(n)
    sub = logits[idx].astype(np.float64) / max(temperature, 1e-6)
    order = np.argsort(-sub, kind="stable")
    idx, sub = idx[order], sub[order]
    p = np.exp(sub - sub[0])
    p /= p.sum()
    if top_p < 1.0:
        c = np.cumsum(p)
        keep = int(np.searchsorted(c, top_p) + 1)
        idx, p = idx[:keep], p[:keep] / p[:keep].sum()
    c = np.cumsum(p)
    j = int(np.searchsorted(c, u * c[-1], side="right"))
    return int(idx[min(j, len(idx) - 1)])


def ngram_match(seq: list[int], max_ngram: int = 3, min_ngram: int = 1, max_draft: int = 8,
                earlier: Sequence[Sequence[int]] = ()) -> tuple[list[int], int]:
    """Prompt-lookup drafting: find the latest earlier occurrence of the sequence's last n-gram (longest n
    first) and propose the tokens that followed it, with the length of the n-gram that matched (0: no
    draft). Code repeats itself, so these drafts are often right, and verifying k of them costs about one
    forward pass (decode is memory bound). ``earlier``: outputs of recent generations (newest first),
    searched after ``seq`` for the same n-gram (n >= 2): after the user types something a stream did not
    predict, the new generation often writes much of what the old one had. A longer match is a
    better draft: on code, the first drafted token is right far more often after a 3-token match than after
    a 1-token one (docs/benchmarks/engine.md), so how far to draft depends on it."""
    L = len(seq)
    for n in range(min(max_ngram, L - 1), min_ngram - 1, -1):
        tail = seq[L - n:]
        # search backwards, excluding the tail itself
        for start in range(L - n - 1, -1, -1):
            if seq[start:start + n] == tail:
                follow = seq[start + n:start + n + max_draft]
                if follow:
                    return follow, n
                break
        if n < 2:
            continue
        for out in earlier:
            for start in range(len(out) - n - 1, -1, -1):
                if list(out[start:start + n]) == tail:
                    follow = list(out[start + n:start + n + max_draft])
                    if follow:
                        return follow, n
    return [], 0


def expected_tokens(accept: float, d: int) -> float:
    """Tokens one verify step yields with a draft of d tokens, each accepted with probability ``accept``
    given the previous one was: 1 (the model's own next token) + a + a^2 + ... + a^d."""
    a = min(max(accept, 0.0), 0.999)
    return (1.0 - a ** (d + 1)) / (1.0 - a)


def choose_draft_len(costs: dict[int, float], accept: float, available: int) -> int:
    """Draft length maximising tokens per unit of time, from measured forward costs per token count
    (costs[m] = time of a forward over m tokens). On CPUs where a forward over several tokens is
    compute bound, long drafts cost more than they return; the measured table decides."""
    best_d, best = 0, expected_tokens(accept, 0) / costs.get(1, 1.0)
    for d in range(1, available + 1):
        m = d + 1
        if m not in costs:
            continue
        v = expected_tokens(accept, d) / costs[m]
        if v > best * 1.02:  # a draft must pay for itself clearly
            best_d, best = d, v
    return best_d


def pick_probs(logits: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """The softmax probability of each row's picked column: logits [rows, V], picks [rows] -> [rows]."""
    lg = np.asarray(logits, dtype=np.float32).reshape(len(picks), -1)
    rows = np.arange(lg.shape[0])
    m = lg.max(axis=1, keepdims=True)
    e = np.exp(lg - m)
    return (e[rows, np.asarray(picks)] / e.sum(axis=1)).astype(np.float64)
