"""The engine facade: load a model directory, keep its KV cache across calls, generate completions.

One object owns one model and its KV cache; it is not thread-safe (one worker thread calls it).

Steps, each small (after gpt-fast): ``_prepare`` picks the prompt window and the KV row that serves it
best (row 0, or a prompt parked in a spare row); ``_sync`` brings the KV cache to the prompt (the prefill),
reusing the longest shared token prefix and returning the last position's hidden state; ``complete``
then decodes with engine/decoding/: a greedy row with prompt-lookup speculation (greedy.py), or n variants
as one batch sharing the prompt's KV (batch.py). What the KV rows hold is ``rows`` (engine/model/kv_cache.py),
where drafts come from ``drafts`` (engine/decoding/drafts.py); decoding changes both only through their
named operations. Where the model comes from and the settings: engine/config.py.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from engine.config import EngineConfig, ModelNotBuilt, resolve_model_dir
from engine.decoding.batch import Firsts, Known, decode_batch
from engine.decoding.drafts import Drafts, measure_costs
from engine.decoding.fast import FastPaths
from engine.decoding.greedy import decode_greedy
from engine.decoding.layout import PromptBlock
from engine.decoding.prompt import Fim, Healer, Prompt, build_prompt, choose_anchor
from engine.decoding.sampling import Sampler
from engine.decoding.stops import budgeted, dedupe
from engine.decoding.tokenizer import HFTokenizer
from engine.guidance.service import Guidance
from engine.model.kv_cache import Anchor, KVRows, common_prefix
from engine.model.manifest import Manifest, load_manifest
from engine.model.memory import check_fits, release_free_heap
from engine.model.runtime import OnnxDecoder
from engine.text.window import clip_window, from_line_start, line_start, sticky_cut
from engine.types import CancelToken, Completion, GenParams, Rate, Timings, TokenCallback

log = logging.getLogger("flint.engine")

# characters the quick window may grow by as the user types before its start moves (and its KV is re-run),
# and how much of its first lines identifies that start
QUICK_SLACK, QUICK_HEAD_CHARS = 512, 160


def _load_tokenizer(path: Path) -> HFTokenizer:
    (t := HFTokenizer(str(path))).prefix_index  # noqa: B018 - builds and caches the token byte table too
    return t


class Engine:
    def __init__(self, model_dir: Path, config: EngineConfig | None = None) -> None:
        t0 = time.perf_counter()
        self.config = config or EngineConfig()
        self.model_dir = Path(model_dir)
        m = load_manifest(self.model_dir)
        if m is None:
            raise ModelNotBuilt(f"{model_dir} has no flint.json")
        self.manifest: Manifest = m
        self.fim = Fim(**m.fim) if m.fim else None
        self.stop_ids = set(m.stop_token_ids) | set(m.eos_token_ids)
        self.decoder, self.tok = self._load_model()
        self.rows = KVRows(self.decoder.kv)
        self.drafts = Drafts(self.config.fast.earlier_drafts)
        self.firsts = Firsts()  # the last settled greedy item: Pick Variant's branches follow it
        self._quick_head: str | None = None  # the first characters of the last quick window (its start)
        # the prompt's tokens the trimmed head lacks, and their rows of the full head
        self.ctx_ids: np.ndarray | None = None
        self.ctx_w: np.ndarray | None = None
        self.block = PromptBlock(self.config.context_layout)  # the repository context in front of every prompt
        self.last_context: tuple[str, ...] = ()  # the block's labels if the last prompt run carried it
        self.guidance: Guidance | None = None  # the monitor (enable_guidance; built on first guided request)
        self.prefill_rate = Rate()  # prompt tokens a second, as this machine runs them
        release_free_heap()  # what loading freed (the tokenizer's parse, the sessions' graphs) leaves the RSS
        self.load_s = time.perf_counter() - t0
        self.warm_s = 0.0

    def _load_model(self) -> tuple[OnnxDecoder, HFTokenizer]:
        """The decoder (its onnxruntime sessions) and the tokenizer. The tokenizer (parsing a large JSON file)
        loads on a second thread while onnxruntime builds its sessions, with the tables the first completion
        needs (token bytes, the healing prefix index), so the cold start pays the longer of the two, not both
        (docs/benchmarks/engine.md, session 5)."""
        path = self.model_dir / "tokenizer.json"
        cfg = self.config
        check_fits(self.model_dir, self.manifest, cfg.capacity + cfg.context_tokens, cfg.batch_max)
        tok: list[HFTokenizer] = []
        loader = threading.Thread(target=lambda: tok.append(_load_tokenizer(path)), name="flint-tokenizer",
                                  daemon=True)
        loader.start()
        try:
            decoder = OnnxDecoder(self.model_dir, self.manifest, threads=cfg.threads,
                                  capacity=cfg.capacity + cfg.context_tokens, batch_max=cfg.batch_max,
                                  prefetch=("full", "code") if cfg.fast.trimmed_head else ("full",),
                                  step_session=cfg.step_session)
        finally:
            loader.join()
        if not tok:
            raise ModelNotBuilt(f"{path} could not be loaded")
        return decoder, tok[0]

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def load(cls, model: str | Path | None = None, threads: int | None = None, warm: bool = True,
             config: EngineConfig | None = None) -> Engine:
        cfg = config or EngineConfig()
        if threads:
            cfg.threads = threads
        eng = cls(resolve_model_dir(model), cfg)
        if warm:
            eng.warmup()
        return eng

    @property
    def model_id(self) -> str:
        return self.manifest.model_id

    @property
    def fast(self) -> FastPaths:
        return self.config.fast

    def warmup(self) -> None:
        """Run each path once, briefly (prefill, decode, draft verify, variant batch: more text and tokens only
        ran the same shapes again, in the cold start) before the first real request."""
        t0 = time.perf_counter()
        text = "import os\nimport sys\n\n\ndef main(argv):\n    for arg in argv:\n        print(arg)\n"
        self.complete(text, "\n", GenParams(max_tokens=2))
        self.complete(text + "\n# x", "\n", GenParams(max_tokens=2, n=min(3, self.config.batch_max)))
        self._measure_costs()
        self.reset()
        self.warm_s = time.perf_counter() - t0

    def _measure_costs(self) -> None:
        """Time one forward over m tokens for the draft sizes the speculation may choose."""
        past = max(1, len(self.rows.tokens) - 16)
        costs = self.drafts.costs = measure_costs(self.decoder.forward, past, sorted({1, 2, 3, 5, self.config.fast.max_draft + 1}))
        log.info("forward cost per token count (ms): %s", {k: round(v * 1000, 1) for k, v in costs.items()})
        self.rows.truncate(min(past, len(self.rows.tokens)))

    def reset(self) -> None:
        self.rows.reset()
        self._quick_head = None

    # ---- the monitor (it asks about the cursor's name at once: jedi works while the prompt is prefilled) ----
    def enable_guidance(self, analyser: Any = None, wait: bool = False) -> Guidance:
        """The monitor's parts (engine/guidance/service.py); requests with ``GenParams.guidance`` use them."""
        if self.guidance is None:
            self.guidance = Guidance(self.tok, self.manifest.vocab_size, analyser,
                                     budget_s=self.config.guidance_budget_s, hard_only=not self.config.guidance_soft)
        if wait:
            self.guidance.wait()
        return self.guidance

    # ---- prompt -> KV ---------------------------------------------------------------------------
    def build(self, prefix: str, suffix: str, heal: bool = True, max_new: int = 64,
              previous: Anchor | None = None, context: bool = True) -> Prompt:
        """The prompt for a cursor. FIM models: the text typed since an anchor goes after the middle token;
        ``previous`` is the anchor the KV cache holds (kept while the new text extends it), and the anchor
        used is returned in ``Prompt.anchor``. The context block (``set_context``) goes in front of the file
        text unless ``context`` is False; a window cut keeps it (``Prompt.head``) and drops the oldest file
        text."""
        prefix, suffix = clip_window(prefix, suffix, self.config.max_prefix_chars, self.config.max_suffix_chars)
        bos = self.manifest.bos_token_id
        anchor = None
        if self.fim is not None and self.config.fast.anchored_fim:
            anchor, suffix = choose_anchor(prefix, suffix, previous, self.config.fast.max_middle_chars,
                                           self.config.fast.fresh_middle_chars)
        pr = build_prompt(self.tok, prefix, suffix, self.fim, bos_id=bos, heal=heal, anchor=anchor,
                          context=self.block.ids if context else (), layout=self.block.layout)
        if anchor is not None:
            pr.anchor = (prefix[:anchor], suffix)
        limit = self.decoder.capacity - max_new - 16
        if len(pr.ids) > limit:  # drop the oldest prefix tokens (after BOS, FIM-prefix and the context block)
            excess = len(pr.ids) - limit
            pr.ids = pr.ids[:pr.head] + pr.ids[pr.head + excess:]
        return pr

    # ---- repository context -----------------------------------------------------------------------
    def set_context(self, block: Any) -> bool:
        """Put a repository context block (engine.context.block.ContextBlock, or None for none) in front of
        every prompt from now on, laid out as ``config.context_layout`` says. Only swaps the ids: the next
        prefill / completion recomputes the KV from where they differ (a block that keeps its first chunks
        keeps their KV); the file window keeps at least half the KV. Returns whether it changed."""
        return self.block.set(self.tok, block, self.config.context_layout, self.decoder.capacity // 2)

    @property
    def context_digest(self) -> str:
        """The identity of the context block in front of prompts and of its layout ("" when none)."""
        return self.block.digest

    @property
    def context_labels(self) -> tuple[str, ...]:
        """What the block holds (path:line (source) per chunk), for the status."""
        return self.block.labels

    @property
    def context_tokens(self) -> int:
        return len(self.block.ids)

    def _holds_block(self, ids: list[int]) -> bool:
        return self.block.starts(ids, self.manifest.bos_token_id is not None, self.fim is not None)

    # ---- which window, which row ---------------------------------------------------------------------
    def _prepare(self, prefix: str, suffix: str, *, heal: bool, max_new: int, quick_ok: bool) -> tuple[Prompt, bool]:
        """The prompt to run and whether it is the quick window. Tries the full window against row 0 and
        every parked row (each with its own anchor); when even the best needs more than
        ``quick_above_tokens`` of prefill, the quick window (the text nearest the cursor) if it needs
        fewer. The row that serves it best becomes row 0; a row 0 it would overwrite is parked."""
        best: tuple[int, int, Prompt, bool] | None = None  # (new tokens, row, prompt, quick)
        for new, row, pr in self._full_windows(prefix, suffix, heal=heal, max_new=max_new):
            if best is None or new < best[0]:
                best = (new, row, pr, False)
            if new <= self.config.quick_above_tokens:
                break
        assert best is not None
        if quick_ok and best[0] > self.config.quick_above_tokens:
            best = self._quick(prefix, suffix, heal=heal, max_new=max_new, best=best)
        _, row, pr, _ = best
        self.rows.serve_from(row, pr.ids)
        return pr, best[3]

    def _full_windows(self, prefix: str, suffix: str, *, heal: bool = True, max_new: int = 64
                      ) -> Iterator[tuple[int, int, Prompt]]:
        """The full window's prompt against row 0 and every parked row (each with its own anchor): (the tokens
        it would run there, the row, the prompt). Changes nothing."""
        for row, anchor, cached in self.rows.slots():
            pr = self.build(prefix, suffix, heal=heal, max_new=max_new, previous=anchor)
            yield len(pr.ids) - common_prefix(cached, pr.ids), row, pr

    def _quick(self, prefix: str, suffix: str, *, heal: bool, max_new: int,
               best: tuple[int, int, Prompt, bool]) -> tuple[int, int, Prompt, bool]:
        """The quick window in the row it needs the least prefill in, if that is less than ``best``'s (the
        full window's). Its start stays while the user types (its KV is reused)."""
        cfg = self.config
        slots = self.rows.slots()
        cut = sticky_cut(prefix, min(cfg.quick_prefix_chars, cfg.max_prefix_chars), QUICK_SLACK, self._quick_head,
                         reach=min(cfg.quick_reach_chars, cfg.max_prefix_chars))
        qp, qs = clip_window(prefix[cut:], suffix, len(prefix) - cut, min(cfg.quick_suffix_chars, cfg.max_suffix_chars))
        # the quick window carries the context block only where a row already holds its KV: a cold spot
        # must not wait for the block's prefill (idle time does that)
        with_block = any(self._holds_block(cached) for _, _, cached in slots)
        if (len(qp), len(qs)) != (len(prefix), len(suffix)) or not with_block:
            for row, anchor, cached in slots:
                pr = self.build(qp, qs, heal=heal, max_new=max_new, previous=anchor, context=with_block)
                new = len(pr.ids) - common_prefix(cached, pr.ids)
                if new < best[0]:
                    best = (new, row, pr, True)
        if best[3]:
            self._quick_head = qp[:QUICK_HEAD_CHARS]
        return best

    # ---- prefill --------------------------------------------------------------------------------------
    def _sync(self, ids: list[int], t: Timings, cancel: CancelToken | None = None,
              chunk: int | None = None) -> np.ndarray | None:
        """Make row 0's KV hold ``ids``; return the hidden state at its last position."""
        rows = self.rows
        L = rows.reusable(ids)
        t.prompt_tokens = len(ids)
        t.context = self.block.labels if self.block.ids and self._holds_block(ids) else ()
        kept = rows.hidden_after(L) if L == len(ids) else None
        if kept is not None:  # the prompt ends where a forward left its hidden state (a keystroke off the text
            # decoding wrote there): nothing runs
            rows.truncate(L)  # (the dict holds kept at L already)
            t.reused_tokens = L
            self.last_context = t.context
            return kept
        L = min(L, len(ids) - 1)  # at least one token runs, to produce the hidden state
        t.reused_tokens = L
        rows.truncate(L)
        h = None
        chunk = chunk or self.config.prefill_chunk
        pos, t0 = L, time.perf_counter()
        while pos < len(ids):
            if cancel is not None and cancel.cancelled and pos > L:
                self.prefill_rate.add(pos - L, time.perf_counter() - t0)
                return None  # the KV cache stays valid for ids[:pos]
            part = ids[pos:pos + chunk]
            out = self.decoder.forward(np.asarray([part], dtype=np.int64), pos)
            t.forward_calls += 1
            t.ran_tokens += len(part)
            pos += len(part)
            h = out[0, -1]
            rows.append(part, h if pos == len(ids) else None)  # the hidden state is kept for the whole prompt
        assert h is not None
        self.prefill_rate.add(pos - L, time.perf_counter() - t0)
        self.last_context = t.context  # the whole prompt is in the KV now, the block's chunks with it
        return h

    def prefill(self, prefix: str, suffix: str = "", cancel: CancelToken | None = None) -> Timings | None:
        """Warm the KV cache for a prompt's full window without generating (idle time, in small chunks:
        an interrupted warm-up keeps what it computed, parked while the user types, resumed next time).
        None when a row holds it but for a tail (``warm_slack``) the next keystroke runs anyway."""
        t, cfg = Timings(), self.config
        prefix = line_start(prefix, suffix)[0]  # the prompt complete() runs there
        pr, _ = self._prepare(prefix, suffix, heal=True, max_new=64, quick_ok=False)
        if self.rows.holds(pr.ids, pr.anchor, min(cfg.quick_above_tokens, cfg.warm_slack * len(pr.ids))):
            return None
        self.rows.anchor = pr.anchor
        self._sync(pr.ids, t, cancel, chunk=self.config.warm_chunk)
        t.total_ms = (time.perf_counter() - t.started) * 1000
        return t

    def prefill_seconds(self, prefix: str, suffix: str = "") -> float | None:
        """How long the full window's prompt pass would take here (the tokens no row holds, at the measured
        rate; None before a pass was measured). Changes nothing: idle work that cannot finish is not begun."""
        rate = self.prefill_rate.per_s
        if rate is None:
            return None
        prefix = line_start(prefix, suffix)[0]  # the prompt complete() runs there
        return min(new for new, _, _ in self._full_windows(prefix, suffix)) / rate

    # ---- logits ---------------------------------------------------------------------------------
    def _set_context_rows(self, prompt_ids: list[int]) -> None:
        """Identifiers come from the user's own code: the prompt's tokens that the trimmed head lacks get
        their logits from the full head's own weight rows, a few hundred rows computed in numpy."""
        self.ctx_ids = None
        self.ctx_w = None
        if not self.config.fast.trimmed_head:
            return
        code = self.decoder.heads.get("code")
        if code is None or code.ids is None:
            return
        ids = np.setdiff1d(np.unique(np.asarray(prompt_ids, dtype=np.int64)), code.ids, assume_unique=True)
        ids = ids[ids < self.manifest.vocab_size]
        if ids.size:
            rows = self.decoder.head_rows(ids)  # [k, H] float32
            if rows is not None:
                self.ctx_ids, self.ctx_w = ids, rows

    def lazy_trimmed(self) -> bool:
        return self.config.fast.trimmed_head and "code" in self.decoder.heads

    def logits(self, hidden: np.ndarray) -> np.ndarray:
        """Logits [rows, V] from the full head (sampling needs the whole distribution)."""
        return self.decoder.heads["full"](hidden.reshape(-1, hidden.shape[-1]))

    # ---- generation -----------------------------------------------------------------------------
    def complete(self, prefix: str, suffix: str = "", params: GenParams | None = None,
                 cancel: CancelToken | None = None, on_token: TokenCallback | None = None
                 ) -> tuple[list[Completion], Timings]:
        # a line of whitespace only is written from its start
        return from_line_start(lambda p, seen: self._complete(p, suffix, params, cancel, seen, prefix), prefix, suffix,
                               on_token)

    def _complete(self, prefix: str, suffix: str, params: GenParams | None, cancel: CancelToken | None,
                  on_token: TokenCallback | None, cursor: str) -> tuple[list[Completion], Timings]:
        params, t, known = params or GenParams(), Timings(), self.firsts.take(self.rows.tokens)
        pr, quick = self._prepare(prefix, suffix, heal=params.token_healing, max_new=params.max_tokens,
                                  quick_ok=params.quick_start)
        t.window = "quick" if quick else "full"
        healer = Healer(self.tok.prefix_index, pr.heal) if pr.heal else None
        if cancel is not None and cancel.cancelled:
            return [Completion("", [], "cancelled")], t
        self.rows.anchor = pr.anchor
        guide = self.enable_guidance().for_request(prefix, suffix, pr.heal, params) if params.guidance else None
        if known is not None and known.serves(pr.ids, self.rows.tokens, params, self.config.batch_max) \
                and self.rows.hidden_after(len(pr.ids)) is not None:
            # item 1's prompt again: its last position is not run again (in another shape: other last bits);
            # _sync returns the hidden state row 0 kept there
            self.rows.truncate(len(pr.ids))
        else:
            known = None
        hidden = self._sync(pr.ids, t, cancel)
        if hidden is None:
            return [Completion("", [], "cancelled")], t
        self._set_context_rows(pr.ids)
        t.prefill_ms = (time.perf_counter() - t.started) * 1000
        outs = self._decode(prefix, suffix, pr, hidden, healer, params, t, cancel, on_token, guide, known, cursor)
        t.guidance = self.guidance.finished(guide) if guide is not None and self.guidance else None
        t.total_ms = (time.perf_counter() - t.started) * 1000
        for i, c in enumerate(outs):
            c.variant, c.total_ms = i, t.total_ms
        return dedupe(outs), t

    def _decode(self, prefix: str, suffix: str, pr: Prompt, hidden: np.ndarray, healer: Healer | None,
                params: GenParams, t: Timings, cancel: CancelToken | None, on_token: TokenCallback | None,
                guide: Any = None, known: Known | None = None, cursor: str | None = None) -> list[Completion]:
        """Decode from the prompt in row 0: one greedy row (drafting from what a generation cut off at this spot
        wrote, keeping what it writes: cut off, or settled), or the variant batch (after ``known``: branches)."""
        n = max(1, min(params.n, self.config.batch_max))
        # the budget is the cursor's (``cursor``: before a line start's indentation), the block read from the prompt's
        params, settle = budgeted(cursor or prefix, suffix, params)
        if settle is not None and cursor not in (None, prefix):
            settle = replace(settle, line_prefix="")  # the prompt ends at the line start
        samplers = [Sampler(params.variant_temperature if i else params.temperature, params.top_k, params.top_p,
                            params.seed + i) for i in range(n)]
        if not (n == 1 and samplers[0].greedy):
            return decode_batch(self, pr, hidden, healer, samplers, params, t, cancel, on_token, settle, guide,
                                known)
        spot = (prefix, suffix)
        out = decode_greedy(self, pr, hidden, healer, params, t, cancel, on_token, settle,
                            resume=self.drafts.resume(spot), monitor=guide)
        self.firsts.keep(pr.ids, out, self.rows.tokens)
        if out.finish_reason in ("cancelled", "deadline") and len(out.token_ids) >= 4:
            self.drafts.keep_cut(spot, out.token_ids)
        return [out]
