"""``Answer``: what the store gives a request (raw completions at the state's cursor, where they came from,
whether more is coming), ``Record``: how a unit of work ended, and the small pure helpers about entries and
settled variants."""

from __future__ import annotations

from dataclasses import dataclass

from engine.cache.typethrough import Entry, anchor_of
from engine.text.budget import Budget, settled
from engine.text.postprocess import CUT_OFF_REASONS, Mode, budget_for, split_cursor
from engine.types import Completion
from lsp_server.completion.jobs import Result, State


@dataclass
class Answer:
    comps: list[Completion]  # raw text at the state's cursor
    source: str
    mode: Mode
    complete: bool  # nothing more is coming for it
    origin: str = "model"
    backend: str = "local"
    note: str = ""  # said in the status message (a fallback, a race outcome)
    # an empty answer made from the engine's quick first window: the whole window may have a line there
    # (a request that may wait asks again with GenParams.quick_start off: planner.whole_window)
    quick: bool = False
    entry: Entry | None = None  # the generation it was made from (the work accounting: Entry.served)


@dataclass
class Record:
    """One unit of work for one scheduler tier: the job serving it now (``seq``) and how it ended."""

    seq: int
    state: State  # the job's own state (whether it may run the quick window)
    ended: bool = False
    result: Result | None = None
    error: BaseException | None = None
    at: float = 0.0  # when it ended (time.monotonic())
    entry: Entry | None = None  # the type-through entry its job wrote (None: speculation off, remote hidden)


def entry_backend(entry: Entry) -> str:
    """Which backend wrote a type-through entry (its key ends with the backend's tier)."""
    tail = entry.key[-1] if entry.key else None
    return tail if tail in ("local", "remote") else "local"


def settle_rule(state: State, max_lines: int) -> tuple[str, Budget]:
    """The cursor's line prefix and the context's budget (engine.postprocess.budget_for): what makes a
    streaming variant final. Computed once per request, not per streamed token."""
    line_prefix, _ = split_cursor(state.prefix, state.suffix)
    return line_prefix, budget_for(state.prefix, state.suffix, state.params.language, max_lines=max_lines)


def settled_variants(answer: Answer, line_prefix: str, budget: Budget) -> list[Completion]:
    """The variants of a (still streaming) answer that are final: their generation ended them, or they
    went past what the budget shows (engine.postprocess.settled)."""
    return [c for c in answer.comps if c.text.strip() and
            settled(c.text, c.finish_reason not in CUT_OFF_REASONS, line_prefix, budget)]


def hidden_entry(prefix: str, suffix: str, n: int, key: tuple) -> Entry:
    """A type-through entry outside the store: it answers nothing, but says whether typing agrees with
    the generation streaming into it (TypeThrough.consistent)."""
    anchor, at_start = anchor_of(prefix)
    return Entry(anchor, at_start, suffix, n, key)
