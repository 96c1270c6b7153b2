"""The planner: what to generate for a cursor and when, as plain data and pure functions (policy, in one place).

No threads, no model, no LSP types. ``state_at`` is the engine's work for a cursor (the prompt window,
single line or block, generation parameters, whether automatic work is worth it, which backend); the plans
say what the service and the schedulers do with it: ``keystroke`` / ``moved`` (what an edit or a cursor move
starts, at once or after a burst), ``waiting`` (a request's deadline, when it is shown what has streamed, its
generation's budget), ``follow_ups`` (what follows an answer); ``burst`` and ``pause_delay`` read the
typing rhythm. knobs.py holds every timing knob: there is no quiet period before work starts (newest wins:
a keystroke appends to the KV cache), requests have deadlines, and a generation still streaming is shown
early.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from engine.cache.typethrough import Entry
from engine.policy import routing
from engine.text.budget import decide_mode, skip_reason
from engine.text.postprocess import split_cursor
from engine.text.window import window_start
from engine.types import DocRef, GenParams
from lsp_server import convert
from lsp_server.completion.jobs import Job, State
from lsp_server.completion.policy import knobs
from lsp_server.settings import Settings


def is_lookahead(max_tokens: int, max_lines: int | None) -> bool:
    """A one-line suggestion's generation with its look-ahead line, from its parameters (entries keep them
    as ``key[:2]``): (72, 2) is no block's (a block of k lines asks for 24 * (k + 1) tokens, k + 1 lines)."""
    return max_lines == 2 and max_tokens == knobs.LOOKAHEAD_TOKENS


def lookahead_for_block(entry: Entry, state: State) -> bool:
    """A look-ahead line serving a state that wants a block (after Enter): shown at once, but it does not
    stand for the block a generation there would write."""
    return state.mode == "multi" and len(entry.key) > 1 and is_lookahead(entry.key[0], entry.key[1])


def kept_through_edit(tier: str, job: Job, current: State, agrees: bool) -> bool:
    """Does a job made for an older revision still serve the document's new state ``current``? ``agrees``:
    it runs and what it streamed so far agrees with the text typed since (TypeThrough.consistent)."""
    if tier == "remote" and job.settings.routing == routing.PAUSE:
        return False  # the pause is over: the capable model leaves both cores to the keystrokes
    if not agrees or not isinstance(job.handle, Entry):
        return False
    # a local one still in its prompt pass has written nothing the typing could agree with: the newest state
    # starts instead, on the KV this one computed (a keystroke appends to it). A remote one is kept: starting
    # again there costs a whole round trip
    return tier != "local" or job.handle.max_len > 0 or (current.prefix, current.suffix) == (job.prefix, job.suffix)


def reasks_refresh(mark: tuple[int, float, bool] | None, version: int, now: float) -> bool:
    """Is an explicit request at document ``version`` the client asking again on a flint/refresh? ``mark``:
    (version refreshed, when, whether the refreshed answer was an automatic request's)."""
    return mark is not None and mark[2] and mark[0] == version and now - mark[1] <= knobs.REFRESH_ASK_S


def gen_params(settings: Settings, mode: str, *, invoked: bool, n: int | None = None,
               lookahead: bool = False, language: str | None = None, doc: DocRef | None = None) -> GenParams:
    """Automatic requests take one greedy variant (the fastest path: prompt-lookup drafts); an explicit
    request or a variants pick takes ``maxVariants`` from one batched pass."""
    s = settings
    if n is None:
        n = s.max_variants if invoked else 1
    if mode == "single":
        max_tokens, max_lines = knobs.SINGLE_LINE_TOKENS, 1
        if lookahead and s.speculation:  # the next line too, for type-through after Enter
            max_tokens, max_lines = knobs.LOOKAHEAD_TOKENS, 2
    else:
        max_tokens = min(knobs.MAX_TOKENS, knobs.TOKENS_PER_LINE * (s.max_lines + 1))
        max_lines = s.max_lines + 1  # +1: a block opened at the cursor starts with a line break
    # no deadline here: the worker starts the time budget when the job starts running. A request at a cold
    # spot, automatic or explicit, is answered from the engine's quick first window (as good as the whole
    # one: docs/benchmarks/layout.md) while idle time prefills the whole window; an explicit request waiting
    # for the whole window's prompt pass waited 30-45 s on a slow CPU.
    # An explicit request sizes each variant by the context (a line mid-code, a body at its end: engine
    # postprocess.budget_for); automatic ones keep the look-ahead line that type-through uses after Enter
    return GenParams(max_tokens=max_tokens, max_lines=max_lines, n=max(1, min(n, s.max_variants)),
                     quick_start=s.speculation,
                     auto_budget=invoked and s.multiline == "auto", language=language or None,
                     guidance=s.guidance, doc=doc if s.guidance else None)


