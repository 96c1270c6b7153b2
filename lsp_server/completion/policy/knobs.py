"""Every timing, budget, window and tier constant of the completion service (tests/test_layout.py: nowhere
else). Tests change them here (``monkeypatch.setattr``), so the code reads them as ``knobs.NAME``.
"""

from __future__ import annotations

from engine.text import window

# Text after the cursor copied per keystroke (the engine windows it much tighter: max_suffix_chars).
WINDOW_SUFFIX_CHARS = 8_192
# The engine's prompt windows when no engine is loaded yet (its defaults: engine/text/window.py).
MAX_PREFIX_CHARS, MAX_SUFFIX_CHARS = window.MAX_PREFIX_CHARS, window.MAX_SUFFIX_CHARS
# Request deadlines: what the user waits at most, then gets what exists. Automatic requests are what
# the user waits on while typing; an explicit request or a variants pick can take longer.
AUTOMATIC_BUDGET_S = 2.5
INVOKED_BUDGET_S = 6.0
# A generation no request waits for any more goes on this long at most (its result serves the next ask;
# new work pre-empts it). Long, because the deadline counts the prompt pass too: 10-20 s for a whole window
# on a slow 2-core machine.
JOB_BUDGET_S = 30.0
# Work no request waits for (speculation, idle warm-up) stops this long after the user's last action: the
# CPU is idle again ~2 s after the user stops (issue 13). What it computed stays (KV chunks, what streamed).
IDLE_WORK_S = 1.5
# A generation still streaming is shown once the request has waited this long (before: only a complete
# line). A keystroke comes every ~0.1 s while typing: waiting longer leaves the next key with nothing on
# screen (docs/benchmarks/replay.partial.md).
PARTIAL_AFTER_S = 0.04
# A fresh line shows only whole lines (a part ends mid-statement: issue 16) this long, then what has streamed:
# in these languages a statement's head too (Store.shows; confirmed on Python; TypeScript lost characters: cpu.md).
FRESH_LINE_WHOLE_S, FRESH_LINE_HEAD = 0.12, frozenset({"python"})
# An explicit request's variants after the first: greedy branches (variant temperature 0, engine batch.py).
BRANCHES = 0.0
# How long after a partial answer its completion still refreshes the suggestion on screen.
REFRESH_WITHIN_S = 4.0
SINGLE_LINE_TOKENS = 48
TOKENS_PER_LINE = 24
# A one-line suggestion at the end of a line is generated one line further than it is shown: after Enter,
# that next line is typed through at once (starting from nothing there gave bench_replay's slowest answers).
LOOKAHEAD_TOKENS = SINGLE_LINE_TOKENS + TOKENS_PER_LINE
# Its next line waits until the typist is this near the first line's end, or pauses this long: typing that
# leaves the line sooner would have made every token of it waste (docs/benchmarks/archive: lookahead-hold).
LOOKAHEAD_NEAR_CHARS = 8
LOOKAHEAD_QUIET_S = 0.4
HOLD_POLL_S = 0.02  # how often a held generation looks at the typing again
MAX_TOKENS = 256
TYPING_HISTORY = 9  # keystroke times kept per document
# Work for a pause (the whole window after the quick one had nothing, the capable tier's line) starts after
# this pause at least, longer when the user types slower: a typist who keeps going is served by type-through.
PAUSE_DELAY_S = 0.15
# Edits closer together than this are a burst (a paste replayed, a client catching up), not typing: the
# caches are not asked on every edit of it, and an edit's work waits BURST_HOLD_S (the next edit replaces
# it before it starts) instead of starting a generation the next one stops. A request never waits for it.
BURST_GAP_S = 0.015
BURST_HOLD_S = 0.06
# VS Code asks again on flint/refresh with an explicit trigger (editor.action.inlineSuggest.trigger), the
# only way its API offers: a re-ask this soon after a refresh that followed an automatic answer is that
# automatic request again (one variant, from the store), not the user asking for variants.
REFRESH_ASK_S = 2.0
# Idle time prefills a spot's whole window only once the user has stayed in it this long (the same window
# start): it costs seconds of both cores, and on a shorter visit it was mostly cut short and thrown away
# while the quick window served anyway (docs/benchmarks/archive/replay.stay-val-s27.md).
WARM_AFTER_STAY_S = 20.0
# The local worker, idle this long with nothing new, says so once (events.Idle): the service may hand it the
# active spot's warm-up.
IDLE_WARM_S = 0.5
# A gap between keystrokes this many times the usual interval is a pause, not typing.
PAUSE_FACTOR = 2.0
