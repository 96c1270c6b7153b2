"""The variant batch: n variants as one batch sharing the prompt's KV (row i: variant i, spread from row 0),
one token each per forward, each picked by its own seeded sampler. Greedy variants after a greedy first
one are branches (Pick Variant's alternatives): they write what row 0 writes until its first token of code,
where row i takes the i-th best distinct other token (picks.branch_pick), then go on greedily: an
alternative that differs from item 1 where it matters, as sure of the rest as item 1 is. Steps of
``_Batch``: ``emit`` (a row's pending token joins its output, or ends it), ``decode_one`` (one forward over
every row's pending token, then each running row samples its next one) and ``branch``. Afterwards row 0
holds the prompt and variant 0's tokens.

When the greedy row has just written item 1 for this very prompt and it ended settled (``Known``: Pick
Variant's item 1 comes first, the variants' job right after it), the batch does not write it again: only
the branches run (n-1 rows), following item 1's known tokens to its first token of code, and their length
bound is known from the start (an item 1 written again as a batch row also differed from the one shown
where the batch's numerics broke a near tie, and ran on far longer than it: docs/benchmarks/picks.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from engine.decoding.monitored import Monitor, sampled_pick  # issue 35 hook (guidance)
from engine.decoding.picks import branch_limit, branch_pick, greedy_pick, starts_code, token_text
from engine.decoding.prompt import Healer, Prompt
from engine.decoding.sampling import Sampler
from engine.decoding.stops import Settle, allowed_ids, finish_text, interrupted, stop_rule
from engine.types import CancelToken, Completion, GenParams, Timings, TokenCallback

if TYPE_CHECKING:
    from engine.decoding.host import Host


SETTLED = ("stop", "eos")
# the branches' picks come from the trimmed head; the full head checks them this many steps at a time (its
# weights read once for all rows and steps: a step reads about a fifth fewer bytes)
CHECK_EVERY = 8  # an item 1 that ended so would end there again as a batch row


@dataclass(frozen=True)
class Known:
    """Item 1 as the greedy row just wrote it: its prompt, its completion and row 0's tokens after it (the
    prompt and item 1's tokens, whose KV row 0 holds while that very list is row 0's). The branches start at
    the hidden state row 0 kept at the prompt's last position (``KVRows.hidden_after``), not running that
    position again: its KV, run again in another shape, would differ in its last bits from what item 1 was
    written after."""

    prompt: list[int]
    first: Completion
    held: list[int]

    def serves(self, ids: list[int], row0: list[int], params: GenParams, batch_max: int) -> bool:
        """A batch of greedy variants for this very prompt, row 0 holding it and item 1's tokens still."""
        return min(params.n, batch_max) > 1 and params.temperature <= 0 and params.variant_temperature <= 0 \
            and self.prompt == ids and self.held[: len(row0)] == row0


class Firsts:
    """The engine's last settled greedy item (``keep``), handed to the next generation if nothing ran on row
    0 in between (``take``: row 0's token list is still the one kept; lists are replaced, never changed)."""

    def __init__(self) -> None:
        self._last: Known | None = None

    def keep(self, prompt: list[int], out: Completion, held: list[int]) -> None:
        self._last = Known(list(prompt), out, held) if out.finish_reason in SETTLED else None

    def take(self, held_now: list[int]) -> Known | None:
        last, self._last = self._last, None
        return last if last is not None and last.held is held_now else None


def decode_batch(eng: Host, pr: Prompt, hidden: np.ndarray, healer: Healer | None,
                 samplers: list[Sampler], params: GenParams, t: Timings, cancel: CancelToken | None,
                 on_token: TokenCallback | None, settle: Settle | None = None,
                 monitor: Monitor | None = None, known: Known | None = None) -> list[Completion]:
    """n variants (one per sampler) from the prompt in row 0, whose last hidden state is ``hidden``; with
    ``known`` (item 1 for this prompt, greedy variants after it), its branches only."""
    if known is not None:  # the engine checked that it ``serves`` this batch
        b = _Batch(eng, pr, healer, samplers[1:], params, t, on_token, settle)
        b.monitor = monitor
        return b.run_known(hidden, cancel, known)
    b = _Batch(eng, pr, healer, samplers, params, t, on_token, settle)
    b.monitor = monitor  # issue 35 hook (guidance): each row's next token within the names the monitor allows
    return b.run(hidden, cancel)


