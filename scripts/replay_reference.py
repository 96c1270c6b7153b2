"""The quality reference for bench_replay: the same GGUF asked directly (llama-cpp-python, plain FIM prompt over
the engine's window, greedy, stopped at the first line break), its line on screen the moment a keystroke is
made, to the same typists (their timing, Tab when the ghost is what the file says next and has been on screen
0.3 s, Enter with a perfect auto-indent), and to a patient one who takes every right ghost at once.

No latency and no serving: what this model and window save when speed costs nothing. A served typist's row
below its reference row loses to the model itself (windows, post-processing, deadlines or speed); the gap is
what serving could still win.

The typist keeps a ghost while the typed text matches it (type-through) and asks the model again when the
ghost is taken, finished or contradicted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, fields

from replay_typist import auto_indent, enter_text, takeable

MAX_LINE_TOKENS = 48


@dataclass
class ReferenceResult:
    """Chars / keystrokes saved by Tabs, as bench_replay counts them for a served typist."""

    target_chars: int = 0
    target_keys: int = 0  # target_chars less the indentation an Enter's auto-indent writes
    chars_saved: int = 0
    keys_saved: int = 0
    tabs: int = 0
    calls: int = 0  # states the ghost was asked for

    def add(self, other: ReferenceResult) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


def simulate(typed: str, complete: Callable[[int], str], interval: Callable[[int, str], float] | None = None,
             reaction_s: float = 0.0) -> ReferenceResult:
    """Type ``typed`` with the ghost ``complete(n)`` (n = characters of ``typed`` in the document) on screen as
    soon as the keystroke that left n is made: Tab when the ghost is what follows and has been on screen
    ``reaction_s``, else the next character or Enter. ``interval(n, text)``: seconds from the keystroke that
    typed ``text`` to the next action (bench_replay's typist); None: every ghost has been seen long enough.
    Pure: ``complete`` is the model."""
    res = ReferenceResult(target_chars=len(typed), target_keys=len(typed) - auto_indent(typed))
    n = 0
    ghost: str | None = None
    t = t_key = shown_at = 0.0  # as in the replay, the first action types: nothing is on screen yet
    while n < len(typed):
        rest = typed[n:]
        if ghost is None:
            ghost = complete(n)
            res.calls += 1
            shown_at = t_key
        if t - shown_at >= reaction_s and takeable(ghost, rest) is not None:  # one line: Tab takes it whole
            text = ghost
            res.tabs += 1
            res.chars_saved += len(text) - 1
            res.keys_saved += len(text) - 1 - auto_indent(text)
            ghost = None
        else:
            text = enter_text(rest) if rest[0] == "\n" else rest[0]
            ghost = ghost[len(text):] if ghost.startswith(text) and len(ghost) > len(text) else None
        n += len(text)
        t_key = t
        t += interval(n, text) if interval is not None else 0.0
    return res


class DirectModel:
    """llama-cpp-python on ``gguf``: plain PSM FIM, greedy (also bench_served's direct rows). The window's start is anchored per file
    (``begin``), so llama.cpp's prompt cache keeps the prefix and a keystroke re-runs only the tail."""

    def __init__(self, gguf: str, threads: int, n_ctx: int = 4096) -> None:
        from llama_cpp import Llama

        self.llm = Llama(model_path=gguf, n_threads=threads, n_threads_batch=threads, n_ctx=n_ctx, n_batch=512,
                         verbose=False)
        special = ("<|endoftext|>", "<|im_end|>", "<|fim_pad|>", "<|file_sep|>", "<|repo_name|>", "<|fim_prefix|>")
        self.stops = {self.llm.token_eos()} | {t for s in special
                                               for t in self.llm.tokenize(s.encode(), add_bos=False, special=True)}

    def complete(self, prefix: str, suffix: str, max_tokens: int = MAX_LINE_TOKENS,
                 one_line: bool = True) -> tuple[str, float]:
        """The model's text (up to its first line break when ``one_line``), right-stripped, and the seconds it
        took."""
        prompt = f"<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>"
        ids = self.llm.tokenize(prompt.encode(), add_bos=False, special=True)
        t0 = time.perf_counter()
        gen: list[int] = []
        text = ""
        # generate() reuses the cached KV of the longest common prefix with the previous prompt
        for t in self.llm.generate(ids, top_k=1, temp=0.0, repeat_penalty=1.0):
            if t in self.stops or len(gen) >= max_tokens:
                break
            gen.append(t)
            text = self.llm.detokenize(gen).decode("utf-8", "replace")
            if one_line and "\n" in text:
                text = text[: text.index("\n")]
                break
        return text.rstrip(), time.perf_counter() - t0


def window_start(before: str, max_prefix_chars: int) -> int:
    """Where a file's prompt window starts for the whole region: ``max_prefix_chars`` before the region, moved
    on to a line start (the engine's window is as long; anchoring it keeps llama.cpp's prompt cache warm)."""
    if len(before) <= max_prefix_chars:
        return 0
    start = len(before) - max_prefix_chars
    nl = before.find("\n", start)
    return nl + 1 if nl != -1 else start


def memo_completer(model: DirectModel, before: str, after: str, typed: str, max_prefix_chars: int,
                   max_suffix_chars: int, calls: list[float]) -> Callable[[int], str]:
    """``complete(n)`` for one file: the model's line with n characters of ``typed`` in the document, each state
    asked once (greedy is deterministic, so every typist sees the same ghost there)."""
    begin = window_start(before, max_prefix_chars)
    suffix = after[:max_suffix_chars]  # the region is typed, not in the document yet
    memo: dict[int, str] = {}

    def complete(n: int) -> str:
        if n not in memo:
            memo[n], s = model.complete(before[begin:] + typed[:n], suffix)
            calls.append(s)
        return memo[n]

    return complete
