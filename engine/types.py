"""Plain data types shared by the engine and its callers (no LSP types here)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


class CancelToken:
    """Cooperative cancellation, checked by the generation loop before every model step."""

    __slots__ = ("_event", "reason")

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""

    def cancel(self, reason: str = "cancelled") -> None:
        self.reason = reason
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        """Sleep until cancelled or ``timeout`` passes; whether it was cancelled."""
        return self._event.wait(timeout)


@dataclass(frozen=True)
class DocRef:
    """The document a completion is for: what an analyser reads (the whole text, not the prompt's window)."""

    path: str | None = None
    version: int | None = None
    text: str | None = None  # the whole document (None: the prefix and suffix are all of it)
    start: int = 0  # where the prefix begins in ``text``


@dataclass
class GenParams:
    """What to generate. ``temperature == 0`` means greedy (argmax); otherwise seeded sampling."""

    max_tokens: int = 64
    max_lines: int | None = None  # stop after this many newline-terminated lines (None: no limit)
    n: int = 1  # number of variants, generated in one batched pass sharing the prompt's KV
    temperature: float = 0.0
    top_p: float = 0.95
    top_k: int = 40
    seed: int = 0
    # variants after the first use these; variant 0 is greedy unless temperature > 0
    variant_temperature: float = 0.7
    deadline: float | None = None  # absolute time.monotonic() value
    stop: tuple[str, ...] = ()  # extra stop strings
    token_healing: bool = True
    # a cold spot may be served from the engine's quick first window (a short window around the cursor)
    # while the full one warms in idle time; not part of the key: the server keeps such answers off disk
    quick_start: bool = False
    # size the generation by the context at the cursor (engine.text.budget.budget_for: one line, one
    # statement in the middle of code, the rest of a body): it replaces ``max_tokens`` / ``max_lines``
    auto_budget: bool = False
    # the document's language id (LSP languageId): the Python rules of the budget and the settled stop apply
    # only to Python; None: guessed from the text
    language: str | None = None
    # monitor-guided decoding (engine/guidance, docs/guidance.md): names static analysis knows constrain the
    # greedy picks; ``doc`` is the document the prefix and suffix are a window of (None: they are all of it)
    guidance: bool = False
    doc: DocRef | None = None

    def key(self) -> tuple:
        """The parameters that change the output (for cache keys)."""
        k: tuple = (self.max_tokens, self.max_lines, self.n, self.temperature, self.top_p, self.top_k, self.seed,
                    self.variant_temperature, self.stop, self.token_healing)
        if self.auto_budget or self.language is not None:  # keys of requests without them stay as they were
            k = k + ("budget" if self.auto_budget else "", self.language)
        if self.guidance:
            k = k + ("guided",)
        return k


# (character offset in the text, probability) of each token the model chose with probability below
# DOUBT_KEEP: where an automatic suggestion may be cut (what follows a guess is only as good as the guess)
Doubts = tuple[tuple[int, float], ...]
DOUBT_KEEP = 0.95


@dataclass
class Completion:
    text: str
    token_ids: list[int]
    # "eos" | "length" | "lines" | "deadline" | "cancelled" | "stop" (a stop string, or the suggestion at
    # the cursor is settled: what follows would not be shown)
    finish_reason: str
    ttft_ms: float = 0.0
    total_ms: float = 0.0
    variant: int = 0
    source: str = "model"  # "model" | "memory" | "disk" | "type-through"
    doubts: Doubts = ()  # the greedy local engine's; empty elsewhere (no cut)


@dataclass
class Rate:
    """Items a second: a running mean over measurements of at least ``least`` items (a few tokens' time is mostly
    the call's overhead, not the rate)."""

    per_s: float | None = None
    least: int = 32
    weight: float = 0.3  # of the newest measurement: the machine's load changes

    def add(self, items: int, seconds: float) -> None:
        if items < self.least or seconds <= 0:
            return
        r = items / seconds
        self.per_s = r if self.per_s is None else self.per_s + self.weight * (r - self.per_s)


@dataclass
class Timings:
    prompt_tokens: int = 0
    reused_tokens: int = 0
    ran_tokens: int = 0  # prompt tokens a forward ran (fewer than prompt - reused when stopped mid-prompt)
    prefill_ms: float = 0.0
    ttft_ms: float = 0.0
    total_ms: float = 0.0
    decode_tokens: int = 0
    forward_calls: int = 0
    draft_accepted: int = 0
    verified_rows: int = 0  # trimmed-head picks the full head re-checked
    rewinds: int = 0  # ... and disagreed with (decoding went back to the first such pick)
    window: str = "full"  # "quick": served from the short first window (Engine: the full one was cold)
    context: tuple[str, ...] = ()  # the repository context chunks in front of the prompt (their labels)
    guidance: dict[str, object] | None = None  # what the monitor did (engine/guidance/guide.py summary)
    started: float = field(default_factory=time.perf_counter)


# on_token(variant_index, text_so_far[, doubts]) -> None. Called from the generating thread; the local
# engine's greedy path passes the doubts of the text so far, other generators only the text.
TokenCallback = Callable[..., None]


# finish reasons of a model that stopped on its own terms (not a deadline or a cancel): the same prompt gives
# the same text, and that text, even empty, is its answer (the disk cache stores only such generations)
COMPLETE_REASONS = frozenset({"eos", "length", "lines", "stop"})


def stop_cut(text: str, params: GenParams, stop_texts: tuple[str, ...] = ()) -> tuple[str | None, str]:
    """(reason, text) once generated text reaches a stop string (the earliest of ``params.stop`` and
    ``stop_texts``) or ``params.max_lines`` line breaks, cut there; else (None, text). The local engine
    and the remote client stop by the same rule."""
    best = -1
    for s in (*params.stop, *stop_texts):
        j = text.find(s)
        if j >= 0 and (best < 0 or j < best):
            best = j
    if best >= 0:
        return "stop", text[:best]
    if params.max_lines is not None and text.count("\n") >= params.max_lines:
        c = -1
        for _ in range(params.max_lines):
            c = text.find("\n", c + 1)
        return "lines", text[:c]
    return None, text
