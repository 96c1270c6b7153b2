"""Where a greedy row's drafts come from and how long they may be (``Drafts``): the forward cost per token
count, the running acceptance per n-gram match length, the outputs of the last greedy generations (drafts
for the next ones) and those cut off before their end (by spot: the same spot asked again drafts from what
it wrote, so writing it again costs a few verify steps). The n-gram search and the length rule itself are
engine/decoding/sampling.py's."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable

import numpy as np

from engine.decoding.sampling import choose_draft_len

ACCEPT_PRIOR = 0.6  # draft acceptance assumed for an n-gram match length not seen yet
CUT_KEEP = 8  # cut-off greedy outputs kept as drafts for their spot

Spot = tuple[str, str]  # (prefix, suffix) as the caller asked


class Drafts:
    def __init__(self, earlier: int) -> None:
        # measured forward time per token count (filled at warm-up, kept current from real decoding)
        self.costs: dict[int, float] = {1: 1.0}
        # running draft acceptance per length of the n-gram the draft came from (a longer match drafts better)
        self.accept_rate: dict[int, float] = {}
        # outputs of the last ``earlier`` greedy generations, oldest first
        self.earlier: deque[list[int]] = deque(maxlen=earlier)
        self.cut: OrderedDict[Spot, list[int]] = OrderedDict()

    def observe_cost(self, m: int, seconds: float) -> None:
        """Keep the forward cost table current from real decoding (the warm-up's two timings per size run
        on cold shapes and overstate multi-token forwards, which makes drafts too long)."""
        old = self.costs.get(m)
        self.costs[m] = seconds if old is None else old + 0.1 * (seconds - old)

    def sized(self, draft: list[int], match: int) -> list[int]:
        """The part of an n-gram draft worth verifying, by the acceptance of drafts from ``match``-token
        matches and the forward costs."""
        a = self.accept_rate.get(match, ACCEPT_PRIOR)
        draft = draft[: choose_draft_len(self.costs, a, len(draft))]
        if not draft:  # drift back toward the prior so a bad patch does not switch drafting off
            self.accept_rate[match] = a + 0.05 * (ACCEPT_PRIOR - a)
        return draft

    def accepted(self, match: int, accepted: int, drafted: int) -> None:
        """``accepted`` of ``drafted`` tokens from a ``match``-token match stood: the running per-token
        acceptance, P(accept next | accepted so far)."""
        hit = accepted / drafted if accepted < drafted else 1.0
        self.accept_rate[match] = 0.8 * self.accept_rate.get(match, ACCEPT_PRIOR) + 0.2 * hit

    def newest_first(self) -> list[list[int]]:
        return list(reversed(self.earlier))

    def remember(self, out: list[int]) -> None:
        """A greedy generation's output, a source of drafts for the next ones (short ones are not)."""
        if len(out) >= 4 and (not self.earlier or self.earlier[-1] != out):
            self.earlier.append(list(out))

    def resume(self, spot: Spot) -> list[int] | None:
        """What a generation cut off at this spot wrote (taken: the new generation writes it again)."""
        return self.cut.pop(spot, None)

    def keep_cut(self, spot: Spot, out: list[int]) -> None:
        """A greedy generation at ``spot`` was cut off: its output drafts the next one there."""
        self.cut[spot] = list(out)
        while len(self.cut) > CUT_KEEP:
            self.cut.popitem(last=False)

    def forget(self) -> None:
        """Drop the remembered outputs (benchmarks repeating a prompt)."""
        self.earlier.clear()
        self.cut.clear()


def measure_costs(forward: Callable[[np.ndarray, int], object], past: int, sizes: list[int]) -> dict[int, float]:
    """Seconds for one forward over m tokens after ``past`` cached positions, per size m (the best of two)."""
    costs = {}
    for m in sizes:
        ids = np.full((1, m), 100, dtype=np.int64)
        best = float("inf")
        for _ in range(2):
            t0 = time.perf_counter()
            forward(ids, past)
            best = min(best, time.perf_counter() - t0)
        costs[m] = best
    return costs
