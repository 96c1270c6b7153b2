"""The engine facade: load a model directory, keep its KV cache across calls, generate completions.

One object owns one model and its KV cache; it is not thread-safe (one worker thread calls it).

Steps, each small (after gpt-fast): ``_sync`` brings the KV cache to a prompt, reusing the longest
shared token prefix and returning the last position's hidden state; ``_logits`` runs the LM head on
just the rows that need it; ``_decode_greedy`` runs the greedy loop with prompt-lookup speculation;
``_decode_batch`` runs n variants as one batch sharing the prompt's KV; ``complete`` drives them.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import paths
from .manifest import Manifest, load_manifest
from .model import OnnxDecoder, default_threads
from .presets import DEFAULT_MODEL, PRESETS, precision_preference
from .prompt import (
    FRESH_MIDDLE_CHARS,
    MAX_MIDDLE_CHARS,
    Fim,
    Healer,
    HFTokenizer,
    Prompt,
    build_prompt,
    choose_anchor,
    clip_window,
    comment_ids,
    context_ids,
    safe_decode,
    sticky_cut,
)
from .sampling import Sampler, choose_draft_len, ngram_match, pick_probs
from .types import DOUBT_KEEP, CancelToken, Completion, Doubts, GenParams, Timings, TokenCallback, stop_cut

log = logging.getLogger("flint.engine")

ACCEPT_PRIOR = 0.6  # draft acceptance assumed for an n-gram match length not seen yet
# row 0 about to lose at least this many computed positions: its KV is parked in a spare row first (the
# quick window's while the full one warms, the full one's while the user works elsewhere for a moment)
PARK_MIN_TOKENS = 96
CUT_KEEP = 8  # cut-off greedy outputs kept as drafts for their spot (Engine._cut)


@dataclass
class _Parked:
    """A prompt's KV kept in a spare batch row (rows 1.. are free between variant batches)."""

    tokens: list[int]
    anchor: tuple[str, str] | None
    hidden: np.ndarray | None
    used: float


# characters the quick window may grow by as the user types before its start moves (and its KV is re-run),
# and how much of its first lines identifies that start
QUICK_SLACK, QUICK_HEAD_CHARS = 512, 160


class ModelNotBuilt(RuntimeError):
    pass


def resolve_model_dir(model: str | Path | None = None) -> Path:
    """A model directory from a path, a preset name (default precision) or FLINT_MODEL / the default.

    Raises ModelNotBuilt with a message that says what is wrong, with which file, and what to run."""
    from .build import read_manifest

    model = model or os.environ.get("FLINT_MODEL") or DEFAULT_MODEL
    name = str(model)
    p = Path(name).expanduser()

    def manifest_of(d: Path) -> Manifest | None:
        m, problem = read_manifest(d)
        if problem is not None:
            raise ModelNotBuilt(problem)
        return m

    if p.is_dir():
        if manifest_of(p) is None:
            raise ModelNotBuilt(f"{p} is not a Flint model directory (it has no flint.json): build one with "
                                f"`flint model build` (a preset) or `flint model build --from-hf HF_DIR`, or "
                                f"pass a preset name ({', '.join(sorted(PRESETS))})")
        return p
    looks_like_path = p.is_absolute() or name.startswith((".", "~")) or os.sep in name or "/" in name
    if looks_like_path:
        what = "is a file, not a model directory" if p.exists() else "does not exist"
        raise ModelNotBuilt(f"model directory {p} {what}: build a model with `flint model build` (models go to "
                            f"{paths.models_dir()}), or pass a preset name ({', '.join(sorted(PRESETS))})")
    candidates: list[Path] = []
    if name in PRESETS:
        # the default precision, then the nearest others (not the alphabetical glob: fp32 is the last resort)
        candidates.extend(paths.models_dir() / f"{name}-{p}"
                          for p in precision_preference(PRESETS[name].default_precision))
    candidates.append(paths.models_dir() / name)
    if paths.models_dir().exists():  # any precision of that name
        candidates.extend(sorted(paths.models_dir().glob(f"{name}-*")))
    damaged: list[str] = []
    for c in candidates:
        try:
            if c.is_dir() and manifest_of(c) is not None:
                return c
        except ModelNotBuilt as e:
            damaged.append(str(e))
    if damaged:
        raise ModelNotBuilt(damaged[0])
    hint = f"flint model build {name}" if name in PRESETS else \
        f"flint model build (presets: {', '.join(sorted(PRESETS))}) or flint model build --from-hf HF_DIR --name {name}"
    raise ModelNotBuilt(f"model {name!r} is not built: run `{hint}` (looked in {paths.models_dir()})")


