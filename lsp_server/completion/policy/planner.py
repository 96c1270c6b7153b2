"""The planner: what to generate for a cursor and when, as plain data from pure functions (no threads, no
model, no LSP types). ``state_at`` is the work for a cursor; ``keystroke``, ``moved``, ``waiting`` and
``follow_ups`` are what the service and the schedulers carry out; the timing knobs are knobs.py's.
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
    """A one-line suggestion's generation with its look-ahead line, from its parameters (an entry's
    ``key[:2]``): no block asks for (72, 2) (k lines ask for 24 * (k + 1) tokens, k + 1 lines)."""
    return max_lines == 2 and max_tokens == knobs.LOOKAHEAD_TOKENS


def holds_lookahead(params: GenParams, text: str, typed: int, quiet_s: float) -> bool:
    """Does a look-ahead generation wait before its next line? ``text``: what it wrote after its cursor;
    ``typed``: characters of it the user typed since; ``quiet_s``: since the user's last action."""
    end = text.find("\n")
    return is_lookahead(params.max_tokens, params.max_lines) and end >= 0 and \
        end - typed > knobs.LOOKAHEAD_NEAR_CHARS and quiet_s < knobs.LOOKAHEAD_QUIET_S


def lookahead_for_block(entry: Entry, state: State) -> bool:
    """A look-ahead line serving a state that wants a block (after Enter): shown at once, but it does not
    stand for the block a generation there would write."""
    return state.mode == "multi" and len(entry.key) > 1 and is_lookahead(entry.key[0], entry.key[1])


def kept_through_edit(tier: str, job: Job, current: State, agrees: bool) -> bool:
    """Does a job made for an older revision still serve the new state ``current``? ``agrees``: it runs and
    what it streamed agrees with the text typed since."""
    if not agrees or not isinstance(job.handle, Entry):
        return False
    # a local one still in its prompt pass has written nothing the typing could agree with: the newest state
    # starts instead, on the KV this one computed (a keystroke appends to it). A remote one is kept: starting
    # again there costs a whole round trip
    return tier != "local" or job.handle.max_len > 0 or (current.prefix, current.suffix) == \
        (job.state.prefix, job.state.suffix)


def reasks_refresh(mark: tuple[int, float, bool] | None, version: int, now: float) -> bool:
    """Is an explicit request at ``version`` the client asking again on a flint/refresh? ``mark``: (version
    refreshed, when, whether the refreshed answer was an automatic request's)."""
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
    # no deadline here: the budget starts when the job runs. A cold spot is answered from the quick first
    # window (as good as the whole one: docs/benchmarks/layout.md; the whole one's prompt pass took 30-45 s
    # on a slow CPU). An explicit request sizes each variant by the context (engine postprocess.budget_for)
    return GenParams(max_tokens=max_tokens, max_lines=max_lines, n=max(1, min(n, s.max_variants)),
                     quick_start=s.speculation, auto_budget=invoked and s.multiline == "auto",
                     language=language or None, guidance=s.guidance, doc=doc if s.guidance else None)


def state_at(settings: Settings, uri: str, revision: int, offset: int, prefix: str, suffix: str, *,
             invoked: bool, remote_ready: bool, n: int | None = None, variants: bool = False,
             language: str | None = None, doc: DocRef | None = None) -> State:
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
    """The same work on the engine's whole window only: where the quick first window had nothing (a short
    window misses the code that decides its lines: docs/benchmarks/served.vnni.md)."""
    if not state.params.quick_start:
        return state
    return replace(state, params=replace(state.params, quick_start=False))


@dataclass(frozen=True)
class Waiting:
    """How a request that came at ``since`` waits: until ``deadline``; shown what has streamed ``partial_after``
    s after it came (None: the end), whole lines only until ``whole_lines_s`` after it; its generation runs
    ``job_budget`` s once started, goes on when the request leaves if ``detachable``; ``item_one``: variants
    show the automatic request's line first (explicit.greedy_first)."""

    deadline: float
    partial_after: float | None
    since: float = 0.0
    whole_lines_s: float = 0.0
    job_budget: float = knobs.JOB_BUDGET_S
    detachable: bool = False
    item_one: bool = False


def on_fresh_line(state: State) -> bool:
    """Nothing typed yet on the cursor's line (after Enter): whole lines first (issue 16), then Store.shows' head."""
    return not split_cursor(state.prefix, state.suffix)[0].strip()