def state_at(settings: Settings, uri: str, revision: int, offset: int, prefix: str, suffix: str, *,
             invoked: bool, remote_ready: bool, n: int | None = None, variants: bool = False,
             language: str | None = None, doc: DocRef | None = None) -> State:
    """The work for a cursor given its (windowed) text before and after."""
    line_prefix, line_suffix = split_cursor(prefix, suffix)
    mode = decide_mode(line_prefix, line_suffix, settings.multiline)
    params = gen_params(settings, mode, invoked=invoked, n=n, lookahead=not line_suffix.strip(), language=language,
                        doc=doc)
    skip = skip_reason(line_prefix, line_suffix, invoked=invoked)
    route = routing.LOCAL  # no capable tier ready: nothing to route
    if remote_ready:
        routes = routing.RouteConfig(settings.routing, frozenset(settings.remote_for))
        route = routing.route(routes, invoked=invoked, variants=variants, multiline=mode == "multi", remote_ready=True)
    if params.n > 1 and route != routing.REMOTE:
        # the local model's variants after item 1 are branches (engine/decoding/batch.py): alternatives
        # that differ from it where its code starts (sampled ones mostly repeated it: issue 34)
        params = replace(params, variant_temperature=knobs.BRANCHES)
    return State(uri, revision, offset, prefix, suffix, mode, params, skip, route=route)


def whole_window(state: State) -> State:
    """The same work on the engine's whole window only: where the quick first window had nothing to show
    (its lines were dropped: a short window misses the code that decides them), a request that may wait
    for the whole window's prompt pass asks that (docs/benchmarks/served.vnni.md)."""
    if not state.params.quick_start:
        return state
    return replace(state, params=replace(state.params, quick_start=False))


@dataclass(frozen=True)
class Waiting:
    """How a request that came at ``since`` (time.monotonic()) waits for its answer: until ``deadline``; what
    has streamed is shown ``partial_after`` seconds after it came (None: nothing before its generation ends), complete
    lines only with ``whole_lines``; its generation runs ``job_budget`` seconds at most once started, and
    goes on as speculation when the request leaves (``detachable``). ``item_one``: an explicit request for
    variants shows the automatic request's line first (explicit.greedy_first)."""

    deadline: float
    partial_after: float | None
    since: float = 0.0
    whole_lines: bool = False
    job_budget: float = knobs.JOB_BUDGET_S
    detachable: bool = False
    item_one: bool = False


def waiting(settings: Settings, state: State, since: float, *, invoked: bool, remote: bool = False,
            budget_s: float | None = None) -> Waiting:
    """An explicit request waits for the whole suggestion; one made as the user types is shown what has
    streamed after knobs.PARTIAL_AFTER_S (the rest of the word or line; type-through extends it), but on a line
    nothing is typed on yet only whole lines: a part would be a statement cut in its middle (issue 16).
    ``remote``: the capable tier's worker (its generation may take the remote timeout). Speculation off:
    the model's answer or nothing, within the request's budget."""
    budget = budget_s if budget_s is not None else knobs.INVOKED_BUDGET_S if invoked else knobs.AUTOMATIC_BUDGET_S
    if not settings.speculation:
        return Waiting(since + budget, None, since, job_budget=budget)
    fresh_line = not invoked and not split_cursor(state.prefix, state.suffix)[0].strip()
    return Waiting(since + budget, budget if invoked else knobs.PARTIAL_AFTER_S, since, whole_lines=fresh_line,
                   job_budget=max(budget, settings.remote_timeout_ms / 1000) if remote else knobs.JOB_BUDGET_S,
                   detachable=not invoked, item_one=invoked and state.params.n > 1 and not remote)


@dataclass(frozen=True)
class FollowUps:
    """What follows an answer that went out: a flint/refresh when the whole suggestion is there, watched ``watch_s`` seconds
    (``greedy``: an explicit request's automatic line is enough); ``whole``: the quick first window had
    nothing here, so the whole window runs (then a refresh if it has a line); ``pause``: routing "pause"
    asks the capable tier for this spot once the user pauses."""

    watch_s: float | None = None
    greedy: bool = False
    whole: bool = False
    pause: bool = False


