"""Generation once a prompt is in the Engine's KV cache (row 0): the greedy row with prompt-lookup drafts and
the variant batch, the LM-head picks they decode with, and the stop rules they share.

The greedy row is a few named steps (after gpt-fast), each a method of ``_GreedyRow``, whose fields are what
the loop carries between them: ``first`` (the first token, from the prompt's last hidden state), ``emit``
(the pending token joins the output), ``draft`` (tokens to verify after it), ``decode_one`` (one forward over
the pending token and the draft, the accept rule), ``take`` (accepted draft tokens join the output) and
``rewind`` (the full head re-checks the trimmed head's picks and decoding goes back to the first it
disagrees with). The functions here advance the engine's row 0 (``Engine.tokens``, its last hidden state);
the Engine owns the KV cache, the prompt and the tables the drafts are sized from.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from engine.decoding.prompt import Healer, HFTokenizer, Prompt, safe_decode
from engine.decoding.sampling import Sampler, choose_draft_len, ngram_match, pick_probs
from engine.text.budget import Budget, budget_for, stop_reached
from engine.text.statements import split_cursor
from engine.types import (
    DOUBT_KEEP,
    CancelToken,
    Completion,
    Doubts,
    GenParams,
    Timings,
    TokenCallback,
    stop_cut,
)

if TYPE_CHECKING:
    from engine.engine import Engine
    from engine.model.runtime import LazyHeads, LMHead

ACCEPT_PRIOR = 0.6  # draft acceptance assumed for an n-gram match length not seen yet

Pick = tuple[int, np.ndarray, int]  # a provisional pick: (output index, hidden row, token)


# ---- the greedy row -------------------------------------------------------------------------------
def decode_greedy(eng: Engine, pr: Prompt, hidden: np.ndarray, healer: Healer | None, params: GenParams,
                  t: Timings, cancel: CancelToken | None, on_token: TokenCallback | None,
                  settle: _Settle | None = None, resume: list[int] | None = None) -> Completion:
    """One greedy row with drafts: ``resume`` (what a cut-off generation of this spot wrote) while the
    output agrees with it, else n-grams of the prompt and of earlier outputs."""
    return _GreedyRow(eng, pr, healer, params, t, cancel, on_token, settle, resume).run(hidden)


class _GreedyRow:
    """One greedy generation's state between its steps."""

    __slots__ = ("eng", "tok", "heads", "pr", "healer", "params", "t", "cancel", "on_token", "settle",
                 "resume", "lazy", "base", "picks", "earlier", "out", "probs", "text", "pending")

    def __init__(self, eng: Engine, pr: Prompt, healer: Healer | None, params: GenParams, t: Timings,
                 cancel: CancelToken | None, on_token: TokenCallback | None, settle: _Settle | None,
                 resume: list[int] | None) -> None:
        self.eng = eng
        self.tok = eng.tok
        self.heads = eng.decoder.heads
        self.pr, self.healer, self.params, self.t = pr, healer, params, t
        self.cancel, self.on_token, self.settle, self.resume = cancel, on_token, settle, resume
        self.lazy = eng.lazy_trimmed()
        self.base = len(eng.tokens)  # the prompt's tokens in the KV cache; output token i sits at base + i
        # provisional picks of the trimmed head not yet re-checked by the full head
        self.picks: list[Pick] = []
        self.earlier = list(reversed(eng.earlier))  # newest first
        self.out: list[int] = []
        # output index -> the probability the model gave that token (the full head's once re-checked)
        self.probs: dict[int, float] = {}
        self.text = ""
        self.pending = 0  # chosen, not yet in the KV cache

    def run(self, hidden: np.ndarray) -> Completion:
        eng, fast, t = self.eng, self.eng.config.fast, self.t
        self.first(hidden)
        reason: str | None = None
        while True:
            reason = self.emit()
            if reason is not None:
                if reason != "cancelled" and self.rewind():
                    continue
                break
            # one forward: the pending token plus a draft copied from earlier context
            allowed = allowed_ids(self.tok, self.healer, self.out)  # still healing: constrained, no draft
            draft, match = self.draft() if fast.speculative and allowed is None else ([], 0)
            if len(eng.tokens) + 1 + len(draft) > eng.decoder.capacity:
                if self.rewind():
                    continue
                reason = "length"
                break
            acc = self.decode_one(draft, match, allowed)
            accepted = draft[:acc]
            reason, shown = self.take(accepted)
            if reason is not None:  # picks past the end do not count (an end token's own pick does)
                last = len(self.out) if reason == "eos" else len(self.out) - 1
                self.picks[:] = [pk for pk in self.picks if pk[0] <= last]
            # provisional picks are re-checked before a line is complete (what the server shows), at the
            # end, and in bounded batches; nothing unchecked is streamed past a line break
            if self.picks and (reason is not None or len(self.picks) >= fast.verify_rows
                               or b"\n" in self.tok.decode_bytes(accepted + [self.pending])):
                if self.rewind():
                    continue
            if shown is not None and self.on_token is not None:
                self.on_token(0, shown, self.doubts(shown))
            if reason is not None:
                break
        out = self.out
        t.decode_tokens += len(out)
        if len(out) >= 4 and (not eng.earlier or eng.earlier[-1] != out):
            eng.earlier.append(list(out))
        return Completion(text=self.text, token_ids=out, finish_reason=reason or "length", ttft_ms=t.ttft_ms,
                          doubts=self.doubts(self.text))

    def first(self, hidden: np.ndarray) -> None:
        """The first token, picked from the prompt's last hidden state, becomes the pending one."""
        allowed = allowed_ids(self.tok, self.healer, [])
        exact = allowed is not None or not self.lazy
        first, first_p = greedy_pick(self.heads, hidden, exact, allowed, self.eng.ctx_ids, self.eng.ctx_w)
        tok = int(first[0])
        if not exact:
            self.picks.append((0, np.asarray(hidden).reshape(-1), tok))
        self.probs[0] = float(first_p[0])
        self.pending = tok

    def emit(self) -> str | None:
        """The pending token joins the output (streamed), or ends it: why the generation ends, else None."""
        if self.pending in self.eng.stop_ids:
            return "eos"
        out = self.out
        out.append(self.pending)
        if len(out) == 1:
            self.t.ttft_ms = (time.perf_counter() - self.t.started) * 1000
        self.text = finish_text(self.tok, self.pr, out)
        r, cut = _stop(self.text, self.params, self.settle)
        if self.on_token is not None:
            self.on_token(0, cut, self.doubts(cut))
        if r is not None:
            self.text = cut
            return r
        if len(out) >= self.params.max_tokens:
            return "length"
        return interrupted(self.params, self.cancel)

    def draft(self) -> tuple[list[int], int]:
        """Tokens to verify after the pending one and the length of the n-gram match they come from (-1:
        the cut-off generation's path, ``resume``), sized by the running acceptance and forward costs."""
        eng, out, resume = self.eng, self.out, self.resume
        room = min(eng.config.fast.max_draft, self.params.max_tokens - len(out),
                   eng.decoder.capacity - len(eng.tokens) - 2)
        at = len(out) + 1
        if room > 0 and resume is not None and len(resume) > at and resume[:at] == out + [self.pending]:
            return resume[at: at + room], -1  # the same greedy path again: all of it
        if room <= 0:
            return [], 0
        draft, match = ngram_match(eng.tokens + [self.pending], max_draft=room, earlier=self.earlier)
        if draft:
            a = eng.accept_rate.get(match, ACCEPT_PRIOR)
            draft = draft[: choose_draft_len(eng.costs, a, len(draft))]
            if not draft:  # drift back toward the prior so a bad patch does not switch drafting off
                eng.accept_rate[match] = a + 0.05 * (ACCEPT_PRIOR - a)
        return draft, match

    def decode_one(self, draft: list[int], match: int, allowed: np.ndarray | None) -> int:
        """One forward over the pending token and the draft: how many draft tokens stand. The pending
        token and those enter the KV cache; the pick after the last of them is the new pending token."""
        eng, t, out, probs = self.eng, self.t, self.out, self.probs
        ids = [self.pending] + draft
        t0 = time.perf_counter()
        hid = eng.decoder.forward(np.asarray([ids], dtype=np.int64), len(eng.tokens))[0]
        eng.observe_cost(len(ids), time.perf_counter() - t0)
        t.forward_calls += 1
        exact = allowed is not None or not self.lazy
        guesses, gp = greedy_pick(self.heads, hid, exact, allowed, eng.ctx_ids, eng.ctx_w)
        for j in range(len(ids)):  # row j picked the token at output index len(out) + j
            probs[len(out) + j] = float(gp[j])
        # accept rule: draft[j] stands if the model's own greedy choice after ids[:j+1] equals it
        acc = 0
        while acc < len(draft) and int(guesses[acc]) == draft[acc]:
            acc += 1
        t.draft_accepted += acc
        if draft and match >= 0:  # running per-token acceptance: P(accept next | accepted so far)
            hit = acc / len(draft) if acc < len(draft) else 1.0
            eng.accept_rate[match] = 0.8 * eng.accept_rate.get(match, ACCEPT_PRIOR) + 0.2 * hit
        eng.tokens = eng.tokens + ids[: 1 + acc]
        eng.last_hidden = hid[acc]
        self.pending = int(guesses[acc])
        if not exact:
            # row j picked the token at output index len(out) + j (the draft's, then the pending one)
            self.picks.extend((len(out) + j, hid[j], int(guesses[j])) for j in range(acc + 1))
        return acc

    def take(self, accepted: list[int]) -> tuple[str | None, str | None]:
        """The accepted draft tokens join the output one at a time (stop rules apply to each): why the
        generation ends (else None) and the text to stream (None: no token joined)."""
        out, params, settle = self.out, self.params, self.settle
        shown: str | None = None
        for d in accepted:
            if d in self.eng.stop_ids:
                return "eos", shown
            out.append(d)
            self.text = finish_text(self.tok, self.pr, out)
            r, shown = _stop(self.text, params, settle)
            if r is not None:
                self.text = shown
                return r, shown
            if len(out) >= params.max_tokens:
                return "length", shown
        return None, shown

    def rewind(self) -> bool:
        """Re-check the provisional picks; on a disagreement go back to it (True)."""
        eng, t = self.eng, self.t
        bad = verify_picks(self.heads["full"], self.picks, self.probs)
        t.verified_rows += len(self.picks)
        self.picks.clear()
        if bad is None:
            return False
        idx, right, row = bad
        t.rewinds += 1
        self.out = self.out[:idx]
        for k in [k for k in self.probs if k > idx]:
            del self.probs[k]
        eng.tokens = eng.tokens[:self.base + idx]
        eng.last_hidden = row
        self.pending = right
        self.text = _stop(finish_text(self.tok, self.pr, self.out), self.params, self.settle)[1] if self.out else ""
        if self.on_token is not None:
            self.on_token(0, self.text, self.doubts(self.text))
        return True

    def doubts(self, shown: str) -> Doubts:
        return doubts_of(self.tok, self.pr, self.out, self.probs, len(shown))