def waiting(settings: Settings, state: State, since: float, *, invoked: bool, remote: bool = False,
            budget_s: float | None = None) -> Waiting:
    """An explicit request waits for the whole suggestion; one made as the user types is shown what has
    streamed after knobs.PARTIAL_AFTER_S, on a fresh line whole lines until knobs.FRESH_LINE_WHOLE_S (issue
    16). Speculation off: the model's answer or nothing, within the budget."""
    budget = budget_s if budget_s is not None else knobs.INVOKED_BUDGET_S if invoked else knobs.AUTOMATIC_BUDGET_S
    if not settings.speculation:
        return Waiting(since + budget, None, since, job_budget=budget)
    fresh_line = not invoked and on_fresh_line(state)
    return Waiting(since + budget, budget if invoked else knobs.PARTIAL_AFTER_S, since,
                   whole_lines_s=knobs.FRESH_LINE_WHOLE_S if fresh_line else 0.0,
                   job_budget=max(budget, settings.remote_timeout_ms / 1000) if remote else knobs.JOB_BUDGET_S,
                   detachable=not invoked, item_one=invoked and state.params.n > 1 and not remote)


@dataclass(frozen=True)
class FollowUps:
    """What follows an answer: a flint/refresh once the whole suggestion is there, watched ``watch_s`` s
    (``greedy``: the automatic line is enough); ``whole``: the whole window runs where the quick one had
    nothing."""

    watch_s: float | None = None
    greedy: bool = False
    whole: bool = False


def follow_ups(settings: Settings, *, invoked: bool, shown: bool, complete: bool, quick: bool) -> FollowUps:
    """The follow-ups of an answer: ``shown`` (a suggestion), ``complete`` (nothing more coming), ``quick``
    (empty from the quick window). Nothing is generated
    ahead where accepting leads: the look-ahead line covers it, and such futures served almost nothing
    (docs/benchmarks/archive/replay.nofut-val-s30.md)."""
    if not settings.speculation:
        return FollowUps()
    if shown:
        # an explicit request's other variants may need the whole prompt pass: refreshed when done
        watch = None if complete else knobs.JOB_BUDGET_S if invoked else knobs.REFRESH_WITHIN_S
        return FollowUps(watch_s=watch)
    if quick:
        return FollowUps(whole=True)
    if not complete:
        # nothing yet at a fresh spot (the prompt is still being read): the generation goes on and the
        # client hears flint/refresh when it has something
        return FollowUps(watch_s=knobs.JOB_BUDGET_S, greedy=invoked)
    return FollowUps()


def speculation_tier(settings: Settings, state: State, *, remote: bool) -> tuple[str, float]:
    """Where a state's speculative generation runs, with its budget: the capable tier when routed there
    (``remote``: there is one), else the local model."""
    if state.route == routing.REMOTE and remote:
        return "remote", max(settings.remote_timeout_ms / 1000, knobs.JOB_BUDGET_S)
    return "local", knobs.JOB_BUDGET_S


@dataclass(frozen=True)
class Keystroke:
    """What an edit or a cursor move starts: the state work is kept for (``current``; None with speculation
    off), whether its generation starts (``start``), after asking the store (``ask_store``: not in a burst,
    whose last state the request asks), not before ``not_before``."""

    current: State | None
    start: bool = False
    ask_store: bool = True
    not_before: float = 0.0


def keystroke(settings: Settings, state: State | None, *, speculate: bool, burst: bool, now: float) -> Keystroke:
    """An edit that left the user at ``state``: the work starts at once (newest wins: a keystroke appends to
    the KV cache), in a burst after knobs.BURST_HOLD_S. ``speculate``: the client asks as the user types."""
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
    """Does idle time prefill the active spot's whole window (else the context block only)? A context block
    (``contextBudget``) reaches prompts only through that prefill: with one, at once."""
    return settings.speculation and (stayed_s >= knobs.WARM_AFTER_STAY_S or settings.context_budget > 0)


def window(text: str, offset: int, max_prefix: int, previous: int | None) -> tuple[int, str, str]:
    """(window start, prefix, suffix) for a cursor: the start stays put while the user types (KV reuse)."""
    start = window_start(text, offset, max_prefix, previous=previous)
    prefix = convert.normalize_eol(text[start: offset])
    suffix = convert.normalize_eol(text[offset: offset + knobs.WINDOW_SUFFIX_CHARS])
    return start, prefix, suffix


def burst(keystrokes: Sequence[float], now: float) -> bool:
    """Does an edit at ``now`` come faster than typing after the earlier ``keystrokes`` (a paste replayed)?"""
    return bool(keystrokes) and now - keystrokes[-1] < knobs.BURST_GAP_S


def pause_delay(keystrokes: Sequence[float]) -> float:
    """How long until a pause: about twice the user's usual interval between ``keystrokes`` (their times)."""
    times = list(keystrokes)
    intervals = [b - a for a, b in zip(times, times[1:], strict=False)][-8:]
    if not intervals:
        return knobs.PAUSE_DELAY_S
    return max(knobs.PAUSE_DELAY_S, knobs.PAUSE_FACTOR * statistics.median(intervals))