class _Batch:
    """One variant batch's state between its steps: per row, the pending token, the output so far, its
    text, why it ended (None: running) and its time to first token; the branch rows still following row 0."""

    __slots__ = ("eng", "tok", "pr", "healer", "samplers", "params", "t", "on_token", "settle", "pending",
                 "outs", "texts", "reasons", "ttft", "following", "branches", "monitor", "base", "limit", "prov")

    def __init__(self, eng: Host, pr: Prompt, healer: Healer | None, samplers: list[Sampler], params: GenParams,
                 t: Timings, on_token: TokenCallback | None, settle: Settle | None) -> None:
        n = len(samplers)
        self.eng, self.tok, self.pr, self.healer, self.samplers = eng, eng.tok, pr, healer, samplers
        self.params, self.t, self.on_token, self.settle = params, t, on_token, settle
        self.pending: list[int] = []
        self.outs: list[list[int]] = [[] for _ in range(n)]
        self.texts = [""] * n
        self.reasons: list[str | None] = [None] * n
        self.ttft = [0.0] * n
        self.following = [i for i in range(1, n) if samplers[i].greedy] if samplers[0].greedy else []
        self.branches = frozenset(self.following)
        self.monitor: Monitor | None = None  # issue 35 hook (guidance)
        self.base = 0  # row i is variant base + i (1 when item 1 is known and not a row)
        self.limit: int | None = None  # the branches' length bound once item 1's length is known
        # the trimmed head's picks not checked yet: (output index, row, hidden state, token)
        self.prov: list[tuple[int, int, np.ndarray, int]] = []

    def run(self, hidden: np.ndarray, cancel: CancelToken | None) -> list[Completion]:
        eng, n = self.eng, len(self.samplers)
        prompt_len = len(eng.rows.tokens)
        logits = eng.logits(hidden)[0]
        first = allowed_ids(self.tok, self.healer, [])
        self.pending = [sampled_pick(self.monitor, self.tok, [], first, logits, s) for s in self.samplers]  # issue 35
        self.branch(logits)
        if n > 1:
            eng.rows.spread_row0(n)
        fed0: list[int] = []  # the tokens fed for variant 0 (row 0)
        step = 0
        while True:
            for i in range(n):
                if self.reasons[i] is None:
                    self.emit(i)
            if all(r is not None for r in self.reasons):
                break
            if self.stopped(prompt_len + step, cancel):
                break
            if self.reasons[0] is None:
                fed0.append(self.pending[0])
            self.decode_one(prompt_len + step)
            step += 1
        eng.rows.truncate(prompt_len)
        eng.rows.append(fed0)
        self.t.decode_tokens += sum(len(o) for o in self.outs)
        return self.completions()

    def run_known(self, hidden: np.ndarray, cancel: CancelToken | None, known: Known) -> list[Completion]:
        """The branches of a known item 1 (``Known``), one row each in KV rows 0..n-2 (row 0's KV of item 1
        kept aside meanwhile): each follows item 1's tokens to its first token of code, takes its
        alternative there (``branch_pick``: row i the i-th), then goes on greedily for ``branch_limit``
        tokens at most. Afterwards row 0 holds the prompt and item 1's tokens again."""
        eng, n, f = self.eng, len(self.samplers), known.first.token_ids
        prompt_len = len(eng.rows.tokens)
        self.base, self.branches, self.limit = 1, frozenset(range(n)), branch_limit(len(f))
        self.prov = []
        self.following = []  # (row 0 is not in this batch: the rows follow item 1's tokens below)
        if self.on_token is not None:
            self.on_token(0, known.first.text)
        code = next((k for k, tk in enumerate(f) if starts_code(token_text(self.tok, tk))), None)
        if code is None:  # no code to branch at: the branches would be item 1 again
            return [replace(known.first)]
        eng.rows.branch_rows(n + 1, len(known.held))
        logits = eng.logits(hidden)
        logits = np.broadcast_to(logits, (n, logits.shape[-1]))  # every row: the prompt's last position
        step = 0
        while True:
            if step <= code:  # following item 1 up to its first token of code, then the alternatives there
                self.pending = [f[step] if step < code else
                                branch_pick(self.tok, logits[i], allowed_ids(self.tok, self.healer, self.outs[i]),
                                            i + 1) for i in range(n)]
            for i in range(n):
                if self.reasons[i] is None:
                    self.emit(i)
            if all(r is not None for r in self.reasons):
                if not self.prov:
                    break
                step = self.check(step)  # (a row the full head sends back runs on)
                continue
            if self.stopped(prompt_len + step, cancel):
                break
            if step < code or not self.trimmed():
                logits = self.decode_one(prompt_len + step)
            else:
                self.decode_trimmed(prompt_len + step, step + 1)
            step += 1
            if len(self.prov) >= CHECK_EVERY * n:
                step = self.check(step)
        eng.rows.restore_row0(n + 1, known.held)
        self.t.decode_tokens += sum(len(o) for o in self.outs)
        first = replace(known.first)  # a copy: the engine stamps its outputs (variant, times)
        return [first] + self.completions()

    def stopped(self, pos: int, cancel: CancelToken | None) -> bool:
        """Every unfinished row ends here: a cancel or deadline, or no KV room for position ``pos``."""
        stop = interrupted(self.params, cancel)
        if stop is None and pos + 1 > self.eng.decoder.capacity:
            stop = "length"
        if stop is not None:
            self.reasons = [r or stop for r in self.reasons]
        return stop is not None

    def completions(self) -> list[Completion]:
        """The rows' outputs as they ended (a row still running at the end: "length")."""
        return [Completion(text=self.texts[i], token_ids=self.outs[i], finish_reason=self.reasons[i] or "length",
                           ttft_ms=self.ttft[i]) for i in range(len(self.outs))]

    def trimmed(self) -> bool:
        """Greedy picks from the trimmed head (checked later) for every running row this step?"""
        return self.eng.lazy_trimmed() and self.monitor is None and \
            all(allowed_ids(self.tok, self.healer, self.outs[i]) is None for i in range(len(self.outs)))

    def decode_trimmed(self, pos: int, index: int) -> None:
        """``decode_one`` for greedy rows with the trimmed head's picks, kept for ``check`` (output ``index``)."""
        ids = np.asarray([[p] for p in self.pending], dtype=np.int64)
        hid = self.eng.decoder.forward(ids, pos)[:, -1, :]
        self.t.forward_calls += 1
        picks, _ = greedy_pick(self.eng.decoder.heads, hid, False, None, self.eng.ctx_ids, self.eng.ctx_w)
        for i in range(len(self.pending)):
            if self.reasons[i] is None:
                self.pending[i] = int(picks[i])
                self.prov.append((index, i, hid[i], self.pending[i]))

    def check(self, step: int) -> int:
        """The full head's check of the trimmed head's picks, all at once: at the first output index where one
        differs, every row goes back there (the batch stays in step) with the full head's tokens; the step
        to go on from."""
        prov, self.prov = self.prov, []
        if not prov:
            return step
        best = np.argmax(self.eng.logits(np.stack([h for _, _, h, _ in prov])), axis=1)
        wrong = [k for k, p in enumerate(prov) if int(best[k]) != p[3]]
        if not wrong:
            return step
        j = min(prov[k][0] for k in wrong)
        fixed = {prov[k][1]: int(best[k]) for k in range(len(prov)) if prov[k][0] == j}
        for i, out in enumerate(self.outs):
            if i in fixed or len(out) > j:
                self.pending[i] = fixed.get(i, out[j] if len(out) > j else self.pending[i])
                self.outs[i], self.reasons[i] = out[:j], None
        return j

    def emit(self, i: int) -> None:
        """Row i's pending token joins its output (streamed), or ends it (``reasons[i]``)."""
        tk, out = self.pending[i], self.outs[i]
        if tk in self.eng.stop_ids:
            self.reasons[i] = "eos"
            return
        out.append(tk)
        if len(out) == 1:
            self.ttft[i] = (time.perf_counter() - self.t.started) * 1000
            if i + self.base == 0:
                self.t.ttft_ms = self.ttft[0]
        r, cut = stop_rule(finish_text(self.tok, self.pr, out), self.params, self.settle)
        self.texts[i] = cut
        if self.on_token is not None:
            self.on_token(i + self.base, cut)
        if self.limit is None and self.base == 0 and self.reasons[0] is not None:
            self.limit = branch_limit(len(self.outs[0]))
        if r is not None:
            self.reasons[i] = r
        elif len(out) >= self.params.max_tokens or (i in self.branches and self.limit is not None and
                                                    len(out) >= self.limit):
            self.reasons[i] = "length"

    def decode_one(self, pos: int) -> np.ndarray:
        """One forward over every row's pending token at position ``pos``; each running row samples its
        next pending token (under token healing's constraint while that is not done)."""
        ids = np.asarray([[p] for p in self.pending], dtype=np.int64)
        hid = self.eng.decoder.forward(ids, pos)
        self.t.forward_calls += 1
        lg = self.eng.logits(hid[:, -1, :])
        for i, sampler in enumerate(self.samplers):
            if self.reasons[i] is None:
                heal = allowed_ids(self.tok, self.healer, self.outs[i])
                self.pending[i] = sampled_pick(self.monitor, self.tok, self.outs[i], heal, lg[i], sampler)  # issue 35
        self.branch(lg[0])
        return lg

    def branch(self, logits0: np.ndarray) -> None:
        """The rows following row 0 write its token (not their own argmax: a batch row's numerics can break
        a near tie between whitespace tokens otherwise, and the row no longer follows); once row 0's pending
        token starts code, they take their alternatives there from row 0's logits (``logits0``; the same text
        so far): row i the i-th best distinct other token (the guidance monitor, when on, does not constrain
        a branch's first token)."""
        if not self.following:
            return
        if self.reasons[0] is not None:
            self.following = []
            return
        if not starts_code(token_text(self.tok, self.pending[0])):
            for i in self.following:
                self.pending[i] = self.pending[0]
            return
        for rank, i in enumerate(self.following, 1):
            allowed = allowed_ids(self.tok, self.healer, self.outs[i])
            self.pending[i] = branch_pick(self.tok, logits0, allowed, rank)
        self.following = []