# ---- the variant batch ----------------------------------------------------------------------------
def decode_batch(eng: Engine, pr: Prompt, hidden: np.ndarray, healer: Healer | None,
                 samplers: list[Sampler], params: GenParams, t: Timings, cancel: CancelToken | None,
                 on_token: TokenCallback | None, settle: _Settle | None = None) -> list[Completion]:
    """n variants as one batch sharing the prompt's KV (row i: variant i), one token each per forward."""
    tok = eng.tok
    n = len(samplers)
    prompt_len = len(eng.tokens)
    logits = eng.logits(hidden)[0]
    first = allowed_ids(tok, healer, [])
    pending = [s(logits, first) for s in samplers]
    outs: list[list[int]] = [[] for _ in range(n)]
    texts = [""] * n
    reasons: list[str | None] = [None] * n
    ttft = [0.0] * n
    if n > 1:
        eng.spread_row0(n)
    fed0: list[int] = []
    step = 0
    while True:
        for i in range(n):
            if reasons[i] is not None:
                continue
            tk = pending[i]
            if tk in eng.stop_ids:
                reasons[i] = "eos"
                continue
            outs[i].append(tk)
            if len(outs[i]) == 1:
                ttft[i] = (time.perf_counter() - t.started) * 1000
                if i == 0:
                    t.ttft_ms = ttft[0]
            text = finish_text(tok, pr, outs[i])
            r, cut = _stop(text, params, settle)
            texts[i] = cut
            if on_token is not None:
                on_token(i, cut)
            if r is not None:
                reasons[i] = r
            elif len(outs[i]) >= params.max_tokens:
                reasons[i] = "length"
        if all(r is not None for r in reasons):
            break
        stop = interrupted(params, cancel)
        if stop:
            reasons = [r or stop for r in reasons]
            break
        if prompt_len + step + 1 > eng.decoder.capacity:
            reasons = [r or "length" for r in reasons]
            break
        ids = np.asarray([[pending[i]] for i in range(n)], dtype=np.int64)
        hid = eng.decoder.forward(ids, prompt_len + step)
        t.forward_calls += 1
        if reasons[0] is None:
            fed0.append(pending[0])
        step += 1
        lg = eng.logits(hid[:, -1, :])
        for i in range(n):
            if reasons[i] is None:
                pending[i] = samplers[i](lg[i], allowed_ids(tok, healer, outs[i]))
    # row 0 holds the prompt plus the tokens fed for variant 0
    eng.tokens = eng.tokens[:prompt_len] + fed0
    eng.last_hidden = None
    t.decode_tokens += sum(len(o) for o in outs)
    return [Completion(text=texts[i], token_ids=outs[i], finish_reason=reasons[i] or "length", ttft_ms=ttft[i])
            for i in range(n)]