@dataclass
class FastPaths:
    """Switchable fast paths, so benchmarks can show what each buys."""

    speculative: bool = True  # prompt-lookup (n-gram) drafts verified in one batched forward
    max_draft: int = 8
    # greedy decoding picks tokens with an LM head over the tokens code uses (+ the prompt's own); the full
    # head re-checks those picks in batches (at each line break, every ``verify_rows`` picks, at the end)
    # and decoding rewinds to the first pick it disagrees with: the output is the full head's
    trimmed_head: bool = True
    verify_rows: int = 16
    earlier_drafts: int = 4  # recent generations' outputs also serve as drafts (0: the prompt only)
    kv_reuse: bool = True
    # a prompt far from every cached one (a file just opened, a jump) is served first from a short window
    # around the cursor while the full window is prefilled in idle time (Engine.prefill)
    quick_window: bool = True
    anchored_fim: bool = True  # typed text after the FIM middle token (a keystroke appends), else plain PSM
    # how much typed text the middle may hold before the anchor moves (and the suffix, which follows the
    # prefix slot, is run again), and how much text a new anchor leaves after it (0: the cursor's line)
    max_middle_chars: int = MAX_MIDDLE_CHARS
    fresh_middle_chars: int = FRESH_MIDDLE_CHARS


@dataclass
class EngineConfig:
    threads: int = field(default_factory=default_threads)
    capacity: int = 2048  # KV positions; prompts are windowed to fit with room for the completion
    batch_max: int = 3  # variants share one batch: the LSP default maxVariants is 3
    max_prefix_chars: int = 6000
    max_suffix_chars: int = 600
    prefill_chunk: int = 64  # also the cancel granularity while a prompt runs (no slower than 256 here)
    warm_chunk: int = 64  # prefill chunk in idle time: the user may type any moment
    # the quick first window (FastPaths.quick_window): used when the full window needs more than
    # ``quick_above_tokens`` new tokens of prefill and the quick one needs fewer
    quick_prefix_chars: int = 768
    quick_suffix_chars: int = 256
    quick_above_tokens: int = 192
    # ... reaching back this far for the line that opens the definition the cursor is in (its name and
    # parameters; a long docstring pushes them out of the quick window)
    quick_reach_chars: int = 2048
    # KV positions added for the repository context block (engine/context.py) in front of every prompt: the
    # file window keeps its room; a block larger than this shortens the window instead
    context_tokens: int = 0
    # how the block is laid out (engine.prompt.build_prompt): "comments" (chunks as comments at the start of
    # the FIM prefix) or "repository" (the model's repository format after BOS; kept for measurement)
    context_layout: str = "comments"
    fast: FastPaths = field(default_factory=FastPaths)


def _layout_digest(layout: str, digest: str) -> str:
    """The block's identity in a layout: the block's own digest in the repository layout (what caches knew it
    by before the comments layout), another 16 hex digits in the comments layout (a suggestion made from
    another prompt is another cache entry)."""
    if layout == "repository":
        return digest
    return hashlib.sha256(f"{layout}\0{digest}".encode()).hexdigest()[:16]


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    x = np.asarray(a[:n])
    y = np.asarray(b[:n])
    diff = np.nonzero(x != y)[0]
    return int(diff[0]) if diff.size else n


