"""The greedy row: one greedy generation with prompt-lookup drafts, once its prompt is in row 0 of the KV
cache, in named steps (after gpt-fast), each a method of ``_GreedyRow``, whose fields are what the loop
carries between them: ``first`` (the first token, from the prompt's last hidden state), ``emit`` (the pending
token joins the output), ``draft`` (tokens to verify after it), ``decode_one`` (one forward over the pending
token and the draft, the accept rule), ``take`` (accepted draft tokens join the output) and ``rewind`` (the
full head re-checks the trimmed head's picks and decoding goes back to the first it disagrees with). The row
advances the KV rows through ``Host.rows`` (append, truncate) and keeps the draft statistics through
``Host.drafts``; the variant batch is engine/decoding/batch.py. With a ``monitor`` (engine/decoding/monitored.py)
a step where static analysis knows the valid names picks from the full head among them (no draft then), and
every pick, drafted or not, is checked for names starting inside its token.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from engine.decoding.monitored import Monitor, checked_pick, constrained_ids, masked_pick, raw_text
from engine.decoding.picks import Pick, greedy_pick, verify_picks
from engine.decoding.prompt import Healer, Prompt
from engine.decoding.sampling import ngram_match
from engine.decoding.stops import Settle, allowed_ids, doubts_of, finish_text, interrupted, stop_rule
from engine.types import CancelToken, Completion, Doubts, GenParams, Timings, TokenCallback

if TYPE_CHECKING:
    from engine.decoding.host import Host


def decode_greedy(eng: Host, pr: Prompt, hidden: np.ndarray, healer: Healer | None, params: GenParams,
                  t: Timings, cancel: CancelToken | None, on_token: TokenCallback | None,
                  settle: Settle | None = None, resume: list[int] | None = None,
                  monitor: Monitor | None = None) -> Completion:
    """One greedy row with drafts: ``resume`` (what a cut-off generation of this spot wrote) while the
    output agrees with it, else n-grams of the prompt and of earlier outputs. ``monitor``: names checked
    by static analysis (None: the model alone)."""
    row = _GreedyRow(eng, pr, healer, params, t, cancel, on_token, settle, resume)
    row.monitor = monitor
    return row.run(hidden)


class _GreedyRow:
    """One greedy generation's state between its steps."""

    __slots__ = ("eng", "tok", "heads", "pr", "healer", "params", "t", "cancel", "on_token", "settle",
                 "resume", "lazy", "base", "picks", "earlier", "out", "probs", "text", "pending", "monitor")

    def __init__(self, eng: Host, pr: Prompt, healer: Healer | None, params: GenParams, t: Timings,
                 cancel: CancelToken | None, on_token: TokenCallback | None, settle: Settle | None,
                 resume: list[int] | None) -> None:
        self.eng = eng
        self.tok = eng.tok
        self.heads = eng.decoder.heads
        self.pr, self.healer, self.params, self.t = pr, healer, params, t
        self.cancel, self.on_token, self.settle, self.resume = cancel, on_token, settle, resume
        self.lazy = eng.lazy_trimmed()
        self.base = len(eng.rows.tokens)  # the prompt's tokens in the KV cache; output token i sits at base + i
        # provisional picks of the trimmed head not yet re-checked by the full head
        self.picks: list[Pick] = []
        self.earlier = eng.drafts.newest_first()
        self.out: list[int] = []
        # output index -> the probability the model gave that token (the full head's once re-checked)
        self.probs: dict[int, float] = {}
        self.text = ""
        self.pending = 0  # chosen, not yet in the KV cache
        self.monitor: Monitor | None = None

    def run(self, hidden: np.ndarray) -> Completion:
        eng, fast, t = self.eng, self.eng.fast, self.t
        self.first(hidden)
        reason: str | None = None
        while True:
            reason = self.emit()
            if reason is not None:
                if reason != "cancelled" and self.rewind():
                    continue
                break
            # one forward: the pending token plus a draft copied from earlier context
            heal = allowed_ids(self.tok, self.healer, self.out)  # still healing: constrained, no draft
            guided = self.constrain(self.out, heal)  # a name the monitor knows: the next pick constrained
            allowed = heal if guided is None else guided
            draft, match = self.draft() if fast.speculative and heal is None else ([], 0)
            if len(eng.rows.tokens) + 1 + len(draft) > eng.decoder.capacity:
                if self.rewind():
                    continue
                reason = "length"
                break
            acc = self.decode_one(draft, match, allowed, guided is not None)
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
        eng.drafts.remember(out)
        return Completion(text=self.text, token_ids=out, finish_reason=reason or "length", ttft_ms=t.ttft_ms,
                          doubts=self.doubts(self.text))

    def first(self, hidden: np.ndarray) -> None:
        """The first token, picked from the prompt's last hidden state, becomes the pending one."""
        allowed = allowed_ids(self.tok, self.healer, [])
        guided = self.constrain([], allowed)
        if guided is not None:
            first, first_p = self.masked(hidden, guided, [])
        else:
            exact = allowed is not None or not self.lazy
            first, first_p = greedy_pick(self.heads, hidden, exact, allowed, self.eng.ctx_ids, self.eng.ctx_w,
                                          self.eng.decoder.head_rows)
        tok = int(first[0])
        exact = guided is not None or allowed is not None or not self.lazy
        if self.monitor is not None:
            tok, p = checked_pick(self.heads["full"], np.asarray(hidden).reshape(-1), self.monitor, "", tok,
                                  guided if guided is not None else allowed)
            if p is not None:
                first_p[0], exact = p, True
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
        r, cut = stop_rule(self.text, self.params, self.settle)
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
        room = min(eng.fast.max_draft, self.params.max_tokens - len(out),
                   eng.decoder.capacity - len(eng.rows.tokens) - 2)
        at = len(out) + 1
        if room > 0 and resume is not None and len(resume) > at and resume[:at] == out + [self.pending]:
            return resume[at: at + room], -1  # the same greedy path again: all of it
        if room <= 0:
            return [], 0
        draft, match = ngram_match(eng.rows.tokens + [self.pending], max_draft=room, earlier=self.earlier)
        if draft:
            draft = eng.drafts.sized(draft, match)
        return draft, match

    def decode_one(self, draft: list[int], match: int, allowed: np.ndarray | None, guided: bool = False) -> int:
        """One forward over the pending token and the draft: how many draft tokens stand. The pending
        token and those enter the KV cache; the pick after the last of them is the new pending token.
        ``guided``: ``allowed`` is the monitor's, for row 0 (the draft's rows go through ``guard``)."""
        eng, t, out, probs = self.eng, self.t, self.out, self.probs
        ids = [self.pending] + draft
        t0 = time.perf_counter()
        hid = eng.decoder.forward(np.asarray([ids], dtype=np.int64), len(eng.rows.tokens), step=True)[0]
        eng.drafts.observe_cost(len(ids), time.perf_counter() - t0)
        t.forward_calls += 1
        exact = allowed is not None or not self.lazy  # row 0's pick is final (else provisional)
        rest_exact = exact  # ... and the draft rows'
        if guided and allowed is not None:
            guesses, gp, exact, rest_exact = self.guided_picks(hid, allowed)
        else:
            guesses, gp = greedy_pick(self.heads, hid, exact, allowed, eng.ctx_ids, eng.ctx_w, eng.decoder.head_rows)
        for j in range(len(ids)):  # row j picked the token at output index len(out) + j
            probs[len(out) + j] = float(gp[j])
        # accept rule: draft[j] stands if the model's own greedy choice after ids[:j+1] equals it
        acc = 0
        while acc < len(draft) and int(guesses[acc]) == draft[acc]:
            acc += 1
        fixed = False  # the monitor chose row acc's token from the full head: not provisional
        if self.monitor is not None:
            acc, fix = self.guard(draft, guesses, hid, acc, allowed)
            if fix is not None:
                guesses[acc], probs[len(out) + acc], fixed = fix[0], fix[1], True
        t.draft_accepted += acc
        if draft and match >= 0:
            eng.drafts.accepted(match, acc, len(draft))
        eng.rows.append(ids[: 1 + acc], hid[: 1 + acc])  # each position's hidden state: a keystroke may end there
        self.pending = int(guesses[acc])
        # row j picked the token at output index len(out) + j (the draft's, then the pending one)
        self.picks.extend((len(out) + j, hid[j], int(guesses[j])) for j in range(acc + (0 if fixed else 1))
                          if not (exact if j == 0 else rest_exact))
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
            r, shown = stop_rule(self.text, params, settle)
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
        eng.rows.truncate(self.base + idx, row)
        if self.monitor is not None:  # the full head's pick, under the monitor like any other
            ids = self.constrain(self.out, None)
            if ids is not None and not bool(np.any(ids == right)):
                right = int(self.masked(row, ids, self.out)[0][0])
            right = checked_pick(self.heads["full"], row, self.monitor, raw_text(self.tok, self.out), right,
                                 ids)[0]
        self.pending = right
        self.text = stop_rule(finish_text(self.tok, self.pr, self.out), self.params, self.settle)[1] if self.out else ""
        if self.on_token is not None:
            self.on_token(0, self.text, self.doubts(self.text))
        return True

    # ---- the monitor (engine/decoding/monitored.py) ----
    def constrain(self, out: list[int], heal: np.ndarray | None) -> np.ndarray | None:
        """The ids the monitor allows after ``out`` (within healing's), or None: the model decides."""
        if self.monitor is None:
            return None
        return constrained_ids(self.monitor.allowed(raw_text(self.tok, out)), heal)

    def masked(self, row: np.ndarray, allowed: np.ndarray, out: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """The full head's best allowed token for one hidden row (as ``greedy_pick`` returns picks); a
        change of the model's choice is recorded with the monitor."""
        assert self.monitor is not None
        tok, p, free = masked_pick(self.heads["full"], np.asarray(row).reshape(-1), allowed)
        if tok != free:
            self.monitor.record(raw_text(self.tok, out), free, tok, "name")
        return np.asarray([tok], dtype=np.int64), np.asarray([p])

    def guided_picks(self, hid: np.ndarray, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool, bool]:
        """Picks for a step whose row 0 the monitor constrains: (picks, probabilities, whether row 0's pick
        is final, whether the draft rows' are). The trimmed head's row-0 pick stands provisionally when the
        monitor allows it (the full head's re-check applies the mask at a rewind), else the full head's
        best allowed token."""
        eng = self.eng
        if self.lazy:
            guesses, gp = greedy_pick(self.heads, hid, False, None, eng.ctx_ids, eng.ctx_w)
            if bool(np.any(allowed == guesses[0])):
                return guesses, gp, False, False
            g0, p0 = self.masked(hid[0], allowed, self.out)
            guesses[0], gp[0] = g0[0], p0[0]
            return guesses, gp, True, False
        guesses, gp = self.masked(hid[0], allowed, self.out)
        if len(hid) > 1:
            more, mp = greedy_pick(self.heads, hid[1:], True, None, eng.ctx_ids, eng.ctx_w)
            guesses, gp = np.concatenate([guesses, more]), np.concatenate([gp, mp])
        return guesses, gp, True, True

    def guard(self, draft: list[int], guesses: np.ndarray, hid: np.ndarray, acc: int,
              allowed: np.ndarray | None) -> tuple[int, tuple[int, float] | None]:
        """Rows 0..acc under the monitor: the first row where a name it knows starts (a drafted ``obj.``)
        or whose pick starts an invalid name inside its token cuts the draft there, and gets the monitor's
        pick: (rows that stand, (token, probability) for that row or None)."""
        assert self.monitor is not None
        full = self.heads["full"]
        for j in range(acc + 1):
            text = raw_text(self.tok, self.out + draft[:j])
            row_allowed = allowed if j == 0 else self.constrain(self.out + draft[:j], None)
            if j > 0 and row_allowed is not None:
                tok, p = self.masked(hid[j], row_allowed, self.out + draft[:j])
                tok0, p0 = int(tok[0]), float(p[0])
                tok1, p1 = checked_pick(full, hid[j], self.monitor, text, tok0, row_allowed)
                return j, (tok1, p0 if p1 is None else p1)
            g = int(guesses[j])
            tok1, p1 = checked_pick(full, hid[j], self.monitor, text, g, row_allowed)
            if p1 is not None:
                return j, (tok1, p1)
        return acc, None

    def doubts(self, shown: str) -> Doubts:
        return doubts_of(self.tok, self.pr, self.out, self.probs, len(shown))