# ---- LM-head picks --------------------------------------------------------------------------------
def greedy_pick(heads: LazyHeads, hidden: np.ndarray, exact: bool, allowed: np.ndarray | None = None,
                ctx_ids: np.ndarray | None = None, ctx_w: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """Greedy token ids [rows] (``allowed`` constrains the first row) and the probability the model gives
    each pick: argmax over the full head when ``exact``, else the trimmed head's picks from its own columns
    and the prompt's rows (``ctx_ids``, their full-head rows ``ctx_w``), without a vocabulary-sized row per
    position (their probabilities are then over those columns: a little high; the full head's re-check
    replaces them)."""
    h2 = hidden.reshape(-1, hidden.shape[-1])
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


# ---- text, stops, doubts ----------------------------------------------------------------------------
def finish_text(tok: HFTokenizer, pr: Prompt, ids: list[int]) -> str:
    """The text of generated ids, without the bytes token healing re-typed."""
    data = tok.decode_bytes(ids)
    if pr.heal:
        if data.startswith(pr.heal):
            data = data[len(pr.heal):]
        elif pr.heal.startswith(data):  # stopped while still re-typing the healed bytes
            data = b""
    return safe_decode(data)


def interrupted(params: GenParams, cancel: CancelToken | None) -> str | None:
    if cancel is not None and cancel.cancelled:
        return "cancelled"
    if params.deadline is not None and time.monotonic() >= params.deadline:
        return "deadline"
    return None


def allowed_ids(tok: HFTokenizer, healer: Healer | None, out: list[int]) -> np.ndarray | None:
    """Token ids the next token must be one of while token healing is not done (None: any)."""
    if healer is None:
        return None
    ids = healer.allowed(tok.decode_bytes(out))
    return np.asarray(ids, dtype=np.int64) if ids else None


def doubts_of(tok: HFTokenizer, pr: Prompt, out: list[int], probs: dict[int, float], shown: int) -> Doubts:
    """(offset, probability) of each token in ``out`` the model chose with probability below
    ``DOUBT_KEEP``: the offset is where the token starts in the text (its first ``shown`` characters)."""
    found: list[tuple[int, float]] = []
    for i in range(len(out)):
        p = probs.get(i)
        if p is None or p >= DOUBT_KEEP:
            continue
        at = len(finish_text(tok, pr, out[:i])) if i else 0
        if at >= shown:
            break
        if not found or found[-1][0] != at:  # a token inside a character keeps the first
            found.append((at, round(p, 4)))
    return tuple(found)


@dataclass(frozen=True)
class _Settle:
    """When a block's suggestion at the cursor is settled: the text has gone past what post-processing
    shows for ``budget`` (a line after the statement or below the body has started)."""

    line_prefix: str
    budget: Budget
    language: str | None


def _budgeted(prefix: str, suffix: str, params: GenParams) -> tuple[GenParams, _Settle | None]:
    """The parameters to generate with and the settled rule for the cursor. ``auto_budget``: the budget
    the context asks for (postprocess.budget_for) replaces max_tokens / max_lines. A generation of more
    than two lines (a block) stops each row once its suggestion is settled, whatever the budget's source:
    one or two lines (a single line, its look-ahead line) stop on their line count already, and without a
    line limit nothing is cut."""
    line_prefix, _ = split_cursor(prefix, suffix)
    shown = params.max_lines - 1 if params.max_lines is not None and params.max_lines > 2 else 8
    budget = budget_for(prefix, suffix, params.language, max_lines=shown)
    if params.auto_budget:
        # multi: +1 line, a block opened at the cursor starts with a line break
        lines = budget.max_lines + (1 if budget.mode == "multi" else 0)
        params = replace(params, max_tokens=budget.max_tokens, max_lines=lines)
    # a caller that sets no line limit (a raw engine call, a reference comparison) gets plain generation
    if budget.kind == "line" or params.max_lines is None or params.max_lines <= 2:
        return params, None
    return params, _Settle(line_prefix, budget, params.language)


def _stop(text: str, params: GenParams, settle: _Settle | None) -> tuple[str | None, str]:
    """stop_cut, and a settled block (``_Settle``) stops with its complete lines ("stop")."""
    reason, cut = stop_cut(text, params)
    if reason is None and settle is not None and "\n" in cut and \
            stop_reached(cut, settle.line_prefix, settle.budget):
        return "stop", cut[: cut.rfind("\n")]
    return reason, cut


def _dedupe(outs: list[Completion]) -> list[Completion]:
    seen: set[str] = set()
    res = []
    for c in outs:
        key = c.text.rstrip()
        if key in seen:
            continue
        seen.add(key)
        res.append(c)
    return res