class Engine:
    def __init__(self, model_dir: Path, config: EngineConfig | None = None) -> None:
        t0 = time.perf_counter()
        self.config = config or EngineConfig()
        self.model_dir = Path(model_dir)
        m = load_manifest(self.model_dir)
        if m is None:
            raise ModelNotBuilt(f"{model_dir} has no flint.json")
        self.manifest: Manifest = m
        # the tokenizer (parsing an 11 MB JSON) loads on a second thread while onnxruntime builds its sessions,
        # with the tables the first completion needs (token bytes, the healing prefix index: ~0.6 s)
        tok: list[HFTokenizer] = []

        def load_tokenizer() -> None:
            t = HFTokenizer(str(self.model_dir / "tokenizer.json"))
            t.prefix_index  # noqa: B018 - builds and caches the token byte table too
            tok.append(t)

        loader = threading.Thread(target=load_tokenizer, name="flint-tokenizer", daemon=True)
        loader.start()
        self.fim = Fim(**m.fim) if m.fim else None
        self.stop_ids = set(m.stop_token_ids) | set(m.eos_token_ids)
        try:
            self.decoder = OnnxDecoder(self.model_dir, m, threads=self.config.threads,
                                       capacity=self.config.capacity + self.config.context_tokens,
                                       batch_max=self.config.batch_max,
                                       prefetch=("full", "code") if self.config.fast.trimmed_head else ("full",))
        finally:
            loader.join()
        if not tok:
            raise ModelNotBuilt(f"{self.model_dir / 'tokenizer.json'} could not be loaded")
        self.tok = tok[0]
        self.tokens: list[int] = []  # tokens whose KV is valid in row 0
        self._anchor: tuple[str, str] | None = None  # (FIM prefix-slot text, suffix) of the cached prompt
        self._quick_head: str | None = None  # the first characters of the last quick window (its start)
        self._last_hidden: np.ndarray | None = None  # hidden state after self.tokens[-1]
        self._parked: dict[int, _Parked] = {}  # spare KV rows holding other prompts (row -> what it holds)
        # measured forward time per token count (filled at warm-up) and the running draft acceptance
        self._costs: dict[int, float] = {1: 1.0}
        # running draft acceptance per length of the n-gram the draft came from (a longer match drafts better)
        self._accept: dict[int, float] = {}
        # the prompt's tokens the trimmed head lacks, and their rows of the full head
        self._ctx_ids: np.ndarray | None = None
        self._ctx_w: np.ndarray | None = None
        # outputs of the last greedy generations, oldest first (drafts for the next ones)
        self._earlier: deque[list[int]] = deque(maxlen=max(1, self.config.fast.earlier_drafts))
        # greedy outputs cut off before their end, by (prefix, suffix): the same spot asked again (the user
        # came back) drafts from what it wrote, so writing it again costs a few verify steps
        self._cut: OrderedDict[tuple[str, str], list[int]] = OrderedDict()
        # the repository context block in front of every prompt (set_context): its ids, identity and labels
        self._context: list[int] = []
        self._context_layout = self.config.context_layout  # the layout self._context was rendered in
        self._context_key: tuple[str, str] = (self._context_layout, "")  # (layout, the block's digest)
        self._context_digest = ""
        self._context_labels: tuple[str, ...] = ()
        self.last_context: tuple[str, ...] = ()  # the block's labels if the last prompt run carried it
        self.load_s = time.perf_counter() - t0
        self.warm_s = 0.0

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

    def warmup(self) -> None:
        """Run the shapes a session will use (prefill chunk, decode, draft verify, variant batch)
        so onnxruntime has planned its memory and packed weights before the first real request."""
        t0 = time.perf_counter()
        text = "import os\nimport sys\n\n\ndef main(argv):\n    for arg in argv:\n        print(arg)\n" * 3
        self.complete(text, "\n", GenParams(max_tokens=4))
        self.complete(text + "\n# x", "\n", GenParams(max_tokens=3, n=min(3, self.config.batch_max)))
        self._measure_costs()
        self.reset()
        self.warm_s = time.perf_counter() - t0

    def _measure_costs(self) -> None:
        """Time one forward over m tokens for the draft sizes the speculation may choose."""
        past = max(1, len(self.tokens) - 16)
        costs = {}
        for m in sorted({1, 2, 3, 5, self.config.fast.max_draft + 1}):
            ids = np.full((1, m), 100, dtype=np.int64)
            best = float("inf")
            for _ in range(2):
                t0 = time.perf_counter()
                self.decoder.forward(ids, past)
                best = min(best, time.perf_counter() - t0)
            costs[m] = best
        self._costs = costs
        log.info("forward cost per token count (ms): %s", {k: round(v * 1000, 1) for k, v in costs.items()})
        self.tokens = self.tokens[:past]
        self._last_hidden = None

    def _observe_cost(self, m: int, seconds: float) -> None:
        """Keep the forward cost table current from real decoding (the warm-up's two timings per size run
        on cold shapes and overstate multi-token forwards, which makes drafts too long)."""
        old = self._costs.get(m)
        self._costs[m] = seconds if old is None else old + 0.1 * (seconds - old)

    def forget_outputs(self) -> None:
        """Drop the remembered outputs that serve as drafts (benchmarks repeating a prompt)."""
        self._earlier.clear()
        self._cut.clear()

    def reset(self) -> None:
        self.tokens = []
        self._last_hidden = None
        self._anchor = None
        self._quick_head = None
        self._parked.clear()

    # ---- prompt -> KV ---------------------------------------------------------------------------
    def build(self, prefix: str, suffix: str, heal: bool = True, max_new: int = 64,
              previous: tuple[str, str] | None = None, context: bool = True) -> Prompt:
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
                          context=self._context if context else (), layout=self._context_layout)
        if anchor is not None:
            pr.anchor = (prefix[:anchor], suffix)
        limit = self.decoder.capacity - max_new - 16
        if len(pr.ids) > limit:  # drop the oldest prefix tokens (after BOS, FIM-prefix and the context block)
            excess = len(pr.ids) - limit
            pr.ids = pr.ids[:pr.head] + pr.ids[pr.head + excess:]
        return pr

    # ---- repository context -----------------------------------------------------------------------
    def set_context(self, block: Any) -> bool:
        """Put a repository context block (engine.context.ContextBlock, or None for none) in front of every
        prompt from now on, laid out as ``config.context_layout`` says. Only swaps the ids: the next prefill
        / completion recomputes the KV from where they differ (a block that keeps its first chunks keeps
        their KV). Returns whether it changed."""
        layout = self.config.context_layout
        digest = block.digest() if block is not None and block.chunks else ""
        if (layout, digest) == self._context_key:
            return False
        if not digest and not self._context:  # none before, none now: only the layout of a future block
            self._context_layout, self._context_key = layout, (layout, "")
            return False
        ids: list[int] = []
        if digest:
            if layout == "comments":
                ids = comment_ids(self.tok, block.chunks, block.current_path)
            else:
                ids = context_ids(self.tok, block.repo, block.chunks, block.current_path)
            room = self.decoder.capacity // 2  # the file window keeps at least half the KV
            if len(ids) > room:
                log.debug("context block of %d tokens exceeds %d: not used", len(ids), room)
                ids = []
        self._context = ids
        self._context_layout = layout
        self._context_key = (layout, digest if ids else "")
        self._context_digest = _layout_digest(layout, digest) if ids else ""
        self._context_labels = tuple(block.labels()) if ids else ()
        return True

    @property
    def context_digest(self) -> str:
        """The identity of the context block in front of prompts and of its layout ("" when none)."""
        return self._context_digest

    @property
    def context_labels(self) -> tuple[str, ...]:
        """What the block holds (path:line (source) per chunk), for the status."""
        return self._context_labels

    @property
    def context_tokens(self) -> int:
        return len(self._context)

    def _reusable(self, cached: list[int], ids: list[int]) -> int:
        return _common_prefix(cached, ids) if self.config.fast.kv_reuse else 0

    def _prepare(self, prefix: str, suffix: str, *, heal: bool, max_new: int, quick_ok: bool) -> tuple[Prompt, bool]:
        """The prompt to run and whether it is the quick window. Tries the full window against row 0 and
        every parked row (each with its own anchor); when even the best needs more than
        ``quick_above_tokens`` of prefill, the quick window (the text nearest the cursor) if it needs
        fewer. The row that serves it best becomes row 0; a row 0 it would overwrite is parked."""
        cfg = self.config
        slots = [(0, self._anchor, self.tokens)] + [(r, p.anchor, p.tokens) for r, p in self._parked.items()]
        best: tuple[int, int, Prompt, bool] | None = None  # (new tokens, row, prompt, quick)
        for row, anchor, cached in slots:
            pr = self.build(prefix, suffix, heal=heal, max_new=max_new, previous=anchor)
            new = len(pr.ids) - self._reusable(cached, pr.ids)
            if best is None or new < best[0]:
                best = (new, row, pr, False)
            if new <= cfg.quick_above_tokens:
                break
        assert best is not None
        if quick_ok and cfg.fast.quick_window and best[0] > cfg.quick_above_tokens:
            # the quick window keeps its start while the user types (its KV is reused)
            cut = sticky_cut(prefix, min(cfg.quick_prefix_chars, cfg.max_prefix_chars), QUICK_SLACK, self._quick_head,
                             reach=min(cfg.quick_reach_chars, cfg.max_prefix_chars))
            qp, qs = clip_window(prefix[cut:], suffix, len(prefix) - cut,
                                 min(cfg.quick_suffix_chars, cfg.max_suffix_chars))
            # the quick window carries the context block only where a row already holds its KV: a cold spot
            # must not wait for the block's prefill (idle time does that)
            with_block = any(self._holds_block(cached) for _, _, cached in slots)
            if (len(qp), len(qs)) != (len(prefix), len(suffix)) or not with_block:
                for row, anchor, cached in slots:
                    pr = self.build(qp, qs, heal=heal, max_new=max_new, previous=anchor, context=with_block)
                    new = len(pr.ids) - self._reusable(cached, pr.ids)
                    if new < best[0]:
                        best = (new, row, pr, True)
        _, row, pr, quick = best
        if quick:
            self._quick_head = qp[:QUICK_HEAD_CHARS]
        if row != 0:
            self._swap_in(row)
        elif len(self.tokens) - self._reusable(self.tokens, pr.ids) >= PARK_MIN_TOKENS:
            self._park_row0()
        return pr, quick

    def _holds_block(self, ids: list[int]) -> bool:
        """Do these ids (a prompt, or a row's cached tokens) start with the context block (True: no block)?
        The block follows BOS, and in the comments layout of a FIM model the FIM prefix token too."""
        if not self._context:
            return True
        start = (1 if self.manifest.bos_token_id is not None else 0) + \
            (1 if self._context_layout == "comments" and self.fim is not None else 0)
        return ids[start:start + len(self._context)] == self._context

    def _park_row0(self) -> None:
        """Copy row 0's KV into a spare row (an empty one, else the least recently used)."""
        spare = range(1, self.decoder.kv.batch_max)
        if not spare or not self.tokens:
            return
        free = [r for r in spare if r not in self._parked]
        row = free[0] if free else min(spare, key=lambda r: self._parked[r].used)
        self.decoder.kv.copy_row(0, row, len(self.tokens))
        self._parked[row] = _Parked(list(self.tokens), self._anchor, self._last_hidden, time.monotonic())

    def _swap_in(self, row: int) -> None:
        """A parked prompt back into row 0; row 0's takes its place."""
        p = self._parked.pop(row)
        self.decoder.kv.swap_rows(0, row, len(self.tokens), len(p.tokens))
        if self.tokens:
            self._parked[row] = _Parked(self.tokens, self._anchor, self._last_hidden, time.monotonic())
        self.tokens, self._anchor, self._last_hidden = p.tokens, p.anchor, p.hidden

    def _sync(self, ids: list[int], t: Timings, cancel: CancelToken | None = None,
              chunk: int | None = None) -> np.ndarray | None:
        """Make row 0's KV hold ``ids``; return the hidden state at its last position."""
        L = self._reusable(self.tokens, ids)
        t.prompt_tokens = len(ids)
        t.context = self._context_labels if self._context and self._holds_block(ids) else ()
        if L == len(ids) and L == len(self.tokens) and self._last_hidden is not None:
            t.reused_tokens = L
            self.last_context = t.context
            return self._last_hidden
        L = min(L, len(ids) - 1)  # at least one token runs, to produce the hidden state
        t.reused_tokens = L
        self.tokens = self.tokens[:L]
        self._last_hidden = None
        h = None
        chunk = chunk or self.config.prefill_chunk
        pos = L
        while pos < len(ids):
            if cancel is not None and cancel.cancelled and pos > L:
                return None  # the KV cache stays valid for ids[:pos]
            part = ids[pos:pos + chunk]
            out = self.decoder.forward(np.asarray([part], dtype=np.int64), pos)
            t.forward_calls += 1
            pos += len(part)
            self.tokens = ids[:pos]
            h = out[0, -1]
        assert h is not None
        self._last_hidden = h
        self.last_context = t.context  # the whole prompt is in the KV now, the block's chunks with it
        return h

    def prefill(self, prefix: str, suffix: str = "", cancel: CancelToken | None = None) -> Timings:
        """Warm the KV cache for a prompt's full window without generating (idle time, in small chunks:
        an interrupted warm-up keeps what it computed, parked while the user types, resumed next time)."""
        t = Timings()
        pr, _ = self._prepare(prefix, suffix, heal=True, max_new=64, quick_ok=False)
        self._anchor = pr.anchor
        self._sync(pr.ids, t, cancel, chunk=self.config.warm_chunk)
        t.total_ms = (time.perf_counter() - t.started) * 1000
        return t

    # ---- logits ---------------------------------------------------------------------------------
    def _set_context_rows(self, prompt_ids: list[int]) -> None:
        """Identifiers come from the user's own code: the prompt's tokens that the trimmed head lacks get
        their logits from the full head's own weight rows, a few hundred rows computed in numpy."""
        self._ctx_ids = None
        self._ctx_w = None
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
                self._ctx_ids, self._ctx_w = ids, rows

    def _lazy_trimmed(self) -> bool:
        return self.config.fast.trimmed_head and "code" in self.decoder.heads

    def _logits(self, hidden: np.ndarray) -> np.ndarray:
        """Logits [rows, V] from the full head (sampling needs the whole distribution)."""
        return self.decoder.heads["full"](hidden.reshape(-1, hidden.shape[-1]))

    def _greedy(self, hidden: np.ndarray, exact: bool, allowed: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
        """Greedy token ids [rows] (``allowed`` constrains the first row) and the probability the model gives
        each pick: like argmax over ``_logits``, but the trimmed head's picks come from its own columns and the
        prompt's rows, without a vocabulary-sized row per position (their probabilities are then over those
        columns: a little high; the full head's re-check replaces them)."""
        h2 = hidden.reshape(-1, hidden.shape[-1])
        if exact or not self._lazy_trimmed():
            lg = self._logits(h2)
            guesses = np.argmax(lg, axis=1)
            probs = pick_probs(lg, guesses)
            if allowed is not None:
                sub = lg[0, allowed]
                j = int(np.argmax(sub))
                guesses[0] = allowed[j]
                probs[0] = pick_probs(sub[None, :], np.asarray([j]))[0]  # among the tokens healing allows
            return guesses, probs
        code = self.decoder.heads["code"]
        lg = code(h2)
        rows = np.arange(h2.shape[0])
        best = np.argmax(lg, axis=1)
        guesses = code.ids[best] if code.ids is not None else best
        if self._ctx_ids is not None and self._ctx_w is not None:
            cl = h2 @ self._ctx_w.T
            cb = np.argmax(cl, axis=1)
            take = cl[rows, cb] > lg[rows, best]
            guesses = np.where(take, self._ctx_ids[cb], guesses)
            lg = np.concatenate([lg, cl], axis=1)
            best = np.where(take, lg.shape[1] - cl.shape[1] + cb, best)
        return guesses.astype(np.int64), pick_probs(lg, best)

    def _verify(self, picks: list[tuple[int, np.ndarray, int]], probs: dict[int, float] | None = None
                ) -> tuple[int, int, np.ndarray] | None:
        """Check provisional picks (output index, hidden row, token) with the full head in one call; the
        first disagreement as (output index, the full head's token, its hidden row), else None. ``probs``
        (output index -> probability of its token) gets the full head's figures for the rows checked."""
        if not picks:
            return None
        rows = np.stack([h for _, h, _ in picks])
        lg = self.decoder.heads["full"](rows)
        best = np.argmax(lg, axis=1)
        p = pick_probs(lg, best)
        for k, ((idx, h, tok), b) in enumerate(zip(picks, best, strict=True)):
            if probs is not None:
                probs[idx] = float(p[k])
            if int(b) != tok:
                return idx, int(b), h
        return None

    # ---- generation -----------------------------------------------------------------------------
    def complete(self, prefix: str, suffix: str = "", params: GenParams | None = None,
                 cancel: CancelToken | None = None, on_token: TokenCallback | None = None
                 ) -> tuple[list[Completion], Timings]:
        params = params or GenParams()
        t = Timings()
        n = max(1, min(params.n, self.config.batch_max))
        pr, quick = self._prepare(prefix, suffix, heal=params.token_healing, max_new=params.max_tokens,
                                  quick_ok=params.quick_start)
        t.window = "quick" if quick else "full"
        healer = Healer(self.tok.prefix_index, pr.heal) if pr.heal else None
        if cancel is not None and cancel.cancelled:
            return [Completion("", [], "cancelled")], t
        self._anchor = pr.anchor
        hidden = self._sync(pr.ids, t, cancel)
        if hidden is None:
            return [Completion("", [], "cancelled")], t
        self._set_context_rows(pr.ids)
        t.prefill_ms = (time.perf_counter() - t.started) * 1000
        params, settle = _budgeted(prefix, suffix, params)
        samplers = [Sampler(params.temperature, params.top_k, params.top_p, params.seed)]
        for i in range(1, n):
            samplers.append(Sampler(params.variant_temperature, params.top_k, params.top_p, params.seed + i))
        greedy_single = n == 1 and samplers[0].greedy
        if greedy_single:
            spot = (prefix, suffix)
            outs = [self._decode_greedy(pr, hidden, healer, params, t, cancel, on_token, settle,
                                        resume=self._cut.pop(spot, None))]
            if outs[0].finish_reason in ("cancelled", "deadline") and len(outs[0].token_ids) >= 4:
                self._cut[spot] = list(outs[0].token_ids)
                while len(self._cut) > CUT_KEEP:
                    self._cut.popitem(last=False)
        else:
            outs = self._decode_batch(pr, hidden, healer, samplers, params, t, cancel, on_token, settle)
        t.total_ms = (time.perf_counter() - t.started) * 1000
        for i, c in enumerate(outs):
            c.variant = i
            c.total_ms = t.total_ms
        return _dedupe(outs), t

    def _finish_text(self, pr: Prompt, ids: list[int]) -> str:
        data = self.tok.decode_bytes(ids)
        if pr.heal:
            if data.startswith(pr.heal):
                data = data[len(pr.heal):]
            elif pr.heal.startswith(data):  # stopped while still re-typing the healed bytes
                data = b""
        return safe_decode(data)

    def _interrupted(self, params: GenParams, cancel: CancelToken | None) -> str | None:
        if cancel is not None and cancel.cancelled:
            return "cancelled"
        if params.deadline is not None and time.monotonic() >= params.deadline:
            return "deadline"
        return None

    def _allowed(self, healer: Healer | None, out: list[int]) -> np.ndarray | None:
        """Token ids the next token must be one of while token healing is not done (None: any)."""
        if healer is None:
            return None
        ids = healer.allowed(self.tok.decode_bytes(out))
        return np.asarray(ids, dtype=np.int64) if ids else None

    def _decode_greedy(self, pr: Prompt, hidden: np.ndarray, healer: Healer | None, params: GenParams,
                       t: Timings, cancel: CancelToken | None, on_token: TokenCallback | None,
                       settle: _Settle | None = None, resume: list[int] | None = None) -> Completion:
        """One greedy row with drafts: ``resume`` (what a cut-off generation of this spot wrote) while the
        output agrees with it, else n-grams of the prompt and of earlier outputs."""
        fast = self.config.fast
        lazy = self._lazy_trimmed()
        base = len(self.tokens)  # the prompt's tokens in the KV cache; output token i sits at base + i
        # provisional picks of the trimmed head not yet re-checked by the full head: (out index, row, token)
        picks: list[tuple[int, np.ndarray, int]] = []
        earlier = list(reversed(self._earlier)) if fast.earlier_drafts else []  # newest first
        allowed = self._allowed(healer, [])
        exact = allowed is not None or not lazy
        first, first_p = self._greedy(hidden, exact, allowed)
        tok = int(first[0])
        if not exact:
            picks.append((0, np.asarray(hidden).reshape(-1), tok))
        out: list[int] = []
        # output index -> the probability the model gave that token (the full head's once re-checked)
        probs: dict[int, float] = {0: float(first_p[0])}
        text = ""
        pending = tok  # chosen, not yet in the KV cache

        def doubts(shown: str) -> Doubts:
            return self._doubts(pr, out, probs, len(shown))

        def rewind() -> bool:
            """Re-check the provisional picks; on a disagreement go back to it (True)."""
            nonlocal pending, out, text
            bad = self._verify(picks, probs)
            t.verified_rows += len(picks)
            picks.clear()
            if bad is None:
                return False
            idx, right, row = bad
            t.rewinds += 1
            out = out[:idx]
            for k in [k for k in probs if k > idx]:
                del probs[k]
            self.tokens = self.tokens[:base + idx]
            self._last_hidden = row
            pending = right
            text = _stop(self._finish_text(pr, out), params, settle)[1] if out else ""
            if on_token is not None:
                on_token(0, text, doubts(text))
            return True

        while True:
            # emit the pending token
            reason: str | None = None
            if pending in self.stop_ids:
                reason = "eos"
            else:
                out.append(pending)
                if len(out) == 1:
                    t.ttft_ms = (time.perf_counter() - t.started) * 1000
                text = self._finish_text(pr, out)
                r, cut = _stop(text, params, settle)
                if on_token is not None:
                    on_token(0, cut, doubts(cut))
                if r is not None:
                    reason, text = r, cut
                elif len(out) >= params.max_tokens:
                    reason = "length"
                else:
                    reason = self._interrupted(params, cancel)
            if reason is not None:
                if reason != "cancelled" and rewind():
                    continue
                break
            # one forward: the pending token plus a draft copied from earlier context
            draft: list[int] = []
            match = 0
            allowed = self._allowed(healer, out)  # still healing: the next token is constrained, no draft
            if fast.speculative and allowed is None:
                room = min(fast.max_draft, params.max_tokens - len(out), self.decoder.capacity - len(self.tokens) - 2)
                at = len(out) + 1
                if room > 0 and resume is not None and len(resume) > at and resume[:at] == out + [pending]:
                    draft, match = resume[at: at + room], -1  # the same greedy path again: all of it
                elif room > 0:
                    draft, match = ngram_match(self.tokens + [pending], max_draft=room, earlier=earlier)
                    if draft:
                        a = self._accept.get(match, ACCEPT_PRIOR)
                        draft = draft[: choose_draft_len(self._costs, a, len(draft))]
                        if not draft:  # drift back toward the prior so a bad patch does not switch drafting off
                            self._accept[match] = a + 0.05 * (ACCEPT_PRIOR - a)
            if len(self.tokens) + 1 + len(draft) > self.decoder.capacity:
                if rewind():
                    continue
                reason = "length"
                break
            ids = [pending] + draft
            t0 = time.perf_counter()
            hid = self.decoder.forward(np.asarray([ids], dtype=np.int64), len(self.tokens))[0]
            self._observe_cost(len(ids), time.perf_counter() - t0)
            t.forward_calls += 1
            exact = allowed is not None or not lazy
            guesses, gp = self._greedy(hid, exact, allowed)
            for j in range(len(ids)):  # row j picked the token at output index len(out) + j
                probs[len(out) + j] = float(gp[j])
            # accept rule: draft[j] stands if the model's own greedy choice after ids[:j+1] equals it
            acc = 0
            while acc < len(draft) and int(guesses[acc]) == draft[acc]:
                acc += 1
            t.draft_accepted += acc
            if draft and match >= 0:  # running per-token acceptance: P(accept next | accepted so far)
                hit = acc / len(draft) if acc < len(draft) else 1.0
                self._accept[match] = 0.8 * self._accept.get(match, ACCEPT_PRIOR) + 0.2 * hit
            self.tokens = self.tokens + ids[: 1 + acc]
            self._last_hidden = hid[acc]
            pending = int(guesses[acc])
            if not exact:
                # row j picked the token at output index len(out) + j (the draft's, then the pending one)
                picks.extend((len(out) + j, hid[j], int(guesses[j])) for j in range(acc + 1))
            # take the accepted draft tokens one at a time (stop rules apply to each)
            shown: str | None = None
            for d in draft[:acc]:
                if d in self.stop_ids:
                    reason = "eos"
                    break
                out.append(d)
                text = self._finish_text(pr, out)
                r, shown = _stop(text, params, settle)
                if r is not None:
                    reason, text = r, shown
                    break
                if len(out) >= params.max_tokens:
                    reason = "length"
                    break
            if reason is not None:  # picks past the end do not count (an end token's own pick does)
                last = len(out) if reason == "eos" else len(out) - 1
                picks[:] = [pk for pk in picks if pk[0] <= last]
            # provisional picks are re-checked before a line is complete (what the server shows), at the
            # end, and in bounded batches; nothing unchecked is streamed past a line break
            if picks and (reason is not None or len(picks) >= fast.verify_rows
                          or b"\n" in self.tok.decode_bytes(draft[:acc] + [pending])):
                if rewind():
                    continue
            if shown is not None and on_token is not None:
                on_token(0, shown, doubts(shown))
            if reason is not None:
                break
        t.decode_tokens += len(out)
        if len(out) >= 4 and (not self._earlier or self._earlier[-1] != out):
            self._earlier.append(list(out))
        return Completion(text=text, token_ids=out, finish_reason=reason or "length", ttft_ms=t.ttft_ms,
                          doubts=doubts(text))

    def _doubts(self, pr: Prompt, out: list[int], probs: dict[int, float], shown: int) -> Doubts:
        """(offset, probability) of each token in ``out`` the model chose with probability below
        ``DOUBT_KEEP``: the offset is where the token starts in the text (its first ``shown`` characters)."""
        found: list[tuple[int, float]] = []
        for i in range(len(out)):
            p = probs.get(i)
            if p is None or p >= DOUBT_KEEP:
                continue
            at = len(self._finish_text(pr, out[:i])) if i else 0
            if at >= shown:
                break
            if not found or found[-1][0] != at:  # a token inside a character keeps the first
                found.append((at, round(p, 4)))
        return tuple(found)

    def _decode_batch(self, pr: Prompt, hidden: np.ndarray, healer: Healer | None,
                      samplers: list[Sampler], params: GenParams, t: Timings, cancel: CancelToken | None,
                      on_token: TokenCallback | None, settle: _Settle | None = None) -> list[Completion]:
        n = len(samplers)
        prompt_len = len(self.tokens)
        logits = self._logits(hidden)[0]
        first = self._allowed(healer, [])
        pending = [s(logits, first) for s in samplers]
        outs: list[list[int]] = [[] for _ in range(n)]
        texts = [""] * n
        reasons: list[str | None] = [None] * n
        ttft = [0.0] * n
        if n > 1:
            for row in range(1, n):  # the variants' rows: what was parked there is gone
                self._parked.pop(row, None)
            self.decoder.kv.broadcast_row0(n, prompt_len)
        fed0: list[int] = []
        step = 0
        while True:
            for i in range(n):
                if reasons[i] is not None:
                    continue
                tk = pending[i]
                if tk in self.stop_ids:
                    reasons[i] = "eos"
                    continue
                outs[i].append(tk)
                if len(outs[i]) == 1:
                    ttft[i] = (time.perf_counter() - t.started) * 1000
                    if i == 0:
                        t.ttft_ms = ttft[0]
                text = self._finish_text(pr, outs[i])
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
            stop = self._interrupted(params, cancel)
            if stop:
                reasons = [r or stop for r in reasons]
                break
            if prompt_len + step + 1 > self.decoder.capacity:
                reasons = [r or "length" for r in reasons]
                break
            ids = np.asarray([[pending[i]] for i in range(n)], dtype=np.int64)
            hid = self.decoder.forward(ids, prompt_len + step)
            t.forward_calls += 1
            if reasons[0] is None:
                fed0.append(pending[0])
            step += 1
            lg = self._logits(hid[:, -1, :])
            for i in range(n):
                if reasons[i] is None:
                    pending[i] = samplers[i](lg[i], self._allowed(healer, outs[i]))
        # row 0 holds the prompt plus the tokens fed for variant 0
        valid0 = fed0 if reasons[0] is not None else fed0
        self.tokens = self.tokens[:prompt_len] + valid0
        self._last_hidden = None
        t.decode_tokens += sum(len(o) for o in outs)
        return [Completion(text=texts[i], token_ids=outs[i], finish_reason=reasons[i] or "length", ttft_ms=ttft[i])
                for i in range(n)]


# (kept down here with the helpers that use it: the module's head is another change's)
from dataclasses import replace  # noqa: E402

from .postprocess import Budget, budget_for, split_cursor, stop_reached  # noqa: E402


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