def follow_ups(settings: Settings, *, invoked: bool, speculate: bool, shown: bool, complete: bool,
               quick: bool) -> FollowUps:
    """The follow-ups of an answer: ``shown`` (it had a suggestion), ``complete`` (nothing more is coming
    for it), ``quick`` (an empty answer from the quick window). ``speculate``: the client asks on its own
    as the user types (routing "pause" serves such a client). None with speculation off.

    Nothing is pre-generated where accepting the suggestion leads: an automatic generation's look-ahead
    line covers it (type-through), and after automatic answers such futures served almost nothing
    (docs/benchmarks/archive/replay.nofut-val-s30.md)."""
    if not settings.speculation:
        return FollowUps()
    pause = not invoked and speculate and settings.routing == routing.PAUSE
    if shown:
        # an explicit request's other variants may need the whole prompt pass: refreshed when done
        watch = None if complete else knobs.JOB_BUDGET_S if invoked else knobs.REFRESH_WITHIN_S
        return FollowUps(watch_s=watch, pause=pause)
    if quick:
        return FollowUps(whole=True, pause=pause)
    if not complete:
        # nothing yet at a fresh spot (the prompt is still being read): the generation goes on and the
        # client hears flint/refresh when it has something
        return FollowUps(watch_s=knobs.JOB_BUDGET_S, greedy=invoked, pause=pause)
    return FollowUps(pause=pause)


def speculation_tier(settings: Settings, state: State, *, remote: bool) -> tuple[str, float]:
    """Where a state's speculative generation runs, with its budget: the capable tier when routed there
    (``remote``: there is one), else the local model."""
    if state.route == routing.REMOTE and remote:
        return "remote", max(settings.remote_timeout_ms / 1000, knobs.JOB_BUDGET_S)
    return "local", knobs.JOB_BUDGET_S


def debounce_s(settings: Settings, invoked: bool) -> float:
    """How long an automatic request waits before it asks (``debounceMs``; 0: newest wins at once)."""
    return settings.debounce_ms / 1000 if settings.debounce_ms and not invoked else 0.0


@dataclass(frozen=True)
class Keystroke:
    """What an edit (or a cursor move) starts: the state the schedulers keep work for (``current``: a
    generation the user types through; None with speculation off); whether the state's own generation
    starts now (``start``), after asking the store (``ask_store``: not in a burst of edits, whose last
    state the request asks), not before ``not_before``."""

    current: State | None
    start: bool = False
    ask_store: bool = True
    not_before: float = 0.0


def keystroke(settings: Settings, state: State | None, *, speculate: bool, burst: bool, now: float) -> Keystroke:
    """An edit that left the user at ``state`` (None: not known). No quiet period: the work starts at once
    (newest wins: a keystroke appends to the KV cache), except in a burst of edits faster than typing (a
    paste replayed, a client catching up), where it waits knobs.BURST_HOLD_S and the next edit replaces it.
    ``speculate``: the client asks on its own as the user types (else nothing starts before it asks)."""
    if not settings.speculation or state is None:
        return Keystroke(None)
    return Keystroke(state, start=speculate and not state.skip, ask_store=not burst,
                     not_before=now + knobs.BURST_HOLD_S if burst else 0.0)


def moved(settings: Settings, state: State) -> Keystroke:
    """The cursor settled somewhere without an edit: that spot's work starts as a keystroke's would."""
    if not settings.speculation:
        return Keystroke(None)
    return Keystroke(state, start=not state.skip)


def warms(settings: Settings, stayed_s: float) -> bool:
    """Does idle time prefill the active spot's whole window (the user ``stayed_s`` in it so far)? Without
    it, idle time admits the context block only. A repository context block (``contextBudget``) reaches
    prompts only through that prefill: with one, idle time warms at once."""
    return settings.speculation and (stayed_s >= knobs.WARM_AFTER_STAY_S or settings.context_budget > 0)


def window(text: str, offset: int, max_prefix: int, previous: int | None) -> tuple[int, str, str]:
    """(window start, prefix, suffix) for a cursor: the start stays put while the user types (KV reuse)."""
    start = window_start(text, offset, max_prefix, previous=previous)
    prefix = convert.normalize_eol(text[start: offset])
    suffix = convert.normalize_eol(text[offset: offset + knobs.WINDOW_SUFFIX_CHARS])
    return start, prefix, suffix


def burst(keystrokes: Sequence[float], now: float) -> bool:
    """Does an edit at ``now`` end a burst of edits faster than typing (a paste replayed), after the
    document's earlier ``keystrokes`` (their times)?"""
    return bool(keystrokes) and now - keystrokes[-1] < knobs.BURST_GAP_S


def pause_delay(keystrokes: Sequence[float]) -> float:
    """How long until a pause: about twice the user's usual interval between ``keystrokes`` (their times)."""
    times = list(keystrokes)
    intervals = [b - a for a, b in zip(times, times[1:], strict=False)][-8:]
    if not intervals:
        return knobs.PAUSE_DELAY_S
    return max(knobs.PAUSE_DELAY_S, knobs.PAUSE_FACTOR * statistics.median(intervals))


def pause_starts(keystrokes: Sequence[float], now: float) -> float:
    """When a pause after the last of ``keystrokes`` begins (never before ``now``; nothing typed yet: ``now``
    plus the default delay)."""
    return max(now, (keystrokes[-1] if keystrokes else now) + pause_delay(keystrokes))
